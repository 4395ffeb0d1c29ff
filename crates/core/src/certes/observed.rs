//! Certes inputs observed connection by connection — from a server-side
//! packet capture, or any record that keeps every SYN — and the *exact*
//! client-perceived time the model estimates.
//!
//! A server kernel only counts (Certes paper, Section 4); a capture at the
//! server sees more: every SYN of a connection (retransmitted SYNs carry
//! the same 4-tuple and initial sequence number), which one the server
//! answered, the handshake's RTT and the connection's end. From a
//! [`ConnectionObservation`] per connection this module computes
//!
//! * [`bucket`]: the per-interval counters the model consumes (Eq. 2–3,
//!   Section 3.1): every unanswered SYN is one DROPPED in the interval it
//!   arrived in, and one DROPPED^j by its attempt j, its position among
//!   the connection's SYNs (0 the initial one; [`super::counters`]); the
//!   answered SYN is one ACCEPTED in its interval (one
//!   REFUSED if the answer was a RST, below); the
//!   connection is one COMPLETED in the interval of its END, adding its
//!   SYN-to-END (END − answered SYN) and RTT (SYN-ACK to its ACK) to the
//!   sums and its SYN-to-END to the interval's histogram;
//! * [`exact`]: what Eq. 1 gives when CONN-FAIL is known rather than
//!   inferred: per connection the retry count (SYNs before the answered one)
//!   and CLIENT_RT = CONN-FAIL + SYN-to-END + RTT with CONN-FAIL = answered
//!   SYN − first SYN; per interval, with the model's binning (Eq. 4: a
//!   completed connection in its END's interval, a give-up in the interval
//!   its client gives up), the sum, count and mean;
//! * [`estimate_intervals`] and [`compare`]: the model run over those
//!   counters and its transaction-weighted mean set beside the exact one.
//!
//! Definitions and decisions, with reasons:
//! * **END** is decided by whoever builds the observation; the capture
//!   reader (`vantage_trace::handshake`) follows Section 4: the first of the
//!   server's last data segment and the first FIN or RST (a FIN followed by
//!   a data retransmission ends nothing: see there).
//! * **Give-ups.** A connection none of whose SYNs was answered is a client
//!   that gave up. The server cannot see when; its wait is taken as the
//!   model's (Section 3.2.2, Table I): min(frustration timeout, the
//!   profile's own give-up time T_conn), but never less than the offset of
//!   the last SYN the capture saw (a client still sending SYNs was still
//!   waiting). With a mixture of profiles, the profile is the one whose
//!   nominal retransmission times best match the SYNs seen (ties: the
//!   larger weight). The give-up is binned at first SYN + wait, as the
//!   paper's R_i^{k+1}.
//! * **Abandoned** accepted connections (no END by the client's
//!   frustration timeout, which is a wall clock on the whole transaction)
//!   end at first SYN + FTO, see [`end_abandoned`].
//! * **Unresolved** connections are left out of the exact figures and
//!   counted: accepted but with no END before the capture stopped, or
//!   never answered with the capture ending before their client would give
//!   up. Their SYNs are still counted by [`bucket`] — the server saw them.
//! * **Refused** connections (the server answered a SYN with a RST) are not
//!   Certes transactions: the client learns at once and does not retry. The
//!   SYNs before the refused one count as drops (each in DROPPED_i^j by
//!   its attempt j, as every dropped SYN is), the refused SYN as one
//!   REFUSED in its interval — the rule of [`super::counters`], the same a
//!   gate's or a proxy's counts follow: it arrived (it is in the drop
//!   rate's denominator) but was not accepted, and in REFUSED_i^j by its
//!   attempt j, the number of SYNs before it (the capture sees them all;
//!   the models refuse each attempt at its own rate). The connection is
//!   left out of the exact figures and counted as a failure.
//! * **Failures** of accepted connections ([`Failure`]), ended by a RST
//!   before the server sent any response. **Reset** by the server (an
//!   overloaded server accepting and shedding): the client got no
//!   service, so the connection is no fast completion — it is ACCEPTED but
//!   not COMPLETED, left out of the sums and the exact mean, and counted.
//!   **Aborted** by the client: its client waited from its first SYN to its
//!   RST, and that wait enters as a completion with END at the RST (Eq. 1,
//!   like a give-up's wait), counted as a failure too. Give-ups, refusals,
//!   resets and aborts make the error rate ([`ExactFigures::error_rate`]).
//!   An accepted connection still open at first SYN + FTO is abandoned
//!   (below) whatever ended it later.
//! * SYNs that arrive **after the answered one** (the client re-sent its
//!   SYN because the SYN-ACK was lost or late) are neither drops nor
//!   accepts: the paper's kernel counts ACCEPTED once per connection. Their
//!   delay is part of SYN-to-END (Section 3, Figure 3). They are counted.
//! * A completed connection with **no measured RTT** (its handshake ACK was
//!   never seen) adds zero RTT; such connections are counted.
//! * Data segments sent and retransmitted (Section 3.2.1's network-loss
//!   estimate) are credited to the interval of END, or for a connection
//!   without END to the interval of its answered SYN.
//!
//! Sans-IO: nothing here reads a file or a clock.

use super::counters::IntervalCounters;
use super::histogram::LatencyHistogram;
use super::model::{Certes, CertesConfig, CertesError, Estimate};
use crate::tcp::{ClientMix, SynProfile};
use crate::Nanos;
use serde::Serialize;

/// One connection attempt as the server saw it: every SYN of one 4-tuple
/// and initial sequence number.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ConnectionObservation {
    /// Arrival of every SYN of the connection at the server, in order.
    pub syn_arrivals: Vec<Nanos>,
    /// Index in `syn_arrivals` of the SYN the server answered with its
    /// (first) SYN-ACK; `None` if no SYN was answered.
    pub answered: Option<usize>,
    /// The server answered a SYN with a RST (connection refused).
    pub refused: bool,
    /// END of the connection (Section 4): last data segment sent by the
    /// server or first FIN/RST, whichever came first; `None` if the capture
    /// stopped before it (or the connection was never accepted).
    pub end: Option<Nanos>,
    /// RTT: from the SYN-ACK to the client's ACK of it.
    pub rtt: Option<Nanos>,
    /// Data segments the server sent on this connection.
    pub segments_sent: u64,
    /// Of those, retransmissions.
    pub segments_retransmitted: u64,
    /// Class of traffic (Section 3.2.4), e.g. a listener or a source
    /// prefix; not used by the functions of this module, which take one
    /// class at a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The connection was accepted and ended by a RST before the server
    /// sent any response (its END is the RST).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

/// How an accepted connection failed before any response (see the module
/// docs for how each enters the figures).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failure {
    /// The server reset it (an overloaded server shedding connections).
    Reset,
    /// The client reset it.
    Aborted,
}

impl ConnectionObservation {
    /// The first SYN's arrival.
    pub fn first_syn(&self) -> Option<Nanos> {
        self.syn_arrivals.first().copied()
    }

