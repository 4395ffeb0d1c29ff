//! What the analysis prints: a row per transaction with its verdict, the
//! mean and standard deviation of each category per response-size class
//! (the tcpeval paper's Figures 4, 6 and 7), the histogram of packets on
//! the critical path (Figure 8), JSON Lines, and the arc chain of one
//! transaction (`--explain`).
//!
//! Size classes follow the paper's three files — 1 KB ("small files that
//! can fit within a single TCP packet"), 20 KB (the median Web file) and
//! 500 KB (large) — with boundaries at the geometric means between them,
//! rounded: 4 KiB and 100 KiB. Standard deviations are of the sample
//! (n − 1); the paper does not say which it used.
//!
//! Every output is a pure function of the [`Analysis`]: no clock, no hash
//! order, so the same input gives byte-identical output.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use vantage_core::Nanos;

use crate::profile::{Category, Transaction};
use crate::{Analysis, CpaError, Side};

/// Response-size classes: class `i` holds responses of at least
/// `boundaries[i - 1]` and less than `boundaries[i]` bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SizeClasses {
    boundaries: Vec<u64>,
}

impl Default for SizeClasses {
    fn default() -> SizeClasses {
        SizeClasses {
            boundaries: vec![4 * 1024, 100 * 1024],
        }
    }
}

impl SizeClasses {
    /// Classes split at `boundaries` (bytes, strictly increasing).
    pub fn new(boundaries: Vec<u64>) -> Result<SizeClasses, CpaError> {
        if boundaries.windows(2).any(|w| w[0] >= w[1]) || boundaries.first() == Some(&0) {
            return Err(CpaError::InvalidOption {
                name: "size_classes",
                problem: format!(
                    "boundaries must be positive and strictly increasing, got {boundaries:?}"
                ),
            });
        }
        Ok(SizeClasses { boundaries })
    }

    pub fn len(&self) -> usize {
        self.boundaries.len() + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn class_of(&self, bytes: u64) -> usize {
        self.boundaries.partition_point(|&b| b <= bytes)
    }

    /// `small (< 4 KiB)`, `medium (4 KiB – 100 KiB)`, `large (≥ 100 KiB)`
    /// for the default three classes; ranges otherwise.
    pub fn name(&self, class: usize) -> String {
        let range = match (
            class.checked_sub(1).and_then(|i| self.boundaries.get(i)),
            self.boundaries.get(class),
        ) {
            (None, Some(&high)) => format!("< {}", bytes(high)),
            (Some(&low), Some(&high)) => format!("{} – {}", bytes(low), bytes(high)),
            (Some(&low), None) => format!("≥ {}", bytes(low)),
            (None, None) => "all".to_string(),
        };
        if self.len() == 3 {
            let word = ["small", "medium", "large"][class.min(2)];
            format!("{word} ({range})")
        } else {
            range
        }
    }
}

fn bytes(value: u64) -> String {
    if value >= 1024 * 1024 && value.is_multiple_of(1024 * 1024) {
        format!("{} MiB", value / (1024 * 1024))
    } else if value >= 1024 && value.is_multiple_of(1024) {
        format!("{} KiB", value / 1024)
    } else {
        format!("{value} B")
    }
}

/// Mean and sample standard deviation, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    pub mean: f64,
    pub std_dev: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        let n = values.len();
        if n == 0 {
            return Spread::default();
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let std_dev = if n < 2 {
            0.0
        } else {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        };
        Spread { mean, std_dev }
    }
}

/// Figures 4, 6, 7: one response-size class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassAggregate {
    pub class: String,
    pub transactions: usize,
    /// Seconds.
    pub duration: Spread,
    /// Seconds, in [`Category::ALL`] order.
    pub categories: Vec<(Category, Spread)>,
    pub critical_path_packets: Spread,
}

/// Mean and standard deviation of each category per size class (classes
/// without transactions are left out).
pub fn aggregate(analysis: &Analysis, classes: &SizeClasses) -> Vec<ClassAggregate> {
    (0..classes.len())
        .filter_map(|class| {
            let members: Vec<&Transaction> = analysis
                .transactions
                .iter()
                .filter(|t| classes.class_of(t.response_bytes) == class)
                .collect();
            if members.is_empty() {
                return None;
            }
            let seconds = |f: &dyn Fn(&Transaction) -> Nanos| -> Vec<f64> {
                members.iter().map(|t| f(t).as_secs_f64()).collect()
            };
            Some(ClassAggregate {
                class: classes.name(class),
                transactions: members.len(),
                duration: Spread::of(&seconds(&|t| t.duration)),
                categories: Category::ALL
                    .iter()
                    .map(|&c| (c, Spread::of(&seconds(&|t| t.profile.get(c)))))
                    .collect(),
                critical_path_packets: Spread::of(
                    &members
                        .iter()
                        .map(|t| t.critical_path_packets as f64)
                        .collect::<Vec<_>>(),
                ),
            })
        })
        .collect()
}

