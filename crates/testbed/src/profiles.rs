//! Client SYN retransmission profiles on real Linux clients.
//!
//! The `core::tcp` profiles (Abacus paper, Table 1 and today's kernels) are
//! data; a client namespace produces one of them for real through two
//! per-namespace sysctls of Linux ≥ 6.5:
//!
//! * `net.ipv4.tcp_syn_linear_timeouts` = L: the first L retransmissions
//!   keep the 1 s initial timeout instead of doubling it;
//! * `net.ipv4.tcp_syn_retries` = R: R further, exponentially backed-off
//!   retransmissions (the kernel allows R + L in all).
//!
//! With the kernel's fixed 1 s initial RTO, the gaps between SYNs are L + 1
//! times 1 s, then 2, 4, 8, … s; the attempt ends at the first timer expiry
//! after R + L retransmissions or after the time budget of R exponential
//! retries, whichever comes first (`tcp_write_timeout`; see
//! [`kernel_schedule`]). Linux ≥ 6.5 (L = 4, R = 6) and Linux 3.7–6.4
//! (L = 0, R = 6) are produced exactly. macOS has Linux ≥ 6.5's gaps but a
//! 75 s connection timer, which the kernel cannot end early: the mapping
//! returns that timer so the load generator applies it as the client's
//! frustration timeout.
//!
//! Profiles whose first timeout is 3 s — Windows 7, and the papers' 2000-era
//! Windows, Linux 2.2 and Solaris rows — cannot be produced: this kernel's
//! initial SYN timeout is the compile-time `TCP_TIMEOUT_INIT` of 1 s, and no
//! sysctl changes it. [`kernel_settings`] says so instead of approximating.

use vantage_core::tcp::SynProfile;
use vantage_core::Nanos;

use crate::netns::{Netns, NetnsError};

/// The sysctl values (and any user-space connection timer) that make a Linux
/// client namespace follow a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KernelSynSettings {
    /// `net.ipv4.tcp_syn_retries` (R).
    pub syn_retries: u32,
    /// `net.ipv4.tcp_syn_linear_timeouts` (L).
    pub linear_timeouts: u32,
    /// A connection timer shorter than the kernel's give-up, to be applied by
    /// the client program (macOS's 75 s).
    pub connection_timer: Option<Nanos>,
}

/// Kernel's fixed initial SYN timeout (`TCP_TIMEOUT_INIT`).
const INITIAL_TIMEOUT: Nanos = Nanos::from_secs(1);
/// Kernel's ceiling on a retransmission timeout (`TCP_RTO_MAX`).
const MAX_TIMEOUT: Nanos = Nanos::from_secs(120);
/// Kernel bound on both sysctls (`MAX_TCP_SYNCNT`).
const MAX_SYNCNT: u32 = 127;
/// A profile's gap matches the kernel's when within this fraction (the
/// measured `linux-6.5-measured` last gap, 33 s for a nominal 32 s).
const GAP_TOLERANCE: f64 = 0.05;

/// Why a profile cannot be produced by a Linux client namespace.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UnsupportedProfile {
    #[error("client profile `{name}` starts with a {first_ms} ms SYN timeout; this kernel's initial SYN timeout is fixed at 1 s (TCP_TIMEOUT_INIT), so the profile cannot be produced by a real Linux client (usable here: linux-6.5, linux-6.5-measured, linux-3.7, macos)")]
    InitialTimeout { name: String, first_ms: u64 },
    #[error("client profile `{name}`: its SYN gaps are not 1 s repeated then doubling, which is all tcp_syn_linear_timeouts and tcp_syn_retries can produce")]
    Shape { name: String },
}

/// Time the kernel allows a connection attempt with `syn_retries` = R:
/// `tcp_model_timeout`, (2^(R+1) − 1) s while the doubled timeout stays
/// under `TCP_RTO_MAX`, then 120 s per further retry.
fn attempt_budget(syn_retries: u32) -> Nanos {
    const DOUBLING_LIMIT: u32 = 6; // ilog2(TCP_RTO_MAX / TCP_TIMEOUT_INIT)
    if syn_retries <= DOUBLING_LIMIT {
        INITIAL_TIMEOUT.saturating_mul((2u64 << syn_retries) - 1)
    } else {
        INITIAL_TIMEOUT
            .saturating_mul((2u64 << DOUBLING_LIMIT) - 1)
            .saturating_add(MAX_TIMEOUT.saturating_mul(u64::from(syn_retries - DOUBLING_LIMIT)))
    }
}

/// The schedule a Linux ≥ 6.5 client follows with these sysctls: gaps
/// between successive SYNs and the give-up time after the first SYN.
///
/// The timeout after SYN j is 1 s for j ≤ L and 2^(j−L) s after (capped at
/// 120 s). At each expiry the kernel gives up if it has already sent R + L
/// retransmissions or if the attempt has lasted its budget
/// (`tcp_model_timeout` of R), and retransmits otherwise. The budget binds
/// first when L is large for R: R = 1, L = 4 gives up at 3 s after two
/// retransmissions, not five (measured on this project's test kernel; see
/// the tests).
pub fn kernel_schedule(syn_retries: u32, linear_timeouts: u32) -> (Vec<Nanos>, Nanos) {
    let timeout_after = |syn: u32| -> Nanos {
        if syn <= linear_timeouts {
            INITIAL_TIMEOUT
        } else {
            let doublings = (syn - linear_timeouts).min(16);
            INITIAL_TIMEOUT
                .saturating_mul(1 << doublings)
                .min(MAX_TIMEOUT)
        }
    };
    let budget = attempt_budget(syn_retries);
    let most = syn_retries + linear_timeouts;
    let mut gaps = Vec::new();
    let mut elapsed = Nanos::ZERO;
    loop {
        let sent = gaps.len() as u32;
        elapsed = elapsed.saturating_add(timeout_after(sent));
        if sent >= most || elapsed >= budget {
            return (gaps, elapsed);
        }
        gaps.push(timeout_after(sent));
    }
}

