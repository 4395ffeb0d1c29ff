//! Runs a Certes scenario under each of its client populations: the web
//! server simulated, the estimator and baselines fed its counters.

use super::analysis::{analyse, track};
use super::scenario::{CertesScenario, PaperRow};
use super::PERCENTILE_SAMPLES;
use rayon::prelude::*;
use serde::Serialize;
use vantage_core::certes::Baselines;
use vantage_core::certes::Certes;
use vantage_core::certes::CertesConfig;
use vantage_core::certes::Estimate;
use vantage_core::Nanos;
use vantage_sim::syn::scenario::ScenarioError;
use vantage_sim::syn::Effort;
use vantage_sim::webserver;
use vantage_sim::webserver::WebRun;

// ─────────────────────────────── results ───────────────────────────────

/// One scenario under one client population: the paper's Figure 16 as a
/// row, with tracking and distribution errors.
#[derive(Clone, Debug, Serialize)]
pub struct CertesRow {
    pub scenario: String,
    pub figure: String,
    pub profile: String,
    pub horizon_s: f64,
    pub interval_ms: f64,
    /// True transactions (completed connections and give-ups) in the run.
    pub transactions: u64,
    pub truth_mean_s: f64,
    pub certes_mean_s: f64,
    pub syn_to_end_mean_s: f64,
    pub application_mean_s: f64,
    pub mm1_mean_s: Option<f64>,
    pub sliding_window_mean_s: Option<f64>,
    /// (estimate − truth) / truth.
    pub certes_rel_err: f64,
    pub syn_to_end_rel_err: f64,
    pub application_rel_err: f64,
    pub mm1_rel_err: Option<f64>,
    pub sliding_window_rel_err: Option<f64>,
    /// The bound asserted on |certes_rel_err| for this scenario.
    pub certes_bound: f64,
    /// The bounds asserted on the tracking errors for this scenario.
    pub tracking_bound: f64,
    pub tracking_bound_10s: f64,
    pub percentile_bound: f64,
    pub truth_gave_up_pct: f64,
    pub certes_gave_up_pct: f64,
    /// DROPPED / OFFERED over the run.
    pub syn_drop_pct: f64,
    /// 5th and 95th percentiles of per-second SYN drop rates (Table II).
    pub syn_drop_pct_p5: f64,
    pub syn_drop_pct_p95: f64,
    /// 5th and 95th percentiles of per-second completed connections.
    pub connections_per_s_p5: f64,
    pub connections_per_s_p95: f64,
    /// Mean RTT sample of the completed connections.
    pub rtt_mean_ms: f64,
    /// SYN loss rate the estimator used in the last interval.
    pub network_loss_used: f64,
    /// Whether the estimator damped its recursion above f*.
    pub damping: bool,
    /// f*: the failure rate above which the undamped recursion amplifies
    /// its errors (1: never), and f_d, where the damping starts.
    pub critical_failure: f64,
    pub damping_threshold: f64,
    /// Mean |Certes − truth| / truth over 250 ms intervals with at least
    /// MIN_BIN_TRANSACTIONS true transactions.
    pub certes_interval_err: f64,
    /// Width of the tracking bins (one second, or one interval if longer).
    pub tracking_bin_s: f64,
    /// One-second bins compared (≥ MIN_BIN_TRANSACTIONS true transactions).
    pub tracking_bins: usize,
    /// Mean |estimate − truth| / truth over those bins.
    pub certes_tracking_err: f64,
    /// 90th percentile of that per-bin error.
    pub certes_tracking_err_p90: f64,
    /// The same over ten-second windows.
    pub certes_tracking_err_10s: f64,
    pub syn_to_end_tracking_err: f64,
    pub mm1_tracking_err: Option<f64>,
    pub sliding_window_tracking_err: Option<f64>,
    /// Whole-run percentiles over evenly sampled intervals.
    pub truth_p90_s: Option<f64>,
    pub certes_p90_s: Option<f64>,
    pub p90_rel_err: Option<f64>,
    /// F̂(x) − F(x) at x = the true p90: the estimated distribution's error
    /// there, in probability.
    pub p90_cdf_err: Option<f64>,
    pub truth_p99_s: Option<f64>,
    pub certes_p99_s: Option<f64>,
    pub p99_rel_err: Option<f64>,
    pub p99_cdf_err: Option<f64>,
    /// Mean |error| of the per-interval p90 over sampled intervals with at
    /// least 100 transactions (none: no such interval).
    pub p90_interval_err: Option<f64>,
    pub p90_intervals: usize,
    /// Mid-stream estimator (Appendix B), when the scenario has one.
    pub midstream_start_s: Option<f64>,
    /// Its per-second tracking error during its first FTO, and after.
    pub midstream_first_fto_err: Option<f64>,
    pub midstream_after_fto_err: Option<f64>,
    /// Its whole-window error from one FTO after its start to the end.
    pub midstream_after_fto_rel_err: Option<f64>,
    /// Mean |mid-stream − from-start| / from-start over the bins after one FTO.
    pub midstream_gap_after_fto: Option<f64>,
    /// Seconds after its start from which every bin is within
    /// RECOVERY_TOLERANCE of the estimator started at time zero.
    pub midstream_recovered_after_s: Option<f64>,
    /// One FTO, to the end of the bin it ends in: the SYNs of the late
    /// estimator's first interval that it took for first attempts give up,
    /// in its model, one FTO (± the retry spread) after that interval.
    pub midstream_recovery_limit_s: Option<f64>,
    pub model_frustration_timeout_s: f64,
    /// Events the simulator processed.
    pub events: u64,
}