/// Figure 8: how many packets the critical paths of one class had.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Histogram {
    pub class: String,
    /// Packets on the critical path → transactions.
    pub counts: BTreeMap<usize, usize>,
    pub minimum: usize,
    /// The most common count (the smallest, on ties).
    pub mode: usize,
    pub mean: f64,
}

/// The histogram of packets on the critical path per size class.
pub fn histogram(analysis: &Analysis, classes: &SizeClasses) -> Vec<Histogram> {
    (0..classes.len())
        .filter_map(|class| {
            let mut counts = BTreeMap::new();
            for t in &analysis.transactions {
                if classes.class_of(t.response_bytes) == class {
                    *counts.entry(t.critical_path_packets).or_insert(0) += 1;
                }
            }
            let minimum = *counts.keys().next()?;
            let mode = counts
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map_or(minimum, |(&packets, _)| packets);
            let total: usize = counts.values().sum();
            let mean = counts.iter().map(|(&p, &n)| (p * n) as f64).sum::<f64>() / total as f64;
            Some(Histogram {
                class: classes.name(class),
                counts,
                minimum,
                mode,
                mean,
            })
        })
        .collect()
}

fn ms(value: Nanos) -> String {
    format!("{:.3}", value.as_secs_f64() * 1e3)
}

/// One row per transaction: times in milliseconds, and the verdict.
pub fn render_table(analysis: &Analysis) -> String {
    let origin = analysis
        .transactions
        .iter()
        .map(|t| t.start)
        .min()
        .unwrap_or(Nanos::ZERO);
    // The column of loss repairs of unknown kind appears only when one
    // occurred.
    let unknown = analysis
        .transactions
        .iter()
        .any(|t| t.profile.loss_unknown > Nanos::ZERO);
    let unknown_cell = |value: String| {
        if unknown {
            format!(" {value:>9}")
        } else {
            String::new()
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>5} {:<24} {:<22} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}{} {:>4}  verdict",
        "#",
        "client",
        "server",
        "start s",
        "total ms",
        "bytes",
        "server",
        "client",
        "prop",
        "netvar",
        "loss-to",
        "loss-fr",
        unknown_cell("loss-?".to_string()),
        "pkts"
    );
    for t in &analysis.transactions {
        let p = &t.profile;
        let _ = writeln!(
            out,
            "{:>5} {:<24} {:<22} {:>10.3} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}{} {:>4}  {}{}",
            t.number,
            t.client.to_string(),
            t.server.to_string(),
            (t.start - origin).as_secs_f64(),
            ms(t.duration),
            t.response_bytes,
            ms(p.server),
            ms(p.client),
            ms(p.propagation),
            ms(p.network_variation),
            ms(p.loss_timeout),
            ms(p.loss_fast_retransmit),
            unknown_cell(ms(p.loss_unknown)),
            t.critical_path_packets,
            t.verdict,
            flag_notes(t),
        );
    }
    out
}

fn flag_notes(t: &Transaction) -> String {
    let f = &t.flags;
    let mut notes = Vec::new();
    if f.incomplete {
        notes.push("incomplete".to_string());
    }
    if f.pipelined {
        notes.push("pipelined".to_string());
    }
    if f.hidden_timeouts > 0 {
        notes.push(format!("{} hidden time-out(s)", f.hidden_timeouts));
    }
    if f.beyond_window > 0 {
        notes.push(format!("{} beyond window", f.beyond_window));
    }
    if f.unexplained_arcs > 0 {
        notes.push(format!("{} unexplained arc(s)", f.unexplained_arcs));
    }
    if notes.is_empty() {
        String::new()
    } else {
        format!(" [{}]", notes.join(", "))
    }
}

