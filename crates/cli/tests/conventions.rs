//! Conventions every subcommand shares: a reader that leaves early ends
//! nothing (no panic, status 0, result files written); inputs are
//! positional with the old flags kept; `--json` is one document and
//! `--jsonl` a stream; completions and manual pages cover every subcommand.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn vantage(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(args)
        .output()
        .expect("the vantage binary runs")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A server-side capture shipped with the repository.
fn server_capture() -> String {
    root()
        .join("crates/cpa/tests/data/cpa-server-delay/server.pcap")
        .to_str()
        .unwrap()
        .to_string()
}

/// A fresh directory for one test's files, removed when the test ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> TempDir {
    let dir =
        std::env::temp_dir().join(format!("vantage-conventions-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

/// Runs vantage with its standard output a pipe whose reader reads
/// `lines` lines and then closes it (`| head -N`; 0: closed before the
/// first write). Returns the lines read and the output (stderr, status).
fn with_early_reader(args: &[&str], lines: usize) -> (Vec<String>, Output) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the vantage binary runs");
    let stdout = child.stdout.take().unwrap();
    let mut read = Vec::new();
    let mut reader = BufReader::new(stdout);
    for _ in 0..lines {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        read.push(line);
    }
    drop(reader);
    let output = child.wait_with_output().unwrap();
    (read, output)
}

fn assert_quiet_success(output: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{what}: {stderr}"
    );
    assert_eq!(output.status.code(), Some(0), "{what}: {stderr}");
}

fn files_under(dir: &Path) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        count += if path.is_dir() { files_under(&path) } else { 1 };
    }
    count
}

#[test]
fn a_reader_that_leaves_early_ends_sim_quietly_with_its_files_written() {
    let scenario = root().join("scenarios/abacus/fig4-resync.toml");
    for lines in [0, 1] {
        let dir = temp_dir(&format!("sim-{lines}"));
        let out = dir.0.join("results");
        let (read, output) = with_early_reader(
            &[
                "sim",
                scenario.to_str().unwrap(),
                "--quick",
                "--out",
                out.to_str().unwrap(),
            ],
            lines,
        );
        assert_quiet_success(&output, &format!("sim | head -{lines}"));
        assert_eq!(read.len(), lines);
        assert!(
            out.is_dir() && files_under(&out) > 0,
            "sim | head -{lines} wrote its result files"
        );
    }
}

#[test]
fn a_reader_that_leaves_early_ends_cpa_and_certes_quietly() {
    let capture = server_capture();
    for args in [
        vec!["cpa", capture.as_str()],
        vec!["cpa", capture.as_str(), "--jsonl"],
        vec!["certes", "estimate", capture.as_str()],
        vec!["certes", "estimate", capture.as_str(), "--json"],
        vec!["profiles"],
        vec!["--help"],
    ] {
        for lines in [0, 1] {
            let (_, output) = with_early_reader(&args, lines);
            assert_quiet_success(&output, &format!("{args:?} | head -{lines}"));
        }
    }
}

#[test]
fn a_reader_that_stays_gets_every_byte() {
    let capture = server_capture();
    let whole = vantage(&["cpa", &capture, "--jsonl"]);
    assert!(whole.status.success());
    let (read, output) = with_early_reader(&["cpa", &capture, "--jsonl"], usize::MAX);
    assert_quiet_success(&output, "cpa --jsonl");
    assert!(
        read.concat().into_bytes() == whole.stdout,
        "every byte relayed"
    );
}

#[test]
fn cpa_takes_the_server_capture_positionally_or_by_flag() {
    let capture = server_capture();
    let positional = vantage(&["cpa", &capture]);
    let flag = vantage(&["cpa", "--server", &capture]);
    assert!(
        positional.status.success(),
        "{}",
        String::from_utf8_lossy(&positional.stderr)
    );
    assert!(!positional.stdout.is_empty());
    assert!(positional.stdout == flag.stdout, "the same output");
    let both = vantage(&["cpa", &capture, "--server", &capture]);
    assert!(!both.status.success(), "a capture given twice is refused");
    let none = vantage(&["cpa"]);
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(err.contains("FILE (or --server FILE)"), "{err}");
}

#[test]
fn certes_estimate_tells_a_capture_from_a_counters_file() {
    let capture = server_capture();
    let positional = vantage(&["certes", "estimate", &capture, "--jsonl"]);
    let flag = vantage(&["certes", "estimate", "--trace", &capture, "--jsonl"]);
    assert!(
        positional.status.success(),
        "{}",
        String::from_utf8_lossy(&positional.stderr)
    );
    assert!(positional.stdout == flag.stdout, "the same output");

    // A capture without a telling extension: found by its magic number.
    let dir = temp_dir("certes-kinds");
    let renamed = dir.0.join("server.trace");
    std::fs::copy(&capture, &renamed).unwrap();
    let by_content = vantage(&["certes", "estimate", renamed.to_str().unwrap(), "--jsonl"]);
    let mut by_content = json_lines(&by_content);
    let mut by_flag = json_lines(&flag);
    let summary = by_content.pop().unwrap();
    by_flag.pop();
    assert_eq!(by_content, by_flag, "the same intervals");
    assert_eq!(summary["summary"]["trace"]["packets"].as_u64(), Some(351));

    // A counters file, positional or by flag; --format and --cumulative
    // still apply to it.
    let counters = dir.0.join("counters.csv");
    std::fs::write(
        &counters,
        "t_start_s,dropped,accepted,completed,syn_to_end_sum_s,rtt_sum_s\n0,0,10,10,2.5,0.4\n0.25,0,10,10,2.5,0.4\n",
    )
    .unwrap();
    let counters = counters.to_str().unwrap();
    let positional = vantage(&["certes", "estimate", counters, "--jsonl"]);
    let flag = vantage(&["certes", "estimate", "--counters", counters, "--jsonl"]);
    assert!(
        positional.status.success(),
        "{}",
        String::from_utf8_lossy(&positional.stderr)
    );
    assert!(positional.stdout == flag.stdout, "the same output");
    let unnamed = dir.0.join("counters.dat");
    std::fs::copy(counters, &unnamed).unwrap();
    let unnamed = unnamed.to_str().unwrap();
    let with_format = vantage(&["certes", "estimate", unnamed, "--format", "csv", "--jsonl"]);
    assert!(
        with_format.status.success(),
        "{}",
        String::from_utf8_lossy(&with_format.stderr)
    );
    let without = vantage(&["certes", "estimate", unnamed]);
    assert!(String::from_utf8_lossy(&without.stderr).contains("--format"));

    // Options of the other kind of input are refused.
    let wrong = vantage(&["certes", "estimate", &capture, "--cumulative"]);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("--cumulative"));
    let wrong = vantage(&["certes", "estimate", counters, "--by", "listener"]);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("--by"));
    let twice = vantage(&["certes", "estimate", counters, "--counters", counters]);
    assert!(!twice.status.success(), "an input given twice is refused");
    let none = vantage(&["certes", "estimate"]);
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(
        err.contains("FILE (a capture or a counters file)") && err.contains("--trace"),
        "{err}"
    );
}

