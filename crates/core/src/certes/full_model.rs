//! The full Certes model (Certes paper, Section 3.1, Eq. 4–28), the
//! reference beside the fast online model of Section 3.2 ([`super::model`]).
//!
//! Fed the same per-interval counters ([`IntervalCounters`]), interval by
//! interval, with explicit time (one call per interval of length Δ):
//!
//! * **Step 1 (Eq. 22–23).** The initial weights W_I: a SYN dropped in
//!   interval p returns in interval p + n with weight W_{p,p+n}^j, the share
//!   of SYNs uniform within interval p that arrive there after the client's
//!   gap (plus the profile's spread, Abacus Eq. 1) plus a change of RTT drawn
//!   from χ_j. χ_j is the history of changes of the interval's mean RTT
//!   (Σ RTT / COMPLETED) over the gap, reduced to [`CHI_POINTS`] quantiles.
//!   With no RTT change W_I is the fast model's W (Eq. 29, spread included).
//! * **Step 2 (Eq. 19, 24–25).** With W fixed, Eq. 19 over the window is a
//!   lower-triangular linear system in R^0 (every retry lands at least one
//!   interval after its drop), solved by forward substitution from the
//!   oldest interval of the window; intervals that left the window keep
//!   their solution and send their retries forward (Eq. 24 at start-up:
//!   nothing before the first interval).
//! * **Step 3 (Eq. 26–28).** When some R_i^0 < 0 (Eq. 21), G^T ΔW = ΔR^0 is
//!   solved by linear least squares, ΔR^0 from Eq. 28, and Step 2 repeated,
//!   at most `max_iterations` times.
//! * **Final step (Eq. 16 → 12 → 4).** R_i^j from the solution (Eq. 16),
//!   C_i^j by Eq. 12, the interval's mean client response time by Eq. 4.
//!
//! Decisions where the paper is open, and departures:
//! * Any retransmission profile or mixture and frustration timeout, as the
//!   fast model takes them ([`CertesConfig`]): one retry chain per (profile,
//!   FTO) class, initial SYNs split by the classes' weights; the paper's
//!   3/6/12 s and k give the paper's equations. Network SYN loss
//!   (Section 3.2.1) as in the fast model: a SYN fails with probability
//!   1 − (1 − q)(1 − DR_p). Refused SYNs (REFUSED_p) as in the fast
//!   model: in OFFERED_p and DR_p's denominator, neither retried nor in
//!   the accepted mix; with REFUSED_p^j known, each attempt refused at its
//!   own rate over the solved R_p^j ([`super::counters`]).
//! * Drops by attempt: with DROPPED_p^j known (a capture), attempt j
//!   fails at 1 − (1 − q)(1 − DR_p^j), DR_p^j = DROPPED_p^j over the
//!   solved R_p^j (1 − q) ([`super::counters`]), recomputed at each solve
//!   of Eq. 19 once R_p^0 is known (the retries into p are fixed by then);
//!   Step 3's derivatives hold those rates fixed. With the total only,
//!   Eq. 19's one f_p.
//! * Eq. 23 adds 3 s to χ_0 and 9 s to χ_1; Eq. 22 integrates over the
//!   intervals 2–4 and 5–7 after p (m = 3), i.e. the 3 s and 6 s *gaps*. We
//!   follow Eq. 22 and Eq. 13: the shift is the gap to the next SYN.
//! * The RTT change shifts a retry by the whole ΔRTT, as Eq. 23 writes it;
//!   changes beyond ±[`MAX_RTT_CHANGE`] are clamped, and a retry never
//!   lands in the interval it was dropped in (that would make Eq. 19 no
//!   longer triangular).
//! * Unknowns of Step 3 are the W_{p,i}^j of every interval p of the window,
//!   over W_I's landing intervals widened by one on each side (Eq. 15's
//!   "… i−m−1, i−m, i−m+1 …"). The partial derivatives of Eq. 26 are those
//!   of Eq. 19 as written (one equation per interval, the other R^0 held
//!   fixed), computed by a backward pass over the retry chains. Eq. 27 is
//!   underdetermined; its minimum-norm least-squares solution is the one the
//!   paper's objective (minimise ‖W_I − W_S‖) asks for. Eq. 20 (each
//!   source's weights sum to one) is kept by solving within the subspace
//!   where each group's ΔW sums to zero; Eq. 21 (W ≥ 0) by clamping and
//!   renormalising after each step.
//! * R^0 still negative after the last iteration is set to zero in the
//!   final solution and counted ([`FullEstimate::unresolved`]); nothing of
//!   the fast model's Eq. 30–31 heuristics or damping is used.
//! * ACCEPTED_{p,i} of Eq. 12: from the interval's SYN-to-END histogram when
//!   measured (each bucket accepted one bucket-SYN-to-END earlier), else all
//!   at one mean SYN-to-END earlier (the kernel in the paper kept only the
//!   sum). With no accept there, the nearest interval with accepts is used,
//!   and with none the completions count as first attempts.
//! * Online: interval i's estimate uses the solution at the end of interval
//!   i; later corrections of W may revise earlier R^0, not earlier
//!   estimates.
//!
//! Bounds: the window holds at most [`MAX_WINDOW`] intervals, the RTT
//! history [`MAX_RTT_HISTORY`], the accepted-mix look-back
//! [`MAX_LOOKBACK`]; Step 3 runs at most [`MAX_ITERATIONS`] times per
//! interval, each over the equations a landing width around the negative
//! counts (older ones are left out of G). Cost per interval: O(window ×
//! retry terms) for Step 2; Step 3, only when a new count turns negative,
//! O(width × window × retry terms + width³). A count still negative after
//! Step 3 stays at zero in later solves. Step 3 stops early when an
//! iteration removes less than a tenth of the negative mass.

use std::collections::VecDeque;

use super::counters::IntervalCounters;
use super::model::{Certes, CertesConfig, CertesError, NetworkLoss};
use crate::Nanos;

/// Most intervals in the window of Eq. 19.
pub const MAX_WINDOW: usize = 256;
/// Most intervals of mean-RTT history behind χ (Eq. 22–23).
pub const MAX_RTT_HISTORY: usize = 4096;
/// Most Step 3 iterations per interval.
pub const MAX_ITERATIONS: usize = 16;
/// Most intervals the completion split (Eq. 12) looks back over.
pub const MAX_LOOKBACK: usize = 1 << 14;
/// Points χ is reduced to (its quantiles).
pub const CHI_POINTS: usize = 8;
/// Largest RTT change a retry is shifted by.
pub const MAX_RTT_CHANGE: Nanos = Nanos::from_secs(1);
/// Points over which a profile's spread timeout is integrated (as the fast
/// model does).
const SPREAD_POINTS: usize = 64;
/// Step 3 stops when an iteration leaves more than this share of the
/// negative mass of R^0 (the linearisation no longer helps).
const PROGRESS: f64 = 0.9;
/// R^0 below this (in SYNs) counts as negative (Eq. 21).
const NEGATIVE: f64 = -1e-6;

/// The full model's own settings; the clients, interval and loss come from
/// the [`CertesConfig`] it shares with the fast model.
#[derive(Clone, Debug, PartialEq)]
pub struct FullModelConfig {
    /// Intervals in the window of Eq. 19; `None`: the longest retry chain
    /// (the last SYN of any class) plus two intervals. At most [`MAX_WINDOW`].
    pub window: Option<usize>,
    /// Intervals of mean-RTT history behind χ; at most [`MAX_RTT_HISTORY`].
    pub rtt_history: usize,
    /// Step 3 iterations per interval; at most [`MAX_ITERATIONS`].
    pub max_iterations: usize,
}

