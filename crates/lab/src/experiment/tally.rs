//! A live run's client records as the simulator's Section 6 metrics: a
//! completed handshake is accepted with delay first SYN → SYN-ACK; a
//! refusal (RST) is rejected and a give-up timed out, both with delay
//! first SYN → end.

use std::collections::BTreeMap;

use serde::Serialize;
use vantage_core::Nanos;
use vantage_sim::syn::metrics::{Outcome as SimOutcome, Tally};
use vantage_testbed::load::record::{ConnectionRecord, Outcome};

/// Client outcomes of one run, beside the Section 6 tally.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcomes {
    /// Scheduled connections (records).
    pub attempts: u64,
    /// Records per client outcome.
    pub by_outcome: BTreeMap<String, u64>,
    /// Handshakes completed (accepted, in the paper's terms).
    pub connected: u64,
    /// Connected, but the response did not complete.
    pub connected_not_ok: u64,
    /// Records that say nothing about admission (failed, aborted,
    /// not-started), left out of the tally.
    pub other: u64,
    /// % of attempts with a complete HTTP response.
    pub http_ok_pct: f64,
    /// Handshakes by the SYN retransmission that got in: how many, and
    /// when (first SYN → SYN-ACK) — the clients' real retransmission times.
    pub connected_after: Vec<RetransmissionTimes>,
}

/// Connections that got in with `retransmissions` SYN retransmissions.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RetransmissionTimes {
    pub retransmissions: u32,
    pub connections: u64,
    pub min_s: f64,
    pub median_s: f64,
    pub max_s: f64,
}

/// Converts client records into the simulator's [`Tally`]: a completed
/// handshake is accepted with delay first SYN → SYN-ACK; a refusal (RST)
/// rejected and a give-up timed out, with delay first SYN → end.
pub fn tally_records(records: &[ConnectionRecord]) -> (Tally, Outcomes) {
    let mut tally = Tally::default();
    let mut outcomes = Outcomes {
        attempts: records.len() as u64,
        ..Outcomes::default()
    };
    let mut ok = 0;
    let mut by_retransmissions: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for r in records {
        *outcomes
            .by_outcome
            .entry(r.outcome.name().to_string())
            .or_insert(0) += 1;
        if r.outcome == Outcome::Ok {
            ok += 1;
        }
        let retransmissions = r.syn_retransmissions.unwrap_or(0);
        let since_start =
            |t: Option<u64>| -> Option<Nanos> { Some(Nanos(t?.saturating_sub(r.start_ns?))) };
        if let Some(delay) = since_start(r.connected_ns) {
            outcomes.connected += 1;
            by_retransmissions
                .entry(retransmissions)
                .or_default()
                .push(delay.as_secs_f64());
            if r.outcome != Outcome::Ok {
                outcomes.connected_not_ok += 1;
            }
            tally.record(SimOutcome::Accepted, delay, retransmissions);
            continue;
        }
        let verdict = match r.outcome {
            Outcome::Refused | Outcome::Reset => Some(SimOutcome::Rejected),
            Outcome::TimedOut | Outcome::Frustrated => Some(SimOutcome::TimedOut),
            _ => None,
        };
        match (verdict, since_start(r.end_ns)) {
            (Some(verdict), Some(delay)) => tally.record(verdict, delay, retransmissions),
            _ => outcomes.other += 1,
        }
    }
    outcomes.http_ok_pct = 100.0 * ok as f64 / outcomes.attempts.max(1) as f64;
    for (retransmissions, mut delays) in by_retransmissions {
        delays.sort_by(f64::total_cmp);
        outcomes.connected_after.push(RetransmissionTimes {
            retransmissions,
            connections: delays.len() as u64,
            min_s: delays[0],
            median_s: delays[delays.len() / 2],
            max_s: delays[delays.len() - 1],
        });
    }
    (tally, outcomes)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(
        outcome: Outcome,
        start: u64,
        connected: Option<u64>,
        end: u64,
        retx: u32,
    ) -> ConnectionRecord {
        ConnectionRecord {
            id: 0,
            client: 0,
            scheduled_ns: start,
            start_ns: Some(start),
            connected_ns: connected,
            request_sent_ns: None,
            first_byte_ns: None,
            last_byte_ns: None,
            end_ns: Some(end),
            outcome,
            syn_retransmissions: Some(retx),
            requests_completed: 0,
            bytes_received: 0,
            local_port: None,
            error: String::new(),
        }
    }

    pub(crate) const S: u64 = 1_000_000_000;

    #[test]
    fn records_become_the_papers_metrics() {
        let records = vec![
            record(Outcome::Ok, 10 * S, Some(10 * S), 11 * S, 0),
            record(Outcome::Ok, 10 * S, Some(13 * S), 14 * S, 3),
            // Connected, then gave up waiting for the response: admitted.
            record(Outcome::Frustrated, 0, Some(2 * S), 21 * S, 2),
            record(Outcome::Refused, 5 * S, None, 5 * S + S / 2, 0),
            record(Outcome::Frustrated, 0, None, 21 * S, 8),
            ConnectionRecord::not_started(9, 0, 0, "max_concurrent"),
        ];
        let (tally, outcomes) = tally_records(&records);
        assert_eq!(outcomes.attempts, 6);
        assert_eq!(outcomes.connected, 3);
        assert_eq!(outcomes.connected_not_ok, 1);
        assert_eq!(outcomes.other, 1);
        assert_eq!(outcomes.by_outcome["frustrated"], 2);
        assert!((outcomes.http_ok_pct - 100.0 * 2.0 / 6.0).abs() < 1e-9);
        let s = tally.summary(1.0, 21.0);
        assert_eq!(s.requests, 5);
        assert_eq!(s.throughput_pct, 60.0);
        assert_eq!(s.rejects_pct, 20.0);
        assert_eq!(s.timeouts_pct, 20.0);
        // Delays 0, 3, 2, 0.5, 21.
        assert!((s.delay_mean_s - 26.5 / 5.0).abs() < 1e-6);
        assert!((s.cost_mean - (26.5 / 5.0 + 21.0 * 2.0 / 5.0)).abs() < 1e-6);
        assert!((s.retransmissions_mean - 13.0 / 5.0).abs() < 1e-9);
        assert_eq!(s.delay_p99_s, 21.0);
        let after: Vec<(u32, u64, f64)> = outcomes
            .connected_after
            .iter()
            .map(|t| (t.retransmissions, t.connections, t.median_s))
            .collect();
        assert_eq!(after, vec![(0, 1, 0.0), (2, 1, 2.0), (3, 1, 3.0)]);
    }
}
