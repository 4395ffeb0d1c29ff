//! The WAN emulator's driver: real packets from an NFQUEUE queue on the
//! router's FORWARD hook, fates from the sans-IO [`Link`]s, verdicts at the
//! right instant.
//!
//! One thread, already inside the router's namespace, runs the loop:
//!
//! 1. receive every pending packet without blocking (in bursts of 16
//!    datagrams), stamp it with `CLOCK_MONOTONIC`, find its link (source
//!    address in a client prefix: upstream; destination: downstream; else
//!    unmatched and accepted at once), ask the link for its fate;
//! 2. a dropped packet gets `NF_DROP` at once; a released one goes into a
//!    min-heap keyed by (release instant, arrival order);
//! 3. every due packet gets `NF_ACCEPT`; all verdicts of a round go to the
//!    kernel in one batched `send`;
//! 4. sleep in `poll` on the netlink socket and a timerfd armed (absolute,
//!    nanoseconds) `spin_us` before the next release, then spin (receiving
//!    without blocking) until it is due. A timerfd alone wakes 20–110 µs
//!    late on a virtual machine, later the longer it slept (measured with
//!    the `haltpoll` idle driver); the spin makes releases late by a few
//!    microseconds instead, at the cost of up to `spin_us` of CPU per
//!    wake-up. `poll`'s own millisecond timeout serves only to look at the
//!    stop flag.
//!
//! **When the kernel's queue overflows.** The queue is bound fail-open
//! (`NFQA_CFG_F_FAIL_OPEN`) and the rule uses `--queue-bypass`: a packet the
//! emulator cannot take is accepted undelayed rather than dropped, so the
//! testbed never adds loss it did not decide. Such a packet also escapes the
//! delay, so every sign of it is counted in [`WanStats`]:
//! `kernel_overflows` (episodes: the socket reported `ENOBUFS`, or the
//! packets held reached `queue_maxlen`) and `kernel_bypassed_packets` (gaps
//! in the kernel's consecutive packet ids: packets the socket could not
//! take). Packets passed while the queue was full cannot be counted one by
//! one, since the kernel numbers only the packets it queues, hence the
//! episode count. A run whose stats show either counter non-zero did not
//! emulate the configured WAN for every packet and should say so. With the defaults (64 MiB socket
//! buffer, 65 536 queued packets, 128-byte copies) neither happens below the
//! rates recorded in `bench/wan/README.md`.
//!
//! **On stop** every held packet is accepted at once, packets still in the
//! socket are accepted too, and the queue is unbound.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use vantage_core::config::Checker;
use vantage_core::Nanos;
use vantage_sys::nfqueue::{
    CopyMode, Message, NfqError, PacketView, Queue, QueueConfig, Received, Verdict, VerdictBatch,
};

use super::clock::{monotonic_now, thread_cpu_time, WakeTimer};
use super::link::{ConfigError, DropReason, Fate, Link, LinkConfig};
use super::prefix::ClientPrefix;

/// Datagrams read between two checks for due releases.
const RECEIVE_BURST: usize = 16;
/// Longest sleep between two looks at the stop flag.
const STOP_CHECK_MS: i32 = 20;
/// Bound on datagrams drained from the socket on stop.
const DRAIN_MAX_DATAGRAMS: usize = 1 << 20;
/// Most link rules one emulator takes.
pub const MAX_LINK_RULES: usize = 4096;

fn default_queue_maxlen() -> u32 {
    65_536
}

fn default_recv_buffer_bytes() -> usize {
    64 << 20
}

fn default_copy_range() -> u32 {
    128
}

fn default_spin_us() -> u32 {
    100
}

/// The emulated links of one client prefix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRule {
    /// Clients this rule covers (`10.78.0.0/16`, or one address).
    pub client: ClientPrefix,
    /// Client → server: packets whose source is in `client`.
    #[serde(default)]
    pub upstream: LinkConfig,
    /// Server → client: packets whose destination is in `client`.
    #[serde(default)]
    pub downstream: LinkConfig,
}

impl LinkRule {
    /// The same link configuration both ways (`delay_ms` is one-way, so
    /// the round trip gets twice it).
    pub fn symmetric(client: ClientPrefix, link: LinkConfig) -> LinkRule {
        LinkRule {
            client,
            upstream: link.clone(),
            downstream: link,
        }
    }
}

