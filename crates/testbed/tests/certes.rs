//! Certes against real Linux clients (root): the Certes issue's "done
//! when" — on a capture of a real server whose full accept queue drops
//! SYNs, the trace-derived estimate (Certes paper, Section 3.2, Eq. 4) and
//! the exact figure (each connection's own SYNs seen in the capture) agree
//! within the paper's worst Table II error (7.4 %), and the exact figure
//! agrees with the clients' own ground truth within 5 %.
//!
//! One minute of real clients is one sample: the estimate's error measured
//! −2.3 %, −3.2 % and −5.3 % in three runs of this test (earlier runs −2.5 to
//! −3.6 %), so a 5 % bound on the estimate failed one run in three without
//! anything changing; the exact figure stayed within 0.3 % of the clients.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use common::*;
use vantage_core::certes::{CertesConfig, PAPER_ALL_TESTS_BOUND};
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_testbed::load::record::Outcome;
use vantage_trace::handshake::{estimate_capture, HandshakeConfig, ServerFilter};

const SPEC: &str = include_str!("../../../scenarios/testbed/certes-accept-queue.toml");

fn relative(a: f64, b: f64) -> f64 {
    (a - b) / b
}

#[test]
fn trace_estimate_exact_figure_and_client_truth_agree() {
    if skip() {
        return;
    }
    let _turn = serial();
    let out = run_spec(SPEC, "certes", Arc::new(AtomicBool::new(false))).unwrap();

    // Ground truth at the clients: first SYN (just before connect) to the
    // last response byte, or to the moment the client gave up.
    let mut truth = Vec::new();
    let mut gave_up = 0;
    for r in &out.records {
        let Some(start) = r.start_ns else { continue };
        let end = match r.outcome {
            Outcome::Ok => r.last_byte_ns,
            Outcome::Frustrated => {
                gave_up += 1;
                r.end_ns
            }
            // A connection the server reset (e.g. its handshake timed out in
            // the full accept queue) ended for its client then.
            Outcome::Reset | Outcome::TimedOut => r.end_ns,
            other => panic!(
                "connection {} ended {other:?}; the spec expects ok, frustrated, reset or timed-out",
                r.id
            ),
        };
        truth.push((end.expect("finished connection has an end") - start) as f64 / 1e9);
    }
    let truth_mean = truth.iter().sum::<f64>() / truth.len() as f64;

    let model = CertesConfig::new(
        Nanos::from_millis(250),
        ClientMix::builtin("linux-6.5").unwrap(),
        Nanos::from_secs(21),
    );
    let handshakes = HandshakeConfig {
        server: Some(ServerFilter {
            ip: Some("10.77.0.2".parse().unwrap()),
            port: Some(80),
        }),
        ..Default::default()
    };
    let capture = estimate_capture(out.dir.join("server.pcap"), &handshakes, &model).unwrap();
    let exact = &capture.exact;
    let estimate = capture.comparison.estimate_mean.unwrap().as_secs_f64();
    let exact_mean = capture.comparison.exact_mean.unwrap().as_secs_f64();
    let dropped: u64 = capture.counters.intervals.iter().map(|c| c.dropped).sum();
    let report = format!(
        "clients: {} transactions ({} gave up), mean {truth_mean:.3} s; exact: {} completed, {} gave up, \
         {} reset, {} unresolved, mean {exact_mean:.3} s; Certes: {:.1} transactions, mean {estimate:.3} s; \
         {dropped} SYNs dropped",
        truth.len(),
        gave_up,
        exact.completed,
        exact.gave_up,
        exact.reset,
        exact.unresolved,
        capture.comparison.estimate_transactions,
    );
    eprintln!("{report}");
    assert!(dropped > 500, "the accept queue must overflow: {report}");
    // Every client transaction is seen by the server's capture: completed,
    // given up, or reset by the server (a failure, left out of the mean).
    assert_eq!(exact.unresolved, 0, "{report}");
    assert_eq!(
        (exact.completed + exact.gave_up + exact.reset) as usize,
        truth.len(),
        "{report}"
    );
    assert!(
        relative(estimate, exact_mean).abs() <= PAPER_ALL_TESTS_BOUND,
        "estimate vs exact: {report}"
    );
    assert!(
        relative(exact_mean, truth_mean).abs() <= 0.05,
        "exact vs clients: {report}"
    );
    assert!(
        relative(estimate, truth_mean).abs() <= PAPER_ALL_TESTS_BOUND,
        "estimate vs clients: {report}"
    );
    std::fs::remove_dir_all(&out.dir).ok();
}
