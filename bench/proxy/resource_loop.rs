//! The `[resources]` control loop over many real loopback connections:
//! CPU time of one interval (reading `TCP_INFO` and `SO_MEMINFO`, E-ATBT,
//! the receive tuners, the connection manager, re-sizing), measured with
//! the thread's CPU clock. See bench/proxy/README-resources.md.
//!
//! The worst intervals are timed end to end over upstream connections
//! whose receive pool binds: one that cuts the pool for memory pressure
//! (every buffer set smaller), and the two after it, where the pool
//! regrows and every buffer moves (bounded, the rest deferred).
//!
//! Usage: cargo bench -p vantage-bench --bench resource_loop [-- CONNECTIONS INTERVALS]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use vantage_live::proxy::config::{Marks, ResourceMode, ResourcesConfig};
use vantage_live::proxy::metrics::ResourceMetrics;
use vantage_live::proxy::resources::{thread_cpu_seconds, KernelLimits, Resources, TrackedStream};

fn raise_descriptor_limit(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct given.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        let raised = libc::rlimit {
            rlim_cur: wanted.max(limit.rlim_cur),
            rlim_max: wanted.max(limit.rlim_max),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// How the timed intervals read upstream connections: from the
/// `sock_diag` dump, by `getsockopt` in its place, and dumps that failed.
#[derive(Default)]
struct UpstreamReads {
    dumped: usize,
    fallback: usize,
    failures: usize,
    others: usize,
}

impl UpstreamReads {
    fn add(&mut self, report: &vantage_live::proxy::resources::IntervalReport) {
        self.dumped += report.upstream_reads_dumped;
        self.fallback += report.upstream_reads_fallback;
        self.failures += report.upstream_dump_failures;
        self.others += report.upstream_dump_others;
    }
}

impl std::fmt::Display for UpstreamReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "; upstream reads: {} from the dump ({} other sockets' replies), {} by getsockopt in its place, {} dumps failed",
            self.dumped, self.others, self.fallback, self.failures
        )
    }
}

/// A failed set-up or read, with what failed.
type BenchResult<T> = Result<T, String>;

fn run(
    label: &str,
    config: ResourcesConfig,
    clients: usize,
    upstreams: usize,
    intervals: usize,
) -> BenchResult<()> {
    let limits = KernelLimits::read().map_err(|e| format!("kernel limits: {e}"))?;
    let resources = Arc::new(
        Resources::new(config, limits, clients + 1, ResourceMetrics::default())
            .map_err(|e| format!("resources: {e}"))?,
    );
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let address = listener.local_addr().map_err(|e| format!("address: {e}"))?;
    let mut peers = Vec::with_capacity(clients + upstreams);
    let mut tracked: Vec<TrackedStream<TcpStream>> = Vec::with_capacity(clients + upstreams);
    for i in 0..clients + upstreams {
        // A client connection is the accepted end; an upstream one, the
        // connecting end (its remote port the listener's, as a proxy's
        // upstream connections have their servers' few ports).
        let (own, peer) = exchanged_pair(&listener, address, i >= clients)?;
        let stream = if i < clients {
            let t = resources.track_client(own, Arc::new(tokio::sync::Notify::new()));
            if let Some(events) = t.events() {
                events.request_started();
                // One in five idle keep-alive connections.
                if i % 5 == 0 {
                    events.response_completed();
                }
            }
            t
        } else {
            resources.track_upstream(own)
        };
        tracked.push(stream);
        peers.push(peer);
    }
    // One warm-up interval (first estimates, first sets), then the timed ones.
    resources.run_interval();
    let mut cpu = Vec::with_capacity(intervals);
    let mut set = 0;
    let mut errors = 0;
    let mut reads = UpstreamReads::default();
    for _ in 0..intervals {
        let start = thread_cpu_seconds();
        let report = resources.run_interval();
        cpu.push(thread_cpu_seconds() - start);
        set += report.buffers_set;
        errors += report.read_errors;
        reads.add(&report);
    }
    cpu.sort_by(f64::total_cmp);
    let mean = cpu.iter().sum::<f64>() / cpu.len() as f64;
    println!(
        "{label}: {clients} client + {upstreams} upstream connections, {intervals} intervals: \
         CPU per interval mean {:.2} ms, p50 {:.2} ms, max {:.2} ms = {:.2} % of one core at 1 interval/s; \
         {set} buffers re-set, {errors} read errors{reads}",
        mean * 1e3,
        percentile(&cpu, 0.5) * 1e3,
        percentile(&cpu, 1.0) * 1e3,
        mean * 100.0,
    );
    // What re-setting every buffer would add (two sizes in turn): as the
    // loop sets them (`setsockopt`, the held size computed by the
    // kernel's rule), and set then read back (`getsockopt`).
    let send_max = 2 * vantage_sys::tcp_info::wmem_max().map_err(|e| format!("wmem_max: {e}"))?;
    let time_sets = |read_back: bool| {
        let start = thread_cpu_seconds();
        for (i, t) in tracked.iter().enumerate() {
            let bytes = if i % 2 == 0 { 64 << 10 } else { 96 << 10 };
            let _ = match read_back {
                true => vantage_sys::tcp_info::set_send_buffer(t.get_ref(), bytes),
                false => vantage_sys::tcp_info::set_buffer_computed(
                    t.get_ref(),
                    vantage_sys::tcp_info::SocketBuffer::Send,
                    bytes,
                    send_max,
                ),
            };
        }
        (thread_cpu_seconds() - start) / tracked.len() as f64
    };
    let per_set = time_sets(false);
    let per_set_read_back = time_sets(true);
    println!(
        "  re-setting every buffer would add {:.2} ms per interval ({:.2} µs each; \
         {:.2} µs each read back)",
        per_set * tracked.len() as f64 * 1e3,
        per_set * 1e6,
        per_set_read_back * 1e6
    );
    time_reads(&tracked, address.port())?;
    time_uring(&tracked)?;
    drop(tracked);
    Ok(())
}

