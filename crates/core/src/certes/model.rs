//! The fast online Certes model (Certes paper, Section 3.2, Figure 8).
//!
//! Time is cut into intervals of length Δ. For interval i the server counts
//! DROPPED_i, ACCEPTED_i, COMPLETED_i and sums SYN-to-END and RTT over the
//! completed connections ([`IntervalCounters`]). The model splits the
//! offered SYNs into initial SYNs R_i^0 and j-th retries R_i^j (Eq. 3),
//! applies the interval's drop rate DR_i to every class alike (Eq. 5–6),
//! sends the dropped ones forward to the interval in which their client's
//! next SYN arrives (Eq. 13) and the last ones to the interval in which
//! their client gives up (Figure 8), splits COMPLETED_i over the retry
//! classes in the proportions accepted one mean SYN-to-END earlier
//! (Eq. 31), and returns Eq. 4:
//!
//! ```text
//! CLIENT_RT_i = (Σ_c G_i^c·T_give-up^c + Σ_{c,j} C_i^{c,j}·T_j^c + Σ SYN-to-END + Σ RTT)
//!               / (COMPLETED_i + Σ_c G_i^c)
//! ```
//!
//! where T_j^c is the send time of class c's j-th retransmission after its
//! first SYN (the paper's 3(2^j − 1) s) and G_i^c = R_i^{k+1} the clients of
//! class c who give up in interval i.
//!
//! Generalizations of the paper, each reducing to it for the paper's
//! 3/6/12 s profile and a single frustration timeout:
//! * **Any profile or mixture** ([`crate::tcp::ClientMix`]): a class per
//!   (profile, frustration timeout) with its own retry times; initial SYNs
//!   are split by the mixture's weights. The paper's m = 3 intervals per 3 s
//!   becomes each gap divided by Δ. Where a gap is not a whole number of
//!   intervals, or the profile's first timeout is spread (Eq. 1 of the
//!   Abacus paper, ±50 ms), the returning SYNs are split over the
//!   neighbouring intervals by the weights W of Eq. 22 computed for SYNs
//!   uniform within their interval and no RTT variance (Eq. 29 is the
//!   special case of whole-interval gaps).
//! * **Frustration timeout** (Section 3.2.2, Table I): class c retries
//!   k_c = #{j ≥ 1 : T_j^c < FTO} times, at most the profile's N, and gives
//!   up at min(FTO, the profile's own give-up time). Table I puts FTO = 21 s
//!   at k = 3 while the text uses 21 s as k = 2; we follow the text: a
//!   retry due at the very instant of the frustration timeout is not sent.
//!   A mixture of timeouts is a first-class input.
//! * **Network SYN loss** (Section 3.2.1, Figure 10): with loss rate q, the
//!   counted SYNs are (1 − q) of those clients sent; every class fails with
//!   probability 1 − (1 − q)(1 − DR_i). q is given, or estimated from the
//!   server's retransmitted share of data segments (the paper's "another
//!   approach", assuming symmetric loss).
//! * **Refused SYNs** (REFUSED_i, the rule in [`super::counters`]): a SYN
//!   answered with a RST arrived, so it is in OFFERED_i and DR_i's
//!   denominator and counts among the initial SYNs and retries like any
//!   other; it is neither retried nor accepted — its share RR_i of every
//!   class leaves the model as a failure, outside the accepted mix that
//!   splits COMPLETED_i (Eq. 12, 31) and outside Eq. 4's transactions
//!   ([`Estimate::refused`]). Initial SYNs are conserved as completions,
//!   give-ups and refusals. The paper's server never refuses. When the
//!   counters say which attempt each refused SYN was (REFUSED_i^j, a
//!   capture), attempt j is refused at REFUSED_i^j over the model's own
//!   count of attempt j's arrivals, not at the one rate: the Abacus gate
//!   refuses retries more often than initial SYNs (it rejects when no
//!   future bucket holds a token for the client's next retries, Abacus
//!   paper Section 5), and the uniform rate credits too many completions
//!   to retries.
//! * **Drops by attempt** (DROPPED_i^j, the rule in [`super::counters`]):
//!   when the counters say which attempt each dropped SYN was (a
//!   capture), attempt j fails at DR_i^j = DROPPED_i^j over the same count
//!   of attempt j's arrivals instead of Eq. 6's one DR_i, and its failures
//!   return as attempt j + 1 (Eq. 13) at that rate: behind the Abacus gate
//!   (A4 relaxed) and other correlated droppers a first retry is dropped
//!   more often than an initial SYN. With the total only, Eq. 6. The
//!   damping below watches the interval's one failure rate either way.
//!   Drops of an attempt beyond the model's expected arrivals of it in
//!   the interval are carried to its next arrivals of that attempt
//!   ([`AttemptDropRates`]), not handed to the interval's other attempts:
//!   a real kernel's retransmissions come a fraction of a second after
//!   the profile's nominal times, a late attempt has one or two SYNs an
//!   interval, and handing the excess over took failures from the late
//!   attempts (and so give-ups) and gave them to initial SYNs — on the
//!   testbed's Linux 3.7/≥ 6.5 mixture at 55 % drops, give-ups 72 against
//!   the capture's 107 in a replay of the run's counters, 84 carried (the
//!   rest of the gap is not this; docs/certes-live.md). An interval may
//!   then fail more or fewer SYNs than its DROPPED_i; each attempt fails,
//!   over a run, as many as the capture dropped.
//! * **Real send times** (with learned clients): T_j^c is the send time
//!   of the profile the model is given. A profile learned from a capture
//!   ([`super::learn`], "Real send times") carries its clients' real
//!   ones — a Linux kernel's SYN timers fire late, 0.4 s at Linux 3.7's
//!   15 s on the testbed — so the model expects attempt j's arrivals
//!   where the capture sees them (Eq. 13), fails them at DR_i^j there,
//!   and charges the wait the clients had (Eq. 4). The paper's clients
//!   send at the nominal times; a profile that is not learned still does.
//! * **Distribution** (Conclusions): the interval's SYN-to-END distribution
//!   (its histogram when measured, else its mean) shifted by each retry
//!   class's wait plus the mean RTT, mixed with the give-ups' point masses;
//!   [`Estimate::percentile`] inverts the mixture's CDF.
//!
//! Completions: when the counters carry the interval's SYN-to-END
//! histogram, COMPLETED_i is split per bucket, each bucket's connections
//! taking the retry mix accepted one bucket-SYN-to-END earlier: Eq. 12
//! with ACCEPTED_{p,i} known, which the paper approximates by Eq. 31
//! because its kernel kept only the sum. On a real server whose SYN-to-END
//! is bimodal (queued handshakes versus ones whose ACK the full accept
//! queue dropped) the mean's single lag picks the wrong mix.
//!
//! Heuristics of Step 3: Eq. 30 (more retries expected than SYNs arrived:
//! the surplus is carried to the next interval, proportionally over every
//! class, not only j = 1, 2, for as long as SYNs keep arriving; an interval
//! with no SYN at all drops the carried surplus from the model, so that a
//! quiet period cannot hold phantom retries forever) and Eq. 31
//! (completions split in the accepted proportions). When no SYN was accepted one SYN-to-END earlier
//! (start of a run, idle period) the nearest interval with accepts within
//! the window is used, and with none the completions count as first
//! attempts.
//!
//! **Damping** (ours, a departure from Section 3.2, which the paper did
//! not need at its drop rates). Step 2 takes R_i^0 = OFFERED_i − (retries
//! expected from earlier R^0): an error in one interval's split travels on
//! as x_i = −Σ_{c,j} w_c f^j x_{i − T_j^c}, f the probability that a SYN
//! fails. Above a critical f* (found at construction by bisection on the
//! impulse response; 0.618 for the paper's 3/6 s clients, from
//! z³ + f z² + f² = 0) that recursion grows until the clamps stop it. Above
//! f_d < f*, where the loop gain Σ_c w_c Σ_j f^j is 90 % of f*'s, attempt
//! j's expected retries are pulled toward their stationary share by
//! (f_d / f)^j, f averaged over 3 s, so that an error dies out as at f_d.
//! Below f_d, and on steady input, the model is the paper's;
//! `CertesConfig::damping = false` runs the recursion as published.
//!
//! Convergence (Appendix B): the model assumes every SYN of its first
//! interval is an initial one; started mid-stream it misclassifies the
//! retries then in flight, which leave the window within one frustration
//! timeout.
//!
//! Cost: one interval costs O(number of retry classes), independent of the
//! window length; the window is a ring of future arrivals.

use super::counters::{AttemptDropRates, IntervalCounters};
use super::histogram::LatencyHistogram;
use crate::tcp::ClientMix;
use crate::Nanos;

/// How the model learns the SYN loss rate in the network (Section 3.2.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NetworkLoss {
    /// No SYN is lost in the network.
    None,
    /// A known loss rate q in [0, 1) (e.g. 0.03; or from the routers).
    Fixed(f64),
    /// q = data segments retransmitted / sent by the server, cumulated since
    /// the estimator started (symmetric loss assumed).
    FromRetransmissions,
}

/// What the estimator assumes about clients and time.
#[derive(Clone, Debug, PartialEq)]
pub struct CertesConfig {
    /// Δ: the interval length; must be below every profile's first gap.
    pub interval: Nanos,
    /// Client retransmission profiles and their weights.
    pub clients: ClientMix,
    /// Frustration timeouts (FTO) and their weights; one entry is the
    /// paper's single FTO (default 21 s).
    pub frustration_timeouts: Vec<(Nanos, f64)>,
    pub network_loss: NetworkLoss,
    /// Longest SYN-to-END the completion split (Eq. 31) looks back over.
    pub max_syn_to_end: Nanos,
    /// Damp the recursion above the failure rate where it turns unstable
    /// (see the module documentation). `false` runs Section 3.2's fast
    /// model as published.
    pub damping: bool,
}