    /// Arrival of the answered SYN.
    pub fn answered_syn(&self) -> Option<Nanos> {
        self.answered
            .and_then(|i| self.syn_arrivals.get(i).copied())
    }

    /// SYN-to-END: END − answered SYN.
    pub fn syn_to_end(&self) -> Option<Nanos> {
        Some(self.end? - self.answered_syn()?)
    }

    /// Checks the observation is consistent; `index` names it in errors.
    pub fn validate(&self, index: usize) -> Result<(), ObservedError> {
        let bad = |problem: String| ObservedError::BadObservation { index, problem };
        if self.syn_arrivals.is_empty() {
            return Err(bad("no SYN".into()));
        }
        if self.syn_arrivals.windows(2).any(|w| w[1] < w[0]) {
            return Err(bad("SYN arrivals are not in time order".into()));
        }
        if let Some(answered) = self.answered {
            if answered >= self.syn_arrivals.len() {
                return Err(bad(format!(
                    "answered SYN index {answered} but only {} SYNs",
                    self.syn_arrivals.len()
                )));
            }
            if self.refused {
                return Err(bad("both answered and refused".into()));
            }
        }
        if let Some(end) = self.end {
            match self.answered_syn() {
                None => return Err(bad("an END but no answered SYN".into())),
                Some(answered) if end < answered => {
                    return Err(bad(format!("END {end} before the answered SYN {answered}")))
                }
                Some(_) => {}
            }
        }
        if self.failure.is_some() && self.end.is_none() {
            return Err(bad("a failure but no END".into()));
        }
        if self.segments_retransmitted > self.segments_sent {
            return Err(bad(format!(
                "{} segments retransmitted of {} sent",
                self.segments_retransmitted, self.segments_sent
            )));
        }
        Ok(())
    }
}

/// Bad input to this module.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ObservedError {
    #[error("interval must be positive")]
    ZeroInterval,
    #[error("connection {index}: {problem}")]
    BadObservation { index: usize, problem: String },
    #[error("connection {index}: event at {at} is after the end of the capture at {capture_end}")]
    AfterCaptureEnd {
        index: usize,
        at: Nanos,
        capture_end: Nanos,
    },
    #[error(
        "connection {index}: event at {at} is before the first interval, which starts at {start}"
    )]
    BeforeStart {
        index: usize,
        at: Nanos,
        start: Nanos,
    },
    #[error("the frustration timeout must be positive")]
    ZeroFrustrationTimeout,
    #[error(
        "{span} cut into intervals of {interval} makes {intervals} intervals, more than the \
         {limit} this tool keeps in memory; use a longer interval or cut the capture \
         (e.g. `editcap -A`/`-B`) — a capture spanning years often holds two captures glued together"
    )]
    TooManyIntervals {
        span: Nanos,
        interval: Nanos,
        intervals: u64,
        limit: u64,
    },
}

/// Most intervals [`bucket`] and [`exact`] build (about 46 days of 1-second
/// intervals; some hundred bytes each).
pub const MAX_INTERVALS: u64 = 4_000_000;

/// Intervals of equal length from a start instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IntervalGrid {
    pub start: Nanos,
    pub interval: Nanos,
}

impl IntervalGrid {
    pub fn new(start: Nanos, interval: Nanos) -> Result<IntervalGrid, ObservedError> {
        if interval == Nanos::ZERO {
            return Err(ObservedError::ZeroInterval);
        }
        Ok(IntervalGrid { start, interval })
    }

    /// A grid whose intervals are whole multiples of `interval` from the
    /// clock's origin (the UNIX epoch, for captures), the first one holding
    /// `first`: intervals then line up with any other record of the same
    /// clock cut at the same length.
    pub fn aligned(first: Nanos, interval: Nanos) -> Result<IntervalGrid, ObservedError> {
        if interval == Nanos::ZERO {
            return Err(ObservedError::ZeroInterval);
        }
        Ok(IntervalGrid {
            start: Nanos(first.0 / interval.0 * interval.0),
            interval,
        })
    }

    /// Index of the interval holding `t`; `None` before the start.
    pub fn index_of(&self, t: Nanos) -> Option<u64> {
        (t >= self.start).then(|| (t.0 - self.start.0) / self.interval.0)
    }

    /// Start of interval `index`.
    pub fn start_of(&self, index: u64) -> Nanos {
        self.start + self.interval.saturating_mul(index)
    }

    /// Number of intervals from the start through the one holding `end`.
    pub fn count_through(&self, end: Nanos) -> u64 {
        self.index_of(end).map_or(0, |i| i + 1)
    }

    /// [`count_through`](Self::count_through), refused beyond
    /// [`MAX_INTERVALS`].
    pub fn checked_count_through(&self, end: Nanos) -> Result<usize, ObservedError> {
        let intervals = self.count_through(end);
        if intervals > MAX_INTERVALS {
            return Err(ObservedError::TooManyIntervals {
                span: end - self.start,
                interval: self.interval,
                intervals,
                limit: MAX_INTERVALS,
            });
        }
        Ok(intervals as usize)
    }
}

/// Counts of what [`bucket`] saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BucketStats {
    pub connections: u64,
    /// SYNs counted as DROPPED.
    pub dropped: u64,
    /// SYNs counted as ACCEPTED.
    pub accepted: u64,
    /// Connections counted as COMPLETED.
    pub completed: u64,
    /// SYNs after the answered one (neither dropped nor accepted).
    pub syns_after_answer: u64,
    /// Connections refused with a RST: their last SYN counted as REFUSED.
    pub refused: u64,
    /// Connections accepted whose END was not seen.
    pub accepted_without_end: u64,
    /// Completed connections without a measured RTT (counted as zero).
    pub rtt_missing: u64,
    /// Accepted connections the server reset before any response: not
    /// COMPLETED.
    pub reset: u64,
    /// Of the completed connections, those the client reset before any
    /// response.
    pub aborted: u64,
}

/// Per-interval counters built from observations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ObservedCounters {
    pub grid: IntervalGrid,
    /// Interval i starts at `grid.start_of(i)`.
    pub intervals: Vec<IntervalCounters>,
    pub stats: BucketStats,
}

/// Checks one observation against the grid and the capture's end.
fn check_bounds(
    index: usize,
    o: &ConnectionObservation,
    grid: &IntervalGrid,
    capture_end: Nanos,
) -> Result<(), ObservedError> {
    o.validate(index)?;
    let first = o.syn_arrivals[0];
    if first < grid.start {
        return Err(ObservedError::BeforeStart {
            index,
            at: first,
            start: grid.start,
        });
    }
    let last = o
        .end
        .into_iter()
        .chain(o.syn_arrivals.last().copied())
        .max();
    if let Some(at) = last.filter(|at| *at > capture_end) {
        return Err(ObservedError::AfterCaptureEnd {
            index,
            at,
            capture_end,
        });
    }
    Ok(())
}

