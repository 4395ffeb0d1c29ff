//! The WAN emulator on a real testbed network (one client, router, server
//! namespaces): delays measured as TCP connect times, loss measured with
//! UDP, and the emulator's counts checked against what was sent and
//! received. Needs root; skipped with a message otherwise.
//!
//! The tests take a lock so they run one at a time: they measure time, and
//! two of them sharing two cores would disturb each other.

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vantage_sys::iptables::{find as find_iptables, Family};
use vantage_testbed::netns::{Netns, NetnsError};
use vantage_testbed::topology::{Topology, TopologySpec, SERVER_ADDR};
use vantage_testbed::wan::{Emulator, ForwardQueueRule, LinkConfig, LinkRule, WanConfig, WanStats};

static SERIAL: Mutex<()> = Mutex::new(());

/// A topology for one test; deleted (before the lock is released) when
/// dropped, also when the test fails.
struct Testbed {
    topology: Topology,
    _serial: MutexGuard<'static, ()>,
}

fn testbed(test: &str) -> Option<Testbed> {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped: {test} needs root to create network namespaces");
        return None;
    }
    if find_iptables(Family::Ipv4).is_none() {
        eprintln!("skipped: {test} needs iptables to queue forwarded packets");
        return None;
    }
    let serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let topology = Topology::build(&TopologySpec {
        clients: 1,
        tag: format!("wan{}{}", std::process::id(), &test[..1]),
    })
    .expect("build the testbed topology");
    Some(Testbed {
        topology,
        _serial: serial,
    })
}

/// The emulator on its thread in the router namespace; stopped and joined
/// when finished or dropped.
struct RunningEmulator {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<Result<WanStats, String>, NetnsError>>>,
}

impl RunningEmulator {
    fn start(router: &Netns, config: WanConfig, seed: u64) -> RunningEmulator {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let thread_stop = Arc::clone(&stop);
        let handle = router
            .spawn("wan-emulator", move || -> Result<WanStats, String> {
                let setup =
                    Emulator::bind(&config)
                        .map_err(|e| e.to_string())
                        .and_then(|emulator| {
                            ForwardQueueRule::install(config.queue_num)
                                .map(|rule| (emulator, rule))
                                .map_err(|e| e.to_string())
                        });
                let (emulator, rule) = match setup {
                    Ok(ready) => ready,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.clone()));
                        return Err(e);
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let stats = emulator.run(&thread_stop, seed).map_err(|e| e.to_string());
                rule.remove().map_err(|e| e.to_string())?;
                stats
            })
            .expect("spawn the emulator thread");
        let mut running = RunningEmulator {
            stop,
            handle: Some(handle),
        };
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => running,
            Ok(Err(e)) => panic!("emulator did not start: {e}"),
            Err(_) => {
                let outcome = running.join();
                panic!("emulator did not start: {outcome:?}")
            }
        }
    }

    fn join(&mut self) -> Result<WanStats, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.take() {
            None => Err("already joined".into()),
            Some(handle) => match handle.join() {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("emulator thread panicked".into()),
            },
        }
    }

    fn finish(mut self) -> WanStats {
        self.join().expect("emulator run")
    }
}

impl Drop for RunningEmulator {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.join();
        }
    }
}

