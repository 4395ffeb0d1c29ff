//! SYN retransmission schedules by client operating system, and mixtures
//! of them.
//!
//! Abacus paper, Section 2 (Table 1) and Section 3.1 (Eq. 1). A profile is
//! the list of timeouts d_0 … d_{N−1} a client waits after each SYN before
//! sending the next, the connection timeout T_conn after the first SYN at
//! which it gives up, and the spread of each timeout around its nominal
//! value. T_k = d_0 + … + d_{k−1} is the send time of the k-th
//! retransmission relative to the first SYN (T_0 = 0).
//!
//! Timeout spread follows Eq. 1 for every profile: the first timeout is
//! uniform over ±50 ms around its nominal value, later ones are exact
//! (Eq. 1 takes ε → 0). The paper measured this on Windows 2000; no newer
//! measurement is published, so today's profiles keep it. Network jitter
//! (Eq. 2) is not part of the client and lives in the simulator.
//!
//! Departures from Table 1, with reasons:
//! * Table 1 lists retransmission times but not T_conn. For Windows 9x/NT,
//!   Windows 2000 and Linux 2.2/2.4 the client gives up one doubled timeout
//!   after its last retransmission (45 s, 21 s and 93 s); Solaris 2.7 gives up
//!   at its `tcp_ip_abort_cinterval` default of 180 s.
//! * HP-UX and FreeBSD rows are omitted: FreeBSD's row equals Linux 2.2's.
//!
//! Today's profiles (gaps in seconds, give-up):
//! * `linux-6.5` — Linux ≥ 6.5 (`tcp_syn_linear_timeouts` = 4): 1,1,1,1,1,2,4,8,16,32; 131 s.
//! * `linux-6.5-measured` — the same as measured on this project's test kernel: last gap 33 s.
//! * `linux-3.7` — Linux 3.7–6.4: 1,2,4,8,16,32; 127 s.
//! * `macos` — macOS and iOS: 1,1,1,1,1,2,4,8,16,32 cut by a 75 s connection timer.
//! * `windows-7` — Windows 7 (and later Windows with the 3 s initial RTO): 3,6; 21 s.

use crate::Nanos;
use std::fmt;

/// Why a profile or mixture is not usable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProfileError {
    #[error("unknown client profile `{name}` (known: {known})")]
    Unknown { name: String, known: String },
    #[error("profile `{name}`: timeout {index} is zero; every gap between SYNs must be positive")]
    ZeroGap { name: String, index: usize },
    #[error("profile `{name}`: give-up time {give_up} is not after the last SYN at {last_syn}")]
    GiveUpTooEarly {
        name: String,
        give_up: Nanos,
        last_syn: Nanos,
    },
    #[error("client mixture: weight {weight} of `{name}` must be finite and positive")]
    BadWeight { name: String, weight: f64 },
    #[error("client mixture is empty")]
    EmptyMix,
    #[error(
        "client mixture: the weights sum to {total}, too large to normalize (largest weight {largest:e}); scale them down"
    )]
    WeightsOverflow { total: f64, largest: f64 },
}

/// One client operating system's SYN retransmission behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct SynProfile {
    /// Short name, as used in scenario files (`windows-9x-nt`, `linux-6.5`, …).
    pub name: String,
    /// d_0 … d_{N−1}: nominal wait after each SYN before the next one. The
    /// number of entries is N, the maximum number of retransmissions.
    pub gaps: Vec<Nanos>,
    /// T_conn: time after the first SYN at which the client gives up.
    pub give_up: Nanos,
    /// Half-width of the uniform spread of d_0 (Eq. 1: 50 ms).
    pub first_gap_spread: Nanos,
    /// Half-width of the uniform spread of d_1 … d_{N−1} (Eq. 1: ε → 0).
    pub later_gap_spread: Nanos,
}

const EQ1_FIRST_SPREAD: Nanos = Nanos::from_millis(50);
const EQ1_LATER_SPREAD: Nanos = Nanos::ZERO;

/// Names of the built-in profiles, in the order they are listed to users.
pub const BUILTIN_PROFILES: &[&str] = &[
    "windows-9x-nt",
    "windows-2000",
    "linux-2.2",
    "solaris-2.7",
    "linux-6.5",
    "linux-6.5-measured",
    "linux-3.7",
    "macos",
    "windows-7",
];

