//! A run set beside the truth: Figure 16's means and errors, tracking
//! per bin, percentiles of the estimated distribution, and the mid-stream
//! start of Appendix B.

use super::estimates::{bin_len, ratio, rel_err, Estimates};
use super::results::{CertesRow, TrackPoint};
use super::scenario::CertesScenario;
use super::{
    MIN_BIN_TRANSACTIONS, MIN_PERCENTILE_TRANSACTIONS, RECOVERY_TOLERANCE, RETRY_SPREAD_MARGIN,
    WARM_UP,
};
use vantage_core::certes::Estimate;
use vantage_core::Nanos;
use vantage_sim::syn::Effort;
use vantage_sim::webserver::WebRun;
use vantage_sim::webserver::WebServerConfig;

/// Sums over a span of intervals: the truth, the server's counters, and the
/// baselines weighted by completed connections.
#[derive(Default)]
struct IntervalSums {
    truth_total: u128,
    truth_n: u64,
    truth_gave_up: u64,
    syn_to_end: u128,
    application: u128,
    completed: u64,
    dropped: u64,
    offered: u64,
    mm1: f64,
    mm1_weight: f64,
    sliding_window: f64,
    sliding_window_weight: f64,
}

impl IntervalSums {
    fn over(run: &WebRun, est: &Estimates, intervals: std::ops::Range<usize>) -> IntervalSums {
        let mut s = IntervalSums::default();
        for i in intervals {
            let t = &run.truth[i];
            s.truth_total += u128::from(t.total.0);
            s.truth_n += t.transactions();
            s.truth_gave_up += t.gave_up;
            let c = &run.counters[i];
            s.syn_to_end += u128::from(c.syn_to_end_sum.0);
            s.application += u128::from(run.extras[i].application_sum.0);
            s.completed += c.completed;
            s.dropped += c.dropped;
            s.offered += c.offered();
            let w = c.completed as f64;
            if let Some(v) = est.mm1[i] {
                s.mm1 += v.0 as f64 * w;
                s.mm1_weight += w;
            }
            if let Some(v) = est.sliding_window[i] {
                s.sliding_window += v.0 as f64 * w;
                s.sliding_window_weight += w;
            }
        }
        s
    }
}

pub(super) fn track(system: &WebServerConfig, run: &WebRun, est: &Estimates) -> Vec<TrackPoint> {
    let per = bin_len(run);
    let mut out = Vec::with_capacity(run.len() / per + 1);
    let late_from = est.late_start.unwrap_or(usize::MAX);
    for start in (0..run.len()).step_by(per) {
        let range = start..(start + per).min(run.len());
        let IntervalSums {
            truth_total,
            truth_n,
            syn_to_end: ste,
            application: app,
            completed,
            dropped,
            offered,
            mm1,
            mm1_weight: mm1_w,
            sliding_window: sw,
            sliding_window_weight: sw_w,
            ..
        } = IntervalSums::over(run, est, range.clone());
        let (mut c_total, mut c_n, mut l_total, mut l_n) = (0.0, 0.0, 0.0, 0.0);
        let full_s = est.full.as_ref().and_then(|f| {
            let total: f64 = f.total[range.clone()].iter().sum();
            let n: f64 = f.transactions[range.clone()].iter().sum();
            ratio(total, n).map(|x| x / 1e9)
        });
        for i in range {
            c_total += est.total[i];
            c_n += est.transactions[i];
            l_total += est.late_total[i];
            l_n += est.late_transactions[i];
        }
        let secs = |v: Option<f64>| v.map(|x| x / 1e9);
        let time = Nanos(start as u64 * run.interval.0);
        out.push(TrackPoint {
            time_s: time.as_secs_f64(),
            truth_s: secs(ratio(truth_total as f64, truth_n as f64)),
            certes_s: secs(ratio(c_total, c_n)),
            syn_to_end_s: secs(ratio(ste as f64, completed as f64)),
            application_s: secs(ratio(app as f64, completed as f64)),
            mm1_s: secs(ratio(mm1, mm1_w)),
            sliding_window_s: secs(ratio(sw, sw_w)),
            midstream_s: if start >= late_from {
                secs(ratio(l_total, l_n))
            } else {
                None
            },
            full_s,
            truth_transactions: truth_n,
            certes_transactions: c_n,
            completed,
            syn_drop_rate: ratio(dropped as f64, offered as f64).unwrap_or(0.0),
            accept_queue_limit: system.server.accept_queue.at(time),
        });
    }
    out
}

