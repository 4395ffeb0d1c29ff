//! The client population: closed-loop WebStone clients that retry their SYNs
//! per their operating system's schedule and give up at their frustration
//! timeout (Certes paper, Section 3.2.2 and Table I; Section 5.1: WebStone
//! 2.5 with a wall-clock frustration timeout and an on/sleep mode).
//!
//! * Closed loop: each client runs one transaction at a time and starts the
//!   next one `think_time` after the last ended (WebStone: no think time).
//!   A transaction is one TCP connection carrying `requests_per_connection`
//!   requests, one after the other (HTTP/1.0: one).
//! * SYN retries follow the client's profile from `vantage_core::tcp`
//!   (Eq. 1 spread on the first gap). The frustration timeout (FTO) bounds
//!   only the wait for a connection (Section 3.2.2: "the longest amount of
//!   time a client is willing to wait for an indication of a successful
//!   connection"); once the SYN-ACK has arrived the client waits for the
//!   response however long it takes.
//! * A client gives up at `min(FTO, T_conn)` after its first SYN, where
//!   T_conn is its profile's own give-up time ([`vantage_core::tcp::SynProfile::give_up_at`],
//!   the frustration cut), and at once starts a new
//!   transaction (it hits reload). A retransmission is sent only if its
//!   nominal send time T_k is before that instant, so a retry due exactly at
//!   the FTO is not sent: with the paper-era 3/6/12 s schedule and FTO 21 s
//!   the client sends SYNs at 0, 3 and 9 s and gives up at 21 s, the paper's
//!   k = 2 (Table I puts 21 s at k = 3; the paper's text uses k = 2 for its
//!   21 s default, which this rule follows).
//! * Each transaction draws its profile from the population's mixture and
//!   its FTO from the FTO mixture (Tests O and P: 1/3 each 9, 21, 45 s), so
//!   that the weights are shares of transactions, as the estimator assumes
//!   ([`Draw::PerTransaction`]); [`Draw::PerClient`] fixes them per client
//!   instead. A client's path (its place in the network) is drawn once.
//! * On/off mode (Test J, Figure 19): every client is on for `on`, asleep for
//!   `off`, in step with the others. A client that finishes a transaction
//!   while asleep starts its next one when the next on period begins, spread
//!   over the ramp-up time; a transaction under way when the period ends
//!   runs to its end, retries included.

use vantage_core::Nanos;

/// Alternating on and sleep periods, all clients in step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnOff {
    pub on: Nanos,
    pub off: Nanos,
}

impl OnOff {
    /// Start of the on period that `now` is in, or of the next one.
    pub fn next_on(&self, now: Nanos) -> Nanos {
        let period = self.on.0 + self.off.0;
        let phase = now.0 % period.max(1);
        if phase < self.on.0 {
            now
        } else {
            Nanos(now.0 - phase + period)
        }
    }
}

/// Whether a client keeps its operating system and frustration timeout for
/// the whole run, or draws them for each transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Draw {
    /// Each transaction is a new user of the population: the mixture's
    /// weights are shares of transactions (the estimator's assumption, and
    /// the paper's for Tests O and P: "1/3 of the transactions were from
    /// clients configured to have an FTO of 9 seconds").
    PerTransaction,
    /// Each WebStone client is one machine with one OS and one FTO. In a
    /// closed loop, clients whose transactions are shorter (faster
    /// retries, shorter FTO) then make more of the transactions than their
    /// weight.
    PerClient,
}

/// The client population's behaviour (their OS profiles come separately).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientsConfig {
    /// Number of WebStone clients.
    pub count: u32,
    /// Clients start spread uniformly over this time (and so do sleepers
    /// waking up in on/off mode).
    pub ramp: Nanos,
    /// Pause between a transaction's end and the next one's first SYN.
    pub think_time: Nanos,
    /// Requests per connection (HTTP/1.0: 1; persistent HTTP/1.1: N).
    pub requests_per_connection: u32,
    /// FTOs and their weights; each client draws one.
    pub frustration_timeouts: Vec<(Nanos, f64)>,
    /// When OS profile and FTO are drawn.
    pub draw: Draw,
    pub on_off: Option<OnOff>,
}

impl ClientsConfig {
    /// Checks the ranges; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.count == 0 {
            return Err("count must be at least 1".into());
        }
        if self.requests_per_connection == 0 {
            return Err("requests_per_connection must be at least 1".into());
        }
        if self.frustration_timeouts.is_empty() {
            return Err("frustration_timeouts: at least one is needed".into());
        }
        for (fto, weight) in &self.frustration_timeouts {
            if *fto == Nanos::ZERO || !(weight.is_finite() && *weight > 0.0) {
                return Err(format!(
                    "frustration_timeouts: {fto} with weight {weight}: both must be positive"
                ));
            }
        }
        if let Some(o) = self.on_off {
            if o.on == Nanos::ZERO || o.off == Nanos::ZERO {
                return Err("on_off: on and off periods must be positive".into());
            }
        }
        Ok(())
    }

    /// The FTO for a uniform draw in [0, 1).
    pub fn choose_frustration_timeout(&self, uniform: f64) -> Nanos {
        let total: f64 = self.frustration_timeouts.iter().map(|(_, w)| w).sum();
        let mut acc = 0.0;
        for (fto, weight) in &self.frustration_timeouts {
            acc += weight / total;
            if uniform < acc {
                return *fto;
            }
        }
        self.frustration_timeouts[self.frustration_timeouts.len() - 1].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::tcp::SynProfile;

    #[test]
    fn paper_era_client_with_fto_21_sends_three_syns() {
        let win = SynProfile::builtin("windows-9x-nt").unwrap();
        let fto = Nanos::from_secs(21);
        assert!(win.sends_retransmission(fto, 1));
        assert!(win.sends_retransmission(fto, 2));
        assert!(
            !win.sends_retransmission(fto, 3),
            "the retry due at 21 s is not sent"
        );
        assert_eq!(win.give_up_at(fto), fto);
        // FTO 9 s (Tests O/P): SYNs at 0 and 3 s only; FTO 45 s: all four.
        assert!(!win.sends_retransmission(Nanos::from_secs(9), 2));
        assert!(win.sends_retransmission(Nanos::from_secs(45), 3));
        assert_eq!(win.give_up_at(Nanos::from_secs(45)), win.give_up);
    }

    #[test]
    fn todays_linux_with_fto_21_retries_eight_times() {
        let linux = SynProfile::builtin("linux-6.5").unwrap();
        let fto = Nanos::from_secs(21);
        let sent = (1..=linux.retransmissions())
            .filter(|&k| linux.sends_retransmission(fto, k))
            .count();
        assert_eq!(sent, 8); // at 1, 2, 3, 4, 5, 7, 11 and 19 s
    }

    #[test]
    fn on_off_next_on_period() {
        let o = OnOff {
            on: Nanos::from_secs(20),
            off: Nanos::from_secs(10),
        };
        assert_eq!(o.next_on(Nanos::from_secs(5)), Nanos::from_secs(5));
        assert_eq!(o.next_on(Nanos::from_secs(20)), Nanos::from_secs(30));
        assert_eq!(o.next_on(Nanos::from_secs(29)), Nanos::from_secs(30));
        assert_eq!(o.next_on(Nanos::from_secs(31)), Nanos::from_secs(31));
    }
}