/// Where per-interval figures go: the entry of the interval holding an
/// instant. A dense grid ([`bucket`], [`exact`]) and a sparse map of the
/// intervals still open (`super::stream`) both apply the same rules.
pub trait IntervalSlots<T> {
    /// Index of the interval holding `t`.
    fn index(&self, t: Nanos) -> u64;
    /// The entry of the interval holding `t`.
    fn at(&mut self, t: Nanos) -> &mut T;
}

/// One entry per interval of a grid, from its start.
struct DenseSlots<'a, T> {
    grid: IntervalGrid,
    intervals: &'a mut [T],
}

impl<T> IntervalSlots<T> for DenseSlots<'_, T> {
    fn index(&self, t: Nanos) -> u64 {
        self.grid.index_of(t).unwrap_or(0)
    }

    // Every index is within the grid: events are checked to lie in
    // [grid.start, capture_end] first.
    fn at(&mut self, t: Nanos) -> &mut T {
        let index = self.index(t) as usize;
        &mut self.intervals[index]
    }
}

/// Builds the per-interval counters of Eq. 2–3 from one class's
/// observations, for the intervals from `grid.start` through the one
/// holding `capture_end` (empty intervals included).
pub fn bucket(
    observations: &[ConnectionObservation],
    grid: IntervalGrid,
    capture_end: Nanos,
) -> Result<ObservedCounters, ObservedError> {
    let count = grid.checked_count_through(capture_end)?;
    let mut intervals = vec![IntervalCounters::default(); count];
    let mut stats = BucketStats::default();
    let mut slots = DenseSlots {
        grid,
        intervals: &mut intervals,
    };
    for (index, o) in observations.iter().enumerate() {
        check_bounds(index, o, &grid, capture_end)?;
        bucket_one(o, &mut stats, &mut slots);
    }
    Ok(ObservedCounters {
        grid,
        intervals,
        stats,
    })
}

/// Adds one (valid) observation to the interval counters (see the module
/// docs for the rules).
pub fn bucket_one(
    o: &ConnectionObservation,
    stats: &mut BucketStats,
    intervals: &mut impl IntervalSlots<IntervalCounters>,
) {
    stats.connections += 1;
    // SYNs before the answered one (all of them when none was answered;
    // all but the last when the last was refused) were dropped.
    let dropped_until = match (o.answered, o.refused) {
        (Some(answered), _) => answered,
        (None, true) => o.syn_arrivals.len() - 1,
        (None, false) => o.syn_arrivals.len(),
    };
    // A dropped SYN's attempt index is its position among the
    // connection's SYNs (DROPPED_i^j).
    for (attempt, &t) in o.syn_arrivals[..dropped_until].iter().enumerate() {
        intervals.at(t).count_dropped(attempt);
        stats.dropped += 1;
    }
    if o.refused {
        // validate(): a refused connection has no answered SYN, so the
        // refused one is its last.
        // its attempt index is the number of SYNs before it (REFUSED_i^j).
        if let Some(&refused_at) = o.syn_arrivals.last() {
            intervals
                .at(refused_at)
                .count_refused(o.syn_arrivals.len() - 1);
        }
        stats.refused += 1;
    }
    let Some(answered) = o.answered else {
        return;
    };
    let answered_at = o.syn_arrivals[answered];
    intervals.at(answered_at).accepted += 1;
    stats.accepted += 1;
    stats.syns_after_answer += (o.syn_arrivals.len() - answered - 1) as u64;
    let credited = match o.end {
        Some(_) if o.failure == Some(Failure::Reset) => {
            stats.reset += 1;
            intervals.at(answered_at)
        }
        Some(end) => {
            if o.failure == Some(Failure::Aborted) {
                stats.aborted += 1;
            }
            let c = intervals.at(end);
            let syn_to_end = end - answered_at;
            c.completed += 1;
            c.syn_to_end_sum += syn_to_end;
            c.syn_to_end_histogram
                .get_or_insert_with(LatencyHistogram::new)
                .record(syn_to_end);
            match o.rtt {
                Some(rtt) => c.rtt_sum += rtt,
                None => stats.rtt_missing += 1,
            }
            stats.completed += 1;
            c
        }
        None => {
            stats.accepted_without_end += 1;
            intervals.at(answered_at)
        }
    };
    credited.segments_sent += o.segments_sent;
    credited.segments_retransmitted += o.segments_retransmitted;
}

/// Ends at first SYN + FTO every accepted connection that had not ended by
/// then — no END at all, or an END seen only later; returns how many.
///
/// The frustration timeout is a wall clock on the whole transaction, as
/// in the paper's fixed WebStone clients (Section 5.1: "a true wall clock
/// frustration timeout"): a client gone at FTO perceives FTO, whatever the
/// server does afterwards — serving it at 29 s is work for no one.
///
/// Linux drops the handshake ACK and the request of a connection whose
/// accept queue is full: the server answered the SYN, but never serves the
/// connection nor closes it, and the client, once its frustration timeout
/// expires, abandons it — often without a FIN the capture could see, or
/// with one seen many seconds later (the FIN waits behind the
/// unacknowledged request and its retransmission back-off). Such a connection is a
/// transaction of FTO seconds for its client (Section 3.2.2). Its END is
/// taken as first SYN + FTO, so that [`bucket`] counts it COMPLETED with that
/// SYN-to-END and [`exact`] gives it that client time; the paper's kernel
/// would likewise count it when it finally gave the connection up. Without
/// this, the counters would leave out exactly the clients the overload
/// hurt most.
pub fn end_abandoned(
    observations: &mut [ConnectionObservation],
    frustration_timeout: Nanos,
    capture_end: Nanos,
) -> u64 {
    let mut ended = 0;
    for o in observations.iter_mut() {
        if end_abandoned_one(o, frustration_timeout, capture_end) {
            ended += 1;
        }
    }
    ended
}

/// First SYN + FTO of an accepted connection that had not ended by then
/// (no END, or one seen only later) and was answered before it: the
/// instant [`end_abandoned`] ends it at once the capture reaches it.
pub fn abandon_time(o: &ConnectionObservation, frustration_timeout: Nanos) -> Option<Nanos> {
    let (Some(answered), false) = (o.answered, o.refused) else {
        return None;
    };
    let (Some(first), Some(answered_at)) = (
        o.syn_arrivals.first().copied(),
        o.syn_arrivals.get(answered).copied(),
    ) else {
        return None;
    };
    let abandoned = first + frustration_timeout;
    let ended_before = o.end.is_some_and(|end| end <= abandoned);
    (!ended_before && abandoned >= answered_at).then_some(abandoned)
}

/// [`end_abandoned`] for one observation; whether it was ended.
pub fn end_abandoned_one(
    o: &mut ConnectionObservation,
    frustration_timeout: Nanos,
    capture_end: Nanos,
) -> bool {
    match abandon_time(o, frustration_timeout) {
        Some(abandoned) if abandoned <= capture_end => {
            o.end = Some(abandoned);
            // Gone at FTO: whatever ended the connection later, its client
            // saw no failure but its own frustration.
            o.failure = None;
            true
        }
        _ => false,
    }
}

