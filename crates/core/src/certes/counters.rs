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

/// One interval's measurements at the server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalCounters {
    /// DROPPED_i: SYNs the server dropped.
    pub dropped: u64,
    /// ACCEPTED_i: SYNs the server answered with a SYN-ACK.
    pub accepted: u64,
    /// REFUSED_i: SYNs the server answered with a RST (see the module
    /// documentation); 0 when the source does not say.
    #[serde(default)]
    pub refused: u64,
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
            accepted: delta("accepted", previous.accepted, self.accepted)?,
            refused: delta("refused", previous.refused, self.refused)?,
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
