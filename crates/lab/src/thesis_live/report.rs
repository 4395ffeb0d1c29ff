//! The experiment's numbers: one row per scheme and user count (Figure
//! 13's throughput and document transfer time, Figure 14's assigned
//! socket buffer, kernel TCP memory, refusals and failures), the thesis's
//! statements beside ours (the shared [`Check`]), a table, JSON, one SVG.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde::Serialize;

use super::plan::{Mode, SchemePlan, ThesisPlan};
use super::sockets::{Sampled, SocketSample};
use super::users::{Outcome, RequestRecord};
use crate::provenance::RunRecord;
use crate::report::svg::{padded_bounds, DrawError, PALETTE};
pub use crate::resources_live::WanSummary;
use crate::study::{Check, Criterion};
use crate::{LabError, ScenarioFile};

/// vantage proxy's own view of a run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ProxyCounters {
    /// Connections closed at accept (all open, none idle).
    pub refused: u64,
    /// Idle connections closed to make room for a new one.
    pub evicted: u64,
    /// Idle connections chosen for eviction that kept their slot: a request
    /// had just arrived on them (the next idlest was closed instead).
    pub evictions_passed_on: u64,
    /// Connections closed because the client took no byte of a waiting
    /// response for `timeouts.send_ms`.
    pub send_timeouts: u64,
    /// Mean of its held-send-buffer histogram (ssbt*), bytes.
    pub mean_send_buffer_bytes: Option<f64>,
    /// Mean of its held-receive-buffer histogram (ssbt*), bytes.
    pub mean_receive_buffer_bytes: Option<f64>,
}

/// One path's requests in one run.
#[derive(Clone, Debug, Serialize)]
pub struct PathRow {
    pub users: u32,
    pub requests: u32,
    pub failed: u32,
    /// Completed documents' bytes over the run, Mbit/s.
    pub throughput_mbps: f64,
    pub transfer_mean_s: f64,
}

/// One scheme at one user count.
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    pub scheme: String,
    pub proxy: String,
    pub mode: String,
    pub users: u32,
    /// Requests made (every one ends in exactly one outcome).
    pub requests: u32,
    pub completed: u32,
    pub failed: u32,
    /// Still running when the run ended: neither completed nor failed.
    pub cut: u32,
    /// Failures by kind (gave-up, broken, bad-status, stalled).
    pub failures: BTreeMap<String, u32>,
    /// Connections the clients saw refused (each followed by an immediate
    /// retry).
    pub refusals: u64,
    /// Persistent connections the clients found closed under a request.
    pub reconnects: u64,
    /// The thesis's proxy throughput: completed documents' bytes at the
    /// clients over the run, Mbit/s.
    pub throughput_mbps: f64,
    /// Document transfer time of completed requests, seconds.
    pub transfer_mean_s: f64,
    pub transfer_p50_s: f64,
    pub transfer_p99_s: f64,
    /// Share of the origins' responses the near origin served.
    pub near_share: Option<f64>,
    pub origin_responses: u64,
    /// Figure 14: the held send buffer of client connections and receive
    /// buffer of upstream ones, per connection, averaged over the samples,
    /// bytes.
    pub mean_assigned_per_connection_bytes: f64,
    /// Both buffers of every socket, per connection, likewise.
    pub mean_all_buffers_per_connection_bytes: f64,
    pub mean_client_connections: f64,
    pub peak_client_connections: u32,
    /// Kernel TCP memory of the proxy's sockets, bytes.
    pub peak_proxy_tcp_bytes: u64,
    pub mean_proxy_tcp_bytes: f64,
    /// `/proc/net/sockstat` TCP `mem` (every namespace), bytes.
    pub peak_host_tcp_bytes: u64,
    /// The proxy's kernel TCP memory limit (`run.proxy_tcp_memory_bytes`)
    /// and the most its memory cgroup was charged, bytes.
    pub tcp_memory_limit_bytes: Option<u64>,
    pub cgroup_tcp_peak_bytes: Option<u64>,
    /// vantage proxy only.
    pub vantage: Option<ProxyCounters>,
    /// `ss` runs that failed, lines that did not parse, and the proxy's
    /// sockets without memory (closed), over all samples.
    pub sampler_failed_reads: u32,
    pub sampler_unparsed_lines: u32,
    pub sampler_sockets_without_memory: u32,
    pub run_s: f64,
    pub paths: Vec<PathRow>,
    pub samples: Vec<SocketSample>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ThesisReport {
    pub experiment: String,
    pub quick: bool,
    pub run_s: f64,
    pub users: Vec<u32>,
    /// How the cache hit ratio of about 0.5 is made.
    pub cache_hits: &'static str,
    pub rows: Vec<RunRow>,
    pub checks: Vec<Check>,
    pub wan: WanSummary,
    /// 1-minute load average at the end.
    pub load_average: Option<f64>,
    pub duration_s: f64,
}

