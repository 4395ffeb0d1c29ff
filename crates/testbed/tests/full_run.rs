//! Root test: the example nginx run — HTTP/1.0 at 1,000 connections/s for
//! 60 s through a 25 ms WAN — completes with every connection accounted
//! for, at the clients, in nginx's log and in the emulator.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use common::*;
use vantage_testbed::load::record::Outcome;

#[test]
fn sixty_seconds_at_1000_connections_per_second_through_a_25_ms_wan() {
    if skip() {
        return;
    }
    let spec = include_str!("../../../scenarios/testbed/nginx-wan.toml");
    let out = run_spec(spec, "nginx-wan", Arc::new(AtomicBool::new(false))).unwrap();
    let s = &out.summary;
    eprintln!("{}", vantage_testbed::run::render_summary(s));
    assert_eq!(
        out.records.len(),
        60_000,
        "one record per scheduled connection"
    );
    let ok = s.load.count(Outcome::Ok);
    assert_eq!(ok, 60_000, "outcomes: {:?}", s.load.outcomes);
    assert_eq!(
        s.nginx_requests,
        Some(ok),
        "nginx logged every request the clients completed"
    );
    assert_eq!(s.passive_opens, 60_000);
    let wan = s.wan.as_ref().unwrap();
    assert_eq!(wan.kernel_overflows, 0, "the kernel queue never overflowed");
    assert!(
        !wan.kernel_interfered(),
        "every packet went through the emulator: {wan:?}"
    );
    assert_eq!(s.capture_kernel_drops, 0);
    // 50 ms RTT: handshake then request/response, so at least two RTTs.
    let perceived = s.load.client_perceived.as_ref().unwrap();
    assert!(
        perceived.p50_s >= 0.100 && perceived.p50_s < 0.150,
        "p50 {}",
        perceived.p50_s
    );
    assert!(namespaces_of(&tag("ng")).is_empty());
}
