//! The estimator and the Appendix A baselines fed a simulated run's
//! counters, interval by interval, and the small ratios the analysis uses.

use super::scenario::CertesScenario;
use super::PERCENTILE_SAMPLES;
use vantage_core::certes::Baselines;
use vantage_core::certes::Certes;
use vantage_core::certes::CertesConfig;
use vantage_core::certes::Estimate;
use vantage_core::certes::{FullCertes, FullModelConfig, FullModelStats};
use vantage_core::Nanos;
use vantage_sim::syn::Effort;
use vantage_sim::webserver::WebRun;

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
    /// The full model of Section 3.1 fed the same counters, when run.
    pub(super) full: Option<FullRun>,
    pub(super) critical_failure: f64,
    pub(super) damping_threshold: f64,
}

/// The full model's outputs per interval (Eq. 4 numerator and
/// denominator) and its counts of Step 3 corrections.
pub(super) struct FullRun {
    pub(super) total: Vec<f64>,
    pub(super) transactions: Vec<f64>,
    pub(super) stats: FullModelStats,
    pub(super) window: usize,
}

impl Estimates {
    pub(super) fn compute(
        s: &CertesScenario,
        run: &WebRun,
        model: &CertesConfig,
        effort: Effort,
        with_full_model: bool,
    ) -> Result<Estimates, vantage_core::certes::CertesError> {
        let n = run.len();
        let mut certes = Certes::new(model.clone())?;
        let mut full = if with_full_model {
            Some(FullCertes::new(model.clone(), FullModelConfig::default())?)
        } else {
            None
        };
        let mut full_total = Vec::new();
        let mut full_transactions = Vec::new();
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
            full: None,
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
            if let Some(f) = full.as_mut() {
                let fe = f.on_interval(counters);
                full_total.push(fe.total_time_nanos());
                full_transactions.push(fe.transactions());
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
        out.full = full.map(|f| FullRun {
            total: full_total,
            transactions: full_transactions,
            stats: f.stats(),
            window: f.window(),
        });
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