/// One one-second bin of the tracking plots (Figures 18, 19, 21, 25, 26).
#[derive(Clone, Debug, Default, Serialize)]
pub struct TrackPoint {
    pub time_s: f64,
    pub truth_s: Option<f64>,
    pub certes_s: Option<f64>,
    pub syn_to_end_s: Option<f64>,
    pub application_s: Option<f64>,
    pub mm1_s: Option<f64>,
    pub sliding_window_s: Option<f64>,
    pub midstream_s: Option<f64>,
    pub truth_transactions: u64,
    /// Transactions Certes counted (completed plus estimated give-ups).
    pub certes_transactions: f64,
    pub completed: u64,
    pub syn_drop_rate: f64,
    pub accept_queue_limit: u32,
}

/// Everything one run produced.
#[derive(Clone, Debug)]
pub struct CertesResult {
    pub row: CertesRow,
    pub track: Vec<TrackPoint>,
    /// File stem of the tracking plot, if the scenario draws one.
    pub plot: Option<String>,
    pub title: String,
    pub paper: Option<PaperRow>,
    pub bound_reason: Option<String>,
    /// Whether the clients ran in on/off mode (Test J).
    pub on_off: bool,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
}

pub(super) fn mix(mut h: u64, x: u64) -> u64 {
    h ^= x
        .wrapping_add(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(h << 6)
        .wrapping_add(h >> 2);
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 31)
}