impl CertesConfig {
    /// A configuration with one frustration timeout, no network loss, a
    /// 300 s SYN-to-END look-back and damping.
    pub fn new(interval: Nanos, clients: ClientMix, frustration_timeout: Nanos) -> CertesConfig {
        CertesConfig {
            interval,
            clients,
            frustration_timeouts: vec![(frustration_timeout, 1.0)],
            network_loss: NetworkLoss::None,
            max_syn_to_end: Nanos::from_secs(300),
            damping: true,
        }
    }

    /// The latest instant after its first SYN at which the model lets a
    /// client whose SYNs go unanswered give up: the largest
    /// `SynProfile::give_up_at` (min(F, T_conn)) over the mixture's
    /// profiles and the frustration timeouts. No SYN of such a client comes
    /// later, so a live capture decides it then.
    pub fn latest_give_up(&self) -> Nanos {
        self.clients
            .entries()
            .iter()
            .flat_map(|(profile, _)| {
                self.frustration_timeouts
                    .iter()
                    .map(|(fto, _)| profile.give_up_at(*fto))
            })
            .max()
            .unwrap_or(Nanos::ZERO)
    }
}

/// A configuration the model cannot run with.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CertesError {
    #[error("interval must be positive")]
    ZeroInterval,
    #[error(
        "interval {} ms is shorter than {} ms; below the network's delay variance a retry \
         rarely lands in the interval it is expected in (Section 3.2, Figure 9): use e.g. 250ms",
        .interval.0 as f64 / 1e6,
        .minimum.0 as f64 / 1e6
    )]
    IntervalTooShort { interval: Nanos, minimum: Nanos },
    #[error(
        "interval {interval} is not below the first SYN timeout {first_gap} of profile `{profile}`; \
         a dropped SYN must come back in a later interval (use e.g. 250ms for 1-second clients)"
    )]
    IntervalTooLong {
        interval: Nanos,
        profile: String,
        first_gap: Nanos,
    },
    #[error("no frustration timeout given")]
    NoFrustrationTimeout,
    #[error("frustration timeout {timeout} with weight {weight}: the timeout must be positive and the weight finite and positive")]
    BadFrustrationTimeout { timeout: Nanos, weight: f64 },
    #[error("network loss rate {0} must be in [0, 1)")]
    BadNetworkLoss(f64),
}

/// Eq. 4 over many intervals: Σ total time / Σ transactions of the
/// estimates, in nanoseconds, in their order; `None` without transactions.
pub fn transaction_weighted_mean<'a>(
    estimates: impl IntoIterator<Item = &'a Estimate>,
) -> Option<f64> {
    let (total, transactions) = estimates.into_iter().fold((0.0, 0.0), |(t, n), e| {
        (t + e.total_time_nanos(), n + e.transactions())
    });
    (transactions > 0.0).then(|| total / transactions)
}

/// One class of clients: a profile combined with a frustration timeout.
#[derive(Clone, Debug)]
struct RetryClass {
    /// Share of initial SYNs.
    weight: f64,
    /// T_0 = 0, T_1 … T_k: send time of each attempt after the first SYN.
    attempt_times: Vec<Nanos>,
    /// When a client of this class gives up, after its first SYN.
    give_up: Nanos,
    /// For a SYN of attempt j that fails: (interval offset, share) of where
    /// the same client shows up next — attempt j + 1, or, for j = k, gives up.
    next: Vec<Vec<(usize, f64)>>,
    /// First row of this class in the pending table; rows
    /// `row + j` for attempts j = 1 … k and `row + k + 1` for give-ups.
    row: usize,
    /// First column of this class in the accepted-mix table; column
    /// `column + j` for attempts j = 0 … k.
    column: usize,
}

impl RetryClass {
    fn retries(&self) -> usize {
        self.attempt_times.len() - 1
    }
}

/// The Certes estimator: feed it one interval's counters at a time.
#[derive(Clone, Debug)]
pub struct Certes {
    config: CertesConfig,
    classes: Vec<RetryClass>,
    /// Ring of expected future SYNs sent per (class, attempt) and give-ups:
    /// `rows × horizon`.
    pending: Vec<f64>,
    horizon: usize,
    /// Ring of accepted SYNs per (class, attempt): `lookback × columns`.
    accepted_mix: Vec<f64>,
    accepted_total: Vec<f64>,
    columns: usize,
    lookback: usize,
    /// Index of the next interval.
    index: u64,
    segments_sent: u64,
    segments_retransmitted: u64,
    /// Scratch: SYNs of each (class, attempt) in the current interval.
    sent: Vec<f64>,
    /// Retries delayed by Eq. 30 into the next interval, per (class, attempt).
    carried: Vec<f64>,
    /// Scratch: completions of the current interval per (class, attempt).
    completed_mix: Vec<f64>,
    /// f*: the SYN failure probability above which the undamped recursion
    /// amplifies its own errors.
    critical_failure: f64,
    /// f_d < f*: above it the recursion is damped to propagate errors as
    /// it would at f_d (1 when it never needs to be).
    damped_failure: f64,
    /// The SYN failure probability averaged over the last 3 s or so.
    smoothed_failure: f64,
    /// DR_i^j with the drops of an attempt beyond its expected arrivals
    /// carried to its next ones, fading over the same 3 s (when the
    /// counters carry DROPPED_i^j).
    attempt_drops: AttemptDropRates,
}

/// The model's account of one interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// Index of the interval since the estimator started (0, 1, …).
    pub interval_index: u64,
    /// COMPLETED_i.
    pub completed: u64,
    /// Σ_c G_i^c = R_i^{k+1}: clients estimated to give up in this interval.
    pub gave_up: f64,
    /// REFUSED_i: clients whose SYN was answered with a RST in this
    /// interval — failures, counted apart from Eq. 4's mean (they are not
    /// among its transactions), as the server's other failures are.
    pub refused: u64,
    /// DR_i (Eq. 5).
    pub drop_rate: f64,
    /// q: SYN loss rate in the network used for this interval.
    pub network_loss: f64,
    /// R_i^0: initial SYNs among the offered ones.
    pub initial_syns: f64,
    /// Σ_{j≥1} R_i^j: retransmitted SYNs among the offered ones.
    pub retried_syns: f64,
    /// Σ_c C_i^{c,j} by j: completed connections whose accepted SYN was the
    /// j-th retransmission (index 0 = first SYN).
    pub completed_by_attempt: Vec<f64>,
    /// CLIENT_RT_i (Eq. 4): mean client-perceived time of the transactions
    /// that ended in this interval; `None` when none did.
    pub mean: Option<Nanos>,
    /// Mean CONN-FAIL over the interval's transactions (give-ups count their
    /// whole wait).
    pub conn_fail_mean: Option<Nanos>,
    /// Mean SYN-to-END of the completed connections.
    pub syn_to_end_mean: Option<Nanos>,
    /// Mean RTT of the completed connections.
    pub rtt_mean: Option<Nanos>,
    /// Share of the interval's transactions that are give-ups.
    pub give_up_rate: f64,
    /// Numerator of Eq. 4, in nanoseconds.
    total_time_nanos: f64,
    /// (CONN-FAIL, count) of the completed connections, by class and attempt.
    completed_waits: Vec<(Nanos, f64)>,
    /// (wait, count) of the give-ups, by class.
    give_up_waits: Vec<(Nanos, f64)>,
    syn_to_end_histogram: Option<LatencyHistogram>,
}

/// The probabilities that a SYN sent in an interval is answered, by
/// attempt j: with a SYN-ACK (`accepted`) or with either a SYN-ACK or a RST
/// (`answered`); the rest are dropped or lost and retried.
#[derive(Clone, Debug)]
struct Answered {
    accepted: Vec<f64>,
    answered: Vec<f64>,
}

/// Number of points over which a spread timeout is integrated (Eq. 22).
const SPREAD_POINTS: usize = 64;

/// Where SYNs uniform within an interval land after `shift` ± `spread`:
/// (interval offset, share), shares summing to one (Eq. 22 with the RTT's
/// variance taken as zero, Eq. 29).
fn landing_weights(shift: Nanos, spread: Nanos, interval: Nanos) -> Vec<(usize, f64)> {
    let mut weights: Vec<(usize, f64)> = Vec::new();
    let mut add = |offset: usize, share: f64| {
        if share <= 0.0 {
            return;
        }
        match weights.iter_mut().find(|(o, _)| *o == offset) {
            Some(entry) => entry.1 += share,
            None => weights.push((offset, share)),
        }
    };
    let points = if spread == Nanos::ZERO {
        1
    } else {
        SPREAD_POINTS
    };
    for n in 0..points {
        let e = if points == 1 {
            0.0
        } else {
            ((n as f64 + 0.5) / points as f64 * 2.0 - 1.0) * spread.0 as f64
        };
        let x = ((shift.0 as f64 + e) / interval.0 as f64).max(0.0);
        let whole = x.floor();
        let fraction = x - whole;
        add(whole as usize, (1.0 - fraction) / points as f64);
        add(whole as usize + 1, fraction / points as f64);
    }
    weights.sort_by_key(|(o, _)| *o);
    weights
}

/// The shortest interval the model accepts. The paper argues for intervals
/// well above the network's delay variance (Section 3.2, Figure 9); the
/// floor also bounds the rings, whose length is the longest wait over Δ.
pub const MIN_INTERVAL: Nanos = Nanos::from_millis(1);

/// The time step on which f* is computed: the interval, or 250 ms (the
/// paper's) when the interval is shorter. f* depends on the retry times,
/// not on how finely they are binned; the floor keeps its cost bounded.
const STABILITY_STEP: Nanos = Nanos::from_millis(250);

/// Time constant of the smoothed failure probability behind the damping:
/// the paper's first gap.
const SMOOTHING: Nanos = Nanos::from_secs(3);

/// Share of one interval in the 3-s time constant: the weight of each
/// interval in the damping's failure probability, and the share of the
/// carried drops by attempt that fades each interval.
fn smoothing_weight(interval: Nanos) -> f64 {
    (interval.0 as f64 / SMOOTHING.0 as f64).min(1.0)
}