impl SynProfile {
    /// A profile from gaps and give-up time in milliseconds, with Eq. 1 spread.
    fn from_millis(name: &str, gaps_ms: &[u64], give_up_ms: u64) -> SynProfile {
        SynProfile {
            name: name.to_string(),
            gaps: gaps_ms.iter().map(|&g| Nanos::from_millis(g)).collect(),
            give_up: Nanos::from_millis(give_up_ms),
            first_gap_spread: EQ1_FIRST_SPREAD,
            later_gap_spread: EQ1_LATER_SPREAD,
        }
    }

    /// A built-in profile by name (see [`BUILTIN_PROFILES`]).
    pub fn builtin(name: &str) -> Result<SynProfile, ProfileError> {
        let linear_then_exponential =
            [1000, 1000, 1000, 1000, 1000, 2000, 4000, 8000, 16000, 32000];
        let profile = match name {
            // Table 1: SYNs at 0, 3, 9, 21 s.
            "windows-9x-nt" => Self::from_millis(name, &[3000, 6000, 12000], 45_000),
            // Table 1: SYNs at 0, 3, 9 s.
            "windows-2000" => Self::from_millis(name, &[3000, 6000], 21_000),
            // Table 1: SYNs at 0, 3, 9, 21, 45 s.
            "linux-2.2" => Self::from_millis(name, &[3000, 6000, 12000, 24000], 93_000),
            // Table 1: SYNs at 0, 3.4, 10.1, 23.6, 50.6, 104.6, 164.6 s.
            "solaris-2.7" => {
                Self::from_millis(name, &[3400, 6700, 13500, 27000, 54000, 60000], 180_000)
            }
            "linux-6.5" => Self::from_millis(name, &linear_then_exponential, 131_000),
            "linux-6.5-measured" => Self::from_millis(
                name,
                &[1000, 1000, 1000, 1000, 1000, 2000, 4000, 8000, 16000, 33000],
                131_000,
            ),
            "linux-3.7" => {
                Self::from_millis(name, &[1000, 2000, 4000, 8000, 16000, 32000], 127_000)
            }
            // SYNs at 0,1,2,3,4,5,7,11,19,35,67 s; the 75 s timer ends it.
            "macos" => Self::from_millis(name, &linear_then_exponential, 75_000),
            "windows-7" => Self::from_millis(name, &[3000, 6000], 21_000),
            _ => {
                return Err(ProfileError::Unknown {
                    name: name.to_string(),
                    known: BUILTIN_PROFILES.join(", "),
                })
            }
        };
        debug_assert!(profile.validate().is_ok());
        Ok(profile)
    }

    /// Checks that every gap is positive and the client gives up after its
    /// last SYN.
    pub fn validate(&self) -> Result<(), ProfileError> {
        if let Some(index) = self.gaps.iter().position(|g| *g == Nanos::ZERO) {
            return Err(ProfileError::ZeroGap {
                name: self.name.clone(),
                index,
            });
        }
        let last_syn = self.send_offset(self.retransmissions());
        if self.give_up <= last_syn {
            return Err(ProfileError::GiveUpTooEarly {
                name: self.name.clone(),
                give_up: self.give_up,
                last_syn,
            });
        }
        Ok(())
    }

    /// N: the maximum number of retransmissions.
    pub fn retransmissions(&self) -> usize {
        self.gaps.len()
    }

    /// T_k: nominal send time of the k-th retransmission after the first
    /// SYN (T_0 = 0). `k` beyond N is clamped to N.
    pub fn send_offset(&self, k: usize) -> Nanos {
        self.gaps
            .iter()
            .take(k)
            .fold(Nanos::ZERO, |acc, g| acc + *g)
    }

    /// When a client with frustration timeout `frustration_timeout` gives
    /// up, counted from its first SYN: min(F, T_conn).
    pub fn give_up_at(&self, frustration_timeout: Nanos) -> Nanos {
        frustration_timeout.min(self.give_up)
    }

    /// Whether such a client sends retransmission `k` (k ≥ 1): it exists
    /// and its nominal send time is before the give-up instant (a retry due
    /// at the very instant the client gives up is not sent).
    pub fn sends_retransmission(&self, frustration_timeout: Nanos, k: usize) -> bool {
        k <= self.retransmissions() && self.send_offset(k) < self.give_up_at(frustration_timeout)
    }

