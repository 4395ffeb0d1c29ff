//! The forward pass of rounds: a sans-IO TCP Reno sender model that tells,
//! for each data packet a sender emits, which ACK *liberated* it.
//!
//! tcpeval paper, Section 3.3: a round is an ACK and the data bytes it
//! liberates, found by simulating the receive and congestion windows (slow
//! start, congestion avoidance, fast retransmit and recovery; RFC 2001 in
//! the paper, RFC 5681 here). The model is fed the sender's own view in its
//! capture time — ACK arrivals ([`RenoSender::on_ack`]) and data departures
//! ([`RenoSender::on_send`]) — and never reads a clock.
//!
//! **Liberation** is a window edge: after each ACK the sender may have bytes
//! up to `snd_una + min(cwnd, rwnd)` outstanding; a packet ending at byte
//! `e` was liberated by the ACK after which the edge first reached `e` and
//! stayed there (a monotone stack of edges, O(log n) per packet; the
//! paper's Figure 3).
//!
//! **Retransmissions**, as in tcpeval, are classified without simulating
//! the timer: one covering `snd_una` within
//! [`RenoConfig::prompt_retransmit`] of a duplicate ACK is a fast
//! retransmit, otherwise a time-out; three duplicate ACKs followed by a late
//! retransmission is a *hidden time-out*. After a time-out the window is one
//! segment from `snd_una` (RFC 5681, Section 3.1) and re-sent data is
//! released by ACKs (go-back-N), unless a re-send of `snd_una` comes the
//! minimum RTO or more after the latest ACK: the timer fired again
//! (exponential back-off), another time-out.
//!
//! Departures, with reasons:
//! * slow start grows by bytes acknowledged, at most
//!   [`RenoConfig::slow_start_limit_segments`] per ACK (RFC 3465's L;
//!   default 2, as Linux grows against delayed ACKs); congestion avoidance
//!   counts bytes (the per-ACK rule under-grows with delayed ACKs);
//! * a retransmission after fewer than three duplicate ACKs (early
//!   retransmit, RACK), one during fast recovery above `snd_una`, or one
//!   sooner than the minimum RTO after the bytes' previous transmission is a
//!   fast retransmit — the receiver signalled the loss — so the split agrees
//!   with the sender's `TCPTimeouts` and `TCPFastRetrans` counters; one
//!   above `snd_una` outside recovery (a tail loss probe) is a time-out;
//! * the window restarts after an idle period longer than the RTO (RFC 5681,
//!   Section 4.1, Linux's default), the RTO estimated per RFC 6298 with
//!   Karn's rule;
//! * a retransmission sooner than the minimum RTO is a fast retransmit only
//!   with evidence in the trace — three duplicate ACKs, a SACK, or a
//!   duplicate ACK after a RACK reordering window (RFC 8985: RTT plus a
//!   quarter) — otherwise a repair of [`LossRepair::Unknown`] kind;
//! * a segment sent while the peer advertised a zero window is a window
//!   probe (flow control), never a loss repair;
//! * a packet sent beyond the modelled window is flagged, as tcpeval did,
//!   and the model resynchronises (the latest ACK is its liberator, the
//!   window widens to what the sender showed), so one mismatch does not flag
//!   every later packet.

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use serde::Serialize;
use vantage_core::Nanos;

/// How a lost packet was repaired (the paper's two loss categories).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossRepair {
    /// Retransmitted when the coarse-grained retransmission timer expired.
    Timeout,
    /// Retransmitted on duplicate ACKs (fast retransmit, fast recovery).
    FastRetransmit,
    /// Re-sent sooner than any retransmission timer could fire, with no
    /// evidence in the trace of what triggered it (fewer than three
    /// duplicate ACKs, no SACK, no reordering window elapsed).
    Unknown,
}

/// Inputs of the model: the sender's segment size and initial windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RenoConfig {
    /// Sender maximum segment size in bytes (SMSS).
    pub mss: u32,
    /// Initial congestion window in segments (IW; Linux and RFC 6928: 10).
    pub initial_window_segments: u32,
    /// Initial slow-start threshold in bytes; `None` is "arbitrarily high"
    /// (RFC 5681), what Linux uses.
    pub initial_ssthresh: Option<u64>,
    /// Most segments slow start adds per ACK (RFC 3465's L).
    pub slow_start_limit_segments: u32,
    /// A retransmission this soon after a duplicate ACK was triggered by it
    /// (a fast retransmit); later, by the timer.
    pub prompt_retransmit: Nanos,
    /// Lower bound of the retransmission timeout (Linux: 200 ms).
    pub min_rto: Nanos,
    /// Restart from the initial window after an idle period (RFC 5681 §4.1).
    pub restart_after_idle: bool,
}