/// The reads alone, per connection: a `TCP_INFO` `getsockopt` each (as
/// the loop reads), against one `sock_diag` dump of them all filtered on
/// the listening port, and what a dump costs when its filter matches
/// nothing (the walk over the namespace's sockets, paid whatever the
/// filter). Why the loop does not dump: bench/proxy/README-resources.md.
fn time_reads(tracked: &[TrackedStream<TcpStream>], port: u16) -> BenchResult<()> {
    use vantage_sys::sock_diag::{self, Family, PortFilter, SockDiag};
    const ROUNDS: usize = 10;
    let start = thread_cpu_seconds();
    for _ in 0..ROUNDS {
        for t in tracked {
            let _ = vantage_sys::tcp_info::tcp_info(t.get_ref());
        }
    }
    let per_getsockopt = (thread_cpu_seconds() - start) / (ROUNDS * tracked.len()) as f64;
    let mut diag = SockDiag::open().map_err(|e| format!("sock_diag socket: {e}"))?;
    let mut time_dump = |filter: &PortFilter| -> BenchResult<(f64, usize)> {
        let mut replies = 0;
        let start = thread_cpu_seconds();
        for _ in 0..ROUNDS {
            replies = diag
                .dump(Family::V4, sock_diag::CONNECTED_STATES, Some(filter), |m| {
                    m.decode().map(|_| ())
                })
                .map_err(|e| format!("sock_diag dump: {e}"))?;
        }
        Ok(((thread_cpu_seconds() - start) / ROUNDS as f64, replies))
    };
    let (dump, replies) = time_dump(&PortFilter {
        local_ports: vec![port],
        remote_ports: Vec::new(),
    })?;
    let (walk, _) = time_dump(&PortFilter {
        local_ports: Vec::new(),
        remote_ports: vec![1],
    })?;
    // The descriptor count of the connection manager (every tenth
    // interval): one poll over the descriptor table, as the loop counts,
    // against listing /proc/self/fd.
    let start = thread_cpu_seconds();
    let mut polled = 0;
    for _ in 0..ROUNDS {
        polled = vantage_sys::process::open_descriptors()
            .map_err(|e| format!("descriptor count: {e}"))?;
    }
    let poll = (thread_cpu_seconds() - start) / ROUNDS as f64;
    let start = thread_cpu_seconds();
    let mut listed = 0;
    for _ in 0..ROUNDS {
        listed = std::fs::read_dir("/proc/self/fd")
            .map_err(|e| format!("/proc/self/fd: {e}"))?
            .count()
            - 1;
    }
    let listing = (thread_cpu_seconds() - start) / ROUNDS as f64;
    println!(
        "  descriptor count: one poll {:.2} ms ({polled}), listing /proc/self/fd {:.2} ms ({listed})",
        poll * 1e3,
        listing * 1e3
    );
    println!(
        "  reads alone: TCP_INFO getsockopt {:.2} µs each ({:.2} ms for all); one sock_diag dump \
         {:.2} ms ({replies} sockets, {:.2} µs each), of which {:.3} ms walking the namespace's sockets",
        per_getsockopt * 1e6,
        per_getsockopt * tracked.len() as f64 * 1e3,
        dump * 1e3,
        dump / replies.max(1) as f64 * 1e6,
        walk * 1e3,
    );
    Ok(())
}