pub const CACHE_HITS: &str = "no response cache: the proxy balances round robin over two origins \
     with the same documents, a far one behind its own emulated path and a near one on the \
     proxy's host (loopback), so about half of the documents come from near by";

/// Exact order statistic (nearest rank) of `values`, 0 when empty.
fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// One run's row.
#[allow(clippy::too_many_arguments)]
pub fn summarize(
    scheme: &SchemePlan,
    users: u32,
    run_s: f64,
    records: &[RequestRecord],
    sampled: Sampled,
    vantage: Option<ProxyCounters>,
    (far, near): (u64, u64),
    per_path: &[u32],
) -> RunRow {
    let mut failures = BTreeMap::new();
    for r in records.iter().filter(|r| r.outcome.is_failure()) {
        *failures.entry(r.outcome.name().to_string()).or_insert(0) += 1;
    }
    let completed: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.outcome == Outcome::Completed)
        .collect();
    let mut times: Vec<f64> = completed.iter().map(|r| r.transfer_s).collect();
    let samples = sampled.samples;
    let connected: Vec<&SocketSample> = samples
        .iter()
        .filter(|s| s.client_connections + s.upstream_connections > 0)
        .collect();
    let mbps = |bytes: u64| bytes as f64 * 8.0 / run_s.max(1e-9) / 1e6;
    RunRow {
        scheme: scheme.name.clone(),
        proxy: scheme.proxy.clone(),
        mode: scheme.mode.clone(),
        users,
        requests: records.len() as u32,
        completed: completed.len() as u32,
        failed: failures.values().sum(),
        cut: records.iter().filter(|r| r.outcome == Outcome::Cut).count() as u32,
        failures,
        refusals: records.iter().map(|r| u64::from(r.refusals)).sum(),
        reconnects: records.iter().map(|r| u64::from(r.reconnects)).sum(),
        throughput_mbps: mbps(completed.iter().map(|r| r.bytes).sum()),
        transfer_mean_s: mean(times.iter().copied()),
        transfer_p50_s: quantile(&mut times, 0.50),
        transfer_p99_s: quantile(&mut times, 0.99),
        near_share: (far + near > 0).then(|| near as f64 / (far + near) as f64),
        origin_responses: far + near,
        mean_assigned_per_connection_bytes: mean(connected.iter().map(|s| {
            s.assigned_bytes as f64 / f64::from(s.client_connections + s.upstream_connections)
        })),
        mean_all_buffers_per_connection_bytes: mean(connected.iter().map(|s| {
            s.all_buffers_bytes as f64 / f64::from(s.client_connections + s.upstream_connections)
        })),
        mean_client_connections: mean(samples.iter().map(|s| f64::from(s.client_connections))),
        peak_client_connections: samples
            .iter()
            .map(|s| s.client_connections)
            .max()
            .unwrap_or(0),
        peak_proxy_tcp_bytes: samples.iter().map(|s| s.charged_bytes).max().unwrap_or(0),
        mean_proxy_tcp_bytes: mean(samples.iter().map(|s| s.charged_bytes as f64)),
        peak_host_tcp_bytes: samples.iter().map(|s| s.host_tcp_bytes).max().unwrap_or(0),
        tcp_memory_limit_bytes: None,
        cgroup_tcp_peak_bytes: None,
        vantage,
        sampler_failed_reads: sampled.failed_reads,
        sampler_unparsed_lines: sampled.skipped.unparsed,
        sampler_sockets_without_memory: sampled.skipped.without_memory,
        run_s,
        paths: per_path
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let mine: Vec<&RequestRecord> = records.iter().filter(|r| r.path == i).collect();
                PathRow {
                    users: n,
                    requests: mine.len() as u32,
                    failed: mine.iter().filter(|r| r.outcome.is_failure()).count() as u32,
                    throughput_mbps: mbps(
                        mine.iter()
                            .filter(|r| r.outcome == Outcome::Completed)
                            .map(|r| r.bytes)
                            .sum(),
                    ),
                    transfer_mean_s: mean(
                        mine.iter()
                            .filter(|r| r.outcome == Outcome::Completed)
                            .map(|r| r.transfer_s),
                    ),
                }
            })
            .collect(),
        samples,
    }
}