    /// T_0 = 0, T_1, …: the nominal send times of the SYNs such a client
    /// actually sends.
    pub fn sends_before_give_up(&self, frustration_timeout: Nanos) -> Vec<Nanos> {
        let give_up = self.give_up_at(frustration_timeout);
        (0..=self.retransmissions())
            .map(|k| self.send_offset(k))
            .take_while(|t| *t < give_up)
            .collect()
    }

    /// The frustration cut: the profile as a client with frustration timeout
    /// `frustration_timeout` behaves — the SYNs sent before it, then giving
    /// up at it. Unchanged when the client gives up first on its own.
    pub fn cut_at(&self, frustration_timeout: Nanos) -> SynProfile {
        if frustration_timeout >= self.give_up {
            return self.clone();
        }
        let mut gaps = Vec::new();
        let mut sent = Nanos::ZERO;
        for gap in &self.gaps {
            if sent + *gap >= frustration_timeout {
                break;
            }
            sent += *gap;
            gaps.push(*gap);
        }
        SynProfile {
            gaps,
            give_up: frustration_timeout,
            ..self.clone()
        }
    }

    /// T_1 … T_N: nominal send times of every retransmission.
    pub fn retransmission_offsets(&self) -> Vec<Nanos> {
        (1..=self.retransmissions())
            .map(|k| self.send_offset(k))
            .collect()
    }

    /// The actual wait after the k-th transmission (k = 0 is the first
    /// SYN), drawn from Eq. 1's spread. `uniform` is a draw from [0, 1)
    /// supplied by the caller's seeded generator. Returns `None` when the
    /// k-th transmission is the last one.
    pub fn timeout(&self, k: usize, uniform: f64) -> Option<Nanos> {
        let nominal = *self.gaps.get(k)?;
        let half_width = if k == 0 {
            self.first_gap_spread
        } else {
            self.later_gap_spread
        };
        let offset = (2.0 * uniform.clamp(0.0, 1.0) - 1.0) * half_width.0 as f64;
        let value = nominal.0 as i128 + offset.round() as i128;
        Some(Nanos(value.max(1) as u64))
    }

    /// S = max{T_i : T_i ≤ r/h}, the cost-minimizing Abacus window
    /// (Section 5 and observation O2 of Section 6.2), with `cost_ratio` = r/h
    /// in seconds. Zero when even T_1 exceeds r/h.
    pub fn cost_optimal_window(&self, cost_ratio_secs: f64) -> Nanos {
        let limit = Nanos::from_secs_f64(cost_ratio_secs);
        self.retransmission_offsets()
            .into_iter()
            .filter(|t| *t <= limit)
            .max()
            .unwrap_or(Nanos::ZERO)
    }
}

impl fmt::Display for SynProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gaps: Vec<String> = self
            .gaps
            .iter()
            .map(|g| format!("{}", g.as_secs_f64()))
            .collect();
        write!(
            f,
            "{} (gaps {} s, gives up at {} s)",
            self.name,
            gaps.join(","),
            self.give_up.as_secs_f64()
        )
    }
}

/// A population of clients: profiles with weights that sum to one.
///
/// Every mechanism that takes a profile takes a mixture; a single profile is
/// a mixture of one.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientMix {
    /// Name used in reports (`windows-9x-nt`, `mix-2026`, …).
    pub name: String,
    entries: Vec<(SynProfile, f64)>,
}

/// Names of the built-in mixtures.
pub const BUILTIN_MIXES: &[&str] = &["mix-2026"];

impl ClientMix {
    /// A population of one profile.
    pub fn single(profile: SynProfile) -> ClientMix {
        ClientMix {
            name: profile.name.clone(),
            entries: vec![(profile, 1.0)],
        }
    }

    /// A mixture; weights are normalized to sum to one.
    pub fn new(name: &str, entries: Vec<(SynProfile, f64)>) -> Result<ClientMix, ProfileError> {
        if entries.is_empty() {
            return Err(ProfileError::EmptyMix);
        }
        for (profile, weight) in &entries {
            profile.validate()?;
            if !weight.is_finite() || *weight <= 0.0 {
                return Err(ProfileError::BadWeight {
                    name: profile.name.clone(),
                    weight: *weight,
                });
            }
        }
        let total: f64 = entries.iter().map(|(_, w)| w).sum();
        if !total.is_finite() {
            let largest = entries.iter().map(|(_, w)| *w).fold(0.0, f64::max);
            return Err(ProfileError::WeightsOverflow { total, largest });
        }
        Ok(ClientMix {
            name: name.to_string(),
            entries: entries.into_iter().map(|(p, w)| (p, w / total)).collect(),
        })
    }