/// The reads of upstream connections alone (all connecting ends, remote
/// port `upstream_port`): `TCP_INFO` and `SO_MEMINFO` by `getsockopt`
/// per connection, against one `sock_diag` dump with both attributes
/// filtered on the remote port, each reply looked up by its cookie (taken
/// once, as at registration) and decoded; ten turns of each in
/// alternation, ten reads of every connection per turn, and per turn ten
/// dumps whose filter matches nothing (the walk over the namespace's
/// sockets, paid whatever the filter).
fn time_upstream_reads(
    tracked: &[TrackedStream<TcpStream>],
    upstream_port: u16,
) -> BenchResult<()> {
    use std::collections::HashMap;
    use vantage_sys::sock_diag::{self, Family, PortFilter, SockDiag};
    use vantage_sys::tcp_info;
    const ROUNDS: usize = 10;
    const TURNS: usize = 10;
    let mut cookies = HashMap::with_capacity(tracked.len());
    for (i, t) in tracked.iter().enumerate() {
        let identity =
            sock_diag::socket_identity(t.get_ref()).map_err(|e| format!("SO_COOKIE: {e}"))?;
        if identity.remote_port != upstream_port {
            return Err(format!(
                "an upstream connection's remote port is {}, not {upstream_port}",
                identity.remote_port
            ));
        }
        cookies.insert(identity.cookie, i);
    }
    let filter = PortFilter {
        local_ports: Vec::new(),
        remote_ports: vec![upstream_port],
    };
    // Matches no socket: what walking the namespace's sockets costs.
    let nothing = PortFilter {
        local_ports: Vec::new(),
        remote_ports: vec![1],
    };
    let mut diag = SockDiag::open().map_err(|e| format!("sock_diag socket: {e}"))?;
    let (mut by_getsockopt, mut by_dump, mut walks) = (Vec::new(), Vec::new(), Vec::new());
    let (mut failed, mut found, mut replies) = (0usize, 0usize, 0usize);
    let per = |seconds: f64| seconds / (ROUNDS * tracked.len()) as f64 * 1e6;
    for _ in 0..TURNS {
        let start = thread_cpu_seconds();
        for _ in 0..ROUNDS {
            for t in tracked {
                let read = (
                    tcp_info::tcp_info(t.get_ref()),
                    tcp_info::socket_memory(t.get_ref()),
                );
                if std::hint::black_box(read).0.is_err() {
                    failed += 1;
                }
            }
        }
        by_getsockopt.push(per(thread_cpu_seconds() - start));
        let start = thread_cpu_seconds();
        for _ in 0..ROUNDS {
            found = 0;
            replies = diag
                .dump(
                    Family::V4,
                    sock_diag::CONNECTED_STATES,
                    Some(&filter),
                    |m| {
                        if let Some(&i) = cookies.get(&m.cookie) {
                            let socket = m.decode()?;
                            if socket.tcp_info.is_some() && socket.memory.is_some() {
                                found += 1;
                            }
                            std::hint::black_box((i, socket));
                        }
                        Ok(())
                    },
                )
                .map_err(|e| format!("sock_diag dump: {e}"))?;
        }
        by_dump.push(per(thread_cpu_seconds() - start));
        let start = thread_cpu_seconds();
        for _ in 0..ROUNDS {
            diag.dump(
                Family::V4,
                sock_diag::CONNECTED_STATES,
                Some(&nothing),
                |_| Ok(()),
            )
            .map_err(|e| format!("sock_diag dump: {e}"))?;
        }
        walks.push((thread_cpu_seconds() - start) / ROUNDS as f64 * 1e3);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (g, d) = (mean(&by_getsockopt), mean(&by_dump));
    println!(
        "  upstream reads alone, {TURNS} turns of {ROUNDS}: TCP_INFO + SO_MEMINFO getsockopt {g:.2} µs \
         each ({}; {failed} failed); one sock_diag dump on the remote port {d:.2} µs each ({}; \
         {found} of {} found in {replies} replies), of which {:.2} ms per dump walking the \
         namespace's sockets ({}): {:+.0} %",
        list(&by_getsockopt),
        list(&by_dump),
        tracked.len(),
        mean(&walks),
        list(&walks),
        (d / g - 1.0) * 100.0,
    );
    Ok(())
}

/// Sets and reads batched through io_uring (`IORING_OP_URING_CMD` with
/// `SOCKET_URING_OP_SETSOCKOPT` / `SOCKET_URING_OP_GETSOCKOPT`, kernel
/// 6.7 and later; `SOL_SOCKET` options only, so `SO_SNDBUF` and
/// `SO_MEMINFO` but not `TCP_INFO`), [`URING_BATCH`] per
/// `submit_and_wait`, against one system call each, in turns. Why the
/// loop does not use it: bench/proxy/README-resources.md.
fn time_uring(tracked: &[TrackedStream<TcpStream>]) -> BenchResult<()> {
    use io_uring::{opcode, types, IoUring};
    use std::os::fd::AsRawFd;
    const ROUNDS: usize = 4;
    const URING_BATCH: usize = 1024;
    let mut ring = match IoUring::new(URING_BATCH as u32) {
        Ok(ring) => ring,
        Err(e) => {
            println!("  io_uring: not available here ({e})");
            return Ok(());
        }
    };
    let fds: Vec<i32> = tracked.iter().map(|t| t.get_ref().as_raw_fd()).collect();
    let int_len = std::mem::size_of::<libc::c_int>() as u32;
    let meminfo_len = std::mem::size_of::<[u32; 9]>() as u32;
    // Submits one batch and counts the failed completions.
    let mut run_batch = |entries: Vec<io_uring::squeue::Entry>| -> BenchResult<usize> {
        let n = entries.len();
        // SAFETY: every entry points at memory (a value, an output slot)
        // that outlives this call, which waits for all completions.
        unsafe {
            ring.submission()
                .push_multiple(&entries)
                .map_err(|e| format!("io_uring submission queue: {e}"))?
        };
        ring.submit_and_wait(n)
            .map_err(|e| format!("io_uring_enter: {e}"))?;
        Ok(ring.completion().filter(|c| c.result() < 0).count())
    };
    let (mut plain_set, mut uring_set, mut plain_read, mut uring_read) = (0.0, 0.0, 0.0, 0.0);
    let mut failed = 0;
    let mut meminfo = vec![[0u32; 9]; URING_BATCH];
    for round in 0..ROUNDS {
        let sizes: Vec<libc::c_int> = (0..fds.len())
            .map(|i| {
                if (i + round) % 2 == 0 {
                    64 << 10
                } else {
                    96 << 10
                }
            })
            .collect();
        let start = thread_cpu_seconds();
        for (&fd, size) in fds.iter().zip(&sizes) {
            // SAFETY: the value is a C int that outlives the call.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_SNDBUF,
                    (size as *const libc::c_int).cast(),
                    int_len,
                )
            };
        }
        plain_set += thread_cpu_seconds() - start;
        let start = thread_cpu_seconds();
        for (fds, sizes) in fds.chunks(URING_BATCH).zip(sizes.chunks(URING_BATCH)) {
            let entries = fds
                .iter()
                .zip(sizes)
                .map(|(&fd, size)| {
                    opcode::SetSockOpt::new(
                        types::Fd(fd),
                        libc::SOL_SOCKET as u32,
                        libc::SO_SNDBUF as u32,
                        (size as *const libc::c_int).cast(),
                        int_len,
                    )
                    .build()
                })
                .collect();
            failed += run_batch(entries)?;
        }
        uring_set += thread_cpu_seconds() - start;
        let start = thread_cpu_seconds();
        for t in tracked {
            let _ = vantage_sys::tcp_info::socket_memory(t.get_ref());
        }
        plain_read += thread_cpu_seconds() - start;
        let start = thread_cpu_seconds();
        for fds in fds.chunks(URING_BATCH) {
            let entries = fds
                .iter()
                .zip(meminfo.iter_mut())
                .map(|(&fd, out)| {
                    opcode::GetSockOpt::new(
                        types::Fd(fd),
                        libc::SOL_SOCKET as u32,
                        libc::SO_MEMINFO as u32,
                        out.as_mut_ptr().cast(),
                        meminfo_len,
                    )
                    .build()
                })
                .collect();
            failed += run_batch(entries)?;
        }
        uring_read += thread_cpu_seconds() - start;
    }
    let each = |total: f64| total / (ROUNDS * fds.len()) as f64 * 1e6;
    println!(
        "  io_uring, {URING_BATCH} per submit: SO_SNDBUF set {:.2} µs each (one setsockopt {:.2} µs); \
         SO_MEMINFO read {:.2} µs each (one getsockopt {:.2} µs); {failed} failed",
        each(uring_set),
        each(plain_set),
        each(uring_read),
        each(plain_read),
    );
    Ok(())
}