impl Default for RenoConfig {
    fn default() -> RenoConfig {
        RenoConfig {
            mss: 1460,
            initial_window_segments: 10,
            initial_ssthresh: None,
            slow_start_limit_segments: 2,
            prompt_retransmit: Nanos::from_millis(200),
            min_rto: Nanos::from_millis(200),
            restart_after_idle: true,
        }
    }
}

/// What opened the window for a packet. Tokens are the caller's names for
/// the ACK arrivals and departures it fed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liberator {
    /// The initial window: no ACK was needed.
    InitialWindow,
    /// The arrival of this ACK.
    Ack(u32),
    /// The window set by a loss repair (the departure of this
    /// retransmission).
    LossRecovery(u32),
    /// The window restarted after an idle period.
    IdleRestart,
}

/// One ACK arriving at the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckArrival {
    /// Acknowledgement number (relative, unwrapped).
    pub ack: i64,
    /// Receive window it advertised, in bytes (scaled).
    pub window: u64,
    /// It carried data (then it is not a duplicate ACK, RFC 5681 §2).
    pub carries_data: bool,
    /// It carried SACK blocks.
    pub sack: bool,
}

/// The model's reading of one departure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SendOutcome {
    /// What released the packet; `None` for a loss-triggered retransmission.
    pub liberator: Option<Liberator>,
    /// For a loss-triggered retransmission: how the loss was detected.
    pub repair: Option<LossRepair>,
    /// The packet re-sent sequence space already sent.
    pub retransmission: bool,
    /// The packet went beyond the modelled window (then the latest ACK is
    /// taken as its liberator).
    pub beyond_window: bool,
    /// A time-out retransmission although three duplicate ACKs had arrived.
    pub hidden_timeout: bool,
    /// Sent while the peer's receive window was closed: a zero-window
    /// probe (flow control, not loss).
    pub window_probe: bool,
}

/// Counts over the model's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RenoCounters {
    pub acks: u64,
    pub duplicate_acks: u64,
    pub timeouts: u64,
    pub fast_retransmits: u64,
    /// Retransmissions sooner than any timer with no evidence of why.
    pub unknown_repairs: u64,
    /// Segments sent while the peer's window was closed.
    pub window_probes: u64,
    pub hidden_timeouts: u64,
    pub beyond_window: u64,
    pub idle_restarts: u64,
}

/// The Reno sender model of one direction of one connection.
#[derive(Clone, Debug)]
pub struct RenoSender {
    config: RenoConfig,
    mss: u64,
    una: i64,
    snd_max: i64,
    cwnd: u64,
    ssthresh: u64,
    rwnd: u64,
    last_window: Option<u64>,
    duplicate_acks: u32,
    last_duplicate_at: Option<Nanos>,
    /// A duplicate ACK since the last new ACK carried SACK blocks.
    sack_since_new_ack: bool,
    /// Bytes from here up to `snd_max` were only ever sent as window
    /// probes: sending them again when the window opens is not a repair.
    probed_from: Option<i64>,
    in_recovery: bool,
    /// `snd_una` when a segment covering it was last re-sent.
    resent_una: Option<i64>,
    /// `snd_una` of the last time-out (ssthresh is held on back-off).
    timed_out_una: Option<i64>,
    /// After a time-out, re-sent data below this is released by the window.
    go_back_until: Option<i64>,
    last_send_at: Option<Nanos>,
    last_ack_at: Option<Nanos>,
    avoidance_bytes: u64,
    smoothed_rtt: Option<Nanos>,
    rtt_variation: Nanos,
    /// Transmissions not yet passed by a new ACK, in the order sent: end,
    /// departure, whether a retransmission.
    outstanding: VecDeque<(i64, Nanos, bool)>,
    /// The same transmissions indexed by end, then departure latest first,
    /// so a re-send finds its previous transmission in O(log n) even when
    /// the record is long (bytes re-sent long after their ACK).
    outstanding_by_end: SendIndex,
    /// Every event that moved the window edge, in order.
    entries: Vec<Liberator>,
    /// Strict suffix minima of the edges after each entry, increasing from bottom
    /// to top: (edge, index of the entry).
    stack: Vec<(i64, u32)>,
    counters: RenoCounters,
}

impl RenoSender {
    /// A sender whose first unacknowledged byte is `una` (one past the SYN),
    /// facing a receive window of `initial_rwnd` bytes (the peer's SYN).
    pub fn new(config: RenoConfig, una: i64, initial_rwnd: u64) -> RenoSender {
        let mss = u64::from(config.mss.max(1));
        let cwnd = mss * u64::from(config.initial_window_segments.max(1));
        let mut sender = RenoSender {
            config,
            mss,
            una,
            snd_max: una,
            cwnd,
            ssthresh: config.initial_ssthresh.unwrap_or(u64::MAX).max(2 * mss),
            rwnd: initial_rwnd,
            last_window: None,
            duplicate_acks: 0,
            last_duplicate_at: None,
            sack_since_new_ack: false,
            probed_from: None,
            in_recovery: false,
            resent_una: None,
            timed_out_una: None,
            go_back_until: None,
            last_send_at: None,
            last_ack_at: None,
            avoidance_bytes: 0,
            smoothed_rtt: None,
            rtt_variation: Nanos::ZERO,
            outstanding: VecDeque::new(),
            outstanding_by_end: SendIndex::default(),
            entries: Vec::new(),
            stack: Vec::new(),
            counters: RenoCounters::default(),
        };
        sender.push(Liberator::InitialWindow);
        sender
    }