    /// A built-in profile or mixture by name.
    ///
    /// `mix-2026` is an assumed population of today's clients, not a
    /// measurement: Android phones on pre-6.5 kernels 28 % (`linux-3.7`),
    /// Android on 6.6 kernels and desktop Linux 20 % (`linux-6.5`), iOS and
    /// macOS 32 % (`macos`), Windows 20 % (`windows-7`). Scenario files
    /// define other mixtures.
    pub fn builtin(name: &str) -> Result<ClientMix, ProfileError> {
        match name {
            "mix-2026" => ClientMix::new(
                name,
                vec![
                    (SynProfile::builtin("linux-3.7")?, 0.28),
                    (SynProfile::builtin("linux-6.5")?, 0.20),
                    (SynProfile::builtin("macos")?, 0.32),
                    (SynProfile::builtin("windows-7")?, 0.20),
                ],
            ),
            _ => SynProfile::builtin(name)
                .map(ClientMix::single)
                .map_err(|err| match err {
                    ProfileError::Unknown { name, .. } => ProfileError::Unknown {
                        name,
                        known: format!(
                            "{}, {}",
                            BUILTIN_PROFILES.join(", "),
                            BUILTIN_MIXES.join(", ")
                        ),
                    },
                    other => other,
                }),
        }
    }

    /// The profiles and their normalized weights.
    pub fn entries(&self) -> &[(SynProfile, f64)] {
        &self.entries
    }

    /// The profile for a uniform draw in [0, 1) from the caller's generator.
    pub fn choose(&self, uniform: f64) -> usize {
        let mut acc = 0.0;
        for (index, (_, weight)) in self.entries.iter().enumerate() {
            acc += weight;
            if uniform < acc {
                return index;
            }
        }
        self.entries.len() - 1
    }

    pub fn profile(&self, index: usize) -> &SynProfile {
        &self.entries[index].0
    }

    /// The profile with the largest weight (first on ties).
    pub fn dominant(&self) -> &SynProfile {
        let mut best = &self.entries[0];
        for entry in &self.entries[1..] {
            if entry.1 > best.1 {
                best = entry;
            }
        }
        &best.0
    }

    /// Largest T_N over the mixture: the last retransmission any client sends.
    pub fn last_retransmission(&self) -> Nanos {
        self.entries
            .iter()
            .map(|(p, _)| p.send_offset(p.retransmissions()))
            .max()
            .unwrap_or(Nanos::ZERO)
    }

    /// S = max{T_i ≤ r/h} over the union of the mixture's retransmission times.
    pub fn cost_optimal_window(&self, cost_ratio_secs: f64) -> Nanos {
        self.entries
            .iter()
            .map(|(p, _)| p.cost_optimal_window(cost_ratio_secs))
            .max()
            .unwrap_or(Nanos::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(offsets: &[Nanos]) -> Vec<f64> {
        offsets.iter().map(|t| t.as_secs_f64()).collect()
    }

    #[test]
    fn table1_send_times() {
        let win = SynProfile::builtin("windows-9x-nt").unwrap();
        assert_eq!(secs(&win.retransmission_offsets()), vec![3.0, 9.0, 21.0]);
        let w2k = SynProfile::builtin("windows-2000").unwrap();
        assert_eq!(secs(&w2k.retransmission_offsets()), vec![3.0, 9.0]);
        let linux = SynProfile::builtin("linux-2.2").unwrap();
        assert_eq!(
            secs(&linux.retransmission_offsets()),
            vec![3.0, 9.0, 21.0, 45.0]
        );
        let solaris = SynProfile::builtin("solaris-2.7").unwrap();
        let got = secs(&solaris.retransmission_offsets());
        let want = [3.4, 10.1, 23.6, 50.6, 104.6, 164.6];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{got:?}");
        }
    }

    #[test]
    fn todays_linux_gives_up_after_last_doubling() {
        let linux = SynProfile::builtin("linux-6.5").unwrap();
        assert_eq!(
            secs(&linux.retransmission_offsets()),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 11.0, 19.0, 35.0, 67.0]
        );
        // ≈131 s: the last SYN at 67 s plus a doubled 64 s timeout.
        assert_eq!(linux.give_up, linux.send_offset(10) + Nanos::from_secs(64));
        let old = SynProfile::builtin("linux-3.7").unwrap();
        assert_eq!(old.give_up, old.send_offset(6) + Nanos::from_secs(64));
        let macos = SynProfile::builtin("macos").unwrap();
        assert!(macos.give_up > macos.send_offset(10));
    }

