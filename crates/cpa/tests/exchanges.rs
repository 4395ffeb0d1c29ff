//! Critical paths of scripted connections with known one-way delays,
//! server think times, clock offsets and losses, captured at both ends:
//! the profiles must come out exact to the nanosecond.

mod common;

use common::{ms, Delivery, Exchange, ACK, FIN, PSH, SYN};
use vantage_core::Nanos;
use vantage_cpa::{
    analyze, conserves, Analysis, ArcKind, Inputs, LossRepair, Options, Profile, StaleResends,
    Teardown, Vantage,
};

fn options(teardown: Teardown) -> Options {
    Options {
        teardown,
        ..Options::default()
    }
}

fn dual(exchange: &Exchange, name: &str, options: &Options) -> Analysis {
    let (client, server) = exchange.write(name);
    let analysis = analyze(
        &Inputs {
            client: Some(client.path.clone()),
            server: Some(server.path.clone()),
        },
        options,
    )
    .expect("analysis");
    for t in &analysis.transactions {
        assert!(
            conserves(t),
            "transaction {} does not conserve: {t:#?}",
            t.number
        );
    }
    analysis
}

fn single(exchange: &Exchange, name: &str, vantage: Vantage, options: &Options) -> Analysis {
    let (client, server) = exchange.write(name);
    let inputs = match vantage {
        Vantage::Server => Inputs {
            server: Some(server.path.clone()),
            client: None,
        },
        _ => Inputs {
            client: Some(client.path.clone()),
            server: None,
        },
    };
    let analysis = analyze(&inputs, options).expect("analysis");
    for t in &analysis.transactions {
        assert!(conserves(t), "transaction {} does not conserve", t.number);
    }
    analysis
}

fn profile(
    server: f64,
    client: f64,
    propagation: f64,
    variation: f64,
    timeout: f64,
    fast: f64,
) -> Profile {
    Profile {
        server: Nanos(ms(server)),
        client: Nanos(ms(client)),
        propagation: Nanos(ms(propagation)),
        network_variation: Nanos(ms(variation)),
        loss_timeout: Nanos(ms(timeout)),
        loss_fast_retransmit: Nanos(ms(fast)),
        loss_unknown: Nanos::ZERO,
    }
}

/// HTTP/1.0 as in the paper: SYN, SYN-ACK, GET piggybacked on the
/// handshake ACK, 50 ms of server think time, one data packet, the server
/// closes. 10 ms each way.
fn http10(syn_lost: bool) -> Exchange {
    let mut ex = Exchange::new(10.0, 10.0);
    let shift = if syn_lost {
        ex.client_lost(0.0, 0, 0, SYN, 0);
        1000.0
    } else {
        0.0
    };
    ex.client(shift, 0, 0, SYN, 0)
        .server(shift + 10.0, 0, 1, SYN | ACK, 0)
        .client(shift + 20.0, 1, 1, ACK | PSH, 100)
        .server(shift + 80.0, 1, 101, ACK | PSH, 1000)
        .server(shift + 80.01, 1001, 101, ACK | FIN, 0)
        .client(shift + 90.0, 101, 1001, ACK, 0)
        .client(shift + 90.5, 101, 1002, ACK | FIN, 0)
        .server(shift + 100.6, 1002, 102, ACK, 0);
    ex
}

#[test]
fn server_think_time_and_propagation_are_exact() {
    let ex = http10(false);
    let analysis = dual(&ex, "think", &options(Teardown::Never));
    assert_eq!(analysis.transactions.len(), 1);
    let t = &analysis.transactions[0];
    assert_eq!(t.vantage, Vantage::Both);
    assert_eq!(t.start, Nanos(ex.at(0.0)));
    assert_eq!(t.duration, Nanos(ms(90.0)));
    assert_eq!(t.profile, profile(50.0, 0.0, 40.0, 0.0, 0.0, 0.0));
    assert_eq!(t.critical_path_packets, 4);
    assert_eq!(t.response_bytes, 1000);
    assert_eq!(t.request_bytes, 100);
    assert_eq!(t.client_port(), 40_000);
    assert_eq!(t.phases.setup, Nanos(ms(20.0)));
    assert_eq!(t.phases.request, Nanos(ms(10.0)));
    assert_eq!(t.phases.response, Nanos(ms(60.0)));
    assert!(
        t.verdict
            .starts_with("50 ms server first-byte delay = 56 %"),
        "{}",
        t.verdict
    );
    let offset = analysis.clock_offset.expect("two captures");
    assert_eq!(offset.server_minus_client_ns, 0);
    // The four arc kinds of the handshake, request and response.
    let kinds: Vec<ArcKind> = t.path.iter().map(|arc| arc.kind).collect();
    assert_eq!(
        kinds,
        vec![
            ArcKind::Transit,
            ArcKind::AckTrigger,
            ArcKind::Transit,
            ArcKind::Application,
            ArcKind::Transit,
            ArcKind::Application,
            ArcKind::Transit,
        ]
    );
}

