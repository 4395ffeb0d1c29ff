//! Loopback tests of the load generator, the test server and the httperf
//! driver. No root needed; every run is bounded (the longest takes about
//! four seconds, and the tests run in parallel).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use vantage_core::Nanos;
use vantage_testbed::load::client::{self, LoadConfig};
use vantage_testbed::load::httperf::{HttperfConfig, SessionWorkload};
use vantage_testbed::load::{record, ArrivalConfig, ArrivalPattern, ConnectionRecord, Outcome};
use vantage_testbed::server::test_server::{self, ServiceTime, TestServerConfig, TestServerStats};

/// A test server on its own thread, on a free loopback port.
struct RunningServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Result<TestServerStats, test_server::ServerError>>,
}

impl RunningServer {
    fn start(config: TestServerConfig) -> RunningServer {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_sender, ready) = mpsc::channel();
        let thread_stop = stop.clone();
        let thread = thread::spawn(move || {
            test_server::run(
                &config,
                "127.0.0.1:0".parse().unwrap(),
                7,
                &thread_stop,
                &ready_sender,
            )
        });
        let address = ready
            .recv_timeout(Duration::from_secs(5))
            .expect("the test server reports its address");
        RunningServer {
            address,
            stop,
            thread,
        }
    }

    fn finish(self) -> TestServerStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .expect("server thread")
            .expect("server run")
    }
}

fn constant_load(rate: f64, duration_s: f64) -> LoadConfig {
    LoadConfig {
        arrivals: ArrivalConfig {
            duration_s,
            max_connections: 10_000,
            pattern: ArrivalPattern::Constant {
                rate,
                poisson: false,
            },
        },
        frustration_timeout_s: 5.0,
        ..LoadConfig::default()
    }
}

fn run_load(config: &LoadConfig, target: SocketAddr) -> Vec<ConnectionRecord> {
    let stop = AtomicBool::new(false);
    client::run(config, target, 3, 11, &stop).expect("load run")
}

fn millis(from: Option<u64>, to: Option<u64>) -> f64 {
    (to.expect("later timestamp") as f64 - from.expect("earlier timestamp") as f64) / 1e6
}