    #[test]
    fn eq1_spread_first_uniform_then_exact() {
        let win = SynProfile::builtin("windows-9x-nt").unwrap();
        assert_eq!(win.timeout(0, 0.0), Some(Nanos::from_millis(2950)));
        assert_eq!(win.timeout(0, 1.0), Some(Nanos::from_millis(3050)));
        assert_eq!(win.timeout(0, 0.5), Some(Nanos::from_secs(3)));
        assert_eq!(win.timeout(1, 0.0), Some(Nanos::from_secs(6)));
        assert_eq!(win.timeout(2, 0.99), Some(Nanos::from_secs(12)));
        assert_eq!(win.timeout(3, 0.5), None);
    }

    #[test]
    fn cost_optimal_window_is_last_retransmission_within_r_over_h() {
        let win = SynProfile::builtin("windows-9x-nt").unwrap();
        assert_eq!(win.cost_optimal_window(2.0), Nanos::ZERO);
        assert_eq!(win.cost_optimal_window(5.0), Nanos::from_secs(3));
        assert_eq!(win.cost_optimal_window(9.0), Nanos::from_secs(9));
        assert_eq!(win.cost_optimal_window(75.0), Nanos::from_secs(21));
    }

    #[test]
    fn mixture_normalizes_and_chooses_by_weight() {
        let mix = ClientMix::builtin("mix-2026").unwrap();
        let total: f64 = mix.entries().iter().map(|(_, w)| w).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert_eq!(mix.choose(0.0), 0);
        assert_eq!(mix.choose(0.999_999), mix.entries().len() - 1);
        assert_eq!(mix.dominant().name, "macos");
        assert_eq!(mix.last_retransmission(), Nanos::from_secs(67));
    }

    #[test]
    fn bad_inputs_are_named() {
        let err = ClientMix::builtin("beos").unwrap_err();
        assert!(err.to_string().contains("beos") && err.to_string().contains("linux-6.5"));
        let p = SynProfile::builtin("windows-7").unwrap();
        let err = ClientMix::new("m", vec![(p.clone(), -1.0)]).unwrap_err();
        assert!(matches!(err, ProfileError::BadWeight { .. }));
        let huge = vec![(p.clone(), 1e308), (p, 1e308)];
        let err = ClientMix::new("m", huge).unwrap_err();
        assert!(matches!(err, ProfileError::WeightsOverflow { .. }));
        assert!(err.to_string().contains("1e308"), "{err}");
        let mut bad = SynProfile::builtin("windows-7").unwrap();
        bad.give_up = Nanos::from_secs(9);
        assert!(matches!(
            bad.validate(),
            Err(ProfileError::GiveUpTooEarly { .. })
        ));
    }

    #[test]
    fn the_frustration_cut_keeps_the_syns_sent_before_it() {
        // Windows 9x/NT: SYNs at 0, 3, 9, 21 s; gives up at 45 s.
        let win = SynProfile::builtin("windows-9x-nt").unwrap();
        let s = Nanos::from_secs;
        assert_eq!(win.give_up_at(s(21)), s(21));
        assert_eq!(win.sends_before_give_up(s(21)), vec![s(0), s(3), s(9)]);
        assert!(win.sends_retransmission(s(21), 2));
        assert!(!win.sends_retransmission(s(21), 3));
        let cut = win.cut_at(s(21));
        assert_eq!(cut.gaps, vec![s(3), s(6)]);
        assert_eq!(cut.give_up, s(21));
        assert_eq!(win.cut_at(s(100)), win);
        assert_eq!(win.sends_before_give_up(s(100)).len(), 4);
        // Every place agrees: the cut profile sends what the client sends.
        for fto in [1, 3, 4, 9, 10, 21, 22, 45, 60] {
            let cut = win.cut_at(s(fto));
            assert_eq!(
                (0..=cut.retransmissions())
                    .map(|k| cut.send_offset(k))
                    .collect::<Vec<_>>(),
                win.sends_before_give_up(s(fto)),
                "F = {fto} s"
            );
            assert_eq!(cut.give_up, win.give_up_at(s(fto)));
        }
    }
}