/// Figures 4/6/7 as a table: mean ± standard deviation in milliseconds.
pub fn render_aggregate(aggregates: &[ClassAggregate]) -> String {
    // Loss repairs of unknown kind get a column only when there were any.
    let shown = |category: Category| {
        category != Category::LossUnknown
            || aggregates.iter().any(|a| {
                a.categories
                    .iter()
                    .any(|(c, s)| *c == category && (s.mean != 0.0 || s.std_dev != 0.0))
            })
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>5} {:>17} {}",
        "class",
        "n",
        "total ms",
        Category::ALL
            .iter()
            .filter(|&&c| shown(c))
            .map(|c| format!("{:>19}", c.name()))
            .collect::<String>()
    );
    for a in aggregates {
        let cell = |s: &Spread| format!("{:.3}±{:.3}", s.mean * 1e3, s.std_dev * 1e3);
        let _ = writeln!(
            out,
            "{:<28} {:>5} {:>17} {}   packets {:.1}±{:.1}",
            a.class,
            a.transactions,
            cell(&a.duration),
            a.categories
                .iter()
                .filter(|(c, _)| shown(*c))
                .map(|(_, s)| format!("{:>19}", cell(s)))
                .collect::<String>(),
            a.critical_path_packets.mean,
            a.critical_path_packets.std_dev,
        );
    }
    out
}

/// Figure 8 as text bars.
pub fn render_histogram(histograms: &[Histogram]) -> String {
    let mut out = String::new();
    for h in histograms {
        let _ = writeln!(
            out,
            "packets on the critical path, {}: min {}, mode {}, mean {:.1}",
            h.class, h.minimum, h.mode, h.mean
        );
        let widest = h.counts.values().copied().max().unwrap_or(1).max(1);
        for (&packets, &count) in &h.counts {
            let bar = "#".repeat((count * 50).div_ceil(widest));
            let _ = writeln!(out, "  {packets:>4} {count:>6} {bar}");
        }
    }
    out
}

/// The whole text report: approximations, clock offset, transactions,
/// aggregate and histogram.
pub fn render(analysis: &Analysis, classes: &SizeClasses) -> String {
    let mut out = String::new();
    for note in &analysis.approximations {
        let _ = writeln!(out, "note: {note}");
    }
    if let Some(offset) = analysis.clock_offset {
        let _ = writeln!(
            out,
            "clock offset (server − client): {:.6} ms, {}",
            offset.server_minus_client_ns as f64 / 1e6,
            if offset.estimated {
                format!("estimated from {} host pair(s)", offset.pairs_used)
            } else {
                "given".to_string()
            }
        );
    }
    out.push_str(&render_table(analysis));
    if let Some(line) = failures_line(analysis) {
        out.push_str(&line);
    }
    if let Some(line) = stale_resends_line(analysis) {
        out.push_str(&line);
    }
    out.push('\n');
    out.push_str(&render_aggregate(&aggregate(analysis, classes)));
    out.push('\n');
    out.push_str(&render_histogram(&histogram(analysis, classes)));
    out
}

/// The failed connections, one line, when there were any: counted beside
/// the transactions, never among them.
pub fn failures_line(analysis: &Analysis) -> Option<String> {
    let f = &analysis.stats.failures;
    if f.total() == 0 {
        return None;
    }
    Some(format!(
        "failed connections (no transaction): {} — {} refused (SYN answered by RST), {} abandoned (SYNs never answered), {} reset by the server before a response, {} aborted by the client before a response\n",
        f.total(),
        f.refused,
        f.abandoned,
        f.reset_by_server,
        f.aborted_by_client
    ))
}

/// The stale re-sends, one line, when there were any: payload segments of
/// bytes already acknowledged, which no transaction includes.
pub fn stale_resends_line(analysis: &Analysis) -> Option<String> {
    let s = &analysis.stats.stale_resends;
    if s.segments() == 0 {
        return None;
    }
    Some(format!(
        "stale re-sends (bytes already acknowledged, starting or adding to no transaction): {} segments — {} from clients ({} bytes), {} from servers ({} bytes)\n",
        s.segments(),
        s.client_segments,
        s.client_bytes,
        s.server_segments,
        s.server_bytes
    ))
}

/// `vantage cpa --json`: the transactions (the objects of `--jsonl`) and
/// the analysis's counts as one pretty-printed document, keys sorted at
/// every level.
pub fn json_document(analysis: &Analysis) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    write_json_document(&mut out, analysis, 1).map_err(serde_json::Error::io)?;
    // serde_json writes only valid UTF-8.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// Transactions rendered per batch by [`write_json_document`].
const JSON_BATCH: usize = 1024;