impl Default for FullModelConfig {
    fn default() -> Self {
        FullModelConfig {
            window: None,
            rtt_history: 240,
            max_iterations: 4,
        }
    }
}

/// One (profile, frustration timeout) class of clients.
#[derive(Clone, Debug)]
struct Class {
    weight: f64,
    /// T_0 = 0, T_1 … T_k.
    attempt_times: Vec<Nanos>,
    give_up: Nanos,
    /// Per attempt j < k: the nominal gap to attempt j + 1 and its spread.
    gaps: Vec<(Nanos, Nanos)>,
    /// Where the clients whose last SYN fails give up: (lag, share).
    give_up_landing: Vec<(usize, f64)>,
    /// Column of attempt 0 in per-attempt vectors.
    column: usize,
    /// Group of attempt 0 (failures of attempt j return as j + 1: group
    /// `group + j`, j < k).
    group: usize,
}

impl Class {
    fn retries(&self) -> usize {
        self.attempt_times.len() - 1
    }
}

/// The weights W_{p,p+n}^j of one source interval and one retry group:
/// shares for n = first, first + 1, ….
#[derive(Clone, Debug, PartialEq)]
struct Landing {
    first: usize,
    shares: Vec<f64>,
}

impl Landing {
    fn share(&self, lag: usize) -> f64 {
        lag.checked_sub(self.first)
            .and_then(|t| self.shares.get(t))
            .copied()
            .unwrap_or(0.0)
    }

    fn last(&self) -> usize {
        self.first + self.shares.len().saturating_sub(1)
    }
}

/// One interval of the window.
#[derive(Clone, Debug)]
struct Slot {
    /// OFFERED_p counted, over (1 − q): the SYNs clients sent.
    sent_total: f64,
    /// f_p^j: probability that a SYN sent in p as attempt j fails (dropped
    /// or lost), 1 − (1 − q)(1 − DR_p^j): DR_p for every attempt unless
    /// DROPPED_p^j is known, then over the solved arrivals by attempt
    /// ([`Slot::update_failures`]).
    failure: Vec<f64>,
    /// 1 − q: the share of the sent SYNs that arrive.
    arrive: f64,
    /// DROPPED_p, ACCEPTED_p, REFUSED_p (and DROPPED_p^j, REFUSED_p^j): with
    /// `arrive`, the probability that a SYN of attempt j is accepted (a
    /// SYN-ACK), (1 − q)(1 − DR_p^j − RR_p^j) ([`Slot::accepted`]); a
    /// refused SYN (the
    /// rule in [`super::counters`]) neither fails nor is accepted: its
    /// client leaves as a failure.
    syns: IntervalCounters,
    /// W per retry group.
    weights: Vec<Landing>,
    /// R^0 over (1 − q), as solved (may be negative before Step 3 ends).
    initial: f64,
    /// R^0 stayed negative after Step 3 and was set to zero; it stays so in
    /// later solves (its estimate is out).
    clamped: bool,
    /// SYNs sent per (class, attempt).
    sent: Vec<f64>,
}

impl Slot {
    /// The solved arrivals by attempt: Σ over the classes of R_p^{c,j}
    /// times (1 − q).
    fn arrivals(&self, classes: &[Class]) -> Vec<f64> {
        let attempts = classes.iter().map(|c| c.retries() + 1).max().unwrap_or(0);
        let mut arrivals = vec![0.0; attempts];
        for class in classes {
            for (j, arrived) in arrivals.iter_mut().enumerate().take(class.retries() + 1) {
                *arrived += self.sent[class.column + j] * self.arrive;
            }
        }
        arrivals
    }

    /// f_p^j from DROPPED_p^j over the solved arrivals by attempt
    /// ([`IntervalCounters::drop_rates_by_attempt`]); left at DR_p's when
    /// only the total is known.
    fn update_failures(&mut self, classes: &[Class]) {
        if self.syns.dropped_split().is_none() {
            return;
        }
        let arrive = self.arrive;
        self.failure = self
            .syns
            .drop_rates_by_attempt(&self.arrivals(classes))
            .into_iter()
            .map(|drop_rate| 1.0 - arrive * (1.0 - drop_rate))
            .collect();
    }

    /// Accepted SYNs per (class, attempt) column: R_p^{c,j} arrived times
    /// attempt j's accepted share
    /// ([`IntervalCounters::accepted_shares_by_attempt`] over the solved
    /// arrivals by attempt).
    fn accepted(&self, classes: &[Class]) -> Vec<f64> {
        let shares = self
            .syns
            .accepted_shares_by_attempt(&self.arrivals(classes));
        let mut accepted = vec![0.0; self.sent.len()];
        for class in classes {
            for (j, share) in shares.iter().enumerate().take(class.retries() + 1) {
                let column = class.column + j;
                accepted[column] = self.sent[column] * self.arrive * share;
            }
        }
        accepted
    }
}

/// The full model's account of one interval.
#[derive(Clone, Debug, PartialEq)]
pub struct FullEstimate {
    pub interval_index: u64,
    /// COMPLETED_i.
    pub completed: u64,
    /// R_i^{k+1}: clients estimated to give up in this interval.
    pub gave_up: f64,
    /// DR_i.
    pub drop_rate: f64,
    /// R_i^0 (counted SYNs).
    pub initial_syns: f64,
    /// Σ_{j≥1} R_i^j.
    pub retried_syns: f64,
    /// C_i^j summed over classes, by attempt j.
    pub completed_by_attempt: Vec<f64>,
    /// CLIENT_RT_i (Eq. 4); `None` without transactions.
    pub mean: Option<Nanos>,
    /// Mean CONN-FAIL over the interval's transactions.
    pub conn_fail_mean: Option<Nanos>,
    /// Initial-SYN counts of the window that came out negative in Step 2
    /// before any correction in this interval.
    pub negative_initial: usize,
    /// Step 3 iterations taken in this interval.
    pub corrections: usize,
    /// Counts still negative after the last iteration (set to zero).
    pub unresolved: usize,
    total_time_nanos: f64,
}

impl FullEstimate {
    /// COMPLETED_i + R_i^{k+1}.
    pub fn transactions(&self) -> f64 {
        self.completed as f64 + self.gave_up
    }

    /// Numerator of Eq. 4, in nanoseconds.
    pub fn total_time_nanos(&self) -> f64 {
        self.total_time_nanos
    }
}

/// Totals over the run so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FullModelStats {
    pub intervals: u64,
    /// Intervals in which some R^0 came out negative (Step 3 ran).
    pub intervals_corrected: u64,
    pub iterations: u64,
    /// Intervals that ended with some R^0 still negative (set to zero).
    pub intervals_unresolved: u64,
}