#[test]
fn the_tear_down_of_figure_2_is_profiled_when_the_server_closes() {
    let ex = http10(false);
    let analysis = dual(&ex, "teardown", &options(Teardown::Prompt));
    let t = &analysis.transactions[0];
    assert!(t.flags.teardown);
    // FIN (server) 0.01 ms after the data, client FIN 0.49 ms after the
    // server's arrived, server ACK 0.1 ms after the client's FIN.
    assert_eq!(t.duration, Nanos(ms(110.6)));
    assert_eq!(t.profile, profile(50.11, 0.49, 60.0, 0.0, 0.0, 0.0));
    assert_eq!(t.phases.teardown, Nanos(ms(30.6)));
    assert_eq!(t.critical_path_packets, 7);
    let never = dual(&ex, "teardown-never", &options(Teardown::Never));
    assert_eq!(never.transactions[0].duration, Nanos(ms(90.0)));
}

#[test]
fn a_one_second_syn_time_out_is_loss_by_time_out() {
    let ex = http10(true);
    let analysis = dual(&ex, "syn-timeout", &options(Teardown::Never));
    let t = &analysis.transactions[0];
    assert_eq!(t.start, Nanos(ex.at(0.0)), "the first (lost) SYN starts it");
    assert_eq!(t.duration, Nanos(ms(1090.0)));
    assert_eq!(t.profile, profile(50.0, 0.0, 40.0, 0.0, 1000.0, 0.0));
    assert_eq!(t.losses.timeout, 1);
    assert_eq!(t.losses.fast_retransmit, 0);
    assert_eq!(t.verdict, "1.0 s SYN time-out = 92 %");
    assert_eq!(t.path[0].kind, ArcKind::Retransmission(LossRepair::Timeout));
}

#[test]
fn a_server_capture_alone_places_the_client_half_a_round_trip_away() {
    let ex = http10(false);
    for vantage in [Vantage::Server, Vantage::Client] {
        let analysis = single(
            &ex,
            &format!("single-{vantage:?}"),
            vantage,
            &options(Teardown::Never),
        );
        let t = &analysis.transactions[0];
        assert_eq!(t.vantage, vantage);
        assert_eq!(t.duration, Nanos(ms(90.0)), "{vantage:?}");
        assert_eq!(
            t.profile,
            profile(50.0, 0.0, 40.0, 0.0, 0.0, 0.0),
            "{vantage:?}"
        );
        assert_eq!(t.propagation_used, [Nanos(ms(10.0)); 2]);
        assert_eq!(analysis.approximations.len(), 1);
        assert!(analysis.approximations[0].starts_with("single vantage"));
        assert!(analysis.clock_offset.is_none());
    }
}

/// Asymmetric paths (10 ms out, 30 ms back) and a server clock 5 s ahead.
fn skewed() -> Exchange {
    let mut ex = Exchange::new(10.0, 30.0);
    ex.server_clock_offset_ns = 5_000_000_000;
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(40.0, 1, 1, ACK | PSH, 100)
        .server(100.0, 1, 101, ACK | PSH, 1000)
        .client(130.0, 101, 1001, ACK, 0);
    ex
}

#[test]
fn a_given_clock_offset_recovers_asymmetric_propagation() {
    let ex = skewed();
    let given = Options {
        clock_offset: Some(5_000_000_000),
        ..options(Teardown::Never)
    };
    let analysis = dual(&ex, "offset-given", &given);
    let t = &analysis.transactions[0];
    assert_eq!(t.propagation_used, [Nanos(ms(10.0)), Nanos(ms(30.0))]);
    assert_eq!(t.duration, Nanos(ms(130.0)));
    assert_eq!(t.profile, profile(50.0, 0.0, 80.0, 0.0, 0.0, 0.0));
    let offset = analysis.clock_offset.unwrap();
    assert!(!offset.estimated);
    let path = &analysis.paths[0];
    assert_eq!(path.client_to_server, Some(Nanos(ms(10.0))));
    assert_eq!(path.server_to_client, Some(Nanos(ms(30.0))));
}