/// Runs every scenario under every population, in parallel; results come
/// back in scenario then population order whatever the number of threads.
pub fn run(
    scenarios: &[CertesScenario],
    effort: Effort,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<CertesResult>, ScenarioError> {
    let jobs: Vec<(&CertesScenario, usize)> = scenarios
        .iter()
        .flat_map(|s| (0..s.profiles.len()).map(move |i| (s, i)))
        .collect();
    jobs.into_par_iter()
        .map(|(s, i)| {
            let r = run_one(s, i, effort);
            progress();
            r
        })
        .collect()
}

/// Runs one scenario under population `index`.
pub fn run_one(
    s: &CertesScenario,
    index: usize,
    effort: Effort,
) -> Result<CertesResult, ScenarioError> {
    let started = std::time::Instant::now();
    let (system, model) = s.configs(index, effort);
    let fail = |key: &str, problem: String| ScenarioError::Invalid {
        origin: s.origin.clone(),
        key: key.to_string(),
        problem,
    };
    let seed = mix(s.seed, index as u64 + 1);
    let run = webserver::simulate(&system, seed).map_err(|e| fail(e.part, e.problem))?;
    let estimates = Estimates::compute(s, &run, &model, effort)
        .map_err(|e| fail("scenario.interval_ms", e.to_string()))?;
    let track = track(&system, &run, &estimates);
    let row = analyse(s, &system, &run, &estimates, &track, effort);
    Ok(CertesResult {
        row,
        track,
        plot: s.plot.clone(),
        title: s.title.clone(),
        paper: s.paper.clone(),
        bound_reason: s.bound_reason.clone(),
        on_off: s.system.clients.on_off.is_some(),
        wall_s: started.elapsed().as_secs_f64(),
    })
}

/// The estimators' outputs per interval.
pub(super) struct Estimates {
    /// Eq. 4 numerator and denominator.
    pub(super) total: Vec<f64>,
    pub(super) transactions: Vec<f64>,
    pub(super) gave_up: Vec<f64>,
    pub(super) mm1: Vec<Option<Nanos>>,
    pub(super) sliding_window: Vec<Option<Nanos>>,
    /// The mid-stream estimator's numerator and denominator (zero before it starts).
    pub(super) late_total: Vec<f64>,
    pub(super) late_transactions: Vec<f64>,
    pub(super) late_start: Option<usize>,
    /// Estimates kept for the percentile comparison.
    pub(super) sampled: Vec<(usize, Estimate)>,
    pub(super) network_loss_used: f64,
    pub(super) critical_failure: f64,
    pub(super) damping_threshold: f64,
}

impl Estimates {
    fn compute(
        s: &CertesScenario,
        run: &WebRun,
        model: &CertesConfig,
        effort: Effort,
    ) -> Result<Estimates, vantage_core::certes::CertesError> {
        let n = run.len();
        let mut certes = Certes::new(model.clone())?;
        let mut baselines = Baselines::new(model)?;
        let late_start = s
            .start_late_for(effort)
            .map(|t| (t.0 / run.interval.0.max(1)) as usize)
            .filter(|&i| i < n);
        let mut late: Option<Certes> = None;
        let step = (n / PERCENTILE_SAMPLES).max(1);
        let mut out = Estimates {
            total: vec![0.0; n],
            transactions: vec![0.0; n],
            gave_up: vec![0.0; n],
            mm1: vec![None; n],
            sliding_window: vec![None; n],
            late_total: vec![0.0; n],
            late_transactions: vec![0.0; n],
            late_start,
            sampled: Vec::new(),
            network_loss_used: 0.0,
            critical_failure: certes.critical_failure(),
            damping_threshold: certes.damping_threshold(),
        };
        for (i, counters) in run.counters.iter().enumerate() {
            let e = certes.on_interval(counters);
            let b = baselines.on_interval(counters);
            if Some(i) == late_start {
                late = Some(Certes::new(model.clone())?);
            }
            if let Some(l) = late.as_mut() {
                let le = l.on_interval(counters);
                out.late_total[i] = le.total_time_nanos();
                out.late_transactions[i] = le.transactions();
            }
            out.total[i] = e.total_time_nanos();
            out.transactions[i] = e.transactions();
            out.gave_up[i] = e.gave_up;
            out.mm1[i] = b.mm1;
            out.sliding_window[i] = b.sliding_window;
            out.network_loss_used = e.network_loss;
            if i % step == step / 2 && e.transactions() > 0.0 && run.truth[i].transactions() > 0 {
                out.sampled.push((i, e));
            }
        }
        Ok(out)
    }
}

pub(super) fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0).then(|| num / den)
}

pub(super) fn rel_err(estimate: f64, truth: f64) -> f64 {
    if truth > 0.0 {
        estimate / truth - 1.0
    } else {
        0.0
    }
}

/// One-second bins (or one interval, when intervals are longer).
pub(super) fn bin_len(run: &WebRun) -> usize {
    ((Nanos::from_secs(1).0 as f64 / run.interval.0.max(1) as f64).round() as usize).max(1)
}
