//! The experiment's numbers: one row per variant, the goal beside ours,
//! the step responses; a table for people, JSON, one SVG.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde::Serialize;
use vantage_core::tcp::throughput::PathEstimate;
use vantage_testbed::wan::WanStats;

use super::client::{DownloadRecord, Outcome};
use super::downloads::{self, DownloadRow, SlotProgress, StallSummary};
use super::plan::{Mode, ResourcesLivePlan, StepPlan, VariantPlan};
use super::sampler::{BufferSample, MemorySample, Sampled};
use crate::provenance::RunRecord;
use crate::report::svg::{padded_bounds, DrawError, PALETTE};
use crate::{LabError, ScenarioFile};

/// The goal: SSBT's peak at most this share of autotune's …
pub const GOAL_MEMORY_SHARE: f64 = 0.50;
/// … with at least this share of its goodput.
pub const GOAL_GOODPUT_SHARE: f64 = 0.95;
/// Step (a): 90 % of the new target within this many intervals.
pub const GOAL_STEP_INTERVALS: u32 = 3;
/// Step (b): regrown within this many intervals of reuse.
pub const GOAL_REGROW_INTERVALS: u32 = 2;
/// "Reached" means at least this share of the target.
pub const REACHED_SHARE: f64 = 0.90;

/// The server namespace's counters reported per variant: time-outs and
/// their kinds, retransmissions the kernel could not send (a send buffer
/// smaller than what lower layers still hold of the socket's segments
/// refuses a retransmission: `TCPRetransFail`), SYN cookies and listener
/// overflows (a backlog too small for the clients' connects).
pub const KERNEL_COUNTERS: [&str; 9] = [
    "Tcp.RetransSegs",
    "TcpExt.TCPTimeouts",
    "TcpExt.TCPLossProbes",
    "TcpExt.TCPSpuriousRTOs",
    "TcpExt.TCPRetransFail",
    "TcpExt.TCPFastRetrans",
    "TcpExt.TCPSlowStartRetrans",
    "TcpExt.SyncookiesSent",
    "TcpExt.ListenOverflows",
];

/// [`KERNEL_COUNTERS`] over a variant: after − before (a counter missing
/// on this kernel is left out).
pub fn kernel_counter_deltas(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    KERNEL_COUNTERS
        .iter()
        .filter_map(|name| {
            let a = after.get(*name)?;
            let b = before.get(*name).copied().unwrap_or(0);
            Some((name.to_string(), a.saturating_sub(b)))
        })
        .collect()
}

/// One variant's run.
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    pub variant: String,
    pub mode: String,
    /// The ssbt pool, bytes.
    pub pool_bytes: Option<u64>,
    pub started: u32,
    pub completed: u32,
    pub failed: u32,
    /// Failures by kind (connect-failed, broken, bad-status, stalled).
    pub failures: BTreeMap<String, u32>,
    /// Objects received whole.
    pub objects: u64,
    /// Body bytes at the clients over the run's length, Mbit/s.
    pub goodput_mbps: f64,
    /// Per-download goodput (bytes over its active time), Mbit/s.
    pub download_p10_mbps: f64,
    pub download_p50_mbps: f64,
    /// Kernel TCP memory of the proxy's sockets, bytes.
    pub peak_proxy_bytes: u64,
    pub mean_proxy_bytes: f64,
    /// Of which client-facing, at the peak sample.
    pub peak_proxy_client_bytes: u64,
    pub peak_proxy_sockets: u32,
    /// `/proc/net/sockstat` TCP `mem` (all namespaces: clients included).
    pub peak_host_tcp_bytes: u64,
    pub mean_host_tcp_bytes: f64,
    pub run_s: f64,
    /// The same numbers per path.
    pub paths: Vec<PathRow>,
    /// The host's TCP memory reached 90 % of `tcp_mem`'s hard limit and
    /// the downloads were stopped there (`run_s` is then shorter).
    pub stopped_at_host_guard: bool,
    /// The stalled downloads, from the per-download records.
    pub stalls: StallSummary,
    /// Samples of client connections beyond the trace cap.
    pub untraced_samples: u64,
    /// The server namespace's TCP counters over the variant (after −
    /// before), those of [`KERNEL_COUNTERS`].
    pub kernel_counters: BTreeMap<String, u64>,
    pub samples: Vec<MemorySample>,
    /// One per download; written to `downloads.jsonl`, not `report.json`.
    #[serde(skip)]
    pub downloads: Vec<DownloadRow>,
}