/// [`json_document`] written as it is made, a batch of transactions at a
/// time (so memory does not grow with the document), each batch rendered
/// on `threads` threads (rayon's pool when more than 1).
///
/// The bytes are those of `serde_json::to_string_pretty` of the whole
/// document as a `serde_json::Value` (whose maps sort their keys): the
/// summary goes through a `Value`, each transaction through
/// [`SortedTransaction`] (the same fields declared in sorted order, which
/// spares building a `Value` per transaction); each is pretty-printed on
/// its own and indented to its depth (JSON strings hold no raw newline, so
/// indenting after every newline is exact).
pub fn write_json_document(
    mut out: impl std::io::Write,
    analysis: &Analysis,
    threads: usize,
) -> std::io::Result<()> {
    let render = |value: Result<serde_json::Value, serde_json::Error>,
                  indent: &str|
     -> Result<String, serde_json::Error> {
        let text = serde_json::to_string_pretty(&value?)?;
        Ok(text.replace('\n', &format!("\n{indent}")))
    };
    let summary = render(serde_json::to_value(&analysis.stats), "  ")?;
    write!(out, "{{\n  \"summary\": {summary},\n  \"transactions\": [")?;
    let transaction = |t: &Transaction| {
        let json = JsonTransaction::of(t);
        let text = serde_json::to_string_pretty(&SortedTransaction::of(&json))?;
        Ok(text.replace('\n', "\n    "))
    };
    let mut first = true;
    for batch in analysis.transactions.chunks(JSON_BATCH) {
        let rendered: Vec<Result<String, serde_json::Error>> = if threads > 1 {
            use rayon::prelude::*;
            batch.par_iter().map(transaction).collect()
        } else {
            batch.iter().map(transaction).collect()
        };
        for text in rendered {
            out.write_all(if first { b"\n    " } else { b",\n    " })?;
            out.write_all(text?.as_bytes())?;
            first = false;
        }
    }
    if first {
        write!(out, "]\n}}")
    } else {
        write!(out, "\n  ]\n}}")
    }
}

/// A [`JsonTransaction`] with its fields, and those of its nested objects,
/// declared in sorted key order: serialized directly it gives the same
/// text as through a `serde_json::Value`.
#[derive(Serialize)]
struct SortedTransaction<'a> {
    bytes: u64,
    client: &'a str,
    client_port: u16,
    client_s: f64,
    connection: u64,
    critical_path_packets: usize,
    duration_ns: u64,
    duration_s: f64,
    flags: SortedFlags,
    index_in_connection: usize,
    initial_window: [u32; 2],
    loss_fast_retransmit_s: f64,
    loss_timeout_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    loss_unknown_s: Option<f64>,
    losses_fast_retransmit: u32,
    losses_timeout: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    losses_unknown: Option<u32>,
    network_variation_s: f64,
    number: usize,
    profile_ns: SortedProfile,
    propagation_s: f64,
    request_bytes: u64,
    request_s: f64,
    response_s: f64,
    server: &'a str,
    server_s: f64,
    setup_s: f64,
    start_ns: u64,
    start_s: f64,
    teardown_s: f64,
    vantage: crate::Vantage,
    verdict: &'a str,
}

/// [`crate::Profile`] in sorted key order.
#[derive(Serialize)]
struct SortedProfile {
    client: Nanos,
    loss_fast_retransmit: Nanos,
    loss_timeout: Nanos,
    #[serde(skip_serializing_if = "Option::is_none")]
    loss_unknown: Option<Nanos>,
    network_variation: Nanos,
    propagation: Nanos,
    server: Nanos,
}

/// [`crate::TransactionFlags`] in sorted key order.
#[derive(Serialize)]
struct SortedFlags {
    beyond_window: u32,
    clamped_arcs: u32,
    hidden_timeouts: u32,
    incomplete: bool,
    pipelined: bool,
    teardown: bool,
    unexplained_arcs: u32,
}