#[test]
fn the_clock_offset_is_estimated_from_minimum_one_way_delays() {
    let ex = skewed();
    let analysis = dual(&ex, "offset-estimated", &options(Teardown::Never));
    let offset = analysis.clock_offset.unwrap();
    assert!(offset.estimated);
    // Symmetric propagation assumed: 5 s + (10 ms − 30 ms) / 2.
    assert_eq!(offset.server_minus_client_ns, 5_000_000_000 - 10_000_000);
    let t = &analysis.transactions[0];
    assert_eq!(t.propagation_used, [Nanos(ms(20.0)); 2]);
    // The round trips are the same, so the profile's sums are too.
    assert_eq!(t.duration, Nanos(ms(130.0)));
    assert_eq!(t.profile, profile(50.0, 0.0, 80.0, 0.0, 0.0, 0.0));
}

/// A response of ten 1000-byte segments in the initial window; the third
/// is lost and repaired by a fast retransmit (three duplicate ACKs) or,
/// when `retransmit_at` is late, by the timer despite the duplicates.
fn lossy(retransmit_at: f64) -> Exchange {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(20.0, 1, 1, ACK | PSH, 100);
    for k in 1..=10u32 {
        let at = 30.0 + f64::from(k - 1) * 0.1;
        let seq = 1 + (k - 1) * 1000;
        if k == 3 {
            ex.server_lost(at, seq, 101, ACK, 1000);
        } else {
            ex.server(at, seq, 101, ACK, 1000);
        }
    }
    for k in [1u32, 2, 4, 5, 6, 7, 8, 9, 10] {
        let at = 40.0 + f64::from(k - 1) * 0.1;
        let ack = if k <= 2 { 1 + k * 1000 } else { 2001 };
        ex.client(at, 101, ack, ACK, 0);
    }
    ex.server(retransmit_at, 2001, 101, ACK, 1000).client(
        retransmit_at + 10.0,
        101,
        10_001,
        ACK,
        0,
    );
    ex
}

#[test]
fn three_duplicate_acks_make_a_fast_retransmit_loss() {
    let ex = lossy(50.5);
    let analysis = dual(&ex, "fast-retransmit", &options(Teardown::Never));
    let t = &analysis.transactions[0];
    assert_eq!(t.duration, Nanos(ms(60.5)));
    // Lost packet sent at 30.2 ms, re-sent at 50.5 ms.
    assert_eq!(t.profile, profile(0.2, 0.0, 40.0, 0.0, 0.0, 20.3));
    assert_eq!(t.losses.fast_retransmit, 1);
    assert_eq!(t.losses.timeout, 0);
    assert_eq!(t.flags.hidden_timeouts, 0);
    assert_eq!(t.response_bytes, 10_000);
}

#[test]
fn a_late_retransmission_after_three_duplicates_is_a_hidden_time_out() {
    let ex = lossy(400.0);
    let analysis = dual(&ex, "hidden-timeout", &options(Teardown::Never));
    let t = &analysis.transactions[0];
    assert_eq!(t.duration, Nanos(ms(410.0)));
    assert_eq!(t.profile, profile(0.2, 0.0, 40.0, 0.0, 369.8, 0.0));
    assert_eq!(t.losses.timeout, 1);
    assert_eq!(t.flags.hidden_timeouts, 1);
    assert_eq!(analysis.stats.hidden_timeouts, 1);
}

#[test]
fn a_coarse_time_out_in_the_response_is_loss_by_time_out() {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(20.0, 1, 1, ACK | PSH, 100)
        .server(30.0, 1, 101, ACK, 1000)
        .server_lost(30.1, 1001, 101, ACK, 1000)
        .client(40.0, 101, 1001, ACK, 0)
        .server(330.1, 1001, 101, ACK, 1000)
        .client(340.1, 101, 2001, ACK, 0);
    for vantage in [Vantage::Both, Vantage::Server] {
        let analysis = match vantage {
            Vantage::Both => dual(&ex, "timeout", &options(Teardown::Never)),
            _ => single(&ex, "timeout-server", vantage, &options(Teardown::Never)),
        };
        let t = &analysis.transactions[0];
        assert_eq!(t.duration, Nanos(ms(340.1)), "{vantage:?}");
        assert_eq!(
            t.profile,
            profile(0.1, 0.0, 40.0, 0.0, 300.0, 0.0),
            "{vantage:?}"
        );
        assert_eq!(t.losses.timeout, 1);
        assert!(
            t.verdict.starts_with("300 ms response time-out = 88 %"),
            "{}",
            t.verdict
        );
    }
}

