//! Root test: `vantage proxy run` started inside a memory cgroup with a TCP
//! memory limit (`testbed::cgroup::TcpMemoryCap`: v1
//! `memory.kmem.tcp.limit_in_bytes`, v2 `memory.max`) takes its TCP memory
//! from the cgroup (`sys::cgroup`), not the host's `tcp_mem`: the default
//! pool is half of 90 % of the limit, and once clients that do not read
//! fill the proxy's sockets up to that mark, the pool is cut. The proxy
//! joins the cgroup before it opens a socket (a shell writes its own pid
//! to `cgroup.procs`, then execs the binary). The proxy is killed and the
//! cgroup removed on drop, also when an assertion fails. Skips, saying
//! why, without root or without a memory controller with a TCP limit.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vantage_testbed::cgroup::{CgroupVersion, TcpMemoryCap};

/// The cgroup's limit: far below the host's `tcp_mem` pressure mark, so
/// the cgroup binds.
const LIMIT: u64 = 4 << 20;
/// The body each client asks for and does not read.
const BODY: usize = 4 << 20;
const CLIENTS: usize = 24;

/// The proxy process, killed (by its pid) and reaped on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port free now (bound, then closed).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A backend answering every request on a connection with `BODY` bytes;
/// its threads end when their connection does.
fn start_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut byte = [0u8; 1];
                let body = vec![b'x'; BODY];
                loop {
                    match stream.read(&mut byte) {
                        Ok(1) => request.push(byte[0]),
                        _ => return,
                    }
                    if request.ends_with(b"\r\n\r\n") {
                        request.clear();
                        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n");
                        if stream.write_all(head.as_bytes()).is_err()
                            || stream.write_all(&body).is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
    address
}

fn http_get(address: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(3))
        .unwrap_or_else(|e| panic!("connect to {address}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("a response");
    response
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn the_proxy_in_a_memory_cgroup_takes_its_pool_from_the_cgroup_limit() {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped: needs root (creates a memory cgroup)");
        return;
    }
    let name = format!("vantage-proxy-cgroup-test-{}", std::process::id());
    // Declared before the proxy: dropped after it, once it has exited.
    let cap = match TcpMemoryCap::create(&name, LIMIT) {
        Ok(cap) => cap,
        Err(e) => {
            eprintln!("skipped: no usable memory cgroup here: {e}");
            return;
        }
    };
    let dir: PathBuf = std::env::temp_dir().join(&name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let backend = start_backend();
    let (port, metrics_port) = (free_port(), free_port());
    let config = dir.join("proxy.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\nupstreams = [\"{backend}\"]\n\
             metrics_listen = \"127.0.0.1:{metrics_port}\"\n\
             [utilization]\nconcurrency = 64\n\
             [resources]\nmode = \"ssbt\"\ninterval_ms = 100\n"
        ),
    )
    .unwrap();
    let ready = dir.join("ready");
    let stderr_path = dir.join("stderr");
    let procs = cap.path().join("cgroup.procs");
    // The shell joins the cgroup, then becomes the proxy: every socket
    // the proxy opens is charged to the cgroup.
    let proxy = Running(
        Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(&procs)
            .arg(env!("CARGO_BIN_EXE_vantage"))
            .args(["proxy", "run"])
            .arg(&config)
            .arg("--ready-file")
            .arg(&ready)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("sh runs"),
    );
    let stderr = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(5), || ready.exists()),
        "the proxy did not start: {}",
        stderr()
    );
    let members = std::fs::read_to_string(&procs).unwrap();
    assert!(
        members
            .split_whitespace()
            .any(|p| p == proxy.0.id().to_string()),
        "the proxy ({}) is in the cgroup: {members:?}",
        proxy.0.id()
    );
    let metrics_address: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    let text = http_get(metrics_address, "/metrics");
    // 2: the cgroup's (1 would be the host's tcp_mem).
    assert_eq!(
        metric(&text, "vantage_proxy_tcp_memory_source"),
        Some(2.0),
        "{text}\n{}",
        stderr()
    );
    let base_pool = LIMIT / 10 * 9 / 2;
    assert_eq!(
        metric(&text, "vantage_proxy_buffer_pool_bytes"),
        Some(base_pool as f64)
    );
    assert!(
        stderr().contains("TCP memory pressure from the proxy's cgroup"),
        "{}",
        stderr()
    );

    // Clients that ask for 4 MiB each and read nothing: the proxy's
    // sockets (upstream receive queues, client send queues) fill the
    // cgroup's TCP memory up to its pressure mark, and the pool is cut.
    let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let mut c = TcpStream::connect(address).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            .unwrap();
        clients.push(c);
    }
    let mut last = String::new();
    let cut = wait_until(Duration::from_secs(5), || {
        last = http_get(metrics_address, "/metrics");
        metric(&last, "vantage_proxy_pool_pressure_cuts_total").is_some_and(|n| n >= 1.0)
    });
    let charged = metric(&last, "vantage_proxy_cgroup_tcp_memory_bytes");
    let pool = metric(&last, "vantage_proxy_buffer_pool_bytes");
    let usage_file = match cap.version() {
        CgroupVersion::V1 => "memory.kmem.tcp.max_usage_in_bytes",
        CgroupVersion::V2 => "memory.peak",
    };
    let peak = std::fs::read_to_string(cap.path().join(usage_file)).unwrap_or_default();
    println!(
        "cgroup {} limit {LIMIT}: peak {} bytes; proxy saw {charged:?} charged, pool {pool:?} (configured {base_pool})",
        cap.path().display(),
        peak.trim()
    );
    assert!(cut, "no pressure cut: {last}");
    // The kernel's own record reached the proxy's mark (90 % of the
    // limit; a socket's charge may go past the limit when it cannot
    // fail), and the proxy read the cgroup's usage.
    let peak: u64 = peak.trim().parse().unwrap();
    assert!(peak >= LIMIT / 10 * 9, "{peak}");
    assert!(charged.is_some_and(|c| c > 0.0), "{charged:?}");
    assert!(pool.is_some_and(|p| p <= (base_pool - base_pool / 4) as f64));
    drop(clients);
    drop(proxy);
    drop(cap);
    assert!(
        !Path::new(&procs).exists(),
        "the cgroup was removed: {}",
        procs.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