/// The full Certes model of Section 3.1.
#[derive(Clone, Debug)]
pub struct FullCertes {
    config: CertesConfig,
    window: usize,
    rtt_history_len: usize,
    max_iterations: usize,
    classes: Vec<Class>,
    columns: usize,
    groups: usize,
    /// Per retry group: bounds on the lags of its W (widened landings).
    group_lags: Vec<(usize, usize)>,
    slots: VecDeque<Slot>,
    /// Index of the oldest slot of the window.
    first_index: u64,
    /// Ring (`horizon` rows of `columns + classes`): SYNs sent per (class,
    /// attempt ≥ 1) and give-ups per class, from intervals that left the
    /// window.
    frozen: Vec<f64>,
    horizon: usize,
    /// Ring (`lookback` rows of `columns`): accepted SYNs per (class,
    /// attempt) of intervals that left the window.
    accepted: Vec<f64>,
    /// Ring (`lookback`): their totals.
    accepted_sums: Vec<f64>,
    lookback: usize,
    /// Mean RTT (ns) of the last intervals, `None` without completions.
    rtt_means: VecDeque<Option<f64>>,
    segments_sent: u64,
    segments_retransmitted: u64,
    stats: FullModelStats,
}

impl FullCertes {
    /// The full model for the fast model's configuration (validated as the
    /// fast model validates it) and its own settings (clamped to the caps).
    pub fn new(config: CertesConfig, full: FullModelConfig) -> Result<FullCertes, CertesError> {
        Certes::new(config.clone())?;
        let interval = config.interval;
        let fto_total: f64 = config.frustration_timeouts.iter().map(|(_, w)| w).sum();
        let mut classes = Vec::new();
        let (mut columns, mut groups) = (0usize, 0usize);
        let mut longest_send = Nanos::ZERO;
        let mut max_lag = 1usize;
        let mut horizon_lag = 1usize;
        let mut group_lags = Vec::new();
        for (profile, profile_weight) in config.clients.entries() {
            for &(timeout, fto_weight) in &config.frustration_timeouts {
                let give_up = profile.give_up_at(timeout);
                let attempt_times = profile.sends_before_give_up(timeout);
                let retries = attempt_times.len() - 1;
                let gaps: Vec<(Nanos, Nanos)> = (0..retries)
                    .map(|j| {
                        let spread = if j == 0 {
                            profile.first_gap_spread
                        } else {
                            profile.later_gap_spread
                        };
                        (attempt_times[j + 1] - attempt_times[j], spread)
                    })
                    .collect();
                for &(gap, spread) in &gaps {
                    let reach = gap.0 as f64 + spread.0 as f64 + MAX_RTT_CHANGE.0 as f64;
                    let short = gap.0 as f64 - spread.0 as f64 - MAX_RTT_CHANGE.0 as f64;
                    let longest = (reach / interval.0 as f64).floor() as usize + 2;
                    let shortest = ((short / interval.0 as f64).floor() as usize)
                        .saturating_sub(1)
                        .max(1);
                    group_lags.push((shortest, longest));
                    max_lag = max_lag.max(longest);
                }
                let give_up_landing = landing(
                    give_up - attempt_times[retries],
                    Nanos::ZERO,
                    &[0.0],
                    interval,
                    0,
                );
                for (lag, _) in &give_up_landing {
                    horizon_lag = horizon_lag.max(*lag);
                }
                longest_send = longest_send.max(attempt_times[retries]);
                classes.push(Class {
                    weight: profile_weight * fto_weight / fto_total,
                    attempt_times,
                    give_up,
                    gaps,
                    give_up_landing,
                    column: columns,
                    group: groups,
                });
                columns += retries + 1;
                groups += retries;
            }
        }
        let class_count = classes.len();
        let automatic = (longest_send.0 / interval.0) as usize + 3;
        let window = full.window.unwrap_or(automatic).clamp(1, MAX_WINDOW);
        let horizon = window + max_lag.max(horizon_lag) + 2;
        let lookback = ((config.max_syn_to_end.0 / interval.0) as usize + 2).min(MAX_LOOKBACK);
        Ok(FullCertes {
            window,
            rtt_history_len: full.rtt_history.clamp(1, MAX_RTT_HISTORY),
            max_iterations: full.max_iterations.min(MAX_ITERATIONS),
            classes,
            columns,
            groups,
            group_lags,
            slots: VecDeque::with_capacity(window),
            first_index: 0,
            frozen: vec![0.0; horizon * (columns + class_count)],
            horizon,
            accepted: vec![0.0; lookback * columns],
            accepted_sums: vec![0.0; lookback],
            lookback,
            rtt_means: VecDeque::new(),
            segments_sent: 0,
            segments_retransmitted: 0,
            stats: FullModelStats::default(),
            config,
        })
    }

    fn frozen_width(&self) -> usize {
        self.columns + self.classes.len()
    }

    /// Intervals in the window of Eq. 19.
    pub fn window(&self) -> usize {
        self.window
    }

    pub fn stats(&self) -> FullModelStats {
        self.stats
    }

    fn network_loss(&mut self, counters: &IntervalCounters) -> f64 {
        match self.config.network_loss {
            NetworkLoss::None => 0.0,
            NetworkLoss::Fixed(q) => q,
            NetworkLoss::FromRetransmissions => {
                self.segments_sent = self.segments_sent.saturating_add(counters.segments_sent);
                self.segments_retransmitted = self
                    .segments_retransmitted
                    .saturating_add(counters.segments_retransmitted);
                if self.segments_sent == 0 {
                    0.0
                } else {
                    // The fast model's cap: beyond one half the symmetric
                    // reading is no loss rate a client would see.
                    (self.segments_retransmitted as f64 / self.segments_sent as f64).min(0.5)
                }
            }
        }
    }

    /// W_I for a new interval (Eq. 22–23) from the RTT history.
    fn initial_weights(&self) -> Vec<Landing> {
        let interval = self.config.interval;
        let mut chi_by_lag: Vec<(usize, Vec<f64>)> = Vec::new();
        let mut weights = Vec::with_capacity(self.groups);
        for class in &self.classes {
            for &(gap, spread) in &class.gaps {
                let lag = ((gap.0 as f64 / interval.0 as f64).round() as usize).max(1);
                let chi = match chi_by_lag.iter().find(|(l, _)| *l == lag) {
                    Some((_, chi)) => chi.clone(),
                    None => {
                        let chi = self.rtt_changes(lag);
                        chi_by_lag.push((lag, chi.clone()));
                        chi
                    }
                };
                let points = landing(gap, spread, &chi, interval, 1);
                let first = points.first().map_or(1, |p| p.0);
                let last = points.last().map_or(1, |p| p.0);
                // Widened by one interval on each side (Step 3's unknowns).
                let lo = first.saturating_sub(1).max(1);
                let hi = last + 1;
                let mut shares = vec![0.0; hi - lo + 1];
                for (n, share) in points {
                    shares[n - lo] += share;
                }
                weights.push(Landing { first: lo, shares });
            }
        }
        weights
    }

    /// χ over `lag` intervals: quantiles of the changes of the mean RTT
    /// over `lag` intervals in the history, in ns, clamped to
    /// ±MAX_RTT_CHANGE; `[0]` without any.
    fn rtt_changes(&self, lag: usize) -> Vec<f64> {
        let mut changes: Vec<f64> = self
            .rtt_means
            .iter()
            .zip(self.rtt_means.iter().skip(lag))
            .filter_map(|(before, after)| Some(after.as_ref()? - before.as_ref()?))
            .filter(|d| d.is_finite())
            .map(|d| d.clamp(-(MAX_RTT_CHANGE.0 as f64), MAX_RTT_CHANGE.0 as f64))
            .collect();
        if changes.is_empty() {
            return vec![0.0];
        }
        changes.sort_by(f64::total_cmp);
        let n = changes.len();
        (0..CHI_POINTS.min(n))
            .map(|q| {
                let points = CHI_POINTS.min(n);
                changes[((q as f64 + 0.5) / points as f64 * n as f64) as usize % n]
            })
            .collect()
    }

