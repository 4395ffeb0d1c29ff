//! One direction of one emulated WAN link, as a sans-IO state machine.
//!
//! A [`Link`] is told when a packet arrives and how long it is, and answers
//! when the packet leaves the link or why it is lost ([`Fate`]). It owns no
//! clock and no randomness: the caller passes the time ([`Nanos`]) and a
//! seeded [`rand::Rng`], so one seed gives the same fates bit for bit, and
//! unit tests drive it with explicit time.
//!
//! What happens to a packet, in order (the DummyNet pipe the Certes testbed
//! used, and `netem`, apply the same stages):
//!
//! 1. **random loss** — dropped with probability `loss_pct`/100, independently
//!    of every other packet; a lost packet takes no queue room;
//! 2. **bottleneck queue and rate** (only when `rate_mbit` > 0) — the link
//!    transmits one packet at a time at `rate_mbit`; a packet waits behind
//!    those not yet fully transmitted, and is tail-dropped when
//!    `queue_packets` packets (the one being transmitted included) are
//!    already there;
//! 3. **propagation delay and jitter** — `delay_ms` plus a jitter sample
//!    from [`JitterDistribution`], never negative in total;
//! 4. **order** — with `order_preserving` (the default) a packet never
//!    leaves before the one that entered the link before it: its release is
//!    pushed back to that packet's. Jitter then delays packets rather than
//!    reordering them, as on a real path, and the mean delay grows above
//!    `delay_ms` when jitter is large compared with the packet spacing.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand_distr::{Distribution, Exp1, StandardNormal};
use serde::{Deserialize, Serialize};
use vantage_core::Nanos;

/// Largest one-way delay or jitter accepted, in milliseconds (one minute).
pub const MAX_DELAY_MS: f64 = 60_000.0;
/// Largest rate accepted, in Mbit/s (100 Gbit/s).
pub const MAX_RATE_MBIT: f64 = 100_000.0;
/// Largest bottleneck queue accepted, in packets.
pub const MAX_QUEUE_PACKETS: u32 = 1_000_000;
/// Exponential jitter samples are capped at this many times `jitter_ms`
/// (probability of reaching the cap: e⁻²⁰ ≈ 2·10⁻⁹).
const EXPONENTIAL_CAP: f64 = 20.0;
/// Normal jitter is truncated at this many standard deviations.
const NORMAL_TRUNCATION_SD: f64 = 3.0;
/// Bound on redraws when a normal sample falls outside the truncation.
const NORMAL_MAX_REDRAWS: usize = 32;

/// A configuration value out of its allowed range, named by its key path
/// (e.g. `links[0].upstream.loss_pct`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{key} = {value} is out of range (allowed: {allowed})")]
pub struct ConfigError {
    pub key: String,
    pub value: String,
    pub allowed: &'static str,
}

impl ConfigError {
    /// The same error with `prefix.` in front of its key.
    pub fn within(mut self, prefix: &str) -> Self {
        self.key = format!("{prefix}.{}", self.key);
        self
    }
}