/// Windows of `k` consecutive bins (truth and Certes transaction-weighted).
fn aggregate(track: &[TrackPoint], k: usize) -> Vec<TrackPoint> {
    track
        .chunks(k.max(1))
        .map(|chunk| {
            let truth_n: u64 = chunk.iter().map(|p| p.truth_transactions).sum();
            let truth_total: f64 = chunk
                .iter()
                .map(|p| p.truth_s.unwrap_or(0.0) * p.truth_transactions as f64)
                .sum();
            let certes_n: f64 = chunk.iter().map(|p| p.certes_transactions).sum();
            let certes_total: f64 = chunk
                .iter()
                .map(|p| p.certes_s.unwrap_or(0.0) * p.certes_transactions)
                .sum();
            TrackPoint {
                time_s: chunk[0].time_s,
                truth_s: ratio(truth_total, truth_n as f64),
                certes_s: ratio(certes_total, certes_n),
                truth_transactions: truth_n,
                certes_transactions: certes_n,
                ..TrackPoint::default()
            }
        })
        .collect()
}

/// Nearest-rank quantile of sorted values.
fn sorted_quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Mean and 90th percentile of |estimate/truth − 1| over bins that qualify.
fn tracking_error(
    track: &[TrackPoint],
    estimate: impl Fn(&TrackPoint) -> Option<f64>,
) -> Option<(f64, f64, usize)> {
    let mut errors: Vec<f64> = track
        .iter()
        .filter(|p| p.truth_transactions >= MIN_BIN_TRANSACTIONS)
        .filter_map(|p| Some((estimate(p)? / p.truth_s? - 1.0).abs()))
        .collect();
    if errors.is_empty() {
        return None;
    }
    errors.sort_by(f64::total_cmp);
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    Some((mean, sorted_quantile(&errors, 0.9), errors.len()))
}

/// The q-quantile of the transaction-weighted mixture of the sampled
/// intervals' estimated distributions, by bisection on its CDF.
fn mixture_quantile(sampled: &[(usize, Estimate)], q: f64) -> Option<f64> {
    let total: f64 = sampled.iter().map(|(_, e)| e.transactions()).sum();
    if total <= 0.0 {
        return None;
    }
    let cdf = |x: f64| -> f64 {
        sampled
            .iter()
            .map(|(_, e)| e.transactions() * e.cdf(x))
            .sum::<f64>()
            / total
    };
    let mut hi = sampled
        .iter()
        .filter_map(|(_, e)| e.percentile(1.0))
        .map(|p| p.0 as f64)
        .fold(1.0, f64::max);
    let mut lo = 0.0;
    if cdf(hi) < q {
        hi *= 2.0;
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) >= q {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi / 1e9)
}

/// Transaction-weighted CDF of the sampled intervals' estimates at `x` seconds.
fn mixture_cdf(sampled: &[(usize, Estimate)], x: f64) -> Option<f64> {
    let total: f64 = sampled.iter().map(|(_, e)| e.transactions()).sum();
    (total > 0.0).then(|| {
        sampled
            .iter()
            .map(|(_, e)| e.transactions() * e.cdf(x * 1e9))
            .sum::<f64>()
            / total
    })
}

/// The true and estimated q-quantiles (seconds), and F̂(x) − F(x) at the
/// true quantile x, over the sampled intervals.
pub(super) fn percentiles(
    run: &WebRun,
    est: &Estimates,
    q: f64,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let mut truth: Vec<f64> = est
        .sampled
        .iter()
        .flat_map(|(i, _)| run.truth[*i].samples.iter().map(|v| v.as_secs_f64()))
        .collect();
    if truth.is_empty() {
        return (None, None, None);
    }
    truth.sort_by(f64::total_cmp);
    let true_q = sorted_quantile(&truth, q);
    // The true CDF at its own quantile: q, or more where an atom (the
    // give-ups at the FTO) straddles it.
    let true_cdf = truth.partition_point(|v| *v <= true_q) as f64 / truth.len() as f64;
    (
        Some(true_q),
        mixture_quantile(&est.sampled, q),
        mixture_cdf(&est.sampled, true_q).map(|f| f - true_cdf),
    )
}