    /// Room for `events` more window events (ACKs, recoveries, restarts)
    /// and transmissions without regrowing; the model's readings are the
    /// same either way.
    pub fn reserve(&mut self, events: usize) {
        self.entries.reserve(events);
        self.outstanding.reserve(events);
    }

    /// Congestion window in bytes.
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// Slow-start threshold in bytes (`u64::MAX` until the first loss when
    /// no initial value was given).
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    /// First unacknowledged byte.
    pub fn snd_una(&self) -> i64 {
        self.una
    }

    /// One past the highest byte sent.
    pub fn snd_max(&self) -> i64 {
        self.snd_max
    }

    /// Whether the sender is in fast recovery.
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// The highest byte the window allows now.
    pub fn window_edge(&self) -> i64 {
        self.edge()
    }

    pub fn counters(&self) -> &RenoCounters {
        &self.counters
    }

    /// An ACK arrives at the sender at `now`; `token` names it in the
    /// [`Liberator::Ack`] of the packets it liberates.
    pub fn on_ack(&mut self, now: Nanos, token: u32, arrival: AckArrival) {
        self.counters.acks += 1;
        self.last_ack_at = Some(now);
        let ack = arrival.ack;
        if ack > self.snd_max {
            // Acknowledges bytes never seen leave: the capture missed them.
            self.snd_max = ack;
        }
        if ack > self.una {
            let newly = (ack - self.una) as u64;
            self.una = ack;
            self.sample_rtt(now, ack);
            if self.in_recovery {
                // RFC 5681 §3.2 step 6: deflate the window, leave recovery.
                self.cwnd = self.ssthresh;
                self.in_recovery = false;
            } else if self.cwnd < self.ssthresh {
                let limit = u64::from(self.config.slow_start_limit_segments.max(1)) * self.mss;
                self.cwnd = self.cwnd.saturating_add(newly.min(limit));
            } else {
                self.avoidance_bytes += newly;
                if self.avoidance_bytes >= self.cwnd {
                    self.avoidance_bytes -= self.cwnd;
                    self.cwnd = self.cwnd.saturating_add(self.mss);
                }
            }
            self.duplicate_acks = 0;
            self.sack_since_new_ack = false;
            self.resent_una = None;
            self.timed_out_una = None;
            if self.go_back_until.is_some_and(|until| self.una >= until) {
                self.go_back_until = None;
            }
        } else if ack == self.una
            && !arrival.carries_data
            && self.una < self.snd_max
            && self.last_window == Some(arrival.window)
        {
            self.counters.duplicate_acks += 1;
            self.duplicate_acks += 1;
            self.sack_since_new_ack |= arrival.sack;
            self.last_duplicate_at = Some(now);
            if self.duplicate_acks == 3 && !self.in_recovery {
                self.enter_recovery();
            } else if self.in_recovery && self.duplicate_acks > 3 {
                self.cwnd = self.cwnd.saturating_add(self.mss);
            }
        }
        self.rwnd = arrival.window;
        self.last_window = Some(arrival.window);
        self.push(Liberator::Ack(token));
    }

