//! One simulated run: clients send connection requests, a SYN filter at
//! the server's entry point decides each one, dropped requests come back
//! after their client's timeout.
//!
//! Abacus paper, Section 6: a bottleneck-free path with jitter (Eq. 2);
//! clients whose timeouts follow their profile with Eq. 1's spread; a
//! request accepted by the filter completes its handshake at once, so the
//! results reflect the filter alone. A rejected request ends (A5); a
//! request dropped at its last transmission times out at T_conn after its
//! first SYN.
//!
//! Events are SYN arrivals. First SYNs come from a sorted list; every
//! retransmission is scheduled in the event queue. The run ends when both
//! are empty, so every request has an outcome.
//!
//! Randomness: a request's client profile and its own random seed are drawn
//! from the run's generator when the request is created; the jitter and
//! timeout spread of its k-th transmission come from that seed and k. The
//! same request therefore behaves the same whichever filter runs —
//! common random numbers, so that filters and parameter values are compared
//! on identical traffic.

use crate::engine::EventQueue;
use crate::syn::metrics::{Outcome, Tally};
use crate::syn::network::Network;
use rand::Rng;
use vantage_core::admission::syn::{SynFilter, Verdict};
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;

/// What to record besides the metrics.
#[derive(Clone, Copy, Debug, Default)]
pub struct Recording {
    /// Count arrivals and verdicts in bins of this width.
    pub timeline_bin: Option<Nanos>,
    /// Keep every SYN arrival time by transmission number.
    pub arrivals_by_attempt: bool,
}

/// Counts of one timeline bin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bin {
    pub arrivals: u64,
    pub accepted: u64,
    pub dropped: u64,
    pub rejected: u64,
}

/// What a run produced.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    pub tally: Tally,
    /// SYN arrivals processed (events).
    pub events: u64,
    /// Virtual time of the last event.
    pub end: Nanos,
    /// Time of the last drop, if any (for burst convergence, Figure 5).
    pub last_drop: Option<Nanos>,
    pub timeline: Vec<Bin>,
    /// Arrival times at the server of transmission k (0 = first SYN).
    pub arrivals_by_attempt: Vec<Vec<Nanos>>,
}

struct Request {
    first_send: Nanos,
    first_arrival: Nanos,
    last_send: Nanos,
    seed: u64,
    profile: u16,
    attempt: u16,
}

/// SplitMix64: a keyed counter-based stream for per-request draws.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Uniform in [0, 1) from a key.
fn unit(key: u64) -> f64 {
    (splitmix(key) >> 11) as f64 / (1u64 << 53) as f64
}

