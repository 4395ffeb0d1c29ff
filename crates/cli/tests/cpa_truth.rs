//! Root tests: critical-path analysis checked against truth the testbed
//! knows — configured one-way delays, a server that waits a known time
//! before its first byte, and losses injected by the WAN emulator.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use vantage_core::Nanos;
use vantage_cpa::{analyze, Inputs, Options};
use vantage_sys::privilege::is_root;
use vantage_testbed::run::{self, RunOptions, RunOutput};
use vantage_testbed::spec::TestbedSpec;

/// The two runs take turns: their delays must not disturb each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_spec(text: &str, name: &str, tag_prefix: &str) -> RunOutput {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let spec = TestbedSpec::from_toml(text, name).unwrap();
    let dir = std::env::temp_dir().join(format!("vantage-cpa-truth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = RunOptions {
        dir,
        tag: Some(format!("{tag_prefix}{:x}", std::process::id())),
        watchdog: None,
    };
    run::run(
        &spec,
        text,
        &options,
        Arc::new(AtomicBool::new(false)),
        &|_| {},
    )
    .unwrap()
}

const SERVER_DELAY: &str = include_str!("../../../scenarios/testbed/cpa-server-delay.toml");

fn ms(n: Nanos) -> f64 {
    n.as_nanos() as f64 / 1e6
}

#[test]
fn server_delay_and_propagation_are_attributed_as_configured() {
    if !is_root() {
        eprintln!("skipped: needs root to build the testbed that makes the traces");
        return;
    }
    let out = run_spec(SERVER_DELAY, "cpa-delay", "cd");
    let inputs = Inputs {
        server: Some(out.dir.join("server.pcap")),
        client: Some(out.dir.join("client0.pcap")),
    };
    let analysis = analyze(&inputs, &Options::default()).unwrap();
    assert_eq!(analysis.transactions.len(), out.records.len());
    let path = &analysis.paths[0];
    for (direction, delay) in [
        ("client→server", path.client_to_server),
        ("server→client", path.server_to_client),
    ] {
        let delay = ms(delay.expect("two captures give one-way delays"));
        assert!(
            (delay - 10.0).abs() <= 0.5,
            "{direction}: propagation {delay:.3} ms, configured 10 ms"
        );
    }
    let mut server_ms: Vec<f64> = Vec::new();
    for t in &analysis.transactions {
        let p = &t.profile;
        let sum = p.server
            + p.client
            + p.propagation
            + p.network_variation
            + p.loss_timeout
            + p.loss_fast_retransmit;
        assert_eq!(
            sum, t.duration,
            "transaction {} does not conserve time",
            t.number
        );
        assert!(
            ms(p.server) >= 50.0,
            "transaction {}: server {:.3} ms < the 50 ms it waited",
            t.number,
            ms(p.server)
        );
        server_ms.push(ms(p.server));
    }
    server_ms.sort_by(f64::total_cmp);
    let median = server_ms[server_ms.len() / 2];
    assert!(
        (median - 50.0).abs() <= 2.5,
        "median server time {median:.3} ms, injected 50 ms ± 5 %"
    );
}

const LOSSY: &str = include_str!("../../../scenarios/testbed/cpa-loss.toml");

#[test]
fn injected_losses_on_the_critical_path_are_found_and_classified() {
    if !is_root() {
        eprintln!("skipped: needs root to build the testbed that makes the traces");
        return;
    }
    let out = run_spec(LOSSY, "cpa-loss", "cl");
    let inputs = Inputs {
        server: Some(out.dir.join("server.pcap")),
        client: Some(out.dir.join("client0.pcap")),
    };
    let analysis = analyze(&inputs, &Options::default()).unwrap();
    let wan = out.summary.wan.as_ref().unwrap();
    let injected: u64 = wan.links.iter().map(|l| l.downstream.dropped_loss).sum();
    assert!(
        injected > 0,
        "the emulator injected no loss; nothing to check"
    );
    let found_timeout: u32 = analysis.transactions.iter().map(|t| t.losses.timeout).sum();
    let found_fast: u32 = analysis
        .transactions
        .iter()
        .map(|t| t.losses.fast_retransmit)
        .sum();
    // Each loss found on a critical path is a repair the server's kernel
    // made and counted, by the same mechanism.
    assert!(
        u64::from(found_fast) <= out.summary.server_fast_retransmits,
        "{found_fast} fast-retransmit losses on critical paths, kernel counted {}",
        out.summary.server_fast_retransmits
    );
    // Timer repairs: the server's retransmission time-outs, its SYN-ACK
    // timer, and the clients' SYN timer.
    let syn_retransmissions: u64 = out
        .records
        .iter()
        .filter_map(|r| r.syn_retransmissions)
        .map(u64::from)
        .sum();
    let synack_retransmissions = out.counters.total("TcpExt.TCPSynRetrans");
    let timer_repairs = out.summary.server_timeouts + synack_retransmissions + syn_retransmissions;
    assert!(
        u64::from(found_timeout) <= timer_repairs,
        "{found_timeout} time-out losses on critical paths; kernel time-outs {} + SYN-ACK retransmissions {synack_retransmissions} + client SYN retransmissions {syn_retransmissions}",
        out.summary.server_timeouts
    );
    assert!(
        found_timeout + found_fast > 0,
        "{injected} injected losses, none found on any critical path"
    );
    // A transaction whose path crosses a loss is charged for it, in the
    // category of its repair.
    for t in &analysis.transactions {
        assert_eq!(
            t.losses.timeout > 0,
            t.profile.loss_timeout > Nanos::ZERO,
            "transaction {}",
            t.number
        );
        assert_eq!(
            t.losses.fast_retransmit > 0,
            t.profile.loss_fast_retransmit > Nanos::ZERO,
            "transaction {}",
            t.number
        );
    }
}