pub(super) fn analyse(
    s: &CertesScenario,
    system: &WebServerConfig,
    run: &WebRun,
    est: &Estimates,
    track: &[TrackPoint],
    effort: Effort,
) -> CertesRow {
    let IntervalSums {
        truth_total,
        truth_n,
        truth_gave_up,
        syn_to_end: ste,
        application: app,
        completed,
        dropped,
        offered,
        mm1,
        mm1_weight: mm1_w,
        sliding_window: sw,
        sliding_window_weight: sw_w,
    } = IntervalSums::over(run, est, 0..run.counters.len());
    let certes_total: f64 = est.total.iter().sum();
    let certes_n: f64 = est.transactions.iter().sum();
    let certes_gave_up: f64 = est.gave_up.iter().sum();
    let truth = ratio(truth_total as f64, truth_n as f64).unwrap_or(0.0) / 1e9;
    let certes = ratio(certes_total, certes_n).unwrap_or(0.0) / 1e9;
    let syn_to_end = ratio(ste as f64, completed as f64).unwrap_or(0.0) / 1e9;
    let application = ratio(app as f64, completed as f64).unwrap_or(0.0) / 1e9;
    let mm1 = ratio(mm1, mm1_w).map(|v| v / 1e9);
    let sliding_window = ratio(sw, sw_w).map(|v| v / 1e9);

    let steady: Vec<&TrackPoint> = track
        .iter()
        .filter(|p| p.time_s >= WARM_UP.as_secs_f64())
        .collect();
    let mut drop_rates: Vec<f64> = steady.iter().map(|p| 100.0 * p.syn_drop_rate).collect();
    drop_rates.sort_by(f64::total_cmp);
    let per_second = bin_len(run) as f64 * run.interval.as_secs_f64();
    let mut rates: Vec<f64> = steady
        .iter()
        .map(|p| p.completed as f64 / per_second)
        .collect();
    rates.sort_by(f64::total_cmp);

    let certes_tracking = tracking_error(track, |p| p.certes_s);
    let full_mean = est
        .full
        .as_ref()
        .map(|f| ratio(f.total.iter().sum(), f.transactions.iter().sum()).unwrap_or(0.0) / 1e9);
    let full_tracking = tracking_error(track, |p| p.full_s);
    let windows = aggregate(track, 10);
    let certes_tracking_10s = tracking_error(&windows, |p| p.certes_s);
    let mut interval_errs = Vec::new();
    for (i, t) in run.truth.iter().enumerate() {
        if t.transactions() >= MIN_BIN_TRANSACTIONS && est.transactions[i] > 0.0 {
            let truth_mean = t.total.0 as f64 / t.transactions() as f64;
            let estimate = est.total[i] / est.transactions[i];
            interval_errs.push((estimate / truth_mean - 1.0).abs());
        }
    }
    let syn_to_end_tracking = tracking_error(track, |p| p.syn_to_end_s);
    let mm1_tracking = tracking_error(track, |p| p.mm1_s);
    let sliding_tracking = tracking_error(track, |p| p.sliding_window_s);

    let (truth_p90, certes_p90, p90_cdf_err) = percentiles(run, est, 0.90);
    let (truth_p99, certes_p99, p99_cdf_err) = percentiles(run, est, 0.99);
    let pct_err = |e: Option<f64>, t: Option<f64>| Some(rel_err(e?, t?));
    let mut interval_errors = Vec::new();
    for (i, e) in &est.sampled {
        let t = &run.truth[*i];
        if t.transactions() < MIN_PERCENTILE_TRANSACTIONS {
            continue;
        }
        if let (Some(tp), Some(cp)) = (t.quantile(0.9), e.percentile(0.9)) {
            interval_errors.push((cp.as_secs_f64() / tp.as_secs_f64().max(1e-9) - 1.0).abs());
        }
    }

    let fto = s.model_frustration_timeout();
    let mut midstream = MidStream::default();
    if let (Some(start), Some(start_index)) = (s.start_late_for(effort), est.late_start) {
        midstream = midstream_metrics(run, est, track, start, start_index, fto);
    }

    CertesRow {
        scenario: s.name.clone(),
        figure: s.figure.clone(),
        profile: system.population.name.clone(),
        horizon_s: system.horizon.as_secs_f64(),
        interval_ms: run.interval.as_secs_f64() * 1e3,
        transactions: truth_n,
        truth_mean_s: truth,
        certes_mean_s: certes,
        syn_to_end_mean_s: syn_to_end,
        application_mean_s: application,
        mm1_mean_s: mm1,
        sliding_window_mean_s: sliding_window,
        certes_rel_err: rel_err(certes, truth),
        syn_to_end_rel_err: rel_err(syn_to_end, truth),
        application_rel_err: rel_err(application, truth),
        mm1_rel_err: mm1.map(|v| rel_err(v, truth)),
        sliding_window_rel_err: sliding_window.map(|v| rel_err(v, truth)),
        certes_bound: s.bound,
        tracking_bound: s.tracking_bound,
        tracking_bound_10s: s.tracking_bound_10s,
        percentile_bound: s.percentile_bound,
        truth_gave_up_pct: 100.0 * ratio(truth_gave_up as f64, truth_n as f64).unwrap_or(0.0),
        certes_gave_up_pct: 100.0 * ratio(certes_gave_up, certes_n).unwrap_or(0.0),
        syn_drop_pct: 100.0 * ratio(dropped as f64, offered as f64).unwrap_or(0.0),
        syn_drop_pct_p5: sorted_quantile(&drop_rates, 0.05),
        syn_drop_pct_p95: sorted_quantile(&drop_rates, 0.95),
        connections_per_s_p5: sorted_quantile(&rates, 0.05),
        connections_per_s_p95: sorted_quantile(&rates, 0.95),
        rtt_mean_ms: ratio(run.stats.rtt_sum.0 as f64, run.stats.rtt_samples as f64).unwrap_or(0.0)
            / 1e6,
        network_loss_used: est.network_loss_used,
        damping: s.damping,
        critical_failure: est.critical_failure,
        damping_threshold: est.damping_threshold,
        full_mean_s: full_mean,
        full_rel_err: full_mean.map(|f| rel_err(f, truth)),
        full_tracking_err: full_tracking.map(|t| t.0),
        full_window: est.full.as_ref().map(|f| f.window),
        full_intervals_corrected: est.full.as_ref().map(|f| f.stats.intervals_corrected),
        full_intervals_unresolved: est.full.as_ref().map(|f| f.stats.intervals_unresolved),
        certes_interval_err: if interval_errs.is_empty() {
            0.0
        } else {
            interval_errs.iter().sum::<f64>() / interval_errs.len() as f64
        },
        tracking_bin_s: per_second,
        tracking_bins: certes_tracking.map_or(0, |t| t.2),
        certes_tracking_err: certes_tracking.map_or(0.0, |t| t.0),
        certes_tracking_err_p90: certes_tracking.map_or(0.0, |t| t.1),
        certes_tracking_err_10s: certes_tracking_10s.map_or(0.0, |t| t.0),
        syn_to_end_tracking_err: syn_to_end_tracking.map_or(0.0, |t| t.0),
        mm1_tracking_err: mm1_tracking.map(|t| t.0),
        sliding_window_tracking_err: sliding_tracking.map(|t| t.0),
        truth_p90_s: truth_p90,
        certes_p90_s: certes_p90,
        p90_rel_err: pct_err(certes_p90, truth_p90),
        p90_cdf_err,
        truth_p99_s: truth_p99,
        certes_p99_s: certes_p99,
        p99_rel_err: pct_err(certes_p99, truth_p99),
        p99_cdf_err,
        p90_interval_err: (!interval_errors.is_empty())
            .then(|| interval_errors.iter().sum::<f64>() / interval_errors.len() as f64),
        p90_intervals: interval_errors.len(),
        midstream_start_s: midstream.start_s,
        midstream_first_fto_err: midstream.first_fto_err,
        midstream_after_fto_err: midstream.after_fto_err,
        midstream_after_fto_rel_err: midstream.after_fto_rel_err,
        midstream_gap_after_fto: midstream.gap_after_fto,
        midstream_recovered_after_s: midstream.recovered_after_s,
        midstream_recovery_limit_s: midstream.recovery_limit_s,
        model_frustration_timeout_s: fto.as_secs_f64(),
        events: run.stats.events,
        learned: None,
        learned_rel_err: None,
        learned_at_cell_ends_rel_err: None,
        told_mixture_rel_err: None,
        learned_clients: None,
        learned_give_ups: None,
    }
}