/// Runs `filter` against requests whose first SYNs are sent at
/// `first_syns` (sorted).
pub fn simulate<R: Rng + ?Sized>(
    filter: &mut dyn SynFilter,
    clients: &ClientMix,
    network: Network,
    first_syns: &[Nanos],
    recording: Recording,
    rng: &mut R,
) -> RunResult {
    let mut requests: Vec<Request> = Vec::with_capacity(first_syns.len());
    let mut initial: Vec<(Nanos, u32)> = Vec::with_capacity(first_syns.len());
    for (id, &send) in first_syns.iter().enumerate() {
        let profile = clients.choose(rng.gen::<f64>()) as u16;
        let seed = rng.gen::<u64>();
        let arrival = send + network.one_way_delay(unit(seed));
        requests.push(Request {
            first_send: send,
            first_arrival: arrival,
            last_send: send,
            seed,
            profile,
            attempt: 0,
        });
        initial.push((arrival, id as u32));
    }
    // Jitter can reorder first SYNs; ties keep creation order.
    initial.sort_by_key(|&(at, id)| (at, id));

    let mut result = RunResult::default();
    let mut retransmissions: EventQueue<u32> = EventQueue::new();
    let mut next_initial = 0;
    loop {
        let take_initial = match (initial.get(next_initial), retransmissions.peek_time()) {
            (Some(&(at, _)), Some(retx)) => at <= retx,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let (now, id) = if take_initial {
            next_initial += 1;
            initial[next_initial - 1]
        } else {
            match retransmissions.pop() {
                Some(event) => event,
                None => break,
            }
        };
        result.events += 1;
        result.end = result.end.max(now);
        let verdict = filter.on_syn(now);
        let request = &mut requests[id as usize];
        if recording.arrivals_by_attempt {
            let k = request.attempt as usize;
            if result.arrivals_by_attempt.len() <= k {
                result.arrivals_by_attempt.resize(k + 1, Vec::new());
            }
            result.arrivals_by_attempt[k].push(now);
        }
        if let Some(width) = recording.timeline_bin {
            let bin = (now.0 / width.0.max(1)) as usize;
            if result.timeline.len() <= bin {
                result.timeline.resize(bin + 1, Bin::default());
            }
            let b = &mut result.timeline[bin];
            b.arrivals += 1;
            match verdict {
                Verdict::Accept => b.accepted += 1,
                Verdict::Drop => b.dropped += 1,
                Verdict::Reject => b.rejected += 1,
            }
        }
        let retransmitted = u32::from(request.attempt);
        match verdict {
            Verdict::Accept => result.tally.record(
                Outcome::Accepted,
                now - request.first_arrival,
                retransmitted,
            ),
            Verdict::Reject => result.tally.record(
                Outcome::Rejected,
                now - request.first_arrival,
                retransmitted,
            ),
            Verdict::Drop => {
                result.last_drop = Some(now);
                let profile = clients.profile(request.profile as usize);
                let k = request.attempt as usize;
                let key = request.seed ^ ((k as u64 + 1) << 48);
                let give_up = request.first_send + profile.give_up;
                match profile.timeout(k, unit(key)) {
                    Some(gap) if request.last_send + gap < give_up => {
                        request.last_send += gap;
                        request.attempt += 1;
                        let arrival = request.last_send + network.one_way_delay(unit(key ^ 0x5EED));
                        retransmissions.schedule(arrival, id);
                    }
                    _ => {
                        result.end = result.end.max(give_up);
                        result.tally.record(
                            Outcome::TimedOut,
                            give_up - request.first_arrival,
                            retransmitted,
                        );
                    }
                }
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use vantage_core::admission::syn::{EmptyAction, TokenBucket, TokenBucketFilter};

    fn paper_network() -> Network {
        Network {
            base_delay: Nanos::from_millis(5),
            jitter: Nanos::from_millis(5),
        }
    }

    fn drop_all() -> TokenBucketFilter {
        TokenBucketFilter::new(TokenBucket::new(0, 0.0).unwrap(), EmptyAction::Drop)
    }

    /// A request that is always dropped sends N + 1 SYNs and times out at
    /// T_conn: Windows 9x sends 4 and gives up at 45 s.
    #[test]
    fn always_dropped_request_times_out_after_its_schedule() {
        let clients = ClientMix::builtin("windows-9x-nt").unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let r = simulate(
            &mut drop_all(),
            &clients,
            paper_network(),
            &[Nanos::ZERO],
            Recording {
                arrivals_by_attempt: true,
                ..Recording::default()
            },
            &mut rng,
        );
        assert_eq!(r.events, 4);
        let s = r.tally.summary(1.0, 75.0);
        assert_eq!(s.timeouts_pct, 100.0);
        assert_eq!(s.retransmissions_mean, 3.0);
        // Delay from first arrival (0–10 ms) to give-up at 45 s.
        assert!((s.delay_mean_s - 45.0).abs() <= 0.010, "{}", s.delay_mean_s);
        assert_eq!(s.cost_mean, s.delay_mean_s + 75.0);
        // Arrivals of retransmission k near T_k (Eq. 1 and 2: within 50 + 10 ms).
        for (k, t_k) in [(1, 3.0), (2, 9.0), (3, 21.0)] {
            let at = r.arrivals_by_attempt[k][0].as_secs_f64();
            assert!((at - t_k).abs() < 0.061, "k={k}: {at}");
        }
    }

    /// Conservation: every request ends exactly once, and every SYN that
    /// reached the filter is an accept, a reject or a drop.
    #[test]
    fn every_request_ends_once() {
        let clients = ClientMix::builtin("mix-2026").unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let sends: Vec<Nanos> = (0..5000u64).map(|i| Nanos::from_millis(i * 3)).collect();
        let mut filter =
            TokenBucketFilter::new(TokenBucket::new(20, 200.0).unwrap(), EmptyAction::Drop);
        let r = simulate(
            &mut filter,
            &clients,
            paper_network(),
            &sends,
            Recording {
                timeline_bin: Some(Nanos::from_secs(1)),
                ..Recording::default()
            },
            &mut rng,
        );
        let t = &r.tally;
        assert_eq!(t.requests, 5000);
        assert_eq!(t.accepted + t.rejected + t.timed_out, 5000);
        let arrivals: u64 = r.timeline.iter().map(|b| b.arrivals).sum();
        let dropped: u64 = r.timeline.iter().map(|b| b.dropped).sum();
        assert_eq!(arrivals, r.events);
        assert_eq!(arrivals, 5000 + t.retransmissions);
        assert_eq!(dropped, t.retransmissions + t.timed_out);
    }

    #[test]
    fn same_seed_same_run() {
        let clients = ClientMix::builtin("mix-2026").unwrap();
        let sends: Vec<Nanos> = (0..2000u64).map(Nanos::from_millis).collect();
        let run = || {
            let mut filter =
                TokenBucketFilter::new(TokenBucket::new(10, 300.0).unwrap(), EmptyAction::Drop);
            let r = simulate(
                &mut filter,
                &clients,
                paper_network(),
                &sends,
                Recording::default(),
                &mut ChaCha8Rng::seed_from_u64(4),
            );
            (r.events, r.end, r.tally.summary(1.0, 75.0))
        };
        assert_eq!(run(), run());
    }
}
