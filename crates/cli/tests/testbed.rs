//! Root tests of `vantage testbed`: a run killed outright (SIGKILL) or
//! stopped with Ctrl-C leaves no namespace, process or rule behind; bad
//! specs get clear errors.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vantage_sys::privilege::is_root;

mod leftovers;
use leftovers::{namespaces as namespaces_with, processes_mentioning};

const SPEC: &str = r#"
name = "killme"
[wan.upstream]
delay_ms = 10
[server]
kind = "nginx"
[load]
path = "/file-10k"
[load.arrivals]
duration_s = 60
pattern = { kind = "constant", rate = 20 }
"#;

/// Starts a run, waits until its server namespace exists, sends `signal`,
/// and returns the namespace prefix, result root and exit status.
fn start_and_signal(
    name: &str,
    signal: &str,
) -> (String, std::path::PathBuf, std::process::ExitStatus) {
    let root = std::env::temp_dir().join(format!("vantage-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let spec = root.join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["testbed", "run"])
        .arg(&spec)
        .arg("--out")
        .arg(&root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let prefix = format!("vtb-{:x}-", child.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    // Wait until the load is running: the run itself, nginx and tcpdump.
    while processes_mentioning(&root.display().to_string()).len() < 3 {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    (prefix, root, status)
}

fn assert_nothing_left(prefix: &str, root: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let namespaces = namespaces_with(prefix);
        let processes = processes_mentioning(&root.display().to_string());
        if namespaces.is_empty() && processes.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: namespaces {namespaces:?}, processes {processes:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_killed_run_leaves_nothing_behind() {
    if !is_root() {
        eprintln!("skipped: needs root to create network namespaces");
        return;
    }
    let (prefix, root, status) = start_and_signal("kill", "-KILL");
    assert!(!status.success());
    // The watchdog notices the run's end and removes everything.
    assert_nothing_left(&prefix, &root);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn ctrl_c_stops_the_run_and_tears_down() {
    if !is_root() {
        eprintln!("skipped: needs root to create network namespaces");
        return;
    }
    let (prefix, root, status) = start_and_signal("int", "-INT");
    assert_eq!(
        status.code(),
        Some(1),
        "an interrupted run exits with an error"
    );
    assert_nothing_left(&prefix, &root);
    // The partial ground truth was written.
    let run_dir = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .unwrap()
        .path();
    assert!(run_dir.join("clients.csv").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_bad_spec_is_refused_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("vantage-cli-badspec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("bad.toml");
    std::fs::write(
        &spec,
        SPEC.replace("delay_ms = 10", "delay_ms = 10\nbandwidth = 3"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["testbed", "run"])
        .arg(&spec)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.toml") && err.contains("bandwidth"),
        "{err}"
    );
    std::fs::write(&spec, SPEC.replace("delay_ms = 10", "delay_ms = -4")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["testbed", "run"])
        .arg(&spec)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wan.upstream.delay_ms"), "{err}");
    std::fs::write(
        &spec,
        SPEC.replace(
            "name = \"killme\"",
            "name = \"w7\"\nclient_profile = \"windows-7\"",
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["testbed", "run"])
        .arg(&spec)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("client_profile") && err.contains("TCP_TIMEOUT_INIT"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