/// f_d is where the loop gain (retransmissions per initial SYN) is this
/// share of the gain at f*.
const DAMPING_MARGIN: f64 = 0.9;

/// Where each retransmission of each class lands after the first SYN:
/// (interval lag ≥ 1, class weight × share, attempt j).
fn retry_lags(classes: &[RetryClass], interval: Nanos) -> Vec<(usize, f64, i32)> {
    classes
        .iter()
        .flat_map(|c| {
            (1..=c.retries()).flat_map(move |j| {
                landing_weights(c.attempt_times[j], Nanos::ZERO, interval)
                    .into_iter()
                    .map(move |(lag, share)| (lag.max(1), c.weight * share, j as i32))
            })
        })
        .collect()
}

/// Whether an error in R^0 grows when every SYN fails with probability f.
/// The error propagates as
/// x_i = −Σ_{c,j} w_c f^j x_{i − T_j^c/Δ} (Eq. 3 with Eq. 13: an
/// initial SYN counted too many is a retry counted too few, whose own
/// failures are expected back at every later attempt time); an impulse
/// is followed for sixty of the longest lags and its last swings compared
/// with those half-way. Written by hand: the characteristic polynomial's
/// degree is the longest lag in intervals (up to a few hundred) and only
/// its largest root's modulus matters.
fn error_grows(lags: &[(usize, f64, i32)], f: f64) -> bool {
    let Some(longest) = lags.iter().map(|l| l.0).max() else {
        return false;
    };
    let gains: Vec<(usize, f64)> = lags
        .iter()
        .map(|&(lag, weight, j)| (lag, weight * f.powi(j)))
        .collect();
    let steps = 60 * longest;
    let mut x = vec![0.0f64; steps];
    x[0] = 1.0;
    for i in 1..steps {
        x[i] = -gains
            .iter()
            .filter(|(lag, _)| *lag <= i)
            .map(|&(lag, gain)| gain * x[i - lag])
            .sum::<f64>();
    }
    let swing = |from: usize, to: usize| x[from..to].iter().fold(0.0f64, |m, v| m.max(v.abs()));
    swing(steps - 10 * longest, steps) > swing(steps / 2 - 10 * longest, steps / 2)
}

/// f*: the smallest SYN failure probability at which the undamped
/// recursion amplifies its own errors (1 when it never does), by
/// bisection. The paper's 3/6 s schedule with k = 2 gives
/// z³ + f z² + f² = 0, a root on the unit circle at f = (√5 − 1)/2.
fn critical_failure(lags: &[(usize, f64, i32)]) -> f64 {
    if !error_grows(lags, 1.0) {
        return 1.0;
    }
    let (mut stable, mut unstable) = (0.0, 1.0);
    for _ in 0..16 {
        let middle = 0.5 * (stable + unstable);
        if error_grows(lags, middle) {
            unstable = middle;
        } else {
            stable = middle;
        }
    }
    stable
}

/// f_d: the failure probability at which the loop gain is
/// DAMPING_MARGIN of the gain at f* (1 when f* is).
fn damped_failure(classes: &[RetryClass], critical: f64) -> f64 {
    if critical >= 1.0 {
        return 1.0;
    }
    let target = DAMPING_MARGIN * retries_per_initial(classes, critical);
    let (mut lo, mut hi) = (0.0, critical);
    for _ in 0..40 {
        let middle = 0.5 * (lo + hi);
        if retries_per_initial(classes, middle) > target {
            hi = middle;
        } else {
            lo = middle;
        }
    }
    lo
}

/// Σ_c w_c Σ_{j=1..k_c} f^j: retransmissions sent per initial SYN when
/// every SYN fails with probability f — the recursion's loop gain.
fn retries_per_initial(classes: &[RetryClass], f: f64) -> f64 {
    classes
        .iter()
        .map(|c| c.weight * (1..=c.retries() as i32).map(|j| f.powi(j)).sum::<f64>())
        .sum()
}

impl Certes {
    pub fn new(config: CertesConfig) -> Result<Certes, CertesError> {
        if config.interval == Nanos::ZERO {
            return Err(CertesError::ZeroInterval);
        }
        if config.interval < MIN_INTERVAL {
            return Err(CertesError::IntervalTooShort {
                interval: config.interval,
                minimum: MIN_INTERVAL,
            });
        }
        if config.frustration_timeouts.is_empty() {
            return Err(CertesError::NoFrustrationTimeout);
        }
        for &(timeout, weight) in &config.frustration_timeouts {
            if timeout == Nanos::ZERO || !weight.is_finite() || weight <= 0.0 {
                return Err(CertesError::BadFrustrationTimeout { timeout, weight });
            }
        }
        if let NetworkLoss::Fixed(q) = config.network_loss {
            if !(0.0..1.0).contains(&q) {
                return Err(CertesError::BadNetworkLoss(q));
            }
        }
        let fto_total: f64 = config.frustration_timeouts.iter().map(|(_, w)| w).sum();
        let interval = config.interval;
        let mut classes = Vec::new();
        let (mut rows, mut columns, mut horizon) = (0usize, 0usize, 2usize);
        for (profile, profile_weight) in config.clients.entries() {
            if let Some(first_gap) = profile.gaps.first() {
                if interval >= *first_gap {
                    return Err(CertesError::IntervalTooLong {
                        interval,
                        profile: profile.name.clone(),
                        first_gap: *first_gap,
                    });
                }
            }
            for &(timeout, fto_weight) in &config.frustration_timeouts {
                let give_up = profile.give_up_at(timeout);
                let attempt_times = profile.sends_before_give_up(timeout);
                let retries = attempt_times.len() - 1;
                let next: Vec<Vec<(usize, f64)>> = (0..=retries)
                    .map(|j| {
                        let (shift, spread) = if j < retries {
                            let spread = if j == 0 {
                                profile.first_gap_spread
                            } else {
                                profile.later_gap_spread
                            };
                            (attempt_times[j + 1] - attempt_times[j], spread)
                        } else {
                            (give_up - attempt_times[j], Nanos::ZERO)
                        };
                        landing_weights(shift, spread, interval)
                    })
                    .collect();
                for landing in &next {
                    for (offset, _) in landing {
                        horizon = horizon.max(offset + 2);
                    }
                }
                classes.push(RetryClass {
                    weight: profile_weight * fto_weight / fto_total,
                    attempt_times,
                    give_up,
                    next,
                    row: rows,
                    column: columns,
                });
                // Rows 0 (unused) … k and the give-up row k + 1.
                rows += retries + 2;
                columns += retries + 1;
            }
        }
        let lookback = (config.max_syn_to_end.0 / interval.0) as usize + 2;
        Ok(Certes {
            classes,
            pending: vec![0.0; rows * horizon],
            horizon,
            accepted_mix: vec![0.0; lookback * columns],
            accepted_total: vec![0.0; lookback],
            columns,
            lookback,
            index: 0,
            segments_sent: 0,
            segments_retransmitted: 0,
            sent: vec![0.0; columns],
            carried: vec![0.0; columns],
            completed_mix: vec![0.0; columns],
            critical_failure: 1.0,
            damped_failure: 1.0,
            smoothed_failure: 0.0,
            attempt_drops: AttemptDropRates::new(smoothing_weight(interval)),
            config,
        })
        .map(|mut certes| {
            let lags = retry_lags(&certes.classes, interval.max(STABILITY_STEP));
            certes.critical_failure = critical_failure(&lags);
            certes.damped_failure = damped_failure(&certes.classes, certes.critical_failure);
            certes
        })
    }

    pub fn config(&self) -> &CertesConfig {
        &self.config
    }

    /// f*: the SYN failure probability (drops and network loss) above
    /// which Section 3.2's recursion amplifies its own errors; 1 when it
    /// never does.
    pub fn critical_failure(&self) -> f64 {
        self.critical_failure
    }

    /// f_d: the failure probability above which the model damps the
    /// recursion (with `damping`); 1 when it never needs to.
    pub fn damping_threshold(&self) -> f64 {
        self.damped_failure
    }

    /// Number of intervals processed so far.
    pub fn intervals(&self) -> u64 {
        self.index
    }

    /// Largest k over the classes: the most retransmissions any modelled
    /// client makes.
    pub fn max_retries(&self) -> usize {
        self.classes
            .iter()
            .map(RetryClass::retries)
            .max()
            .unwrap_or(0)
    }

    fn network_loss(&mut self, counters: &IntervalCounters) -> f64 {
        match self.config.network_loss {
            NetworkLoss::None => 0.0,
            NetworkLoss::Fixed(q) => q,
            NetworkLoss::FromRetransmissions => {
                self.segments_sent += counters.segments_sent;
                self.segments_retransmitted += counters.segments_retransmitted;
                if self.segments_sent == 0 {
                    0.0
                } else {
                    // Capped: beyond one half the symmetric-loss reading is
                    // no longer a loss rate a TCP client would see.
                    (self.segments_retransmitted as f64 / self.segments_sent as f64).min(0.5)
                }
            }
        }
    }