/// The emulator's configuration. A packet takes the first rule whose
/// client prefix contains its source (upstream) and otherwise the first
/// whose prefix contains its destination (downstream).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WanConfig {
    /// NFQUEUE queue number, the rule's `--queue-num`.
    #[serde(default)]
    pub queue_num: u16,
    /// Packets the kernel may hold for the emulator; must exceed packet
    /// rate × longest delay (1 ≤ queue_maxlen ≤ 16777216).
    #[serde(default = "default_queue_maxlen")]
    pub queue_maxlen: u32,
    /// Netlink socket receive buffer, set with `SO_RCVBUFFORCE`
    /// (65536 ≤ recv_buffer_bytes ≤ 1073741824).
    #[serde(default = "default_recv_buffer_bytes")]
    pub recv_buffer_bytes: usize,
    /// Bytes of each packet copied to the emulator; the IPv4 header is all
    /// it reads (20 ≤ copy_range ≤ 65535).
    #[serde(default = "default_copy_range")]
    pub copy_range: u32,
    /// Wake this long before a release and spin to it, µs; 0 sleeps until
    /// the release instant and accepts the wake-up latency
    /// (0 ≤ spin_us ≤ 10000). The cost is CPU: up to `spin_us` per
    /// wake-up, and a whole core once releases come more often than every
    /// `spin_us` (above 10 000 packets/s with the default 100 µs).
    #[serde(default = "default_spin_us")]
    pub spin_us: u32,
    /// Link rules, tried in order.
    pub links: Vec<LinkRule>,
}

impl WanConfig {
    /// Default queue parameters and these rules.
    pub fn new(queue_num: u16, links: Vec<LinkRule>) -> WanConfig {
        WanConfig {
            queue_num,
            queue_maxlen: default_queue_maxlen(),
            recv_buffer_bytes: default_recv_buffer_bytes(),
            copy_range: default_copy_range(),
            spin_us: default_spin_us(),
            links,
        }
    }

    /// Reads a configuration from TOML text; `origin` (a file name) goes
    /// into the error.
    pub fn from_toml(text: &str, origin: &str) -> Result<WanConfig, WanError> {
        let c: Checker<WanError> = Checker::new(origin, text);
        let config: WanConfig = c.deserialize()?;
        config.validate().map_err(|e| {
            c.fail(
                &e.key,
                format!("= {} is out of range (allowed: {})", e.value, e.allowed),
            )
        })?;
        Ok(config)
    }

    /// Checks every value; the error names the key path and allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let out_of_range = |key: &str, value: String, allowed: &'static str| ConfigError {
            key: key.to_string(),
            value,
            allowed,
        };
        if !(1..=1 << 24).contains(&self.queue_maxlen) {
            return Err(out_of_range(
                "queue_maxlen",
                self.queue_maxlen.to_string(),
                "1 ≤ queue_maxlen ≤ 16777216",
            ));
        }
        if !(1 << 16..=1 << 30).contains(&self.recv_buffer_bytes) {
            return Err(out_of_range(
                "recv_buffer_bytes",
                self.recv_buffer_bytes.to_string(),
                "65536 ≤ recv_buffer_bytes ≤ 1073741824",
            ));
        }
        if !(20..=65_535).contains(&self.copy_range) {
            return Err(out_of_range(
                "copy_range",
                self.copy_range.to_string(),
                "20 ≤ copy_range ≤ 65535",
            ));
        }
        if self.spin_us > 10_000 {
            return Err(out_of_range(
                "spin_us",
                self.spin_us.to_string(),
                "0 ≤ spin_us ≤ 10000",
            ));
        }
        if self.links.is_empty() || self.links.len() > MAX_LINK_RULES {
            return Err(out_of_range(
                "links",
                format!("{} rules", self.links.len()),
                "1 to 4096 link rules",
            ));
        }
        for (i, rule) in self.links.iter().enumerate() {
            rule.upstream
                .validate()
                .map_err(|e| e.within(&format!("links[{i}].upstream")))?;
            rule.downstream
                .validate()
                .map_err(|e| e.within(&format!("links[{i}].downstream")))?;
        }
        Ok(())
    }
}