/// What the exact figures assume about clients that never got in.
#[derive(Clone, Debug, PartialEq)]
pub struct ExactConfig {
    pub clients: ClientMix,
    pub frustration_timeout: Nanos,
}

impl ExactConfig {
    /// The clients and (first) frustration timeout of a model configuration.
    pub fn from_model(config: &CertesConfig) -> Result<ExactConfig, ObservedError> {
        let frustration_timeout = config
            .frustration_timeouts
            .first()
            .map(|(t, _)| *t)
            .ok_or(ObservedError::ZeroFrustrationTimeout)?;
        Ok(ExactConfig {
            clients: config.clients.clone(),
            frustration_timeout,
        })
    }

    /// The profile of the mixture whose nominal retransmission times best
    /// match the SYN offsets seen (absolute differences summed; a SYN the
    /// profile would never send costs its whole offset); ties go to the
    /// larger weight, then to the first listed.
    pub fn matching_profile(&self, syn_offsets: &[Nanos]) -> &SynProfile {
        let mut best: Option<(u128, f64, &SynProfile)> = None;
        for (profile, weight) in self.clients.entries() {
            let mut score: u128 = 0;
            for (k, offset) in syn_offsets.iter().enumerate().skip(1) {
                score += if k <= profile.retransmissions() {
                    u128::from(offset.0.abs_diff(profile.send_offset(k).0))
                } else {
                    u128::from(offset.0)
                };
            }
            let better = match best {
                None => true,
                Some((s, w, _)) => score < s || (score == s && *weight > w),
            };
            if better {
                best = Some((score, *weight, profile));
            }
        }
        // A ClientMix is never empty.
        best.map(|(_, _, p)| p)
            .unwrap_or_else(|| self.clients.dominant())
    }

    /// How long a client whose SYNs arrived at these offsets from its first
    /// SYN waited before giving up (see the module docs).
    pub fn give_up_wait(&self, syn_offsets: &[Nanos]) -> Nanos {
        let profile = self.matching_profile(syn_offsets);
        let last_seen = syn_offsets.last().copied().unwrap_or(Nanos::ZERO);
        profile.give_up_at(self.frustration_timeout).max(last_seen)
    }
}

/// How a connection ended for its client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExactOutcome {
    /// Accepted and ended (END seen).
    Completed,
    /// Never answered; the client gave up within the capture.
    GaveUp,
    /// Refused with a RST: not a Certes transaction.
    Refused,
    /// Accepted, then reset by the server before any response: not a
    /// Certes transaction.
    Reset,
    /// Outcome unknown when the capture stopped.
    Unresolved,
}

/// The exact figures of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ExactConnection {
    /// Index of the observation.
    pub index: usize,
    pub outcome: ExactOutcome,
    pub first_syn: Nanos,
    /// SYNs before the answered one (completed), or SYNs after the first
    /// (gave up, refused, unresolved).
    pub retries: u32,
    /// CONN-FAIL: answered SYN − first SYN (completed) or the whole wait
    /// (gave up).
    pub conn_fail: Option<Nanos>,
    /// SYN-to-END (completed).
    pub syn_to_end: Option<Nanos>,
    /// RTT (completed; zero when not measured).
    pub rtt: Option<Nanos>,
    /// CLIENT_RT = CONN-FAIL + SYN-to-END + RTT (Eq. 1), or the give-up wait.
    pub client_time: Option<Nanos>,
    /// When the transaction ended for the client's account: END, or first
    /// SYN + wait for a give-up.
    pub at: Option<Nanos>,
    /// Interval of `at`.
    pub interval: Option<u64>,
}

/// Exact figures of one interval, binned like Eq. 4.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExactInterval {
    /// COMPLETED_i.
    pub completed: u64,
    /// Clients who gave up in this interval (R_i^{k+1}).
    pub gave_up: u64,
    /// Σ CLIENT_RT over both.
    pub total_time: Nanos,
    /// Σ CONN-FAIL over both (give-ups count their whole wait).
    pub conn_fail_total: Nanos,
    /// C_i^j: completed connections by retry count j (index 0 = first SYN).
    pub completed_by_retries: Vec<u64>,
}

impl ExactInterval {
    /// COMPLETED_i + R_i^{k+1}.
    pub fn transactions(&self) -> u64 {
        self.completed + self.gave_up
    }

    /// Mean CLIENT_RT of the interval's transactions.
    pub fn mean(&self) -> Option<Nanos> {
        let n = self.transactions();
        (n > 0).then(|| Nanos(self.total_time.0 / n))
    }

    /// Mean CONN-FAIL of the interval's transactions.
    pub fn conn_fail_mean(&self) -> Option<Nanos> {
        let n = self.transactions();
        (n > 0).then(|| Nanos(self.conn_fail_total.0 / n))
    }
}

/// Exact figures of a set of observations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExactFigures {
    pub grid: IntervalGrid,
    /// One per observation, in the same order.
    pub connections: Vec<ExactConnection>,
    /// Same intervals as [`bucket`] gives for the same arguments.
    pub intervals: Vec<ExactInterval>,
    /// Of these, `aborted` were reset by their client before any response.
    pub completed: u64,
    pub gave_up: u64,
    pub refused: u64,
    /// Accepted, then reset by the server before any response.
    pub reset: u64,
    /// Completed connections the client reset before any response.
    pub aborted: u64,
    pub unresolved: u64,
    /// Σ CLIENT_RT over completed and gave-up connections.
    pub total_time: Nanos,
    /// Completed connections by retry count, over every interval.
    #[serde(skip)]
    pub completed_by_retries: Vec<u64>,
    /// CLIENT_RT of every transaction, for the percentiles.
    #[serde(skip)]
    pub times: ClientTimes,
}

impl ExactFigures {
    /// Completed plus gave-up connections.
    pub fn transactions(&self) -> u64 {
        self.completed + self.gave_up
    }

    /// Connections that failed their client: refused, reset by the server,
    /// aborted by the client, or given up.
    pub fn failures(&self) -> u64 {
        self.refused + self.reset + self.aborted + self.gave_up
    }

    /// Failures among the connections whose outcome is known.
    pub fn error_rate(&self) -> Option<f64> {
        let resolved = self.completed + self.gave_up + self.refused + self.reset;
        (resolved > 0).then(|| self.failures() as f64 / resolved as f64)
    }

    /// Mean CLIENT_RT over every transaction of the capture.
    pub fn mean(&self) -> Option<Nanos> {
        let n = self.transactions();
        (n > 0).then(|| Nanos(self.total_time.0 / n))
    }

    /// The q-quantile of CLIENT_RT over every transaction (nearest rank;
    /// see [`ClientTimes`] for its resolution).
    pub fn percentile(&self, q: f64) -> Option<Nanos> {
        self.times.quantile(q)
    }