    /// Feeds interval i's counters; returns the model's account of it.
    pub fn on_interval(&mut self, counters: &IntervalCounters) -> Estimate {
        let slot = (self.index % self.horizon as u64) as usize;
        let loss = self.network_loss(counters);
        let arrive = 1.0 - loss;
        let offered = counters.offered() as f64;
        let drop_rate = counters.drop_rate();

        let (fresh_total, carried_total) = self.take_due_retries(slot);
        let due_arrivals = self.carry_surplus(fresh_total, carried_total, offered, arrive);
        let initial_arrivals = (offered - due_arrivals).max(0.0);
        let (due_arrivals, initial_arrivals) =
            self.damp(offered, arrive, drop_rate, due_arrivals, initial_arrivals);
        let initial_sent = initial_arrivals / arrive;
        let answered = self.answered_by_attempt(counters, initial_sent, arrive);
        self.send_and_fail(slot, initial_sent, answered);
        let (gave_up, give_up_waits) = self.take_give_ups(slot);
        let unattributed = self.attribute_completions(counters);
        let (completed_waits, completed_by_attempt, mut conn_fail_nanos) =
            self.completion_waits(unattributed);
        let give_up_nanos: f64 = give_up_waits.iter().map(|(w, n)| w.0 as f64 * n).sum();
        conn_fail_nanos += give_up_nanos;

        let completed = counters.completed as f64;
        let transactions = completed + gave_up;
        let total_time_nanos =
            conn_fail_nanos + counters.syn_to_end_sum.0 as f64 + counters.rtt_sum.0 as f64;
        let per_transaction =
            |nanos: f64| (transactions > 0.0).then(|| Nanos((nanos / transactions).round() as u64));
        let estimate = Estimate {
            interval_index: self.index,
            completed: counters.completed,
            gave_up,
            refused: counters.refused,
            drop_rate,
            network_loss: loss,
            initial_syns: initial_arrivals,
            retried_syns: due_arrivals,
            completed_by_attempt,
            mean: per_transaction(total_time_nanos),
            conn_fail_mean: per_transaction(conn_fail_nanos),
            syn_to_end_mean: counters.syn_to_end_mean(),
            rtt_mean: counters.rtt_mean(),
            give_up_rate: if transactions > 0.0 {
                gave_up / transactions
            } else {
                0.0
            },
            total_time_nanos,
            completed_waits,
            give_up_waits,
            syn_to_end_histogram: counters
                .syn_to_end_histogram
                .as_ref()
                .filter(|h| !h.is_empty())
                .cloned(),
        };
        self.index += 1;
        estimate
    }

    /// Retries due now (Eq. 13 with the weights of Eq. 29), by class, plus
    /// those carried from the previous interval by Eq. 30, moved into
    /// `sent`; returns their fresh and carried totals.
    fn take_due_retries(&mut self, slot: usize) -> (f64, f64) {
        let h = self.horizon;
        let (mut fresh_total, mut carried_total) = (0.0, 0.0);
        for class in &self.classes {
            for j in 1..=class.retries() {
                let column = class.column + j;
                let cell = (class.row + j) * h + slot;
                self.sent[column] = self.pending[cell] + self.carried[column];
                fresh_total += self.pending[cell];
                carried_total += self.carried[column];
                self.pending[cell] = 0.0;
            }
        }
        (fresh_total, carried_total)
    }

    /// Eq. 30: more retries expected than SYNs arrived — the surplus is
    /// delayed to the next interval, as often as it takes while SYNs keep
    /// arriving. In an interval with no SYN at all the surplus carried from
    /// before is taken out of the model (those clients never came), so that
    /// a quiet period cannot hold phantom retries forever. Returns the
    /// retries that arrive now.
    fn carry_surplus(
        &mut self,
        fresh_total: f64,
        carried_total: f64,
        offered: f64,
        arrive: f64,
    ) -> f64 {
        let due_arrivals = (fresh_total + carried_total) * arrive;
        let surplus = if due_arrivals > offered {
            (due_arrivals - offered) / arrive
        } else {
            0.0
        };
        let discard = if offered == 0.0 {
            surplus.min(carried_total)
        } else {
            0.0
        };
        let delay = surplus - discard;
        for class in &self.classes {
            for j in 1..=class.retries() {
                let column = class.column + j;
                let carried = self.carried[column];
                let discarded = if carried_total > 0.0 {
                    carried * discard / carried_total
                } else {
                    0.0
                };
                let remaining = self.sent[column] - discarded;
                let remaining_total = fresh_total + carried_total - discard;
                let delayed = if remaining_total > 0.0 {
                    remaining * delay / remaining_total
                } else {
                    0.0
                };
                self.sent[column] -= discarded + delayed;
                self.carried[column] = delayed;
            }
        }
        if surplus > 0.0 {
            offered
        } else {
            due_arrivals
        }
    }

    /// Damping: above f* the recursion R^0 = OFFERED − retries expected
    /// from earlier R^0 amplifies every error (a retry landing an interval
    /// off, a drop rate uneven within an interval). Above f_d each
    /// attempt's expected retries are pulled toward their stationary share,
    /// by (f_d / f)^j for attempt j, so that an error travels on as it would
    /// at f_d, where it dies out. Returns the retried and initial arrivals.
    fn damp(
        &mut self,
        offered: f64,
        arrive: f64,
        drop_rate: f64,
        due_arrivals: f64,
        initial_arrivals: f64,
    ) -> (f64, f64) {
        let failure = 1.0 - arrive * (1.0 - drop_rate);
        if offered > 0.0 {
            let weight = smoothing_weight(self.config.interval);
            self.smoothed_failure += weight * (failure - self.smoothed_failure);
        }
        let f = self.smoothed_failure;
        if !(self.config.damping && f > self.damped_failure && due_arrivals > 0.0) {
            return (due_arrivals, initial_arrivals);
        }
        // Stationary: each initial SYN brings f + f² + … + f^k retries.
        let stationary_initial = offered / arrive / (1.0 + retries_per_initial(&self.classes, f));
        let ratio = self.damped_failure / f;
        let mut retries_sent = 0.0;
        for class in &self.classes {
            let (mut keep, mut power) = (1.0, 1.0);
            for j in 1..=class.retries() {
                keep *= ratio;
                power *= f;
                let stationary = stationary_initial * class.weight * power;
                let sent = &mut self.sent[class.column + j];
                *sent = keep * *sent + (1.0 - keep) * stationary;
                retries_sent += *sent;
            }
        }
        if retries_sent * arrive > offered {
            let scale = offered / (retries_sent * arrive);
            for class in &self.classes {
                for j in 1..=class.retries() {
                    self.sent[class.column + j] *= scale;
                }
            }
            retries_sent *= scale;
        }
        let due_arrivals = retries_sent * arrive;
        (due_arrivals, (offered - due_arrivals).max(0.0))
    }

    /// The chances that a SYN sent now as attempt j is answered and
    /// accepted, by j: the interval's SYNs by attempt as the model expects
    /// them (initial ones and the retries due in `sent`), dropped per
    /// [`AttemptDropRates`] (DROPPED_i^j over them, an attempt's drops
    /// beyond its expected arrivals carried to its next ones) and refused
    /// per [`IntervalCounters::accepted_shares_with_drop_rates`].
    fn answered_by_attempt(
        &mut self,
        counters: &IntervalCounters,
        initial_sent: f64,
        arrive: f64,
    ) -> Answered {
        let mut arrivals = vec![0.0; self.max_retries() + 1];
        for class in &self.classes {
            arrivals[0] += initial_sent * class.weight * arrive;
            for (j, arrived) in arrivals
                .iter_mut()
                .enumerate()
                .take(class.retries() + 1)
                .skip(1)
            {
                *arrived += self.sent[class.column + j] * arrive;
            }
        }
        let drop_rates = self.attempt_drops.drop_rates(counters, &arrivals);
        let uniform = counters.drop_rate();
        let accepted = if drop_rates.iter().all(|&rate| rate == uniform) {
            counters.accepted_shares_by_attempt(&arrivals)
        } else {
            counters.accepted_shares_with_drop_rates(&arrivals, &drop_rates)
        };
        Answered {
            accepted: accepted.into_iter().map(|share| arrive * share).collect(),
            answered: drop_rates
                .into_iter()
                .map(|drop_rate| arrive * (1.0 - drop_rate))
                .collect(),
        }
    }

    /// Eq. 6 and 11: every SYN sent now as attempt j is answered with
    /// probability `answered.answered[j]` (alike for every attempt unless
    /// the drops' attempts are known); the accepted ones (a SYN-ACK, at
    /// attempt j's own share when the refusals' attempts are known) are
    /// recorded for Eq. 12, the refused ones (a RST) leave the model as
    /// failures, and the unanswered ones move on to their next attempt
    /// (Eq. 13).
    fn send_and_fail(&mut self, slot: usize, initial_sent: f64, answered: Answered) {
        let h = self.horizon;
        let accepted_row = (self.index % self.lookback as u64) as usize * self.columns;
        let mut accepted_total = 0.0;
        for class in &self.classes {
            self.sent[class.column] = initial_sent * class.weight;
            for j in 0..=class.retries() {
                let sent = self.sent[class.column + j];
                let accepted = sent * answered.accepted[j];
                self.accepted_mix[accepted_row + class.column + j] = accepted;
                accepted_total += accepted;
                let failed = sent * (1.0 - answered.answered[j]);
                if failed <= 0.0 {
                    continue;
                }
                let row = class.row + j + 1;
                for &(offset, share) in &class.next[j] {
                    self.pending[row * h + (slot + offset) % h] += failed * share;
                }
            }
        }
        self.accepted_total[accepted_row / self.columns.max(1)] = accepted_total;
    }

    /// Give-ups of this interval (R_i^{k+1}): their count and, by class,
    /// how long they waited.
    fn take_give_ups(&mut self, slot: usize) -> (f64, Vec<(Nanos, f64)>) {
        let h = self.horizon;
        let mut gave_up = 0.0;
        let mut give_up_waits = Vec::new();
        for class in &self.classes {
            let cell = (class.row + class.retries() + 1) * h + slot;
            let count = self.pending[cell];
            self.pending[cell] = 0.0;
            if count > 0.0 {
                gave_up += count;
                give_up_waits.push((class.give_up, count));
            }
        }
        (gave_up, give_up_waits)
    }

    /// Completions split over the retry classes (into `completed_mix`) in
    /// the proportions accepted when they were accepted. With the
    /// interval's SYN-to-END histogram this is Eq. 12 itself: each bucket's
    /// connections were accepted one bucket-SYN-to-END earlier
    /// (ACCEPTED_{p,i} known). Without it, Eq. 31: all at one mean
    /// SYN-to-END earlier. Returns the completions no accepted interval
    /// explains.
    fn attribute_completions(&mut self, counters: &IntervalCounters) -> f64 {
        self.completed_mix.iter_mut().for_each(|c| *c = 0.0);
        let mut unattributed = 0.0;
        for (lag_nanos, count) in counters.completions_by_syn_to_end() {
            self.attribute(lag_nanos, count, &mut unattributed);
        }
        unattributed
    }

