//! How a testbed client behaves, as the simulator must model it: its
//! profile's SYN schedule cut where its frustration timeout (patience) ends
//! it, without the Windows-2000 timer spread of the Abacus paper's Eq. 1.

use vantage_core::tcp::SynProfile;
use vantage_core::Nanos;

/// The profile as a testbed client behaves: cut at its patience
/// ([`SynProfile::cut_at`]), and without Eq. 1's ±50 ms spread of the first
/// timeout — the Abacus paper measured that on Windows 2000; Linux's SYN
/// timer fires 0–35 ms late, one-sided (the timer wheel's granularity,
/// visible in every run's `clients.csv`), which no symmetric spread
/// models better than none.
pub fn linux_client(profile: &SynProfile, patience: Nanos) -> SynProfile {
    SynProfile {
        first_gap_spread: Nanos::ZERO,
        later_gap_spread: Nanos::ZERO,
        ..profile.cut_at(patience)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut_six_five() -> SynProfile {
        SynProfile::builtin("linux-6.5")
            .unwrap()
            .cut_at(Nanos::from_secs(21))
    }

    #[test]
    fn patience_cuts_the_schedule() {
        let offsets = |p: &SynProfile| -> Vec<f64> {
            p.retransmission_offsets()
                .iter()
                .map(|t| t.as_secs_f64())
                .collect()
        };
        let linux = SynProfile::builtin("linux-6.5").unwrap();
        let cut = linux.cut_at(Nanos::from_secs(21));
        assert_eq!(
            offsets(&cut),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 11.0, 19.0]
        );
        assert_eq!(cut.give_up, Nanos::from_secs(21));
        assert!(cut.validate().is_ok());
        let old = SynProfile::builtin("linux-3.7").unwrap();
        let cut = old.cut_at(Nanos::from_secs(21));
        assert_eq!(offsets(&cut), vec![1.0, 3.0, 7.0, 15.0]);
        assert_eq!(old.cut_at(Nanos::from_secs(300)), old);
        let client = linux_client(&linux, Nanos::from_secs(21));
        assert_eq!(offsets(&client), offsets(&cut_six_five()));
        assert_eq!(client.first_gap_spread, Nanos::ZERO);
        assert_eq!(client.give_up, Nanos::from_secs(21));
    }
}
