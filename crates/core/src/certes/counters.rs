//! The per-interval server-side measurements Certes consumes.
//!
//! Certes paper, Section 3.1 (Eq. 2–3) and Section 4: for each interval i
//! the server counts DROPPED_i (SYNs it dropped), ACCEPTED_i (SYNs it did
//! not drop) and COMPLETED_i (connections that ended), and sums the
//! SYN-to-END time and the RTT (SYN-ACK to its ACK) of the completed ones.
//!
//! **Refused SYNs (REFUSED_i, ours).** The paper's server answers every SYN
//! it does not drop with a SYN-ACK. Ours may answer with a RST instead (an
//! admission gate's "reject", a closed port): the client learns at once,
//! does not retransmit, and fails. Such a SYN is counted once, in
//! REFUSED_i, the one rule for every source (capture, gate, proxy, files):
//! * it arrived, so it is in OFFERED_i (Eq. 2) and in the drop rate's
//!   denominator (Eq. 5): the chance that a SYN — initial or retried —
//!   is dropped is DROPPED_i over every SYN that arrived;
//! * it is not in ACCEPTED_i: ACCEPTED_i feeds the accepted mix that
//!   splits COMPLETED_i over the retry classes (Eq. 12, 31), and a refused
//!   SYN opens no connection that will complete;
//! * in the model's conservation of initial SYNs its client leaves as a
//!   failure (initial SYNs = completions + give-ups + refusals), counted
//!   apart from Eq. 4's mean as the server's other failures are — never as
//!   a fast success.
//!
//! Counting a refusal in ACCEPTED_i (a RST is an answer) gets the drop rate
//! right but makes a failure a connection to complete; leaving it out of
//! both overstates the drop rate by the refused share of the SYNs.
//!
//! **Refusals by attempt (REFUSED_i^j, ours).** The paper's Eq. 6 fails
//! every retry class alike. A gate that refuses does not: the Abacus filter
//! (Abacus paper, Section 5; its assumption A4, "only new requests may be
//! rejected", relaxed in ours) rejects a SYN when no future bucket has a
//! token for its client's next retries, which falls more often on clients
//! it already dropped — behind it retries are refused at a higher rate
//! than initial SYNs in the same interval. Where the source knows each
//! refused SYN's attempt (0 the initial SYN, j its j-th retransmission; a
//! capture sees every SYN of a connection), it fills
//! `refused_by_attempt`, and the models refuse attempt j at REFUSED_i^j
//! over their own estimate of attempt j's arrivals
//! ([`IntervalCounters::accepted_shares_by_attempt`]). Where only the total
//! is known (counters files, the gate's log, a stream that predates the
//! field, a sum that does not match `refused`), every attempt is refused at
//! the interval's one rate, as before.
//!
//! **Drops by attempt (DROPPED_i^j, ours).** Eq. 6 drops every retry
//! class at the interval's one rate DR_i (Eq. 5): the paper's drops are
//! independent of the client. Behind the Abacus gate they are not (its
//! assumption A4 relaxed, as above): a client whose SYN found no token is
//! likelier to find none at its next retry, and behind a token bucket or
//! an on/off overload the drops are correlated in time the same way — a
//! first retry is dropped more often than an initial SYN of the same
//! interval. Where the source knows each dropped SYN's attempt (a capture:
//! its position among the connection's SYNs), it fills
//! `dropped_by_attempt`, and both models drop attempt j at
//! DR_i^j = DROPPED_i^j over their own estimate of attempt j's arrivals in
//! the interval ([`IntervalCounters::drop_rates_by_attempt`]): the fast
//! model's initial SYNs (OFFERED_i less the retries it expects) and the
//! retries it expects due (Eq. 13), the full model's solved R_i^j (Eq. 16)
//! — the same estimate the refusal split uses. DR_i^j is capped at 1:
//! drops of an attempt the model expected fewer arrivals of are taken from
//! every attempt's remaining arrivals in proportion, so the interval still
//! drops DROPPED_i in all (the full model). The fast model carries them to
//! its next expected arrivals of the same attempt instead
//! ([`AttemptDropRates`]: with one or two SYNs of a late attempt an
//! interval, arriving off the profile's nominal time, the hand-over took
//! failures from the late attempts in interval after interval). The
//! failed SYNs of attempt j return as attempt j + 1 (Eq. 13, 19) at
//! their own rate, and the answered ones
//! (1 − DR_i^j of the arrived) are split into accepted and refused as
//! above. Where only the total is known (counters files, the gate's log,
//! the proxy's rows, a sum that does not match `dropped`), every attempt
//! is dropped at DR_i, Eq. 6 as written. A split in proportion to the
//! model's arrivals gives back Eq. 6's rate.
//!
//! Additions beyond the paper, all optional:
//! * a histogram of the completed connections' SYN-to-END times, from which
//!   the estimator derives the distribution of client-perceived time
//!   (the paper's Conclusions; Figure 17);
//! * data segments sent and retransmitted, from which the SYN loss rate in
//!   the network can be estimated (Section 3.2.1: "the server can estimate
//!   the packet loss rate to the client from the number of TCP
//!   retransmissions").
//!
//! [`CumulativeCounters`] turns monotonically increasing counters (what a
//! kernel exports, Section 4: "global running counters") into intervals.