/// One path's downloads in one run.
#[derive(Clone, Debug, Serialize)]
pub struct PathRow {
    pub rtt_ms: f64,
    pub loss_pct: f64,
    pub rate_mbit: f64,
    pub started: u32,
    pub failed: u32,
    /// Downloads that received no body byte at all.
    pub without_a_byte: u32,
    /// Body bytes over the run's length, Mbit/s.
    pub goodput_mbps: f64,
    /// Packets the path holds (its bandwidth-delay product plus its
    /// bottleneck queue, 1500-byte packets) per download: below about 4 a
    /// flow cannot keep the segments in flight that three duplicate ACKs
    /// need, and its losses are recovered by time-outs.
    pub packets_per_download: f64,
    /// Jain's index over the downloads' body bytes (`None`: no bytes).
    pub jain_bytes: Option<f64>,
    /// Per 10-s slot, downloads running through it and moving in it.
    pub progress: Vec<SlotProgress>,
}

/// One SSBT variant against autotune.
#[derive(Clone, Debug, Serialize)]
pub struct GoalRow {
    pub variant: String,
    /// Its peak over autotune's peak (proxy sockets).
    pub memory_share: f64,
    /// Its goodput over autotune's.
    pub goodput_share: f64,
    pub memory_met: bool,
    pub goodput_met: bool,
    /// Downloads that failed or stalled in this variant.
    pub failed: u32,
}

/// One connection of the step run.
#[derive(Clone, Debug, Serialize)]
pub struct StepConnection {
    pub peer: String,
    /// Its send buffer just before the loss changed (median of the last
    /// second), bytes.
    pub buffer_before_change: u64,
    /// E-ATBT's target for the new path (median over the after phase),
    /// bytes held.
    pub target_after: u64,
    /// Intervals from the change until the buffer held ≥ 90 % of the
    /// target; `None`: never within the phase.
    pub intervals_to_target: Option<u32>,
    /// Its send buffer at the end of the idle phase, bytes.
    pub buffer_before_reuse: u64,
    /// Intervals from the reuse until ≥ 90 % of the target again.
    pub intervals_to_regrow: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    pub plan: StepPlan,
    pub interval_ms: u64,
    pub change_s: f64,
    pub pause_s: f64,
    pub resume_s: f64,
    pub started: u32,
    pub failed: u32,
    pub connections: Vec<StepConnection>,
    /// The slowest connection (`None` if one never reached its target).
    pub worst_intervals_to_target: Option<u32>,
    pub worst_intervals_to_regrow: Option<u32>,
    pub target_met: bool,
    pub regrow_met: bool,
    pub samples: Vec<BufferSample>,
}

/// Whether every packet went through the emulator.
#[derive(Clone, Debug, Serialize)]
pub struct WanSummary {
    pub packets: u64,
    pub packets_per_s: f64,
    pub cpu_s: f64,
    pub kernel_overflows: u64,
    pub kernel_bypassed_packets: u64,
    pub release_lateness_p99_us: f64,
}

