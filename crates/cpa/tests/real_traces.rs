//! Every transaction of every shared real trace (Zeek's and tcptrace's test
//! captures), analysed as a server capture, as a client capture, and as
//! both (the same file on both sides: zero delays, zero offset): the six
//! categories sum to the duration exactly, the profile is sane, and the
//! output is the same byte for byte on every run.

mod common;

use std::path::{Path, PathBuf};

use common::trace_files;
use vantage_core::Nanos;
use vantage_cpa::{
    analyze, plot, report, Analysis, Category, CpaError, Inputs, Options, SizeClasses, Teardown,
    Transaction, Vantage,
};

fn traces() -> Vec<PathBuf> {
    let mut all = trace_files("zeek");
    all.extend(trace_files("tcptrace"));
    all
}

fn inputs(path: &Path, vantage: Vantage) -> Inputs {
    let file = Some(path.to_path_buf());
    match vantage {
        Vantage::Server => Inputs {
            server: file,
            client: None,
        },
        Vantage::Client => Inputs {
            server: None,
            client: file,
        },
        Vantage::Both => Inputs {
            server: file.clone(),
            client: file,
        },
    }
}

fn check_sane(path: &Path, vantage: Vantage, t: &Transaction) {
    let context = format!(
        "{} as {vantage:?}, transaction {}",
        path.display(),
        t.number
    );
    assert_eq!(
        t.profile.total(),
        t.duration,
        "{context}: categories do not sum"
    );
    let phases = t.phases.setup + t.phases.request + t.phases.response + t.phases.teardown;
    assert_eq!(phases, t.duration, "{context}: phases do not sum");
    for category in Category::ALL {
        assert!(
            t.profile.get(category) <= t.duration,
            "{context}: {category:?}"
        );
    }
    assert!(!t.verdict.is_empty(), "{context}");
    assert!(t.critical_path_packets >= 1, "{context}");
    if let (Some(first), Some(last)) = (t.path.first(), t.path.last()) {
        assert_eq!(
            first.from.time, t.start,
            "{context}: path starts at the start"
        );
        assert_eq!(
            last.to.time,
            t.start + t.duration,
            "{context}: path ends at the end"
        );
    } else {
        assert_eq!(t.duration, Nanos::ZERO, "{context}");
    }
    for pair in t.path.windows(2) {
        assert_eq!(pair[0].to, pair[1].from, "{context}: the path is a chain");
    }
    for arc in &t.path {
        assert_eq!(arc.duration, arc.to.time - arc.from.time, "{context}");
        assert!(arc.to.time >= arc.from.time, "{context}: time runs forward");
        assert!(arc.propagation <= arc.duration, "{context}");
    }
    let losses = (t.profile.loss_timeout > Nanos::ZERO) as u32
        + (t.profile.loss_fast_retransmit > Nanos::ZERO) as u32;
    assert!(
        t.losses.total() >= losses,
        "{context}: loss time needs a loss arc"
    );
}

#[test]
fn every_transaction_of_every_trace_conserves_its_duration() {
    let files = traces();
    if files.is_empty() {
        return;
    }
    let mut total = 0;
    for path in &files {
        for vantage in [Vantage::Server, Vantage::Client, Vantage::Both] {
            for teardown in [Teardown::Prompt, Teardown::Always, Teardown::Never] {
                let options = Options {
                    teardown,
                    keep_packets: true,
                    ..Options::default()
                };
                let analysis = analyze(&inputs(path, vantage), &options)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                for t in &analysis.transactions {
                    check_sane(path, vantage, t);
                    if vantage == Vantage::Both {
                        // The same capture on both sides: nothing takes time
                        // on the network.
                        assert_eq!(t.profile.propagation, Nanos::ZERO);
                    }
                }
                total += analysis.transactions.len();
            }
        }
    }
    eprintln!("{total} transactions checked");
    assert!(total > 1000);
}