use super::histogram::LatencyHistogram;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// Most entries of [`IntervalCounters::refused_by_attempt`]: attempts from
/// the last one on share its entry (a Linux client sends at most
/// `tcp_syn_retries` + 1 = 7 SYNs by default).
pub const REFUSED_ATTEMPTS_CAP: usize = 16;

/// Most entries of [`IntervalCounters::dropped_by_attempt`]: attempts from
/// the last one on share its entry, as for refusals.
pub const DROPPED_ATTEMPTS_CAP: usize = 16;

/// One interval's measurements at the server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalCounters {
    /// DROPPED_i: SYNs the server dropped.
    pub dropped: u64,
    /// DROPPED_i^j: of `dropped`, those that were their connection's
    /// attempt j (0 the initial SYN), the last entry also counting every
    /// later attempt; at most [`DROPPED_ATTEMPTS_CAP`] entries. Empty when
    /// the source does not know; used only when it sums to `dropped` (see
    /// the module documentation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_by_attempt: Vec<u64>,
    /// ACCEPTED_i: SYNs the server answered with a SYN-ACK.
    pub accepted: u64,
    /// REFUSED_i: SYNs the server answered with a RST (see the module
    /// documentation); 0 when the source does not say.
    #[serde(default)]
    pub refused: u64,
    /// REFUSED_i^j: of `refused`, those that were their connection's
    /// attempt j (0 the initial SYN, j its j-th retransmission), the last
    /// entry also counting every later attempt; at most
    /// [`REFUSED_ATTEMPTS_CAP`] entries. Empty when the source does not
    /// know; used only when it sums to `refused` (see the module
    /// documentation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_by_attempt: Vec<u64>,
    /// COMPLETED_i: connections that ended (last data sent, or first FIN/RST).
    pub completed: u64,
    /// Σ SYN-to-END over the completed connections: from the accepted SYN's
    /// arrival to the end of the connection.
    pub syn_to_end_sum: Nanos,
    /// Σ RTT over the completed connections (SYN-ACK sent to its ACK).
    pub rtt_sum: Nanos,
    /// Distribution of the completed connections' SYN-to-END, if measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syn_to_end_histogram: Option<LatencyHistogram>,
    /// Data segments the server sent (for the network-loss estimate).
    #[serde(default)]
    pub segments_sent: u64,
    /// Data segments the server retransmitted.
    #[serde(default)]
    pub segments_retransmitted: u64,
}

impl IntervalCounters {
    /// The interval's completions by how long before its end they were
    /// accepted, as (SYN-to-END in nanoseconds, completions): with the
    /// SYN-to-END histogram, each bucket's share at the bucket's geometric
    /// middle (0 for a bucket starting at 0) — Eq. 12's ACCEPTED_{p,i};
    /// without it, all at the mean SYN-to-END (Eq. 31). Empty when nothing
    /// completed.
    pub fn completions_by_syn_to_end(&self) -> Vec<(f64, f64)> {
        if self.completed == 0 {
            return Vec::new();
        }
        let completed = self.completed as f64;
        match self.syn_to_end_histogram.as_ref().filter(|h| !h.is_empty()) {
            Some(histogram) => {
                let scale = completed / histogram.total() as f64;
                histogram
                    .buckets()
                    .map(|(lower, upper, count)| {
                        let middle = if lower > 0.0 {
                            (lower * upper).sqrt()
                        } else {
                            0.0
                        };
                        (middle, count as f64 * scale)
                    })
                    .collect()
            }
            None => vec![(self.syn_to_end_sum.0 as f64 / completed, completed)],
        }
    }

    /// OFFERED_LOAD_i = ACCEPTED_i + DROPPED_i (Eq. 2), plus REFUSED_i:
    /// every SYN that arrived.
    pub fn offered(&self) -> u64 {
        self.accepted + self.dropped + self.refused
    }

    /// The share of the arrived SYNs answered with a RST.
    pub fn refusal_rate(&self) -> f64 {
        match self.offered() {
            0 => 0.0,
            offered => self.refused as f64 / offered as f64,
        }
    }

    /// The share of the arrived SYNs accepted (answered with a SYN-ACK):
    /// 1 − DR_i − the refusal rate, the chance a SYN that arrives opens a
    /// connection (Eq. 6's 1 − DR_i when nothing is refused). Both models
    /// take it from here.
    pub fn accepted_share(&self) -> f64 {
        (1.0 - self.drop_rate() - self.refusal_rate()).max(0.0)
    }

    /// Counts one refused SYN that was its connection's attempt `attempt`
    /// (0 the initial SYN) in REFUSED_i and REFUSED_i^j.
    pub fn count_refused(&mut self, attempt: usize) {
        count_by_attempt(&mut self.refused_by_attempt, REFUSED_ATTEMPTS_CAP, attempt);
        self.refused += 1;
    }