    /// Feeds interval i's counters; returns the full model's account of it.
    pub fn on_interval(&mut self, counters: &IntervalCounters) -> FullEstimate {
        let index = self.first_index + self.slots.len() as u64;
        let loss = self.network_loss(counters);
        let arrive = 1.0 - loss;
        let drop_rate = counters.drop_rate();
        if self.rtt_means.len() == self.rtt_history_len {
            self.rtt_means.pop_front();
        }
        self.rtt_means
            .push_back(counters.rtt_mean().map(|r| r.0 as f64));
        if self.slots.len() == self.window {
            self.freeze_oldest();
        }
        let weights = self.initial_weights();
        self.slots.push_back(Slot {
            sent_total: counters.offered() as f64 / arrive,
            failure: vec![1.0 - arrive * (1.0 - drop_rate); self.max_retries() + 1],
            arrive,
            syns: IntervalCounters {
                dropped: counters.dropped,
                dropped_by_attempt: counters.dropped_by_attempt.clone(),
                accepted: counters.accepted,
                refused: counters.refused,
                refused_by_attempt: counters.refused_by_attempt.clone(),
                ..IntervalCounters::default()
            },
            weights,
            initial: 0.0,
            clamped: false,
            sent: vec![0.0; self.columns],
        });

        // Step 2, and Step 3 while some R^0 is negative.
        let mut corrections = 0;
        let mut negative_initial = 0;
        let mut last_deficit = f64::INFINITY;
        loop {
            self.solve(false);
            let negatives = self.slots.iter().filter(|s| s.initial < NEGATIVE).count();
            let deficit: f64 = self.slots.iter().map(|s| (-s.initial).max(0.0)).sum();
            if corrections == 0 {
                negative_initial = negatives;
            }
            // Iterate while the negative mass shrinks by a tenth or more.
            if negatives == 0
                || corrections >= self.max_iterations
                || deficit > PROGRESS * last_deficit
            {
                break;
            }
            last_deficit = deficit;
            corrections += 1;
            if !self.correct() {
                break;
            }
        }
        let mut unresolved = 0;
        for slot in self.slots.iter_mut() {
            if slot.initial < NEGATIVE {
                slot.clamped = true;
                unresolved += 1;
            }
        }
        self.solve(true);
        self.stats.intervals += 1;
        self.stats.iterations += corrections as u64;
        self.stats.intervals_corrected += u64::from(negative_initial > 0);
        self.stats.intervals_unresolved += u64::from(unresolved > 0);

        // Final step: Eq. 16 → 12 → 4 for the newest interval.
        let newest = self.slots.len() - 1;
        let gave_up_by_class = self.give_ups(newest);
        let gave_up: f64 = gave_up_by_class.iter().sum();
        let completed_mix = self.attribute_completions(counters, index);
        let mut completed_by_attempt = vec![0.0; self.max_retries() + 1];
        let mut conn_fail = 0.0;
        for (c, class) in self.classes.iter().enumerate() {
            for j in 0..=class.retries() {
                let count = completed_mix[class.column + j];
                completed_by_attempt[j] += count;
                conn_fail += count * class.attempt_times[j].0 as f64;
            }
            conn_fail += gave_up_by_class[c] * class.give_up.0 as f64;
        }
        let slot = &self.slots[newest];
        let retried: f64 = self
            .classes
            .iter()
            .flat_map(|c| (1..=c.retries()).map(move |j| c.column + j))
            .map(|column| slot.sent[column])
            .sum::<f64>()
            * arrive;
        let transactions = counters.completed as f64 + gave_up;
        let total_time_nanos =
            conn_fail + counters.syn_to_end_sum.0 as f64 + counters.rtt_sum.0 as f64;
        let per_transaction = |nanos: f64| {
            (transactions > 0.0).then(|| Nanos((nanos / transactions).max(0.0).round() as u64))
        };
        FullEstimate {
            interval_index: index,
            completed: counters.completed,
            gave_up,
            drop_rate,
            initial_syns: slot.initial * arrive,
            retried_syns: retried,
            completed_by_attempt,
            mean: per_transaction(total_time_nanos),
            conn_fail_mean: per_transaction(conn_fail),
            negative_initial,
            corrections,
            unresolved,
            total_time_nanos,
        }
    }

    /// Largest k over the classes.
    pub fn max_retries(&self) -> usize {
        self.classes.iter().map(Class::retries).max().unwrap_or(0)
    }

    fn frozen_row(&self, index: u64) -> usize {
        (index % self.horizon as u64) as usize * self.frozen_width()
    }

    /// The oldest slot leaves the window: its retries and give-ups go to
    /// the frozen ring, its accepted mix to the look-back ring.
    fn freeze_oldest(&mut self) {
        let Some(slot) = self.slots.pop_front() else {
            return;
        };
        let index = self.first_index;
        let width = self.frozen_width();
        let own = self.frozen_row(index);
        self.frozen[own..own + width]
            .iter_mut()
            .for_each(|v| *v = 0.0);
        let accepted_row = (index % self.lookback as u64) as usize * self.columns;
        let accepted = slot.accepted(&self.classes);
        self.accepted_sums[accepted_row / self.columns.max(1)] = accepted.iter().sum();
        self.accepted[accepted_row..accepted_row + self.columns].copy_from_slice(&accepted);
        for class in &self.classes {
            for j in 0..=class.retries() {
                let sent = slot.sent[class.column + j];
                let failed = sent * slot.failure[j];
                if failed <= 0.0 {
                    continue;
                }
                if j < class.retries() {
                    let landing = &slot.weights[class.group + j];
                    for (t, share) in landing.shares.iter().enumerate() {
                        let row = self.frozen_row(index + (landing.first + t) as u64);
                        self.frozen[row + class.column + j + 1] += failed * share;
                    }
                }
            }
        }
        for (c, class) in self.classes.iter().enumerate() {
            let failed = slot.sent[class.column + class.retries()] * slot.failure[class.retries()];
            if failed > 0.0 {
                for &(lag, share) in &class.give_up_landing {
                    if lag > 0 {
                        let row = self.frozen_row(index + lag as u64);
                        self.frozen[row + self.columns + c] += failed * share;
                    }
                }
            }
        }
        self.first_index += 1;
    }

    /// Step 2: forward substitution of Eq. 19 over the window. With
    /// `clamp`, negative R^0 are set to zero (the final solution).
    fn solve(&mut self, clamp: bool) {
        let n = self.slots.len();
        for r in 0..n {
            let row = self.frozen_row(self.first_index + r as u64);
            let slot = &mut self.slots[r];
            slot.sent
                .copy_from_slice(&self.frozen[row..row + self.columns]);
        }
        for r in 0..n {
            let (head, tail) = self.slots.make_contiguous().split_at_mut(r + 1);
            let slot = &mut head[r];
            let retries: f64 = self
                .classes
                .iter()
                .flat_map(|c| (1..=c.retries()).map(move |j| c.column + j))
                .map(|column| slot.sent[column])
                .sum();
            let mut initial = slot.sent_total - retries;
            if clamp || slot.clamped {
                initial = initial.max(0.0);
            }
            slot.initial = initial;
            for class in &self.classes {
                slot.sent[class.column] = initial * class.weight;
            }
            slot.update_failures(&self.classes);
            for class in &self.classes {
                for j in 0..class.retries() {
                    let failed = slot.sent[class.column + j] * slot.failure[j];
                    let landing = &slot.weights[class.group + j];
                    for (t, share) in landing.shares.iter().enumerate() {
                        let target = landing.first + t; // ≥ 1
                        if let Some(later) = tail.get_mut(target - 1) {
                            later.sent[class.column + j + 1] += failed * share;
                        }
                    }
                }
            }
        }
    }