impl WanSummary {
    pub fn from_stats(s: &WanStats) -> WanSummary {
        WanSummary {
            packets: s.packets_seen(),
            packets_per_s: s.packets_seen() as f64 / s.elapsed_s.max(1e-9),
            cpu_s: s.cpu_s,
            kernel_overflows: s.kernel_overflows,
            kernel_bypassed_packets: s.kernel_bypassed_packets,
            release_lateness_p99_us: s.release_lateness_p99_us,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ResourcesReport {
    pub experiment: String,
    pub quick: bool,
    pub downloads: u32,
    pub paths: usize,
    pub rows: Vec<RunRow>,
    pub goal: Vec<GoalRow>,
    pub step: StepReport,
    pub wan: WanSummary,
    /// 1-minute load average at the end.
    pub load_average: Option<f64>,
    pub duration_s: f64,
    /// No byte for this long: a stalled download, seconds.
    pub stall_s: f64,
}

/// Exact order statistic (nearest rank) of `values`, 0 when empty.
pub(super) fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

fn outcome_name(o: Outcome) -> String {
    serde_json::to_value(o)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{o:?}"))
}

/// One variant's row from its downloads and samples.
pub fn summarize(
    variant: &VariantPlan,
    pool: Option<u64>,
    mode: &Mode,
    downloads: &[DownloadRecord],
    sampled: Sampled,
    run_s: f64,
) -> RunRow {
    let Sampled {
        memory: samples,
        connections,
        untraced_samples,
    } = sampled;
    let rows = downloads::rows(&variant.name, &mode.paths, downloads, &connections);
    drop(connections);
    let mut failures = BTreeMap::new();
    for d in downloads.iter().filter(|d| d.outcome.is_failure()) {
        *failures.entry(outcome_name(d.outcome)).or_insert(0) += 1;
    }
    let failed: u32 = failures.values().sum();
    let bytes: u64 = downloads.iter().map(|d| d.bytes).sum();
    let mut rates: Vec<f64> = downloads.iter().map(|d| d.goodput_bps() / 1e6).collect();
    let peak = samples.iter().max_by_key(|s| s.proxy_bytes);
    let mean = |f: &dyn Fn(&MemorySample) -> u64| {
        if samples.is_empty() {
            0.0
        } else {
            samples.iter().map(|s| f(s) as f64).sum::<f64>() / samples.len() as f64
        }
    };
    RunRow {
        variant: variant.name.clone(),
        mode: variant.mode.clone(),
        pool_bytes: pool,
        started: downloads.len() as u32,
        completed: downloads.len() as u32 - failed,
        failed,
        failures,
        objects: downloads.iter().map(|d| d.objects).sum(),
        goodput_mbps: bytes as f64 * 8.0 / run_s.max(1e-9) / 1e6,
        download_p10_mbps: quantile(&mut rates, 0.10),
        download_p50_mbps: quantile(&mut rates, 0.50),
        peak_proxy_bytes: peak.map_or(0, |s| s.proxy_bytes),
        mean_proxy_bytes: mean(&|s| s.proxy_bytes),
        peak_proxy_client_bytes: peak.map_or(0, |s| s.proxy_client_bytes),
        peak_proxy_sockets: samples.iter().map(|s| s.proxy_sockets).max().unwrap_or(0),
        peak_host_tcp_bytes: samples.iter().map(|s| s.host_tcp_bytes).max().unwrap_or(0),
        mean_host_tcp_bytes: mean(&|s| s.host_tcp_bytes),
        run_s,
        paths: mode
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mine: Vec<&DownloadRecord> = downloads.iter().filter(|d| d.path == i).collect();
                let mine_rows: Vec<&DownloadRow> = rows.iter().filter(|d| d.path == i).collect();
                let bytes: Vec<u64> = mine.iter().map(|d| d.bytes).collect();
                PathRow {
                    rtt_ms: p.rtt_ms,
                    loss_pct: p.loss_pct,
                    rate_mbit: p.rate_mbit,
                    started: mine.len() as u32,
                    failed: mine.iter().filter(|d| d.outcome.is_failure()).count() as u32,
                    without_a_byte: mine.iter().filter(|d| d.bytes == 0).count() as u32,
                    goodput_mbps: mine.iter().map(|d| d.bytes).sum::<u64>() as f64 * 8.0
                        / run_s.max(1e-9)
                        / 1e6,
                    packets_per_download: p.packets_held() / f64::from(p.downloads.max(1)),
                    jain_bytes: downloads::jain_index(&bytes),
                    progress: downloads::progress_per_slot(&mine_rows),
                }
            })
            .collect(),
        stopped_at_host_guard: false,
        stalls: downloads::stall_summary(&rows),
        untraced_samples,
        kernel_counters: BTreeMap::new(),
        samples,
        downloads: rows,
    }
}

/// SSBT's variants against the first autotune row.
fn goals(rows: &[RunRow]) -> Vec<GoalRow> {
    let Some(autotune) = rows.iter().find(|r| r.mode == "autotune") else {
        return Vec::new();
    };
    rows.iter()
        .filter(|r| r.mode.starts_with("ssbt"))
        .map(|r| {
            let memory_share =
                r.peak_proxy_bytes as f64 / (autotune.peak_proxy_bytes as f64).max(1.0);
            let goodput_share = r.goodput_mbps / autotune.goodput_mbps.max(1e-9);
            GoalRow {
                variant: r.variant.clone(),
                memory_share,
                goodput_share,
                memory_met: memory_share <= GOAL_MEMORY_SHARE,
                goodput_met: goodput_share >= GOAL_GOODPUT_SHARE,
                failed: r.failed,
            }
        })
        .collect()
}

/// E-ATBT's held target for a connection sampled at `s`, at `loss_pct`.
fn target(s: &BufferSample, loss_pct: f64, send_max: u64) -> Option<u64> {
    let path = PathEstimate {
        rtt_secs: s.rtt_s.max(1e-6),
        rto_secs: s.rto_s,
        loss: loss_pct / 100.0,
        max_window_segments: s.window_segments,
    };
    vantage_live::proxy::resources::unconstrained_send_target(&path, s.mss, send_max).ok()
}

fn median_u64(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

/// Intervals from `from_s` until the first sample in `[from_s, to_s)`
/// holding ≥ 90 % of its target.
fn intervals_until_reached(
    samples: &[&BufferSample],
    from_s: f64,
    to_s: f64,
    loss_pct: f64,
    send_max: u64,
    interval_s: f64,
) -> Option<u32> {
    samples
        .iter()
        .filter(|s| s.t_s >= from_s && s.t_s < to_s)
        .find(|s| {
            target(s, loss_pct, send_max)
                .is_some_and(|t| s.send_buffer as f64 >= REACHED_SHARE * t as f64)
        })
        .map(|s| ((s.t_s - from_s) / interval_s).ceil().max(0.0) as u32)
}

/// The step run's report.
pub fn step_report(
    plan: &StepPlan,
    interval_ms: u64,
    change_s: f64,
    pause_s: f64,
    resume_s: f64,
    downloads: &[DownloadRecord],
    samples: Vec<BufferSample>,
) -> StepReport {
    let send_max = vantage_sys::tcp_info::wmem_max().map_or(u64::MAX, |m| 2 * m);
    let interval_s = interval_ms as f64 / 1e3;
    let end_s = samples.iter().map(|s| s.t_s).fold(0.0, f64::max) + 1.0;
    let mut peers: Vec<_> = samples.iter().map(|s| s.peer).collect();
    peers.sort();
    peers.dedup();
    let mut connections = Vec::new();
    for peer in peers {
        let mine: Vec<&BufferSample> = samples.iter().filter(|s| s.peer == peer).collect();
        let between = |a: f64, b: f64| mine.iter().filter(move |s| s.t_s >= a && s.t_s < b);
        connections.push(StepConnection {
            peer: peer.to_string(),
            buffer_before_change: median_u64(
                between(change_s - 1.0, change_s)
                    .map(|s| s.send_buffer)
                    .collect(),
            ),
            target_after: median_u64(
                between(change_s, pause_s)
                    .filter_map(|s| target(s, plan.loss_after_pct, send_max))
                    .collect(),
            ),
            intervals_to_target: intervals_until_reached(
                &mine,
                change_s,
                pause_s,
                plan.loss_after_pct,
                send_max,
                interval_s,
            ),
            buffer_before_reuse: between(resume_s - 1.0, resume_s)
                .next_back()
                .map_or(0, |s| s.send_buffer),
            intervals_to_regrow: intervals_until_reached(
                &mine,
                resume_s,
                end_s,
                plan.loss_after_pct,
                send_max,
                interval_s,
            ),
        });
    }
    let worst = |f: &dyn Fn(&StepConnection) -> Option<u32>| {
        if connections.is_empty() {
            return None;
        }
        connections
            .iter()
            .map(f)
            .try_fold(0u32, |acc, v| v.map(|v| acc.max(v)))
    };
    let worst_intervals_to_target = worst(&|c| c.intervals_to_target);
    let worst_intervals_to_regrow = worst(&|c| c.intervals_to_regrow);
    StepReport {
        plan: plan.clone(),
        interval_ms,
        change_s,
        pause_s,
        resume_s,
        started: downloads.len() as u32,
        failed: downloads.iter().filter(|d| d.outcome.is_failure()).count() as u32,
        target_met: worst_intervals_to_target.is_some_and(|w| w <= GOAL_STEP_INTERVALS),
        regrow_met: worst_intervals_to_regrow.is_some_and(|w| w <= GOAL_REGROW_INTERVALS),
        worst_intervals_to_target,
        worst_intervals_to_regrow,
        connections,
        samples,
    }
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub fn build(
    plan: &ResourcesLivePlan,
    mode: &Mode,
    rows: Vec<RunRow>,
    step: StepReport,
    wan: WanSummary,
) -> ResourcesReport {
    ResourcesReport {
        experiment: plan.experiment.name.clone(),
        quick: mode.quick,
        downloads: mode.paths.iter().map(|p| p.downloads).sum(),
        paths: mode.paths.len(),
        goal: goals(&rows),
        rows,
        step,
        wan,
        load_average: load_average(),
        duration_s: 0.0,
        stall_s: plan.run.stall_s,
    }
}

fn mib(bytes: f64) -> String {
    format!("{:.1}", bytes / 1048576.0)
}

fn intervals(v: Option<u32>) -> String {
    v.map_or("not reached".into(), |v| v.to_string())
}

/// The tables, as Markdown.
/// The server namespace's counters per variant, one column each.
/// Per path and variant: packets the path holds per download, Jain's index
/// over the downloads' bytes, and the downloads moving per 10-s slot.
fn render_progress(out: &mut String, rows: &[RunRow]) {
    let _ = writeln!(
        out,
        "\nProgress per path: packets the path holds (BDP + queue) per download, Jain's index over the downloads' bytes, and per 10-s slot the downloads that received a byte in it / those running through all of it (stalled ones count as running until given up).\n"
    );
    let _ = writeln!(
        out,
        "| variant | RTT ms | rate Mbit/s | downloads | packets per download | Jain (bytes) | moving / running per 10 s |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---|");
    for row in rows {
        for p in &row.paths {
            let slots: Vec<String> = p
                .progress
                .iter()
                .map(|s| format!("{}/{}", s.moving, s.running))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.1} | {} | {} |",
                row.variant,
                p.rtt_ms,
                p.rate_mbit,
                p.started,
                p.packets_per_download,
                p.jain_bytes.map_or("–".to_string(), |j| format!("{j:.2}")),
                slots.join(", "),
            );
        }
    }
}

fn render_kernel_counters(out: &mut String, rows: &[RunRow]) {
    if rows.iter().all(|r| r.kernel_counters.is_empty()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nThe server namespace's TCP counters over each variant (`/proc/net/netstat`, `/proc/net/snmp`).\n"
    );
    let _ = write!(out, "| variant |");
    for name in KERNEL_COUNTERS {
        let _ = write!(out, " {} |", name.split_once('.').map_or(name, |(_, n)| n));
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---|{}", "---:|".repeat(KERNEL_COUNTERS.len()));
    for row in rows {
        let _ = write!(out, "| {} |", row.variant);
        for name in KERNEL_COUNTERS {
            match row.kernel_counters.get(name) {
                Some(v) => {
                    let _ = write!(out, " {v} |");
                }
                None => {
                    let _ = write!(out, " – |");
                }
            }
        }
        let _ = writeln!(out);
    }
}

pub fn render(r: &ResourcesReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {} — {} downloads over {} paths{}\n",
        r.experiment,
        r.downloads,
        r.paths,
        if r.quick { " (quick)" } else { "" }
    );
    let _ = writeln!(
        out,
        "| variant | pool MiB | peak proxy MiB | mean proxy MiB | peak host TCP MiB (all namespaces) | goodput Mbit/s | p10 / p50 per download Mbit/s | started | completed | failed (kinds) | objects |"
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    );
    for row in &r.rows {
        let kinds: Vec<String> = row
            .failures
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            out,
            "| {}{} | {} | {} | {} | {} | {:.1} | {:.3} / {:.3} | {} | {} | {}{} | {} |",
            row.variant,
            if row.stopped_at_host_guard {
                format!(
                    " (stopped at {:.0} s: host TCP memory at 90 % of tcp_mem's limit)",
                    row.run_s
                )
            } else {
                String::new()
            },
            row.pool_bytes.map_or("–".into(), |p| mib(p as f64)),
            mib(row.peak_proxy_bytes as f64),
            mib(row.mean_proxy_bytes),
            mib(row.peak_host_tcp_bytes as f64),
            row.goodput_mbps,
            row.download_p10_mbps,
            row.download_p50_mbps,
            row.started,
            row.completed,
            row.failed,
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            },
            row.objects,
        );
    }
    if let Some(first) = r.rows.first() {
        let _ = write!(out, "\nPer path: goodput Mbit/s / failed downloads.\n\n| RTT ms | loss % | rate Mbit/s | downloads |");
        for row in &r.rows {
            let _ = write!(out, " {} |", row.variant);
        }
        let _ = write!(out, "\n|---:|---:|---:|---:|");
        for _ in &r.rows {
            let _ = write!(out, "---:|");
        }
        let _ = writeln!(out);
        for (i, p) in first.paths.iter().enumerate() {
            let _ = write!(
                out,
                "| {} | {} | {} | {} |",
                p.rtt_ms, p.loss_pct, p.rate_mbit, p.started
            );
            for row in &r.rows {
                if let Some(q) = row.paths.get(i) {
                    let _ = write!(out, " {:.1} / {} |", q.goodput_mbps, q.failed);
                }
            }
            let _ = writeln!(out);
        }
    }
    let stalls: Vec<(&str, &StallSummary)> = r
        .rows
        .iter()
        .map(|row| (row.variant.as_str(), &row.stalls))
        .collect();
    downloads::render_stalls(&mut out, &stalls, r.stall_s);
    render_progress(&mut out, &r.rows);
    render_kernel_counters(&mut out, &r.rows);
    let _ = writeln!(
        out,
        "\nGoal (issue 24): SSBT at ≤ {:.0} % of autotune's peak kernel TCP memory with ≥ {:.0} % of its goodput.\n",
        GOAL_MEMORY_SHARE * 100.0,
        GOAL_GOODPUT_SHARE * 100.0
    );
    let _ = writeln!(
        out,
        "| variant | peak memory vs autotune | goodput vs autotune | goal | failed downloads |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---:|");
    for g in &r.goal {
        let verdict = match (g.memory_met, g.goodput_met) {
            (true, true) => "met".to_string(),
            (m, gp) => {
                let mut missed = Vec::new();
                if !m {
                    missed.push(format!(
                        "memory {:.1} points over",
                        (g.memory_share - GOAL_MEMORY_SHARE) * 100.0
                    ));
                }
                if !gp {
                    missed.push(format!(
                        "goodput {:.1} points under",
                        (GOAL_GOODPUT_SHARE - g.goodput_share) * 100.0
                    ));
                }
                format!("not met: {}", missed.join(", "))
            }
        };
        let _ = writeln!(
            out,
            "| {} | {:.1} % | {:.1} % | {} | {} |",
            g.variant,
            g.memory_share * 100.0,
            g.goodput_share * 100.0,
            verdict,
            g.failed
        );
    }
    let s = &r.step;
    let _ = writeln!(
        out,
        "\nStep responses (ssbt, interval {} ms, {} downloads, RTT {} ms, {} Mbit/s): loss {} % → {} % at {:.1} s; idle {:.1}–{:.1} s.\n",
        s.interval_ms,
        s.plan.downloads,
        s.plan.rtt_ms,
        s.plan.rate_mbit,
        s.plan.loss_before_pct,
        s.plan.loss_after_pct,
        s.change_s,
        s.pause_s,
        s.resume_s
    );
    let _ = writeln!(out, "| connection | buffer before KiB | E-ATBT target after KiB | intervals to 90 % (goal ≤ {GOAL_STEP_INTERVALS}) | buffer after idle KiB | intervals to regrow (goal ≤ {GOAL_REGROW_INTERVALS}) |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for c in &s.connections {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {} | {:.0} | {} |",
            c.peer,
            c.buffer_before_change as f64 / 1024.0,
            c.target_after as f64 / 1024.0,
            intervals(c.intervals_to_target),
            c.buffer_before_reuse as f64 / 1024.0,
            intervals(c.intervals_to_regrow),
        );
    }
    let _ = writeln!(
        out,
        "\nStep (a): worst {} intervals — {}. Step (b): worst {} — {}. Step downloads: {} started, {} failed.",
        intervals(s.worst_intervals_to_target),
        if s.target_met { "met" } else { "not met" },
        intervals(s.worst_intervals_to_regrow),
        if s.regrow_met { "met" } else { "not met" },
        s.started,
        s.failed
    );
    let _ = writeln!(
        out,
        "\nEmulator: {} packets ({:.0}/s), {:.1} s CPU, kernel overflows {}, bypassed packets {}, release lateness p99 {:.0} µs. Load average {}; {:.0} s in all.",
        r.wan.packets,
        r.wan.packets_per_s,
        r.wan.cpu_s,
        r.wan.kernel_overflows,
        r.wan.kernel_bypassed_packets,
        r.wan.release_lateness_p99_us,
        r.load_average.map_or("unknown".into(), |l| format!("{l:.2}")),
        r.duration_s
    );
    out
}