    /// The sender emits sequence space `[start, end)` at `now`; `token`
    /// names the departure in [`Liberator::LossRecovery`].
    pub fn on_send(&mut self, now: Nanos, token: u32, start: i64, end: i64) -> SendOutcome {
        let mut outcome = SendOutcome::default();
        if end <= start {
            return outcome;
        }
        if self.rwnd == 0 && start >= self.una {
            // The peer's window is closed: a zero-window probe, released by
            // the persist timer, not by loss.
            outcome.window_probe = true;
            outcome.retransmission = start < self.snd_max;
            if end > self.snd_max {
                self.probed_from.get_or_insert(start.max(self.snd_max));
            }
            self.counters.window_probes += 1;
            outcome.liberator = self.entries.last().copied();
        } else if self
            .probed_from
            .is_some_and(|from| start >= from && start < self.snd_max)
        {
            // The window opened: the probed bytes go out with new data.
            self.probed_from = None;
            let (liberator, beyond) = self.liberator_of(end);
            outcome.liberator = Some(liberator);
            outcome.beyond_window = beyond;
        } else if start < self.snd_max {
            outcome.retransmission = true;
            let covers_una = start <= self.una && end > self.una;
            // After a time-out the window releases re-sent data as ACKs
            // arrive; a re-send of `snd_una` the minimum RTO or more after
            // the latest ACK was released by the timer again (back-off).
            let timer_again = covers_una
                && self
                    .last_ack_at
                    .is_some_and(|at| now - at >= self.config.min_rto);
            let going_back = self.go_back_until.is_some_and(|until| start < until) && !timer_again;
            let repeated = covers_una && self.resent_una == Some(self.una);
            // No retransmission timer fires sooner than the minimum RTO
            // after the bytes' previous transmission: a re-send before that
            // was signalled by the receiver (duplicate ACKs, SACK, RACK).
            let previous_send = self.previous_send_of(start);
            let before_any_timeout =
                previous_send.is_some_and(|sent_at| now - sent_at < self.config.min_rto);
            // What the trace shows of the receiver signalling the loss:
            // three duplicate ACKs (RFC 5681), SACK (RFC 6675), or a
            // duplicate ACK once a reordering window of a quarter RTT has
            // passed beyond the RTT since the original left (RACK, RFC 8985).
            let rack_window_passed = match (previous_send, self.smoothed_rtt) {
                (Some(sent_at), Some(srtt)) => now - sent_at >= srtt + Nanos(srtt.0 / 4),
                _ => false,
            };
            let evidence = self.in_recovery
                || self.duplicate_acks >= 3
                || (self.duplicate_acks >= 1 && (self.sack_since_new_ack || rack_window_passed));
            let signalled = if evidence {
                LossRepair::FastRetransmit
            } else {
                LossRepair::Unknown
            };
            let repair = if going_back && !repeated {
                None
            } else if covers_una {
                if repeated && !before_any_timeout {
                    Some(LossRepair::Timeout)
                } else if (self.duplicate_acks >= 1 && self.prompt(now)) || before_any_timeout {
                    Some(signalled)
                } else {
                    if self.duplicate_acks >= 3 {
                        outcome.hidden_timeout = true;
                        self.counters.hidden_timeouts += 1;
                    }
                    Some(LossRepair::Timeout)
                }
            } else if start > self.una && (self.in_recovery || before_any_timeout) {
                Some(signalled)
            } else if start > self.una {
                Some(LossRepair::Timeout)
            } else {
                // Starts below snd_una: re-sends acknowledged bytes; the
                // uncovered rest is released like new data.
                None
            };
            if covers_una {
                self.resent_una = Some(self.una);
            }
            match repair {
                Some(LossRepair::Timeout) => {
                    self.counters.timeouts += 1;
                    if covers_una {
                        self.on_timeout(token);
                    }
                    outcome.repair = Some(LossRepair::Timeout);
                }
                Some(kind @ (LossRepair::FastRetransmit | LossRepair::Unknown)) => {
                    // Either way the receiver, not the timer, prompted it:
                    // the window follows fast recovery.
                    if kind == LossRepair::FastRetransmit {
                        self.counters.fast_retransmits += 1;
                    } else {
                        self.counters.unknown_repairs += 1;
                    }
                    if covers_una && !self.in_recovery {
                        self.enter_recovery();
                        self.push(Liberator::LossRecovery(token));
                    }
                    outcome.repair = Some(kind);
                }
                None => {
                    let (liberator, beyond) = self.liberator_of(end);
                    outcome.liberator = Some(liberator);
                    outcome.beyond_window = beyond;
                }
            }
        } else {
            self.restart_if_idle(now);
            let (liberator, beyond) = self.liberator_of(end);
            outcome.liberator = Some(liberator);
            outcome.beyond_window = beyond;
        }
        if outcome.beyond_window {
            self.counters.beyond_window += 1;
        }
        self.snd_max = self.snd_max.max(end);
        self.last_send_at = Some(now);
        self.outstanding
            .push_back((end, now, outcome.retransmission));
        self.outstanding_by_end.insert((end, Reverse(now)));
        outcome
    }

    fn edge(&self) -> i64 {
        let window = self.cwnd.min(self.rwnd).min(i64::MAX as u64 / 2);
        self.una.saturating_add(window as i64)
    }

    fn prompt(&self, now: Nanos) -> bool {
        self.last_duplicate_at
            .is_some_and(|at| now - at <= self.config.prompt_retransmit)
    }

    fn flight(&self) -> u64 {
        (self.snd_max - self.una).max(0) as u64
    }

    /// RFC 5681 §3.2 steps 2–3.
    fn enter_recovery(&mut self) {
        self.ssthresh = (self.flight() / 2).max(2 * self.mss);
        self.cwnd = self.ssthresh + u64::from(self.duplicate_acks.max(1)) * self.mss;
        self.in_recovery = true;
    }