/// A listening socket that never accepts: with backlog 0 its accept queue
/// holds one connection, and the kernel drops the SYNs of later ones.
fn never_accepting_listener() -> (Socket, SocketAddr) {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
    socket
        .bind(&SockAddr::from(
            "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        ))
        .unwrap();
    socket.listen(0).unwrap();
    let address = socket.local_addr().unwrap().as_socket().unwrap();
    (socket, address)
}

#[test]
fn first_byte_follows_the_configured_delay() {
    let server = RunningServer::start(TestServerConfig {
        first_byte_delay_ms: 50.0,
        response_bytes: 3000,
        ..TestServerConfig::default()
    });
    let records = run_load(&constant_load(20.0, 1.0), server.address);
    let stats = server.finish();
    assert_eq!(records.len(), 20);
    for (index, record) in records.iter().enumerate() {
        assert_eq!(record.id, index as u64);
        assert_eq!(record.client, 3);
        assert_eq!(record.outcome, Outcome::Ok, "{record:?}");
        let delay = millis(record.request_sent_ns, record.first_byte_ns);
        assert!(
            (40.0..=60.0).contains(&delay),
            "first byte after {delay} ms: {record:?}"
        );
        let order = [
            Some(record.scheduled_ns),
            record.start_ns,
            record.connected_ns,
            record.request_sent_ns,
            record.first_byte_ns,
            record.last_byte_ns,
            record.end_ns,
        ];
        assert!(
            order.windows(2).all(|pair| pair[0] <= pair[1]),
            "{record:?}"
        );
        assert_eq!(record.syn_retransmissions, Some(0));
        assert_eq!(record.requests_completed, 1);
        assert!(
            record.bytes_received > 3000 && record.bytes_received < 3300,
            "{record:?}"
        );
        assert!(record.local_port.is_some());
        assert!(record.error.is_empty());
    }
    // Evenly spaced schedule: 50 ms apart.
    assert_eq!(
        records[1].scheduled_ns - records[0].scheduled_ns,
        50_000_000
    );
    assert_eq!(stats.accepted, 20);
    assert_eq!(stats.requests_served, 20);

    let mut csv = Vec::new();
    record::write_csv(&records, &mut csv).unwrap();
    assert_eq!(record::read_csv(csv.as_slice()).unwrap(), records);
    let summary = record::summarize(&records);
    assert_eq!(summary.count(Outcome::Ok), 20);
    let response = summary.client_perceived.unwrap();
    assert!(
        response.p50_s > 0.045 && response.p99_s < 0.2,
        "{response:?}"
    );
    assert_eq!(summary.syn_retransmissions.get(&0), Some(&20));
}

/// SYNs the kernel drops show up as `tcpi_total_retrans` (one per second
/// under `tcp_syn_linear_timeouts`), and the clients give up at the
/// frustration timeout while still in SYN-SENT.
#[test]
fn dropped_syns_are_counted_and_frustrate() {
    let (_listener, address) = never_accepting_listener();
    let mut config = constant_load(20.0, 0.25);
    config.frustration_timeout_s = 2.5;
    let began = Instant::now();
    let records = run_load(&config, address);
    let elapsed = began.elapsed();
    assert_eq!(records.len(), 5);
    assert!(
        elapsed < Duration::from_secs_f64(0.2 + 2.5 + 1.0),
        "run took {elapsed:?}"
    );
    let mut dropped = 0;
    for record in &records {
        assert_eq!(record.outcome, Outcome::Frustrated, "{record:?}");
        let lifetime = millis(record.start_ns, record.end_ns);
        assert!(
            (2490.0..2700.0).contains(&lifetime),
            "gave up after {lifetime} ms"
        );
        if record.connected_ns.is_none() {
            dropped += 1;
            let retransmissions = record.syn_retransmissions.expect("TCP_INFO in SYN-SENT");
            assert!((1..=3).contains(&retransmissions), "{record:?}");
            assert!(record.local_port.is_some(), "port known from connect()");
        } else {
            // Queued by the kernel: the handshake completed, nobody answered.
            assert_eq!(record.syn_retransmissions, Some(0), "{record:?}");
            assert!(record.request_sent_ns.is_some() && record.first_byte_ns.is_none());
        }
    }
    assert!(
        dropped >= 3,
        "only {dropped} connections had their SYNs dropped"
    );
}

/// Certes's CONN-FAIL: a client whose first SYNs were dropped connects on a
/// retransmission, and its response time includes the seconds of backoff.
#[test]
fn retransmitted_syns_are_counted_on_connections_that_succeed() {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_sender, ready) = mpsc::channel();
    let server_stop = stop.clone();
    let server = thread::spawn(move || {
        let config = TestServerConfig {
            backlog: 0,
            ..TestServerConfig::default()
        };
        let server = test_server::TestServer::bind(&config, "127.0.0.1:0".parse().unwrap())?;
        let _ = ready_sender.send(server.local_addr());
        // Listening, but not accepting for 1.5 s: the accept queue holds
        // one connection and the kernel drops the others' SYNs.
        thread::sleep(Duration::from_millis(1500));
        server.serve(1, &server_stop)
    });
    let address = ready.recv_timeout(Duration::from_secs(5)).unwrap();
    let records = run_load(&constant_load(20.0, 0.15), address);
    stop.store(true, Ordering::Relaxed);
    let stats = server.join().unwrap().unwrap();
    assert_eq!(records.len(), 3);
    assert!(
        records.iter().all(|r| r.outcome == Outcome::Ok),
        "{records:?}"
    );
    assert_eq!(stats.accepted, 3);
    let retransmitted: Vec<_> = records
        .iter()
        .filter(|r| r.syn_retransmissions.unwrap_or(0) >= 1)
        .collect();
    assert!(retransmitted.len() >= 2, "{records:?}");
    for record in retransmitted {
        // Dropped at 0 s and at 1 s (nothing accepted before 1.5 s), let in
        // on the retransmission at 2 s (3 s without linear timeouts).
        assert_eq!(record.syn_retransmissions, Some(2), "{record:?}");
        let handshake = millis(record.start_ns, record.connected_ns);
        assert!(
            (1900.0..3200.0).contains(&handshake),
            "connected after {handshake} ms: {record:?}"
        );
        let perceived = record.client_perceived_ns().unwrap() as f64 / 1e6;
        assert!(perceived >= 1500.0, "{record:?}");
    }
}

#[test]
fn kernel_gives_up_after_the_configured_syn_retries() {
    let (_listener, address) = never_accepting_listener();
    let mut config = constant_load(10.0, 0.3);
    config.syn_retries = Some(1);
    config.frustration_timeout_s = 4.0;
    let records = run_load(&config, address);
    assert_eq!(records.len(), 3);
    let timed_out: Vec<_> = records
        .iter()
        .filter(|r| r.outcome == Outcome::TimedOut)
        .collect();
    assert!(timed_out.len() >= 2, "{records:?}");
    for record in timed_out {
        // The kernel gives up when the time its exponential model allots
        // to one retransmission ((2^2 − 1) × 1 s = 3 s) has passed; with
        // tcp_syn_linear_timeouts it re-sends every second meanwhile, so
        // Linux 6.18 sends two retransmissions, not one.
        let retransmissions = record.syn_retransmissions.unwrap_or(0);
        assert!((1..=2).contains(&retransmissions), "{record:?}");
        assert!(record.connected_ns.is_none());
        let lifetime = millis(record.start_ns, record.end_ns);
        assert!(
            (1500.0..3900.0).contains(&lifetime),
            "kernel gave up after {lifetime} ms"
        );
    }
}

#[test]
fn closed_port_is_refused() {
    // Bound but not listening: the kernel answers SYNs with RST.
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
    socket
        .bind(&SockAddr::from(
            "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        ))
        .unwrap();
    let address = socket.local_addr().unwrap().as_socket().unwrap();
    let records = run_load(&constant_load(30.0, 0.1), address);
    assert_eq!(records.len(), 3);
    for record in &records {
        assert_eq!(record.outcome, Outcome::Refused, "{record:?}");
        assert_eq!(record.syn_retransmissions, Some(0));
        assert!(record.connected_ns.is_none() && record.end_ns.is_some());
        assert!(!record.error.is_empty());
    }
}

#[test]
fn stopping_mid_run_keeps_every_record() {
    let server = RunningServer::start(TestServerConfig {
        first_byte_delay_ms: 5000.0,
        ..TestServerConfig::default()
    });
    let mut config = constant_load(40.0, 2.0);
    config.frustration_timeout_s = 10.0;
    let stop = AtomicBool::new(false);
    let began = Instant::now();
    let records = thread::scope(|scope| {
        scope.spawn(|| {
            thread::sleep(Duration::from_millis(500));
            stop.store(true, Ordering::Relaxed);
        });
        client::run(&config, server.address, 0, 1, &stop).unwrap()
    });
    let elapsed = began.elapsed();
    server.finish();
    assert!(
        elapsed < Duration::from_millis(1500),
        "stop took effect after {elapsed:?}"
    );
    assert_eq!(records.len(), 80);
    assert!(records
        .iter()
        .enumerate()
        .all(|(index, r)| r.id == index as u64));
    let summary = record::summarize(&records);
    let aborted = summary.count(Outcome::Aborted);
    let not_started = summary.count(Outcome::NotStarted);
    assert_eq!(aborted + not_started, 80, "{summary}");
    assert!((15..=25).contains(&aborted), "{summary}");
    for record in &records {
        match record.outcome {
            Outcome::Aborted => {
                // Started (usually connected) and cut off before its
                // response, which was 5 s away.
                assert!(
                    record.start_ns.is_some() && record.last_byte_ns.is_none(),
                    "{record:?}"
                )
            }
            _ => assert!(record.start_ns.is_none()),
        }
    }
}

#[test]
fn persistent_connection_serves_every_request() {
    let server = RunningServer::start(TestServerConfig {
        response_bytes: 5000,
        ..TestServerConfig::default()
    });
    let mut config = constant_load(20.0, 0.2);
    config.requests_per_connection = 5;
    let records = run_load(&config, server.address);
    let stats = server.finish();
    assert_eq!(records.len(), 4);
    for record in &records {
        assert_eq!(record.outcome, Outcome::Ok, "{record:?}");
        assert_eq!(record.requests_completed, 5);
        assert!(record.bytes_received > 5 * 5000 && record.bytes_received < 5 * 5300);
    }
    assert_eq!(stats.accepted, 4, "one connection per record");
    assert_eq!(stats.requests_served, 20);
}

#[test]
fn max_concurrent_overflow_is_recorded_not_lost() {
    let server = RunningServer::start(TestServerConfig {
        first_byte_delay_ms: 800.0,
        ..TestServerConfig::default()
    });
    let mut config = constant_load(20.0, 0.5);
    config.max_concurrent = 2;
    let records = run_load(&config, server.address);
    server.finish();
    let outcomes: Vec<Outcome> = records.iter().map(|r| r.outcome).collect();
    let mut expected = vec![Outcome::Ok, Outcome::Ok];
    expected.extend([Outcome::NotStarted; 8]);
    assert_eq!(outcomes, expected);
    assert!(
        records[2].error.contains("max_concurrent"),
        "{:?}",
        records[2]
    );
}

#[test]
fn error_status_is_an_http_error() {
    let server = RunningServer::start(TestServerConfig::default());
    let mut config = constant_load(10.0, 0.1);
    config.path = "/bytes/not-a-number".to_string();
    let records = run_load(&config, server.address);
    let stats = server.finish();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, Outcome::HttpError);
    assert!(records[0].error.contains("400"), "{:?}", records[0]);
    assert_eq!(records[0].requests_completed, 0);
    assert_eq!(stats.bad_requests, 1);
}

#[test]
fn paced_accepts_and_busy_workers_delay_responses() {
    // 20 accepts per second: 21 connections arriving at once are accepted
    // over one second.
    let server = RunningServer::start(TestServerConfig {
        accept_rate: 20.0,
        ..TestServerConfig::default()
    });
    let records = run_load(&constant_load(1000.0, 0.021), server.address);
    let stats = server.finish();
    assert_eq!(records.len(), 21);
    assert!(records.iter().all(|r| r.outcome == Outcome::Ok));
    let first_start = records.iter().filter_map(|r| r.start_ns).min();
    let last_byte = records.iter().filter_map(|r| r.last_byte_ns).max();
    let span = millis(first_start, last_byte);
    assert!(
        (950.0..1400.0).contains(&span),
        "21 paced accepts took {span} ms"
    );
    assert_eq!(stats.accepted, 21);

    // One worker, 100 ms each: five simultaneous requests take 500 ms.
    let server = RunningServer::start(TestServerConfig {
        workers: 1,
        service_time: ServiceTime::Constant { ms: 100.0 },
        ..TestServerConfig::default()
    });
    let records = run_load(&constant_load(1000.0, 0.005), server.address);
    server.finish();
    assert_eq!(records.len(), 5);
    let first_start = records.iter().filter_map(|r| r.start_ns).min();
    let last_byte = records.iter().filter_map(|r| r.last_byte_ns).max();
    let span = millis(first_start, last_byte);
    assert!(
        (490.0..700.0).contains(&span),
        "five serialized requests took {span} ms"
    );
}

fn exchange(address: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = stream.write_all(request);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}

#[test]
fn hostile_requests_get_errors_and_the_server_keeps_serving() {
    let server = RunningServer::start(TestServerConfig {
        idle_timeout_s: 0.5,
        response_bytes: 10,
        ..TestServerConfig::default()
    });
    let address = server.address;
    let mut huge = b"GET / HTTP/1.1\r\nX-Filler: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 100_000));
    let response = exchange(address, &huge);
    assert!(response.starts_with("HTTP/1.1 431 "), "{response:?}");

    let response = exchange(address, b"\x00\x01garbage\xff\r\n\r\n");
    assert!(response.starts_with("HTTP/1.1 400 "), "{response:?}");
    let response = exchange(address, b"GET / HTTP/1.1\r\nbroken header\r\n\r\n");
    assert!(response.starts_with("HTTP/1.1 400 "), "{response:?}");

    // Half a request, then silence: closed after the idle timeout.
    let mut slow = TcpStream::connect(address).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    slow.write_all(b"GET / HT").unwrap();
    let began = Instant::now();
    let mut sink = Vec::new();
    let _ = slow.read_to_end(&mut sink);
    let waited = began.elapsed();
    assert!(sink.is_empty());
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(2),
        "idle connection closed after {waited:?}"
    );

    // Two pipelined requests, then a normal one: all served.
    let response = exchange(
        address,
        b"GET /bytes/3 HTTP/1.1\r\nHost: a\r\n\r\nGET /bytes/4 HTTP/1.1\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        response.matches("HTTP/1.1 200 OK").count(),
        2,
        "{response:?}"
    );
    assert!(response.ends_with("\r\n\r\nabcd"), "{response:?}");
    let response = exchange(address, b"GET / HTTP/1.0\r\n\r\n");
    assert!(
        response.starts_with("HTTP/1.1 200 OK") && response.ends_with("abcdefghij"),
        "{response:?}"
    );

    let stats = server.finish();
    assert_eq!(stats.headers_too_large, 1);
    assert_eq!(stats.bad_requests, 2);
    assert_eq!(stats.idle_timeouts, 1);
    assert_eq!(stats.requests_served, 3);
}

/// What a scripted server does after reading each request.
enum Step {
    Respond(&'static [u8]),
    /// Close with `SO_LINGER` 0: the kernel sends a RST.
    Reset,
}

/// A one-connection server that plays `steps` and reports the client's
/// address.
fn scripted_server(steps: Vec<Step>) -> (SocketAddr, thread::JoinHandle<SocketAddr>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let thread = thread::spawn(move || {
        let (mut stream, peer) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut received = Vec::new();
        for step in steps {
            // Read up to the end of one request header.
            let mut byte = [0u8; 1];
            while !received.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => received.push(byte[0]),
                    _ => return peer,
                }
            }
            received.clear();
            match step {
                Step::Respond(bytes) => stream.write_all(bytes).unwrap(),
                Step::Reset => {
                    Socket::from(stream)
                        .set_linger(Some(Duration::ZERO))
                        .unwrap();
                    return peer;
                }
            }
        }
        peer
    });
    (address, thread)
}

