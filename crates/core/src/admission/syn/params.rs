//! Builds any of the four SYN filters from one set of parameters, so that
//! the simulator's scenarios and the live gate's configuration make the
//! very same objects.

use serde::{Deserialize, Serialize};

use super::{
    Abacus, AbacusConfig, EmptyAction, FilterConfigError, GreedyConfig, PredictiveGreedy,
    SynFilter, TokenBucket, TokenBucketFilter,
};
use crate::tcp::ClientMix;
use crate::Nanos;

/// The four filters of the Abacus paper's Section 6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilterKind {
    /// Token bucket that drops (`TBF`).
    Tbf,
    /// Token bucket that rejects (`TBF w/ Reject`).
    TbfReject,
    /// Abacus Filter (`AF`).
    Abacus,
    /// Predictive Greedy (`Greedy`).
    Greedy,
}

impl FilterKind {
    pub const ALL: [FilterKind; 4] = [
        FilterKind::Tbf,
        FilterKind::TbfReject,
        FilterKind::Abacus,
        FilterKind::Greedy,
    ];

    /// The name used in scenario files and machine output.
    pub fn name(self) -> &'static str {
        match self {
            FilterKind::Tbf => "tbf",
            FilterKind::TbfReject => "tbf-reject",
            FilterKind::Abacus => "abacus",
            FilterKind::Greedy => "greedy",
        }
    }
}

/// Weight of the newest observation period in the arrival-rate averages
/// (λ of the Abacus Filter, λ̂ of Predictive Greedy) when none is given.
///
/// The paper says only "a weighted-time average of the observed request
/// arrivals over the most recent observation periods" (Section 5); 0.3
/// remembers about three periods. README.md, "Sensitivity to the λ
/// averaging weight", has the measured effect of other weights.
pub const DEFAULT_ARRIVAL_SMOOTHING: f64 = 0.3;

/// How the Abacus window S is set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AbacusWindow {
    Fixed(Nanos),
    /// S = max{T_i : T_i ≤ r/h} (Section 5; observation O2 of Section 6.2).
    CostOptimal,
}

/// Every filter parameter of a scenario point.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterParams {
    /// W, tokens.
    pub bucket_size: u64,
    /// r_t, tokens per second.
    pub refill_rate: f64,
    /// T0.
    pub interval: Nanos,
    /// S.
    pub window: AbacusWindow,
    /// S_G; `None` is T_N of the clients, and a shorter one is raised to
    /// T_N (Section 4.3: S_G should be at least T_N).
    pub greedy_window: Option<Nanos>,
    /// h, per request per second.
    pub delay_cost: f64,
    /// r, per request.
    pub reject_cost: f64,
    /// Weight of the newest period in the arrival-rate averages (λ of the
    /// Abacus Filter, λ̂ of Predictive Greedy).
    pub arrival_smoothing: f64,
}

impl FilterParams {
    /// The Abacus window S these parameters give for `clients`, cut at the
    /// clients' last retransmission T_N as the filter cuts it.
    pub fn abacus_window(&self, clients: &ClientMix) -> Nanos {
        match self.window {
            AbacusWindow::Fixed(window) => window.min(clients.last_retransmission()),
            AbacusWindow::CostOptimal => {
                if self.delay_cost > 0.0 {
                    clients.cost_optimal_window(self.reject_cost / self.delay_cost)
                } else {
                    clients.last_retransmission()
                }
            }
        }
    }

    /// S_G in effect for `clients`: the given window raised to T_N, or T_N.
    pub fn greedy_window_for(&self, clients: &ClientMix) -> Nanos {
        let last = clients.last_retransmission();
        self.greedy_window.map_or(last, |window| window.max(last))
    }

    /// Builds one filter.
    pub fn build(
        &self,
        kind: FilterKind,
        clients: &ClientMix,
    ) -> Result<Box<dyn SynFilter + Send>, FilterConfigError> {
        let bucket = || TokenBucket::new(self.bucket_size, self.refill_rate);
        Ok(match kind {
            FilterKind::Tbf => Box::new(TokenBucketFilter::new(bucket()?, EmptyAction::Drop)),
            FilterKind::TbfReject => {
                Box::new(TokenBucketFilter::new(bucket()?, EmptyAction::Reject))
            }
            FilterKind::Abacus => Box::new(Abacus::new(AbacusConfig {
                bucket_size: self.bucket_size,
                refill_rate: self.refill_rate,
                interval: self.interval,
                window: self.abacus_window(clients),
                clients: clients.clone(),
                arrival_smoothing: self.arrival_smoothing,
            })?),
            FilterKind::Greedy => Box::new(PredictiveGreedy::new(GreedyConfig {
                bucket_size: self.bucket_size,
                refill_rate: self.refill_rate,
                interval: self.interval,
                window: self.greedy_window_for(clients),
                clients: clients.clone(),
                delay_cost: self.delay_cost,
                reject_cost: self.reject_cost,
                arrival_smoothing: self.arrival_smoothing,
            })?),
        })
    }
}