#[derive(Default)]
struct MidStream {
    start_s: Option<f64>,
    first_fto_err: Option<f64>,
    after_fto_err: Option<f64>,
    after_fto_rel_err: Option<f64>,
    gap_after_fto: Option<f64>,
    recovered_after_s: Option<f64>,
    recovery_limit_s: Option<f64>,
}

/// Appendix B: the estimator started at `start` beside the truth and beside
/// the estimator started at time zero.
fn midstream_metrics(
    run: &WebRun,
    est: &Estimates,
    track: &[TrackPoint],
    start: Nanos,
    start_index: usize,
    fto: Nanos,
) -> MidStream {
    let start_s = (start_index as u64 * run.interval.0) as f64 / 1e9;
    let bin_s = bin_len(run) as f64 * run.interval.as_secs_f64();
    let settled_s = start_s + fto.as_secs_f64();
    let in_first: Vec<TrackPoint> = track
        .iter()
        .filter(|p| p.time_s >= start_s && p.time_s < settled_s)
        .cloned()
        .collect();
    let after: Vec<TrackPoint> = track
        .iter()
        .filter(|p| p.time_s >= settled_s)
        .cloned()
        .collect();
    let gaps: Vec<(f64, f64)> = track
        .iter()
        .filter(|p| p.time_s >= start_s && p.truth_transactions >= MIN_BIN_TRANSACTIONS)
        .filter_map(|p| Some((p.time_s, (p.midstream_s? / p.certes_s? - 1.0).abs())))
        .collect();
    let after_gaps: Vec<f64> = gaps
        .iter()
        .filter(|(t, _)| *t >= settled_s)
        .map(|(_, g)| *g)
        .collect();
    // The start of the first bin from which every later bin is within
    // tolerance (the start itself when no bin ever leaves it).
    let mut recovered_from = Some(start_s);
    for (t, g) in gaps.iter().rev() {
        if *g > RECOVERY_TOLERANCE {
            recovered_from = Some(t + bin_s);
            break;
        }
    }
    if gaps.is_empty() {
        recovered_from = None;
    }
    let settled_index = ((settled_s * 1e9) as u64 / run.interval.0.max(1)) as usize;
    let (mut late_total, mut late_n, mut truth_total, mut truth_n) = (0.0, 0.0, 0u128, 0u64);
    for i in settled_index.min(run.len())..run.len() {
        late_total += est.late_total[i];
        late_n += est.late_transactions[i];
        truth_total += u128::from(run.truth[i].total.0);
        truth_n += run.truth[i].transactions();
    }
    let _ = start;
    MidStream {
        start_s: Some(start_s),
        first_fto_err: tracking_error(&in_first, |p| p.midstream_s).map(|t| t.0),
        after_fto_err: tracking_error(&after, |p| p.midstream_s).map(|t| t.0),
        after_fto_rel_err: match (
            ratio(late_total, late_n),
            ratio(truth_total as f64, truth_n as f64),
        ) {
            (Some(l), Some(t)) => Some(rel_err(l, t)),
            _ => None,
        },
        gap_after_fto: (!after_gaps.is_empty())
            .then(|| after_gaps.iter().sum::<f64>() / after_gaps.len() as f64),
        recovered_after_s: recovered_from.map(|t| t - start_s),
        recovery_limit_s: Some(
            ((start_s + fto.as_secs_f64() + run.interval.as_secs_f64() + RETRY_SPREAD_MARGIN)
                / bin_s)
                .ceil()
                * bin_s
                - start_s,
        ),
    }
}