    /// Counts one dropped SYN that was its connection's attempt `attempt`
    /// (0 the initial SYN) in DROPPED_i and DROPPED_i^j.
    pub fn count_dropped(&mut self, attempt: usize) {
        count_by_attempt(&mut self.dropped_by_attempt, DROPPED_ATTEMPTS_CAP, attempt);
        self.dropped += 1;
    }

    /// REFUSED_i^j when it accounts for every refused SYN; `None` when only
    /// the total is known (the uniform rule then applies).
    pub fn refused_split(&self) -> Option<&[u64]> {
        complete_split(&self.refused_by_attempt, self.refused)
    }

    /// DROPPED_i^j when it accounts for every dropped SYN; `None` when only
    /// the total is known (Eq. 6's one rate then applies).
    pub fn dropped_split(&self) -> Option<&[u64]> {
        complete_split(&self.dropped_by_attempt, self.dropped)
    }

    /// Adds `other`'s refused SYNs to this interval's: REFUSED_i always,
    /// REFUSED_i^j only while both sides know it for every refusal (a side
    /// that refused nothing knows it); otherwise the split is dropped and
    /// the sum reads as a total only.
    pub fn add_refused(&mut self, other: &IntervalCounters) {
        let known = |c: &IntervalCounters| c.refused == 0 || c.refused_split().is_some();
        let both_known = known(self) && known(other);
        add_split(
            &mut self.refused_by_attempt,
            &other.refused_by_attempt,
            both_known,
        );
        self.refused += other.refused;
    }

    /// Adds `other`'s dropped SYNs to this interval's, by the rule of
    /// [`Self::add_refused`]: DROPPED_i always, DROPPED_i^j only while both
    /// sides know it for every drop.
    pub fn add_dropped(&mut self, other: &IntervalCounters) {
        let known = |c: &IntervalCounters| c.dropped == 0 || c.dropped_split().is_some();
        let both_known = known(self) && known(other);
        add_split(
            &mut self.dropped_by_attempt,
            &other.dropped_by_attempt,
            both_known,
        );
        self.dropped += other.dropped;
    }

    /// The chance that an arrived SYN of attempt j is dropped, DR_i^j, for
    /// each attempt j of `arrivals` (a model's estimate of this interval's
    /// arrived SYNs by attempt, 0 the initial ones; the last entry also
    /// holds later attempts). Both models take their drop rates from here.
    ///
    /// Without [`Self::dropped_split`]: [`Self::drop_rate`] for every
    /// attempt, Eq. 6. With it: DROPPED_i^j over attempt j's arrivals, at
    /// most all of them; drops of an attempt the model expected fewer
    /// arrivals of are taken from every attempt's remaining arrivals in
    /// proportion, so that the dropped total stays DROPPED_i (while the
    /// arrivals hold that many). An attempt with no arrival gets DR_i.
    pub fn drop_rates_by_attempt(&self, arrivals: &[f64]) -> Vec<f64> {
        let uniform = self.drop_rate();
        let (Some(split), Some(last)) = (self.dropped_split(), arrivals.len().checked_sub(1))
        else {
            return vec![uniform; arrivals.len()];
        };
        let mut dropped = vec![0.0; arrivals.len()];
        for (attempt, &count) in split.iter().enumerate() {
            dropped[attempt.min(last)] += count as f64;
        }
        let mut unplaced = 0.0;
        for (dropped, &arrived) in dropped.iter_mut().zip(arrivals) {
            let placed = dropped.min(arrived.max(0.0));
            unplaced += *dropped - placed;
            *dropped = placed;
        }
        let spare: f64 = arrivals
            .iter()
            .zip(&dropped)
            .map(|(&arrived, &dropped)| arrived.max(0.0) - dropped)
            .sum();
        if unplaced > 0.0 && spare > 0.0 {
            let take = (unplaced / spare).min(1.0);
            for (dropped, &arrived) in dropped.iter_mut().zip(arrivals) {
                *dropped += (arrived.max(0.0) - *dropped) * take;
            }
        }
        dropped
            .iter()
            .zip(arrivals)
            .map(|(&dropped, &arrived)| {
                if arrived > 0.0 {
                    (dropped / arrived).min(1.0)
                } else {
                    uniform
                }
            })
            .collect()
    }

    /// The chance that an arrived SYN of attempt j is accepted, for each
    /// attempt j of `arrivals` (a model's estimate of this interval's
    /// arrived SYNs by attempt, 0 the initial ones; the last entry also
    /// holds later attempts). Both models take the accepted mix from here.
    ///
    /// Without [`Self::refused_split`] and [`Self::dropped_split`]:
    /// [`Self::accepted_share`] for every attempt, Eq. 6 with the one
    /// refusal rate. Otherwise attempt j keeps 1 − DR_i^j of its arrivals
    /// answered ([`Self::drop_rates_by_attempt`]), of which REFUSED_i^j
    /// are refused (at most all of them) — or, with the total only, a
    /// share of REFUSED_i in proportion to its answered SYNs, the one
    /// refusal rate of the answered ones; refusals of an attempt the model
    /// expected fewer arrivals of are taken from every attempt's accepted
    /// ones in proportion, so that the accepted total stays the interval's
    /// answered SYNs less its refusals. Refusals spread over the attempts
    /// in proportion to their arrivals give back the uniform share.
    pub fn accepted_shares_by_attempt(&self, arrivals: &[f64]) -> Vec<f64> {
        if self.refused_split().is_none() && self.dropped_split().is_none() {
            return vec![self.accepted_share(); arrivals.len()];
        }
        self.accepted_shares_with_drop_rates(arrivals, &self.drop_rates_by_attempt(arrivals))
    }

