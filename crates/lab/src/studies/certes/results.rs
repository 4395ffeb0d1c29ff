//! The rows a Certes run produces: Figure 16's means and errors per
//! scenario and population, and the one-second tracking bins.

use serde::Serialize;

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
    /// The full model of Section 3.1 beside the fast one (none: not run):
    /// its whole-run mean, (estimate − truth) / truth, and mean |error| per
    /// tracking bin.
    pub full_mean_s: Option<f64>,
    pub full_rel_err: Option<f64>,
    pub full_tracking_err: Option<f64>,
    /// Its window of Eq. 19 (intervals), the intervals in which an
    /// initial-SYN count came out negative (Step 3 ran), and those in which
    /// one stayed negative after the last iteration (set to zero).
    pub full_window: Option<usize>,
    pub full_intervals_corrected: Option<u64>,
    pub full_intervals_unresolved: Option<u64>,
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
    /// The model with the clients learned from the server's SYNs, beside
    /// the told ones (scenarios with `[certes] learn = true`); its main
    /// figures are repeated flat below for the CSV.
    #[serde(skip)]
    pub learned: Option<super::learned::LearnedComparison>,
    /// Whole-run error with the learned clients (give-ups at cell midpoints).
    pub learned_rel_err: Option<f64>,
    /// The same with give-ups at cell ends.
    pub learned_at_cell_ends_rel_err: Option<f64>,
    /// Whole-run error of the model told the clients' true timeouts.
    pub told_mixture_rel_err: Option<f64>,
    /// The learned mixture and give-up cells.
    pub learned_clients: Option<String>,
    pub learned_give_ups: Option<String>,
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
    /// The full model of Section 3.1 (none: not run).
    pub full_s: Option<f64>,
    pub truth_transactions: u64,
    /// Transactions Certes counted (completed plus estimated give-ups).
    pub certes_transactions: f64,
    pub completed: u64,
    pub syn_drop_rate: f64,
    pub accept_queue_limit: u32,
}