/// Errors of the emulator, naming what failed.
#[derive(Debug, thiserror::Error)]
pub enum WanError {
    #[error("WAN configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("WAN configuration {0}")]
    File(#[from] vantage_core::config::ConfigError),
    #[error("WAN emulator: {0}")]
    Queue(#[from] NfqError),
    #[error("WAN emulator: {operation}: {source}")]
    Io {
        operation: &'static str,
        #[source]
        source: io::Error,
    },
}

/// Counts of one direction of one link rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DirectionStats {
    /// Packets that entered the link.
    pub packets: u64,
    /// Their bytes (IP header on).
    pub bytes: u64,
    /// Packets accepted (after their delay, or on stop).
    pub released: u64,
    /// Packets dropped by random loss.
    pub dropped_loss: u64,
    /// Packets tail-dropped by the full bottleneck queue.
    pub dropped_queue: u64,
}

impl DirectionStats {
    /// Packets neither released nor dropped (non-zero only while running).
    pub fn in_flight(&self) -> u64 {
        self.packets
            .saturating_sub(self.released + self.dropped_loss + self.dropped_queue)
    }
}

/// Counts of one link rule, both directions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LinkStats {
    /// The rule's client prefix.
    pub client: String,
    /// Client → server.
    pub upstream: DirectionStats,
    /// Server → client.
    pub downstream: DirectionStats,
}

/// What one run of the emulator did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WanStats {
    /// Per link rule, in configuration order.
    pub links: Vec<LinkStats>,
    /// Packets no rule matched (or not IPv4), accepted at once.
    pub unmatched: u64,
    /// Most packets held at once.
    pub max_held: u64,
    /// Overflow episodes: the socket reported `ENOBUFS`, or the packets
    /// held reached `queue_maxlen`. With fail-open the kernel then accepts
    /// packets without delay. Must be 0 for a faithful run.
    pub kernel_overflows: u64,
    /// Packets the kernel could not hand to the emulator (gaps in the
    /// consecutive packet ids); fail-open accepted them undelayed. Must be 0
    /// for a faithful run.
    pub kernel_bypassed_packets: u64,
    /// Verdicts the kernel refused (unknown packet id); expected 0.
    pub verdict_errors: u64,
    /// Packets that arrived while stopping and were accepted undelayed.
    pub accepted_at_stop: u64,
    /// Mean lateness of releases against their scheduled instants, µs.
    pub release_lateness_mean_us: f64,
    /// 99th percentile of the lateness, µs (upper edge of its histogram
    /// bin: 1 µs wide below 1 ms, 100 µs wide above).
    pub release_lateness_p99_us: f64,
    /// Largest lateness of a release, µs.
    pub release_lateness_max_us: f64,
    /// Wall-clock duration of the run, s.
    pub elapsed_s: f64,
    /// CPU time the emulator's thread used, s (kernel work done in its
    /// system calls, such as forwarding released packets, included).
    pub cpu_s: f64,
    /// `queue_maxlen` in force.
    pub queue_maxlen: u32,
    /// The socket's receive buffer as the kernel reported it.
    pub recv_buffer_bytes: usize,
}

impl WanStats {
    /// Every packet the emulator saw.
    pub fn packets_seen(&self) -> u64 {
        self.unmatched
            + self
                .links
                .iter()
                .map(|l| l.upstream.packets + l.downstream.packets)
                .sum::<u64>()
    }

    /// True when the kernel let packets past the emulator (see
    /// `kernel_overflows` and `kernel_bypassed_packets`).
    pub fn kernel_interfered(&self) -> bool {
        self.kernel_overflows > 0 || self.kernel_bypassed_packets > 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Upstream = 0,
    Downstream = 1,
}

/// Index of the link direction a packet belongs to (`rule * 2 +
/// direction`), from its IPv4 header; `None` for unmatched or non-IPv4.
fn classify(rules: &[ClientPrefix], ip_packet: &[u8]) -> Option<usize> {
    if ip_packet.len() < 20 || ip_packet[0] >> 4 != 4 {
        return None;
    }
    let source = Ipv4Addr::new(ip_packet[12], ip_packet[13], ip_packet[14], ip_packet[15]);
    let destination = Ipv4Addr::new(ip_packet[16], ip_packet[17], ip_packet[18], ip_packet[19]);
    if let Some(rule) = rules.iter().position(|p| p.contains(source)) {
        return Some(rule * 2 + Direction::Upstream as usize);
    }
    rules
        .iter()
        .position(|p| p.contains(destination))
        .map(|rule| rule * 2 + Direction::Downstream as usize)
}

/// How late releases are against their scheduled instants: 1 µs bins below
/// 1 ms, 100 µs bins up to 100 ms; the last bin also takes everything later
/// and reports the maximum.
struct LatenessHistogram {
    bins: Vec<u64>,
    count: u64,
    sum: Nanos,
    max: Nanos,
}

impl LatenessHistogram {
    const FINE_BINS: u64 = 1000;
    const COARSE_BINS: u64 = 990;