    /// [`Self::accepted_shares_by_attempt`] with attempt j dropped at
    /// `drop_rates[j]` (one per entry of `arrivals`) instead of this
    /// interval's own DR_i^j: the fast model's rates with carried drops
    /// ([`AttemptDropRates`]).
    pub fn accepted_shares_with_drop_rates(
        &self,
        arrivals: &[f64],
        drop_rates: &[f64],
    ) -> Vec<f64> {
        let uniform = self.accepted_share();
        let refused_split = self.refused_split();
        let Some(last) = arrivals.len().checked_sub(1) else {
            return Vec::new();
        };
        let answered: Vec<f64> = drop_rates
            .iter()
            .zip(arrivals)
            .map(|(&drop_rate, &arrived)| (1.0 - drop_rate) * arrived.max(0.0))
            .collect();
        let mut refused = vec![0.0; arrivals.len()];
        match refused_split {
            Some(split) => {
                for (attempt, &count) in split.iter().enumerate() {
                    refused[attempt.min(last)] += count as f64;
                }
            }
            None => {
                let answered_total: f64 = answered.iter().sum();
                if answered_total > 0.0 {
                    let rate = self.refused as f64 / answered_total;
                    for (refused, &answered) in refused.iter_mut().zip(&answered) {
                        *refused = rate * answered;
                    }
                }
            }
        }
        let mut unplaced = 0.0;
        let mut accepted: Vec<f64> = answered
            .iter()
            .zip(&refused)
            .map(|(&answered, &refused)| {
                let placed = refused.min(answered);
                unplaced += refused - placed;
                answered - placed
            })
            .collect();
        let accepted_total: f64 = accepted.iter().sum();
        if unplaced > 0.0 && accepted_total > 0.0 {
            let keep = (accepted_total - unplaced).max(0.0) / accepted_total;
            accepted.iter_mut().for_each(|a| *a *= keep);
        }
        accepted
            .iter()
            .zip(arrivals)
            .map(|(&accepted, &arrived)| {
                if arrived > 0.0 {
                    accepted / arrived
                } else {
                    uniform
                }
            })
            .collect()
    }

    /// DR_i = DROPPED_i / OFFERED_LOAD_i (Eq. 5), refused SYNs included in
    /// the offered ones; zero when nothing arrived.
    pub fn drop_rate(&self) -> f64 {
        match self.offered() {
            0 => 0.0,
            offered => self.dropped as f64 / offered as f64,
        }
    }

    /// Mean SYN-to-END of the completed connections.
    pub fn syn_to_end_mean(&self) -> Option<Nanos> {
        (self.completed > 0).then(|| Nanos(self.syn_to_end_sum.0 / self.completed))
    }

    /// Mean RTT of the completed connections.
    pub fn rtt_mean(&self) -> Option<Nanos> {
        (self.completed > 0).then(|| Nanos(self.rtt_sum.0 / self.completed))
    }
}

/// Counts one SYN of attempt `attempt` in a split by attempt of at most
/// `cap` entries (later attempts in the last one).
fn count_by_attempt(split: &mut Vec<u64>, cap: usize, attempt: usize) {
    let entry = attempt.min(cap - 1);
    if split.len() <= entry {
        split.resize(entry + 1, 0);
    }
    split[entry] += 1;
}

/// `split` when it accounts for all `total` SYNs; `None` otherwise.
fn complete_split(split: &[u64], total: u64) -> Option<&[u64]> {
    (!split.is_empty() && split.iter().sum::<u64>() == total).then_some(split)
}

/// Adds `other` to `split` entry by entry when both sides know their
/// split; otherwise clears it (the sum reads as a total only).
fn add_split(split: &mut Vec<u64>, other: &[u64], both_known: bool) {
    if !both_known {
        split.clear();
        return;
    }
    if split.len() < other.len() {
        split.resize(other.len(), 0);
    }
    for (mine, theirs) in split.iter_mut().zip(other) {
        *mine += theirs;
    }
}