#[test]
fn acks_liberate_the_rounds_after_an_inferred_initial_window_of_four() {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(20.0, 1, 1, ACK | PSH, 100);
    let segment = |k: u32| 1 + (k - 1) * 1000;
    for k in 1..=4u32 {
        ex.server(30.0 + f64::from(k - 1) * 0.1, segment(k), 101, ACK, 1000);
    }
    for k in 1..=4u32 {
        let at = 40.0 + f64::from(k - 1) * 0.1;
        ex.client(at, 101, 1 + k * 1000, ACK, 0);
        // Each ACK arrives 10 ms later and releases two segments.
        for j in [2 * k + 3, 2 * k + 4] {
            ex.server(at + 10.0, segment(j), 101, ACK, 1000);
        }
    }
    for k in 5..=12u32 {
        ex.client(60.0 + f64::from(k) * 0.1, 101, 1 + k * 1000, ACK, 0);
    }
    let analysis = dual(&ex, "rounds", &options(Teardown::Never));
    let t = &analysis.transactions[0];
    assert_eq!(t.initial_window[1], 4);
    assert_eq!(t.flags.beyond_window, 0);
    // Segment 12 left at 50.3 ms on the ACK of segment 4 (sent 30.3 ms).
    assert_eq!(t.duration, Nanos(ms(60.3)));
    assert_eq!(t.profile, profile(0.3, 0.0, 60.0, 0.0, 0.0, 0.0));
    assert_eq!(t.critical_path_packets, 6);
    let kinds: Vec<ArcKind> = t.path.iter().rev().take(5).map(|arc| arc.kind).collect();
    assert_eq!(
        kinds,
        vec![
            ArcKind::Transit,
            ArcKind::Liberation,
            ArcKind::Transit,
            ArcKind::AckTrigger,
            ArcKind::Transit,
        ]
    );
}

#[test]
fn persistent_connections_give_one_profile_per_request() {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .starting(b"GET /a HTTP/1.1\r\n")
        .client(20.0, 1, 1, ACK | PSH, 100)
        .starting(b"HTTP/1.1 200 OK\r\n")
        .server(40.0, 1, 101, ACK | PSH, 500)
        .client(50.0, 101, 501, ACK, 0)
        .starting(b"GET /b HTTP/1.1\r\n")
        .client(1050.0, 101, 501, ACK | PSH, 100)
        .starting(b"HTTP/1.1 200 OK\r\n")
        .server(1080.0, 501, 201, ACK | PSH, 700)
        .client(1090.0, 201, 1201, ACK, 0)
        // Closed on an idle timer five seconds later.
        .server(6090.0, 1201, 201, ACK | FIN, 0)
        .client(6100.0, 201, 1202, ACK | FIN, 0)
        .server(6110.0, 1202, 202, ACK, 0);
    let always = dual(&ex, "persistent-always", &options(Teardown::Always));
    assert!(always.transactions[1].flags.teardown);
    assert_eq!(always.transactions[1].duration, Nanos(ms(6120.0 - 1050.0)));
    let analysis = dual(&ex, "persistent", &Options::default());
    assert_eq!(analysis.transactions.len(), 2);
    let (first, second) = (&analysis.transactions[0], &analysis.transactions[1]);
    assert_eq!(
        (first.index_in_connection, second.index_in_connection),
        (0, 1)
    );
    assert_eq!(first.duration, Nanos(ms(50.0)));
    assert_eq!(first.profile, profile(10.0, 0.0, 40.0, 0.0, 0.0, 0.0));
    assert_eq!(second.start, Nanos(ex.at(1050.0)));
    assert_eq!(second.duration, Nanos(ms(40.0)));
    assert_eq!(second.profile, profile(20.0, 0.0, 20.0, 0.0, 0.0, 0.0));
    assert_eq!((second.request_bytes, second.response_bytes), (100, 700));
    assert_eq!(second.client_port(), first.client_port());
    assert!(!first.flags.pipelined && !second.flags.pipelined);
    assert!(
        !second.flags.teardown,
        "an idle close is not part of the response time"
    );
}