impl<'a> SortedTransaction<'a> {
    fn of(t: &'a JsonTransaction<'a>) -> SortedTransaction<'a> {
        let p = t.profile_ns;
        let f = t.flags;
        SortedTransaction {
            bytes: t.bytes,
            client: &t.client,
            client_port: t.client_port,
            client_s: t.client_s,
            connection: t.connection,
            critical_path_packets: t.critical_path_packets,
            duration_ns: t.duration_ns,
            duration_s: t.duration_s,
            flags: SortedFlags {
                beyond_window: f.beyond_window,
                clamped_arcs: f.clamped_arcs,
                hidden_timeouts: f.hidden_timeouts,
                incomplete: f.incomplete,
                pipelined: f.pipelined,
                teardown: f.teardown,
                unexplained_arcs: f.unexplained_arcs,
            },
            index_in_connection: t.index_in_connection,
            initial_window: t.initial_window,
            loss_fast_retransmit_s: t.loss_fast_retransmit_s,
            loss_timeout_s: t.loss_timeout_s,
            loss_unknown_s: t.loss_unknown_s,
            losses_fast_retransmit: t.losses_fast_retransmit,
            losses_timeout: t.losses_timeout,
            losses_unknown: t.losses_unknown,
            network_variation_s: t.network_variation_s,
            number: t.number,
            profile_ns: SortedProfile {
                client: p.client,
                loss_fast_retransmit: p.loss_fast_retransmit,
                loss_timeout: p.loss_timeout,
                loss_unknown: (p.loss_unknown != Nanos::ZERO).then_some(p.loss_unknown),
                network_variation: p.network_variation,
                propagation: p.propagation,
                server: p.server,
            },
            propagation_s: t.propagation_s,
            request_bytes: t.request_bytes,
            request_s: t.request_s,
            response_s: t.response_s,
            server: &t.server,
            server_s: t.server_s,
            setup_s: t.setup_s,
            start_ns: t.start_ns,
            start_s: t.start_s,
            teardown_s: t.teardown_s,
            vantage: t.vantage,
            verdict: t.verdict,
        }
    }
}

/// The JSON object of one transaction (one line of `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct JsonTransaction<'a> {
    pub number: usize,
    pub client: String,
    pub server: String,
    pub client_port: u16,
    pub connection: u64,
    pub index_in_connection: usize,
    pub vantage: crate::Vantage,
    pub start_s: f64,
    pub duration_s: f64,
    /// Response bytes.
    pub bytes: u64,
    pub request_bytes: u64,
    pub server_s: f64,
    pub client_s: f64,
    pub propagation_s: f64,
    pub network_variation_s: f64,
    pub loss_timeout_s: f64,
    pub loss_fast_retransmit_s: f64,
    /// Present only when not zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_unknown_s: Option<f64>,
    pub critical_path_packets: usize,
    pub losses_timeout: u32,
    pub losses_fast_retransmit: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub losses_unknown: Option<u32>,
    pub setup_s: f64,
    pub request_s: f64,
    pub response_s: f64,
    pub teardown_s: f64,
    /// Exact values: the categories sum to `duration_ns`.
    pub start_ns: u64,
    pub duration_ns: u64,
    pub profile_ns: &'a crate::Profile,
    pub flags: &'a crate::TransactionFlags,
    pub initial_window: [u32; 2],
    pub verdict: &'a str,
}