/// DR_i^j for the fast model, with the drops of an attempt it expected too
/// few arrivals of carried to its next arrivals of that attempt (ours;
/// the module documentation, "Drops by attempt").
///
/// [`IntervalCounters::drop_rates_by_attempt`] divides DROPPED_i^j by the
/// model's expected arrivals of attempt j in the same interval and caps the
/// rate at 1, handing the excess to the interval's other attempts, mostly
/// its initial SYNs. At 250 ms a late attempt has one or two SYNs an
/// interval, and a real kernel sends them a fraction of a second after the
/// profile's nominal time (Linux's SYN timers run about 2.5 % late: 0.4 s
/// at 15 s), so the cap bites in many intervals. Every time it does, the
/// late attempt loses failures that its next attempt, and in the end the
/// give-ups, never see, while the initial SYNs gain failures they did not
/// have — and each attempt's failures are the next one's arrivals, so the
/// loss compounds down the attempts. Here the excess stays with its
/// attempt: it is added to DROPPED^j of the next intervals until the
/// model's arrivals of attempt j take it, fading with the model's 3-s time
/// constant (a drop no arrival takes within a few seconds leaves the
/// model). Over a run the model then fails as many SYNs of each attempt as
/// the capture dropped, where the per-interval rule fails too few of the
/// late attempts and too many initial SYNs; the price is that an interval
/// may fail more or fewer SYNs than its own DROPPED_i. Whenever the model
/// expects at least DROPPED_i^j arrivals of every attempt (nothing to
/// carry) this is the per-interval rule; without the split, Eq. 6's one
/// rate.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptDropRates {
    /// Share of the carried drops that fades each interval, in (0, 1].
    fade: f64,
    /// Drops of attempt j no expected arrival has taken yet.
    carried: Vec<f64>,
}

impl AttemptDropRates {
    /// Carried drops fade by `fade` each interval (Δ over the time
    /// constant; 1 carries nothing, the per-interval rule but for the
    /// hand-over to other attempts); a value outside (0, 1] is taken as 1.
    pub fn new(fade: f64) -> AttemptDropRates {
        let fade = if fade > 0.0 && fade <= 1.0 { fade } else { 1.0 };
        AttemptDropRates {
            fade,
            carried: Vec::new(),
        }
    }

    /// Drops of each attempt carried into the next interval.
    pub fn carried(&self) -> &[f64] {
        &self.carried
    }

    /// Feeds one interval (its counters and the model's estimate of its
    /// arrived SYNs by attempt, 0 the initial ones, the last entry also
    /// holding later attempts) and returns DR_i^j for each attempt of
    /// `arrivals`: (DROPPED_i^j + the carried drops of attempt j) over its
    /// arrivals, at most 1, the rest carried on. An attempt with no
    /// arrival gets DR_i. Without the interval's split: Eq. 6's DR_i for
    /// every attempt, and nothing is carried into or out of it.
    pub fn drop_rates(&mut self, counters: &IntervalCounters, arrivals: &[f64]) -> Vec<f64> {
        let uniform = counters.drop_rate();
        let Some(last) = arrivals.len().checked_sub(1) else {
            return Vec::new();
        };
        let split: &[u64] = if counters.dropped == 0 {
            &[]
        } else {
            match counters.dropped_split() {
                Some(split) => split,
                None => return vec![uniform; arrivals.len()],
            }
        };
        if self.carried.len() < arrivals.len() {
            self.carried.resize(arrivals.len(), 0.0);
        }
        let mut dropped = vec![0.0; arrivals.len()];
        for (attempt, &count) in split.iter().enumerate() {
            dropped[attempt.min(last)] += count as f64;
        }
        // Attempts beyond this model's last share its entry.
        for j in arrivals.len()..self.carried.len() {
            dropped[last] += self.carried[j];
            self.carried[j] = 0.0;
        }
        let keep = 1.0 - self.fade;
        let mut rates = vec![uniform; arrivals.len()];
        for ((rate, carried), (&arrived, &now)) in rates
            .iter_mut()
            .zip(self.carried.iter_mut())
            .zip(arrivals.iter().zip(&dropped))
        {
            let due = now + *carried;
            let placed = if arrived > 0.0 {
                let placed = due.min(arrived);
                *rate = placed / arrived;
                placed
            } else {
                0.0
            };
            *carried = (due - placed) * keep;
        }
        rates
    }
}

/// How long before its accept a connection's SYN arrived, as a server that
/// sees `accept()` and not the SYN estimates it from `TCP_INFO` read at
/// accept: the accept-queue wait (`tcpi_last_ack_recv`, set when the
/// handshake's final ACK created the socket) plus one handshake round trip
/// (`tcpi_rtt`, SYN-ACK to that ACK). SYN ≈ accept − wait − RTT; a client
/// that sent its request before the accept resets the wait's clock, so the
/// SYN is then placed later than it came.
pub fn syn_before_accept(queue_wait_ms: u32, rtt_us: u32) -> Nanos {
    Nanos(u64::from(queue_wait_ms) * 1_000_000 + u64::from(rtt_us) * 1_000)
}

/// Monotonic counters as a kernel or a daemon exports them; successive
/// readings become [`IntervalCounters`] by difference.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CumulativeCounters {
    pub dropped: u64,
    pub accepted: u64,
    #[serde(default)]
    pub refused: u64,
    pub completed: u64,
    pub syn_to_end_sum: Nanos,
    pub rtt_sum: Nanos,
    #[serde(default)]
    pub segments_sent: u64,
    #[serde(default)]
    pub segments_retransmitted: u64,
}

/// A cumulative counter went backwards (a restart or a wrapped counter).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cumulative counter `{counter}` went backwards from {previous} to {current}")]
pub struct CounterWentBackwards {
    pub counter: &'static str,
    pub previous: u64,
    pub current: u64,
}