    /// RFC 5681 §3.1, equation (4) and the loss window of one segment.
    fn on_timeout(&mut self, token: u32) {
        if self.timed_out_una != Some(self.una) {
            self.ssthresh = (self.flight() / 2).max(2 * self.mss);
        }
        self.timed_out_una = Some(self.una);
        self.cwnd = self.mss;
        self.in_recovery = false;
        self.duplicate_acks = 0;
        self.avoidance_bytes = 0;
        self.go_back_until = Some(self.snd_max);
        self.push(Liberator::LossRecovery(token));
    }

    fn restart_if_idle(&mut self, now: Nanos) {
        if !self.config.restart_after_idle || self.una < self.snd_max {
            return;
        }
        let Some(last) = self.last_send_at else {
            return;
        };
        if now - last > self.rto() {
            let initial = self.mss * u64::from(self.config.initial_window_segments.max(1));
            if self.cwnd > initial {
                self.cwnd = initial;
                self.counters.idle_restarts += 1;
                self.push(Liberator::IdleRestart);
            }
        }
    }

    /// RFC 6298: SRTT + 4·RTTVAR, at least the minimum; 1 s before any
    /// sample.
    fn rto(&self) -> Nanos {
        match self.smoothed_rtt {
            Some(srtt) => (srtt + self.rtt_variation.saturating_mul(4)).max(self.config.min_rto),
            None => Nanos::from_secs(1).max(self.config.min_rto),
        }
    }

    /// When the segment holding byte `start` was last sent: among the
    /// unacknowledged transmissions, those of the segment with the smallest
    /// end beyond `start`, the latest.
    fn previous_send_of(&self, start: i64) -> Option<Nanos> {
        // Every key of end `start` sorts at or before this one.
        let after_start = (start, Reverse(Nanos::ZERO));
        let found = self
            .outstanding_by_end
            .first_after(after_start)
            .map(|(_, Reverse(sent_at))| sent_at);
        #[cfg(test)]
        assert_eq!(
            found,
            self.previous_send_by_scan(start),
            "index and record disagree"
        );
        found
    }

    /// The definition [`RenoSender::previous_send_of`] indexes: a scan of
    /// every unacknowledged transmission. Tests check the index against it.
    #[cfg(test)]
    fn previous_send_by_scan(&self, start: i64) -> Option<Nanos> {
        let end = self
            .outstanding
            .iter()
            .map(|&(end, _, _)| end)
            .filter(|&end| end > start)
            .min()?;
        self.outstanding
            .iter()
            .filter(|&&(e, _, _)| e == end)
            .map(|&(_, sent_at, _)| sent_at)
            .max()
    }

    /// Removes one transmission from [`RenoSender::outstanding_by_end`].
    fn forget_departure(&mut self, end: i64, sent_at: Nanos) {
        self.outstanding_by_end.remove((end, Reverse(sent_at)));
    }

    /// Takes an RTT sample from the newest segment `ack` covers, unless it
    /// (or any segment the ACK covers) was re-sent (Karn's rule).
    fn sample_rtt(&mut self, now: Nanos, ack: i64) {
        let mut newest = None;
        let mut resent = false;
        while let Some(&(end, sent_at, retransmission)) = self.outstanding.front() {
            if end > ack {
                break;
            }
            resent |= retransmission;
            newest = Some(sent_at);
            self.outstanding.pop_front();
            self.forget_departure(end, sent_at);
        }
        let Some(sent_at) = newest else {
            return;
        };
        if resent {
            return;
        }
        let sample = now - sent_at;
        match self.smoothed_rtt {
            None => {
                self.smoothed_rtt = Some(sample);
                self.rtt_variation = Nanos(sample.0 / 2);
            }
            Some(srtt) => {
                let deviation = if srtt > sample {
                    srtt - sample
                } else {
                    sample - srtt
                };
                self.rtt_variation = Nanos((3 * self.rtt_variation.0 + deviation.0) / 4);
                self.smoothed_rtt = Some(Nanos((7 * srtt.0 + sample.0) / 8));
            }
        }
    }

    /// Records the window edge after an event; keeps the stack of strict
    /// suffix minima of edges (increasing from bottom to top).
    fn push(&mut self, liberator: Liberator) {
        let edge = self.edge();
        let index = self.entries.len() as u32;
        self.entries.push(liberator);
        while self.stack.last().is_some_and(|&(top, _)| top >= edge) {
            self.stack.pop();
        }
        self.stack.push((edge, index));
    }

    /// The event that released a packet ending at `end`, and whether it was
    /// beyond the window (then the window is widened to it).
    fn liberator_of(&mut self, end: i64) -> (Liberator, bool) {
        let below = suffix_partition(&self.stack, end);
        if below == 0 {
            return (self.entries[0], false);
        }
        let last_below = self.stack[below - 1].1 as usize;
        if last_below + 1 < self.entries.len() {
            return (self.entries[last_below + 1], false);
        }
        // Beyond the window: the latest event released it; resynchronise.
        // The latest entry is the top of the stack, whose edge grows.
        let needed = (end - self.una).max(0) as u64;
        self.cwnd = self.cwnd.max(needed);
        self.stack[below - 1].0 = end;
        (self.entries[last_below], true)
    }
}