#[test]
fn a_request_body_after_100_continue_stays_in_its_transaction() {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .starting(b"POST /upload HTTP/1.1\r\n")
        .client(20.0, 1, 1, ACK | PSH, 200)
        .starting(b"HTTP/1.1 100 Continue\r\n")
        .server(30.0, 1, 201, ACK | PSH, 25)
        .client(40.0, 201, 26, ACK | PSH, 1000)
        .starting(b"HTTP/1.1 200 OK\r\n")
        .server(60.0, 26, 1201, ACK | PSH, 300)
        .client(70.0, 1201, 326, ACK, 0);
    let analysis = dual(&ex, "continue", &options(Teardown::Never));
    assert_eq!(analysis.transactions.len(), 1);
    let t = &analysis.transactions[0];
    assert_eq!(t.request_bytes, 1200);
    assert_eq!(t.response_bytes, 325);
    assert_eq!(t.duration, Nanos(ms(70.0)));
}

#[test]
fn pipelined_requests_are_flagged() {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .starting(b"GET /a HTTP/1.1\r\n")
        .client(20.0, 1, 1, ACK | PSH, 100)
        .starting(b"GET /b HTTP/1.1\r\n")
        .client(20.1, 101, 1, ACK | PSH, 100)
        .starting(b"HTTP/1.1 200 OK\r\n")
        .server(40.0, 1, 201, ACK | PSH, 500)
        .client(50.0, 201, 501, ACK, 0);
    let analysis = dual(&ex, "pipelined", &options(Teardown::Never));
    assert_eq!(analysis.transactions.len(), 1);
    assert!(analysis.transactions[0].flags.pipelined);
}

#[test]
fn segmentation_offload_at_the_sender_still_matches_the_receivers_pieces() {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(20.0, 1, 1, ACK | PSH, 100)
        .server_delivered(80.0, (1, 101, ACK | PSH, 4000), Delivery::Pieces(4))
        .client(90.0, 101, 4001, ACK, 0);
    let analysis = dual(&ex, "offload", &options(Teardown::Never));
    let t = &analysis.transactions[0];
    assert_eq!(t.duration, Nanos(ms(90.0)));
    assert_eq!(t.profile, profile(50.0, 0.0, 40.0, 0.0, 0.0, 0.0));
    assert_eq!(t.critical_path_packets, 4);
    assert_eq!(t.flags.unexplained_arcs, 0);
    assert_eq!(t.response_bytes, 4000);
}

#[test]
fn a_packet_the_senders_capture_dropped_is_placed_from_its_arrival() {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client_delivered(20.0, (1, 1, ACK | PSH, 100), Delivery::UnseenBySender)
        .server(80.0, 1, 101, ACK | PSH, 1000)
        .client(90.0, 101, 1001, ACK, 0);
    let analysis = dual(&ex, "capture-drop", &options(Teardown::Never));
    let t = &analysis.transactions[0];
    assert_eq!(t.duration, Nanos(ms(90.0)));
    assert_eq!(t.profile, profile(50.0, 0.0, 40.0, 0.0, 0.0, 0.0));
    assert_eq!(t.flags.unexplained_arcs, 0);
    let request = t
        .path
        .iter()
        .find(|arc| arc.kind == ArcKind::Transit && arc.to.packet.payload_len == 100)
        .unwrap();
    assert!(!request.from.observed, "the request's departure was placed");
}

/// A delayed ACK (40 ms) releases the second segment of a response sent
/// with an initial window of one.
fn delayed_ack() -> Exchange {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(20.0, 1, 1, ACK | PSH, 100)
        .server(30.0, 1, 101, ACK, 1000)
        .client(80.0, 101, 1001, ACK, 0)
        .server(90.0, 1001, 101, ACK | PSH, 1000)
        .client(100.0, 101, 2001, ACK, 0);
    ex
}