/// Memory of the proxy's sockets over time, one line per variant.
fn memory_svg(r: &ResourcesReport, path: &Path) -> Result<(), DrawError> {
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let xs: Vec<f64> = r
        .rows
        .iter()
        .flat_map(|row| row.samples.iter().map(|s| s.t_s))
        .collect();
    let ys: Vec<f64> = r
        .rows
        .iter()
        .flat_map(|row| row.samples.iter().map(|s| s.proxy_bytes as f64 / 1048576.0))
        .collect();
    let (x0, x1) = padded_bounds(&xs);
    let (_, y1) = padded_bounds(&ys);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Kernel TCP memory of the proxy's sockets — {} downloads",
                r.downloads
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0.max(0.0)..x1, 0.0..y1.max(1.0))?;
    chart
        .configure_mesh()
        .x_desc("time since the first download started (s)")
        .y_desc("MiB")
        .draw()?;
    for (i, row) in r.rows.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let points: Vec<(f64, f64)> = row
            .samples
            .iter()
            .map(|s| (s.t_s, s.proxy_bytes as f64 / 1048576.0))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(row.variant.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Writes `report.json`, `table.md`, `memory.svg` and `manifest.json`.
pub fn write_results(
    report: &ResourcesReport,
    dir: &Path,
    record: &RunRecord,
    plan: ScenarioFile<'_>,
) -> Result<(), LabError> {
    crate::error::create_dir(dir)?;
    let write = |name: &str, text: String| crate::error::write_file(dir, name, text);
    write("report.json", serde_json::to_string_pretty(report)? + "\n")?;
    let rows: Vec<DownloadRow> = report
        .rows
        .iter()
        .flat_map(|r| r.downloads.iter().cloned())
        .collect();
    write("downloads.jsonl", downloads::to_jsonl(&rows)?)?;
    write("table.md", render(report))?;
    let svg = dir.join("memory.svg");
    memory_svg(report, &svg).map_err(|e| LabError::WriteFile {
        path: svg.clone(),
        source: std::io::Error::other(e.to_string()),
    })?;
    record
        .manifest(&[("resources-live", std::slice::from_ref(&plan))])
        .write(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_order_statistics() {
        let mut v = vec![5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(quantile(&mut v, 0.10), 1.0);
        assert_eq!(quantile(&mut v, 0.50), 5.0);
        assert_eq!(quantile(&mut [], 0.5), 0.0);
    }

    fn sample(t_s: f64, send_buffer: u64) -> BufferSample {
        BufferSample {
            t_s,
            peer: "10.78.3.2:40000".parse().unwrap(),
            send_buffer,
            rtt_s: 0.05,
            rto_s: 0.25,
            window_segments: 10_000.0,
            mss: 1448,
        }
    }

    #[test]
    fn step_intervals_count_from_the_change_to_ninety_percent() {
        let t = target(&sample(0.0, 0), 0.1, u64::MAX).unwrap();
        let samples = vec![
            sample(9.5, t / 4),
            sample(10.2, t / 3),
            sample(11.1, t / 2),
            sample(12.3, t * 95 / 100),
            sample(13.0, t),
        ];
        let refs: Vec<&BufferSample> = samples.iter().collect();
        assert_eq!(
            intervals_until_reached(&refs, 10.0, 20.0, 0.1, u64::MAX, 1.0),
            Some(3)
        );
        assert_eq!(
            intervals_until_reached(&refs, 10.0, 12.0, 0.1, u64::MAX, 1.0),
            None
        );
        let plan: StepPlan = toml::from_str(
            "rtt_ms = 50\nrate_mbit = 100\ndownloads = 1\nobject_bytes = 4096\n\
             loss_before_pct = 1\nloss_after_pct = 0.1\nbefore_s = 10\nafter_s = 10\n\
             idle_s = 5\nreuse_s = 5\npool_bytes = 1048576\n",
        )
        .unwrap();
        let report = step_report(&plan, 1000, 10.0, 20.0, 25.0, &[], samples);
        assert_eq!(report.worst_intervals_to_target, Some(3));
        assert!(report.target_met);
        assert_eq!(
            report.worst_intervals_to_regrow, None,
            "no sample after the reuse"
        );
        assert!(!report.regrow_met);
    }

    #[test]
    fn goals_compare_with_autotune() {
        let row = |mode: &str, peak: u64, goodput: f64| RunRow {
            variant: mode.into(),
            mode: mode.into(),
            pool_bytes: None,
            started: 1,
            completed: 1,
            failed: 0,
            failures: BTreeMap::new(),
            objects: 0,
            goodput_mbps: goodput,
            download_p10_mbps: 0.0,
            download_p50_mbps: 0.0,
            peak_proxy_bytes: peak,
            mean_proxy_bytes: 0.0,
            peak_proxy_client_bytes: 0,
            peak_proxy_sockets: 0,
            peak_host_tcp_bytes: 0,
            mean_host_tcp_bytes: 0.0,
            run_s: 1.0,
            paths: Vec::new(),
            stopped_at_host_guard: false,
            stalls: StallSummary::default(),
            untraced_samples: 0,
            kernel_counters: BTreeMap::new(),
            samples: Vec::new(),
            downloads: Vec::new(),
        };
        let g = goals(&[
            row("autotune", 100, 10.0),
            row("ssbt", 40, 9.6),
            row("fixed", 1, 1.0),
        ]);
        assert_eq!(g.len(), 1);
        assert!(g[0].memory_met && g[0].goodput_met);
        let g = goals(&[row("autotune", 100, 10.0), row("ssbt", 60, 9.0)]);
        assert!(!g[0].memory_met && !g[0].goodput_met);
    }

    #[test]
    fn kernel_counters_are_deltas_of_the_listed_ones() {
        let counters = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let before = counters(&[("TcpExt.TCPTimeouts", 10), ("TcpExt.Other", 1)]);
        let after = counters(&[
            ("TcpExt.TCPTimeouts", 25),
            ("TcpExt.TCPRetransFail", 3),
            ("TcpExt.Other", 9),
        ]);
        let d = kernel_counter_deltas(&before, &after);
        assert_eq!(
            d,
            counters(&[("TcpExt.TCPTimeouts", 15), ("TcpExt.TCPRetransFail", 3)])
        );
        let mut out = String::new();
        render_kernel_counters(&mut out, &[]);
        assert!(out.is_empty());
    }
}
