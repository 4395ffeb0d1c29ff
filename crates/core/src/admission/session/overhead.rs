//! The cost of rejection, Section 8 (Eq. 1–6), and the session quota of
//! Section 12 (Eq. 7).
//!
//! Notation: S_r the capacity in requests per second, S_s the capacity in
//! sessions per second, SesLength the mean session length, Load the offered
//! load in sessions as a multiple of S_s (2 = 200 %), x the rejected and y
//! the completed sessions per second. A rejection costs one request (the
//! worst case of Section 8).
//!
//! * Eq. 1: S_s = S_r / SesLength
//! * Eq. 2: x + y = Load · S_s
//! * Eq. 3: y · SesLength + x = S_r
//! * Eq. 4: y = Load · S_r / SesLength − x
//! * Eq. 5: x = S_r · (Load − 1) / (SesLength − 1)
//! * Eq. 6: RejectionOverhead = 100 % · (Load − 1) / (SesLength − 1)
//! * Eq. 7: y = S_r · (SesLength − Load) / (SesLength · (SesLength − 1))
//!
//! Domain (the paper's Remark): the equations hold for 1 ≤ Load ≤
//! SesLength. Departures, to give every input an answer: below capacity
//! (Load ≤ 1) nothing needs rejecting, so x = 0 and the quota is S_s; at
//! Load ≥ SesLength the server cannot even send every rejection, so the
//! quota is 0 and the overhead is 100 %; for SesLength ≤ 1 a rejection
//! costs as much as the session it refuses, and the quota is S_s.

/// Eq. 1: the capacity in sessions per second.
pub fn session_capacity(requests_per_s: f64, session_length: f64) -> f64 {
    if session_length <= 0.0 {
        return 0.0;
    }
    requests_per_s / session_length
}

/// Eq. 5: rejected sessions per second at `load` (a multiple of S_s).
pub fn rejected_sessions_per_s(requests_per_s: f64, session_length: f64, load: f64) -> f64 {
    if load <= 1.0 || session_length <= 1.0 {
        return 0.0;
    }
    if load >= session_length {
        // Every request the server can process is a rejection.
        return requests_per_s;
    }
    requests_per_s * (load - 1.0) / (session_length - 1.0)
}

/// Eq. 6: rejection messages as a percentage of all requests processed.
pub fn rejection_overhead_pct(session_length: f64, load: f64) -> f64 {
    if load <= 1.0 || session_length <= 1.0 {
        return 0.0;
    }
    (100.0 * (load - 1.0) / (session_length - 1.0)).min(100.0)
}

/// Eq. 7: the new sessions per second the server can admit and complete at
/// `load`, with the rejections of the others paid for.
pub fn session_quota_per_s(requests_per_s: f64, session_length: f64, load: f64) -> f64 {
    let capacity = session_capacity(requests_per_s, session_length);
    if load <= 1.0 || session_length <= 1.0 {
        return capacity;
    }
    if load >= session_length {
        return 0.0;
    }
    requests_per_s * (session_length - load) / (session_length * (session_length - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_satisfies_eq_2_and_3() {
        // S_r = 1000 requests/s, SesLength 15, Load 200 %.
        let (sr, len, load) = (1000.0, 15.0, 2.0);
        let x = rejected_sessions_per_s(sr, len, load);
        let y = session_quota_per_s(sr, len, load);
        assert!((x - 1000.0 / 14.0).abs() < 1e-9);
        assert!((y - 1000.0 * 13.0 / 210.0).abs() < 1e-9); // 61.90
                                                           // Eq. 2 and Eq. 3.
        assert!((x + y - load * session_capacity(sr, len)).abs() < 1e-9);
        assert!((y * len + x - sr).abs() < 1e-9);
        // Eq. 4.
        assert!((y - (load * sr / len - x)).abs() < 1e-9);
    }

    #[test]
    fn overhead_matches_section_8_and_9() {
        // Section 9: at 300 % load the rejections of a mean-15 workload
        // account for almost 14 % of the server's work.
        let o = rejection_overhead_pct(15.0, 3.0);
        assert!((o - 200.0 / 14.0).abs() < 1e-9 && o > 13.5 && o < 14.5);
        // Section 8: "for a workload with an average session length greater
        // than 15 and a load up to 250 percent, the rejection overhead is
        // less than 10 percent".
        for len in [16.0, 20.0, 50.0] {
            for load in [1.0, 1.5, 2.0, 2.5] {
                assert!(rejection_overhead_pct(len, load) <= 10.0 + 1e-9);
            }
        }
        // The overhead is x / S_r (Eq. 5 over S_r).
        let x = rejected_sessions_per_s(1000.0, 5.0, 3.0);
        assert!((100.0 * x / 1000.0 - rejection_overhead_pct(5.0, 3.0)).abs() < 1e-9);
    }

    #[test]
    fn quota_at_the_edges_of_the_domain() {
        // Load = 1: Eq. 7 gives exactly S_s.
        assert!((session_quota_per_s(1000.0, 5.0, 1.0) - 200.0).abs() < 1e-9);
        // Below capacity: S_s; at Load = SesLength: nothing.
        assert_eq!(session_quota_per_s(1000.0, 5.0, 0.5), 200.0);
        assert_eq!(session_quota_per_s(1000.0, 5.0, 5.0), 0.0);
        assert_eq!(session_quota_per_s(1000.0, 5.0, 9.0), 0.0);
        assert_eq!(rejection_overhead_pct(5.0, 9.0), 100.0);
        // The quota falls as the load rises.
        let mut last = f64::INFINITY;
        for load in [1.0, 1.5, 2.0, 2.5, 3.0] {
            let y = session_quota_per_s(1000.0, 5.0, load);
            assert!(y < last);
            last = y;
        }
    }
}