    /// Figures with nothing counted yet, over `grid` with `intervals`
    /// intervals.
    pub fn empty(grid: IntervalGrid, intervals: usize) -> ExactFigures {
        ExactFigures {
            grid,
            connections: Vec::new(),
            intervals: vec![ExactInterval::default(); intervals],
            completed: 0,
            gave_up: 0,
            refused: 0,
            reset: 0,
            aborted: 0,
            unresolved: 0,
            total_time: Nanos::ZERO,
            completed_by_retries: Vec::new(),
            times: ClientTimes::default(),
        }
    }

    /// Adds another set of figures' totals (not their connections nor
    /// intervals).
    pub fn add_totals(&mut self, other: &ExactFigures) {
        self.completed += other.completed;
        self.gave_up += other.gave_up;
        self.refused += other.refused;
        self.reset += other.reset;
        self.aborted += other.aborted;
        self.unresolved += other.unresolved;
        self.total_time += other.total_time;
        add_counts(&mut self.completed_by_retries, &other.completed_by_retries);
        self.times.merge(&other.times);
    }
}

/// Adds `other` element-wise into `into`, growing it as needed.
fn add_counts(into: &mut Vec<u64>, other: &[u64]) {
    if into.len() < other.len() {
        into.resize(other.len(), 0);
    }
    for (slot, n) in into.iter_mut().zip(other) {
        *slot += n;
    }
}

/// Most client times [`ClientTimes`] keeps one by one (8 MB).
pub const MAX_EXACT_CLIENT_TIMES: usize = 1_000_000;

/// Ratio between consecutive buckets of [`ClientTimes`] beyond
/// [`MAX_EXACT_CLIENT_TIMES`]: a percentile is then the geometric middle
/// of its bucket, within 0.1 % of the exact one.
pub const CLIENT_TIME_BUCKET_RATIO: f64 = 1.002;

/// The CLIENT_RT of every transaction, for nearest-rank percentiles in
/// bounded memory: every value up to [`MAX_EXACT_CLIENT_TIMES`] (the
/// percentiles are then exact), beyond that a histogram of logarithmic
/// buckets ([`CLIENT_TIME_BUCKET_RATIO`]; `relative_error` says so). A
/// histogram crate would do as well; this one is a few lines and keeps
/// zero exact.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientTimes {
    values: Vec<Nanos>,
    /// Bucket index (0: zero; k ≥ 1: [r^(k−1), r^k) ns) → count.
    buckets: std::collections::BTreeMap<u32, u64>,
}

impl ClientTimes {
    pub fn record(&mut self, time: Nanos) {
        if self.buckets.is_empty() && self.values.len() < MAX_EXACT_CLIENT_TIMES {
            self.values.push(time);
            return;
        }
        for value in std::mem::take(&mut self.values) {
            *self.buckets.entry(Self::bucket_of(value)).or_default() += 1;
        }
        *self.buckets.entry(Self::bucket_of(time)).or_default() += 1;
    }

    pub fn merge(&mut self, other: &ClientTimes) {
        for value in &other.values {
            self.record(*value);
        }
        for (bucket, count) in &other.buckets {
            if self.buckets.is_empty() {
                // Past the exact limit: bucket what was kept.
                for value in std::mem::take(&mut self.values) {
                    *self.buckets.entry(Self::bucket_of(value)).or_default() += 1;
                }
            }
            *self.buckets.entry(*bucket).or_default() += count;
        }
    }

    pub fn len(&self) -> u64 {
        self.values.len() as u64 + self.buckets.values().sum::<u64>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `None` while every value is kept (percentiles exact), else the
    /// largest relative error of a percentile.
    pub fn relative_error(&self) -> Option<f64> {
        (!self.buckets.is_empty()).then(|| CLIENT_TIME_BUCKET_RATIO.sqrt() - 1.0)
    }

    fn bucket_of(time: Nanos) -> u32 {
        if time.0 == 0 {
            return 0;
        }
        1 + ((time.0 as f64).ln() / CLIENT_TIME_BUCKET_RATIO.ln()).floor() as u32
    }

    /// The q-quantile (nearest rank).
    pub fn quantile(&self, q: f64) -> Option<Nanos> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        if self.buckets.is_empty() {
            let mut times = self.values.clone();
            times.sort_unstable();
            return Some(times[rank as usize - 1]);
        }
        let mut seen = 0;
        for (bucket, count) in &self.buckets {
            seen += count;
            if seen >= rank {
                if *bucket == 0 {
                    return Some(Nanos::ZERO);
                }
                let lower = CLIENT_TIME_BUCKET_RATIO.powi(*bucket as i32 - 1);
                let middle = lower * CLIENT_TIME_BUCKET_RATIO.sqrt();
                return Some(Nanos(middle.round() as u64));
            }
        }
        None
    }
}

/// The exact per-connection and per-interval figures (see the module docs)
/// of one class's observations, over the same intervals as [`bucket`].
pub fn exact(
    observations: &[ConnectionObservation],
    grid: IntervalGrid,
    capture_end: Nanos,
    config: &ExactConfig,
) -> Result<ExactFigures, ObservedError> {
    if config.frustration_timeout == Nanos::ZERO {
        return Err(ObservedError::ZeroFrustrationTimeout);
    }
    let count = grid.checked_count_through(capture_end)?;
    let mut figures = ExactFigures::empty(grid, 0);
    figures.connections.reserve(observations.len());
    let mut intervals = vec![ExactInterval::default(); count];
    let mut slots = DenseSlots {
        grid,
        intervals: &mut intervals,
    };
    for (index, o) in observations.iter().enumerate() {
        check_bounds(index, o, &grid, capture_end)?;
        let connection = exact_one(index, o, capture_end, config, &mut figures, &mut slots);
        figures.connections.push(connection);
    }
    figures.intervals = intervals;
    Ok(figures)
}