impl<'a> JsonTransaction<'a> {
    pub fn of(t: &'a Transaction) -> JsonTransaction<'a> {
        let s = |n: Nanos| n.as_secs_f64();
        JsonTransaction {
            number: t.number,
            client: t.client.to_string(),
            server: t.server.to_string(),
            client_port: t.client_port(),
            connection: t.connection,
            index_in_connection: t.index_in_connection,
            vantage: t.vantage,
            start_s: s(t.start),
            duration_s: s(t.duration),
            bytes: t.response_bytes,
            request_bytes: t.request_bytes,
            server_s: s(t.profile.server),
            client_s: s(t.profile.client),
            propagation_s: s(t.profile.propagation),
            network_variation_s: s(t.profile.network_variation),
            loss_timeout_s: s(t.profile.loss_timeout),
            loss_fast_retransmit_s: s(t.profile.loss_fast_retransmit),
            loss_unknown_s: (t.profile.loss_unknown > Nanos::ZERO)
                .then(|| s(t.profile.loss_unknown)),
            critical_path_packets: t.critical_path_packets,
            losses_timeout: t.losses.timeout,
            losses_fast_retransmit: t.losses.fast_retransmit,
            losses_unknown: (t.losses.unknown > 0).then_some(t.losses.unknown),
            setup_s: s(t.phases.setup),
            request_s: s(t.phases.request),
            response_s: s(t.phases.response),
            teardown_s: s(t.phases.teardown),
            start_ns: t.start.0,
            duration_ns: t.duration.0,
            profile_ns: &t.profile,
            flags: &t.flags,
            initial_window: t.initial_window,
            verdict: &t.verdict,
        }
    }
}

/// `--json`: one object per transaction, one per line.
pub fn json_lines(analysis: &Analysis) -> String {
    let mut out = String::new();
    for t in &analysis.transactions {
        match serde_json::to_string(&JsonTransaction::of(t)) {
            Ok(line) => {
                out.push_str(&line);
                out.push('\n');
            }
            Err(error) => {
                // Only non-finite floats could fail; say so in the stream.
                let _ = writeln!(
                    out,
                    "{{\"number\":{},\"error\":{:?}}}",
                    t.number,
                    error.to_string()
                );
            }
        }
    }
    out
}

/// `--explain <n>`: the arc chain of transaction `number`, first event
/// first, each arc with its kind, weight and category.
pub fn explain(analysis: &Analysis, number: usize) -> Result<String, CpaError> {
    let t = analysis
        .transaction(number)
        .ok_or(CpaError::NoSuchTransaction {
            number,
            count: analysis.transactions.len(),
        })?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "transaction {}: {} -> {} (connection {}, exchange {} on it), {} capture",
        t.number,
        t.client,
        t.server,
        t.connection,
        t.index_in_connection + 1,
        match t.vantage {
            crate::Vantage::Both => "client and server",
            crate::Vantage::Server => "server",
            crate::Vantage::Client => "client",
        }
    );
    let _ = writeln!(
        out,
        "start {:.6} s, duration {} ms, request {} bytes, response {} bytes, {} packets on the critical path",
        t.start.as_secs_f64(),
        ms(t.duration),
        t.request_bytes,
        t.response_bytes,
        t.critical_path_packets
    );
    let _ = writeln!(
        out,
        "initial windows (segments): client {}, server {}; propagation used: c->s {} ms, s->c {} ms",
        t.initial_window[0],
        t.initial_window[1],
        ms(t.propagation_used[0]),
        ms(t.propagation_used[1])
    );
    let event = |node: &crate::PathNode| {
        format!(
            "{:<6} {:<8} {}{}",
            node.side.name(),
            if node.departure { "sends" } else { "receives" },
            node.packet,
            if node.observed { "" } else { " [placed]" }
        )
    };
    if let Some(first) = t.path.first() {
        let _ = writeln!(out, "  {:>12} ms  {}", ms(Nanos::ZERO), event(&first.from));
    } else {
        let _ = writeln!(out, "  (a single event)");
    }
    for arc in &t.path {
        let split = if arc.propagation > Nanos::ZERO {
            format!(
                "propagation {} + {} {}",
                ms(arc.propagation),
                arc.category.name(),
                ms(arc.duration - arc.propagation)
            )
        } else {
            format!("{} {}", arc.category.name(), ms(arc.duration))
        };
        let _ = writeln!(
            out,
            "  {:>12} ms  {:<60}  <- {} [{}]: {}{}",
            ms(arc.to.time - t.start),
            event(&arc.to),
            arc.kind.name(),
            arc.phase.name(),
            split,
            if arc.clamped { " (clamped)" } else { "" }
        );
    }
    let p = &t.profile;
    let _ = write!(
        out,
        "profile (ms): server {}, client {}, propagation {}, network variation {}, loss time-out {}, loss fast retransmit {}",
        ms(p.server),
        ms(p.client),
        ms(p.propagation),
        ms(p.network_variation),
        ms(p.loss_timeout),
        ms(p.loss_fast_retransmit)
    );
    if p.loss_unknown > Nanos::ZERO {
        let _ = write!(out, ", loss of unknown kind {}", ms(p.loss_unknown));
    }
    out.push('\n');
    let ph = &t.phases;
    let _ = writeln!(
        out,
        "phases (ms): set-up {}, request {}, response {}, tear-down {}",
        ms(ph.setup),
        ms(ph.request),
        ms(ph.response),
        ms(ph.teardown)
    );
    let _ = writeln!(out, "verdict: {}{}", t.verdict, flag_notes(t));
    Ok(out)
}

/// The side of a transaction that its verdict blames, if an endpoint.
pub fn blamed_side(t: &Transaction) -> Option<Side> {
    let p = &t.profile;
    let largest = Category::ALL.iter().copied().max_by_key(|&c| p.get(c))?;
    match largest {
        Category::Server => Some(Side::Server),
        Category::Client => Some(Side::Client),
        _ => None,
    }
}