#[test]
fn a_delayed_ack_is_client_time_and_single_vantage_calls_it_network_variation() {
    let ex = delayed_ack();
    let one = Options {
        initial_window: Some(1),
        ..options(Teardown::Never)
    };
    let both = dual(&ex, "delayed-ack", &one);
    let t = &both.transactions[0];
    assert_eq!(t.duration, Nanos(ms(100.0)));
    assert_eq!(t.profile, profile(0.0, 40.0, 60.0, 0.0, 0.0, 0.0));
    assert_eq!(t.critical_path_packets, 6);
    // From the server's capture alone the client's turnaround before a pure
    // ACK is unobservable: the approximation counts it as network variation.
    let server = single(&ex, "delayed-ack-server", Vantage::Server, &one);
    let t = &server.transactions[0];
    assert_eq!(t.duration, Nanos(ms(100.0)));
    assert_eq!(t.profile, profile(0.0, 0.0, 60.0, 40.0, 0.0, 0.0));
}

/// One copy of a persistent HTTP/1.1 connection (two requests of 100 and
/// 120 bytes, responses of 500 and 700 bytes, no close) starting at
/// `base` ms: copies with the same addresses and sequence numbers merge
/// into one connection, as `replicate --keep-addresses` makes them.
fn persistent_copy(ex: &mut Exchange, base: f64) {
    ex.client(base, 0, 0, SYN, 0)
        .server(base + 10.0, 0, 1, SYN | ACK, 0)
        .starting(b"GET /a HTTP/1.1\r\n")
        .client(base + 20.0, 1, 1, ACK | PSH, 100)
        .starting(b"HTTP/1.1 200 OK\r\n")
        .server(base + 40.0, 1, 101, ACK | PSH, 500)
        .client(base + 50.0, 101, 501, ACK, 0)
        .starting(b"GET /b HTTP/1.1\r\n")
        .client(base + 100.0, 101, 501, ACK | PSH, 120)
        .starting(b"HTTP/1.1 200 OK\r\n")
        .server(base + 130.0, 501, 221, ACK | PSH, 700)
        .client(base + 140.0, 221, 1201, ACK, 0);
}

#[test]
fn requests_re_sent_over_acknowledged_bytes_are_counted_as_stale() {
    let single = {
        let mut ex = Exchange::new(10.0, 10.0);
        persistent_copy(&mut ex, 0.0);
        ex
    };
    let mut merged = Exchange::new(10.0, 10.0);
    for copy in 0..3 {
        persistent_copy(&mut merged, 1000.0 * f64::from(copy));
    }
    for (exchange, name) in [(&single, "stale-single"), (&merged, "stale-merged")] {
        let (client, server) = exchange.write(name);
        for inputs in [
            Inputs {
                client: None,
                server: Some(server.path.clone()),
            },
            Inputs {
                client: Some(client.path.clone()),
                server: None,
            },
            Inputs {
                client: Some(client.path.clone()),
                server: Some(server.path.clone()),
            },
        ] {
            let analysis = analyze(&inputs, &Options::default()).expect("analysis");
            let connections = analysis.stats.connections_both
                + analysis.stats.connections_server_only
                + analysis.stats.connections_client_only;
            assert_eq!(connections, 1, "{name}: the copies are one connection");
            assert_eq!(analysis.transactions.len(), 2, "{name}");
            let stale = analysis.stats.stale_resends;
            // The later copies neither lower nor hide the first copy's
            // round trip: the profiles are those of one copy (one capture
            // alone too, where Karn's rule once discarded every sample
            // and propagation came out as 0).
            let profiles: Vec<Profile> = analysis.transactions.iter().map(|t| t.profile).collect();
            assert_eq!(
                profiles,
                [
                    profile(10.0, 0.0, 40.0, 0.0, 0.0, 0.0),
                    profile(20.0, 0.0, 20.0, 0.0, 0.0, 0.0)
                ],
                "{name} {inputs:?}"
            );
            let line = vantage_cpa::report::stale_resends_line(&analysis);
            if name == "stale-single" {
                assert_eq!(stale, StaleResends::default());
                assert_eq!(line, None);
            } else {
                assert!(
                    line.as_deref()
                        .is_some_and(|l| l.contains("8 segments — 4 from clients (440 bytes)")),
                    "{line:?}"
                );
                // Copies 2 and 3: two requests and two responses each.
                assert_eq!(
                    stale,
                    StaleResends {
                        client_segments: 4,
                        client_bytes: 2 * (100 + 120),
                        server_segments: 4,
                        server_bytes: 2 * (500 + 700),
                    },
                    "{name} {inputs:?}"
                );
            }
        }
    }
}