fn close(a: Nanos, b: Nanos) -> bool {
    let (a, b) = (a.as_secs_f64(), b.as_secs_f64());
    (a - b).abs() <= GAP_TOLERANCE * b.max(1e-9)
}

/// The sysctls that make a Linux client follow `profile`, or why none do.
pub fn kernel_settings(profile: &SynProfile) -> Result<KernelSynSettings, UnsupportedProfile> {
    let first = profile.gaps.first().copied().unwrap_or(INITIAL_TIMEOUT);
    if !close(first, INITIAL_TIMEOUT) {
        return Err(UnsupportedProfile::InitialTimeout {
            name: profile.name.clone(),
            first_ms: first.as_millis(),
        });
    }
    let wanted = profile.gaps.len() as u32;
    let candidates = (0..=wanted.min(MAX_SYNCNT))
        .flat_map(|linear| (1..=wanted.clamp(1, MAX_SYNCNT)).map(move |retries| (retries, linear)));
    for (syn_retries, linear_timeouts) in candidates {
        let (gaps, give_up) = kernel_schedule(syn_retries, linear_timeouts);
        if gaps.len() == profile.gaps.len()
            && gaps.iter().zip(&profile.gaps).all(|(k, p)| close(*k, *p))
        {
            let connection_timer = if close(give_up, profile.give_up) {
                None
            } else if profile.give_up < give_up {
                Some(profile.give_up)
            } else {
                continue;
            };
            return Ok(KernelSynSettings {
                syn_retries,
                linear_timeouts,
                connection_timer,
            });
        }
    }
    Err(UnsupportedProfile::Shape {
        name: profile.name.clone(),
    })
}

/// Writes the two sysctls into a client namespace.
pub fn apply(client: &Netns, settings: &KernelSynSettings) -> Result<(), NetnsError> {
    client.sysctl(
        "net.ipv4.tcp_syn_linear_timeouts",
        &settings.linear_timeouts.to_string(),
    )?;
    client.sysctl(
        "net.ipv4.tcp_syn_retries",
        &settings.syn_retries.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(gaps: &[Nanos]) -> Vec<u64> {
        gaps.iter().map(|g| g.as_millis() / 1000).collect()
    }

    #[test]
    fn kernel_defaults_give_linux_6_5_schedule() {
        let (gaps, give_up) = kernel_schedule(6, 4);
        assert_eq!(secs(&gaps), vec![1, 1, 1, 1, 1, 2, 4, 8, 16, 32]);
        assert_eq!(give_up, Nanos::from_secs(131));
        let (gaps, give_up) = kernel_schedule(6, 0);
        assert_eq!(secs(&gaps), vec![1, 2, 4, 8, 16, 32]);
        assert_eq!(give_up, Nanos::from_secs(127));
    }

    /// SYN send times and give-up measured on this project's test kernel
    /// (6.18) with a blackholed peer, for sysctl pairs whose budget and
    /// count limits differ.
    #[test]
    fn model_matches_kernel_measurements() {
        let measured: [((u32, u32), &[u64], u64); 5] = [
            ((1, 4), &[1, 1], 3),
            ((2, 4), &[1, 1, 1, 1, 1], 7),
            ((2, 1), &[1, 1, 2], 8),
            ((3, 0), &[1, 2, 4], 15),
            ((3, 2), &[1, 1, 1, 2, 4], 17),
        ];
        for ((retries, linear), gaps, give_up) in measured {
            let (model_gaps, model_give_up) = kernel_schedule(retries, linear);
            assert_eq!(secs(&model_gaps), gaps, "R={retries} L={linear}");
            assert_eq!(
                model_give_up,
                Nanos::from_secs(give_up),
                "R={retries} L={linear}"
            );
        }
    }

    #[test]
    fn todays_linux_and_macos_map_to_sysctls() {
        let get = |name| kernel_settings(&SynProfile::builtin(name).unwrap());
        let linux = KernelSynSettings {
            syn_retries: 6,
            linear_timeouts: 4,
            connection_timer: None,
        };
        assert_eq!(get("linux-6.5"), Ok(linux));
        assert_eq!(get("linux-6.5-measured"), Ok(linux));
        assert_eq!(
            get("linux-3.7"),
            Ok(KernelSynSettings {
                syn_retries: 6,
                linear_timeouts: 0,
                connection_timer: None
            })
        );
        assert_eq!(
            get("macos"),
            Ok(KernelSynSettings {
                connection_timer: Some(Nanos::from_secs(75)),
                ..linux
            })
        );
    }

    #[test]
    fn three_second_profiles_are_refused_not_faked() {
        for name in [
            "windows-7",
            "windows-9x-nt",
            "windows-2000",
            "linux-2.2",
            "solaris-2.7",
        ] {
            let result = kernel_settings(&SynProfile::builtin(name).unwrap());
            assert!(
                matches!(result, Err(UnsupportedProfile::InitialTimeout { .. })),
                "{name}: {result:?}"
            );
        }
    }
}
