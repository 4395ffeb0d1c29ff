//! A response leaving the server: TCP slow start in whole rounds, losses
//! recovered by retransmission timeout (Certes paper, Section 4, Figure 14:
//! the kernel sends the data after the application's `writev()` returns;
//! Section 3, Eq. 1: the transaction ends for the client when the last data
//! packet arrives).
//!
//! Model, per response of `segments` MSS-sized segments:
//! * the server sends `cwnd` segments at once (a round), lost segments first
//!   (selective acknowledgement), then new ones;
//! * when no segment of a round is lost, the round's acknowledgements return
//!   one RTT later and the next round starts; `cwnd` doubles in slow start
//!   and grows by one above `ssthresh` (RFC 5681);
//! * when any segment of a round is lost, the next round starts one RTO
//!   after the round was sent (doubling on consecutive timeouts), with
//!   `ssthresh = max(cwnd/2, 2)` and `cwnd = 1`.
//!
//! Departures, with reasons: there is no fast retransmit or tail-loss probe
//! (web responses of a few segments rarely produce three duplicate
//! acknowledgements, and the paper's 2001 kernel had no tail-loss probe);
//! there is no bandwidth limit, the server's CPU is the bottleneck. The
//! window persists across the responses of a persistent connection, since
//! the gap between them (one RTT plus service) is shorter than an RTO
//! (Linux resets it only after an idle RTO).
//!
//! END — the server's end of the transaction (Section 4: "whichever occurs
//! first: the last data packet is sent from the server to the client or the
//! first arrival/transmission of a TCP RST or FIN") — is the first
//! transmission of the response's last segment: the server's FIN rides on it
//! for HTTP/1.0. If a segment of the last round is lost, the client gets the
//! whole response only after its retransmission, later than END plus one
//! RTT; that extra time is part of the client-perceived time that no
//! server-side counter of the paper sees.

use super::network::ClientPath;
use rand::Rng;
use vantage_core::Nanos;

/// Largest congestion window, in segments (keeps the doubling finite).
const CWND_CAP: u32 = 1 << 16;

/// A connection's congestion state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub cwnd: u32,
    pub ssthresh: u32,
}

impl Window {
    /// A fresh connection's window: `initial` segments, no threshold yet.
    pub fn initial(initial: u32) -> Window {
        Window {
            cwnd: initial.max(1),
            ssthresh: u32::MAX,
        }
    }

    fn grow(&mut self) {
        self.cwnd = if self.cwnd < self.ssthresh {
            (self.cwnd * 2).min(self.ssthresh).min(CWND_CAP)
        } else {
            (self.cwnd + 1).min(CWND_CAP)
        };
    }

    fn timeout(&mut self) {
        self.ssthresh = (self.cwnd / 2).max(2);
        self.cwnd = 1;
    }
}

/// How a response went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// END: first transmission of the last segment.
    pub last_segment_first_sent: Nanos,
    /// Last transmission of any segment (a retransmission after a loss in
    /// the last round).
    pub last_transmission: Nanos,
    /// When the client had every segment.
    pub delivered: Nanos,
    /// Rounds sent.
    pub rounds: u32,
}

/// Sends `segments` segments starting at `start`; `on_send(at, sent,
/// retransmitted)` is told of every round.
pub fn send_response<R: Rng + ?Sized>(
    start: Nanos,
    segments: u32,
    window: &mut Window,
    path: &ClientPath,
    rng: &mut R,
    mut on_send: impl FnMut(Nanos, u32, u32),
) -> Transfer {
    let mut at = start;
    let mut unsent = segments.max(1);
    let mut to_retransmit = 0u32;
    let mut last_first_sent = None;
    let mut backoff = 0u32;
    let mut rounds = 0u32;
    loop {
        rounds += 1;
        let retransmitted = to_retransmit.min(window.cwnd);
        let fresh = unsent.min(window.cwnd - retransmitted);
        to_retransmit -= retransmitted;
        unsent -= fresh;
        if unsent == 0 && fresh > 0 && last_first_sent.is_none() {
            last_first_sent = Some(at);
        }
        let sent = retransmitted + fresh;
        on_send(at, sent, retransmitted);
        let lost = (0..sent).filter(|_| path.lost(rng)).count() as u32;
        let down = path.one_way(rng);
        if lost == 0 {
            backoff = 0;
            if unsent == 0 && to_retransmit == 0 {
                return Transfer {
                    last_segment_first_sent: last_first_sent.unwrap_or(at),
                    last_transmission: at,
                    delivered: at + down,
                    rounds,
                };
            }
            window.grow();
            at += down + path.one_way(rng);
        } else {
            to_retransmit += lost;
            window.timeout();
            at += path.rto_backed_off(backoff);
            backoff += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webserver::network::PathConfig;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn slow_start_rounds_without_loss() {
        let path = PathConfig::fixed(Nanos::from_millis(100)).client_path(0.5);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // 11 segments from an initial window of 2: rounds of 2, 4, 5.
        let mut w = Window::initial(2);
        let mut rounds = Vec::new();
        let t = send_response(Nanos::ZERO, 11, &mut w, &path, &mut rng, |at, s, r| {
            rounds.push((at, s, r))
        });
        assert_eq!(
            rounds,
            vec![
                (Nanos::ZERO, 2, 0),
                (Nanos::from_millis(100), 4, 0),
                (Nanos::from_millis(200), 5, 0)
            ]
        );
        assert_eq!(t.last_segment_first_sent, Nanos::from_millis(200));
        assert_eq!(t.delivered, Nanos::from_millis(250));
        assert_eq!(w.cwnd, 8);
        // An initial window of 10 sends 4 segments in one round.
        let mut w = Window::initial(10);
        let t = send_response(Nanos::ZERO, 4, &mut w, &path, &mut rng, |_, _, _| {});
        assert_eq!((t.rounds, t.delivered), (1, Nanos::from_millis(50)));
    }

    #[test]
    fn tail_loss_delivers_after_end() {
        let path = PathConfig {
            loss: 0.3,
            ..PathConfig::fixed(Nanos::from_millis(100))
        }
        .client_path(0.5);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut late = 0;
        for _ in 0..500 {
            let mut w = Window::initial(10);
            let (mut sent, mut retx) = (0, 0);
            let t = send_response(Nanos::ZERO, 3, &mut w, &path, &mut rng, |_, s, r| {
                sent += s;
                retx += r;
            });
            assert_eq!(t.last_segment_first_sent, Nanos::ZERO);
            assert_eq!(t.delivered, t.last_transmission + Nanos::from_millis(50));
            assert_eq!(sent, 3 + retx);
            if retx > 0 {
                late += 1;
                // One RTO (100 + 200 ms) at least, then the one-way delay.
                assert!(t.delivered >= Nanos::from_millis(350), "{t:?}");
            } else {
                assert_eq!(t.delivered, Nanos::from_millis(50));
            }
        }
        assert!(late > 100, "{late}");
    }
}