#[test]
fn http_traces_give_the_expected_transactions() {
    let Some(root) = common::shared_traces() else {
        return;
    };
    let count = |file: &str, vantage: Vantage| {
        analyze(&inputs(&root.join(file), vantage), &Options::default())
            .unwrap()
            .transactions
            .len()
    };
    // One connection, 1000 requests, one response dropped by the capture.
    let thousand = count(
        "zeek/http_1000-requests-one-dropped-response.pcap.gz",
        Vantage::Server,
    );
    assert!((999..=1000).contains(&thousand), "{thousand}");
    assert_eq!(count("zeek/http_get.pcap", Vantage::Client), 1);
    // tcptrace's HTTP trace: 61 connections, some persistent.
    let http = count("tcptrace/http.dmp.gz", Vantage::Client);
    assert!(http > 61, "{http}");
}

fn render_everything(analysis: &Analysis) -> String {
    let mut out = report::render(analysis, &SizeClasses::default());
    out.push_str(&report::json_lines(analysis));
    for t in &analysis.transactions {
        out.push_str(&report::explain(analysis, t.number).unwrap());
        out.push_str(&plot::timeline_svg(t).unwrap());
        out.push_str(&plot::sequence_svg(t).unwrap());
    }
    out
}

#[test]
fn output_is_byte_identical_across_runs() {
    for path in traces() {
        for vantage in [Vantage::Server, Vantage::Both] {
            let options = Options {
                keep_packets: true,
                ..Options::default()
            };
            let first = render_everything(&analyze(&inputs(&path, vantage), &options).unwrap());
            let second = render_everything(&analyze(&inputs(&path, vantage), &options).unwrap());
            assert!(
                first == second,
                "{} as {vantage:?} differs between runs",
                path.display()
            );
        }
    }
}

/// The analysis on a second thread (started at once here, so even these
/// small traces take that path) gives the same bytes as one thread, and
/// the `--json` document written in parallel batches is the one
/// `serde_json` makes of the whole document as a value.
#[test]
fn two_threads_give_the_same_bytes_as_one() {
    for path in traces() {
        for vantage in [Vantage::Server, Vantage::Client, Vantage::Both] {
            let one = Options {
                threads: 1,
                keep_packets: true,
                ..Options::default()
            };
            let two = Options {
                threads: 2,
                parallel_after_packets: 0,
                ..one.clone()
            };
            let what = format!("{} as {vantage:?}", path.display());
            let (first, second) = match (
                analyze(&inputs(&path, vantage), &one),
                analyze(&inputs(&path, vantage), &two),
            ) {
                (Ok(first), Ok(second)) => (first, second),
                (first, second) => {
                    assert_eq!(
                        first.err().map(|e| e.to_string()),
                        second.err().map(|e| e.to_string()),
                        "{what}"
                    );
                    continue;
                }
            };
            assert!(
                render_everything(&first) == render_everything(&second),
                "{what}: two threads differ from one"
            );
            let mut parallel = Vec::new();
            report::write_json_document(&mut parallel, &second, 2).unwrap();
            let transactions: Vec<_> = second
                .transactions
                .iter()
                .map(report::JsonTransaction::of)
                .collect();
            let whole = serde_json::to_string_pretty(&serde_json::json!({
                "transactions": transactions,
                "summary": second.stats,
            }))
            .unwrap();
            assert!(
                String::from_utf8(parallel).unwrap() == whole,
                "{what}: --json differs from serde_json's document"
            );
            assert_eq!(report::json_document(&first).unwrap(), whole, "{what}");
        }
    }
}