fn find<'a>(rows: &'a [RunRow], scheme: &str, users: u32) -> Option<&'a RunRow> {
    rows.iter().find(|r| r.scheme == scheme && r.users == users)
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// The thesis's statements (Section 5.2, Figures 13 and 14) beside ours.
/// A statement whose runs are missing is left out.
pub fn checks(plan: &ThesisPlan, rows: &[RunRow]) -> Vec<Check> {
    let st = &plan.statements;
    let [low, high] = st.users;
    let proposed = st.proposed.as_str();
    let mut checks = Vec::new();
    let thr = |scheme: &str, users| find(rows, scheme, users).map(|r| r.throughput_mbps);
    let profile = |users: u32| format!("{users} users");
    if let Some([small, large]) = st.fixed_pairs.first() {
        if let (Some(p), Some(l), Some(s)) = (thr(proposed, low), thr(large, low), thr(small, low))
        {
            let r = ratio(p, l);
            checks.push(
                Check::statement(
                    "Figure 13(a)",
                    profile(low),
                    format!("{proposed}'s throughput is almost the same as {large}'s"),
                    "≈ 1",
                    format!("{p:.2} / {l:.2} Mbit/s = {r:.2}"),
                )
                .unit("ratio")
                .judge(
                    r,
                    Criterion::Within {
                        target: 1.0,
                        tolerance: 0.1,
                    },
                ),
            );
            let r = ratio(p, s);
            checks.push(
                Check::statement(
                    "Figure 13(a)",
                    profile(low),
                    format!("{proposed}'s throughput is higher than {small}'s"),
                    "> 1",
                    format!("{p:.2} / {s:.2} Mbit/s = {r:.2}"),
                )
                .unit("ratio")
                .judge(r, Criterion::Above(1.0)),
            );
        }
    }
    let change = |scheme: &str| match (thr(scheme, low), thr(scheme, high)) {
        (Some(a), Some(b)) => Some((a, b, ratio(b, a))),
        _ => None,
    };
    for [small, large] in &st.fixed_pairs {
        let (Some((s0, s1, rs)), Some((l0, l1, rl))) = (change(small), change(large)) else {
            continue;
        };
        for (name, a, b, r) in [(small, s0, s1, rs), (large, l0, l1, rl)] {
            checks.push(
                Check::statement(
                    "Figure 13(a)",
                    profile(high),
                    format!("{name}'s throughput degrades from {low} to {high} users"),
                    "< 1",
                    format!("{b:.2} / {a:.2} Mbit/s = {r:.2}"),
                )
                .unit("ratio")
                .judge(r, Criterion::Below(1.0)),
            );
        }
        checks.push(
            Check::statement(
                "Figure 13(a)",
                profile(high),
                format!("{large} degrades most"),
                "ratio of the larger buffers < ratio of the smaller",
                format!("{rl:.2} vs {rs:.2}"),
            )
            .relation(
                format!("{large}'s {high}/{low}-user throughput ratio < {small}'s"),
                rl < rs,
            ),
        );
    }
    if let Some((a, b, r)) = change(proposed) {
        checks.push(
            Check::statement(
                "Figure 13(a)",
                profile(high),
                format!("{proposed} does not degrade from {low} to {high} users"),
                "≥ 1",
                format!("{b:.2} / {a:.2} Mbit/s = {r:.2}"),
            )
            .unit("ratio")
            .judge(r, Criterion::AtLeast(1.0)),
        );
    }
    let at_high: Vec<&RunRow> = rows.iter().filter(|r| r.users == high).collect();
    if let Some(p) = find(rows, proposed, high) {
        let best_other = at_high
            .iter()
            .filter(|r| r.scheme != proposed && r.completed > 0)
            .min_by(|a, b| a.transfer_mean_s.total_cmp(&b.transfer_mean_s));
        if let Some(o) = best_other {
            checks.push(
                Check::statement(
                    "Figure 13(b)",
                    profile(high),
                    format!("{proposed} gives the smallest document transfer time"),
                    "smallest of all schemes",
                    format!(
                        "{:.3} s; next {} {:.3} s",
                        p.transfer_mean_s, o.scheme, o.transfer_mean_s
                    ),
                )
                .relation(
                    format!(
                        "{proposed}'s mean transfer time < every other scheme's at {high} users"
                    ),
                    p.completed > 0 && p.transfer_mean_s < o.transfer_mean_s,
                ),
            );
        }
    }
    if let (Some([_, large]), Some(p)) = (st.fixed_pairs.first(), find(rows, proposed, high)) {
        if let Some(l) = find(rows, large, high) {
            let r = ratio(
                l.mean_assigned_per_connection_bytes,
                p.mean_assigned_per_connection_bytes,
            );
            checks.push(
                Check::statement(
                    "Figure 14",
                    profile(high),
                    format!("{large} assigns about 10× {proposed}'s socket buffer per connection"),
                    "≈ 10×",
                    format!(
                        "{:.0} / {:.0} KB = {r:.1}×",
                        l.mean_assigned_per_connection_bytes / 1024.0,
                        p.mean_assigned_per_connection_bytes / 1024.0
                    ),
                )
                .unit("×")
                .judge_noted(
                    r,
                    Criterion::Between {
                        low: 5.0,
                        high: 20.0,
                    },
                    "a factor of two either way of the thesis's 10×",
                ),
            );
            let r = ratio(l.throughput_mbps, p.throughput_mbps);
            checks.push(
                Check::statement(
                    "Figures 13(a), 14",
                    profile(high),
                    format!("{large} gives about 75 % of {proposed}'s throughput"),
                    "≈ 0.75",
                    format!(
                        "{:.2} / {:.2} Mbit/s = {r:.2}",
                        l.throughput_mbps, p.throughput_mbps
                    ),
                )
                .unit("ratio")
                .judge(
                    r,
                    Criterion::Within {
                        target: 0.75,
                        tolerance: 0.1,
                    },
                ),
            );
        }
    }
    checks
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub fn build(plan: &ThesisPlan, mode: &Mode, rows: Vec<RunRow>, wan: WanSummary) -> ThesisReport {
    ThesisReport {
        experiment: plan.experiment.name.clone(),
        quick: mode.quick,
        run_s: mode.duration_s,
        users: plan.workload.users.clone(),
        cache_hits: CACHE_HITS,
        checks: checks(plan, &rows),
        rows,
        wan,
        load_average: load_average(),
        duration_s: 0.0,
    }
}

fn kb(bytes: f64) -> String {
    format!("{:.0}", bytes / 1024.0)
}

fn mib(bytes: f64) -> String {
    format!("{:.1}", bytes / 1048576.0)
}

/// The tables, as Markdown.
pub fn render(r: &ThesisReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {} — {:.0} s per run{}\n",
        r.experiment,
        r.run_s,
        if r.quick { " (quick plan)" } else { "" }
    );
    for &users in &r.users {
        let _ = writeln!(out, "### {users} users\n");
        let _ = writeln!(
            out,
            "| scheme | throughput Mbit/s | transfer time mean / p50 / p99 s | assigned buffer per connection KB | vantage's send / receive buffer KB | proxy TCP memory peak / mean MiB | host TCP peak MiB | client connections mean / peak | refusals (vantage refused / evicted) | requests: completed / failed (kinds) / cut | near share |"
        );
        let _ = writeln!(
            out,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
        );
        for row in r.rows.iter().filter(|row| row.users == users) {
            let kinds: Vec<String> = row
                .failures
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let vantage_buffers = row.vantage.map_or("–".into(), |v| {
                let show = |b: Option<f64>| b.map_or("–".into(), kb);
                format!(
                    "{} / {}",
                    show(v.mean_send_buffer_bytes),
                    show(v.mean_receive_buffer_bytes)
                )
            });
            let _ = writeln!(
                out,
                "| {} | {:.2} | {:.3} / {:.3} / {:.3} | {} | {} | {} / {} | {} | {:.0} / {} | {}{} | {} / {}{} / {} | {} |",
                row.scheme,
                row.throughput_mbps,
                row.transfer_mean_s,
                row.transfer_p50_s,
                row.transfer_p99_s,
                kb(row.mean_assigned_per_connection_bytes),
                vantage_buffers,
                mib(row.peak_proxy_tcp_bytes as f64),
                mib(row.mean_proxy_tcp_bytes),
                mib(row.peak_host_tcp_bytes as f64),
                row.mean_client_connections,
                row.peak_client_connections,
                row.refusals,
                row.vantage
                    .map_or(String::new(), |v| format!(" ({} / {})", v.refused, v.evicted)),
                row.completed,
                row.failed,
                if kinds.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", kinds.join(", "))
                },
                row.cut,
                row.near_share.map_or("–".into(), |s| format!("{s:.2}")),
            );
        }
        let _ = writeln!(out);
    }
    let limits: Vec<String> = r
        .rows
        .iter()
        .filter_map(|row| {
            row.tcp_memory_limit_bytes?;
            let peak = row
                .cgroup_tcp_peak_bytes
                .map_or("unread".into(), |p| format!("{} MiB", mib(p as f64)));
            Some(format!("{} at {} users: {peak}", row.scheme, row.users))
        })
        .collect();
    if let Some(limit) = r.rows.iter().find_map(|row| row.tcp_memory_limit_bytes) {
        let _ = writeln!(
            out,
            "Kernel TCP memory limit of each proxy (memory cgroup): {} MiB. Most charged: {}.\n",
            mib(limit as f64),
            limits.join("; ")
        );
    }
    let _ = writeln!(out, "### The thesis's statements beside ours\n");
    crate::live_experiment::checks_markdown(&mut out, "users", &r.checks);
    let sampler_failures: u32 = r.rows.iter().map(|row| row.sampler_failed_reads).sum();
    let unparsed: u32 = r.rows.iter().map(|row| row.sampler_unparsed_lines).sum();
    let without_memory: u32 = r
        .rows
        .iter()
        .map(|row| row.sampler_sockets_without_memory)
        .sum();
    let _ = writeln!(
        out,
        "\nCache hits: {}.\nSocket sampler: {sampler_failures} failed `ss` reads, {unparsed} unparsed lines, {without_memory} closed sockets without memory (not counted).\n\
         WAN emulator: {} packets ({:.0}/s), {:.1} s CPU, {} kernel queue overflows, {} packets bypassed, release lateness p99 {:.0} µs. Load average {}; {:.0} s in all.",
        r.cache_hits,
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

/// A chart's title, unit and value of a row.
type Panel = (&'static str, &'static str, fn(&RunRow) -> f64);

/// Figures 13(a) and 14 as lines over the user counts, one per scheme.
fn figures_svg(r: &ThesisReport, path: &Path) -> Result<(), DrawError> {
    let root = SVGBackend::new(path, (1200, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(600);
    let mut schemes: Vec<&str> = Vec::new();
    for row in &r.rows {
        if !schemes.contains(&row.scheme.as_str()) {
            schemes.push(&row.scheme);
        }
    }
    let users: Vec<f64> = r.users.iter().map(|&u| f64::from(u)).collect();
    let (x0, x1) = padded_bounds(&users);
    let panels: [Panel; 2] = [
        ("Proxy throughput (Figure 13a)", "Mbit/s", |row| {
            row.throughput_mbps
        }),
        (
            "Assigned socket buffer per connection (Figure 14)",
            "KB",
            |row| row.mean_assigned_per_connection_bytes / 1024.0,
        ),
    ];
    for (area, (title, unit, value)) in [left, right].iter().zip(panels) {
        let ys: Vec<f64> = r.rows.iter().map(value).collect();
        let (_, y1) = padded_bounds(&ys);
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x0.max(0.0)..x1, 0.0..y1.max(1e-3))?;
        chart
            .configure_mesh()
            .x_desc("emulated users")
            .y_desc(unit)
            .draw()?;
        for (i, scheme) in schemes.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let points: Vec<(f64, f64)> = r
                .rows
                .iter()
                .filter(|row| row.scheme == *scheme)
                .map(|row| (f64::from(row.users), value(row)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(scheme.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
            chart.draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 11))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Writes `report.json`, `table.md`, `figures.svg` and `manifest.json`.
pub fn write_results(
    report: &ThesisReport,
    dir: &Path,
    record: &RunRecord,
    plan: ScenarioFile<'_>,
) -> Result<(), LabError> {
    crate::error::create_dir(dir)?;
    let write = |name: &str, text: String| crate::error::write_file(dir, name, text);
    write("report.json", serde_json::to_string_pretty(report)? + "\n")?;
    write("table.md", render(report))?;
    let svg = dir.join("figures.svg");
    figures_svg(report, &svg).map_err(|e| LabError::WriteFile {
        path: svg.clone(),
        source: std::io::Error::other(e.to_string()),
    })?;
    record
        .manifest(&[("thesis-live", std::slice::from_ref(&plan))])
        .write(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(scheme: &str, users: u32, throughput: f64, assigned: f64, transfer: f64) -> RunRow {
        RunRow {
            scheme: scheme.into(),
            proxy: "vantage".into(),
            mode: "fixed".into(),
            users,
            requests: 10,
            completed: 10,
            failed: 0,
            cut: 0,
            failures: BTreeMap::new(),
            refusals: 0,
            reconnects: 0,
            throughput_mbps: throughput,
            transfer_mean_s: transfer,
            transfer_p50_s: transfer,
            transfer_p99_s: transfer,
            near_share: Some(0.5),
            origin_responses: 10,
            mean_assigned_per_connection_bytes: assigned,
            mean_all_buffers_per_connection_bytes: assigned,
            mean_client_connections: 1.0,
            peak_client_connections: 1,
            peak_proxy_tcp_bytes: 0,
            mean_proxy_tcp_bytes: 0.0,
            peak_host_tcp_bytes: 0,
            tcp_memory_limit_bytes: None,
            cgroup_tcp_peak_bytes: None,
            vantage: None,
            sampler_failed_reads: 0,
            sampler_unparsed_lines: 0,
            sampler_sockets_without_memory: 0,
            run_s: 1.0,
            paths: Vec::new(),
            samples: Vec::new(),
        }
    }

    #[test]
    fn the_thesis_shape_holds_every_statement_and_its_opposite_none() {
        let text = include_str!("../../../../scenarios/proxy/thesis-section5.toml");
        let plan = ThesisPlan::from_toml(text, "p.toml").unwrap();
        let [small, large] = plan.statements.fixed_pairs[0].clone();
        let proposed = plan.statements.proposed.clone();
        // The thesis's shape: at 200 users proposed ≈ large > small; at
        // 600 the fixed ones fall, large most, proposed does not; large
        // assigns 10× for 75 %.
        let thesis = vec![
            row(&small, 200, 6.0, 64e3, 2.0),
            row(&large, 200, 10.0, 1e6, 1.0),
            row(&proposed, 200, 10.2, 1e5, 0.9),
            row(&small, 600, 5.0, 64e3, 3.0),
            row(&large, 600, 7.6, 1e6, 2.5),
            row(&proposed, 600, 10.2, 1e5, 1.0),
        ];
        let checks = checks(&plan, &thesis);
        assert_eq!(checks.len(), 9, "{checks:#?}");
        assert!(checks.iter().all(|c| c.holds), "{checks:#?}");
        let opposite = vec![
            row(&small, 200, 10.0, 64e3, 1.0),
            row(&large, 200, 5.0, 1e5, 1.0),
            row(&proposed, 200, 2.0, 1e5, 3.0),
            row(&small, 600, 12.0, 64e3, 1.0),
            row(&large, 600, 20.0, 1e5, 1.0),
            row(&proposed, 600, 1.0, 1e5, 3.0),
        ];
        let checks = super::checks(&plan, &opposite);
        assert!(checks.iter().all(|c| !c.holds), "{checks:#?}");
    }

    #[test]
    fn quantiles_are_order_statistics() {
        let mut v = vec![5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(quantile(&mut v, 0.50), 5.0);
        assert_eq!(quantile(&mut v, 0.99), 10.0);
        assert_eq!(quantile(&mut [], 0.5), 0.0);
    }
}
