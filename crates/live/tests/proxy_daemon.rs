//! The proxy as a daemon (`vantage_live::proxy::run`) in this process:
//! the ready file, sd_notify, SIGHUP reload (an invalid file refused),
//! SIGUSR1 log reopen, SIGTERM stop; and the systemd unit in `contrib/`.
//! Its own test binary: it installs signal handlers for the process.

mod proxy_common;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;

use proxy_common::*;

fn signal(number: libc::c_int) {
    // SAFETY: kill with our own pid and a signal whose handler is installed.
    assert_eq!(unsafe { libc::kill(libc::getpid(), number) }, 0);
}

fn received(socket: &UnixDatagram) -> Vec<String> {
    let mut out = Vec::new();
    let mut buffer = [0u8; 256];
    while let Ok(n) = socket.recv(&mut buffer) {
        out.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
    }
    out
}

#[test]
fn runs_reloads_reopens_and_stops_on_signals() {
    let dir = std::env::temp_dir().join(format!("vantage-proxy-daemon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let notify_path = dir.join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    std::env::set_var("NOTIFY_SOCKET", &notify_path);

    let a = Backend::start("a");
    let b = Backend::start("b");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let log = dir.join("access.jsonl");
    let file = |upstream: std::net::SocketAddr| {
        format!(
            "listen = \"127.0.0.1:{port}\"\nupstreams = [\"{upstream}\"]\naccess_log = \"{}\"\n[utilization]\nconcurrency = 4\n",
            log.display()
        )
    };
    let config = dir.join("proxy.toml");
    std::fs::write(&config, file(a.address)).unwrap();
    let ready = dir.join("ready");
    let (config_path, ready_path) = (config.clone(), ready.clone());
    let daemon =
        std::thread::spawn(move || vantage_live::proxy::run(&config_path, Some(&ready_path)));
    assert!(eventually(|| ready.exists()), "no ready file");
    assert_eq!(
        std::fs::read_to_string(&ready).unwrap().trim(),
        std::process::id().to_string()
    );
    assert!(received(&notify).contains(&"READY=1".to_string()));
    let address: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(get(address, "/", None).header("x-backend"), Some("a"));

    // An invalid file: refused, `a` still serves.
    std::fs::write(&config, "listen = 3\n").unwrap();
    signal(libc::SIGHUP);
    let messages = {
        let mut all = Vec::new();
        assert!(eventually(|| {
            all.extend(received(&notify));
            all.iter().filter(|m| *m == "READY=1").count() >= 1
                && all.contains(&"RELOADING=1".to_string())
        }));
        all
    };
    assert!(messages.contains(&"RELOADING=1".to_string()));
    assert_eq!(get(address, "/", None).header("x-backend"), Some("a"));
    // A valid one: applied.
    std::fs::write(&config, file(b.address)).unwrap();
    signal(libc::SIGHUP);
    assert!(eventually(
        || get(address, "/", None).header("x-backend") == Some("b")
    ));

    // SIGUSR1 after logrotate's rename: a new file.
    std::fs::rename(&log, dir.join("access.jsonl.1")).unwrap();
    signal(libc::SIGUSR1);
    assert!(eventually(|| {
        get(address, "/after-rotate", None);
        std::fs::read_to_string(&log)
            .map(|t| t.contains("/after-rotate"))
            .unwrap_or(false)
    }));

    signal(libc::SIGTERM);
    daemon.join().unwrap().unwrap();
    assert!(!ready.exists(), "the ready file is removed on exit");
    assert!(received(&notify).contains(&"STOPPING=1".to_string()));
    std::env::remove_var("NOTIFY_SOCKET");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_systemd_unit_verifies() {
    if std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped the_systemd_unit_verifies: systemd-analyze is not installed");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let unit = std::fs::read_to_string(root.join("contrib/systemd/vantage-proxy.service")).unwrap();
    // `verify` checks that the binary exists: this build's `vantage` when
    // built (target/*/vantage beside this test's deps directory), else a
    // stand-in that exists everywhere.
    let built = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("vantage")))
        .filter(|p| p.exists());
    let binary = built.map_or("/bin/true".to_string(), |p| p.display().to_string());
    let unit = unit.replace("/usr/local/bin/vantage", &binary);
    let dir = std::env::temp_dir().join(format!("vantage-proxy-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vantage-proxy.service");
    std::fs::write(&path, unit).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("vantage-proxy.service:"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Set in the child process of the descriptor test.
const CHILD: &str = "VANTAGE_PROXY_TEST_FD_CHILD";

/// In the child only (`CHILD` set): lowers `RLIMIT_NOFILE` to 1024, runs a
/// proxy allowing 100,000 connections, writes its address to the file
/// `CHILD` names and serves until killed. A no-op in a normal test run.
#[test]
fn child_proxy_under_1024_descriptors() {
    let Some(out) = std::env::var_os(CHILD) else {
        return;
    };
    let limit = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: 1024,
    };
    // SAFETY: setrlimit reads the struct it is given.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    let backend = Backend::start("b");
    let proxy = vantage_live::proxy::Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n[limits]\nmax_connections = 100000\n[timeouts]\nidle_ms = 600000\n",
    ))
    .unwrap();
    std::fs::write(&out, proxy.address().to_string()).unwrap();
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn thousands_of_idle_connections_under_a_1024_descriptor_limit() {
    // This process opens the idle connections: it needs more descriptors
    // than the child has.
    let mut ours = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct they are given.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut ours) };
    ours.rlim_cur = ours.rlim_max.min(8192);
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &ours) };
    if ours.rlim_cur < 4096 {
        eprintln!(
            "skipped: this process may open only {} descriptors",
            ours.rlim_cur
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("vantage-proxy-fd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let address_file = dir.join("address");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_proxy_under_1024_descriptors",
            "--nocapture",
        ])
        .env(CHILD, &address_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ok = eventually(|| {
        address_file.exists() && std::fs::read_to_string(&address_file).is_ok_and(|t| !t.is_empty())
    });
    let result = std::panic::catch_unwind(|| {
        assert!(ok, "the child proxy never started");
        let address: std::net::SocketAddr = std::fs::read_to_string(&address_file)
            .unwrap()
            .parse()
            .unwrap();
        // 3000 idle connections: far more than 1024 descriptors.
        let idle: Vec<_> = (0..3000)
            .filter_map(|_| std::net::TcpStream::connect(address).ok())
            .collect();
        assert!(idle.len() > 1024, "only {} connects", idle.len());
        // The proxy keeps serving a real client: connections are capped
        // below the descriptor limit (448 here) and idle ones make room.
        std::thread::sleep(Duration::from_millis(500));
        let served = eventually(|| {
            let Ok(mut s) = std::net::TcpStream::connect(address) else {
                return false;
            };
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            exchange(
                &mut s,
                b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .is_some_and(|r| r.status == 200)
        });
        drop(idle);
        assert!(served, "the proxy stopped serving under the idle flood");
    });
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(panic) = result {
        eprintln!("child stderr: {stderr}");
        std::panic::resume_unwind(panic);
    }
    assert!(
        stderr.contains("serving at most 448 connections"),
        "no warning about the lowered cap: {stderr}"
    );
}