    /// Clients of each class who give up in slot `r` (Eq. 4's R_i^{k+1}).
    fn give_ups(&self, r: usize) -> Vec<f64> {
        let row = self.frozen_row(self.first_index + r as u64) + self.columns;
        let mut out: Vec<f64> = self.frozen[row..row + self.classes.len()].to_vec();
        for (c, class) in self.classes.iter().enumerate() {
            for &(lag, share) in &class.give_up_landing {
                if let Some(source) = r.checked_sub(lag).map(|p| &self.slots[p]) {
                    out[c] += source.sent[class.column + class.retries()]
                        * source.failure[class.retries()]
                        * share;
                }
            }
        }
        out
    }

    /// Accepted SYNs per (class, attempt) `back` intervals before `index`
    /// (the newest), from the window or the look-back ring.
    fn accepted_mix(&self, index: u64, back: u64) -> Option<Vec<f64>> {
        let at = index.checked_sub(back)?;
        if at >= self.first_index {
            let slot = &self.slots[(at - self.first_index) as usize];
            return Some(slot.accepted(&self.classes));
        }
        if index - at >= self.lookback as u64 {
            return None;
        }
        let row = (at % self.lookback as u64) as usize * self.columns;
        Some(self.accepted[row..row + self.columns].to_vec())
    }

    /// Σ of [`Self::accepted_mix`], without building it.
    fn accepted_total(&self, index: u64, back: u64) -> f64 {
        let Some(at) = index.checked_sub(back) else {
            return 0.0;
        };
        if at >= self.first_index {
            let slot = &self.slots[(at - self.first_index) as usize];
            return slot.accepted(&self.classes).iter().sum();
        }
        if index - at >= self.lookback as u64 {
            return 0.0;
        }
        self.accepted_sums[(at % self.lookback as u64) as usize]
    }

    /// C_i^j by Eq. 12: each completion's share of attempt j is that of
    /// the accepted SYNs of the interval it was accepted in.
    fn attribute_completions(&self, counters: &IntervalCounters, index: u64) -> Vec<f64> {
        let mut mix = vec![0.0; self.columns];
        if counters.completed == 0 {
            return mix;
        }
        let parts = counters.completions_by_syn_to_end();
        let available = index.min(self.lookback as u64 - 1);
        let mut first_attempts = 0.0;
        for (lag_nanos, count) in parts {
            let lag = ((lag_nanos / self.config.interval.0 as f64).round() as u64).min(available);
            let mut found = None;
            'search: for distance in 0..=available {
                for back in [lag + distance, lag.wrapping_sub(distance)] {
                    if back > available {
                        continue;
                    }
                    let total = self.accepted_total(index, back);
                    if total > 0.0 && total.is_finite() {
                        found = self.accepted_mix(index, back).map(|mix| (mix, total));
                        break 'search;
                    }
                }
            }
            match found {
                Some((accepted, total)) => {
                    for (slot, a) in mix.iter_mut().zip(accepted) {
                        *slot += count * a / total;
                    }
                }
                None => first_attempts += count,
            }
        }
        for class in &self.classes {
            mix[class.column] += first_attempts * class.weight;
        }
        mix
    }

    /// Step 3 (Eq. 26–28): one least-squares change of the window's W,
    /// over the equations from one landing width before the earliest
    /// negative R^0 to the newest (older ones are left out of G: bounded
    /// cost; if one of them turns negative the next solve counts it).
    /// Returns false when nothing could be changed.
    fn correct(&mut self) -> bool {
        let n = self.slots.len();
        // Unknowns: every W of every slot and group, numbered.
        let mut base = vec![0usize; n * self.groups];
        let mut unknowns = 0;
        for r in 0..n {
            for g in 0..self.groups {
                base[r * self.groups + g] = unknowns;
                unknowns += self.slots[r].weights[g].shares.len();
            }
        }
        // Rows of G^T: ∂R_e^0/∂W for each equation e, centred within each
        // (source, group) so that ΔW keeps Eq. 20.
        let mut rows: Vec<Vec<(usize, f64)>> = Vec::with_capacity(n);
        let mut targets = Vec::with_capacity(n);
        let mut dense = vec![0.0; unknowns];
        let mut touched_groups: Vec<usize> = Vec::new();
        let mut adjoint = vec![0.0; n * self.columns];
        // The equations a change of the W returning into the negative
        // intervals can move directly: from the earliest negative one,
        // back by the widest landing, to the newest.
        let Some(earliest) = self.slots.iter().position(|s| s.initial < NEGATIVE) else {
            return false;
        };
        let widest = self
            .group_lags
            .iter()
            .map(|(shortest, longest)| longest - shortest + 1)
            .max()
            .unwrap_or(1);
        let first_row = earliest.saturating_sub(widest);
        rows.resize(first_row, Vec::new());
        targets.resize(first_row, 0.0);
        for e in first_row..n {
            adjoint.iter_mut().for_each(|a| *a = 0.0);
            for class in &self.classes {
                for j in 1..=class.retries() {
                    adjoint[e * self.columns + class.column + j] = -1.0;
                }
            }
            touched_groups.clear();
            for r in (0..=e).rev() {
                for class in &self.classes {
                    for j in 1..=class.retries() {
                        let lambda = adjoint[r * self.columns + class.column + j];
                        if lambda == 0.0 {
                            continue;
                        }
                        let g = class.group + j - 1;
                        let (shortest, longest) = self.group_lags[g];
                        for p in r.saturating_sub(longest)..=r.saturating_sub(shortest) {
                            if p >= r {
                                continue;
                            }
                            let source = &self.slots[p];
                            let landing = &source.weights[g];
                            let lag = r - p;
                            if lag < landing.first || lag > landing.last() {
                                continue;
                            }
                            let w = landing.share(lag);
                            let key = p * self.groups + g;
                            let u = base[key] + lag - landing.first;
                            if dense[u] == 0.0 {
                                touched_groups.push(key);
                            }
                            let failure = source.failure[j - 1];
                            dense[u] += lambda * failure * source.sent[class.column + j - 1];
                            if j > 1 {
                                adjoint[p * self.columns + class.column + j - 1] +=
                                    lambda * w * failure;
                            }
                        }
                    }
                }
            }
            touched_groups.sort_unstable();
            touched_groups.dedup();
            let mut row = Vec::new();
            for &key in &touched_groups {
                let len = self.slots[key / self.groups].weights[key % self.groups]
                    .shares
                    .len();
                let start = base[key];
                let mean = dense[start..start + len].iter().sum::<f64>() / len as f64;
                for (u, value) in dense[start..start + len].iter_mut().enumerate() {
                    let centred = *value - mean;
                    if centred != 0.0 && centred.is_finite() {
                        row.push((start + u, centred));
                    }
                    *value = 0.0;
                }
            }
            let initial = self.slots[e].initial;
            targets.push(if initial < 0.0 { -initial } else { 0.0 }); // Eq. 28
            rows.push(row);
        }
        // Minimum-norm solution of G^T ΔW = ΔR: ΔW = G y, (G^T G) y = ΔR,
        // over the equations W can move.
        let active: Vec<usize> = (0..n).filter(|&e| !rows[e].is_empty()).collect();
        if !active.iter().any(|&e| targets[e] > 0.0) {
            return false;
        }
        let m = active.len();
        let mut by_unknown: Vec<Vec<(usize, f64)>> = vec![Vec::new(); unknowns];
        for (a, &e) in active.iter().enumerate() {
            for &(u, v) in &rows[e] {
                by_unknown[u].push((a, v));
            }
        }
        let mut gram = vec![0.0; m * m];
        for entries in &by_unknown {
            for &(a, va) in entries {
                for &(b, vb) in entries {
                    gram[a * m + b] += va * vb;
                }
            }
        }
        let largest = (0..m).map(|a| gram[a * m + a]).fold(0.0, f64::max);
        for a in 0..m {
            gram[a * m + a] += largest * 1e-10 + f64::MIN_POSITIVE;
        }
        let mut rhs: Vec<f64> = active.iter().map(|&e| targets[e]).collect();
        if !solve_linear(&mut gram, &mut rhs, m) {
            return false;
        }
        let mut delta = vec![0.0; unknowns];
        for (a, &e) in active.iter().enumerate() {
            for &(u, v) in &rows[e] {
                delta[u] += v * rhs[a];
            }
        }
        if delta.iter().any(|d| !d.is_finite()) {
            return false;
        }
        // Apply; keep Eq. 21 (W ≥ 0) and Eq. 20 (Σ W = 1).
        for r in 0..n {
            for g in 0..self.groups {
                let start = base[r * self.groups + g];
                let landing = &mut self.slots[r].weights[g];
                if delta[start..start + landing.shares.len()]
                    .iter()
                    .all(|d| *d == 0.0)
                {
                    continue;
                }
                for (t, share) in landing.shares.iter_mut().enumerate() {
                    *share = (*share + delta[start + t]).max(0.0);
                }
                let total: f64 = landing.shares.iter().sum();
                if total > 0.0 && total.is_finite() {
                    landing.shares.iter_mut().for_each(|s| *s /= total);
                } else {
                    let len = landing.shares.len() as f64;
                    landing.shares.iter_mut().for_each(|s| *s = 1.0 / len);
                }
            }
        }
        true
    }
}