fn one_client_config(upstream: LinkConfig, downstream: LinkConfig) -> WanConfig {
    WanConfig::new(
        0,
        vec![LinkRule {
            client: "10.78.0.0/16".parse().unwrap(),
            upstream,
            downstream,
        }],
    )
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Receive buffer past `net.core.rmem_max`, so bursts are not lost in the
/// receiving socket (that loss would be blamed on the emulator).
fn force_receive_buffer(socket: &UdpSocket, bytes: i32) {
    // SAFETY: valid descriptor, and a c_int option value with its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_RCVBUFFORCE: {}", std::io::Error::last_os_error());
}

/// What a UDP receiver saw: datagrams, and the arrival instants of the
/// first and last.
struct Received {
    count: u64,
    first: Option<Instant>,
    last: Option<Instant>,
}

/// Counts datagrams on `port` in the server namespace until `sender_done`
/// is set and nothing has arrived for `quiet`, or `limit` has passed.
fn spawn_receiver(
    server: &Netns,
    port: u16,
    sender_done: Arc<AtomicBool>,
    quiet: Duration,
    limit: Duration,
) -> (mpsc::Receiver<()>, JoinHandle<Result<Received, NetnsError>>) {
    let (ready_tx, ready_rx) = mpsc::channel();
    let handle = server
        .spawn("udp-receiver", move || {
            let socket = UdpSocket::bind((SERVER_ADDR, port)).expect("bind the receiver");
            force_receive_buffer(&socket, 16 << 20);
            socket
                .set_read_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            let _ = ready_tx.send(());
            let started = Instant::now();
            let mut received = Received {
                count: 0,
                first: None,
                last: None,
            };
            let mut last_activity = Instant::now();
            let mut buf = [0u8; 2048];
            while started.elapsed() < limit {
                match socket.recv(&mut buf) {
                    Ok(_) => {
                        let now = Instant::now();
                        received.count += 1;
                        received.first.get_or_insert(now);
                        received.last = Some(now);
                        last_activity = now;
                    }
                    Err(_) => {
                        if sender_done.load(Ordering::Relaxed) && last_activity.elapsed() >= quiet {
                            break;
                        }
                    }
                }
            }
            received
        })
        .expect("spawn the receiver");
    (ready_rx, handle)
}

/// Sends `count` datagrams of `payload` bytes from the client namespace,
/// `per_ms` every millisecond. Returns how many were sent.
fn paced_send(client: &Netns, port: u16, count: usize, per_ms: usize, payload: usize) -> usize {
    client
        .run(move || {
            let socket = UdpSocket::bind("0.0.0.0:0").expect("bind the sender");
            let destination = SocketAddr::from((SERVER_ADDR, port));
            let data = vec![0x5au8; payload];
            let started = Instant::now();
            let mut sent = 0;
            for tick in 0..count.div_ceil(per_ms) {
                for _ in 0..per_ms.min(count - sent) {
                    socket.send_to(&data, destination).expect("send a datagram");
                    sent += 1;
                }
                let next = started + Duration::from_millis(tick as u64 + 1);
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            sent
        })
        .expect("sender thread")
}

fn assert_conserved(stats: &WanStats) {
    for link in &stats.links {
        for (name, d) in [("upstream", link.upstream), ("downstream", link.downstream)] {
            assert_eq!(
                d.packets,
                d.released + d.dropped_loss + d.dropped_queue,
                "{} {name}: packets = released + dropped does not hold: {d:?}",
                link.client
            );
        }
    }
}

#[test]
fn connect_time_is_twice_the_one_way_delay() {
    let Some(bed) = testbed("delay: connect_time_is_twice_the_one_way_delay") else {
        return;
    };
    let topology = &bed.topology;
    let listener = topology
        .server
        .run(|| TcpListener::bind((SERVER_ADDR, 7001)))
        .expect("server thread")
        .expect("listen");
    listener.set_nonblocking(true).unwrap();

    for delay_ms in [0.5, 25.0, 75.0] {
        let link = LinkConfig {
            delay_ms,
            ..Default::default()
        };
        let emulator =
            RunningEmulator::start(&topology.router, one_client_config(link.clone(), link), 1);
        let connect_ms: Result<Vec<f64>, String> = topology.clients[0]
            .run(|| {
                let server = SocketAddr::from((SERVER_ADDR, 7001));
                (0..20)
                    .map(|_| {
                        let started = Instant::now();
                        TcpStream::connect_timeout(&server, Duration::from_secs(3))
                            .map(|_| started.elapsed().as_secs_f64() * 1e3)
                            .map_err(|e| format!("connect: {e}"))
                    })
                    .collect()
            })
            .expect("client thread");
        let stats = emulator.finish();
        let mut connect_ms = connect_ms.unwrap();
        // Empty the accept queue for the next round (bounded).
        for _ in 0..100 {
            if listener.accept().is_err() {
                break;
            }
        }
        let median_ms = median(&mut connect_ms);
        eprintln!(
            "one-way delay {delay_ms} ms: median connect {median_ms:.3} ms, \
             release lateness mean {:.1} µs max {:.1} µs",
            stats.release_lateness_mean_us, stats.release_lateness_max_us
        );
        // The emulator never releases early, so no connect beats 2 × delay;
        // scheduling (another process on the two cores) only adds time, so
        // the fastest connect is the one that shows the emulated delay.
        let fastest_ms = connect_ms[0];
        assert!(
            fastest_ms >= 2.0 * delay_ms - 0.05 && fastest_ms <= 2.0 * delay_ms + 1.0,
            "delay {delay_ms} ms: fastest connect {fastest_ms:.3} ms, expected {} to {} ms \
             (all: {connect_ms:?})",
            2.0 * delay_ms,
            2.0 * delay_ms + 1.0
        );
        assert!(!stats.kernel_interfered(), "{stats:?}");
        let link = &stats.links[0];
        assert!(
            link.upstream.packets >= 20 && link.downstream.packets >= 20,
            "{stats:?}"
        );
        assert_conserved(&stats);
    }
}

#[test]
fn random_loss_is_measured_on_udp() {
    let Some(bed) = testbed("loss: random_loss_is_measured_on_udp") else {
        return;
    };
    let topology = &bed.topology;
    let lossy = LinkConfig {
        delay_ms: 1.0,
        loss_pct: 3.0,
        ..Default::default()
    };
    let emulator = RunningEmulator::start(
        &topology.router,
        one_client_config(lossy, LinkConfig::default()),
        7,
    );
    let sender_done = Arc::new(AtomicBool::new(false));
    let (ready, receiver) = spawn_receiver(
        &topology.server,
        7002,
        Arc::clone(&sender_done),
        Duration::from_millis(300),
        Duration::from_secs(15),
    );
    ready
        .recv_timeout(Duration::from_secs(5))
        .expect("receiver ready");
    let sent = paced_send(&topology.clients[0], 7002, 20_000, 20, 32);
    sender_done.store(true, Ordering::Relaxed);
    let received = receiver
        .join()
        .expect("receiver")
        .expect("receiver namespace");
    let stats = emulator.finish();

    let measured_pct = 100.0 * (sent as f64 - received.count as f64) / sent as f64;
    eprintln!(
        "sent {sent}, received {}, loss {measured_pct:.2} %",
        received.count
    );
    assert!(
        (measured_pct - 3.0).abs() <= 0.5,
        "measured loss {measured_pct:.2} %, configured 3 % (± 0.5)"
    );
    let upstream = stats.links[0].upstream;
    assert_eq!(upstream.packets, sent as u64, "{stats:?}");
    assert_eq!(
        upstream.dropped_loss,
        sent as u64 - received.count,
        "every lost datagram was dropped by the emulator, and only those: {stats:?}"
    );
    assert!(!stats.kernel_interfered(), "{stats:?}");
    assert_conserved(&stats);
}

#[test]
fn every_packet_is_released_or_dropped_and_the_bottleneck_paces_releases() {
    let Some(bed) = testbed("conservation: every_packet_is_released_or_dropped") else {
        return;
    };
    let topology = &bed.topology;
    let bottleneck = LinkConfig {
        delay_ms: 2.0,
        loss_pct: 1.0,
        rate_mbit: 8.0,
        queue_packets: 50,
        ..Default::default()
    };
    let emulator = RunningEmulator::start(
        &topology.router,
        one_client_config(bottleneck, LinkConfig::default()),
        3,
    );
    let sender_done = Arc::new(AtomicBool::new(false));
    let (ready, receiver) = spawn_receiver(
        &topology.server,
        7003,
        Arc::clone(&sender_done),
        Duration::from_millis(300),
        Duration::from_secs(15),
    );
    ready
        .recv_timeout(Duration::from_secs(5))
        .expect("receiver ready");
    // 2000 datagrams of 1000 B in 1 s: twice what 8 Mbit/s carries.
    let sent = paced_send(&topology.clients[0], 7003, 2000, 2, 1000);
    sender_done.store(true, Ordering::Relaxed);
    let received = receiver
        .join()
        .expect("receiver")
        .expect("receiver namespace");
    let stats = emulator.finish();

    assert_conserved(&stats);
    assert!(!stats.kernel_interfered(), "{stats:?}");
    let upstream = stats.links[0].upstream;
    assert_eq!(upstream.packets, sent as u64);
    assert_eq!(upstream.released, received.count, "{stats:?}");
    assert!(upstream.dropped_queue > 0, "{stats:?}");
    assert!(upstream.dropped_loss > 0, "{stats:?}");

    // Back-to-back at the bottleneck: one 1028-byte IP packet every
    // 1.028 ms at 8 Mbit/s.
    let span_ms = received
        .last
        .zip(received.first)
        .map(|(last, first)| (last - first).as_secs_f64() * 1e3)
        .expect("datagrams received");
    let expected_ms = (received.count - 1) as f64 * 1028.0 * 8.0 / 8e6 * 1e3;
    eprintln!(
        "sent {sent}, received {} over {span_ms:.1} ms (bottleneck predicts {expected_ms:.1} ms); {stats:?}",
        received.count
    );
    assert!(
        (span_ms - expected_ms).abs() <= 0.05 * expected_ms,
        "releases spanned {span_ms:.1} ms, the bottleneck predicts {expected_ms:.1} ms"
    );
}

#[test]
fn a_full_kernel_queue_fails_open_and_is_counted() {
    let Some(bed) = testbed("overflow: a_full_kernel_queue_fails_open_and_is_counted") else {
        return;
    };
    let topology = &bed.topology;
    let delayed = LinkConfig {
        delay_ms: 20.0,
        ..Default::default()
    };
    // 16 packets fit in the kernel's queue; 10 per ms for 20 ms of delay
    // means about 200 would have to wait.
    let config = WanConfig {
        queue_maxlen: 16,
        ..one_client_config(delayed, LinkConfig::default())
    };
    let emulator = RunningEmulator::start(&topology.router, config, 5);
    let sender_done = Arc::new(AtomicBool::new(false));
    let (ready, receiver) = spawn_receiver(
        &topology.server,
        7004,
        Arc::clone(&sender_done),
        Duration::from_millis(300),
        Duration::from_secs(15),
    );
    ready
        .recv_timeout(Duration::from_secs(5))
        .expect("receiver ready");
    let sent = paced_send(&topology.clients[0], 7004, 1000, 10, 32);
    sender_done.store(true, Ordering::Relaxed);
    let received = receiver
        .join()
        .expect("receiver")
        .expect("receiver namespace");
    let stats = emulator.finish();

    let upstream = stats.links[0].upstream;
    eprintln!("sent {sent}, received {}; {stats:?}", received.count);
    assert_eq!(
        received.count, sent as u64,
        "fail-open must not lose packets"
    );
    assert!(
        stats.kernel_overflows > 0,
        "overflow not counted: {stats:?}"
    );
    assert!(
        upstream.packets < sent as u64,
        "some packets should have bypassed the emulator: {stats:?}"
    );
    assert_eq!(upstream.released, upstream.packets, "{stats:?}");
    assert!(stats.max_held >= 16, "{stats:?}");
}
