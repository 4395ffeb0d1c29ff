//! Shared helpers of the testbed's root tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use vantage_testbed::netns;
use vantage_testbed::run::{self, RunError, RunOptions, RunOutput};
use vantage_testbed::spec::TestbedSpec;

/// Timing-sensitive runs take turns: two cores, and one run's load must
/// not distort another's delays.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// True (and a printed reason) when the test cannot run here.
pub fn skip() -> bool {
    if !vantage_sys::privilege::is_root() {
        eprintln!(
            "skipped: needs root to create network namespaces, veth links and iptables rules"
        );
        return true;
    }
    false
}

/// The result directory of the test run `name` in this process. The
/// directory is kept after the test, for a look at what it measured; the
/// ones earlier test processes left for the same `name` are removed here,
/// so at most one per test stays on disk.
pub fn result_dir(name: &str) -> PathBuf {
    let own = format!("vantage-testbed-{name}-{}", std::process::id());
    let earlier = format!("vantage-testbed-{name}-");
    let tmp = std::env::temp_dir();
    for entry in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let from_earlier_process = file_name
            .strip_prefix(&earlier)
            .is_some_and(|pid| pid.parse::<u32>().is_ok() && file_name != own);
        if from_earlier_process {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    tmp.join(own)
}

pub fn tag(prefix: &str) -> String {
    format!("{prefix}{:x}", std::process::id())
}

/// Runs a spec given as TOML text; the result directory is emptied first.
pub fn run_spec(text: &str, name: &str, stop: Arc<AtomicBool>) -> Result<RunOutput, RunError> {
    let spec = TestbedSpec::from_toml(text, name).expect("test spec is valid");
    let dir = result_dir(name);
    let _ = std::fs::remove_dir_all(&dir);
    let options = RunOptions {
        dir,
        tag: Some(tag(&name[..2])),
        watchdog: None,
    };
    run::run(&spec, text, &options, stop, &|_| {})
}

/// Testbed namespaces whose names carry `tag`.
pub fn namespaces_of(tag: &str) -> Vec<String> {
    let prefix = format!("vtb-{tag}-");
    netns::list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Processes whose command line mentions `needle` (e.g. a result directory).
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = entry.path().join("cmdline");
        if let Ok(bytes) = std::fs::read(&cmdline) {
            let text = String::from_utf8_lossy(&bytes).replace('\0', " ");
            if text.contains(needle) && !text.contains("cargo") {
                found.push(text);
            }
        }
    }
    found
}

/// TCP segments per source IPv4 address in a capture.
pub fn packets_by_source(path: &Path) -> std::collections::HashMap<[u8; 4], u64> {
    let mut reader = vantage_trace::TraceReader::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut counts = std::collections::HashMap::new();
    while let Some(packet) = reader.next_packet().unwrap() {
        if let Ok(segment) = vantage_trace::decode(&packet) {
            if let std::net::IpAddr::V4(source) = segment.source.ip {
                *counts.entry(source.octets()).or_insert(0) += 1;
            }
        }
    }
    counts
}

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