fn json_lines(output: &Output) -> Vec<Value> {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect()
}

fn json_document(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON document")
}

/// Every key of a machine output that holds a time names its unit, and
/// that unit is seconds (`_s`), or nanoseconds beside a seconds twin.
fn assert_times_in_seconds(value: &Value, path: &str) {
    match value {
        Value::Object(object) => {
            for (key, item) in object {
                for unit in ["_ms", "_us", "_millis", "_micros", "_secs", "_seconds"] {
                    assert!(!key.ends_with(unit), "{path}.{key} is not in seconds");
                }
                assert_times_in_seconds(item, &format!("{path}.{key}"));
            }
        }
        Value::Array(items) => {
            for item in items {
                assert_times_in_seconds(item, path);
            }
        }
        _ => {}
    }
}

#[test]
fn cpa_json_is_one_document_and_jsonl_a_stream() {
    let capture = server_capture();
    let stream = json_lines(&vantage(&["cpa", &capture, "--jsonl"]));
    let document = json_document(&vantage(&["cpa", &capture, "--json"]));
    assert!(!stream.is_empty());
    assert_eq!(document["transactions"].as_array(), Some(&stream));
    let summary = &document["summary"];
    assert_eq!(
        summary["transactions"].as_u64(),
        Some(stream.len() as u64),
        "{summary}"
    );
    assert!(summary["failures"].is_object(), "{summary}");
    assert_times_in_seconds(&document, "cpa");
    assert!(
        !vantage(&["cpa", &capture, "--json", "--jsonl"])
            .status
            .success(),
        "--json and --jsonl exclude each other"
    );
}

#[test]
fn certes_json_is_one_document_and_jsonl_a_stream() {
    let capture = server_capture();
    let mut stream = json_lines(&vantage(&["certes", "estimate", &capture, "--jsonl"]));
    let summary = stream.pop().expect("a summary line")["summary"].clone();
    let document = json_document(&vantage(&["certes", "estimate", &capture, "--json"]));
    assert_eq!(document["intervals"].as_array(), Some(&stream));
    assert_eq!(document["summary"], summary);
    assert!(!stream.is_empty());
    assert_times_in_seconds(&document, "certes");
}

/// The subcommands, nested ones as `gate run`.
fn subcommands() -> Vec<String> {
    let help = vantage(&["--help"]);
    let text = String::from_utf8(help.stdout).unwrap();
    let mut names = Vec::new();
    let mut in_commands = false;
    for line in text.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if in_commands {
            let Some(name) = line.split_whitespace().next() else {
                break;
            };
            if name != "help" {
                names.push(name.to_string());
            }
        }
    }
    assert!(names.len() >= 10, "{text}");
    names
}

#[test]
fn completions_cover_every_subcommand() {
    let names = subcommands();
    for shell in ["bash", "zsh", "fish"] {
        let out = vantage(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        for name in &names {
            assert!(script.contains(name.as_str()), "{shell} misses {name}");
        }
        for nested in ["estimate", "check", "clean", "experiment"] {
            assert!(script.contains(nested), "{shell} misses {nested}");
        }
    }
    assert!(!vantage(&["completions", "cmd.exe"]).status.success());
}

#[test]
fn man_writes_one_page_per_subcommand() {
    let dir = temp_dir("man");
    let pages = dir.0.join("man1");
    let out = vantage(&["man", pages.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let main_page = std::fs::read_to_string(pages.join("vantage.1")).unwrap();
    assert!(main_page.starts_with(".ie"), "roff: {main_page}");
    for name in subcommands() {
        let page = pages.join(format!("vantage-{name}.1"));
        assert!(page.is_file(), "no page {}", page.display());
        assert!(main_page.contains(&name), "vantage(1) names {name}");
    }
    for nested in [
        "vantage-certes-estimate.1",
        "vantage-gate-run.1",
        "vantage-gate-check.1",
        "vantage-testbed-run.1",
    ] {
        assert!(pages.join(nested).is_file(), "no page {nested}");
    }
    let printed = vantage(&["man"]);
    assert!(printed.status.success());
    assert_eq!(
        String::from_utf8(printed.stdout).unwrap(),
        main_page,
        "without DIR, vantage(1) is printed"
    );
}