    fn new() -> Self {
        LatenessHistogram {
            bins: vec![0; (Self::FINE_BINS + Self::COARSE_BINS) as usize],
            count: 0,
            sum: Nanos::ZERO,
            max: Nanos::ZERO,
        }
    }

    fn record(&mut self, lateness: Nanos) {
        let us = lateness.as_nanos() / 1000;
        let bin = if us < Self::FINE_BINS {
            us
        } else {
            Self::FINE_BINS + ((us - Self::FINE_BINS) / 100).min(Self::COARSE_BINS - 1)
        };
        self.bins[bin as usize] += 1;
        self.count += 1;
        self.sum += lateness;
        self.max = self.max.max(lateness);
    }

    fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum.as_nanos() as f64 / self.count as f64 / 1e3
        }
    }

    /// Upper edge of the bin holding quantile `q`, in µs (0 when empty).
    fn quantile_us(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((self.count as f64 * q).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (bin, &n) in self.bins.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let bin = bin as u64;
                if bin == Self::FINE_BINS + Self::COARSE_BINS - 1 {
                    // The last bin also holds everything later.
                    return self.max.as_nanos() as f64 / 1e3;
                }
                let edge = if bin < Self::FINE_BINS {
                    bin + 1
                } else {
                    Self::FINE_BINS + (bin - Self::FINE_BINS + 1) * 100
                };
                return edge as f64;
            }
        }
        self.max.as_nanos() as f64 / 1e3
    }
}

/// A packet waiting for its release: (instant, arrival order, packet id,
/// link direction index). Ordered by instant, then arrival.
type Held = Reverse<(Nanos, u64, u32, u32)>;

/// Everything the loop changes, apart from the socket (whose receive
/// buffer the packets borrow).
struct Forwarder {
    rules: Vec<ClientPrefix>,
    links: Vec<Link>,
    rngs: Vec<ChaCha8Rng>,
    directions: Vec<DirectionStats>,
    held: BinaryHeap<Held>,
    batch: VerdictBatch,
    arrivals: u64,
    next_packet_id: u32,
    queue_maxlen: u64,
    at_maxlen: bool,
    stats: WanStats,
    lateness: LatenessHistogram,
}

impl Forwarder {
    fn on_packet(&mut self, packet: &PacketView<'_>, now: Nanos) {
        let gap = packet.packet_id.wrapping_sub(self.next_packet_id);
        if gap > 0 && gap < 1 << 31 {
            self.stats.kernel_bypassed_packets += u64::from(gap);
        }
        self.next_packet_id = packet.packet_id.wrapping_add(1);

        let Some(index) = classify(&self.rules, packet.payload) else {
            self.stats.unmatched += 1;
            self.batch.push(packet.packet_id, Verdict::Accept);
            return;
        };
        let len = packet.original_len();
        let direction = &mut self.directions[index];
        direction.packets += 1;
        direction.bytes += u64::from(len);
        match self.links[index].on_packet(now, len, &mut self.rngs[index]) {
            Fate::Drop(reason) => {
                match reason {
                    DropReason::RandomLoss => direction.dropped_loss += 1,
                    DropReason::QueueFull => direction.dropped_queue += 1,
                }
                self.batch.push(packet.packet_id, Verdict::Drop);
            }
            Fate::Release { at } => {
                self.arrivals += 1;
                self.held
                    .push(Reverse((at, self.arrivals, packet.packet_id, index as u32)));
                let held = self.held.len() as u64;
                self.stats.max_held = self.stats.max_held.max(held);
                if held >= self.queue_maxlen {
                    if !self.at_maxlen {
                        self.stats.kernel_overflows += 1;
                    }
                    self.at_maxlen = true;
                }
            }
        }
    }