/// Adds one (valid) observation to the exact figures' totals and
/// intervals, and returns its own figures (`index` names it). Only a
/// never-answered connection depends on `capture_end`: its client gave up
/// within the capture or its outcome is unknown.
pub fn exact_one(
    index: usize,
    o: &ConnectionObservation,
    capture_end: Nanos,
    config: &ExactConfig,
    figures: &mut ExactFigures,
    intervals: &mut impl IntervalSlots<ExactInterval>,
) -> ExactConnection {
    let first_syn = o.syn_arrivals[0];
    let mut connection = ExactConnection {
        index,
        outcome: ExactOutcome::Unresolved,
        first_syn,
        retries: (o.syn_arrivals.len() - 1) as u32,
        conn_fail: None,
        syn_to_end: None,
        rtt: None,
        client_time: None,
        at: None,
        interval: None,
    };
    match (o.answered, o.end) {
        (Some(_), Some(_)) if o.failure == Some(Failure::Reset) => {
            connection.outcome = ExactOutcome::Reset;
            figures.reset += 1;
        }
        (Some(answered), Some(end)) => {
            if o.failure == Some(Failure::Aborted) {
                figures.aborted += 1;
            }
            let answered_at = o.syn_arrivals[answered];
            let conn_fail = answered_at - first_syn;
            let syn_to_end = end - answered_at;
            let rtt = o.rtt.unwrap_or(Nanos::ZERO);
            let client_time = conn_fail + syn_to_end + rtt;
            let slot = intervals.index(end);
            let interval = intervals.at(end);
            interval.completed += 1;
            interval.total_time += client_time;
            interval.conn_fail_total += conn_fail;
            if interval.completed_by_retries.len() <= answered {
                interval.completed_by_retries.resize(answered + 1, 0);
            }
            interval.completed_by_retries[answered] += 1;
            if figures.completed_by_retries.len() <= answered {
                figures.completed_by_retries.resize(answered + 1, 0);
            }
            figures.completed_by_retries[answered] += 1;
            figures.completed += 1;
            figures.total_time += client_time;
            figures.times.record(client_time);
            connection = ExactConnection {
                outcome: ExactOutcome::Completed,
                retries: answered as u32,
                conn_fail: Some(conn_fail),
                syn_to_end: Some(syn_to_end),
                rtt: Some(rtt),
                client_time: Some(client_time),
                at: Some(end),
                interval: Some(slot),
                ..connection
            };
        }
        (Some(_), None) => figures.unresolved += 1,
        (None, _) if o.refused => {
            connection.outcome = ExactOutcome::Refused;
            figures.refused += 1;
        }
        (None, _) => {
            let at = give_up_time(o, config);
            if at > capture_end {
                figures.unresolved += 1;
            } else {
                let wait = at - first_syn;
                let slot = intervals.index(at);
                let interval = intervals.at(at);
                interval.gave_up += 1;
                interval.total_time += wait;
                interval.conn_fail_total += wait;
                figures.gave_up += 1;
                figures.total_time += wait;
                figures.times.record(wait);
                connection = ExactConnection {
                    outcome: ExactOutcome::GaveUp,
                    conn_fail: Some(wait),
                    client_time: Some(wait),
                    at: Some(at),
                    interval: Some(slot),
                    ..connection
                };
            }
        }
    }
    connection
}

/// When the client of a never-answered connection gave up: first SYN +
/// [`ExactConfig::give_up_wait`].
pub fn give_up_time(o: &ConnectionObservation, config: &ExactConfig) -> Nanos {
    let first_syn = o.syn_arrivals[0];
    let offsets: Vec<Nanos> = o.syn_arrivals.iter().map(|t| *t - first_syn).collect();
    first_syn + config.give_up_wait(&offsets)
}

/// Runs a fresh estimator over consecutive intervals' counters.
pub fn estimate_intervals(
    config: CertesConfig,
    counters: &[IntervalCounters],
) -> Result<Vec<Estimate>, CertesError> {
    let mut certes = Certes::new(config)?;
    Ok(counters.iter().map(|c| certes.on_interval(c)).collect())
}

/// The model's whole-run mean beside the exact one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Σ Eq. 4 numerators / Σ transactions over the estimates.
    pub estimate_mean: Option<Nanos>,
    /// Completed plus estimated give-ups.
    pub estimate_transactions: f64,
    pub exact_mean: Option<Nanos>,
    pub exact_transactions: u64,
    /// (estimate − exact) / exact.
    pub relative_difference: Option<f64>,
}