#[test]
fn json_lines_carry_the_required_fields() {
    let Some(root) = common::shared_traces() else {
        return;
    };
    let analysis = analyze(
        &inputs(&root.join("tcptrace/http.dmp.gz"), Vantage::Client),
        &Options::default(),
    )
    .unwrap();
    let text = report::json_lines(&analysis);
    assert_eq!(text.lines().count(), analysis.transactions.len());
    for (line, t) in text.lines().zip(&analysis.transactions) {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in [
            "client",
            "server",
            "start_s",
            "duration_s",
            "bytes",
            "server_s",
            "client_s",
            "propagation_s",
            "network_variation_s",
            "loss_timeout_s",
            "loss_fast_retransmit_s",
            "critical_path_packets",
            "client_port",
            "verdict",
        ] {
            assert!(value.get(key).is_some(), "missing {key} in {line}");
        }
        let profile = &value["profile_ns"];
        let sum: u64 = [
            "server",
            "client",
            "propagation",
            "network_variation",
            "loss_timeout",
            "loss_fast_retransmit",
        ]
        .iter()
        .map(|k| profile[k].as_u64().unwrap())
        .sum();
        assert_eq!(sum, value["duration_ns"].as_u64().unwrap());
        let seconds: f64 = [
            "server_s",
            "client_s",
            "propagation_s",
            "network_variation_s",
            "loss_timeout_s",
            "loss_fast_retransmit_s",
        ]
        .iter()
        .map(|k| value[k].as_f64().unwrap())
        .sum();
        assert!((seconds - value["duration_s"].as_f64().unwrap()).abs() < 1e-6);
        assert_eq!(value["client"].as_str().unwrap(), t.client.to_string());
    }
}

#[test]
fn explain_lists_the_arc_chain_and_plots_need_their_inputs() {
    let Some(root) = common::shared_traces() else {
        return;
    };
    let analysis = analyze(
        &inputs(&root.join("zeek/http_get.pcap"), Vantage::Client),
        &Options::default(),
    )
    .unwrap();
    let t = &analysis.transactions[0];
    let text = report::explain(&analysis, 1).unwrap();
    assert_eq!(text.matches(" <- ").count(), t.path.len());
    assert!(text.contains("verdict: "));
    assert!(matches!(
        report::explain(&analysis, 0),
        Err(CpaError::NoSuchTransaction {
            number: 0,
            count: 1
        })
    ));
    assert!(matches!(
        report::explain(&analysis, 2),
        Err(CpaError::NoSuchTransaction {
            number: 2,
            count: 1
        })
    ));
    let svg = plot::timeline_svg(t).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("client") && svg.contains("server"));
    assert!(matches!(
        plot::sequence_svg(t),
        Err(CpaError::PacketsNotKept { number: 1 })
    ));
    let kept = analyze(
        &inputs(&root.join("zeek/http_get.pcap"), Vantage::Client),
        &Options {
            keep_packets: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(plot::sequence_svg(&kept.transactions[0])
        .unwrap()
        .starts_with("<svg"));
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    assert!(matches!(
        analyze(&Inputs::default(), &Options::default()),
        Err(CpaError::NoInput)
    ));
    let missing = Inputs {
        server: Some(PathBuf::from("/nonexistent/trace.pcap")),
        client: None,
    };
    assert!(matches!(
        analyze(&missing, &Options::default()),
        Err(CpaError::Trace { side: "server", .. })
    ));
    let garbage = common::TempFile::new("garbage.pcap", b"this is not a capture file at all");
    let garbage_inputs = Inputs {
        server: None,
        client: Some(garbage.path.clone()),
    };
    assert!(analyze(&garbage_inputs, &Options::default()).is_err());
    let zero_window = Options {
        initial_window: Some(0),
        ..Options::default()
    };
    assert!(matches!(
        analyze(&missing, &zero_window),
        Err(CpaError::InvalidOption {
            name: "initial_window",
            ..
        })
    ));
}

#[test]
fn throughput_on_the_largest_trace() {
    let Some(largest) = traces()
        .into_iter()
        .max_by_key(|p| vantage_trace::summarize(p).map_or(0, |s| s.packets))
    else {
        return;
    };
    for vantage in [Vantage::Server, Vantage::Both] {
        let started = std::time::Instant::now();
        let analysis = analyze(&inputs(&largest, vantage), &Options::default()).unwrap();
        let seconds = started.elapsed().as_secs_f64();
        let packets: u64 = analysis.stats.inputs.iter().map(|i| i.packets).sum();
        eprintln!(
            "{} as {vantage:?}: {packets} packets in {seconds:.3} s = {:.0} packets/s",
            largest.display(),
            packets as f64 / seconds
        );
    }
}