/// A transmission's key in [`SendIndex`]: its end, then its departure,
/// latest first.
type SendKey = (i64, Reverse<Nanos>);

/// A multiset of [`SendKey`]s, each with its count. New data leaves in key
/// order (each end beyond the last), so those keys are appended to a sorted
/// deque and leave it from the front as ACKs pass them, both O(1); only
/// keys arriving out of order (re-sends) go to a tree, O(log n) each.
#[derive(Clone, Debug, Default)]
struct SendIndex {
    in_order: VecDeque<(SendKey, u32)>,
    out_of_order: BTreeMap<SendKey, u32>,
}

impl SendIndex {
    fn insert(&mut self, key: SendKey) {
        match self.in_order.back_mut() {
            Some((last, count)) if *last == key => *count += 1,
            Some((last, _)) if *last > key => *self.out_of_order.entry(key).or_default() += 1,
            _ => self.in_order.push_back((key, 1)),
        }
    }

    /// Removes one copy of `key`, if there is one. Transmissions leave in
    /// the order sent, so a key of the deque is nearly always its front.
    fn remove(&mut self, key: SendKey) {
        if let Some((front, count)) = self.in_order.front_mut() {
            if *front == key {
                *count -= 1;
                if *count == 0 {
                    self.in_order.pop_front();
                }
                return;
            }
        }
        if let Some(count) = self.out_of_order.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                self.out_of_order.remove(&key);
            }
            return;
        }
        let at = self.in_order.partition_point(|&(k, _)| k < key);
        if let Some((k, count)) = self.in_order.get_mut(at) {
            if *k == key {
                *count -= 1;
                if *count == 0 {
                    self.in_order.remove(at);
                }
            }
        }
    }

    /// The smallest key above `bound`.
    fn first_after(&self, bound: SendKey) -> Option<SendKey> {
        let at = self.in_order.partition_point(|&(k, _)| k <= bound);
        let in_order = self.in_order.get(at).map(|&(k, _)| k);
        let out_of_order = self
            .out_of_order
            .range((Bound::Excluded(bound), Bound::Unbounded))
            .next()
            .map(|(&k, _)| k);
        match (in_order, out_of_order) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How many keys it holds, counting repeats.
    #[cfg(test)]
    fn len(&self) -> usize {
        let counts = self.in_order.iter().map(|&(_, count)| count);
        counts
            .chain(self.out_of_order.values().copied())
            .map(|count| count as usize)
            .sum()
    }
}