/// CPU per interval, as the first line of each case prints it.
fn summary(cpu: &mut [f64]) -> String {
    cpu.sort_by(f64::total_cmp);
    let mean = cpu.iter().sum::<f64>() / cpu.len().max(1) as f64;
    format!(
        "CPU per interval mean {:.2} ms, p50 {:.2} ms, max {:.2} ms = {:.2} % of one core at 1 interval/s \
         (max {:.2} %)",
        mean * 1e3,
        percentile(cpu, 0.5) * 1e3,
        percentile(cpu, 1.0) * 1e3,
        mean * 100.0,
        percentile(cpu, 1.0) * 100.0,
    )
}

/// The worst intervals, end to end: `connections` upstream connections
/// whose receive share of the pool binds (40 KiB each, below the
/// kernel's initial buffer their tuners start from), memory pressure
/// reported through a stand-in for the proxy's memory cgroup (a usage
/// file the loop reads, as `sys::cgroup` reads the kernel's), `rounds`
/// times: a pressure cut, then the intervals where the pool regrows and
/// every buffer moves, until no move waits. Client connections cannot
/// show it over loopback: their E-ATBT demand (ρ̄·rtt at a loopback RTT)
/// is below the two-segment floor, which no cut moves.
fn run_worst(connections: usize, steady: usize, rounds: usize) -> BenchResult<()> {
    use vantage_sys::cgroup::{CgroupMemorySource, CgroupTcpMemory};
    let dir = std::env::temp_dir().join(format!("vantage-resource-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let usage = dir.join("memory.kmem.tcp.usage_in_bytes");
    let report_usage = |bytes: u64| {
        std::fs::write(&usage, format!("{bytes}\n"))
            .map_err(|e| format!("{}: {e}", usage.display()))
    };
    report_usage(0)?;
    let limit: u64 = 1 << 50;
    let mut limits = KernelLimits::read().map_err(|e| format!("kernel limits: {e}"))?;
    limits.cgroup = Some(CgroupTcpMemory {
        source: CgroupMemorySource::V1Tcp,
        dir: dir.clone(),
        limit_bytes: limit,
    });
    let never = Marks {
        high: u64::MAX,
        low: u64::MAX,
    };
    let config = ResourcesConfig {
        mode: ResourceMode::SsbtWithConnections,
        // Half for receive buffers: 40 KiB each.
        pool_bytes: Some(connections as u64 * (80 << 10)),
        descriptors: Some(never),
        tcp_memory_bytes: Some(never),
        connections: Some(never),
        ..ResourcesConfig::default()
    };
    let resources = Arc::new(
        Resources::new(config, limits, connections + 1, ResourceMetrics::default())
            .map_err(|e| format!("resources: {e}"))?,
    );
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let address = listener.local_addr().map_err(|e| format!("address: {e}"))?;
    let mut peers = Vec::with_capacity(connections);
    let mut tracked = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (own, peer) = exchanged_pair(&listener, address, true)?;
        tracked.push(resources.track_upstream(own));
        peers.push(peer);
    }
    let reads = std::cell::RefCell::new(UpstreamReads::default());
    let timed = |resources: &Resources| {
        let start = thread_cpu_seconds();
        let report = resources.run_interval();
        let cpu = thread_cpu_seconds() - start;
        reads.borrow_mut().add(&report);
        (cpu, report)
    };
    resources.run_interval();
    let mut steady_cpu = Vec::new();
    let mut steady_sets = 0;
    for _ in 0..steady {
        let (cpu, report) = timed(&resources);
        steady_cpu.push(cpu);
        steady_sets += report.buffers_set;
    }
    let (mut cut_cpu, mut cut_sets, mut cut_reads) = (Vec::new(), 0, 0);
    let (mut moving_cpu, mut moving_sets, mut moving_deferred) = (Vec::new(), 0, 0);
    let (mut errors, mut all_cpu) = (0, steady_cpu.clone());
    for _ in 0..rounds {
        report_usage(limit)?;
        let (cpu, report) = timed(&resources);
        if !report.pressure {
            return Err("the stand-in cgroup's pressure was not seen".into());
        }
        cut_cpu.push(cpu);
        cut_sets += report.buffers_set;
        cut_reads += usize::from(report.read);
        errors += report.read_errors;
        report_usage(0)?;
        // The pool regrows by an eighth per interval: every buffer moves;
        // then the deferred ones, until none waits.
        for i in 0..32 {
            let (cpu, report) = timed(&resources);
            errors += report.read_errors;
            all_cpu.push(cpu);
            if i >= 2 && report.buffers_deferred == 0 && report.buffers_set == 0 {
                break;
            }
            moving_cpu.push(cpu);
            moving_sets += report.buffers_set;
            moving_deferred += report.buffers_deferred;
        }
    }
    all_cpu.extend(&cut_cpu);
    let per = |n: usize, of: usize| n as f64 / of.max(1) as f64;
    println!(
        "ssbt+conn, all upstream, receive pool binding: {connections} upstream connections, {steady} steady intervals: \
         {}; {steady_sets} buffers re-set",
        summary(&mut steady_cpu)
    );
    println!(
        "  pressure cut, {rounds} intervals: {}; {:.0} buffers set per interval, read in {cut_reads}",
        summary(&mut cut_cpu),
        per(cut_sets, rounds),
    );
    println!(
        "  after the cut, pool regrowing (every buffer moves), {} intervals: {}; {:.0} buffers set, {:.0} deferred per interval",
        moving_cpu.len(),
        summary(&mut moving_cpu),
        per(moving_sets, moving_cpu.len()),
        per(moving_deferred, moving_cpu.len()),
    );
    println!(
        "  worst interval of all {}: {}; {errors} read errors{}",
        all_cpu.len(),
        summary(&mut all_cpu),
        reads.borrow()
    );
    time_upstream_reads(&tracked, address.port())?;
    drop(tracked);
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(())
}

/// Closing every client connection one at a time, as the proxy's
/// teardown does, in the send allocator alone: `remove` (the share
/// re-divided over the others at each close, as a close did before)
/// against `release` (the share freed, the others left to the next
/// interval), `connections` connections whose demands exceed the pool.
fn time_teardown(connections: usize) -> BenchResult<()> {
    use vantage_core::resources::{CouplingParams, SendBufferAllocator};
    use vantage_core::tcp::throughput::PathEstimate;
    let full = || -> BenchResult<SendBufferAllocator> {
        let mut allocator = SendBufferAllocator::new(
            connections as u64 * (16 << 10),
            1448,
            connections,
            CouplingParams::default(),
        )
        .map_err(|e| format!("allocator: {e}"))?;
        let paths: Vec<(u64, PathEstimate)> = (0..connections as u64)
            .map(|id| {
                let path = PathEstimate {
                    rtt_secs: 0.01 + (id % 100) as f64 * 0.002,
                    rto_secs: 0.2,
                    loss: 0.001,
                    max_window_segments: 1e4,
                };
                (id, path)
            })
            .collect();
        allocator
            .set_paths(&paths)
            .map_err(|e| format!("allocator: {e}"))?;
        Ok(allocator)
    };
    let mut removing = full()?;
    let start = thread_cpu_seconds();
    for id in 0..connections as u64 {
        removing.remove(id);
    }
    let remove = thread_cpu_seconds() - start;
    let mut releasing = full()?;
    let start = thread_cpu_seconds();
    for id in 0..connections as u64 {
        releasing.release(id);
    }
    let release = thread_cpu_seconds() - start;
    println!(
        "closing {connections} client connections one at a time, send allocator alone: \
         re-dividing at each close {:.1} ms, freeing the share {:.3} ms",
        remove * 1e3,
        release * 1e3
    );
    Ok(())
}

fn main() {
    if let Err(e) = bench() {
        eprintln!("resource_loop: {e}");
        std::process::exit(1);
    }
}

fn bench() -> BenchResult<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let connections: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let intervals: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let limit = raise_descriptor_limit(2 * connections as u64 + 256);
    let connections = connections.min((limit.saturating_sub(256) / 2) as usize);
    println!("descriptor limit {limit}: {connections} connections (two descriptors each)");
    let managed = ResourcesConfig {
        mode: ResourceMode::SsbtWithConnections,
        ..ResourcesConfig::default()
    };
    // Marks far above: the steady state, /proc/self/fd counted every
    // tenth interval.
    let far = ResourcesConfig {
        descriptors: Some(Marks {
            high: 4 * limit,
            low: 3 * limit,
        }),
        ..managed
    };
    run(
        "ssbt+conn, all client-facing, far from the descriptor marks",
        far,
        connections,
        0,
        intervals,
    )?;
    run(
        "ssbt+conn, half upstream, far from the descriptor marks",
        far,
        connections / 2,
        connections - connections / 2,
        intervals,
    )?;
    // Default marks (90 %/80 % of the limit), which this many connections
    // exceed: /proc/self/fd counted every interval, idle ones reclaimed.
    run(
        "ssbt+conn, all client-facing, above the descriptor marks",
        managed,
        connections,
        0,
        intervals,
    )?;
    run_worst(connections, intervals, 5)?;
    time_teardown(connections)?;
    Ok(())
}

/// A loopback connection (the end the loop tracks, the other) with 1000
/// bytes sent each way, so that `TCP_INFO` has an RTT and counters, the
/// second 1000 left unread in the tracked end's receive queue. The
/// tracked end is the accepted one (a client connection), or with
/// `connecting` the connecting one (an upstream connection: remote port
/// the listener's).
fn exchanged_pair(
    listener: &TcpListener,
    address: std::net::SocketAddr,
    connecting: bool,
) -> Result<(TcpStream, TcpStream), String> {
    let connected = TcpStream::connect(address).map_err(|e| format!("connect: {e}"))?;
    let (accepted, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
    let (mut own, mut other) = match connecting {
        true => (connected, accepted),
        false => (accepted, connected),
    };
    own.write_all(&[0u8; 1000])
        .map_err(|e| format!("write: {e}"))?;
    let mut sink = [0u8; 1000];
    other
        .read_exact(&mut sink)
        .map_err(|e| format!("read: {e}"))?;
    other
        .write_all(&[0u8; 1000])
        .map_err(|e| format!("write: {e}"))?;
    Ok((own, other))
}