impl CumulativeCounters {
    /// The interval between `previous` and `self`.
    pub fn since(
        &self,
        previous: &CumulativeCounters,
    ) -> Result<IntervalCounters, CounterWentBackwards> {
        fn delta(
            counter: &'static str,
            previous: u64,
            current: u64,
        ) -> Result<u64, CounterWentBackwards> {
            current.checked_sub(previous).ok_or(CounterWentBackwards {
                counter,
                previous,
                current,
            })
        }
        Ok(IntervalCounters {
            dropped: delta("dropped", previous.dropped, self.dropped)?,
            dropped_by_attempt: Vec::new(),
            accepted: delta("accepted", previous.accepted, self.accepted)?,
            refused: delta("refused", previous.refused, self.refused)?,
            refused_by_attempt: Vec::new(),
            completed: delta("completed", previous.completed, self.completed)?,
            syn_to_end_sum: Nanos(delta(
                "syn_to_end_sum",
                previous.syn_to_end_sum.0,
                self.syn_to_end_sum.0,
            )?),
            rtt_sum: Nanos(delta("rtt_sum", previous.rtt_sum.0, self.rtt_sum.0)?),
            syn_to_end_histogram: None,
            segments_sent: delta("segments_sent", previous.segments_sent, self.segments_sent)?,
            segments_retransmitted: delta(
                "segments_retransmitted",
                previous.segments_retransmitted,
                self.segments_retransmitted,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attempt's drops beyond the model's expected arrivals of it stay
    /// with that attempt, placed on its next arrivals and fading by the
    /// given share per interval; the per-interval rule hands them to the
    /// other attempts instead.
    #[test]
    fn attempt_drops_beyond_the_arrivals_carry_to_the_same_attempt() {
        let interval = |dropped_by_attempt: Vec<u64>, accepted: u64| IntervalCounters {
            dropped: dropped_by_attempt.iter().sum(),
            dropped_by_attempt,
            accepted,
            ..Default::default()
        };
        let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12);
        let mut rates = AttemptDropRates::new(0.5);
        // The model expects 4 arrivals of attempt 1; 6 of them were dropped.
        let first = interval(vec![2, 6], 12);
        assert!(close(
            &first.drop_rates_by_attempt(&[16.0, 4.0]),
            &[0.25, 1.0]
        ));
        assert!(close(
            &rates.drop_rates(&first, &[16.0, 4.0]),
            &[2.0 / 16.0, 1.0]
        ));
        assert!(close(rates.carried(), &[0.0, 1.0]));
        // Next: 1 drop of attempt 1 and the carried one, over 4 arrivals.
        let second = interval(vec![2, 1], 17);
        assert!(close(
            &rates.drop_rates(&second, &[16.0, 4.0]),
            &[2.0 / 16.0, 0.5]
        ));
        assert!(close(rates.carried(), &[0.0, 0.0]));
        // No arrival of attempt 1: its drops wait (at DR_i for the rate).
        let third = interval(vec![0, 4], 16);
        let uniform = third.drop_rate();
        assert!(close(
            &rates.drop_rates(&third, &[20.0, 0.0]),
            &[0.0, uniform]
        ));
        assert!(close(rates.carried(), &[0.0, 2.0]));
        // An interval that dropped nothing still takes the carried drops.
        let fourth = interval(Vec::new(), 20);
        assert!(close(&rates.drop_rates(&fourth, &[16.0, 4.0]), &[0.0, 0.5]));
        assert!(close(rates.carried(), &[0.0, 0.0]));
        // Without the split: Eq. 6 for every attempt, nothing carried.
        let total_only = IntervalCounters {
            dropped: 8,
            accepted: 12,
            ..Default::default()
        };
        let mut rates = AttemptDropRates::new(0.5);
        assert!(close(
            &rates.drop_rates(&total_only, &[16.0, 4.0]),
            &[0.4, 0.4]
        ));
        assert!(rates.carried().is_empty());
        // Whenever no attempt has more drops than arrivals: the per-interval
        // rule.
        let mut rates = AttemptDropRates::new(0.5);
        assert_eq!(
            rates.drop_rates(&second, &[16.0, 4.0]),
            second.drop_rates_by_attempt(&[16.0, 4.0])
        );
        assert!(rates.drop_rates(&second, &[]).is_empty());
    }

    #[test]
    fn eq2_and_eq5() {
        let c = IntervalCounters {
            dropped: 25,
            accepted: 75,
            ..Default::default()
        };
        assert_eq!(c.offered(), 100);
        assert_eq!(c.drop_rate(), 0.25);
        assert_eq!(IntervalCounters::default().drop_rate(), 0.0);
    }

    #[test]
    fn refused_syns_arrived_but_were_not_accepted() {
        // 20 dropped, 60 accepted, 20 refused: 100 arrived, 20 % dropped.
        let c = IntervalCounters {
            dropped: 20,
            accepted: 60,
            refused: 20,
            ..Default::default()
        };
        assert_eq!(c.offered(), 100);
        assert_eq!(c.drop_rate(), 0.2);
        assert_eq!(c.refusal_rate(), 0.2);
        assert!((c.accepted_share() - 0.6).abs() < 1e-12);
        assert_eq!(IntervalCounters::default().accepted_share(), 1.0);
        // Without the field (older files and streams) it reads as 0.
        let old: IntervalCounters = serde_json::from_str(
            r#"{"dropped":1,"accepted":2,"completed":0,"syn_to_end_sum":0,"rtt_sum":0}"#,
        )
        .unwrap();
        assert_eq!((old.refused, old.offered()), (0, 3));
    }

    /// REFUSED_i^j by hand: 10 dropped, 60 accepted, 30 refused of 100
    /// SYNs, a model expecting 60 initial SYNs and 40 retries. Both
    /// attempts keep 1 − DR = 0.9 answered.
    #[test]
    fn refusals_by_attempt_by_hand() {
        let with = |split: Vec<u64>| IntervalCounters {
            dropped: 10,
            accepted: 60,
            refused: 30,
            refused_by_attempt: split,
            ..Default::default()
        };
        let shares = |c: &IntervalCounters| c.accepted_shares_by_attempt(&[60.0, 40.0]);
        let near = |got: Vec<f64>, want: [f64; 2]| {
            assert!(
                got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-12),
                "{got:?} vs {want:?}"
            )
        };
        // The total only, or a split that does not add up: 0.6 each.
        near(shares(&with(Vec::new())), [0.6, 0.6]);
        near(shares(&with(vec![5, 5])), [0.6, 0.6]);
        // In proportion to the arrivals (18 and 12): the same.
        near(shares(&with(vec![18, 12])), [0.6, 0.6]);
        // Every refusal a retry: 54 of 60 initial accepted, 36 − 30 of 40.
        near(shares(&with(vec![0, 30])), [0.9, 0.15]);
        // Every refusal an initial SYN: 54 − 30 of 60, 36 of 40.
        near(shares(&with(vec![30])), [0.4, 0.9]);
        // Later attempts count as the last one modelled.
        near(shares(&with(vec![0, 10, 20])), [0.9, 0.15]);
        // 40 refused retries where 36 answered ones were expected: the 4
        // left over come out of every attempt's accepted (54 → 50).
        let more = IntervalCounters {
            dropped: 10,
            accepted: 50,
            refused: 40,
            refused_by_attempt: vec![0, 40],
            ..Default::default()
        };
        near(shares(&more), [50.0 / 60.0, 0.0]);
        // No attempt modelled: nothing to share.
        assert!(with(vec![0, 30]).accepted_shares_by_attempt(&[]).is_empty());
    }

    #[test]
    fn refusals_by_attempt_are_counted_capped_and_added() {
        let mut c = IntervalCounters::default();
        c.count_refused(0);
        c.count_refused(2);
        c.count_refused(99);
        assert_eq!(c.refused, 3);
        assert_eq!(c.refused_by_attempt.len(), REFUSED_ATTEMPTS_CAP);
        assert_eq!(c.refused_by_attempt[..3], [1, 0, 1]);
        assert_eq!(c.refused_by_attempt[REFUSED_ATTEMPTS_CAP - 1], 1);
        assert!(c.refused_split().is_some());
        // Adding a side that knows the split keeps it; one that does not
        // (a gate's total) drops it, and the total still adds.
        let mut sum = IntervalCounters::default();
        sum.add_refused(&c);
        sum.add_refused(&IntervalCounters::default());
        assert_eq!(sum.refused_split(), c.refused_split());
        sum.add_refused(&IntervalCounters {
            refused: 2,
            ..Default::default()
        });
        assert_eq!((sum.refused, sum.refused_split()), (5, None));
        // Serialized only when known; older records read as no split.
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"refused_by_attempt\":[1,0,1,"), "{json}");
        let back: IntervalCounters = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        let plain = serde_json::to_string(&IntervalCounters::default()).unwrap();
        assert!(!plain.contains("refused_by_attempt"), "{plain}");
    }