/// How many stack entries have an edge below `end` (the stack's edges
/// increase): a galloping search from the top, since a packet is nearly
/// always released by one of the latest events.
fn suffix_partition(stack: &[(i64, u32)], end: i64) -> usize {
    let mut high = stack.len();
    let mut step = 1;
    // Invariant: every entry at `high` or above has an edge of at least
    // `end`.
    loop {
        let low = high.saturating_sub(step);
        if low == 0 || stack[low].0 < end {
            return low + stack[low..high].partition_point(|&(edge, _)| edge < end);
        }
        high = low;
        step *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: i64 = 1000;

    fn config(initial_window: u32) -> RenoConfig {
        RenoConfig {
            mss: MSS as u32,
            initial_window_segments: initial_window,
            initial_ssthresh: None,
            slow_start_limit_segments: 1,
            prompt_retransmit: Nanos::from_millis(10),
            min_rto: Nanos::from_millis(200),
            restart_after_idle: true,
        }
    }

    fn ms(value: u64) -> Nanos {
        Nanos::from_millis(value)
    }

    /// Segment `n` (1-based) covers `[1 + (n-1)·MSS, 1 + n·MSS)`.
    fn segment(n: i64) -> (i64, i64) {
        (1 + (n - 1) * MSS, 1 + n * MSS)
    }

    fn ack_of(n: i64) -> AckArrival {
        AckArrival {
            ack: 1 + n * MSS,
            window: 1 << 30,
            carries_data: false,
            sack: false,
        }
    }

    fn send(sender: &mut RenoSender, now: Nanos, n: i64) -> SendOutcome {
        let (start, end) = segment(n);
        sender.on_send(now, 1000 + n as u32, start, end)
    }

    /// A connection whose bytes are sent over and over again long after
    /// they were acknowledged (copies of one trace merged into one
    /// connection): nothing new is acknowledged, so every transmission
    /// stays in the model's record, which the index by end must follow
    /// (every lookup is checked against a scan of the record).
    #[test]
    fn the_index_of_previous_sends_follows_a_record_that_never_shrinks() {
        let mut sender = RenoSender::new(config(10), 1, 1 << 30);
        for n in 1..=10 {
            send(&mut sender, ms(0), n);
        }
        sender.on_ack(ms(50), 10, ack_of(10));
        let copies = 200;
        for copy in 1..=copies {
            for n in 1..=10 {
                let outcome = send(&mut sender, ms(1000 * copy + n as u64), n);
                assert!(outcome.retransmission);
            }
            sender.on_ack(ms(1000 * copy + 50), 10, ack_of(10));
        }
        assert_eq!(sender.outstanding.len(), 10 * copies as usize);
        assert_eq!(sender.outstanding_by_end.len(), sender.outstanding.len());
    }

    #[test]
    fn slow_start_doubles_the_window_every_round() {
        let mut sender = RenoSender::new(config(2), 1, 1 << 30);
        let mut sent = 0;
        let mut now = 0;
        let mut round_sizes = Vec::new();
        let mut round = vec![];
        // Round 1: the initial window.
        for _ in 0..2 {
            sent += 1;
            let outcome = send(&mut sender, ms(now), sent);
            assert_eq!(outcome.liberator, Some(Liberator::InitialWindow));
            assert!(!outcome.beyond_window);
            round.push(sent);
        }
        for _ in 0..3 {
            round_sizes.push(round.len());
            now += 100;
            let mut next = vec![];
            for &acked in &round {
                sender.on_ack(ms(now), acked as u32, ack_of(acked));
                // Each ACK of a full segment liberates two more.
                for _ in 0..2 {
                    sent += 1;
                    let outcome = send(&mut sender, ms(now), sent);
                    assert_eq!(outcome.liberator, Some(Liberator::Ack(acked as u32)));
                    assert!(!outcome.beyond_window, "segment {sent}");
                    next.push(sent);
                }
            }
            round = next;
        }
        assert_eq!(round_sizes, vec![2, 4, 8]);
        assert_eq!(sender.cwnd(), 16 * MSS as u64);
        // A 17th segment in flight would exceed the window.
        let mut probe = sender.clone();
        assert!(send(&mut probe, ms(now), sent + 1).beyond_window);
    }

    #[test]
    fn congestion_avoidance_adds_one_segment_per_round_trip() {
        let mut cfg = config(4);
        cfg.initial_ssthresh = Some(4 * MSS as u64);
        let mut sender = RenoSender::new(cfg, 1, 1 << 30);
        let mut sent = 0;
        for _ in 0..4 {
            sent += 1;
            send(&mut sender, ms(0), sent);
        }
        let mut acked = 0;
        let mut windows = vec![sender.cwnd()];
        for round in 1..=3u64 {
            let in_flight = sent - acked;
            for _ in 0..in_flight {
                acked += 1;
                sender.on_ack(ms(100 * round), acked as u32, ack_of(acked));
                while sender.window_edge() >= segment(sent + 1).1 {
                    sent += 1;
                    let outcome = send(&mut sender, ms(100 * round), sent);
                    assert_eq!(outcome.liberator, Some(Liberator::Ack(acked as u32)));
                }
            }
            windows.push(sender.cwnd());
        }
        assert_eq!(
            windows,
            vec![4000, 5000, 6000, 7000],
            "one segment per window of ACKed bytes"
        );
    }

    #[test]
    fn three_duplicate_acks_trigger_fast_retransmit_and_halve_the_window() {
        let mut sender = RenoSender::new(config(10), 1, 1 << 30);
        for n in 1..=10 {
            send(&mut sender, ms(0), n);
        }
        // Segment 2 is lost: the ACK of 1, then three duplicates.
        sender.on_ack(ms(100), 1, ack_of(1));
        for n in 11..=12 {
            // The ACK of segment 1 opened two more (slow start).
            assert_eq!(
                send(&mut sender, ms(100), n).liberator,
                Some(Liberator::Ack(1))
            );
        }
        let flight = (sender.snd_max() - sender.snd_una()) as u64;
        for token in 2..=4 {
            sender.on_ack(ms(101), token, ack_of(1));
        }
        assert!(sender.in_recovery());
        assert_eq!(sender.ssthresh(), flight / 2);
        assert_eq!(sender.cwnd(), flight / 2 + 3 * MSS as u64);
        let retransmission = send(&mut sender, ms(101), 2);
        assert!(retransmission.retransmission);
        assert_eq!(retransmission.repair, Some(LossRepair::FastRetransmit));
        assert_eq!(retransmission.liberator, None);
        assert!(!retransmission.hidden_timeout);
        // The ACK of everything ends recovery with the halved window.
        sender.on_ack(ms(200), 5, ack_of(12));
        assert!(!sender.in_recovery());
        assert_eq!(sender.cwnd(), flight / 2);
        assert_eq!(sender.counters().fast_retransmits, 1);
        assert_eq!(sender.counters().duplicate_acks, 3);
    }

    #[test]
    fn a_time_out_resets_the_window_to_one_segment_and_goes_back() {
        let mut sender = RenoSender::new(config(4), 1, 1 << 30);
        for n in 1..=4 {
            send(&mut sender, ms(0), n);
        }
        // No ACK at all: the timer fires after 1 s.
        let retransmission = send(&mut sender, ms(1000), 1);
        assert_eq!(retransmission.repair, Some(LossRepair::Timeout));
        assert_eq!(sender.cwnd(), MSS as u64);
        assert_eq!(sender.ssthresh(), 2 * MSS as u64);
        // Its ACK opens the window to two segments: segments 2 and 3 are
        // re-sent because the window allows it, not because of a loss.
        sender.on_ack(ms(1100), 7, ack_of(1));
        for n in 2..=3 {
            let outcome = send(&mut sender, ms(1100), n);
            assert!(outcome.retransmission);
            assert_eq!(outcome.repair, None);
            assert_eq!(outcome.liberator, Some(Liberator::Ack(7)));
            assert!(!outcome.beyond_window);
        }
        // Segment 4 does not fit yet.
        let mut probe = sender.clone();
        assert!(send(&mut probe, ms(1100), 4).beyond_window);
        assert_eq!(sender.counters().timeouts, 1);
    }

    #[test]
    fn a_late_retransmission_after_three_duplicates_is_a_hidden_time_out() {
        let mut sender = RenoSender::new(config(10), 1, 1 << 30);
        for n in 1..=6 {
            send(&mut sender, ms(0), n);
        }
        sender.on_ack(ms(100), 1, ack_of(1));
        for token in 2..=4 {
            sender.on_ack(ms(101), token, ack_of(1));
        }
        let retransmission = send(&mut sender, ms(900), 2);
        assert_eq!(retransmission.repair, Some(LossRepair::Timeout));
        assert!(retransmission.hidden_timeout);
        assert_eq!(sender.cwnd(), MSS as u64);
        assert_eq!(sender.counters().hidden_timeouts, 1);
    }

    #[test]
    fn an_ack_that_covers_part_of_a_round_releases_only_what_fits() {
        // The paper's Figure 3, round 4: a window of five with two packets
        // still in flight releases three.
        let mut cfg = config(5);
        cfg.initial_ssthresh = Some(5 * MSS as u64);
        let mut sender = RenoSender::new(cfg, 1, 1 << 30);
        for n in 1..=4 {
            send(&mut sender, ms(0), n);
        }
        sender.on_ack(ms(100), 9, ack_of(2));
        let mut released = 0;
        for n in 5..=8 {
            let mut probe = sender.clone();
            if !send(&mut probe, ms(100), n).beyond_window {
                send(&mut sender, ms(100), n);
                released += 1;
            }
        }
        assert_eq!(released, 3);
    }

    #[test]
    fn a_packet_beyond_the_window_is_flagged_and_the_model_follows_the_sender() {
        let mut sender = RenoSender::new(config(2), 1, 1 << 30);
        send(&mut sender, ms(0), 1);
        send(&mut sender, ms(0), 2);
        let third = send(&mut sender, ms(0), 3);
        assert!(third.beyond_window);
        assert_eq!(third.liberator, Some(Liberator::InitialWindow));
        // Resynchronised: the window now covers three segments.
        assert_eq!(sender.cwnd(), 3 * MSS as u64);
        assert_eq!(sender.counters().beyond_window, 1);
    }

    #[test]
    fn the_receive_window_limits_the_edge() {
        let mut sender = RenoSender::new(config(10), 1, 2 * MSS as u64);
        send(&mut sender, ms(0), 1);
        send(&mut sender, ms(0), 2);
        assert!(sender.clone().on_send(ms(0), 3, 2001, 3001).beyond_window);
        sender.on_ack(
            ms(50),
            4,
            AckArrival {
                ack: 1 + MSS,
                window: 2 * MSS as u64,
                carries_data: false,
                sack: false,
            },
        );
        assert_eq!(
            send(&mut sender, ms(50), 3).liberator,
            Some(Liberator::Ack(4))
        );
    }

    #[test]
    fn the_window_restarts_after_an_idle_period() {
        let mut sender = RenoSender::new(config(2), 1, 1 << 30);
        send(&mut sender, ms(0), 1);
        send(&mut sender, ms(0), 2);
        sender.on_ack(ms(100), 1, ack_of(1));
        sender.on_ack(ms(100), 2, ack_of(2));
        assert_eq!(sender.cwnd(), 4 * MSS as u64);
        // Five seconds later the window is back to two segments.
        assert!(!send(&mut sender, ms(5000), 3).beyond_window);
        assert_eq!(sender.cwnd(), 2 * MSS as u64);
        assert_eq!(sender.counters().idle_restarts, 1);
        assert!(!send(&mut sender, ms(5000), 4).beyond_window);
        assert!(send(&mut sender, ms(5000), 5).beyond_window);
    }
}