/// Where SYNs uniform within an interval land after `shift` + spread + δ
/// for each δ of `changes` (equally likely): (lag, share), sorted, lags at
/// least `min_lag` (Eq. 22–23 integrated over the interval).
fn landing(
    shift: Nanos,
    spread: Nanos,
    changes: &[f64],
    interval: Nanos,
    min_lag: usize,
) -> Vec<(usize, f64)> {
    let mut out: Vec<(usize, f64)> = Vec::new();
    let points = if spread == Nanos::ZERO {
        1
    } else {
        SPREAD_POINTS
    };
    let each = 1.0 / (points * changes.len().max(1)) as f64;
    let mut add = |lag: usize, share: f64| {
        if share <= 0.0 {
            return;
        }
        match out.iter_mut().find(|(l, _)| *l == lag) {
            Some(entry) => entry.1 += share,
            None => out.push((lag, share)),
        }
    };
    for &delta in changes {
        for k in 0..points {
            let e = if points == 1 {
                0.0
            } else {
                ((k as f64 + 0.5) / points as f64 * 2.0 - 1.0) * spread.0 as f64
            };
            let x = ((shift.0 as f64 + e + delta) / interval.0 as f64).max(min_lag as f64);
            let whole = x.floor();
            let fraction = x - whole;
            add(whole as usize, (1.0 - fraction) * each);
            add(whole as usize + 1, fraction * each);
        }
    }
    out.sort_by_key(|(lag, _)| *lag);
    out
}