/// The transaction-weighted mean of the estimates, which is what the whole
/// run's Eq. 4 would give, beside the exact mean.
pub fn compare(estimates: &[Estimate], exact: &ExactFigures) -> Comparison {
    let transactions = estimates.iter().fold(0.0, |n, e| n + e.transactions());
    let estimate_mean =
        super::transaction_weighted_mean(estimates).map(|mean| Nanos(mean.round() as u64));
    let exact_mean = exact.mean();
    let relative_difference = match (estimate_mean, exact_mean) {
        (Some(e), Some(x)) if x.0 > 0 => Some((e.0 as f64 - x.0 as f64) / x.0 as f64),
        _ => None,
    };
    Comparison {
        estimate_mean,
        estimate_transactions: transactions,
        exact_mean,
        exact_transactions: exact.transactions(),
        relative_difference,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: f64) -> Nanos {
        Nanos::from_secs_f64(secs)
    }

    fn grid() -> IntervalGrid {
        IntervalGrid::new(Nanos::ZERO, Nanos::from_millis(250)).unwrap()
    }

    fn linux(fto_secs: u64) -> ExactConfig {
        ExactConfig {
            clients: ClientMix::builtin("linux-6.5").unwrap(),
            frustration_timeout: Nanos::from_secs(fto_secs),
        }
    }

    /// Two SYNs dropped (at 0 s and 1 s), the third (2 s) answered; the
    /// server's last data at 2.3 s; RTT 40 ms.
    fn retried_twice() -> ConnectionObservation {
        ConnectionObservation {
            syn_arrivals: vec![s(0.0), s(1.0), s(2.0)],
            answered: Some(2),
            end: Some(s(2.3)),
            rtt: Some(Nanos::from_millis(40)),
            segments_sent: 3,
            ..Default::default()
        }
    }

    #[test]
    fn drops_accepts_and_completions_land_in_their_intervals() {
        let out = bucket(&[retried_twice()], grid(), s(3.0)).unwrap();
        assert_eq!(out.intervals.len(), 13);
        let c = &out.intervals;
        assert_eq!((c[0].dropped, c[4].dropped, c[8].dropped), (1, 1, 0));
        assert_eq!(c[8].accepted, 1);
        assert_eq!(c[9].completed, 1);
        assert_eq!(c[9].syn_to_end_sum, Nanos::from_millis(300));
        assert_eq!(c[9].rtt_sum, Nanos::from_millis(40));
        assert_eq!(c[9].segments_sent, 3);
        assert_eq!(c[9].syn_to_end_histogram.as_ref().unwrap().total(), 1);
        let totals: u64 = c.iter().map(|i| i.dropped + i.accepted + i.completed).sum();
        assert_eq!(totals, 4);
        assert_eq!(out.stats.dropped, 2);
        assert_eq!(out.stats.accepted, 1);
    }

    #[test]
    fn exact_figure_is_eq1_with_known_conn_fail() {
        let figures = exact(&[retried_twice()], grid(), s(3.0), &linux(21)).unwrap();
        let c = figures.connections[0];
        assert_eq!(c.outcome, ExactOutcome::Completed);
        assert_eq!(c.retries, 2);
        // CONN-FAIL 2 s + SYN-to-END 0.3 s + RTT 0.04 s.
        assert_eq!(c.conn_fail, Some(s(2.0)));
        assert_eq!(c.client_time, Some(s(2.34)));
        assert_eq!(c.interval, Some(9));
        assert_eq!(figures.intervals[9].completed_by_retries, vec![0, 0, 1]);
        assert_eq!(figures.mean(), Some(s(2.34)));
    }

    #[test]
    fn never_answered_gives_up_at_min_of_fto_and_profile() {
        // Linux 6.5 SYNs at 0,1,2,3,4,5,7,11,19 s; frustrated at 21 s.
        let syns: Vec<Nanos> = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 11.0, 19.0]
            .iter()
            .map(|t| s(100.0 + t))
            .collect();
        let o = ConnectionObservation {
            syn_arrivals: syns,
            ..Default::default()
        };
        let g = IntervalGrid::new(s(100.0), Nanos::from_secs(1)).unwrap();
        let counted = bucket(std::slice::from_ref(&o), g, s(130.0)).unwrap();
        assert_eq!(counted.stats.dropped, 9);
        assert_eq!(counted.stats.accepted, 0);
        let figures = exact(std::slice::from_ref(&o), g, s(130.0), &linux(21)).unwrap();
        let c = figures.connections[0];
        assert_eq!(c.outcome, ExactOutcome::GaveUp);
        assert_eq!(c.client_time, Some(s(21.0)));
        assert_eq!(c.interval, Some(21));
        assert_eq!(c.retries, 8);
        assert_eq!(figures.intervals[21].gave_up, 1);
        // FTO longer than the profile's own give-up: the profile ends it.
        let figures = exact(std::slice::from_ref(&o), g, s(300.0), &linux(600)).unwrap();
        assert_eq!(figures.connections[0].client_time, Some(s(131.0)));
        // The capture stops before the client would give up: unresolved.
        let figures = exact(std::slice::from_ref(&o), g, s(120.5), &linux(21)).unwrap();
        assert_eq!(figures.connections[0].outcome, ExactOutcome::Unresolved);
        assert_eq!((figures.unresolved, figures.transactions()), (1, 0));
        // An assumed FTO shorter than the SYNs seen: the client waited at
        // least until its last SYN.
        let figures = exact(std::slice::from_ref(&o), g, s(130.0), &linux(10)).unwrap();
        assert_eq!(figures.connections[0].client_time, Some(s(19.0)));
    }

    #[test]
    fn mixture_give_up_follows_the_matching_schedule() {
        let config = ExactConfig {
            clients: ClientMix::builtin("mix-2026").unwrap(),
            frustration_timeout: Nanos::from_secs(200),
        };
        // Windows 7 (3, 9 s; gives up at 21 s).
        let windows = [s(0.0), s(3.0), s(9.0)];
        assert_eq!(config.matching_profile(&windows).name, "windows-7");
        assert_eq!(config.give_up_wait(&windows), s(21.0));
        // Linux 3.7 (1, 3, 7 s).
        let old_linux = [s(0.0), s(1.0), s(3.0), s(7.0)];
        assert_eq!(config.matching_profile(&old_linux).name, "linux-3.7");
        // One SYN says nothing: the largest weight (macOS, 75 s).
        assert_eq!(config.matching_profile(&[s(0.0)]).name, "macos");
        assert_eq!(config.give_up_wait(&[s(0.0)]), s(75.0));
    }

    #[test]
    fn unresolved_refused_and_late_syns_are_counted_not_timed() {
        let accepted_open = ConnectionObservation {
            syn_arrivals: vec![s(0.1)],
            answered: Some(0),
            ..Default::default()
        };
        let refused = ConnectionObservation {
            syn_arrivals: vec![s(0.2), s(1.2)],
            refused: true,
            ..Default::default()
        };
        let synack_lost = ConnectionObservation {
            syn_arrivals: vec![s(0.3), s(1.3)],
            answered: Some(0),
            end: Some(s(1.5)),
            rtt: None,
            ..Default::default()
        };
        let all = [accepted_open, refused, synack_lost];
        let counted = bucket(&all, grid(), s(2.0)).unwrap();
        assert_eq!(counted.stats.dropped, 1); // the refused one's first SYN
        assert_eq!(counted.stats.accepted, 2);
        assert_eq!(counted.stats.completed, 1);
        assert_eq!(counted.stats.syns_after_answer, 1);
        assert_eq!(counted.stats.accepted_without_end, 1);
        assert_eq!(counted.stats.rtt_missing, 1);
        assert_eq!(counted.stats.refused, 1);
        let figures = exact(&all, grid(), s(2.0), &linux(21)).unwrap();
        assert_eq!(
            (
                figures.completed,
                figures.gave_up,
                figures.refused,
                figures.unresolved
            ),
            (1, 0, 1, 1)
        );
        assert_eq!(figures.connections[2].client_time, Some(s(1.2)));
    }

    #[test]
    fn bad_observations_are_named_not_panicked_on() {
        let g = grid();
        let empty = ConnectionObservation::default();
        let err = bucket(&[retried_twice(), empty], g, s(10.0)).unwrap_err();
        assert!(err.to_string().starts_with("connection 1: no SYN"), "{err}");
        let mut o = retried_twice();
        o.answered = Some(7);
        assert!(bucket(&[o], g, s(10.0))
            .unwrap_err()
            .to_string()
            .contains("index 7"));
        let mut o = retried_twice();
        o.syn_arrivals.swap(0, 1);
        assert!(matches!(
            bucket(&[o], g, s(10.0)),
            Err(ObservedError::BadObservation { .. })
        ));
        let mut o = retried_twice();
        o.end = Some(s(1.0));
        assert!(bucket(&[o], g, s(10.0))
            .unwrap_err()
            .to_string()
            .contains("before"));
        assert!(matches!(
            bucket(&[retried_twice()], g, s(2.0)),
            Err(ObservedError::AfterCaptureEnd { .. })
        ));
        let late = IntervalGrid::new(s(1.0), Nanos::from_secs(1)).unwrap();
        assert!(matches!(
            bucket(&[retried_twice()], late, s(10.0)),
            Err(ObservedError::BeforeStart { .. })
        ));
        assert!(IntervalGrid::new(Nanos::ZERO, Nanos::ZERO).is_err());
        // Two captures four years apart: refused, not allocated.
        let err = bucket(&[], g, Nanos::from_secs(4 * 365 * 86_400)).unwrap_err();
        assert!(
            matches!(err, ObservedError::TooManyIntervals { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("longer interval"));
    }

    #[test]
    fn client_times_are_exact_up_to_the_limit_then_within_the_stated_error() {
        let mut times = ClientTimes::default();
        for i in 1..=1000u64 {
            times.record(Nanos(i * 1000));
        }
        assert_eq!(times.quantile(0.5), Some(Nanos(500_000)));
        assert_eq!(times.quantile(1.0), Some(Nanos(1_000_000)));
        assert_eq!(times.relative_error(), None);
        let n = MAX_EXACT_CLIENT_TIMES as u64 + 200_000;
        let mut many = ClientTimes::default();
        let mut other = ClientTimes::default();
        for i in 1..=n {
            // Half in each, merged: the same as one store.
            if i.is_multiple_of(2) {
                many.record(Nanos(i * 1000));
            } else {
                other.record(Nanos(i * 1000));
            }
        }
        many.merge(&other);
        assert_eq!(many.len(), n);
        many.record(Nanos::ZERO);
        let error = many.relative_error().unwrap();
        assert!(error <= 0.001, "{error}");
        for q in [0.01, 0.5, 0.9, 0.99, 1.0] {
            let rank = ((q * (n + 1) as f64).ceil() as u64).clamp(1, n + 1);
            // Values are 0 and i·1000 for i in 1..=n: the rank-th smallest.
            let exact = (rank - 1) * 1000;
            let got = many.quantile(q).unwrap().0 as f64;
            assert!(
                (got - exact as f64).abs() <= error * exact as f64 + 1.0,
                "{q}: {got} vs {exact}"
            );
        }
        assert_eq!(many.quantile(0.0), Some(Nanos::ZERO));
    }

    #[test]
    fn aligned_grid_and_indices() {
        let g = IntervalGrid::aligned(Nanos(1_700_000_000_123_456_789), Nanos::from_millis(250))
            .unwrap();
        assert_eq!(g.start, Nanos(1_700_000_000_000_000_000));
        assert_eq!(g.index_of(Nanos(1_700_000_000_123_456_789)), Some(0));
        assert_eq!(g.index_of(Nanos(1_700_000_000_250_000_000)), Some(1));
        assert_eq!(g.index_of(Nanos(1)), None);
        assert_eq!(g.count_through(g.start_of(3)), 4);
    }

    /// With no drops, the model's estimate is SYN-to-END + RTT exactly, and
    /// so is the exact figure: the two agree to the nanosecond.
    #[test]
    fn no_drops_estimate_equals_exact() {
        let observations: Vec<ConnectionObservation> = (0..40)
            .map(|i| {
                let start = Nanos::from_millis(100 * i);
                ConnectionObservation {
                    syn_arrivals: vec![start],
                    answered: Some(0),
                    end: Some(start + Nanos::from_millis(20 + i % 7)),
                    rtt: Some(Nanos::from_millis(5)),
                    ..Default::default()
                }
            })
            .collect();
        let g = grid();
        let end = s(5.0);
        let counters = bucket(&observations, g, end).unwrap();
        let figures = exact(&observations, g, end, &linux(21)).unwrap();
        let config = CertesConfig::new(
            g.interval,
            ClientMix::builtin("linux-6.5").unwrap(),
            Nanos::from_secs(21),
        );
        let estimates = estimate_intervals(config, &counters.intervals).unwrap();
        let comparison = compare(&estimates, &figures);
        assert_eq!(comparison.exact_transactions, 40);
        assert_eq!(comparison.estimate_transactions, 40.0);
        let (e, x) = (
            comparison.estimate_mean.unwrap(),
            comparison.exact_mean.unwrap(),
        );
        assert!(e.0.abs_diff(x.0) <= 1, "{e} vs {x}");
        for (estimate, interval) in estimates.iter().zip(&figures.intervals) {
            assert_eq!(estimate.completed, interval.completed);
            if let (Some(e), Some(x)) = (estimate.mean, interval.mean()) {
                assert!(e.0.abs_diff(x.0) <= 1);
            }
        }
    }

    /// Clients of the linux-6.5 profile (without its ±50 ms spread) whose
    /// every SYN, first or retry, is dropped with the same probability —
    /// the model's hypothesis (Eq. 5–6) — give the exact mean within a
    /// few per cent.
    #[test]
    fn model_matches_exact_when_drops_hit_every_attempt_alike() {
        let mut profile = SynProfile::builtin("linux-6.5").unwrap();
        profile.first_gap_spread = Nanos::ZERO;
        let clients = ClientMix::single(profile.clone());
        let fto = Nanos::from_secs(21);
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut observations = Vec::new();
        for i in 0..4000u64 {
            let first = Nanos::from_millis(25 * i + 3);
            let mut syns = Vec::new();
            let mut answered = None;
            for k in 0..=profile.retransmissions() {
                let offset = profile.send_offset(k);
                if offset >= fto {
                    break;
                }
                syns.push(first + offset);
                if uniform() >= 0.3 {
                    answered = Some(k);
                    break;
                }
            }
            let end = answered.map(|k| syns[k] + Nanos::from_millis(80));
            observations.push(ConnectionObservation {
                syn_arrivals: syns,
                answered,
                end,
                rtt: Some(Nanos::from_millis(10)),
                ..Default::default()
            });
        }
        let g = grid();
        let end = s(130.0);
        let counters = bucket(&observations, g, end).unwrap();
        let config = CertesConfig::new(g.interval, clients, fto);
        let exact_config = ExactConfig::from_model(&config).unwrap();
        let figures = exact(&observations, g, end, &exact_config).unwrap();
        assert_eq!(figures.unresolved, 0);
        assert_eq!(figures.transactions(), 4000);
        let estimates = estimate_intervals(config, &counters.intervals).unwrap();
        let comparison = compare(&estimates, &figures);
        let difference = comparison.relative_difference.unwrap().abs();
        assert!(difference < 0.05, "{comparison:?}");
        let gave_up: f64 = estimates.iter().map(|e| e.gave_up).sum();
        assert!((gave_up - figures.gave_up as f64).abs() <= 0.2 * figures.gave_up as f64 + 2.0);
    }

    #[test]
    fn abandoned_accepted_connection_ends_at_the_frustration_timeout() {
        let mut observations = vec![
            ConnectionObservation {
                syn_arrivals: vec![s(0.0), s(1.0)],
                answered: Some(1),
                rtt: Some(s(0.02)),
                ..Default::default()
            },
            // Still inside its client's patience when the capture stops.
            ConnectionObservation {
                syn_arrivals: vec![s(10.0)],
                answered: Some(0),
                ..Default::default()
            },
        ];
        // Never served; its client's FIN left only at 29 s, behind the
        // retransmitted request.
        observations.push(ConnectionObservation {
            syn_arrivals: vec![s(0.0)],
            answered: Some(0),
            end: Some(s(29.0)),
            ..Default::default()
        });
        // Served at 24 s, after its client left at 21 s.
        observations.push(ConnectionObservation {
            syn_arrivals: vec![s(0.0)],
            answered: Some(0),
            end: Some(s(24.0)),
            segments_sent: 3,
            ..Default::default()
        });
        // Served in time: its END stands.
        observations.push(ConnectionObservation {
            syn_arrivals: vec![s(0.0)],
            answered: Some(0),
            end: Some(s(20.0)),
            segments_sent: 3,
            ..Default::default()
        });
        assert_eq!(end_abandoned(&mut observations, s(21.0), s(30.0)), 3);
        assert_eq!(observations[2].end, Some(s(21.0)));
        assert_eq!(observations[3].end, Some(s(21.0)));
        assert_eq!(observations[4].end, Some(s(20.0)));
        observations.truncate(2);
        assert_eq!(observations[0].end, Some(s(21.0)));
        assert_eq!(observations[1].end, None);
        let figures = exact(&observations, grid(), s(30.0), &linux(21)).unwrap();
        assert_eq!(figures.unresolved, 1);
        assert_eq!(figures.connections[0].client_time, Some(s(21.02)));
    }
}
