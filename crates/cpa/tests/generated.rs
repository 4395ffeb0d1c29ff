//! Critical-path analysis checked against the truth of traces the testbed
//! generated (see `tests/data/README.md`): configured one-way delays, a
//! known server delay, and losses the sender's kernel counted.

use std::path::PathBuf;

use vantage_core::Nanos;
use vantage_cpa::{analyze, Analysis, Inputs, Options};

fn data(run: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(run)
}

fn analyze_run(run: &str) -> Analysis {
    let inputs = Inputs {
        server: Some(data(run).join("server.pcap")),
        client: Some(data(run).join("client0.pcap")),
    };
    analyze(&inputs, &Options::default()).unwrap()
}

fn json(run: &str, file: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(data(run).join(file)).unwrap()).unwrap()
}

fn ms(n: Nanos) -> f64 {
    n.as_nanos() as f64 / 1e6
}

#[test]
fn known_server_delay_and_propagation() {
    let analysis = analyze_run("cpa-server-delay");
    let ok = json("cpa-server-delay", "summary.json")["load"]["outcomes"]["ok"]
        .as_u64()
        .unwrap();
    assert_eq!(analysis.transactions.len() as u64, ok);
    let path = &analysis.paths[0];
    for delay in [path.client_to_server, path.server_to_client] {
        let delay = ms(delay.unwrap());
        assert!(
            (delay - 10.0).abs() <= 0.5,
            "propagation {delay:.3} ms, configured 10 ms"
        );
    }
    let mut server: Vec<f64> = analysis
        .transactions
        .iter()
        .map(|t| {
            let p = &t.profile;
            let sum = p.server
                + p.client
                + p.propagation
                + p.network_variation
                + p.loss_timeout
                + p.loss_fast_retransmit;
            assert_eq!(sum, t.duration, "transaction {}", t.number);
            assert!(
                ms(p.server) >= 50.0,
                "transaction {}: server {:.3} ms",
                t.number,
                ms(p.server)
            );
            ms(p.server)
        })
        .collect();
    server.sort_by(f64::total_cmp);
    let median = server[server.len() / 2];
    assert!(
        (median - 50.0).abs() <= 2.5,
        "median server time {median:.3} ms, injected 50 ms ± 5 %"
    );
}

#[test]
fn injected_losses_are_classified_as_the_sender_repaired_them() {
    let analysis = analyze_run("cpa-loss");
    let counters = json("cpa-loss", "server-counters.json");
    let counter = |name: &str| counters[name].as_u64().unwrap();
    let summary = json("cpa-loss", "summary.json");
    let syn_retransmissions: u64 = summary["load"]["syn_retransmissions"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, n)| k.parse::<u64>().unwrap() * n.as_u64().unwrap())
        .sum();
    let found_timeout: u64 = analysis
        .transactions
        .iter()
        .map(|t| u64::from(t.losses.timeout))
        .sum();
    let found_fast: u64 = analysis
        .transactions
        .iter()
        .map(|t| u64::from(t.losses.fast_retransmit))
        .sum();
    assert!(
        found_fast > 0,
        "losses were injected; none found on a critical path"
    );
    assert!(
        found_fast <= counter("TcpExt.TCPFastRetrans"),
        "{found_fast} fast retransmits found"
    );
    let timer_repairs =
        counter("TcpExt.TCPTimeouts") + counter("TcpExt.TCPSynRetrans") + syn_retransmissions;
    assert!(
        found_timeout <= timer_repairs,
        "{found_timeout} time-outs found, {timer_repairs} timer repairs"
    );
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

/// The emulator's drops, read off the two captures: server packets (by
/// client port, sequence number relative to the server's ISN, and length)
/// sent more often than the client received them.
fn injected_drops(run: &str) -> std::collections::HashMap<(u16, i64, u32), u32> {
    use std::collections::HashMap;
    use vantage_trace::{decode, TraceReader};
    let count = |file: &str| {
        let mut isn: HashMap<u16, u32> = HashMap::new();
        let mut seen: HashMap<(u16, i64, u32), u32> = HashMap::new();
        let mut reader = TraceReader::open(data(run).join(file)).unwrap();
        while let Some(packet) = reader.next_packet().unwrap() {
            let Ok(s) = decode(&packet) else { continue };
            if s.source.port != 80 {
                continue;
            }
            let port = s.destination.port;
            if s.flags.syn() {
                isn.insert(port, s.seq);
            }
            let Some(&isn) = isn.get(&port) else { continue };
            if s.payload_len > 0 || s.flags.syn() || s.flags.fin() {
                let relative = i64::from(s.seq.wrapping_sub(isn));
                *seen.entry((port, relative, s.payload_len)).or_default() += 1;
            }
        }
        seen
    };
    let sent = count("server.pcap");
    let received = count("client0.pcap");
    sent.into_iter()
        .filter_map(|(key, n)| {
            let got = received.get(&key).copied().unwrap_or(0);
            (n > got).then_some((key, n - got))
        })
        .collect()
}

/// Every loss on a critical path is a packet the emulator dropped, and
/// every dropped packet whose retransmission the path goes through is
/// charged as a loss: the path's loss arcs and the injected drops agree one
/// to one.
#[test]
fn losses_on_critical_paths_are_exactly_the_injected_drops_they_cross() {
    use vantage_cpa::ArcKind;
    let analysis = analyze_run("cpa-loss");
    let drops = injected_drops("cpa-loss");
    assert!(!drops.is_empty());
    let mut checked = 0;
    for t in &analysis.transactions {
        let port = t.client_port();
        for arc in &t.path {
            let on_server_copy =
                arc.to.departure && arc.to.packet.sender == vantage_cpa::Side::Server;
            let retransmitted = arc.to.packet.retransmission && on_server_copy;
            let key = (port, arc.to.packet.seq, arc.to.packet.payload_len);
            match arc.kind {
                ArcKind::Retransmission(_) => {
                    // The copy before it never reached the client.
                    assert!(
                        drops.contains_key(&key)
                            || arc.from.packet.sender != vantage_cpa::Side::Server,
                        "transaction {}: loss arc at seq {} but the emulator dropped no copy of it",
                        t.number,
                        arc.to.packet.seq
                    );
                    checked += 1;
                }
                _ if retransmitted && drops.contains_key(&key) => {
                    // A re-sent packet on the path whose earlier copy was
                    // dropped must be reached through a loss arc.
                    let through_loss = t.path.iter().any(|a| {
                        matches!(a.kind, ArcKind::Retransmission(_)) && a.to.packet == arc.to.packet
                    });
                    assert!(
                        through_loss,
                        "transaction {}: dropped seq {} re-sent on the path without a loss arc",
                        t.number, arc.to.packet.seq
                    );
                }
                _ => {}
            }
        }
    }
    assert!(checked > 0, "no loss arcs on any critical path");
}