    /// A packet that arrived while stopping: accepted without delay.
    fn accept_at_stop(&mut self, packet: &PacketView<'_>) {
        self.next_packet_id = packet.packet_id.wrapping_add(1);
        self.batch.push(packet.packet_id, Verdict::Accept);
        self.stats.accepted_at_stop += 1;
        match classify(&self.rules, packet.payload) {
            None => self.stats.unmatched += 1,
            Some(index) => {
                let direction = &mut self.directions[index];
                direction.packets += 1;
                direction.bytes += u64::from(packet.original_len());
                direction.released += 1;
            }
        }
    }

    /// Moves every packet due at `now` into the verdict batch.
    fn release_due(&mut self, now: Nanos) {
        while let Some(&Reverse((at, _, packet_id, index))) = self.held.peek() {
            if at > now {
                break;
            }
            self.held.pop();
            self.release(packet_id, index);
            self.lateness.record(now - at);
        }
        if self.at_maxlen && (self.held.len() as u64) < self.queue_maxlen {
            self.at_maxlen = false;
        }
    }

    /// Moves every held packet into the verdict batch, in release order
    /// (early: not counted in the lateness).
    fn release_all(&mut self) {
        while let Some(Reverse((_, _, packet_id, index))) = self.held.pop() {
            self.release(packet_id, index);
        }
    }

    fn release(&mut self, packet_id: u32, index: u32) {
        self.batch.push(packet_id, Verdict::Accept);
        self.directions[index as usize].released += 1;
    }

    fn next_release(&self) -> Option<Nanos> {
        self.held.peek().map(|Reverse((at, ..))| *at)
    }

    fn into_stats(mut self) -> WanStats {
        self.stats.links = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| LinkStats {
                client: rule.to_string(),
                upstream: self.directions[2 * i],
                downstream: self.directions[2 * i + 1],
            })
            .collect();
        self.stats.release_lateness_mean_us = self.lateness.mean_us();
        self.stats.release_lateness_p99_us = self.lateness.quantile_us(0.99);
        self.stats.release_lateness_max_us = self.lateness.max.as_nanos() as f64 / 1e3;
        self.stats
    }
}

/// Changes a link's random loss while the emulator runs: a handle shared
/// with the loop, which looks at it once per round (one atomic load when
/// nothing changed). Link direction `2k` is rule `k` upstream, `2k + 1`
/// downstream.
#[derive(Clone, Debug)]
pub struct LossControl {
    /// Bumped by every change; the loop applies changes when it moves.
    version: Arc<AtomicU64>,
    /// Per link direction: the loss in percent as `f64` bits.
    loss_pct: Arc<Vec<AtomicU64>>,
}

impl LossControl {
    fn new(links: &[LinkRule]) -> LossControl {
        let loss_pct = links
            .iter()
            .flat_map(|r| [r.upstream.loss_pct, r.downstream.loss_pct])
            .map(|l| AtomicU64::new(l.to_bits()))
            .collect();
        LossControl {
            version: Arc::new(AtomicU64::new(0)),
            loss_pct: Arc::new(loss_pct),
        }
    }