    /// DROPPED_i^j by hand: 30 dropped, 120 accepted, no refusal, of 150
    /// SYNs, a model expecting 100 initial SYNs and 50 retries.
    #[test]
    fn drops_by_attempt_by_hand() {
        let with = |split: Vec<u64>| IntervalCounters {
            dropped: 30,
            dropped_by_attempt: split,
            accepted: 120,
            ..Default::default()
        };
        let arrivals = [100.0, 50.0];
        let near = |got: Vec<f64>, want: [f64; 2]| {
            assert!(
                got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-12),
                "{got:?} vs {want:?}"
            )
        };
        let both = |c: &IntervalCounters| {
            (
                c.drop_rates_by_attempt(&arrivals),
                c.accepted_shares_by_attempt(&arrivals),
            )
        };
        // The total only, or a split that does not add up: Eq. 6, exactly.
        for split in [vec![], vec![0, 20], vec![10, 10, 20]] {
            let (drops, accepted) = both(&with(split));
            assert_eq!(drops, vec![0.2, 0.2]);
            assert_eq!(accepted, vec![with(vec![]).accepted_share(); 2]);
        }
        // In proportion to the arrivals (20 and 10): the same rates.
        let (drops, accepted) = both(&with(vec![20, 10]));
        assert_eq!(drops, vec![0.2, 0.2]);
        near(accepted, [0.8, 0.8]);
        // Every drop a retry: 30 of 50 retries, none of the initial SYNs.
        let (drops, accepted) = both(&with(vec![0, 30]));
        near(drops, [0.0, 0.6]);
        near(accepted, [1.0, 0.4]);
        // Every drop an initial SYN; later attempts count as the last one.
        near(both(&with(vec![30])).0, [0.3, 0.0]);
        near(both(&with(vec![0, 10, 20])).0, [0.0, 0.6]);
        // 60 dropped retries where the model expected 50: the 10 left over
        // come out of the initial SYNs' arrivals (100 of them left).
        let more = IntervalCounters {
            dropped: 60,
            dropped_by_attempt: vec![0, 60],
            accepted: 90,
            ..Default::default()
        };
        near(more.drop_rates_by_attempt(&arrivals), [0.1, 1.0]);
        near(more.accepted_shares_by_attempt(&arrivals), [0.9, 0.0]);
        // More drops than arrivals at all: every rate capped at 1.
        near(more.drop_rates_by_attempt(&[10.0, 20.0]), [1.0, 1.0]);
        // No attempt modelled: nothing to share.
        assert!(with(vec![0, 30]).drop_rates_by_attempt(&[]).is_empty());
        // Refusals with the total only under a drop split: the answered
        // SYNs (100 and 20) are refused alike, 20 of 120 — 16.7 and 3.3.
        let refused = IntervalCounters {
            dropped: 30,
            dropped_by_attempt: vec![0, 30],
            accepted: 100,
            refused: 20,
            ..Default::default()
        };
        near(
            refused.accepted_shares_by_attempt(&arrivals),
            [1.0 - 20.0 / 120.0, 0.4 * (1.0 - 20.0 / 120.0)],
        );
        // Both splits: attempt 1 answered 20, of which 20 refused.
        let both_split = IntervalCounters {
            refused_by_attempt: vec![0, 20],
            ..refused
        };
        near(both_split.accepted_shares_by_attempt(&arrivals), [1.0, 0.0]);
    }

    #[test]
    fn drops_by_attempt_are_counted_capped_added_and_serialized() {
        let mut c = IntervalCounters::default();
        c.count_dropped(0);
        c.count_dropped(1);
        c.count_dropped(1);
        c.count_dropped(40);
        assert_eq!(c.dropped, 4);
        assert_eq!(c.dropped_by_attempt.len(), DROPPED_ATTEMPTS_CAP);
        assert_eq!(c.dropped_by_attempt[..3], [1, 2, 0]);
        assert_eq!(c.dropped_by_attempt[DROPPED_ATTEMPTS_CAP - 1], 1);
        assert!(c.dropped_split().is_some());
        // Adding a side that knows the split keeps it; one that does not
        // (a gate's total) drops it, and the total still adds.
        let mut sum = IntervalCounters::default();
        sum.add_dropped(&c);
        sum.add_dropped(&c);
        sum.add_dropped(&IntervalCounters::default());
        assert_eq!(sum.dropped, 8);
        assert_eq!(sum.dropped_by_attempt[..3], [2, 4, 0]);
        assert!(sum.dropped_split().is_some());
        sum.add_dropped(&IntervalCounters {
            dropped: 3,
            ..Default::default()
        });
        assert_eq!((sum.dropped, sum.dropped_split()), (11, None));
        // A split that no longer sums (a total added by hand) is ignored.
        let mut stale = c.clone();
        stale.dropped += 1;
        assert_eq!(stale.dropped_split(), None);
        // Serialized only when known; round trip; older records read as
        // no split.
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"dropped_by_attempt\":[1,2,0,"), "{json}");
        let back: IntervalCounters = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        let plain = serde_json::to_string(&IntervalCounters::default()).unwrap();
        assert!(!plain.contains("dropped_by_attempt"), "{plain}");
        let old: IntervalCounters = serde_json::from_str(
            r#"{"dropped":3,"accepted":2,"completed":0,"syn_to_end_sum":0,"rtt_sum":0}"#,
        )
        .unwrap();
        assert!(old.dropped_by_attempt.is_empty());
        assert_eq!((old.dropped, old.dropped_split()), (3, None));
    }

    #[test]
    fn cumulative_difference_and_reset_detected() {
        let a = CumulativeCounters {
            dropped: 10,
            accepted: 100,
            completed: 90,
            syn_to_end_sum: Nanos::from_millis(900),
            rtt_sum: Nanos::from_millis(90),
            ..Default::default()
        };
        let b = CumulativeCounters {
            dropped: 15,
            accepted: 130,
            completed: 120,
            syn_to_end_sum: Nanos::from_millis(1200),
            rtt_sum: Nanos::from_millis(120),
            ..Default::default()
        };
        let i = b.since(&a).unwrap();
        assert_eq!((i.dropped, i.accepted, i.completed), (5, 30, 30));
        assert_eq!(i.syn_to_end_mean(), Some(Nanos::from_millis(10)));
        let err = a.since(&b).unwrap_err();
        assert_eq!(err.counter, "dropped");
    }
}
