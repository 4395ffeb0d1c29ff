//! `vantage certes estimate` end to end: counters files (CSV, JSON Lines,
//! cumulative) with the paper's worked no-drop case, gap filling, clear
//! errors for bad input, and a synthetic server-side capture whose exact
//! client-perceived times are known by construction.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use vantage_trace::synth::{syn_options, Pcap, Record, Tcp, ACK, FIN, PSH, RST, SYN};

fn vantage(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(args)
        .output()
        .expect("the vantage binary runs")
}

/// A fresh directory for one test's files, removed when the test ends.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> TempDir {
    let dir =
        std::env::temp_dir().join(format!("vantage-certes-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// Runs with `--jsonl`; returns the interval objects and the summary.
fn json_run(args: &[&str]) -> (Vec<Value>, Value) {
    let mut all = args.to_vec();
    all.push("--jsonl");
    let out = vantage(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let summary = lines.pop().expect("a summary line")["summary"].clone();
    assert!(summary.is_object(), "last line is the summary");
    (lines, summary)
}

fn error_of(args: &[&str]) -> String {
    let out = vantage(args);
    assert!(!out.status.success(), "expected a failure for {args:?}");
    String::from_utf8(out.stderr).unwrap()
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

const FIELDS: &[&str] = &[
    "t_start_s",
    "estimate_mean_s",
    "syn_to_end_mean_s",
    "rtt_mean_s",
    "conn_fail_mean_s",
    "gave_up",
    "completed",
    "p50_s",
    "p90_s",
    "p99_s",
];

/// Five 1-second intervals, 10 connections each, SYN-to-END 0.25 s and
/// RTT 40 ms on average, and no SYN dropped.
const NO_DROPS_CSV: &str = "t_start_s,dropped,accepted,completed,syn_to_end_sum_s,rtt_sum_s
0,0,10,10,2.5,0.4
1,0,10,10,2.5,0.4
2,0,10,10,2.5,0.4
3,0,10,10,2.5,0.4
4,0,10,10,2.5,0.4
";

/// The paper's worked case: with no drop, CONN-FAIL is zero and Eq. 4 is
/// SYN-to-END mean + RTT mean exactly, under the paper's own profile.
#[test]
fn no_drops_estimate_is_syn_to_end_plus_rtt_csv_and_jsonl() {
    let dir = temp_dir("no-drops");
    let csv = write(&dir, "counters.csv", NO_DROPS_CSV);
    let jsonl_text: String = (0..5)
        .map(|t| {
            format!(
                "{{\"t_start_s\": {t}, \"dropped\": 0, \"accepted\": 10, \"completed\": 10, \"syn_to_end_sum_s\": 2.5, \"rtt_sum_s\": 0.4}}\n"
            )
        })
        .collect();
    let jsonl = write(&dir, "counters.jsonl", &jsonl_text);
    let common = [
        "--profile",
        "windows-9x-nt",
        "--interval",
        "1s",
        "--frustration-timeout",
        "21s",
    ];
    let mut outputs = Vec::new();
    for file in [&csv, &jsonl] {
        let mut args = vec!["certes", "estimate", "--counters", file.as_str()];
        args.extend(common);
        let (rows, summary) = json_run(&args);
        assert_eq!(rows.len(), 5);
        for (i, row) in rows.iter().enumerate() {
            for field in FIELDS {
                assert!(row.get(*field).is_some(), "row lacks {field}: {row}");
            }
            assert!(close(&row["t_start_s"], i as f64));
            assert!(close(&row["estimate_mean_s"], 0.29), "{row}");
            assert!(close(&row["syn_to_end_mean_s"], 0.25));
            assert!(close(&row["rtt_mean_s"], 0.04));
            assert!(close(&row["conn_fail_mean_s"], 0.0));
            assert!(close(&row["gave_up"], 0.0));
            assert_eq!(row["completed"], 10);
            // One SYN-to-END value: every percentile is the mean.
            assert!(close(&row["p99_s"], 0.29), "{row}");
        }
        assert!(close(&summary["estimate_mean_s"], 0.29));
        assert!(close(&summary["syn_to_end_mean_s"], 0.25));
        assert_eq!(summary["completed"], 50);
        assert!(close(&summary["drop_rate"], 0.0));
        assert_eq!(summary["profile"], "windows-9x-nt");
        outputs.push(rows);
    }
    assert_eq!(outputs[0], outputs[1], "CSV and JSONL give the same rows");

    // The human table and summary.
    let mut args = vec!["certes", "estimate", "--counters", csv.as_str()];
    args.extend(common);
    let out = vantage(&args);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("estimate s") && text.contains("0.290"),
        "{text}"
    );
    assert!(text.contains("SYN-to-END mean"), "{text}");
}

#[test]
fn gaps_are_filled_with_empty_intervals_and_csv_output_has_them() {
    let dir = temp_dir("gaps");
    let file = write(
        &dir,
        "gappy.csv",
        "interval,dropped,accepted,completed,syn_to_end_sum_s\n0,0,4,4,0.4\n3,0,4,4,0.4\n",
    );
    let out_csv = dir.join("out.csv");
    let (rows, _) = json_run(&[
        "certes",
        "estimate",
        "--counters",
        &file,
        "--csv",
        out_csv.to_str().unwrap(),
    ]);
    assert_eq!(rows.len(), 4);
    assert!(close(&rows[1]["t_start_s"], 0.25));
    assert_eq!(rows[1]["completed"], 0);
    assert!(rows[1]["estimate_mean_s"].is_null());
    // No RTT column: RTT counts as zero.
    assert!(close(&rows[3]["estimate_mean_s"], 0.1));
    let written = std::fs::read_to_string(out_csv).unwrap();
    assert_eq!(written.lines().count(), 5);
    assert!(written.starts_with("t_start_s,class,dropped"));
}

#[test]
fn cumulative_readings_become_intervals() {
    let dir = temp_dir("cumulative");
    let file = write(
        &dir,
        "readings.csv",
        "t_start_s,dropped,accepted,completed,syn_to_end_sum_s,rtt_sum_s\n\
         100.0,5,1000,990,99.0,9.9\n\
         100.25,5,1010,1000,100.0,10.0\n\
         100.5,5,1020,1010,101.0,10.1\n",
    );
    let (rows, summary) = json_run(&["certes", "estimate", "--counters", &file, "--cumulative"]);
    assert_eq!(rows.len(), 2);
    assert!(close(&rows[0]["t_start_s"], 100.0));
    assert_eq!(rows[0]["completed"], 10);
    assert_eq!(rows[0]["accepted"], 10);
    assert!(close(&rows[0]["estimate_mean_s"], 0.11), "{}", rows[0]);
    assert_eq!(summary["completed"], 20);
    // The same file with a `cumulative` column needs no flag.
    let jsonl = write(
        &dir,
        "readings.jsonl",
        "{\"t_start_s\":0,\"cumulative\":true,\"dropped\":0,\"accepted\":0,\"completed\":0,\"syn_to_end_sum_s\":0}\n\
         {\"t_start_s\":0.25,\"cumulative\":true,\"dropped\":2,\"accepted\":8,\"completed\":8,\"syn_to_end_sum_s\":0.8}\n",
    );
    let (rows, _) = json_run(&["certes", "estimate", "--counters", &jsonl]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["dropped"], 2);
}

#[test]
fn bad_counters_files_are_named_by_file_line_and_column() {
    let dir = temp_dir("errors");
    // An unknown column lists the allowed ones.
    let file = write(
        &dir,
        "bad-column.csv",
        "t_start_s,drops,accepted,completed,syn_to_end_sum_s\n0,1,2,3,4\n",
    );
    let err = error_of(&["certes", "estimate", "--counters", &file]);
    assert!(err.contains("bad-column.csv, line 1"), "{err}");
    assert!(err.contains("unknown column `drops`"), "{err}");
    assert!(
        err.contains("allowed: t_start_s, interval, dropped"),
        "{err}"
    );

    // A cell that is not a count.
    let file = write(
        &dir,
        "bad-cell.csv",
        "t_start_s,dropped,accepted,completed,syn_to_end_sum_s\n0,1,2,3,4\n0.25,1,two,3,4\n",
    );
    let err = error_of(&["certes", "estimate", "--counters", &file]);
    assert!(
        err.contains("bad-cell.csv, line 3, column `accepted`"),
        "{err}"
    );

    // A missing required column.
    let file = write(
        &dir,
        "missing.jsonl",
        "{\"t_start_s\": 0, \"dropped\": 1}\n",
    );
    let err = error_of(&["certes", "estimate", "--counters", &file]);
    assert!(
        err.contains("missing.jsonl, line 1, column `accepted`: missing"),
        "{err}"
    );

    // Malformed JSON names its line and column.
    let file = write(&dir, "broken.jsonl", "{\"t_start_s\": 0,\n");
    let err = error_of(&["certes", "estimate", "--counters", &file]);
    assert!(err.contains("broken.jsonl, line 1, column"), "{err}");

    // A cumulative counter going backwards names the line and the column.
    let file = write(
        &dir,
        "backwards.csv",
        "t_start_s,dropped,accepted,completed,syn_to_end_sum_s\n\
         0,5,100,90,9\n0.25,6,110,100,10\n0.5,2,120,110,11\n",
    );
    let err = error_of(&["certes", "estimate", "--counters", &file, "--cumulative"]);
    assert!(
        err.contains("backwards.csv, line 4, column `dropped`"),
        "{err}"
    );
    assert!(err.contains("went backwards from 6 (line 3) to 2"), "{err}");

    // Time going backwards, or off the interval grid.
    let file = write(
        &dir,
        "order.csv",
        "t_start_s,dropped,accepted,completed,syn_to_end_sum_s\n0.5,0,1,1,1\n0.25,0,1,1,1\n",
    );
    let err = error_of(&["certes", "estimate", "--counters", &file]);
    assert!(
        err.contains("order.csv, line 3, column `t_start_s`"),
        "{err}"
    );
    let file = write(
        &dir,
        "grid.csv",
        "t_start_s,dropped,accepted,completed,syn_to_end_sum_s\n0,0,1,1,1\n0.125,0,1,1,1\n",
    );
    let err = error_of(&["certes", "estimate", "--counters", &file]);
    assert!(
        err.contains("grid.csv, line 3") && err.contains("grid"),
        "{err}"
    );

    // An interval the profile cannot resolve.
    let err = error_of(&[
        "certes",
        "estimate",
        "--counters",
        &write(&dir, "ok.csv", NO_DROPS_CSV),
        "--profile",
        "windows-9x-nt",
        "--interval",
        "3s",
    ]);
    assert!(
        err.contains("interval") && err.contains("first SYN timeout"),
        "{err}"
    );
    // Unknown profile, unknown format, bad options.
    let err = error_of(&[
        "certes",
        "estimate",
        "--counters",
        "x.csv",
        "--profile",
        "beos",
    ]);
    assert!(err.contains("beos") && err.contains("linux-6.5"), "{err}");
    let err = error_of(&[
        "certes",
        "estimate",
        "--counters",
        &write(&dir, "c.txt", ""),
    ]);
    assert!(err.contains("--format"), "{err}");
    let err = error_of(&[
        "certes",
        "estimate",
        "--counters",
        "x.csv",
        "--network-loss",
        "2",
    ]);
    assert!(err.contains("network loss"), "{err}");
    let err = error_of(&["certes", "estimate", "--counters", "/nonexistent/c.csv"]);
    assert!(err.contains("/nonexistent/c.csv"), "{err}");
    let err = error_of(&["certes", "estimate"]);
    assert!(
        err.contains("--counters") || err.contains("--trace"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// A synthetic server-side capture

const ORIGIN_NS: u64 = 1_700_000_000_000_000_000;
const SERVER_ISN: u32 = 70_000;

struct Exchange {
    port: u16,
    server_port: u16,
    /// Times of the client's SYNs (ms); the last is answered unless
    /// `answered` is false.
    syns: Vec<f64>,
    answered: bool,
    /// Last data (with FIN) this long after the answered SYN (ms).
    syn_to_end: f64,
    rtt: f64,
}

fn script(e: &Exchange) -> Vec<(f64, Tcp)> {
    let client = ("10.0.3.9", e.port);
    let server = ("10.0.0.2", e.server_port);
    let isn = 1000 + u32::from(e.port);
    let mut out: Vec<(f64, Tcp)> = e
        .syns
        .iter()
        .map(|t| {
            (
                *t,
                Tcp::new(client, server, isn, 0, SYN).options(syn_options(1460, 7, 1)),
            )
        })
        .collect();
    if !e.answered {
        return out;
    }
    let t = *e.syns.last().unwrap();
    out.push((
        t + 0.05,
        Tcp::new(server, client, SERVER_ISN, isn + 1, SYN | ACK),
    ));
    out.push((
        t + 0.05 + e.rtt,
        Tcp::new(client, server, isn + 1, SERVER_ISN + 1, ACK),
    ));
    out.push((
        t + 0.06 + e.rtt,
        Tcp::new(client, server, isn + 1, SERVER_ISN + 1, ACK | PSH)
            .payload(100)
            .ip_id(2),
    ));
    out.push((
        t + e.syn_to_end,
        Tcp::new(server, client, SERVER_ISN + 1, isn + 101, ACK | FIN)
            .payload(500)
            .ip_id(3),
    ));
    out.push((
        t + e.syn_to_end + e.rtt,
        Tcp::new(client, server, isn + 101, SERVER_ISN + 502, ACK | FIN).ip_id(4),
    ));
    out
}

fn write_capture(dir: &Path, name: &str, exchanges: &[Exchange], until_ms: f64) -> String {
    let mut all: Vec<(f64, Tcp)> = exchanges.iter().flat_map(script).collect();
    // A last packet of an unrelated flow keeps the capture going.
    all.push((
        until_ms,
        Tcp::new(("10.0.9.9", 5000), ("10.0.9.8", 6000), 1, 1, ACK),
    ));
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let pcap = Pcap {
        nanosecond: true,
        ..Pcap::ethernet()
    };
    let records: Vec<Record> = all
        .iter()
        .map(|(ms, tcp)| Record::new(ORIGIN_NS + (ms * 1e6).round() as u64, tcp.ethernet()))
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, pcap.file(&records)).unwrap();
    path.to_str().unwrap().to_string()
}

/// Known by construction: A gets in at once (0.1 s + 20 ms RTT), B after
/// one dropped SYN (1 s + 0.1 s + 20 ms), C after two (2 s + 0.1 s +
/// 20 ms), D never (gives up at the 21 s frustration timeout). The exact
/// mean is (0.12 + 1.12 + 2.12 + 21) / 4 = 6.09 s.
#[test]
fn capture_gives_exact_figures_beside_the_estimate() {
    let dir = temp_dir("capture");
    let linux = |start: f64, dropped: usize| -> Vec<f64> {
        (0..=dropped).map(|k| start + 1000.0 * k as f64).collect()
    };
    let exchanges = [
        Exchange {
            port: 41_000,
            server_port: 80,
            syns: linux(10.0, 0),
            answered: true,
            syn_to_end: 100.0,
            rtt: 20.0,
        },
        Exchange {
            port: 41_001,
            server_port: 80,
            syns: linux(300.0, 1),
            answered: true,
            syn_to_end: 100.0,
            rtt: 20.0,
        },
        Exchange {
            port: 41_002,
            server_port: 80,
            syns: linux(600.0, 2),
            answered: true,
            syn_to_end: 100.0,
            rtt: 20.0,
        },
        Exchange {
            port: 41_003,
            server_port: 80,
            syns: vec![
                700.0, 1700.0, 2700.0, 3700.0, 4700.0, 5700.0, 7700.0, 11_700.0, 19_700.0,
            ],
            answered: false,
            syn_to_end: 0.0,
            rtt: 0.0,
        },
    ];
    let file = write_capture(&dir, "server.pcap", &exchanges, 30_000.0);
    let (rows, summary) = json_run(&["certes", "estimate", "--trace", &file]);
    assert_eq!(rows.len(), 121, "30 s of 250 ms intervals, inclusive");
    for row in &rows {
        for field in FIELDS {
            assert!(row.get(*field).is_some(), "row lacks {field}: {row}");
        }
        assert!(row.get("exact_mean_s").is_some());
    }
    // The drops and accepts where the SYNs arrived.
    let dropped: u64 = rows.iter().map(|r| r["dropped"].as_u64().unwrap()).sum();
    let accepted: u64 = rows.iter().map(|r| r["accepted"].as_u64().unwrap()).sum();
    assert_eq!((dropped, accepted), (1 + 2 + 9, 3));
    // C completes at 2.7 s: interval 10, exact 2.12 s.
    assert_eq!(rows[10]["completed"], 1);
    assert!(close(&rows[10]["exact_mean_s"], 2.12), "{}", rows[10]);
    assert!(close(&rows[10]["syn_to_end_mean_s"], 0.1));
    assert!(close(&rows[10]["rtt_mean_s"], 0.02));
    // D gives up at 0.7 + 21 = 21.7 s: interval 86.
    assert_eq!(rows[86]["exact_gave_up"], 1);

    let exact = &summary["exact"];
    assert!(close(&exact["mean_s"], 6.09), "{summary}");
    assert_eq!(exact["completed"], 3);
    assert_eq!(exact["gave_up"], 1);
    assert_eq!(exact["unresolved"], 0);
    assert_eq!(exact["completed_by_retries"], serde_json::json!([1, 1, 1]));
    assert!(close(&summary["syn_to_end_mean_s"], 0.1));
    assert!(close(&summary["drop_rate"], 12.0 / 15.0));
    // The summary's difference is the estimate's against the exact mean.
    let estimate = summary["estimate_mean_s"].as_f64().unwrap();
    let difference = summary["relative_difference"].as_f64().unwrap();
    assert!(
        (difference - (estimate / 6.09 - 1.0)).abs() < 1e-6,
        "{summary}"
    );
    assert_eq!(summary["trace"]["connections"], 4);

    // The human output prints both figures.
    let out = vantage(&["certes", "estimate", "--trace", &file]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("exact, from each connection's own SYNs"),
        "{text}"
    );
    assert!(text.contains("6.0900 s"), "{text}");
}

/// Without drops the estimate equals the exact mean; `--by listener` runs
/// one estimator per listener; `--server` keeps one.
#[test]
fn capture_without_drops_classes_and_server_filter() {
    let dir = temp_dir("classes");
    let exchanges: Vec<Exchange> = (0..12u16)
        .map(|i| Exchange {
            port: 42_000 + i,
            server_port: if i % 3 == 0 { 8080 } else { 80 },
            syns: vec![100.0 * f64::from(i) + 5.0],
            answered: true,
            syn_to_end: 50.0 + 10.0 * f64::from(i % 4),
            rtt: 10.0,
        })
        .collect();
    let file = write_capture(&dir, "two-listeners.pcap", &exchanges, 3_000.0);
    let (_, summary) = json_run(&["certes", "estimate", "--trace", &file]);
    assert!(
        summary["relative_difference"].as_f64().unwrap().abs() < 1e-6,
        "{summary}"
    );
    assert_eq!(summary["exact"]["completed"], 12);

    let (rows, summary) = json_run(&["certes", "estimate", "--trace", &file, "--by", "listener"]);
    let classes: Vec<&str> = summary["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    assert_eq!(classes, vec!["10.0.0.2:80", "10.0.0.2:8080"]);
    assert!(rows.iter().all(|r| r["class"].is_string()));
    assert_eq!(summary["classes"][1]["completed"], 4);

    let (_, summary) = json_run(&[
        "certes",
        "estimate",
        "--trace",
        &file,
        "--server",
        "10.0.0.2:8080",
    ]);
    assert_eq!(summary["completed"], 4);
    let err = error_of(&[
        "certes",
        "estimate",
        "--trace",
        &file,
        "--server",
        "10.0.0.2:9999",
    ]);
    assert!(
        err.contains("no connection attempt to 10.0.0.2:9999"),
        "{err}"
    );
    let err = error_of(&["certes", "estimate", "--trace", &file, "--by", "colour"]);
    assert!(err.contains("source-prefix/N"), "{err}");
}

#[test]
fn hostile_counters_inputs_are_refused_with_clear_messages() {
    let dir = temp_dir("hostile");
    // An endless input: refused at the size cap, not read to its end.
    let err = error_of(&[
        "certes",
        "estimate",
        "--counters",
        "/dev/zero",
        "--format",
        "jsonl",
    ]);
    assert!(err.contains("larger than 256 MiB"), "{err}");
    // Two classes over 3,996,001 intervals: past the class-interval cap.
    let path = write(
        &dir,
        "far.csv",
        "t_start_s,class,dropped,accepted,completed,syn_to_end_sum_s\n0,a,1,1,1,0.1\n999000,a,1,1,1,0.1\n0,b,1,1,1,0.1\n",
    );
    let err = error_of(&["certes", "estimate", "--counters", &path]);
    assert!(
        err.contains(
            "2 classes (by the `class` column) × 3996001 intervals is more than the 4000000"
        ),
        "{err}"
    );
    // A sum beyond what a nanosecond count holds.
    let path = write(
        &dir,
        "sum.csv",
        "interval,dropped,accepted,completed,syn_to_end_sum_s\n0,1,1,1,1e12\n",
    );
    let err = error_of(&["certes", "estimate", "--counters", &path]);
    assert!(
        err.contains("column `syn_to_end_sum_s`: 1000000000000 s is more than"),
        "{err}"
    );
}

/// A served connection (0.12 s), one the server resets right after
/// accepting it, one refused, and one the client aborts 5 s after its SYN:
/// the reset and the refusal are failures left out of the mean, the abort
/// a failure whose wait is in it, and the mean is not pulled down by the
/// reset's 0.5 s "completion".
#[test]
fn resets_refusals_and_aborts_are_failures_not_fast_completions() {
    let dir = temp_dir("failures");
    let server = ("10.0.0.2", 80);
    let served = Exchange {
        port: 43_000,
        server_port: 80,
        syns: vec![10.0],
        answered: true,
        syn_to_end: 100.0,
        rtt: 20.0,
    };
    // Accepted, request sent, then reset by the server (t in ms).
    let accepted_then = |port: u16, start: f64| {
        let client = ("10.0.3.9", port);
        let isn = 1000 + u32::from(port);
        vec![
            (
                start,
                Tcp::new(client, server, isn, 0, SYN).options(syn_options(1460, 7, 1)),
            ),
            (
                start + 0.05,
                Tcp::new(server, client, SERVER_ISN, isn + 1, SYN | ACK),
            ),
            (
                start + 20.05,
                Tcp::new(client, server, isn + 1, SERVER_ISN + 1, ACK),
            ),
            (
                start + 20.06,
                Tcp::new(client, server, isn + 1, SERVER_ISN + 1, ACK | PSH)
                    .payload(100)
                    .ip_id(2),
            ),
        ]
    };
    let reset_client = ("10.0.3.9", 43_001);
    let mut all = script(&served);
    all.extend(accepted_then(43_001, 200.0));
    all.push((
        220.5,
        Tcp::new(server, reset_client, SERVER_ISN + 1, 0, RST),
    ));
    let refused_client = ("10.0.3.9", 43_002);
    all.push((
        300.0,
        Tcp::new(refused_client, server, 1000 + 43_002, 0, SYN).options(syn_options(1460, 7, 1)),
    ));
    all.push((
        300.1,
        Tcp::new(server, refused_client, 0, 1000 + 43_002 + 1, RST | ACK),
    ));
    let abort_client = ("10.0.3.9", 43_003);
    all.extend(accepted_then(43_003, 400.0));
    all.push((
        5400.0,
        Tcp::new(
            abort_client,
            server,
            1000 + 43_003 + 101,
            SERVER_ISN + 1,
            RST,
        )
        .ip_id(3),
    ));
    all.push((
        8000.0,
        Tcp::new(("10.0.9.9", 5000), ("10.0.9.8", 6000), 1, 1, ACK),
    ));
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let pcap = Pcap {
        nanosecond: true,
        ..Pcap::ethernet()
    };
    let records: Vec<Record> = all
        .iter()
        .map(|(ms, tcp)| Record::new(ORIGIN_NS + (ms * 1e6).round() as u64, tcp.ethernet()))
        .collect();
    let bytes = pcap.file(&records);
    let file = dir.join("failures.pcap");
    std::fs::write(&file, &bytes).unwrap();
    let file = file.to_str().unwrap();

    let (_, summary) = json_run(&["certes", "estimate", "--trace", file, "--server", ":80"]);
    let exact = &summary["exact"];
    assert_eq!(exact["completed"], 2, "{summary}");
    assert_eq!(exact["aborted"], 1);
    assert_eq!(exact["reset"], 1);
    assert_eq!(exact["refused"], 1);
    assert_eq!(exact["gave_up"], 0);
    assert_eq!(exact["failures"], 3);
    assert!(close(&exact["error_rate"], 0.75), "{summary}");
    // (0.12 + 5.02) / 2: the reset is not a 0.52 s transaction.
    assert!(close(&exact["mean_s"], 2.57), "{summary}");
    // The server's counters: three accepted, two completed.
    assert_eq!(summary["accepted"], 3);
    // The refused SYN: REFUSED, in the offered SYNs.
    assert_eq!(summary["refused"], 1);
    assert_eq!(summary["completed"], 2);
    assert!(close(&summary["syn_to_end_mean_s"], (0.1 + 5.0) / 2.0));

    let out = vantage(&["certes", "estimate", "--trace", file, "--server", ":80"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("failures: 3 (error rate 75.00 %): 1 refused, 1 reset by the server"),
        "{text}"
    );

    // Cut off in the middle of the last record: every complete packet is
    // read, a warning names the offset, and the exit status says so.
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let out = vantage(&[
        "certes",
        "estimate",
        "--trace",
        cut.to_str().unwrap(),
        "--server",
        ":80",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("cut.pcap: byte "), "{stderr}");
    assert!(
        stderr.contains("complete packets before it were read"),
        "{stderr}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["summary"]["exact"]["failures"], 3, "{summary}");
    assert!(summary["summary"]["trace"]["cut_off"].is_string());
}

/// 200,000 unanswered SYNs from distinct ports, 0.1 ms apart: more
/// connections than the table holds. Every SYN is counted as a drop, the
/// evictions are reported, and without `--server` the message counts the
/// SYNs instead of saying none was captured.
#[test]
fn a_flood_of_unanswered_syns_is_counted_and_its_evictions_reported() {
    let dir = temp_dir("flood");
    let server = ("10.0.0.2", 80);
    let syns = 200_000u32;
    let records: Vec<Record> = (0..syns)
        .map(|i| {
            let client = ("10.0.3.9", 1024 + (i % 64_000) as u16);
            let source = if i < 64_000 {
                client
            } else if i < 128_000 {
                ("10.0.3.10", client.1)
            } else if i < 192_000 {
                ("10.0.3.11", client.1)
            } else {
                ("10.0.3.12", client.1)
            };
            let tcp = Tcp::new(source, server, 1000 + i, 0, SYN).options(syn_options(1460, 7, 1));
            Record::new(ORIGIN_NS + u64::from(i) * 100_000, tcp.ethernet())
        })
        .collect();
    let pcap = Pcap {
        nanosecond: true,
        ..Pcap::ethernet()
    };
    let path = dir.join("flood.pcap");
    std::fs::write(&path, pcap.file(&records)).unwrap();
    let file = path.to_str().unwrap();

    let err = error_of(&["certes", "estimate", "--trace", file]);
    assert!(!err.contains("no SYN captured"), "{err}");
    assert!(err.contains("200000 connections opened by a SYN"), "{err}");

    let out = vantage(&[
        "certes", "estimate", "--trace", file, "--server", ":80", "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("half-open) finished early to keep the connection table within its cap"),
        "{stderr}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let summary = &summary["summary"];
    assert_eq!(summary["dropped"], u64::from(syns), "{summary}");
    assert!(summary["trace"]["connections_evicted"].as_u64().unwrap() > 0);
    assert_eq!(summary["trace"]["connections"], u64::from(syns));
}