    /// Sets the loss of both directions of rule `rule` from the next
    /// packet on.
    pub fn set_loss_pct(&self, rule: usize, loss_pct: f64) -> Result<(), ConfigError> {
        let out_of_range = |value: String, allowed| ConfigError {
            key: format!("links[{rule}].loss_pct"),
            value,
            allowed,
        };
        if !(loss_pct.is_finite() && (0.0..=100.0).contains(&loss_pct)) {
            return Err(out_of_range(loss_pct.to_string(), "0 ≤ loss_pct ≤ 100"));
        }
        if 2 * rule + 1 >= self.loss_pct.len() {
            return Err(out_of_range(rule.to_string(), "an existing rule"));
        }
        for k in [2 * rule, 2 * rule + 1] {
            self.loss_pct[k].store(loss_pct.to_bits(), Ordering::Relaxed);
        }
        self.version.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

/// An emulator bound to its queue, ready to run. Binding before the
/// iptables rule exists means no packet is queued before someone listens.
pub struct Emulator {
    queue: Queue,
    forwarder: Forwarder,
    spin: Nanos,
    loss: LossControl,
}

impl Emulator {
    /// Validates `config` and binds its queue in the calling thread's
    /// network namespace (needs `CAP_NET_ADMIN`).
    pub fn bind(config: &WanConfig) -> Result<Emulator, WanError> {
        config.validate()?;
        let queue = Queue::open(&QueueConfig {
            queue_num: config.queue_num,
            copy_mode: CopyMode::Packet {
                copy_range: config.copy_range,
            },
            queue_maxlen: config.queue_maxlen,
            fail_open: true,
            recv_buffer_bytes: Some(config.recv_buffer_bytes),
            no_enobufs: false,
        })?;
        let recv_buffer_bytes = queue.recv_buffer_size()?;
        let mut links = Vec::with_capacity(config.links.len() * 2);
        for rule in &config.links {
            links.push(Link::new(&rule.upstream)?);
            links.push(Link::new(&rule.downstream)?);
        }
        let directions = vec![DirectionStats::default(); links.len()];
        let forwarder = Forwarder {
            rules: config.links.iter().map(|r| r.client).collect(),
            links,
            rngs: Vec::new(),
            directions,
            held: BinaryHeap::new(),
            batch: VerdictBatch::new(config.queue_num),
            arrivals: 0,
            // A freshly bound queue numbers its packets from 1.
            next_packet_id: 1,
            queue_maxlen: u64::from(config.queue_maxlen),
            at_maxlen: false,
            stats: WanStats {
                queue_maxlen: config.queue_maxlen,
                recv_buffer_bytes,
                ..Default::default()
            },
            lateness: LatenessHistogram::new(),
        };
        Ok(Emulator {
            queue,
            forwarder,
            spin: Nanos::from_micros(u64::from(config.spin_us)),
            loss: LossControl::new(&config.links),
        })
    }

    /// A handle that changes the links' loss while [`Emulator::run`] runs.
    pub fn loss_control(&self) -> LossControl {
        self.loss.clone()
    }

    /// The socket's receive buffer as the kernel reports it.
    pub fn recv_buffer_bytes(&self) -> usize {
        self.forwarder.stats.recv_buffer_bytes
    }

    /// Forwards packets until `stop` is set, then releases every held
    /// packet, unbinds and returns the counts. Link direction `k` draws its
    /// random numbers from ChaCha8 seeded with `seed`, stream `k`, so its
    /// fates depend only on its own packets.
    pub fn run(self, stop: &AtomicBool, seed: u64) -> Result<WanStats, WanError> {
        let Emulator {
            mut queue,
            mut forwarder,
            spin,
            loss,
        } = self;
        forwarder.rngs = (0..forwarder.links.len())
            .map(|k| {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(k as u64);
                rng
            })
            .collect();
        let started = monotonic_now();
        let cpu_started = thread_cpu_time();
        let forwarded = forward_until_stopped(&mut queue, &mut forwarder, stop, spin, &loss);
        let stopped = stop_forwarding(queue, &mut forwarder);
        forwarder.stats.elapsed_s = (monotonic_now() - started).as_secs_f64();
        forwarder.stats.cpu_s = (thread_cpu_time() - cpu_started).as_secs_f64();
        forwarded?;
        stopped?;
        Ok(forwarder.into_stats())
    }
}

/// Binds `config.queue_num`, forwards until `stop` is set, and returns the
/// counts. Blocks the calling thread, which must already be in the router's
/// network namespace.
pub fn run(config: &WanConfig, stop: &AtomicBool, seed: u64) -> Result<WanStats, WanError> {
    Emulator::bind(config)?.run(stop, seed)
}

fn receive_pending(queue: &mut Queue, forwarder: &mut Forwarder) -> Result<bool, WanError> {
    for _ in 0..RECEIVE_BURST {
        match queue.recv()? {
            None => return Ok(true),
            Some(Received::Overrun) => forwarder.stats.kernel_overflows += 1,
            Some(Received::Messages(messages)) => {
                for message in messages {
                    match message.map_err(NfqError::from)? {
                        Message::Packet(packet) => forwarder.on_packet(&packet, monotonic_now()),
                        Message::Error { .. } => forwarder.stats.verdict_errors += 1,
                        Message::Ack { .. } | Message::Other { .. } => {}
                    }
                }
            }
        }
    }
    Ok(false)
}

fn forward_until_stopped(
    queue: &mut Queue,
    forwarder: &mut Forwarder,
    stop: &AtomicBool,
    spin: Nanos,
    loss: &LossControl,
) -> Result<(), WanError> {
    let mut applied_version = 0;
    let mut timer = WakeTimer::new().map_err(|source| WanError::Io {
        operation: "timerfd_create(CLOCK_MONOTONIC)",
        source,
    })?;
    while !stop.load(Ordering::Relaxed) {
        let version = loss.version.load(Ordering::Acquire);
        if version != applied_version {
            applied_version = version;
            for (link, pct) in forwarder.links.iter_mut().zip(loss.loss_pct.iter()) {
                // In range: `LossControl::set_loss_pct` checked it.
                let _ = link.set_loss_pct(f64::from_bits(pct.load(Ordering::Relaxed)));
            }
        }
        let drained = receive_pending(queue, forwarder)?;
        forwarder.release_due(monotonic_now());
        if !forwarder.batch.is_empty() {
            queue.send_verdicts(&mut forwarder.batch)?;
        }
        if !drained {
            continue;
        }
        let next_release = forwarder.next_release();
        if let Some(at) = next_release {
            if at.saturating_sub(monotonic_now()) <= spin {
                std::hint::spin_loop();
                continue;
            }
        }
        timer
            .set(next_release.map(|at| at.saturating_sub(spin)))
            .map_err(|source| WanError::Io {
                operation: "timerfd_settime",
                source,
            })?;
        let mut fds = [
            libc::pollfd {
                fd: queue.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: timer.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, STOP_CHECK_MS) };
        if ready < 0 {
            let source = io::Error::last_os_error();
            if source.raw_os_error() != Some(libc::EINTR) {
                return Err(WanError::Io {
                    operation: "poll on the queue and the timer",
                    source,
                });
            }
        } else if fds[1].revents & libc::POLLIN != 0 {
            timer.acknowledge();
        }
    }
    Ok(())
}

/// Accepts every held packet and whatever is still in the socket, then
/// unbinds. Runs after a stop and after an error alike.
fn stop_forwarding(mut queue: Queue, forwarder: &mut Forwarder) -> Result<(), WanError> {
    forwarder.release_all();
    // Verdicts may be left over from an interrupted round; send them too.
    queue.send_verdicts(&mut forwarder.batch)?;
    for _ in 0..DRAIN_MAX_DATAGRAMS {
        match queue.recv()? {
            None => break,
            Some(Received::Overrun) => forwarder.stats.kernel_overflows += 1,
            Some(Received::Messages(messages)) => {
                for message in messages {
                    match message.map_err(NfqError::from)? {
                        Message::Packet(packet) => forwarder.accept_at_stop(&packet),
                        Message::Error { .. } => forwarder.stats.verdict_errors += 1,
                        Message::Ack { .. } | Message::Other { .. } => {}
                    }
                }
            }
        }
        if forwarder.batch.len() >= 1024 {
            queue.send_verdicts(&mut forwarder.batch)?;
        }
    }
    queue.send_verdicts(&mut forwarder.batch)?;
    queue.unbind()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_header(source: [u8; 4], destination: [u8; 4]) -> Vec<u8> {
        let mut header = vec![0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0];
        header.extend_from_slice(&source);
        header.extend_from_slice(&destination);
        header
    }

    #[test]
    fn packets_take_the_link_of_their_client() {
        let rules: Vec<ClientPrefix> = vec![
            "10.78.0.0/24".parse().unwrap(),
            "10.78.0.0/16".parse().unwrap(),
        ];
        let server = [10, 77, 0, 2];
        assert_eq!(
            classify(&rules, &ipv4_header([10, 78, 0, 2], server)),
            Some(0)
        );
        assert_eq!(
            classify(&rules, &ipv4_header(server, [10, 78, 0, 2])),
            Some(1)
        );
        assert_eq!(
            classify(&rules, &ipv4_header([10, 78, 5, 2], server)),
            Some(2)
        );
        assert_eq!(
            classify(&rules, &ipv4_header(server, [10, 78, 5, 2])),
            Some(3)
        );
        assert_eq!(
            classify(&rules, &ipv4_header(server, [192, 168, 1, 1])),
            None
        );
        // Not IPv4, or too short to tell.
        let mut ipv6 = ipv4_header([10, 78, 0, 2], server);
        ipv6[0] = 0x60;
        assert_eq!(classify(&rules, &ipv6), None);
        assert_eq!(classify(&rules, &[0x45, 0, 0]), None);
    }

    #[test]
    fn configuration_reads_from_toml_and_names_bad_keys() {
        let text = r#"
            queue_num = 3
            [[links]]
            client = "10.78.0.0/16"
            upstream = { delay_ms = 25, loss_pct = 1 }
            downstream = { delay_ms = 25 }
        "#;
        let config = WanConfig::from_toml(text, "wan.toml").unwrap();
        assert_eq!(config.queue_num, 3);
        assert_eq!(config.queue_maxlen, 65_536);
        assert_eq!(config.copy_range, 128);
        assert_eq!(config.links[0].upstream.loss_pct, 1.0);

        let bad = text.replace("loss_pct = 1", "loss_pct = 101");
        let error = WanConfig::from_toml(&bad, "wan.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("wan.toml:5: `links[0].upstream.loss_pct` = 101"),
            "{error}"
        );
        let unknown = text.replace("queue_num = 3", "queue = 3");
        let error = WanConfig::from_toml(&unknown, "wan.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("wan.toml:2: unknown field `queue`"),
            "{error}"
        );
        let no_links = WanConfig::new(0, Vec::new()).validate().unwrap_err();
        assert_eq!(no_links.key, "links");
    }

    #[test]
    fn loss_control_checks_and_records_changes() {
        let rule = LinkRule::symmetric(
            "10.78.0.0/24".parse().unwrap(),
            LinkConfig {
                loss_pct: 1.0,
                ..Default::default()
            },
        );
        let control = LossControl::new(&[rule]);
        assert_eq!(
            f64::from_bits(control.loss_pct[1].load(Ordering::Relaxed)),
            1.0
        );
        control.set_loss_pct(0, 0.1).unwrap();
        assert_eq!(control.version.load(Ordering::Relaxed), 1);
        for k in 0..2 {
            assert_eq!(
                f64::from_bits(control.loss_pct[k].load(Ordering::Relaxed)),
                0.1
            );
        }
        assert_eq!(
            control.set_loss_pct(1, 0.1).unwrap_err().key,
            "links[1].loss_pct"
        );
        assert!(control.set_loss_pct(0, -1.0).is_err());
        assert_eq!(
            control.version.load(Ordering::Relaxed),
            1,
            "refusals change nothing"
        );
    }

    #[test]
    fn lateness_quantiles_come_from_the_histogram() {
        let mut h = LatenessHistogram::new();
        assert_eq!(h.quantile_us(0.99), 0.0);
        for us in 0..99u64 {
            h.record(Nanos::from_micros(us));
        }
        h.record(Nanos::from_millis(5));
        assert_eq!(h.quantile_us(0.5), 50.0);
        assert_eq!(h.quantile_us(0.99), 99.0);
        assert_eq!(h.quantile_us(1.0), 5100.0);
        assert!((h.mean_us() - (4851.0 + 5000.0) / 100.0).abs() < 1e-9);
        h.record(Nanos::from_micros(99_950));
        assert_eq!(h.quantile_us(1.0), 99_950.0, "last bin: the maximum");
        h.record(Nanos::from_secs(10));
        assert_eq!(h.quantile_us(1.0), 10_000_000.0, "last bin: the maximum");
    }

    #[test]
    fn stats_serialize_with_every_counter() {
        let stats = WanStats {
            links: vec![LinkStats {
                client: "10.78.0.0/16".into(),
                upstream: DirectionStats {
                    packets: 10,
                    bytes: 1000,
                    released: 8,
                    dropped_loss: 1,
                    dropped_queue: 1,
                },
                downstream: DirectionStats::default(),
            }],
            unmatched: 2,
            ..Default::default()
        };
        assert_eq!(stats.packets_seen(), 12);
        assert!(!stats.kernel_interfered());
        let json = serde_json::to_value(&stats).unwrap();
        assert_eq!(json["links"][0]["upstream"]["dropped_queue"], 1);
        assert_eq!(json["kernel_overflows"], 0);
        assert_eq!(json["kernel_bypassed_packets"], 0);
    }
}