#[test]
fn chunked_keep_alive_from_a_bound_source_address() {
    let chunked: &[u8] =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n";
    let (address, server) = scripted_server(vec![
        Step::Respond(chunked),
        Step::Respond(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"),
    ]);
    let mut config = constant_load(10.0, 0.1);
    config.requests_per_connection = 2;
    config.local_ip = Some("127.0.0.2".parse().unwrap());
    let records = run_load(&config, address);
    let peer = server.join().unwrap();
    assert_eq!(peer.ip().to_string(), "127.0.0.2");
    assert_eq!(Some(peer.port()), records[0].local_port);
    assert_eq!(records[0].outcome, Outcome::Ok, "{:?}", records[0]);
    assert_eq!(records[0].requests_completed, 2);
}

#[test]
fn reset_after_connect_is_a_reset() {
    let (address, server) = scripted_server(vec![Step::Reset]);
    let records = run_load(&constant_load(10.0, 0.1), address);
    server.join().unwrap();
    assert_eq!(records[0].outcome, Outcome::Reset, "{:?}", records[0]);
    assert!(records[0].connected_ns.is_some() && records[0].first_byte_ns.is_none());
}

#[test]
fn arrival_schedules_are_exact_bounded_and_seeded() {
    let constant = ArrivalConfig {
        duration_s: 60.0,
        max_connections: 100_000,
        pattern: ArrivalPattern::Constant {
            rate: 1000.0,
            poisson: false,
        },
    };
    let times = constant.schedule(1).unwrap();
    assert_eq!(times.len(), 60_000);
    assert_eq!(times[1], Nanos::from_millis(1));
    assert!(*times.last().unwrap() < Nanos::from_secs(60));
    assert_eq!(
        constant.schedule(2).unwrap(),
        times,
        "evenly spaced ignores the seed"
    );

    let mwm = ArrivalConfig {
        duration_s: 1024.0,
        max_connections: 1_000_000,
        pattern: ArrivalPattern::Mwm {
            mean: 100.0,
            std_dev: 30.0,
            hurst: 0.8,
            scales: 10,
        },
    };
    let first = mwm.schedule(5).unwrap();
    let rate = first.len() as f64 / 1024.0;
    assert!((rate - 100.0).abs() < 1.0, "MWM mean {rate}");
    assert!(first.windows(2).all(|pair| pair[0] <= pair[1]));
    assert_eq!(mwm.schedule(5).unwrap(), first, "same seed, same schedule");
    assert_ne!(
        mwm.schedule(6).unwrap(),
        first,
        "other seed, other schedule"
    );
    // Bursty: per-second counts vary like the requested σ.
    let mut counts = vec![0f64; 1024];
    for time in &first {
        counts[(time.as_nanos() / 1_000_000_000) as usize] += 1.0;
    }
    let variance = counts.iter().map(|c| (c - rate).powi(2)).sum::<f64>() / 1024.0;
    assert!(variance.sqrt() > 15.0, "σ = {}", variance.sqrt());

    let poisson = ArrivalConfig {
        pattern: ArrivalPattern::Constant {
            rate: 1000.0,
            poisson: true,
        },
        ..constant.clone()
    };
    assert_eq!(poisson.schedule(3).unwrap(), poisson.schedule(3).unwrap());
    assert_ne!(poisson.schedule(3).unwrap(), poisson.schedule(4).unwrap());

    let too_many = ArrivalConfig {
        max_connections: 59_999,
        ..constant
    };
    let error = too_many.schedule(1).unwrap_err().to_string();
    assert!(error.contains("max_connections"), "{error}");
}

#[test]
fn httperf_sessions_against_the_test_server() {
    let program = std::path::Path::new("/usr/bin/httperf");
    if !program.exists() {
        eprintln!("skipped: /usr/bin/httperf is not installed");
        return;
    }
    let server = RunningServer::start(TestServerConfig::default());
    let mut config = HttperfConfig::new("127.0.0.1", server.address.port());
    config.program = program.to_path_buf();
    config.rate = Some(50.0);
    config.timeout_s = Some(5.0);
    config.session = Some(SessionWorkload {
        sessions: 10,
        calls: 3,
        think_s: 0.05,
    });
    let report = config.run(Duration::from_secs(20)).unwrap();
    let stats = server.finish();
    assert_eq!(report.replies, 30);
    assert_eq!(report.reply_status.success_2xx, 30);
    assert_eq!(report.errors.total, 0);
    let session = report.session.unwrap();
    assert_eq!(
        (session.sessions_completed, session.sessions_total),
        (10, 10)
    );
    assert_eq!(stats.requests_served, 30);
}