/// Distribution of the jitter added to each packet's delay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterDistribution {
    /// Uniform over `[-jitter_ms, +jitter_ms]`: mean delay stays `delay_ms`.
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter_ms`, truncated at ±3 standard
    /// deviations (redrawn outside): mean delay stays `delay_ms`.
    Normal,
    /// Exponential with mean `jitter_ms`, positive only: a long tail of late
    /// packets, as queueing in a loaded path produces; the mean delay is
    /// `delay_ms + jitter_ms`. Capped at 20 × `jitter_ms`.
    Exponential,
}

impl JitterDistribution {
    pub const NAMES: &'static str = "uniform, normal, exponential";

    /// A sample in nanoseconds for a scale of `jitter_ns` (half-width,
    /// standard deviation or mean, by distribution).
    fn sample_ns<R: Rng + ?Sized>(self, jitter_ns: f64, rng: &mut R) -> f64 {
        match self {
            JitterDistribution::Uniform => rng.gen_range(-jitter_ns..=jitter_ns),
            JitterDistribution::Normal => {
                let limit = NORMAL_TRUNCATION_SD;
                let mut z: f64 = StandardNormal.sample(rng);
                for _ in 0..NORMAL_MAX_REDRAWS {
                    if z.abs() <= limit {
                        break;
                    }
                    z = StandardNormal.sample(rng);
                }
                z.clamp(-limit, limit) * jitter_ns
            }
            JitterDistribution::Exponential => {
                let x: f64 = Exp1.sample(rng);
                x.min(EXPONENTIAL_CAP) * jitter_ns
            }
        }
    }
}

impl fmt::Display for JitterDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JitterDistribution::Uniform => "uniform",
            JitterDistribution::Normal => "normal",
            JitterDistribution::Exponential => "exponential",
        })
    }
}

impl FromStr for JitterDistribution {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "uniform" => Ok(JitterDistribution::Uniform),
            "normal" => Ok(JitterDistribution::Normal),
            "exponential" => Ok(JitterDistribution::Exponential),
            other => Err(format!(
                "unknown jitter distribution {other:?} (known: {})",
                JitterDistribution::NAMES
            )),
        }
    }
}

/// One direction of a link, as configured (TOML keys are the field names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinkConfig {
    /// One-way propagation delay, ms (0 ≤ delay_ms ≤ 60000).
    pub delay_ms: f64,
    /// Jitter scale, ms (0 ≤ jitter_ms ≤ 60000); its meaning depends on
    /// `jitter`.
    pub jitter_ms: f64,
    /// Jitter distribution.
    pub jitter: JitterDistribution,
    /// Never release a packet before the previous one of this link
    /// direction.
    pub order_preserving: bool,
    /// Independent loss probability per packet, percent (0 ≤ loss_pct ≤ 100).
    pub loss_pct: f64,
    /// Bottleneck rate, Mbit/s (0 = unlimited, else ≤ 100000).
    pub rate_mbit: f64,
    /// Bottleneck queue, packets, including the one in transmission
    /// (1 ≤ queue_packets ≤ 1000000); used only when `rate_mbit` > 0.
    pub queue_packets: u32,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay_ms: 0.0,
            jitter_ms: 0.0,
            jitter: JitterDistribution::Uniform,
            order_preserving: true,
            loss_pct: 0.0,
            rate_mbit: 0.0,
            queue_packets: 1000,
        }
    }
}

fn check_range(
    key: &str,
    value: f64,
    min: f64,
    max: f64,
    allowed: &'static str,
) -> Result<(), ConfigError> {
    if value.is_finite() && value >= min && value <= max {
        Ok(())
    } else {
        Err(ConfigError {
            key: key.to_string(),
            value: value.to_string(),
            allowed,
        })
    }
}

impl LinkConfig {
    /// Checks every value against its allowed range; the error names the
    /// key and the range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range(
            "delay_ms",
            self.delay_ms,
            0.0,
            MAX_DELAY_MS,
            "0 ≤ delay_ms ≤ 60000",
        )?;
        check_range(
            "jitter_ms",
            self.jitter_ms,
            0.0,
            MAX_DELAY_MS,
            "0 ≤ jitter_ms ≤ 60000",
        )?;
        check_range("loss_pct", self.loss_pct, 0.0, 100.0, "0 ≤ loss_pct ≤ 100")?;
        check_range(
            "rate_mbit",
            self.rate_mbit,
            0.0,
            MAX_RATE_MBIT,
            "0 (unlimited) ≤ rate_mbit ≤ 100000",
        )?;
        if self.queue_packets == 0 || self.queue_packets > MAX_QUEUE_PACKETS {
            return Err(ConfigError {
                key: "queue_packets".into(),
                value: self.queue_packets.to_string(),
                allowed: "1 ≤ queue_packets ≤ 1000000",
            });
        }
        Ok(())
    }
}

/// Why a packet was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Independent random loss (`loss_pct`).
    RandomLoss,
    /// The bottleneck queue was full (tail drop).
    QueueFull,
}

/// What happens to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Leaves the link at this instant.
    Release { at: Nanos },
    /// Lost.
    Drop(DropReason),
}

/// Counts of one link direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LinkCounters {
    /// Packets offered to the link.
    pub packets: u64,
    /// Their bytes (network header on).
    pub bytes: u64,
    /// Lost to random loss.
    pub dropped_loss: u64,
    /// Tail-dropped by the full bottleneck queue.
    pub dropped_queue: u64,
}

/// One direction of a link: its configuration in integer units plus the
/// bottleneck's and the ordering's state.
#[derive(Clone, Debug)]
pub struct Link {
    delay: Nanos,
    jitter_ns: f64,
    jitter: JitterDistribution,
    order_preserving: bool,
    loss_probability: f64,
    /// Bottleneck rate in bit/s; 0 = unlimited.
    rate_bits_per_s: u64,
    queue_packets: usize,
    /// End-of-transmission instants of the packets in the bottleneck, oldest
    /// first (at most `queue_packets`).
    in_bottleneck: std::collections::VecDeque<Nanos>,
    /// When the bottleneck finishes its last accepted packet.
    busy_until: Nanos,
    /// Release instant of the last packet released.
    last_release: Nanos,
    counters: LinkCounters,
}

impl Link {
    /// A link with `config`, after validating it.
    pub fn new(config: &LinkConfig) -> Result<Link, ConfigError> {
        config.validate()?;
        let rate_bits_per_s = (config.rate_mbit * 1e6).round() as u64;
        Ok(Link {
            delay: Nanos::from_secs_f64(config.delay_ms / 1e3),
            jitter_ns: config.jitter_ms * 1e6,
            jitter: config.jitter,
            order_preserving: config.order_preserving,
            loss_probability: config.loss_pct / 100.0,
            rate_bits_per_s,
            queue_packets: config.queue_packets as usize,
            in_bottleneck: std::collections::VecDeque::new(),
            busy_until: Nanos::ZERO,
            last_release: Nanos::ZERO,
            counters: LinkCounters::default(),
        })
    }

    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Changes the random loss from the next packet on (`loss_pct` in
    /// [0, 100]; out of range is refused and nothing changes).
    pub fn set_loss_pct(&mut self, loss_pct: f64) -> Result<(), ConfigError> {
        check_range("loss_pct", loss_pct, 0.0, 100.0, "0 ≤ loss_pct ≤ 100")?;
        self.loss_probability = loss_pct / 100.0;
        Ok(())
    }

    /// Time to transmit `len_bytes` at the bottleneck rate, rounded up to
    /// the nanosecond; zero when the rate is unlimited.
    pub fn serialization_time(&self, len_bytes: u32) -> Nanos {
        if self.rate_bits_per_s == 0 {
            return Nanos::ZERO;
        }
        let bits_times_ns = u128::from(len_bytes) * 8 * 1_000_000_000;
        let rate = u128::from(self.rate_bits_per_s);
        let ns = bits_times_ns.div_ceil(rate);
        Nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// Decides the fate of a packet of `len_bytes` that arrives at `now`.
    /// Calls must come in non-decreasing `now`.
    pub fn on_packet<R: Rng + ?Sized>(&mut self, now: Nanos, len_bytes: u32, rng: &mut R) -> Fate {
        self.counters.packets += 1;
        self.counters.bytes += u64::from(len_bytes);

        if self.loss_probability > 0.0 && rng.gen::<f64>() < self.loss_probability {
            self.counters.dropped_loss += 1;
            return Fate::Drop(DropReason::RandomLoss);
        }

        let transmitted_at = if self.rate_bits_per_s == 0 {
            now
        } else {
            while self.in_bottleneck.front().is_some_and(|&done| done <= now) {
                self.in_bottleneck.pop_front();
            }
            if self.in_bottleneck.len() >= self.queue_packets {
                self.counters.dropped_queue += 1;
                return Fate::Drop(DropReason::QueueFull);
            }
            let start = now.max(self.busy_until);
            let done = start + self.serialization_time(len_bytes);
            self.busy_until = done;
            self.in_bottleneck.push_back(done);
            done
        };

        let mut release = transmitted_at + self.delay;
        if self.jitter_ns > 0.0 {
            let offset = self.jitter.sample_ns(self.jitter_ns, rng).round();
            release = if offset >= 0.0 {
                release + Nanos(offset as u64)
            } else {
                // Never before the packet has left the bottleneck.
                release
                    .saturating_sub(Nanos(-offset as u64))
                    .max(transmitted_at)
            };
        }
        if self.order_preserving {
            release = release.max(self.last_release);
        }
        self.last_release = self.last_release.max(release);
        Fate::Release { at: release }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn link(config: LinkConfig) -> Link {
        Link::new(&config).expect("valid config")
    }

    fn release_at(fate: Fate) -> Nanos {
        match fate {
            Fate::Release { at } => at,
            Fate::Drop(reason) => panic!("unexpected drop: {reason:?}"),
        }
    }

    #[test]
    fn delay_without_jitter_is_exact() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for delay_ms in [0.0, 0.5, 25.0, 75.0, 0.000_001] {
            let mut l = link(LinkConfig {
                delay_ms,
                ..Default::default()
            });
            let delay = Nanos::from_secs_f64(delay_ms / 1e3);
            for i in 0..100u64 {
                let now = Nanos(1_000_000_000 + i * 12_345);
                assert_eq!(release_at(l.on_packet(now, 1500, &mut rng)), now + delay);
            }
        }
    }

    #[test]
    fn order_is_preserved_under_jitter() {
        for jitter in [
            JitterDistribution::Uniform,
            JitterDistribution::Normal,
            JitterDistribution::Exponential,
        ] {
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            let mut l = link(LinkConfig {
                delay_ms: 10.0,
                jitter_ms: 5.0,
                jitter,
                ..Default::default()
            });
            let mut previous = Nanos::ZERO;
            for i in 0..10_000u64 {
                let at = release_at(l.on_packet(Nanos(i * 100_000), 100, &mut rng));
                assert!(
                    at >= previous,
                    "{jitter}: packet {i} overtook its predecessor"
                );
                assert!(at >= Nanos(i * 100_000), "released before arrival");
                previous = at;
            }
        }
    }

    #[test]
    fn without_order_preservation_jitter_reorders() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut l = link(LinkConfig {
            delay_ms: 10.0,
            jitter_ms: 5.0,
            order_preserving: false,
            ..Default::default()
        });
        let releases: Vec<Nanos> = (0..1000u64)
            .map(|i| release_at(l.on_packet(Nanos(i * 100_000), 100, &mut rng)))
            .collect();
        assert!(releases.windows(2).any(|w| w[1] < w[0]));
    }

    #[test]
    fn jitter_distributions_have_their_documented_spread() {
        let n = 50_000u64;
        let delay = 20.0;
        let jitter = 4.0;
        for (distribution, expected_mean, min, max) in [
            (
                JitterDistribution::Uniform,
                delay,
                delay - jitter,
                delay + jitter,
            ),
            (
                JitterDistribution::Normal,
                delay,
                delay - 3.0 * jitter,
                delay + 3.0 * jitter,
            ),
            (
                JitterDistribution::Exponential,
                delay + jitter,
                delay,
                delay + 20.0 * jitter,
            ),
        ] {
            let mut rng = ChaCha8Rng::seed_from_u64(3);
            let mut l = link(LinkConfig {
                delay_ms: delay,
                jitter_ms: jitter,
                jitter: distribution,
                order_preserving: false,
                ..Default::default()
            });
            let mut sum = 0.0;
            for i in 0..n {
                let now = Nanos(i * 1_000_000);
                let delay_ms =
                    (release_at(l.on_packet(now, 100, &mut rng)) - now).as_secs_f64() * 1e3;
                assert!(
                    delay_ms >= min - 1e-6 && delay_ms <= max + 1e-6,
                    "{distribution}: {delay_ms} outside [{min}, {max}]"
                );
                sum += delay_ms;
            }
            let mean = sum / n as f64;
            assert!(
                (mean - expected_mean).abs() < 0.1,
                "{distribution}: mean {mean} ms, expected {expected_mean}"
            );
        }
    }

    #[test]
    fn large_jitter_never_releases_before_arrival() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut l = link(LinkConfig {
            delay_ms: 1.0,
            jitter_ms: 10.0,
            order_preserving: false,
            ..Default::default()
        });
        for i in 0..10_000u64 {
            let now = Nanos(5_000_000_000 + i * 1_000);
            assert!(release_at(l.on_packet(now, 100, &mut rng)) >= now);
        }
    }

    #[test]
    fn rate_limiter_spaces_back_to_back_packets_by_their_serialization_time() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut l = link(LinkConfig {
            delay_ms: 5.0,
            rate_mbit: 12.0,
            queue_packets: 100,
            ..Default::default()
        });
        assert_eq!(l.serialization_time(1500), Nanos::from_millis(1));
        let now = Nanos::from_secs(1);
        let releases: Vec<Nanos> = (0..10)
            .map(|_| release_at(l.on_packet(now, 1500, &mut rng)))
            .collect();
        for (i, at) in releases.iter().enumerate() {
            let expected = now + Nanos::from_millis(i as u64 + 1) + Nanos::from_millis(5);
            assert_eq!(*at, expected, "packet {i}");
        }
        // An idle link sends the next packet at once.
        let later = Nanos::from_secs(2);
        assert_eq!(
            release_at(l.on_packet(later, 1500, &mut rng)),
            later + Nanos::from_millis(6)
        );
    }

    #[test]
    fn serialization_time_rounds_up() {
        let l = link(LinkConfig {
            rate_mbit: 3.0,
            ..Default::default()
        });
        // 100 B = 800 bit at 3 Mbit/s = 266 666.67 ns.
        assert_eq!(l.serialization_time(100), Nanos(266_667));
        let unlimited = link(LinkConfig::default());
        assert_eq!(unlimited.serialization_time(1500), Nanos::ZERO);
    }

    #[test]
    fn full_queue_tail_drops_until_a_packet_leaves() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut l = link(LinkConfig {
            rate_mbit: 12.0,
            queue_packets: 3,
            ..Default::default()
        });
        let now = Nanos::from_secs(1);
        for _ in 0..3 {
            release_at(l.on_packet(now, 1500, &mut rng));
        }
        assert_eq!(
            l.on_packet(now, 1500, &mut rng),
            Fate::Drop(DropReason::QueueFull)
        );
        assert_eq!(
            l.on_packet(now + Nanos(999_999), 1500, &mut rng),
            Fate::Drop(DropReason::QueueFull)
        );
        // The first packet finished at now + 1 ms: room for one more, which
        // waits behind the two still queued.
        let at = release_at(l.on_packet(now + Nanos::from_millis(1), 1500, &mut rng));
        assert_eq!(at, now + Nanos::from_millis(4));
        assert_eq!(
            l.counters(),
            LinkCounters {
                packets: 6,
                bytes: 9000,
                dropped_loss: 0,
                dropped_queue: 2,
            }
        );
    }

    #[test]
    fn loss_fraction_is_within_the_binomial_bound() {
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let p = 0.03;
        let n = 100_000u64;
        let mut l = link(LinkConfig {
            loss_pct: p * 100.0,
            ..Default::default()
        });
        for i in 0..n {
            let _ = l.on_packet(Nanos(i), 64, &mut rng);
        }
        let c = l.counters();
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        let expected = n as f64 * p;
        assert!(
            (c.dropped_loss as f64 - expected).abs() < 4.0 * sd,
            "{} losses, expected {expected} ± {}",
            c.dropped_loss,
            4.0 * sd
        );
        assert_eq!((c.packets, c.bytes, c.dropped_queue), (n, 64 * n, 0));
    }

    #[test]
    fn loss_changed_during_a_run_applies_from_the_next_packet() {
        let mut l = link(LinkConfig::default());
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for i in 0..100 {
            assert!(matches!(
                l.on_packet(Nanos(i), 100, &mut rng),
                Fate::Release { .. }
            ));
        }
        l.set_loss_pct(100.0).unwrap();
        assert!(matches!(
            l.on_packet(Nanos(100), 100, &mut rng),
            Fate::Drop(DropReason::RandomLoss)
        ));
        assert!(l.set_loss_pct(101.0).is_err());
        assert!(l.set_loss_pct(f64::NAN).is_err());
        assert!(matches!(
            l.on_packet(Nanos(101), 100, &mut rng),
            Fate::Drop(DropReason::RandomLoss)
        ));
    }

    #[test]
    fn no_loss_and_full_loss_are_exact() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut all = link(LinkConfig {
            loss_pct: 100.0,
            ..Default::default()
        });
        let mut none = link(LinkConfig::default());
        for i in 0..1000 {
            assert_eq!(
                all.on_packet(Nanos(i), 64, &mut rng),
                Fate::Drop(DropReason::RandomLoss)
            );
            assert!(matches!(
                none.on_packet(Nanos(i), 64, &mut rng),
                Fate::Release { .. }
            ));
        }
    }

    #[test]
    fn same_seed_same_fates() {
        let config = LinkConfig {
            delay_ms: 10.0,
            jitter_ms: 3.0,
            jitter: JitterDistribution::Normal,
            loss_pct: 5.0,
            rate_mbit: 10.0,
            queue_packets: 20,
            ..Default::default()
        };
        let fates = |seed: u64| -> Vec<Fate> {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut l = link(config.clone());
            (0..5000u64)
                .map(|i| l.on_packet(Nanos(i * 200_000), 500 + (i % 1000) as u32, &mut rng))
                .collect()
        };
        assert_eq!(fates(11), fates(11));
        assert_ne!(fates(11), fates(12));
    }

    #[test]
    fn validation_names_the_key_and_the_range() {
        let cases: Vec<(LinkConfig, &str)> = vec![
            (
                LinkConfig {
                    delay_ms: -1.0,
                    ..Default::default()
                },
                "delay_ms",
            ),
            (
                LinkConfig {
                    delay_ms: f64::NAN,
                    ..Default::default()
                },
                "delay_ms",
            ),
            (
                LinkConfig {
                    jitter_ms: 1e9,
                    ..Default::default()
                },
                "jitter_ms",
            ),
            (
                LinkConfig {
                    loss_pct: 100.5,
                    ..Default::default()
                },
                "loss_pct",
            ),
            (
                LinkConfig {
                    rate_mbit: f64::INFINITY,
                    ..Default::default()
                },
                "rate_mbit",
            ),
            (
                LinkConfig {
                    queue_packets: 0,
                    ..Default::default()
                },
                "queue_packets",
            ),
        ];
        for (config, key) in cases {
            let error = config.validate().expect_err(key);
            assert_eq!(error.key, key);
            let message = error.within("links[2].upstream").to_string();
            assert!(
                message.starts_with(&format!("links[2].upstream.{key} = ")),
                "{message}"
            );
            assert!(message.contains("allowed"), "{message}");
        }
        assert!(LinkConfig::default().validate().is_ok());
    }

    #[test]
    fn config_reads_from_toml_with_defaults_and_rejects_unknown_keys() {
        let config: LinkConfig = toml::from_str("delay_ms = 25\njitter = \"exponential\"").unwrap();
        assert_eq!(config.delay_ms, 25.0);
        assert_eq!(config.jitter, JitterDistribution::Exponential);
        assert!(config.order_preserving);
        assert_eq!(config.queue_packets, 1000);
        let error = toml::from_str::<LinkConfig>("delay = 25")
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `delay`"), "{error}");
        assert_eq!("normal".parse(), Ok(JitterDistribution::Normal));
        assert!("pareto".parse::<JitterDistribution>().is_err());
    }
}