    /// Splits `count` completions accepted `lag_nanos` ago by that
    /// interval's accepted mix, or adds them to `unattributed`.
    fn attribute(&mut self, lag_nanos: f64, count: f64, unattributed: &mut f64) {
        let lag = (lag_nanos / self.config.interval.0 as f64).round() as u64;
        match self.accepted_row_near(lag) {
            Some(row) => {
                let total = self.accepted_total[row];
                let mix = &self.accepted_mix[row * self.columns..(row + 1) * self.columns];
                for (slot, accepted) in self.completed_mix.iter_mut().zip(mix) {
                    *slot += count * accepted / total;
                }
            }
            None => *unattributed += count,
        }
    }

    /// The completions' waits by attempt, their count by attempt (the
    /// unattributed ones count as first attempts), and their summed time
    /// to connect in nanoseconds.
    fn completion_waits(&self, unattributed: f64) -> (Vec<(Nanos, f64)>, Vec<f64>, f64) {
        let mut completed_waits = Vec::new();
        let mut completed_by_attempt = vec![0.0; self.max_retries() + 1];
        completed_by_attempt[0] = unattributed;
        let mut conn_fail_nanos = 0.0;
        for class in &self.classes {
            for (j, by_attempt) in completed_by_attempt
                .iter_mut()
                .enumerate()
                .take(class.retries() + 1)
            {
                let count = self.completed_mix[class.column + j];
                *by_attempt += count;
                if j > 0 && count > 0.0 {
                    completed_waits.push((class.attempt_times[j], count));
                    conn_fail_nanos += count * class.attempt_times[j].0 as f64;
                }
            }
        }
        if completed_by_attempt[0] > 0.0 {
            completed_waits.push((Nanos::ZERO, completed_by_attempt[0]));
        }
        (completed_waits, completed_by_attempt, conn_fail_nanos)
    }

    /// Row of the accepted-mix ring `lag` intervals before the current one,
    /// or the nearest row with accepts (earlier first) within the window.
    fn accepted_row_near(&self, lag: u64) -> Option<usize> {
        let available = self.index.min(self.lookback as u64 - 1);
        let row_of = |back: u64| ((self.index - back) % self.lookback as u64) as usize;
        let lag = lag.min(available);
        for distance in 0..=available {
            for back in [lag + distance, lag.wrapping_sub(distance)] {
                if back <= available {
                    let row = row_of(back);
                    if self.accepted_total[row] > 0.0 {
                        return Some(row);
                    }
                }
            }
        }
        None
    }
}

impl Estimate {
    /// Transactions that ended in the interval: COMPLETED_i + R_i^{k+1}.
    pub fn transactions(&self) -> f64 {
        self.completed as f64 + self.gave_up
    }

    /// Numerator of Eq. 4 in nanoseconds: the summed client-perceived time
    /// of the interval's transactions. Σ total / Σ transactions over many
    /// intervals is their transaction-weighted mean.
    pub fn total_time_nanos(&self) -> f64 {
        self.total_time_nanos
    }

    /// Fraction of the interval's transactions with client-perceived time
    /// at or below `x` nanoseconds, under the mixture model.
    pub fn cdf(&self, x: f64) -> f64 {
        let total = self.transactions();
        if total <= 0.0 {
            return 0.0;
        }
        let rtt = self.rtt_mean.unwrap_or(Nanos::ZERO).0 as f64;
        let syn_to_end = self.syn_to_end_mean.unwrap_or(Nanos::ZERO).0 as f64;
        let below = |shifted: f64| -> f64 {
            match &self.syn_to_end_histogram {
                Some(h) => h.cdf(shifted),
                None => {
                    if shifted >= syn_to_end {
                        1.0
                    } else {
                        0.0
                    }
                }
            }
        };
        let mut mass = 0.0;
        for &(wait, count) in &self.completed_waits {
            mass += count * below(x - wait.0 as f64 - rtt);
        }
        for &(wait, count) in &self.give_up_waits {
            if x >= wait.0 as f64 {
                mass += count;
            }
        }
        mass / total
    }