/// Solves the m × m system in place by Gaussian elimination with partial
/// pivoting (written by hand: m ≤ MAX_WINDOW, one small dense system);
/// false when singular or not finite.
fn solve_linear(a: &mut [f64], b: &mut [f64], m: usize) -> bool {
    for col in 0..m {
        let pivot = (col..m)
            .max_by(|&x, &y| a[x * m + col].abs().total_cmp(&a[y * m + col].abs()))
            .unwrap_or(col);
        let magnitude = a[pivot * m + col].abs();
        if magnitude == 0.0 || magnitude.is_nan() {
            return false;
        }
        if pivot != col {
            for k in 0..m {
                a.swap(pivot * m + k, col * m + k);
            }
            b.swap(pivot, col);
        }
        let d = a[col * m + col];
        for row in col + 1..m {
            let factor = a[row * m + col] / d;
            if factor == 0.0 {
                continue;
            }
            for k in col..m {
                a[row * m + k] -= factor * a[col * m + k];
            }
            b[row] -= factor * b[col];
        }
    }
    for col in (0..m).rev() {
        let mut value = b[col];
        for k in col + 1..m {
            value -= a[col * m + k] * b[k];
        }
        b[col] = value / a[col * m + col];
    }
    b.iter().all(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{ClientMix, SynProfile};

    /// One retransmission 3 s after the first SYN, giving up at 9 s, no
    /// spread; 1 s intervals.
    fn one_retry_config() -> CertesConfig {
        let profile = SynProfile {
            name: "one-retry".into(),
            gaps: vec![Nanos::from_secs(3)],
            give_up: Nanos::from_secs(9),
            first_gap_spread: Nanos::ZERO,
            later_gap_spread: Nanos::ZERO,
        };
        CertesConfig::new(
            Nanos::from_secs(1),
            ClientMix::single(profile),
            Nanos::from_secs(60),
        )
    }

    fn counters(
        dropped: u64,
        accepted: u64,
        completed: u64,
        syn_to_end_ms: u64,
    ) -> IntervalCounters {
        IntervalCounters {
            dropped,
            accepted,
            completed,
            syn_to_end_sum: Nanos::from_millis(syn_to_end_ms * completed),
            ..Default::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    /// Refused SYNs by hand (one retry 3 s after the first SYN): interval
    /// 0 has 100 initial SYNs, 40 dropped, 40 accepted, 20 refused —
    /// DR = 0.4, the refused ones arrived; interval 3 the 40 retries, 30
    /// accepted, 10 refused. The 30 completions are retries (3 s each),
    /// and nobody is left to give up: 100 = 70 completed + 30 refused.
    #[test]
    fn refused_syns_arrive_and_leave_as_failures() {
        let mut full = FullCertes::new(one_retry_config(), FullModelConfig::default()).unwrap();
        let refused = |dropped, accepted, refused| IntervalCounters {
            refused,
            ..counters(dropped, accepted, accepted, 0)
        };
        let mut estimates = Vec::new();
        for i in 0..15 {
            let c = match i {
                0 => refused(40, 40, 20),
                3 => refused(0, 30, 10),
                _ => IntervalCounters::default(),
            };
            estimates.push(full.on_interval(&c));
        }
        assert!(close(estimates[0].drop_rate, 0.4));
        assert!(close(estimates[0].initial_syns, 100.0));
        let e3 = &estimates[3];
        assert!(close(e3.retried_syns, 40.0) && close(e3.initial_syns, 0.0));
        assert!(close(e3.completed_by_attempt[1], 30.0));
        assert_eq!(e3.mean, Some(Nanos::from_secs(3)));
        let gave_up: f64 = estimates.iter().map(|e| e.gave_up).sum();
        assert!(close(gave_up, 0.0), "{gave_up}");
    }

    /// Refusals by attempt by hand (one retry 3 s after the first SYN, 1-s
    /// intervals, SYN-to-END and RTT 0): interval 0 has 100 initial SYNs,
    /// 50 dropped, 50 accepted; interval 3 the 50 retries and 100 new
    /// initial SYNs, none dropped, 50 refused, 100 accepted and completed.
    /// The total alone (RR = 1/3 for both attempts): 33.3 completions are
    /// retries, mean 33.3 × 3 s / 100 = 1 s. Every retry refused
    /// (REFUSED^1 = 50): none, 0 s. Only initial SYNs refused
    /// (REFUSED^0 = 50): 50 retries, 1.5 s.
    #[test]
    fn refusals_by_attempt_by_hand() {
        let run = |refused_by_attempt: Vec<u64>| {
            let mut full = FullCertes::new(one_retry_config(), FullModelConfig::default()).unwrap();
            let mut estimates = Vec::new();
            for i in 0..15 {
                let c = match i {
                    0 => counters(50, 50, 50, 0),
                    3 => IntervalCounters {
                        refused: 50,
                        refused_by_attempt: refused_by_attempt.clone(),
                        ..counters(0, 100, 100, 0)
                    },
                    _ => IntervalCounters::default(),
                };
                estimates.push(full.on_interval(&c));
            }
            let e3 = estimates.swap_remove(3);
            assert!(close(e3.retried_syns, 50.0) && close(e3.initial_syns, 100.0));
            (e3.completed_by_attempt, e3.mean)
        };
        let (uniform, mean) = run(Vec::new());
        assert!(close(uniform[1], 100.0 / 3.0), "{uniform:?}");
        assert_eq!(mean, Some(Nanos::from_secs(1)));
        let (retries_refused, mean) = run(vec![0, 50]);
        assert!(close(retries_refused[0], 100.0) && close(retries_refused[1], 0.0));
        assert_eq!(mean, Some(Nanos::ZERO));
        let (initial_refused, mean) = run(vec![50]);
        assert!(close(initial_refused[1], 50.0), "{initial_refused:?}");
        assert_eq!(mean, Some(Nanos::from_millis(1500)));
    }

    /// Drops by attempt by hand (one retry 3 s after the first SYN, giving
    /// up at 9 s; 1-s intervals, SYN-to-END and RTT 0): interval 0 has 100
    /// initial SYNs, 50 dropped, 50 accepted; interval 3 the 50 retries and
    /// 100 new initial SYNs, 30 dropped, 120 accepted; interval 6 100
    /// SYNs, all accepted; every accepted SYN completes at once.
    /// * The total alone (DR_3 = 0.2): 80 initial SYNs and 40 retries
    ///   complete in 3, mean 40 × 3 s / 120 = 1 s; 20 first retries in 6
    ///   (0.6 s); the 10 dropped retries give up (9 s after their first SYN,
    ///   in interval 9).
    /// * Every drop a retry (DROPPED_3^1 = 30): 100 and 20, 0.5 s; no retry
    ///   in 6; 30 give up.
    /// * Every drop an initial SYN (DROPPED_3^0 = 30): 70 and 50, 1.25 s; 30
    ///   retries in 6 (0.9 s); none give up.
    /// * In proportion (20, 10), or not adding up: the first, exactly.
    #[test]
    fn drops_by_attempt_by_hand() {
        let run = |dropped_by_attempt: Vec<u64>| {
            let mut full = FullCertes::new(one_retry_config(), FullModelConfig::default()).unwrap();
            let mut estimates = Vec::new();
            for i in 0..15 {
                let c = match i {
                    0 => counters(50, 50, 50, 0),
                    3 => IntervalCounters {
                        dropped_by_attempt: dropped_by_attempt.clone(),
                        ..counters(30, 120, 120, 0)
                    },
                    6 => counters(0, 100, 100, 0),
                    _ => IntervalCounters::default(),
                };
                estimates.push(full.on_interval(&c));
            }
            let gave_up: f64 = estimates.iter().map(|e| e.gave_up).sum();
            (
                estimates[3].completed_by_attempt.clone(),
                [estimates[3].mean, estimates[6].mean],
                estimates[6].retried_syns,
                gave_up,
                estimates[9].gave_up,
            )
        };
        let check = |(e3, means, retried6, gave_up, gave_up9): &(
            Vec<f64>,
            [Option<Nanos>; 2],
            f64,
            f64,
            f64,
        ),
                     completed: [f64; 2],
                     want_means: [u64; 2],
                     retries: f64,
                     give_ups: f64| {
            assert!(
                close(e3[0], completed[0]) && close(e3[1], completed[1]),
                "{e3:?}"
            );
            assert_eq!(*means, want_means.map(|ms| Some(Nanos::from_millis(ms))));
            assert!(close(*retried6, retries), "{retried6}");
            assert!(
                close(*gave_up, give_ups) && close(*gave_up9, give_ups),
                "{gave_up}"
            );
        };
        let uniform = run(Vec::new());
        check(&uniform, [80.0, 40.0], [1000, 600], 20.0, 10.0);
        assert_eq!(run(vec![20, 10]), uniform);
        assert_eq!(run(vec![0, 20]), uniform);
        check(&run(vec![0, 30]), [100.0, 20.0], [500, 0], 0.0, 30.0);
        check(&run(vec![30]), [70.0, 50.0], [1250, 900], 30.0, 0.0);
    }

    /// Case 1: without drops every transaction is a first attempt; the full
    /// model, the fast one and SYN-to-END + RTT agree.
    #[test]
    fn no_drops_equals_fast_model_and_server_time() {
        for name in ["windows-9x-nt", "linux-6.5", "mix-2026"] {
            let config = CertesConfig::new(
                Nanos::from_millis(250),
                ClientMix::builtin(name).unwrap(),
                Nanos::from_secs(21),
            );
            let mut full = FullCertes::new(config.clone(), FullModelConfig::default()).unwrap();
            let mut fast = Certes::new(config).unwrap();
            for i in 0..200u64 {
                let c = IntervalCounters {
                    accepted: 100 + i % 7,
                    completed: 90 + i % 11,
                    syn_to_end_sum: Nanos::from_millis(400 * (90 + i % 11)),
                    rtt_sum: Nanos::from_millis(80 * (90 + i % 11)),
                    ..Default::default()
                };
                let f = full.on_interval(&c);
                let e = fast.on_interval(&c);
                assert_eq!(f.mean, e.mean, "{name} interval {i}");
                assert_eq!(f.mean, Some(Nanos::from_millis(480)));
                assert_eq!(f.gave_up, 0.0);
                assert_eq!(f.negative_initial, 0);
            }
        }
    }

    /// Case 2: 10 SYNs dropped at 0 s (all return at 3 s by W_I), but only
    /// 4 SYNs arrive at 3 s: R_3^0 = 4 − 10 = −6. Step 3 by hand: the
    /// unknowns are W_{0,2}, W_{0,3}, W_{0,4} (W_I = 0, 1, 0); ∂R_2^0/∂W =
    /// (−10, 0, 0) and ∂R_3^0/∂W = (0, −10, 0), centred so that ΔW sums to
    /// zero: (−20/3, 10/3, 10/3) and (10/3, −20/3, 10/3). With ΔR^0 = (0, 6)
    /// (Eq. 28) the minimum-norm solution is y = (0.06, 0.12) and ΔW =
    /// (0, −0.6, 0.6): W = (0, 0.4, 0.6), R_3^0 = 4 − 4 = 0, and the other
    /// 6 retries are due at 4 s.
    #[test]
    fn negative_initial_count_corrected_by_least_squares() {
        let mut full = FullCertes::new(one_retry_config(), FullModelConfig::default()).unwrap();
        full.on_interval(&counters(10, 0, 0, 0));
        full.on_interval(&counters(0, 0, 0, 0));
        full.on_interval(&counters(0, 0, 0, 0));
        let third = full.on_interval(&counters(0, 4, 0, 0));
        assert_eq!(third.negative_initial, 1);
        assert_eq!(third.corrections, 1);
        assert_eq!(third.unresolved, 0);
        assert!(close(third.initial_syns, 0.0), "{third:?}");
        assert!(close(third.retried_syns, 4.0), "{third:?}");
        // At 4 s: 6 SYNs, all the remaining retries; 10 completions with a
        // 100 ms SYN-to-END were accepted in this interval, all as first
        // retries: (10 · 3 s + 10 · 0.1 s) / 10 = 3.1 s.
        let fourth = full.on_interval(&counters(0, 6, 10, 100));
        assert_eq!(fourth.negative_initial, 0);
        assert!(close(fourth.initial_syns, 0.0), "{fourth:?}");
        assert!(close(fourth.retried_syns, 6.0), "{fourth:?}");
        assert!(close(fourth.completed_by_attempt[1], 10.0), "{fourth:?}");
        let mean = fourth.mean.unwrap().0 as f64;
        assert!((mean - 3.1e9).abs() < 10.0, "{mean}");
        assert_eq!(full.stats().intervals_corrected, 1);
    }

    /// Case 3: the mean RTT rises from 100 ms to 600 ms at 4 s. The changes
    /// over the 3 s gap in the history are 0, +0.5 s and +0.5 s (Eq. 23's
    /// χ_0), so SYNs dropped at 5 s return at 8 s with weight
    /// 1/3 + 2/3 · 1/2 = 2/3 and at 9 s with 1/3 (Eq. 22); without the
    /// change all would return at 8 s.
    #[test]
    fn rtt_change_in_window_moves_retry_weights() {
        let rtt = |completed: u64, ms: u64| IntervalCounters {
            completed,
            syn_to_end_sum: Nanos::from_millis(10 * completed),
            rtt_sum: Nanos::from_millis(ms * completed),
            ..Default::default()
        };
        for (late_rtt, expected_at_8) in [(600, 20.0), (100, 30.0)] {
            let mut full = FullCertes::new(one_retry_config(), FullModelConfig::default()).unwrap();
            for _ in 0..4 {
                full.on_interval(&rtt(10, 100));
            }
            full.on_interval(&rtt(10, late_rtt));
            let mut drops = rtt(10, late_rtt);
            drops.dropped = 30;
            full.on_interval(&drops);
            full.on_interval(&IntervalCounters::default());
            full.on_interval(&IntervalCounters::default());
            let eighth = full.on_interval(&counters(0, 30, 0, 0));
            assert!(close(eighth.retried_syns, expected_at_8), "{eighth:?}");
            assert!(
                close(eighth.initial_syns, 30.0 - expected_at_8),
                "{eighth:?}"
            );
            let ninth = full.on_interval(&counters(0, 30, 0, 0));
            assert!(close(ninth.retried_syns, 30.0 - expected_at_8), "{ninth:?}");
        }
    }

    /// Drops on steady input with the paper's clients: the retries found
    /// are those Eq. 13 sends forward and the estimate is that of the fast
    /// model (which then needs none of its heuristics).
    #[test]
    fn steady_drops_match_fast_model() {
        let mut profile = SynProfile::builtin("windows-9x-nt").unwrap();
        profile.first_gap_spread = Nanos::ZERO;
        let config = CertesConfig::new(
            Nanos::from_secs(1),
            ClientMix::single(profile),
            Nanos::from_secs(21),
        );
        let mut full = FullCertes::new(config.clone(), FullModelConfig::default()).unwrap();
        let mut fast = Certes::new(config).unwrap();
        // 1600 initial SYNs/s, 25 % dropped: offered = 1600 (1 + 1/4 + 1/16).
        for i in 0..60 {
            let offered: u64 = match i {
                0..=2 => 1600,
                3..=8 => 2000,
                _ => 2100,
            };
            let c = IntervalCounters {
                dropped: offered / 4,
                accepted: offered - offered / 4,
                completed: 99,
                syn_to_end_sum: Nanos::from_millis(200 * 99),
                ..Default::default()
            };
            let f = full.on_interval(&c);
            let e = fast.on_interval(&c);
            assert!(close(f.initial_syns, e.initial_syns), "{i}: {f:?} {e:?}");
            let (a, b) = (f.mean.unwrap().0 as f64, e.mean.unwrap().0 as f64);
            assert!((a / b - 1.0).abs() < 1e-6, "{i}: {a} {b}");
            assert!(close(f.initial_syns, 1600.0), "{i}: {f:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Arbitrary counters never panic; estimates are finite and ≥ 0.
        #[test]
        fn arbitrary_counters_never_panic(
            profile in 0usize..3,
            interval_ms in proptest::prop_oneof![proptest::prelude::Just(250u64), 100u64..900],
            window in proptest::option::of(1usize..40),
            input in proptest::collection::vec(
                (0u64..2000, 0u64..2000, 0u64..2000, proptest::prelude::any::<u64>(),
                 proptest::prelude::any::<u64>(), proptest::prelude::any::<bool>()),
                1..80,
            ),
        ) {
            let name = ["windows-9x-nt", "linux-6.5", "mix-2026"][profile];
            let mut config = CertesConfig::new(
                Nanos::from_millis(interval_ms),
                ClientMix::builtin(name).unwrap(),
                Nanos::from_secs(21),
            );
            config.network_loss = NetworkLoss::FromRetransmissions;
            let full_config = FullModelConfig { window, ..FullModelConfig::default() };
            let mut full = FullCertes::new(config, full_config).unwrap();
            for (dropped, accepted, completed, syn_to_end, rtt, huge) in input {
                let scale = if huge { u64::MAX / 4096 } else { 1 };
                let c = IntervalCounters {
                    dropped: dropped * scale,
                    accepted: accepted * scale,
                    completed,
                    syn_to_end_sum: Nanos(syn_to_end),
                    rtt_sum: Nanos(rtt),
                    segments_sent: accepted,
                    segments_retransmitted: dropped % (accepted + 1),
                    ..Default::default()
                };
                let e = full.on_interval(&c);
                proptest::prop_assert!(e.gave_up.is_finite() && e.gave_up >= 0.0, "{e:?}");
                proptest::prop_assert!(e.initial_syns.is_finite() && e.initial_syns >= 0.0, "{e:?}");
                proptest::prop_assert!(e.total_time_nanos().is_finite() && e.total_time_nanos() >= 0.0, "{e:?}");
                proptest::prop_assert!(e.completed_by_attempt.iter().all(|c| c.is_finite() && *c >= 0.0));
                if let Some(mean) = e.conn_fail_mean {
                    proptest::prop_assert!(mean.0 as f64 <= e.total_time_nanos() + 1.0);
                }
            }
        }
    }
}