    /// The q-quantile of client-perceived time in this interval (e.g. 0.99),
    /// `None` when no transaction ended.
    pub fn percentile(&self, q: f64) -> Option<Nanos> {
        if self.transactions() <= 0.0 {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        let longest_wait = self
            .completed_waits
            .iter()
            .chain(&self.give_up_waits)
            .map(|(w, _)| w.0 as f64)
            .fold(0.0, f64::max);
        let longest_syn_to_end = match &self.syn_to_end_histogram {
            Some(h) => h.buckets().map(|(_, hi, _)| hi).fold(0.0, f64::max),
            None => self.syn_to_end_mean.unwrap_or(Nanos::ZERO).0 as f64,
        };
        let (mut lo, mut hi) = (
            0.0,
            longest_wait + longest_syn_to_end + self.rtt_mean.unwrap_or(Nanos::ZERO).0 as f64 + 1.0,
        );
        for _ in 0..80 {
            let mid = 0.5 * (lo + hi);
            if self.cdf(mid) >= q {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(Nanos(hi.round() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::SynProfile;

    fn paper_config(interval_ms: u64) -> CertesConfig {
        CertesConfig::new(
            Nanos::from_millis(interval_ms),
            ClientMix::builtin("windows-9x-nt").unwrap(),
            Nanos::from_secs(21),
        )
    }

    /// The latest give-up is min(F, T_conn) at its largest over the
    /// mixture and the frustration timeouts.
    #[test]
    fn the_latest_give_up_is_the_largest_over_profiles_and_timeouts() {
        let s = Nanos::from_secs;
        assert_eq!(paper_config(250).latest_give_up(), s(21));
        let mut config = CertesConfig::new(
            Nanos::from_millis(250),
            ClientMix::builtin("mix-2026").unwrap(),
            s(21),
        );
        assert_eq!(config.latest_give_up(), s(21));
        // Beyond every T_conn: linux-6.5's 131 s is the mixture's latest.
        config.frustration_timeouts = vec![(s(21), 0.5), (s(600), 0.5)];
        assert_eq!(config.latest_give_up(), s(131));
    }

    /// The paper's 3/6/12 s profile without the ±50 ms spread, so that
    /// every return lands in exactly one interval (Eq. 29).
    fn exact_paper_config(interval_ms: u64) -> CertesConfig {
        let mut profile = SynProfile::builtin("windows-9x-nt").unwrap();
        profile.first_gap_spread = Nanos::ZERO;
        let mut config = paper_config(interval_ms);
        config.clients = ClientMix::single(profile);
        config
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
            rtt_sum: Nanos::from_millis(100 * completed),
            ..Default::default()
        }
    }

    #[test]
    fn no_drops_gives_syn_to_end_plus_rtt() {
        let mut certes = Certes::new(paper_config(1000)).unwrap();
        for _ in 0..30 {
            let e = certes.on_interval(&counters(0, 100, 100, 400));
            assert_eq!(e.mean, Some(Nanos::from_millis(500)));
            assert_eq!(e.gave_up, 0.0);
            assert_eq!(e.conn_fail_mean, Some(Nanos::ZERO));
        }
    }

    /// Section 3.2, Figures 5–7 with 1 s intervals (m = 3), k = 2: D_1^0
    /// returns as R_4^1; of those, D_4^1 returns as R_10^2; the last drops
    /// give up 12 s later (at 21 s), counted with 21 s each (Eq. 4).
    #[test]
    fn figures_5_to_7_worked_example() {
        let mut certes = Certes::new(exact_paper_config(1000)).unwrap();
        // Interval 1 (index 0): 100 initial SYNs, 40 dropped.
        let e0 = certes.on_interval(&counters(40, 60, 0, 0));
        assert_eq!(e0.initial_syns, 100.0);
        // Intervals 2, 3: idle.
        certes.on_interval(&counters(0, 0, 0, 0));
        certes.on_interval(&counters(0, 0, 0, 0));
        // Interval 4 (index 3): the 40 first retries plus 60 new SYNs; half
        // of all are dropped: D_4^1 = 20, A_4^1 = 20, D_4^0 = 30, A_4^0 = 30.
        let e3 = certes.on_interval(&counters(50, 50, 0, 0));
        assert!((e3.retried_syns - 40.0).abs() < 1e-9);
        assert!((e3.initial_syns - 60.0).abs() < 1e-9);
        // Interval 5 (index 4): the 50 accepted in interval 4 complete with
        // SYN-to-END 1 s, so Eq. 31 looks at interval 4: 20 of the 50 were
        // first retries and waited 3 s.
        let e4 = certes.on_interval(&counters(0, 0, 50, 1000));
        assert!((e4.completed_by_attempt[1] - 20.0).abs() < 1e-9);
        assert!((e4.completed_by_attempt[0] - 30.0).abs() < 1e-9);
        // (30·(1 + 0.1) + 20·(3 + 1 + 0.1)) / 50 = 2.3 s.
        assert_eq!(e4.mean, Some(Nanos::from_millis(2300)));
        // Interval 7 (index 6): the 30 dropped initial SYNs of interval 4
        // return; all are accepted.
        certes.on_interval(&counters(0, 0, 0, 0));
        let e6 = certes.on_interval(&counters(0, 30, 0, 0));
        assert!((e6.retried_syns - 30.0).abs() < 1e-9);
        assert_eq!(e6.initial_syns, 0.0);
        // Interval 10 (index 9): the 20 second retries arrive, all dropped.
        for _ in 7..9 {
            certes.on_interval(&counters(0, 0, 0, 0));
        }
        let e9 = certes.on_interval(&counters(20, 0, 0, 0));
        assert!((e9.retried_syns - 20.0).abs() < 1e-9);
        // Those 20 had k = 2 retries: they give up 12 s later, 21 s after
        // their first SYN, in interval 22 (index 21).
        let mut gave_up = Vec::new();
        for index in 10..=22 {
            let e = certes.on_interval(&counters(0, 0, 0, 0));
            gave_up.push((index, e.gave_up, e.mean));
        }
        for (index, count, mean) in gave_up {
            if index == 21 {
                assert!((count - 20.0).abs() < 1e-9);
                assert_eq!(mean, Some(Nanos::from_secs(21)));
            } else {
                assert_eq!(count, 0.0, "interval {index}");
            }
        }
    }

    /// Eq. 30: when fewer SYNs arrive than retries are due, the surplus is
    /// carried to the next interval, and no SYN count goes negative.
    #[test]
    fn eq30_carries_surplus_retries() {
        let mut certes = Certes::new(exact_paper_config(1000)).unwrap();
        certes.on_interval(&counters(100, 0, 0, 0));
        certes.on_interval(&counters(0, 0, 0, 0));
        certes.on_interval(&counters(0, 0, 0, 0));
        // 100 first retries due but only 60 SYNs arrive.
        let e = certes.on_interval(&counters(0, 60, 0, 0));
        assert_eq!((e.retried_syns, e.initial_syns), (60.0, 0.0));
        let next = certes.on_interval(&counters(0, 50, 0, 0));
        assert!((next.retried_syns - 40.0).abs() < 1e-9);
        assert!((next.initial_syns - 10.0).abs() < 1e-9);
    }

    /// On fluid input that meets the model's assumptions (every SYN of an
    /// interval dropped alike, retries exactly 3, 6 s later, give-up at
    /// 21 s), the model recovers the retry classes exactly, and every
    /// initial SYN ends as an accept or a give-up (conservation).
    #[test]
    fn exact_on_fluid_input_and_conserves_clients() {
        let intervals = 120usize;
        // Half of every SYN dropped for 60 s, then none; powers of two keep
        // every fluid count an integer, as server counters are.
        let drop_rate = |i: usize| if i < 60 { 0.5 } else { 0.0 };
        let new_syns = |i: usize| if i < 40 { 64.0 } else { 0.0 };
        // Fluid truth: due[i][j] = j-th retries arriving in interval i.
        let mut due = vec![[0.0f64; 3]; intervals + 40];
        let mut truth_gave_up = vec![0.0f64; intervals + 40];
        let mut inputs = Vec::new();
        let mut truth_accepted = Vec::new();
        for i in 0..intervals {
            let offered = new_syns(i) + due[i][1] + due[i][2];
            let dr = drop_rate(i);
            let accepted = offered * (1.0 - dr);
            let by_class = [new_syns(i), due[i][1], due[i][2]];
            due[i + 3][1] += by_class[0] * dr;
            due[i + 6][2] += by_class[1] * dr;
            truth_gave_up[i + 12] += by_class[2] * dr;
            truth_accepted.push(by_class.map(|r| r * (1.0 - dr)));
            inputs.push((offered, accepted));
        }
        let mut certes = Certes::new(exact_paper_config(1000)).unwrap();
        let (mut initial, mut accepted_total, mut gave_up_total) = (0.0, 0.0, 0.0);
        for (i, &(offered, accepted)) in inputs.iter().enumerate() {
            let c = IntervalCounters {
                dropped: (offered - accepted) as u64,
                accepted: accepted as u64,
                // Each accept completes in the same interval (SYN-to-END 0).
                completed: accepted as u64,
                ..Default::default()
            };
            let e = certes.on_interval(&c);
            for (j, truth) in truth_accepted[i].iter().enumerate() {
                let got = e.completed_by_attempt.get(j).copied().unwrap_or(0.0);
                assert!(
                    (got - truth).abs() < 1e-6,
                    "interval {i} attempt {j}: {got} vs {truth}"
                );
            }
            assert!((e.gave_up - truth_gave_up[i]).abs() < 1e-6, "interval {i}");
            initial += e.initial_syns;
            accepted_total += c.accepted as f64;
            gave_up_total += e.gave_up;
        }
        assert!(gave_up_total > 0.0);
        assert!((initial - accepted_total - gave_up_total).abs() < 1e-6);
    }

    /// Refused SYNs by hand, on the paper's clients (retries 3 and 9 s
    /// after the first SYN, give-up at 21 s), 1-s intervals, SYN-to-END 0
    /// and RTT 100 ms:
    /// * interval 0: 100 initial SYNs; 40 dropped, 40 accepted, 20
    ///   refused. DR = 40 / 100 (not 40 / 80: the refused SYNs arrived).
    ///   The 40 accepts complete at once: 40 first attempts, 0.1 s each.
    /// * interval 3: the 40 first retries; 10 dropped, 20 accepted, 10
    ///   refused: DR = 0.25, every SYN a retry. The 20 completions waited
    ///   3 s: (20 × 3 s + 20 × 0.1 s) / 20 = 3.1 s; the 10 refused are not
    ///   transactions.
    /// * interval 9: the 10 second retries, all dropped: they give up in
    ///   interval 21 (21 s after their first SYN), a mean of 21 s.
    ///
    /// Initial SYNs: 100 = 60 completed + 30 refused + 10 given up.
    #[test]
    fn refused_syns_leave_as_failures_by_hand() {
        let mut certes = Certes::new(exact_paper_config(1000)).unwrap();
        let refused = |dropped, accepted, refused| IntervalCounters {
            refused,
            ..counters(dropped, accepted, accepted, 0)
        };
        let mut estimates = Vec::new();
        for i in 0..25 {
            let c = match i {
                0 => refused(40, 40, 20),
                3 => refused(10, 20, 10),
                9 => refused(10, 0, 0),
                _ => IntervalCounters::default(),
            };
            estimates.push(certes.on_interval(&c));
        }
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let e0 = &estimates[0];
        assert!(close(e0.drop_rate, 0.4), "{}", e0.drop_rate);
        assert!(close(e0.initial_syns, 100.0));
        assert_eq!((e0.refused, e0.completed), (20, 40));
        assert!(close(e0.transactions(), 40.0));
        assert_eq!(e0.mean, Some(Nanos::from_millis(100)));
        let e3 = &estimates[3];
        assert!(close(e3.drop_rate, 0.25));
        assert!(close(e3.initial_syns, 0.0) && close(e3.retried_syns, 40.0));
        assert!(close(e3.completed_by_attempt[1], 20.0));
        assert!(close(e3.transactions(), 20.0));
        assert_eq!(e3.mean, Some(Nanos::from_millis(3100)));
        assert_eq!(e3.refused, 10);
        assert!(close(estimates[9].retried_syns, 10.0));
        let e21 = &estimates[21];
        assert!(close(e21.gave_up, 10.0), "{}", e21.gave_up);
        assert_eq!(e21.mean, Some(Nanos::from_secs(21)));
        let initial: f64 = estimates.iter().map(|e| e.initial_syns).sum();
        let completed: u64 = estimates.iter().map(|e| e.completed).sum();
        let refused: u64 = estimates.iter().map(|e| e.refused).sum();
        let gave_up: f64 = estimates.iter().map(|e| e.gave_up).sum();
        assert_eq!((completed, refused), (60, 30));
        assert!(close(initial, completed as f64 + refused as f64 + gave_up));
    }

    /// Refusals by attempt by hand (the paper's clients, 1-s intervals,
    /// SYN-to-END 0, RTT 100 ms): interval 0 has 100 initial SYNs, 50
    /// dropped, 50 accepted; interval 3 the 50 retries and 100 new initial
    /// SYNs, none dropped, 50 refused, 100 accepted and completed at once.
    /// * Only the total known (today's rule): RR = 50 / 150 for both
    ///   attempts, 100 × 50 / 150 = 33.3 completions are retries, mean
    ///   (33.3 × 3 s + 100 × 0.1 s) / 100 = 1.1 s.
    /// * Every retry refused (REFUSED^1 = 50): the 100 completions are
    ///   initial SYNs, mean 0.1 s.
    /// * Only initial SYNs refused (REFUSED^0 = 50): 50 retries and 50
    ///   initial SYNs accepted, mean (50 × 3 s + 100 × 0.1 s) / 100 = 1.6 s.
    /// * A split that does not add up to REFUSED_i: as the first.
    ///
    /// In every case 200 initial SYNs = 150 completed + 50 refused.
    #[test]
    fn refusals_by_attempt_by_hand() {
        let run = |refused_by_attempt: Vec<u64>| {
            let mut certes = Certes::new(exact_paper_config(1000)).unwrap();
            let mut estimates = Vec::new();
            for i in 0..25 {
                let c = match i {
                    0 => counters(50, 50, 50, 0),
                    3 => IntervalCounters {
                        refused: 50,
                        refused_by_attempt: refused_by_attempt.clone(),
                        ..counters(0, 100, 100, 0)
                    },
                    _ => IntervalCounters::default(),
                };
                estimates.push(certes.on_interval(&c));
            }
            let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
            let initial: f64 = estimates.iter().map(|e| e.initial_syns).sum();
            let gave_up: f64 = estimates.iter().map(|e| e.gave_up).sum();
            assert!(
                close(initial, 200.0) && close(gave_up, 0.0),
                "{initial} {gave_up}"
            );
            let e3 = estimates.swap_remove(3);
            assert!(close(e3.retried_syns, 50.0) && close(e3.initial_syns, 100.0));
            (e3.completed_by_attempt, e3.mean)
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let (uniform, mean) = run(Vec::new());
        assert!(close(uniform[1], 100.0 / 3.0), "{uniform:?}");
        assert_eq!(mean, Some(Nanos::from_millis(1100)));
        // A split that does not add up to REFUSED_i reads as the total only.
        assert_eq!(run(vec![0, 20]), (uniform, mean));
        let (retries_refused, mean) = run(vec![0, 50]);
        assert!(close(retries_refused[0], 100.0) && close(retries_refused[1], 0.0));
        assert_eq!(mean, Some(Nanos::from_millis(100)));
        let (initial_refused, mean) = run(vec![50]);
        assert!(close(initial_refused[0], 50.0) && close(initial_refused[1], 50.0));
        assert_eq!(mean, Some(Nanos::from_millis(1600)));
    }

    /// Drops by attempt by hand (the paper's clients: retries 3 s and 9 s
    /// after the first SYN; 1-s intervals, SYN-to-END 0, RTT 100 ms):
    /// interval 0 has 100 initial SYNs, 50 dropped, 50 accepted; interval
    /// 3 the 50 retries and 100 new initial SYNs, 30 dropped, 120 accepted;
    /// intervals 6 and 9 have 100 SYNs each, all accepted. Every accepted
    /// SYN completes in its interval.
    /// * Only the total known (Eq. 6): DR_3 = 0.2 for both attempts, 80
    ///   initial SYNs and 40 retries accepted, mean (40 × 3 s + 120 ×
    ///   0.1 s) / 120 = 1.1 s; 20 first retries due in interval 6 (mean
    ///   (20 × 3 s + 10 s) / 100 = 0.7 s), 10 second retries in interval 9
    ///   (1.0 s).
    /// * Every drop a retry (DROPPED_3^1 = 30): 100 and 20 accepted, mean
    ///   (20 × 3 s + 12 s) / 120 = 0.6 s; no retry in 6 (0.1 s), 30 second
    ///   retries in 9 ((30 × 9 s + 10 s) / 100 = 2.8 s).
    /// * Every drop an initial SYN (DROPPED_3^0 = 30): 70 and 50 accepted,
    ///   (50 × 3 s + 12 s) / 120 = 1.35 s; 30 first retries in 6 (1.0 s),
    ///   none in 9 (0.1 s).
    /// * A split in proportion to the arrivals (20, 10), or one that does
    ///   not add up to DROPPED_3: the first case, exactly.
    ///
    /// In every case 400 SYN-sending clients = 370 completed + 30 whose
    /// SYNs were retries.
    #[test]
    fn drops_by_attempt_by_hand() {
        type Run = (Vec<Vec<f64>>, Vec<f64>, Vec<Option<Nanos>>);
        let run = |dropped_by_attempt: Vec<u64>| -> Run {
            let mut certes = Certes::new(exact_paper_config(1000)).unwrap();
            let mut estimates = Vec::new();
            for i in 0..25 {
                let c = match i {
                    0 => counters(50, 50, 50, 0),
                    3 => IntervalCounters {
                        dropped_by_attempt: dropped_by_attempt.clone(),
                        ..counters(30, 120, 120, 0)
                    },
                    6 | 9 => counters(0, 100, 100, 0),
                    _ => IntervalCounters::default(),
                };
                estimates.push(certes.on_interval(&c));
            }
            let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
            let initial: f64 = estimates.iter().map(|e| e.initial_syns).sum();
            let gave_up: f64 = estimates.iter().map(|e| e.gave_up).sum();
            assert!(
                close(initial, 370.0) && close(gave_up, 0.0),
                "{initial} {gave_up}"
            );
            let at = [3, 6, 9];
            (
                at.iter()
                    .map(|&i| estimates[i].completed_by_attempt.clone())
                    .collect(),
                at.iter().map(|&i| estimates[i].retried_syns).collect(),
                at.iter().map(|&i| estimates[i].mean).collect(),
            )
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let ms = |ms: u64| Some(Nanos::from_millis(ms));
        let check = |(by_attempt, retried, means): &Run, e3: [f64; 2], r: [f64; 3], m: [u64; 3]| {
            assert!(
                close(by_attempt[0][0], e3[0]) && close(by_attempt[0][1], e3[1]),
                "{by_attempt:?}"
            );
            assert!(
                retried.iter().zip(r).all(|(&a, b)| close(a, b)),
                "{retried:?}"
            );
            assert_eq!(*means, m.map(ms).to_vec());
        };
        let uniform = run(Vec::new());
        check(
            &uniform,
            [80.0, 40.0],
            [50.0, 20.0, 10.0],
            [1100, 700, 1000],
        );
        assert_eq!(run(vec![20, 10]), uniform);
        assert_eq!(run(vec![0, 20]), uniform);
        check(
            &run(vec![0, 30]),
            [100.0, 20.0],
            [50.0, 0.0, 30.0],
            [600, 100, 2800],
        );
        check(
            &run(vec![30]),
            [70.0, 50.0],
            [50.0, 30.0, 0.0],
            [1350, 1000, 100],
        );
    }

    /// A steady stream in which a real kernel's late, jittered timers
    /// bring the last attempt's SYNs (and drops) in bursts: 40 in one
    /// interval, 10 in the next, every one of the 40 dropped and none of
    /// the 10, where the model expects 25 an interval. The capture's
    /// DROPPED_i^j says 20 clients an interval fail their last SYN and give
    /// up. Carrying each burst's drops beyond 25 to the attempt's next
    /// arrivals (fading by a third an interval at Δ = 1 s) places 35 of
    /// every 40: 17.5 give-ups an interval, 100 initial SYNs. Handing them
    /// to the interval's other attempts, as before, gave 14.2 give-ups and
    /// 94.2 initial SYNs (the handed-over drops come back as retries the
    /// clients never sent).
    #[test]
    fn late_attempt_drops_beyond_the_expected_arrivals_reach_the_give_ups() {
        let mut config = exact_paper_config(1000);
        config.damping = false;
        let mut certes = Certes::new(config).unwrap();
        // Attempts at 0, 3 and 9 s, give-up at 21 s (k = 2). Per interval:
        // 100 initial SYNs, 50 dropped; 50 first retries, 25 dropped; the
        // second retries come 40 and 10 in turn, the 40 dropped.
        let interval = |i: usize| {
            let (arrived, dropped) = if i.is_multiple_of(2) {
                (40, 40)
            } else {
                (10, 0)
            };
            IntervalCounters {
                dropped: 75 + dropped,
                dropped_by_attempt: vec![50, 25, dropped],
                accepted: 75 + arrived - dropped,
                completed: 75 + arrived - dropped,
                syn_to_end_sum: Nanos::from_millis(100 * (75 + arrived - dropped)),
                ..Default::default()
            }
        };
        let estimates: Vec<Estimate> = (0..200).map(|i| certes.on_interval(&interval(i))).collect();
        // After the first give-ups (21 s) and the start's transient.
        let settled = &estimates[60..200];
        let gave_up: f64 = settled.iter().map(|e| e.gave_up).sum::<f64>() / settled.len() as f64;
        let initial: f64 =
            settled.iter().map(|e| e.initial_syns).sum::<f64>() / settled.len() as f64;
        assert!((initial - 100.0).abs() < 1.0, "{initial}");
        assert!(
            (gave_up - 17.5).abs() < 0.5,
            "{gave_up} give-ups an interval, 20 true"
        );
    }

    #[test]
    fn interval_must_be_below_first_gap() {
        let err = Certes::new(config_at(Nanos::from_secs(1), 21, "linux-6.5")).unwrap_err();
        assert!(matches!(err, CertesError::IntervalTooLong { .. }));
        assert!(err.to_string().contains("linux-6.5"));
        // Too short an interval is refused with the floor, not built.
        let err = Certes::new(config_at(Nanos::from_micros(1), 21, "linux-6.5")).unwrap_err();
        assert!(matches!(err, CertesError::IntervalTooShort { .. }));
        assert!(
            err.to_string()
                .contains("interval 0.001 ms is shorter than 1 ms"),
            "{err}"
        );
        // At the floor the model is built, and f* is the one at 250 ms.
        let fine = paper_profile_at(Nanos::from_millis(1), 21, "windows-9x-nt");
        let golden = (5f64.sqrt() - 1.0) / 2.0;
        assert!((fine.critical_failure - golden).abs() < 1e-3);
    }

    /// Section 3.2.2: FTO 21 s gives k = 2 for the 3/6/12 s profile, 9 s
    /// gives k = 1, 45 s gives k = 3; Linux ≥ 6.5 with 21 s retries at
    /// 1,2,3,4,5,7,11,19 s: k = 8.
    #[test]
    fn frustration_timeout_sets_retries() {
        for (profile, fto, k) in [
            ("windows-9x-nt", 21, 2),
            ("windows-9x-nt", 9, 1),
            ("windows-9x-nt", 45, 3),
            ("windows-9x-nt", 2, 0),
            ("linux-6.5", 21, 8),
        ] {
            let certes = Certes::new(CertesConfig::new(
                Nanos::from_millis(250),
                ClientMix::builtin(profile).unwrap(),
                Nanos::from_secs(fto),
            ))
            .unwrap();
            assert_eq!(certes.max_retries(), k, "{profile} FTO {fto}");
        }
    }

    #[test]
    fn landing_weights_split_fractional_gaps() {
        let w = landing_weights(
            Nanos::from_millis(3000),
            Nanos::ZERO,
            Nanos::from_millis(1000),
        );
        assert_eq!(w, vec![(3, 1.0)]);
        let w = landing_weights(
            Nanos::from_millis(2500),
            Nanos::ZERO,
            Nanos::from_millis(1000),
        );
        assert_eq!(w, vec![(2, 0.5), (3, 0.5)]);
        let w = landing_weights(
            Nanos::from_millis(3000),
            Nanos::from_millis(50),
            Nanos::from_millis(250),
        );
        let total: f64 = w.iter().map(|(_, s)| s).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert!(w.iter().all(|(o, _)| (11..=13).contains(o)));
    }

    /// Section 3.2.1: with network loss q, the estimator adds the SYNs lost
    /// on the way; with no server drops at all, a fraction q of clients
    /// still waits one first timeout.
    #[test]
    fn network_loss_adds_waits() {
        let mut config = exact_paper_config(1000);
        config.network_loss = NetworkLoss::Fixed(0.1);
        let mut certes = Certes::new(config).unwrap();
        let mut by_attempt = [0.0; 3];
        for _ in 0..200 {
            let e = certes.on_interval(&counters(0, 100, 100, 0));
            for (j, c) in e.completed_by_attempt.iter().enumerate() {
                by_attempt[j] += c;
            }
        }
        let total: f64 = by_attempt.iter().sum();
        // Steady state: shares of completions on attempt 0, 1, 2 are
        // proportional to 1, q, q² (give-ups excluded).
        let q = 0.1;
        let expect = [1.0, q, q * q].map(|x| x / (1.0 + q + q * q));
        for j in 0..3 {
            assert!(
                (by_attempt[j] / total - expect[j]).abs() < 0.01,
                "attempt {j}"
            );
        }
    }

    #[test]
    fn percentiles_of_the_mixture() {
        let mut certes = Certes::new(exact_paper_config(1000)).unwrap();
        let mut hist = LatencyHistogram::new();
        for ms in 1..=100 {
            hist.record(Nanos::from_millis(ms));
        }
        let mut c = counters(0, 100, 100, 50);
        c.rtt_sum = Nanos::ZERO;
        c.syn_to_end_histogram = Some(hist);
        let e = certes.on_interval(&c);
        let p50 = e.percentile(0.5).unwrap().0 as f64 / 1e6;
        assert!((p50 - 50.0).abs() < 3.0, "{p50}");
        let p99 = e.percentile(0.99).unwrap().0 as f64 / 1e6;
        assert!((p99 - 99.0).abs() < 5.0, "{p99}");
    }

    #[test]
    fn deterministic() {
        let run = || {
            let mut certes = Certes::new(paper_config(250)).unwrap();
            (0..500u64)
                .map(|i| {
                    certes
                        .on_interval(&counters(i % 13, 20 + i % 5, 20, 300 + i))
                        .mean
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    /// Eq. 12 with a SYN-to-END histogram: completions whose SYN-to-END
    /// is 1 s take the retry mix accepted 1 s earlier, those of 3 s the mix
    /// of 3 s earlier, instead of one mix at the mean (Eq. 31).
    #[test]
    fn eq12_splits_completions_by_their_own_syn_to_end() {
        let mut certes = Certes::new(exact_paper_config(1000)).unwrap();
        // Index 0: 10 initial SYNs, all dropped; index 3: their 10 retries
        // and nothing else, all accepted; index 5: 10 initial SYNs accepted.
        certes.on_interval(&counters(10, 0, 0, 0));
        certes.on_interval(&counters(0, 0, 0, 0));
        certes.on_interval(&counters(0, 0, 0, 0));
        certes.on_interval(&counters(0, 10, 0, 0));
        certes.on_interval(&counters(0, 0, 0, 0));
        certes.on_interval(&counters(0, 10, 0, 0));
        // Index 6: all 20 complete: 10 after 3 s, 10 after 1 s.
        let mut histogram = LatencyHistogram::new();
        histogram.record_n(Nanos::from_secs(3), 10);
        histogram.record_n(Nanos::from_secs(1), 10);
        let mut c = counters(0, 0, 20, 2000);
        c.syn_to_end_histogram = Some(histogram);
        let e = certes.on_interval(&c);
        assert!((e.completed_by_attempt[0] - 10.0).abs() < 1e-9);
        assert!((e.completed_by_attempt[1] - 10.0).abs() < 1e-9);
        // Eq. 31 alone (mean 2 s: index 4, no accepts; nearest earlier with
        // accepts is index 3) would have put all 20 on the first retry.
        let mut eq31 = Certes::new(exact_paper_config(1000)).unwrap();
        for c in [(10, 0), (0, 0), (0, 0), (0, 10), (0, 0), (0, 10)] {
            eq31.on_interval(&counters(c.0, c.1, 0, 0));
        }
        let e31 = eq31.on_interval(&counters(0, 0, 20, 2000));
        assert!((e31.completed_by_attempt[1] - 20.0).abs() < 1e-9);
    }

    /// Eq. 30 carries unmatched retries while SYNs keep arriving, and an
    /// interval with no SYN at all ends them: a quiet period holds no
    /// phantom retries.
    #[test]
    fn eq30_surplus_persists_under_load_and_ends_when_idle() {
        let mut certes = Certes::new(exact_paper_config(1000)).unwrap();
        certes.on_interval(&counters(100, 0, 0, 0));
        certes.on_interval(&counters(0, 0, 0, 0));
        certes.on_interval(&counters(0, 0, 0, 0));
        // 100 first retries due; 30, then 30, then 30 SYNs arrive: all are
        // the retries, carried along.
        for _ in 0..3 {
            let e = certes.on_interval(&counters(0, 30, 0, 0));
            assert_eq!((e.retried_syns, e.initial_syns), (30.0, 0.0));
        }
        // 10 still carried; an idle interval carries them once more, the
        // next idle one ends them, and later SYNs are initial ones.
        certes.on_interval(&counters(0, 0, 0, 0));
        certes.on_interval(&counters(0, 0, 0, 0));
        let e = certes.on_interval(&counters(0, 30, 0, 0));
        assert_eq!((e.retried_syns, e.initial_syns), (0.0, 30.0));
    }

    fn paper_profile(fto_s: u64, profile: &str) -> Certes {
        paper_profile_at(Nanos::from_millis(250), fto_s, profile)
    }

    fn paper_profile_at(interval: Nanos, fto_s: u64, profile: &str) -> Certes {
        Certes::new(config_at(interval, fto_s, profile)).unwrap()
    }

    fn config_at(interval: Nanos, fto_s: u64, profile: &str) -> CertesConfig {
        CertesConfig::new(
            interval,
            ClientMix::builtin(profile).unwrap(),
            Nanos::from_secs(fto_s),
        )
    }

    /// Where the recursion turns unstable: with retries at odd multiples of
    /// one gap the first root to leave the unit circle is z = −1, where
    /// 1 − f + f² − … = 0 becomes f + f² + … + f^k = 1 (Section 3.2, Eq. 3
    /// and 13). The paper's 3/6 s schedule with k = 2: f² + f − 1 = 0, the
    /// golden ratio's 0.618.
    #[test]
    fn critical_failure_of_the_recursion() {
        let root = |k: i32| {
            let (mut lo, mut hi) = (0.0f64, 1.0f64);
            for _ in 0..60 {
                let mid = 0.5 * (lo + hi);
                if (1..=k).map(|j| mid.powi(j)).sum::<f64>() > 1.0 {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            lo
        };
        let golden = (5f64.sqrt() - 1.0) / 2.0;
        for (profile, fto, expected) in [
            ("windows-9x-nt", 21, golden),
            ("windows-9x-nt", 45, root(3)),
            ("windows-7", 21, golden),
            // 0, 1, 3, 7, 15 s: lags 1, 3, 7, 15 s, all odd.
            ("linux-3.7", 21, root(4)),
        ] {
            let certes = paper_profile(fto, profile);
            assert!(
                (certes.critical_failure - expected).abs() < 1e-3,
                "{profile} FTO {fto}: {} vs {expected}",
                certes.critical_failure
            );
        }
        // One retry: an error is never fed back twice, nothing grows.
        assert_eq!(paper_profile(9, "windows-9x-nt").critical_failure, 1.0);
        assert_eq!(paper_profile(9, "windows-9x-nt").damped_failure, 1.0);
    }

    /// f_d lies below f* and the undamped recursion is stable at every
    /// failure probability up to it (no unstable pocket below the f* the
    /// bisection found), for every built-in profile and the mixture, with
    /// one and with mixed frustration timeouts. Above f_d the damping makes
    /// an error travel as at f_d (tested on the model itself below).
    #[test]
    fn recursion_is_stable_up_to_the_damping_threshold() {
        let mut configs = Vec::new();
        for profile in [
            "windows-9x-nt",
            "windows-7",
            "linux-3.7",
            "linux-6.5",
            "macos",
            "mix-2026",
        ] {
            for fto in [9, 21, 45] {
                configs.push(paper_profile(fto, profile).config);
            }
            let mut mixed = paper_profile(21, profile).config;
            mixed.frustration_timeouts = [9, 21, 45]
                .iter()
                .map(|s| (Nanos::from_secs(*s), 1.0))
                .collect();
            configs.push(mixed);
        }
        for config in configs {
            let certes = Certes::new(config).unwrap();
            let lags = retry_lags(&certes.classes, certes.config.interval.max(STABILITY_STEP));
            // Undamped below f_d; above it an error travels as at f_d.
            assert!(certes.damped_failure <= certes.critical_failure);
            for step in 0..=99 {
                let f = (step as f64 / 100.0).min(certes.damped_failure);
                assert!(
                    !error_grows(&lags, f),
                    "{} FTO {:?}: f = {f}",
                    certes.config.clients.name,
                    certes.config.frustration_timeouts
                );
            }
        }
    }

    /// Steady overload above f* (70 % of SYNs dropped, paper clients):
    /// one interval's offered SYNs miscounted by 12 % (a burst of retries
    /// landing an interval early) disturbs the split of the intervals its
    /// retries reach, and the disturbance dies out: two minutes later every
    /// interval's initial SYNs are within 0.5 % of the steady state. The
    /// paper's undamped recursion would multiply it by about 1.2 every 6 s.
    #[test]
    fn an_error_dies_out_above_the_critical_failure_rate() {
        let mut certes = Certes::new(exact_paper_config(250)).unwrap();
        let drop_rate = 0.7f64;
        // Stationary fluid input: 100 new clients per interval, k = 2.
        let offered = 100.0 * (1.0 + drop_rate + drop_rate * drop_rate);
        let steady = 100.0;
        let mut last = Vec::new();
        for i in 0..2400u64 {
            let offered = if i == 1200 { offered * 1.12 } else { offered };
            let dropped = (offered * drop_rate).round();
            let c = IntervalCounters {
                dropped: dropped as u64,
                accepted: (offered.round() - dropped) as u64,
                ..Default::default()
            };
            let e = certes.on_interval(&c);
            if i >= 1200 + 480 {
                last.push(e.initial_syns);
            }
        }
        for initial in last {
            assert!(
                (initial / steady - 1.0).abs() < 0.005,
                "{initial} vs {steady}"
            );
        }
    }
}
