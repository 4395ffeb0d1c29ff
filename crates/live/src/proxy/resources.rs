//! Socket buffers and idle client connections managed live (`[resources]`;
//! proxy thesis, Sections 3 and 5): the driver of `core::resources`, as
//! the simulator (`sim::proxy::world`) drives it, against the kernel.
//!
//! Modes: `autotune` sets nothing; `fixed` sets `SO_SNDBUF` on the
//! listening socket (accepted sockets inherit it) and `SO_RCVBUF` on each
//! upstream connection once it is established (a receive buffer locked
//! before the handshake clamps the window scale); `ssbt` and `ssbt+conn`
//! run the control loop below on a thread of its own, once per
//! `interval_ms`:
//!
//! * client connections (send side): `TCP_INFO` gives the path estimate —
//!   RTT and RTO as the kernel smooths them, loss from `total_retrans` and
//!   `data_segs_out` through each connection's [`LossEstimator`] (a window
//!   of recent intervals and the segments since the last retransmission),
//!   W_max from the peer's window — for
//!   [`SendBufferAllocator`] (E-ATBT); the data in the send buffer
//!   (unacknowledged segments × MSS plus `notsent_bytes`, from the same
//!   read) feeds the up/down coupling, with the share of the interval the
//!   connection had data in flight (Δ`busy_time`) and whether the buffer
//!   limited it (Δ`sndbuf_limited`): one read is not the interval's peak;
//!   the assignment is set with `SO_SNDBUF`;
//! * upstream connections (receive side): `SO_MEMINFO`'s allocated receive
//!   memory is the stored data (U_i, out-of-order data included),
//!   Δ`bytes_received` the rate, Δ`rcv_ooopack` the loss, for each
//!   connection's [`ReceiveBufferTuner`]; the pool's receive share is
//!   divided by [`max_min_proportional`] over what the tuners hold, as the
//!   simulator does, and set with `SO_RCVBUF` (upstream connections are
//!   registered only once established, and their buffer is locked at the
//!   kernel's initial size then, as the simulator starts a new connection
//!   at its initial buffer, rather than autotuned until the first
//!   interval);
//! * `ssbt+conn`: [`ConnectionManager`] over descriptors (counted by `sys::process::open_descriptors`),
//!   kernel TCP memory and client connections; a client connection enters
//!   its list when its last response completes and leaves it when a
//!   request starts; the connections it picks are closed gracefully
//!   (hyper's `graceful_shutdown`), each close counted by reason and
//!   logged (id, idle age).
//!
//! The reads: a client connection's is one `getsockopt` (`TCP_INFO`); a
//! `NETLINK_SOCK_DIAG` dump (`sys::sock_diag`) batches them but was
//! measured slower for client connections (it walks every TCP socket of
//! the namespace). Upstream connections need two options (`TCP_INFO`,
//! `SO_MEMINFO`), which one dump returns in one reply per socket: from
//! [`DUMP_MIN_UPSTREAMS`] upstream connections on, when their distinct
//! remote ports (the servers' few) fit the kernel's filter
//! ([`sock_diag::MAX_FILTER_PORTS`]), they are read by one dump per
//! address family filtered on those ports (measured 16–22 % cheaper than
//! the two `getsockopt`s at 9,872 connections), taken outside the lock
//! and applied under it; each reply is matched to its connection by the
//! socket's cookie (`SO_COOKIE`, taken with the remote port and family
//! once, at registration). Any connection the dump misses (opened after
//! it, closing, or anything else), and every one when the dump fails or
//! the conditions do not hold, is read by its two `getsockopt`s, counted
//! ([`IntervalReport::upstream_reads_fallback`],
//! [`IntervalReport::upstream_dump_failures`]), and so is every one for
//! [`DUMP_RETRY_INTERVALS`] after a dump that let through more than half
//! as many other sockets as upstream ones; both paths give the
//! tuner the same observation ([`upstream_observation`]). Below the
//! threshold every upstream connection is read by `getsockopt`. io_uring
//! serves `SOL_SOCKET` options only (not `TCP_INFO`); its batched
//! `SO_SNDBUF` sets were measured no cheaper than one `setsockopt` each
//! (bench/proxy/README-resources.md).
//!
//! The tables sit behind one lock, which the data path takes to register
//! connections and report requests; the loop holds it for the socket calls
//! of at most 128 connections at a time (and for the allocator's
//! re-assignment), and counts the descriptors without it, once every
//! [`DESCRIPTOR_RECOUNT`] intervals: between counts the descriptors are
//! the last count moved by the change in the sockets the proxy holds
//! (registered connections and upstream sockets being connected, counted
//! exactly).
//!
//! Idle client connections (no request in progress and nothing left in
//! the send buffer: a response is complete once written into it, and one
//! still draining is measured as any other) leave the allocator (no
//! demand) and keep the buffer the manager's idle decay leaves them (`ssbt` too, as the
//! simulator runs it); when a request starts on one it gets back the
//! buffer it held before (the size the loop last gave it while its last
//! response drained, [`ConnectionManager::update_idle_buffer`]), as far
//! as the send pool has room
//! ([`SendBufferAllocator::resume_bound`]), at once: the simulator
//! re-assigns at that moment, which the live loop cannot afford on every
//! request. Upstream connections idle in the proxy's pool
//! (`upstream::Pool` reports each entering and leaving it) shrink by the
//! same rule, from a second, shrink-only [`ConnectionManager`]
//! ([`ConnectionManagerParams::shrink_only`]): it closes nothing (the pool
//! bounds and times out its own idle connections; the close decision is
//! over client connections), and a pooled connection asks the receive
//! pool only for what the decay leaves it. Taken from the pool for a
//! request, it gets back what its tuner holds at once, before the request
//! is written (the thesis: regrow on reuse; the next interval's sharing
//! evens it out, as `sim::proxy::world` does). Only the receive buffer,
//! the one the loop sets on upstream connections: their send buffers
//! carry requests, stay autotuned, and setting one would lock it.
//!
//! Units and departures: the kernel holds twice what `SO_SNDBUF` /
//! `SO_RCVBUF` are given (`sys::tcp_info`); E-ATBT's demand ρ̄·rtt is data,
//! so a send assignment of B data bytes is held as 2B, and the pool counts
//! held bytes. The tuner runs in held bytes against `SO_MEMINFO`'s
//! `rmem_alloc` (also held, truesize), so U_i is a ratio of like to like.
//! Peaks are sampled once per interval, not tracked per segment (the
//! kernel keeps no peak). A buffer is set with one `setsockopt`; what the
//! kernel then holds is computed by its rule
//! ([`tcp_info::set_buffer_computed`]), not read back. Bounds: never
//! above twice `wmem_max`/`rmem_max` (the kernel's own cap), never below two segments' truesize (MSS plus
//! [`SKB_OVERHEAD`] each). Under kernel memory pressure (sockstat TCP
//! `mem` ≥ `tcp_mem`'s pressure mark, or the proxy's memory cgroup's TCP
//! usage ≥ 90 % of its limit: [`MemorySource`]) the pool is cut by a
//! quarter, then regrows by an eighth of its configured size per interval
//! once the pressure ends. The allocator's MSS is the first
//! connection's default (1448); per-connection MSS enters W_max only.
//!
//! The loop's own cost ([`vantage_core::resources::interval`], which
//! decides; this driver reads and sets what it says): an interval that
//! cuts the pool reads no connection — the cut scales the current
//! assignments — and sets the shrinks; under lasting pressure the next
//! interval reads and holds the pool, the one after cuts again. An
//! interval that reads sets at most an eighth of the connections' buffers
//! (shrinks first, then growths, most moved first; buffers never set and
//! a cut's shrinks are not bounded); the rest wait for the next interval
//! and are counted (`vantage_proxy_buffer_sets_deferred_total`). A
//! closed client connection frees its send share at once
//! ([`SendBufferAllocator::release`]); the others keep theirs until the
//! next interval re-divides the pool.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use vantage_core::resources::{
    max_min_proportional, plan_sets, set_budget, BufferMove, ConnectionManager,
    ConnectionManagerParams, CouplingParams, IntervalObservation, IntervalPlan, LossEstimator,
    LossEstimatorParams, Occupancy, PoolSchedule, ReceiveBufferTuner, ReceiveTunerParams,
    ResourceUsage, SendBufferAllocator, Threshold,
};
use vantage_core::tcp::throughput::PathEstimate;
use vantage_core::Nanos;
use vantage_sys::cgroup::CgroupTcpMemory;
use vantage_sys::sock_diag::{self, PortFilter, SockDiag, SocketIdentity};
use vantage_sys::tcp_info::{self, SocketBuffer, SocketMemory, TcpInfo};

use super::config::{Marks, ResourceMode, ResourcesConfig};
use super::metrics::ResourceMetrics;

/// Bytes of kernel overhead per segment assumed for the lower bound (an
/// `sk_buff` and its shared info on x86-64, rounded up).
pub const SKB_OVERHEAD: u64 = 1024;
/// The MSS E-ATBT's demand is computed with.
const ALLOCATOR_MSS: u32 = 1448;
/// Most client connections the allocator holds (more get no assignment
/// and are counted).
const MAX_TRACKED: usize = 1 << 20;
/// Reclaims kept in memory for [`Resources::reclaimed`].
const MAX_AUDIT_RECORDS: usize = 10_000;
/// Connections whose socket calls one hold of the lock covers.
const CHUNK: usize = 128;
/// Upstream connections (with a cookie) from which they are read by one
/// `sock_diag` dump per address family rather than two `getsockopt`s
/// each. A dump walks the namespace's whole established-socket hash
/// whatever its filter: in the bench (bench/proxy/README-resources.md,
/// 2026-11-26, load average 3.7–3.9), that walk took 0.4–0.6 ms at a few
/// hundred connections, and the dump cost per connection (walk included)
/// against the two `getsockopt`s was +139 % at 256 connections, +57 % at
/// 512, +13 % at 1,024, −9 % and +3 % at 2,048, −14 % at 4,096 and −16 to
/// −22 % at 9,872: below about 2,048 the walk outweighs the saving.
pub const DUMP_MIN_UPSTREAMS: usize = 2048;
/// Intervals the upstream connections are read by `getsockopt` after a
/// dump whose replies for other sockets (sharing the upstream servers'
/// ports) exceeded half of its replies for them: the kernel builds each
/// reply at about the cost of a `getsockopt`, so such a dump costs more
/// than it saves (in the bench, 4,936 upstream connections with as many
/// other sockets let through made the interval 6 ms dearer). Then the
/// dump is tried again.
const DUMP_RETRY_INTERVALS: u32 = 10;
/// Intervals between descriptor counts (between them the
/// descriptors are the last count moved by the change in the sockets the
/// proxy holds, which it counts exactly).
const DESCRIPTOR_RECOUNT: u32 = 10;

/// Why an idle connection was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    Descriptors,
    TcpMemory,
    Connections,
    /// The idle list was full (its oldest entry makes room).
    IdleListFull,
}

impl CloseReason {
    pub fn name(self) -> &'static str {
        match self {
            CloseReason::Descriptors => "descriptors",
            CloseReason::TcpMemory => "tcp_memory",
            CloseReason::Connections => "connections",
            CloseReason::IdleListFull => "idle_list_full",
        }
    }
}

/// One reclaimed connection, as the audit log line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reclaim {
    pub id: u64,
    /// When it was closed, since the manager started.
    pub at: Duration,
    pub idle: Duration,
    pub reason: CloseReason,
}

/// What one interval did (for the benchmark and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntervalReport {
    pub clients: usize,
    pub upstreams: usize,
    pub buffers_set: usize,
    pub read_errors: usize,
    pub closes: usize,
    pub pool_bytes: u64,
    pub kernel_tcp_bytes: u64,
    /// The proxy's cgroup's TCP memory, if it has a limit.
    pub cgroup_tcp_bytes: Option<u64>,
    /// The host's or the cgroup's pressure mark reached.
    pub pressure: bool,
    /// Receive buffers of upstream connections idle in the pool set
    /// smaller.
    pub idle_upstream_shrinks: usize,
    /// The connections were read (an interval that cuts the pool for
    /// pressure reads none: `core::resources::interval`).
    pub read: bool,
    /// The pool was cut for pressure.
    pub cut: bool,
    /// Buffer moves beyond the interval's bound, left to the next one.
    pub buffers_deferred: usize,
    /// Upstream connections read from the `sock_diag` dump.
    pub upstream_reads_dumped: usize,
    /// Upstream connections read by `getsockopt` in an interval whose
    /// upstream connections were to be read by the dump (at least
    /// [`DUMP_MIN_UPSTREAMS`]): missing from it, without a cookie, or all
    /// of them when the dump failed or their remote ports were more than
    /// its filter holds.
    pub upstream_reads_fallback: usize,
    /// Dumps that failed (each also counted in `read_errors`): their
    /// connections were read by `getsockopt`.
    pub upstream_dump_failures: usize,
    /// Replies of the dump for sockets that are not registered upstream
    /// connections (other sockets of the namespace with one of their
    /// remote ports): built by the kernel and dropped.
    pub upstream_dump_others: usize,
    /// Replies of the dump for registered upstream connections.
    pub upstream_dump_matched: usize,
}

/// The kernel limits the loop respects, read once.
#[derive(Clone, Debug)]
pub struct KernelLimits {
    /// Largest held send buffer (twice `wmem_max`).
    pub send_max: u64,
    /// Largest held receive buffer (twice `rmem_max`).
    pub receive_max: u64,
    /// `net.ipv4.tcp_mem`; `None` where it is not visible (it belongs to
    /// the host's network namespace, and a proxy in another one cannot
    /// read it): then there is no default pool and no pressure cut.
    pub tcp_mem: Option<tcp_info::TcpMemLimits>,
    pub page_bytes: u64,
    pub descriptor_limit: u64,
    /// The proxy's memory cgroup, when it limits TCP memory
    /// (`sys::cgroup`): a limit the host's `tcp_mem` does not show.
    pub cgroup: Option<CgroupTcpMemory>,
}

impl KernelLimits {
    pub fn read() -> io::Result<KernelLimits> {
        Ok(KernelLimits {
            send_max: 2 * tcp_info::wmem_max()?,
            receive_max: 2 * tcp_info::rmem_max()?,
            tcp_mem: match tcp_info::tcp_mem_limits() {
                Ok(limits) => Some(limits),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            },
            page_bytes: tcp_info::page_size(),
            descriptor_limit: crate::daemon::descriptor_limit()?,
            cgroup: CgroupTcpMemory::own()?,
        })
    }
}

/// Whose TCP memory is watched: the host's (`/proc/net/sockstat` against
/// `tcp_mem`'s pressure mark) or the proxy's cgroup's (its usage against
/// 90 % of its limit). Both are checked for the pressure cut; the one
/// with the lower mark sets the default pool and the manager's marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySource {
    Host,
    Cgroup,
}

impl MemorySource {
    /// The source with the lower pressure mark, if any is visible.
    fn binding(limits: &KernelLimits) -> Option<MemorySource> {
        let host = limits
            .tcp_mem
            .is_some()
            .then(|| MemorySource::Host.pressure_bytes(limits));
        let cgroup = limits
            .cgroup
            .is_some()
            .then(|| MemorySource::Cgroup.pressure_bytes(limits));
        match (host, cgroup) {
            (Some(h), Some(c)) if c < h => Some(MemorySource::Cgroup),
            (Some(_), _) => Some(MemorySource::Host),
            (None, Some(_)) => Some(MemorySource::Cgroup),
            (None, None) => None,
        }
    }

    /// The pressure mark, bytes (`u64::MAX` when the source is not
    /// visible).
    fn pressure_bytes(self, limits: &KernelLimits) -> u64 {
        match self {
            MemorySource::Host => limits
                .tcp_mem
                .as_ref()
                .map_or(u64::MAX, |m| m.pressure.saturating_mul(limits.page_bytes)),
            MemorySource::Cgroup => limits
                .cgroup
                .as_ref()
                .map_or(u64::MAX, |c| c.limit_bytes / 10 * 9),
        }
    }

    /// The metric's value: 1 host, 2 cgroup (0: none).
    fn code(self) -> i64 {
        match self {
            MemorySource::Host => 1,
            MemorySource::Cgroup => 2,
        }
    }
}

/// Two segments' truesize for a connection's MSS.
fn min_held(mss: u32) -> u64 {
    2 * (u64::from(mss.max(536)) + SKB_OVERHEAD)
}

/// The send buffer the loop holds for a client connection on `path` when
/// the pool does not bind (E-ATBT assigns the whole demand): twice
/// ρ̄·rtt, within the bounds (`send_max`: twice `wmem_max`). What a
/// measurement compares the buffer the connection actually has with.
pub fn unconstrained_send_target(
    path: &PathEstimate,
    mss: u32,
    send_max: u64,
) -> Result<u64, vantage_core::OutOfRange> {
    let demand = vantage_core::resources::send_buffer::demand_bytes(path, ALLOCATOR_MSS)?;
    Ok((2 * demand).clamp(min_held(mss), send_max.max(min_held(mss))))
}

struct ClientState {
    fd: RawFd,
    reclaim: Arc<tokio::sync::Notify>,
    active: usize,
    idle_since: Option<Nanos>,
    loss: LossEstimator,
    mss: u32,
    applied: Option<u64>,
    /// The kernel's cumulative busy and send-buffer-limited times (µs) at
    /// the last read.
    busy_us: Option<u64>,
    sndbuf_limited_us: Option<u64>,
}

struct UpstreamState {
    fd: RawFd,
    /// Its cookie, family and ports, read at registration (`None` if that
    /// failed: then it is always read by `getsockopt`).
    identity: Option<SocketIdentity>,
    tuner: ReceiveBufferTuner,
    received: Option<u64>,
    out_of_order: Option<u32>,
    applied: Option<u64>,
}

struct State {
    allocator: SendBufferAllocator,
    manager: Option<ConnectionManager>,
    /// Shrink-only: the upstream connections idle in the pool (`ssbt*`
    /// with `idle_buffer_half_life_ms`).
    pooled: Option<ConnectionManager>,
    clients: HashMap<u64, ClientState>,
    upstreams: HashMap<u64, UpstreamState>,
    next_id: u64,
    /// The pool, and whether the last interval read.
    schedule: PoolSchedule,
    /// Client connections with no request in progress whose send buffer
    /// still held data at the last read: sized as in use.
    draining: HashSet<u64>,
    /// Closes the idle list's cap forced, not yet counted.
    evicted: Vec<(u64, Nanos)>,
    audit: VecDeque<Reclaim>,
    /// The last descriptor count, the tracked connections then,
    /// and the intervals since.
    descriptors: Option<(u64, u64, u32)>,
}

/// The live resource manager, shared by the accept loop, the connections,
/// the upstream connector and the control-loop thread.
pub struct Resources {
    config: ResourcesConfig,
    limits: KernelLimits,
    /// Whose TCP memory the manager's marks and the default pool follow.
    memory_source: Option<MemorySource>,
    /// Upstream sockets being connected, not yet registered: with the
    /// registered connections, every socket the proxy holds.
    connecting: AtomicU64,
    thresholds: [Threshold; 3],
    /// A client connection's loss estimator before its first interval.
    fresh_loss: LossEstimator,
    epoch: Instant,
    state: Mutex<State>,
    /// [`DUMP_MIN_UPSTREAMS`] (lowered by tests).
    dump_min_upstreams: usize,
    /// The upstream dump's socket and tables, kept across intervals;
    /// taken by the loop alone, before `state`'s lock, never after it.
    dump: Mutex<UpstreamDump>,
    metrics: ResourceMetrics,
}

/// What [`Resources::read_upstreams`] keeps between intervals for the
/// dump: its `NETLINK_SOCK_DIAG` socket (opened at the first dump, again
/// after a failure to open), and the interval's cookie → connection map
/// and readings, cleared each interval with their capacity kept. The map
/// is built for each interval from the registered connections' list the
/// loop takes anyway, rather than kept at registration: the dump runs
/// outside the lock, where a map kept in the shared tables could not be
/// read without copying it, and the data path does not pay for one more
/// table at each connect and close.
#[derive(Default)]
struct UpstreamDump {
    diag: Option<SockDiag>,
    /// Intervals left to read by `getsockopt` ([`DUMP_RETRY_INTERVALS`]).
    skip: u32,
    /// Cookie → index in the interval's list of registered connections.
    cookies: HashMap<u64, usize>,
    /// Per index: `TCP_INFO` and `SK_MEMINFO` from the dump, if it had
    /// the socket with both.
    readings: Vec<Option<(TcpInfo, SocketMemory)>>,
}

/// Why the loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum ResourcesError {
    #[error("reading the kernel's TCP memory limits: {0}")]
    Kernel(#[from] io::Error),
    #[error("resources.mode = \"{0}\" needs resources.pool_bytes here: net.ipv4.tcp_mem, its default, is not visible in this network namespace, and the proxy's memory cgroup sets no TCP memory limit")]
    NoDefaultPool(&'static str),
    #[error("resources: {0}")]
    OutOfRange(#[from] vantage_core::OutOfRange),
    #[error("resources: {0}")]
    Allocator(#[from] vantage_core::resources::SendBufferError),
}

fn threshold(marks: Option<Marks>, high: u64, low: u64) -> Threshold {
    match marks {
        Some(m) => Threshold {
            high: m.high,
            low: m.low,
        },
        None => Threshold { high, low },
    }
}

impl Resources {
    /// `max_connections`: the client connections the proxy serves at once
    /// (the default connection marks are 95 % and 90 % of it).
    pub fn new(
        config: ResourcesConfig,
        limits: KernelLimits,
        max_connections: usize,
        metrics: ResourceMetrics,
    ) -> Result<Resources, ResourcesError> {
        let tuned = matches!(
            config.mode,
            ResourceMode::Ssbt | ResourceMode::SsbtWithConnections
        );
        let memory_source = MemorySource::binding(&limits);
        let pressure_bytes = memory_source.map(|s| s.pressure_bytes(&limits));
        match (memory_source, &limits.cgroup) {
            (Some(MemorySource::Cgroup), Some(cgroup)) => eprintln!(
                "vantage proxy: TCP memory pressure from the proxy's cgroup ({}, {}: limit {} bytes, pressure at 90 %) and the host's tcp_mem",
                cgroup.source.name(),
                cgroup.dir.display(),
                cgroup.limit_bytes
            ),
            (_, Some(cgroup)) => eprintln!(
                "vantage proxy: TCP memory pressure from the host's tcp_mem (below the proxy's cgroup limit, {} bytes) and the cgroup",
                cgroup.limit_bytes
            ),
            _ => {}
        }
        metrics
            .memory_source
            .set(memory_source.map_or(0, MemorySource::code));
        let base_pool = match (config.pool_bytes, pressure_bytes) {
            (Some(pool), _) => pool,
            (None, Some(pressure)) => pressure / 2,
            (None, None) if tuned => return Err(ResourcesError::NoDefaultPool(config.mode.name())),
            (None, None) => 0,
        };
        let never = Threshold {
            high: u64::MAX,
            low: u64::MAX,
        };
        let manages = config.mode == ResourceMode::SsbtWithConnections;
        let n = max_connections as u64;
        let thresholds = if manages {
            [
                threshold(
                    config.descriptors,
                    limits.descriptor_limit * 9 / 10,
                    limits.descriptor_limit * 8 / 10,
                ),
                match pressure_bytes {
                    Some(pressure) => threshold(
                        config.tcp_memory_bytes,
                        pressure / 10 * 9,
                        pressure / 10 * 8,
                    ),
                    None => threshold(config.tcp_memory_bytes, never.high, never.low),
                },
                threshold(config.connections, n - n / 20, n - n / 10),
            ]
        } else {
            [never; 3]
        };
        let manager = tuned
            .then(|| {
                ConnectionManager::new(ConnectionManagerParams {
                    descriptors: thresholds[0],
                    socket_buffer_bytes: thresholds[1],
                    connections: thresholds[2],
                    // hyper's idle timeout (timeouts.idle_ms) is T_p.
                    persistent_timeout: None,
                    min_idle_age: Nanos::from_millis(config.min_idle_age_ms),
                    max_closes_per_interval: config.max_closes_per_interval,
                    buffer_half_life: config.idle_buffer_half_life_ms.map(Nanos::from_millis),
                    min_idle_buffer: min_held(ALLOCATOR_MSS),
                    max_idle: MAX_TRACKED,
                })
            })
            .transpose()?;
        let pooled = match (tuned, config.idle_buffer_half_life_ms) {
            (true, Some(half_life)) => Some(ConnectionManager::new(
                ConnectionManagerParams::shrink_only(
                    Nanos::from_millis(half_life),
                    min_held(ALLOCATOR_MSS),
                    MAX_TRACKED,
                ),
            )?),
            _ => None,
        };
        let send_pool = (base_pool as f64 * config.send_fraction) as u64;
        let allocator = SendBufferAllocator::new(
            send_pool / 2,
            ALLOCATOR_MSS,
            MAX_TRACKED,
            CouplingParams::default(),
        )?;
        metrics.pool_bytes.set(base_pool as i64);
        Ok(Resources {
            config,
            limits,
            memory_source,
            connecting: AtomicU64::new(0),
            thresholds,
            fresh_loss: LossEstimator::new(LossEstimatorParams::default())?,
            epoch: Instant::now(),
            state: Mutex::new(State {
                allocator,
                manager,
                pooled,
                clients: HashMap::new(),
                upstreams: HashMap::new(),
                next_id: 0,
                schedule: PoolSchedule::new(base_pool),
                draining: HashSet::new(),
                evicted: Vec::new(),
                audit: VecDeque::new(),
                descriptors: None,
            }),
            dump_min_upstreams: DUMP_MIN_UPSTREAMS,
            dump: Mutex::new(UpstreamDump::default()),
            metrics,
        })
    }

    /// The same, reading upstream connections by the dump from
    /// `min_upstreams` of them on.
    #[cfg(test)]
    fn with_dump_min_upstreams(mut self, min_upstreams: usize) -> Resources {
        self.dump_min_upstreams = min_upstreams;
        self
    }

    pub fn mode(&self) -> ResourceMode {
        self.config.mode
    }

    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.config.interval_ms)
    }

    /// The pool configured (or derived from the TCP memory limits).
    pub fn configured_pool(&self) -> u64 {
        self.lock().schedule.configured()
    }

    fn tuned(&self) -> bool {
        matches!(
            self.config.mode,
            ResourceMode::Ssbt | ResourceMode::SsbtWithConnections
        )
    }

    fn now(&self) -> Nanos {
        Nanos(self.epoch.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// `fixed`: the send buffer on the listening socket (inherited by the
    /// accepted ones). The value is what `setsockopt` is given, as for
    /// nginx's `sndbuf`; the kernel holds twice it.
    pub fn prepare_listener(&self, listener: impl AsFd) -> io::Result<()> {
        if let (ResourceMode::Fixed, Some(bytes)) = (self.config.mode, self.config.send_bytes) {
            tcp_info::set_send_buffer(listener, 2 * bytes)?;
        }
        Ok(())
    }

    /// A client connection accepted: tracked by the loop (`ssbt*`), with
    /// `reclaim` notified when the manager closes it.
    pub fn track_client<S: AsFd>(
        self: &Arc<Self>,
        stream: S,
        reclaim: Arc<tokio::sync::Notify>,
    ) -> TrackedStream<S> {
        if !self.tuned() {
            return TrackedStream::untracked(stream);
        }
        let fd = stream.as_fd().as_raw_fd();
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.clients.insert(
            id,
            ClientState {
                fd,
                reclaim,
                active: 0,
                idle_since: None,
                loss: self.fresh_loss.clone(),
                mss: ALLOCATOR_MSS,
                applied: None,
                busy_us: None,
                sndbuf_limited_us: None,
            },
        );
        drop(state);
        TrackedStream {
            registration: Some(Registration {
                resources: Arc::clone(self),
                id,
                upstream: false,
            }),
            stream,
        }
    }

    /// An upstream socket is about to be connected: counted among the
    /// descriptors the proxy holds until the guard is dropped (after the
    /// connection is registered, or on failure).
    pub fn connecting(self: &Arc<Self>) -> ConnectingSocket {
        self.connecting.fetch_add(1, Ordering::Relaxed);
        ConnectingSocket {
            resources: Arc::clone(self),
        }
    }

    /// An upstream connection established: `fixed` sets its receive
    /// buffer; `ssbt*` tracks it.
    pub fn track_upstream<S: AsFd>(self: &Arc<Self>, stream: S) -> TrackedStream<S> {
        match self.config.mode {
            ResourceMode::Fixed => {
                if let Some(bytes) = self.config.receive_bytes {
                    if tcp_info::set_receive_buffer(stream.as_fd(), 2 * bytes).is_err() {
                        self.metrics.errors.inc();
                    }
                }
                return TrackedStream::untracked(stream);
            }
            ResourceMode::Autotune => return TrackedStream::untracked(stream),
            _ => {}
        }
        let fd = stream.as_fd().as_raw_fd();
        let initial = tcp_info::receive_buffer(stream.as_fd()).unwrap_or(128 << 10);
        // Locked at once at the size the kernel starts it with, as the
        // simulator starts a new connection at its initial buffer: left
        // autotuned until the loop's first interval, a fast upstream grows
        // its buffer past anything the pool would give it (Experiment 2's
        // peak was upstream receive queues of connections not yet set).
        let initial_held =
            u64::from(initial).clamp(min_held(ALLOCATOR_MSS), self.limits.receive_max);
        let applied = match tcp_info::set_buffer_computed(
            stream.as_fd(),
            SocketBuffer::Receive,
            initial_held,
            self.limits.receive_max,
        ) {
            Ok(held) => Some(u64::from(held)),
            Err(_) => {
                self.metrics.errors.inc();
                None
            }
        };
        let params = ReceiveTunerParams {
            min_bytes: min_held(ALLOCATOR_MSS),
            max_bytes: self.limits.receive_max.max(min_held(ALLOCATOR_MSS)),
            ..ReceiveTunerParams::default()
        };
        let Ok(tuner) = ReceiveBufferTuner::new(params, u64::from(initial)) else {
            self.metrics.errors.inc();
            return TrackedStream::untracked(stream);
        };
        // For the dump: three system calls, once.
        let identity = match sock_diag::socket_identity(stream.as_fd()) {
            Ok(identity) => Some(identity),
            Err(_) => {
                self.metrics.errors.inc();
                None
            }
        };
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.upstreams.insert(
            id,
            UpstreamState {
                fd,
                identity,
                tuner,
                received: None,
                out_of_order: None,
                applied,
            },
        );
        drop(state);
        TrackedStream {
            registration: Some(Registration {
                resources: Arc::clone(self),
                id,
                upstream: true,
            }),
            stream,
        }
    }

    fn unregister(&self, id: u64, upstream: bool) {
        let mut state = self.lock();
        if upstream {
            if state.upstreams.remove(&id).is_some() {
                if let Some(pooled) = state.pooled.as_mut() {
                    if pooled.remove(id) {
                        self.metrics.idle_upstreams.set(pooled.idle_count() as i64);
                    }
                }
            }
        } else if state.clients.remove(&id).is_some() {
            // Its share is freed; the others keep theirs until the next
            // interval re-divides the pool (a re-division per close would
            // be O(n) on the data path, O(n²) to close them all).
            state.allocator.release(id);
            state.draining.remove(&id);
            if let Some(manager) = state.manager.as_mut() {
                manager.remove(id);
            }
        }
    }

    /// A request started on client connection `id`: it leaves the idle list.
    pub fn request_started(&self, id: u64) {
        let mut state = self.lock();
        let State {
            clients,
            manager,
            allocator,
            ..
        } = &mut *state;
        let Some(c) = clients.get_mut(&id) else {
            return;
        };
        c.active += 1;
        c.idle_since = None;
        let Some(before) = manager.as_mut().and_then(|m| m.reuse(id)) else {
            return;
        };
        // Back in use: what it held before it idled, as far as the send
        // pool has room (held bytes are twice the allocator's data bytes),
        // set now rather than regrown over the next intervals.
        let target = (2 * allocator.resume_bound(before / 2))
            .clamp(min_held(c.mss), self.limits.send_max.max(min_held(c.mss)));
        if c.applied.is_some_and(|applied| applied >= target) {
            return;
        }
        // SAFETY: as in `read_clients` (the lock is held: `state`).
        let fd = unsafe { BorrowedFd::borrow_raw(c.fd) };
        match tcp_info::set_buffer_computed(fd, SocketBuffer::Send, target, self.limits.send_max) {
            Ok(held) => {
                c.applied = Some(u64::from(held));
                self.metrics.idle_client_regrows.inc();
            }
            Err(_) => {
                self.metrics.errors.inc();
            }
        }
    }

    /// A response completed on client connection `id`: with none left in
    /// progress it enters the idle list.
    pub fn response_completed(&self, id: u64) {
        let now = self.now();
        let mut state = self.lock();
        let State {
            clients,
            manager,
            evicted,
            ..
        } = &mut *state;
        let Some(c) = clients.get_mut(&id) else {
            return;
        };
        c.active = c.active.saturating_sub(1);
        if c.active > 0 {
            return;
        }
        c.idle_since = Some(now);
        // Never set by the loop (it finished its responses between two
        // reads): the kernel's own buffer is what it held, and what it
        // gets back on reuse. Counted as 0, it decayed to the floor at
        // once and was given the floor back on every reuse.
        let held = c.applied.unwrap_or_else(|| {
            // SAFETY: as in `read_clients` (the lock is held: `state`).
            let fd = unsafe { BorrowedFd::borrow_raw(c.fd) };
            tcp_info::send_buffer(fd).map_or(0, u64::from)
        });
        if let Some(m) = manager.as_mut() {
            if let Some(oldest) = m.mark_idle(id, now, held) {
                let since = clients
                    .get(&oldest)
                    .and_then(|o| o.idle_since)
                    .unwrap_or(now);
                evicted.push((oldest, since));
            }
        }
    }

    /// Upstream connection `id` (its [`TrackedStream::id`]) entered the
    /// proxy's idle pool: its receive buffer shrinks from now on.
    pub fn upstream_idle(&self, id: Option<u64>) {
        let Some(id) = id else { return };
        let now = self.now();
        let mut state = self.lock();
        let State {
            upstreams, pooled, ..
        } = &mut *state;
        let (Some(u), Some(pooled)) = (upstreams.get(&id), pooled.as_mut()) else {
            return;
        };
        let held = u.applied.unwrap_or_else(|| u.tuner.held_bytes());
        // The cap is the tracked connections' own: nothing is evicted
        // while registrations are bounded by it; one that were would
        // only stop shrinking.
        let _ = pooled.mark_idle(id, now, held);
        self.metrics.idle_upstreams.set(pooled.idle_count() as i64);
    }

    /// Upstream connection `id` left the idle pool for a request: it gets
    /// back the receive buffer its tuner gives it, before the request is
    /// written.
    pub fn upstream_reused(&self, id: Option<u64>) {
        let Some(id) = id else { return };
        let mut state = self.lock();
        let State {
            upstreams, pooled, ..
        } = &mut *state;
        let Some(pooled) = pooled.as_mut() else {
            return;
        };
        if !pooled.remove(id) {
            return;
        }
        self.metrics.idle_upstreams.set(pooled.idle_count() as i64);
        let Some(u) = upstreams.get_mut(&id) else {
            return;
        };
        // What the loop sets on an active connection when the pool does
        // not bind.
        let target = u
            .tuner
            .advertised_bytes()
            .clamp(min_held(ALLOCATOR_MSS), self.limits.receive_max);
        if u.applied.is_none_or(|applied| applied >= target) {
            return;
        }
        // SAFETY: as in `read_clients` (the lock is held: `state`).
        let fd = unsafe { BorrowedFd::borrow_raw(u.fd) };
        match tcp_info::set_buffer_computed(
            fd,
            SocketBuffer::Receive,
            target,
            self.limits.receive_max,
        ) {
            Ok(held) => {
                u.applied = Some(u64::from(held));
                self.metrics.idle_upstream_regrows.inc();
            }
            Err(_) => {
                self.metrics.errors.inc();
            }
        }
    }

    /// Upstream connections tracked, and how many of them are idle in the
    /// pool (shrinking).
    pub fn tracked_upstreams(&self) -> (usize, usize) {
        let state = self.lock();
        let idle = state.pooled.as_ref().map_or(0, |m| m.idle_count());
        (state.upstreams.len(), idle)
    }

    /// The latest reclaims, oldest first (at most 10,000 kept; each also
    /// written to standard error).
    pub fn reclaimed(&self) -> Vec<Reclaim> {
        self.lock().audit.iter().copied().collect()
    }

    /// Client connections tracked, and how many of them are idle.
    pub fn tracked(&self) -> (usize, usize) {
        let state = self.lock();
        let idle = state.manager.as_ref().map_or(0, |m| m.idle_count());
        (state.clients.len(), idle)
    }

    /// The held send buffer assigned to a tracked client connection.
    pub fn assigned_send(&self, id: u64) -> Option<u64> {
        self.lock().clients.get(&id).and_then(|c| c.applied)
    }

    /// One interval of the control loop.
    pub fn run_interval(&self) -> IntervalReport {
        let now = self.now();
        let mut report = IntervalReport::default();
        let kernel_pages = tcp_info::tcp_memory_pages();
        let kernel_bytes = match kernel_pages {
            Ok(pages) => pages.saturating_mul(self.limits.page_bytes),
            Err(_) => {
                self.metrics.errors.inc();
                0
            }
        };
        report.kernel_tcp_bytes = kernel_bytes;
        self.metrics.kernel_tcp_bytes.set(kernel_bytes as i64);
        let host_pressure = match (&kernel_pages, &self.limits.tcp_mem) {
            (Ok(pages), Some(tcp_mem)) => *pages >= tcp_mem.pressure,
            _ => false,
        };
        let cgroup_bytes = self
            .limits
            .cgroup
            .as_ref()
            .and_then(|c| match c.usage_bytes() {
                Ok(bytes) => Some(bytes),
                Err(_) => {
                    self.metrics.errors.inc();
                    None
                }
            });
        report.cgroup_tcp_bytes = cgroup_bytes;
        self.metrics
            .cgroup_tcp_bytes
            .set(cgroup_bytes.unwrap_or(0) as i64);
        let cgroup_pressure = match (cgroup_bytes, &self.limits.cgroup) {
            (Some(bytes), Some(_)) => bytes >= MemorySource::Cgroup.pressure_bytes(&self.limits),
            _ => false,
        };
        report.pressure = host_pressure || cgroup_pressure;
        // The manager's TCP memory: the binding source's.
        let managed_memory_bytes = match self.memory_source {
            Some(MemorySource::Cgroup) => cgroup_bytes.unwrap_or(0),
            _ => kernel_bytes,
        };
        if !self.tuned() {
            return report;
        }
        let managed = self.config.mode == ResourceMode::SsbtWithConnections;
        // Descriptors are counted without the lock (it takes milliseconds
        // with many descriptors).
        let recount = managed && needs_recount(self.lock().descriptors);
        let counted = if recount {
            let counted = vantage_sys::process::open_descriptors();
            if counted.is_err() {
                self.metrics.errors.inc();
            }
            counted.ok()
        } else {
            None
        };
        let plan: IntervalPlan;
        {
            let mut state = self.lock();
            let state = &mut *state;
            let before = state.schedule.pool();
            plan = state.schedule.begin_interval(report.pressure);
            if plan.cut {
                self.metrics.pressure_cuts.inc();
            }
            if !plan.read {
                self.metrics.unread_intervals.inc();
            }
            report.read = plan.read;
            report.cut = plan.cut;
            let pool = plan.pool;
            if pool != before {
                state
                    .allocator
                    .set_pool_bytes((pool as f64 * self.config.send_fraction) as u64 / 2);
            }
            report.pool_bytes = pool;
            self.metrics.pool_bytes.set(pool as i64);
            // Closes the idle list's cap forced since the last interval.
            for (id, since) in std::mem::take(&mut state.evicted) {
                if self.reclaim(state, id, since, now, CloseReason::IdleListFull) {
                    report.closes += 1;
                }
            }
            if managed {
                let held = (state.clients.len() + state.upstreams.len()) as u64
                    + self.connecting.load(Ordering::Relaxed);
                let descriptors = descriptor_estimate(&mut state.descriptors, held, counted);
                let usage = ResourceUsage {
                    descriptors,
                    socket_buffer_bytes: managed_memory_bytes,
                    connections: state.clients.len() as u64,
                };
                let reason = self.reason(&usage);
                let closing = match state.manager.as_mut() {
                    Some(manager) => manager.connections_to_close(now, usage),
                    None => Vec::new(),
                };
                for id in closing {
                    let since = state
                        .clients
                        .get(&id)
                        .and_then(|c| c.idle_since)
                        .unwrap_or(now);
                    if self.reclaim(state, id, since, now, reason) {
                        report.closes += 1;
                    }
                }
            }
        }
        self.send_side(now, plan, &mut report);
        self.receive_side(now, plan, &mut report);
        self.metrics
            .buffer_sets_deferred
            .inc_by(report.buffers_deferred as u64);
        let state = self.lock();
        report.clients = state.clients.len();
        report.upstreams = state.upstreams.len();
        report
    }

    fn reason(&self, usage: &ResourceUsage) -> CloseReason {
        let [descriptors, memory, connections] = self.thresholds;
        if usage.descriptors > descriptors.low {
            CloseReason::Descriptors
        } else if usage.socket_buffer_bytes > memory.low {
            CloseReason::TcpMemory
        } else if usage.connections > connections.low {
            CloseReason::Connections
        } else {
            CloseReason::IdleListFull
        }
    }

    /// Tells connection `id` to close gracefully, unless a request has
    /// already arrived on it that the connection has not read yet (the
    /// manager saw it idle; it is not): then it stays, and returns to the
    /// idle list when that request's response ends. True when told.
    fn reclaim(
        &self,
        state: &mut State,
        id: u64,
        since: Nanos,
        now: Nanos,
        reason: CloseReason,
    ) -> bool {
        let Some(c) = state.clients.get(&id) else {
            return false;
        };
        // SAFETY: as in `read_clients` (the lock is held: `state`).
        let fd = unsafe { BorrowedFd::borrow_raw(c.fd) };
        if tcp_info::unread_bytes(fd).is_ok_and(|n| n > 0) {
            self.metrics.reclaims_skipped_for_request.inc();
            return false;
        }
        let idle = Duration::from_nanos(now.saturating_sub(since).as_nanos());
        c.reclaim.notify_one();
        self.metrics
            .closes
            .get_or_create(&super::metrics::ReasonLabel {
                reason: reason.name().into(),
            })
            .inc();
        eprintln!(
            "vantage proxy: reclaimed idle connection {id} (idle {} ms, {})",
            idle.as_millis(),
            reason.name()
        );
        if state.audit.len() >= MAX_AUDIT_RECORDS {
            state.audit.pop_front();
        }
        state.audit.push_back(Reclaim {
            id,
            at: Duration::from_nanos(now.as_nanos()),
            idle,
            reason,
        });
        true
    }

    /// The send side: in an interval that reads, each client connection's
    /// `TCP_INFO` ([`Self::read_clients`]) updates E-ATBT; then every
    /// connection's target is weighed and the buffers
    /// [`plan_sets`] chooses are set. Socket calls run under the lock in
    /// chunks of [`CHUNK`] connections, each checked still registered
    /// (one unregistered meanwhile may have closed its descriptor):
    /// accepts, requests and closes wait for one chunk at most, not the
    /// interval.
    fn send_side(&self, now: Nanos, plan: IntervalPlan, report: &mut IntervalReport) {
        if plan.read {
            self.read_clients(report);
        }
        let mut decaying = HashSet::new();
        let (moves, tracked) = {
            let state = self.lock();
            let manager = state.manager.as_ref();
            let mut moves = Vec::new();
            for (&id, c) in &state.clients {
                let decayed = match state.draining.contains(&id) {
                    true => None,
                    false => manager.and_then(|m| m.idle_buffer_bytes(id, now)),
                };
                let held = match decayed {
                    Some(decayed) => decayed,
                    None => match state.allocator.assigned(id) {
                        Some(data) => 2 * data,
                        None => continue,
                    },
                };
                if decayed.is_some() {
                    decaying.insert(id);
                }
                let held = held.clamp(min_held(c.mss), self.limits.send_max);
                self.metrics.send_assigned.observe(held as f64);
                moves.push(BufferMove {
                    id,
                    applied: c.applied,
                    target: held,
                });
            }
            (moves, state.clients.len())
        };
        let chosen = plan_sets(moves, set_budget(tracked), plan.cut);
        report.buffers_deferred += chosen.deferred;
        self.apply_buffers(&chosen.set, Side::Send, &decaying, report);
        // A connection still draining its last response is on the idle
        // list since the response was handed to the socket, and the loop
        // sized it as in use: what it gets back on reuse, and what its
        // decay starts from, is that size, not the one it had when the
        // response was handed over.
        let mut state = self.lock();
        let State {
            clients,
            manager,
            draining,
            ..
        } = &mut *state;
        if let Some(manager) = manager.as_mut() {
            for id in draining.iter() {
                if let Some(applied) = clients.get(id).and_then(|c| c.applied) {
                    manager.update_idle_buffer(*id, applied);
                }
            }
        }
    }

    /// Reads every client connection's `TCP_INFO` and updates the
    /// allocator: path estimates, peak occupancy, and the connections that
    /// went idle leave it.
    fn read_clients(&self, report: &mut IntervalReport) {
        // Every client connection is read, those with no request in
        // progress too: a response is complete once written into the send
        // buffer, and a large buffer may take seconds to drain. One whose
        // send buffer still holds data is transferring (Section 3.2's
        // "active"): it is measured and keeps its E-ATBT assignment;
        // without this a connection whose buffer holds whole responses
        // would look idle at every interval and never be measured again.
        let clients: Vec<(u64, RawFd, bool)> = {
            let state = self.lock();
            state
                .clients
                .iter()
                .map(|(&id, c)| (id, c.fd, c.active == 0 && c.idle_since.is_some()))
                .collect()
        };
        let interval_us = self.interval().as_micros().max(1) as f64;
        let mut idle = Vec::new();
        let mut draining = HashSet::new();
        let mut paths = Vec::with_capacity(clients.len());
        let mut occupancy = Vec::with_capacity(clients.len());
        for chunk in clients.chunks(CHUNK) {
            let mut state = self.lock();
            for &(id, fd, no_request) in chunk {
                let Some(c) = state.clients.get_mut(&id).filter(|c| c.fd == fd) else {
                    continue;
                };
                // SAFETY: the descriptor stays open while registered: its
                // stream closes only after unregistering, which waits for
                // this lock.
                let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                let Ok(info) = tcp_info::tcp_info(fd) else {
                    report.read_errors += 1;
                    if no_request {
                        idle.push(id);
                    }
                    continue;
                };
                if let Some(segs) = info.data_segs_out {
                    c.loss.observe_counters(segs, info.total_retrans);
                }
                // Since the last read (or since the connection opened).
                let busy_us = since(info.busy_time_us, &mut c.busy_us);
                let sndbuf_limited_us = since(info.sndbuf_limited_us, &mut c.sndbuf_limited_us);
                c.mss = info.snd_mss.max(1);
                // Data in the send buffer: unacknowledged plus not yet sent.
                let queued = u64::from(info.unacked) * u64::from(c.mss)
                    + u64::from(info.notsent_bytes.unwrap_or(0));
                if no_request {
                    if queued == 0 {
                        idle.push(id);
                        continue;
                    }
                    draining.insert(id);
                }
                if info.rtt_us == 0 {
                    continue;
                }
                let window = info.snd_wnd.map_or(u64::from(u32::MAX), u64::from);
                paths.push((
                    id,
                    PathEstimate {
                        rtt_secs: f64::from(info.rtt_us) / 1e6,
                        rto_secs: f64::from(info.rto_us) / 1e6,
                        loss: c.loss.estimate(),
                        max_window_segments: (window / u64::from(c.mss)).max(1) as f64,
                    },
                ));
                // Against the buffer it had this interval (none set yet:
                // the kernel's own, not judged).
                if let Some(held) = c.applied {
                    occupancy.push(Occupancy {
                        id,
                        peak_bytes: queued,
                        buffer_bytes: held / 2,
                        busy_fraction: busy_us.map(|busy| busy as f64 / interval_us),
                        buffer_limited: sndbuf_limited_us.is_some_and(|limited| limited > 0),
                    });
                }
            }
        }
        let mut state = self.lock();
        let state = &mut *state;
        for id in &idle {
            state.allocator.release(*id);
        }
        // One re-division for the interval (it also re-divides the shares
        // of the connections closed since the last one).
        match state.allocator.set_paths(&paths) {
            Ok(refused) => report.read_errors += refused,
            Err(_) => report.read_errors += paths.len(),
        }
        state.allocator.observe_peak_occupancy(&occupancy);
        self.metrics
            .send_pool_used
            .set(2 * state.allocator.total_assigned() as i64);
        // Only those still registered.
        draining.retain(|id| state.clients.contains_key(id));
        state.draining = draining;
    }

    /// The receive side, chunked as [`Self::send_side`]: in an interval
    /// that reads, each upstream connection's tuner takes its interval's
    /// observation; then the receive pool is divided over what the tuners
    /// hold (an idle pooled one: its decay) and the buffers
    /// [`plan_sets`] chooses are set.
    fn receive_side(&self, now: Nanos, plan: IntervalPlan, report: &mut IntervalReport) {
        let ids: Vec<u64> = if plan.read {
            self.read_upstreams(now, report)
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        } else {
            self.lock().upstreams.keys().copied().collect()
        };
        if ids.is_empty() {
            return;
        }
        let mut shrinking = HashSet::new();
        let (moves, tracked) = {
            let state = self.lock();
            let mut live_ids = Vec::with_capacity(ids.len());
            let mut demands = Vec::with_capacity(ids.len());
            let mut idle_ids = HashSet::new();
            for id in ids {
                let Some(u) = state.upstreams.get(&id) else {
                    continue;
                };
                live_ids.push(id);
                // Idle in the pool: what the decay leaves it (Section 3.2).
                match state
                    .pooled
                    .as_ref()
                    .and_then(|m| m.idle_buffer_bytes(id, now))
                {
                    Some(decayed) => {
                        idle_ids.insert(id);
                        demands.push(decayed);
                    }
                    None => demands.push(u.tuner.held_bytes()),
                }
            }
            let pool = state.schedule.pool();
            let receive_pool = pool - (pool as f64 * self.config.send_fraction) as u64;
            let grants = max_min_proportional(&demands, receive_pool);
            let mut used = 0u64;
            let mut moves = Vec::new();
            for (id, grant) in live_ids.into_iter().zip(grants) {
                let Some(u) = state.upstreams.get(&id) else {
                    continue;
                };
                let idle = idle_ids.contains(&id);
                // An idle one's grant is at most its decayed demand.
                let wanted = if idle {
                    grant
                } else {
                    grant.min(u.tuner.advertised_bytes())
                };
                let held = wanted.clamp(min_held(ALLOCATOR_MSS), self.limits.receive_max);
                used += held;
                self.metrics.receive_assigned.observe(held as f64);
                // Never set before (still autotuned): whether this is a
                // shrink is known only against the socket's current
                // buffer, read when it is set.
                if idle && u.applied.is_none_or(|a| held < a) {
                    shrinking.insert(id);
                }
                moves.push(BufferMove {
                    id,
                    applied: u.applied,
                    target: held,
                });
            }
            self.metrics.receive_pool_used.set(used as i64);
            (moves, state.upstreams.len())
        };
        let chosen = plan_sets(moves, set_budget(tracked), plan.cut);
        report.buffers_deferred += chosen.deferred;
        self.apply_buffers(&chosen.set, Side::Receive, &shrinking, report);
    }

    /// Reads every upstream connection's `TCP_INFO` and `SO_MEMINFO` into
    /// its tuner, from the dump ([`Self::dump_upstreams`]) or by
    /// `getsockopt`; the ids read and their observations.
    fn read_upstreams(
        &self,
        now: Nanos,
        report: &mut IntervalReport,
    ) -> Vec<(u64, IntervalObservation)> {
        let registered: Vec<(u64, RawFd, Option<SocketIdentity>)> = {
            let state = self.lock();
            state
                .upstreams
                .iter()
                .map(|(&id, u)| (id, u.fd, u.identity))
                .collect()
        };
        let mut dump = match self.dump.lock() {
            Ok(d) => d,
            Err(poisoned) => poisoned.into_inner(),
        };
        let dumping = self.dump_upstreams(&registered, &mut dump, report);
        let mut read = Vec::with_capacity(registered.len());
        for (c, chunk) in registered.chunks(CHUNK).enumerate() {
            let mut state = self.lock();
            for (k, &(id, fd, identity)) in chunk.iter().enumerate() {
                let Some(u) = state
                    .upstreams
                    .get_mut(&id)
                    .filter(|u| u.fd == fd && u.identity == identity)
                else {
                    continue;
                };
                let dumped = dump.readings.get_mut(c * CHUNK + k).and_then(Option::take);
                let (info, memory) = match dumped {
                    Some(reading) => {
                        report.upstream_reads_dumped += 1;
                        reading
                    }
                    None => {
                        if dumping {
                            report.upstream_reads_fallback += 1;
                        }
                        // SAFETY: as in `read_clients`.
                        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                        match (tcp_info::tcp_info(fd), tcp_info::socket_memory(fd)) {
                            (Ok(info), Ok(memory)) => (info, memory),
                            _ => {
                                report.read_errors += 1;
                                continue;
                            }
                        }
                    }
                };
                let observation = upstream_observation(u, &info, &memory);
                u.tuner.end_interval(now, &observation);
                read.push((id, observation));
            }
        }
        read
    }

    /// The dump of the upstream connections in `registered`, outside the
    /// lock, into `dump.readings` (by index in `registered`) when there
    /// are at least [`DUMP_MIN_UPSTREAMS`] with a cookie and each address
    /// family's distinct remote ports fit the filter: one dump per family
    /// present, filtered on its remote ports, each reply matched by
    /// cookie. Whether the connections were to be read by the dump (those
    /// it did not give are then fallbacks); a failed dump leaves no
    /// reading (every connection falls back) and is counted.
    fn dump_upstreams(
        &self,
        registered: &[(u64, RawFd, Option<SocketIdentity>)],
        dump: &mut UpstreamDump,
        report: &mut IntervalReport,
    ) -> bool {
        let UpstreamDump {
            diag,
            skip,
            cookies,
            readings,
        } = dump;
        cookies.clear();
        readings.clear();
        let identified = registered.iter().filter(|r| r.2.is_some()).count();
        if identified < self.dump_min_upstreams {
            return false;
        }
        if *skip > 0 {
            *skip -= 1;
            return true;
        }
        let mut v4 = PortFilter::default();
        let mut v6 = PortFilter::default();
        for (i, &(_, _, identity)) in registered.iter().enumerate() {
            let Some(identity) = identity else { continue };
            let ports = match identity.family {
                sock_diag::Family::V4 => &mut v4.remote_ports,
                sock_diag::Family::V6 => &mut v6.remote_ports,
            };
            if !ports.contains(&identity.remote_port) {
                if ports.len() == sock_diag::MAX_FILTER_PORTS {
                    // More ports than one filter holds: every connection
                    // by `getsockopt`.
                    cookies.clear();
                    return true;
                }
                ports.push(identity.remote_port);
            }
            cookies.insert(identity.cookie, i);
        }
        readings.resize(registered.len(), None);
        let socket = match diag {
            Some(socket) => socket,
            None => match SockDiag::open() {
                Ok(socket) => diag.insert(socket),
                Err(_) => {
                    report.upstream_dump_failures += 1;
                    report.read_errors += 1;
                    readings.clear();
                    return true;
                }
            },
        };
        for (family, filter) in [(sock_diag::Family::V4, &v4), (sock_diag::Family::V6, &v6)] {
            if filter.is_empty() {
                continue;
            }
            let others = &mut report.upstream_dump_others;
            let matched = &mut report.upstream_dump_matched;
            let dumped = socket.dump(family, sock_diag::CONNECTED_STATES, Some(filter), |m| {
                let Some(&i) = cookies.get(&m.cookie) else {
                    *others += 1;
                    return Ok(());
                };
                *matched += 1;
                let socket = m.decode()?;
                if let (Some(info), Some(memory), Some(slot)) =
                    (socket.tcp_info, socket.memory, readings.get_mut(i))
                {
                    *slot = Some((info, memory));
                }
                Ok(())
            });
            if dumped.is_err() {
                report.upstream_dump_failures += 1;
                report.read_errors += 1;
                readings.clear();
                return true;
            }
        }
        if report.upstream_dump_others > report.upstream_dump_matched / 2 {
            *skip = DUMP_RETRY_INTERVALS;
        }
        true
    }

    /// Sets each of `moves` on its side, under the lock [`CHUNK`]
    /// connections at a time, each only if still registered (one
    /// unregistered meanwhile may have closed its descriptor).
    /// `shrinking`: connections whose target is their idle decay (pooled
    /// upstream ones, idle client ones), set only if still idle (one taken
    /// back into use meanwhile has its buffer back); the upstream ones
    /// are counted.
    fn apply_buffers(
        &self,
        moves: &[BufferMove],
        side: Side,
        shrinking: &HashSet<u64>,
        report: &mut IntervalReport,
    ) {
        for chunk in moves.chunks(CHUNK) {
            let mut state = self.lock();
            for &BufferMove { id, target, .. } in chunk {
                let idle_shrink = shrinking.contains(&id);
                let idle_list = match side {
                    Side::Send => state.manager.as_ref(),
                    Side::Receive => state.pooled.as_ref(),
                };
                if idle_shrink && !idle_list.is_some_and(|m| m.is_idle(id)) {
                    continue;
                }
                let registered = match side {
                    Side::Send => state.clients.get_mut(&id).map(|c| (c.fd, &mut c.applied)),
                    Side::Receive => state.upstreams.get_mut(&id).map(|u| (u.fd, &mut u.applied)),
                };
                let Some((fd, applied)) = registered else {
                    continue;
                };
                // SAFETY: the descriptor stays open while registered (see
                // `read_clients`), and the lock is held.
                let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                // What an idle upstream connection held before: the value
                // last set, or the kernel's own if none was.
                let before = if idle_shrink && matches!(side, Side::Receive) {
                    applied.or_else(|| tcp_info::receive_buffer(fd).ok().map(u64::from))
                } else {
                    None
                };
                let set = match side {
                    Side::Send => tcp_info::set_buffer_computed(
                        fd,
                        SocketBuffer::Send,
                        target,
                        self.limits.send_max,
                    ),
                    Side::Receive => tcp_info::set_buffer_computed(
                        fd,
                        SocketBuffer::Receive,
                        target,
                        self.limits.receive_max,
                    ),
                };
                match set {
                    Ok(now_held) => {
                        *applied = Some(u64::from(now_held));
                        report.buffers_set += 1;
                        if before.is_some_and(|b| u64::from(now_held) < b) {
                            report.idle_upstream_shrinks += 1;
                            self.metrics.idle_upstream_shrinks.inc();
                        }
                    }
                    Err(_) => report.read_errors += 1,
                }
            }
        }
    }
}

/// An upstream connection's observation for its tuner from its
/// `TCP_INFO` and `SK_MEMINFO`, whether read by `getsockopt` or from the
/// dump (the same decoders: `sys::sock_diag`): the allocated receive
/// memory is the stored data (U_i), Δ`bytes_received` the data received,
/// a change in `rcv_ooopack` a loss; the counters become the
/// connection's last ones.
fn upstream_observation(
    u: &mut UpstreamState,
    info: &TcpInfo,
    memory: &SocketMemory,
) -> IntervalObservation {
    let received = match (info.bytes_received, u.received) {
        (Some(total), Some(previous)) => total.saturating_sub(previous),
        (Some(total), None) => total,
        _ => 0,
    };
    let loss = match (info.rcv_ooopack, u.out_of_order) {
        (Some(total), Some(previous)) => total != previous,
        _ => false,
    };
    u.received = info.bytes_received;
    u.out_of_order = info.rcv_ooopack;
    IntervalObservation {
        peak_stored_bytes: u64::from(memory.rmem_alloc),
        received_bytes: received,
        loss,
    }
}

/// How much a cumulative kernel counter moved since `last` (which it
/// then becomes); None if the kernel does not report it.
fn since(total: Option<u64>, last: &mut Option<u64>) -> Option<u64> {
    let total = total?;
    let moved = total.saturating_sub(last.unwrap_or(0));
    *last = Some(total);
    Some(moved)
}

/// Which buffer [`Resources::apply_buffers`] sets: client connections'
/// send buffers or upstream connections' receive buffers.
#[derive(Clone, Copy)]
enum Side {
    Send,
    Receive,
}

/// Whether the descriptors are to be counted this interval (its cost grows
/// with the count: a `poll` over the descriptor table): the first interval and
/// every [`DESCRIPTOR_RECOUNT`]th. Near the marks too: the estimate
/// between counts follows every socket the proxy opens or closes, and
/// what it misses (files, the metrics endpoint's connections) changes
/// little in ten intervals.
fn needs_recount(last: Option<(u64, u64, u32)>) -> bool {
    last.is_none_or(|(_, _, age)| age + 1 >= DESCRIPTOR_RECOUNT)
}

/// Descriptors in use: the count when one was taken, else the last count
/// moved by the change in the sockets the proxy holds (`held`: registered
/// connections and upstream sockets being connected, one descriptor
/// each).
fn descriptor_estimate(last: &mut Option<(u64, u64, u32)>, held: u64, counted: Option<u64>) -> u64 {
    match (counted, *last) {
        (Some(count), _) => {
            *last = Some((count, held, 0));
            count
        }
        (None, Some((count, then, age))) => {
            *last = Some((count, then, age + 1));
            (count + held).saturating_sub(then)
        }
        (None, None) => held,
    }
}

/// An upstream socket being connected, counted until dropped
/// ([`Resources::connecting`]).
pub struct ConnectingSocket {
    resources: Arc<Resources>,
}

impl Drop for ConnectingSocket {
    fn drop(&mut self) {
        self.resources.connecting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// CPU time of the calling thread, seconds.
pub fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0.0;
    }
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// The control loop: one interval every `interval_ms` until `stop` turns
/// true; its own CPU time goes to the metrics.
pub fn run_loop(resources: Arc<Resources>, stop: tokio::sync::watch::Receiver<bool>) {
    let interval = resources.interval();
    let mut next = Instant::now() + interval;
    loop {
        while Instant::now() < next {
            if *stop.borrow() {
                return;
            }
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
        }
        next += interval;
        let start = thread_cpu_seconds();
        let report = resources.run_interval();
        let m = &resources.metrics;
        m.cpu_seconds
            .inc_by((thread_cpu_seconds() - start).max(0.0));
        m.intervals.inc();
        m.errors.inc_by(report.read_errors as u64);
        m.record_upstream_reads(&report);
        let behind = Instant::now().saturating_duration_since(next);
        if behind > interval {
            // Skip the intervals already missed rather than run them back to back.
            next = Instant::now() + interval;
        }
    }
}

/// Removes a connection from the loop's tables before its descriptor
/// closes.
pub struct Registration {
    resources: Arc<Resources>,
    id: u64,
    upstream: bool,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.resources.unregister(self.id, self.upstream);
    }
}

/// A stream the control loop may be tracking: the registration is dropped
/// (unregistered) before the stream, so the loop never touches a closed or
/// reused descriptor.
pub struct TrackedStream<S> {
    registration: Option<Registration>,
    stream: S,
}

impl<S> TrackedStream<S> {
    pub fn untracked(stream: S) -> TrackedStream<S> {
        TrackedStream {
            registration: None,
            stream,
        }
    }

    /// The id the loop knows it by, if tracked.
    pub fn id(&self) -> Option<u64> {
        self.registration.as_ref().map(|r| r.id)
    }

    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// Request/response events for the connection manager.
    pub fn events(&self) -> Option<ConnectionEvents> {
        self.registration.as_ref().map(|r| ConnectionEvents {
            resources: Arc::clone(&r.resources),
            id: r.id,
        })
    }
}

impl<S> Drop for TrackedStream<S> {
    fn drop(&mut self) {
        self.registration.take();
    }
}

/// A handle that reports a client connection's requests to the manager.
#[derive(Clone)]
pub struct ConnectionEvents {
    resources: Arc<Resources>,
    id: u64,
}

impl std::fmt::Debug for ConnectionEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConnectionEvents({})", self.id)
    }
}

impl ConnectionEvents {
    pub fn request_started(&self) {
        self.resources.request_started(self.id);
    }

    pub fn response_completed(&self) {
        self.resources.response_completed(self.id);
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for TrackedStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for TrackedStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_bound_is_two_segments_truesize() {
        assert_eq!(min_held(1448), 2 * (1448 + SKB_OVERHEAD));
        assert_eq!(min_held(0), 2 * (536 + SKB_OVERHEAD));
    }

    #[test]
    fn descriptors_between_counts_follow_the_sockets_held() {
        let mut last = None;
        assert!(needs_recount(last));
        // Counted: 500 descriptors while the proxy held 400 sockets.
        assert_eq!(descriptor_estimate(&mut last, 400, Some(500)), 500);
        for age in 1..DESCRIPTOR_RECOUNT {
            assert!(!needs_recount(last), "interval {age}");
            // 50 more sockets each interval: the estimate follows them.
            let held = 400 + 50 * u64::from(age);
            assert_eq!(descriptor_estimate(&mut last, held, None), 100 + held);
        }
        assert!(needs_recount(last), "every tenth interval");
        assert_eq!(descriptor_estimate(&mut last, 10, Some(90)), 90);
        assert_eq!(descriptor_estimate(&mut last, 0, None), 80);
    }

    #[test]
    fn upstream_sockets_being_connected_are_counted_until_dropped() {
        let r = Arc::new(
            Resources::new(
                ResourcesConfig::default(),
                limits(),
                400,
                ResourceMetrics::default(),
            )
            .unwrap(),
        );
        let a = r.connecting();
        let b = r.connecting();
        assert_eq!(r.connecting.load(Ordering::Relaxed), 2);
        drop(a);
        drop(b);
        assert_eq!(r.connecting.load(Ordering::Relaxed), 0);
    }

    /// `connections` loopback connections whose accepted ends (the ones
    /// to track) hold 1000 + 100·i bytes unread, each from its own
    /// ephemeral remote port; the peers are returned to keep them open.
    fn upstream_pairs(connections: usize) -> (Vec<std::net::TcpStream>, Vec<std::net::TcpStream>) {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (mut peers, mut accepted) = (Vec::new(), Vec::new());
        for i in 0..connections {
            let mut peer = std::net::TcpStream::connect(address).unwrap();
            let (own, _) = listener.accept().unwrap();
            let sent = 1000 + 100 * i as u64;
            peer.write_all(&vec![7u8; sent as usize]).unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while tcp_info::tcp_info(&own).unwrap().bytes_received < Some(sent) {
                assert!(Instant::now() < deadline, "data not received");
                std::thread::sleep(Duration::from_millis(1));
            }
            peers.push(peer);
            accepted.push(own);
        }
        (peers, accepted)
    }

    /// `ssbt` reading upstream connections by the dump from
    /// `dump_min_upstreams` of them on.
    fn dumping(dump_min_upstreams: usize) -> Arc<Resources> {
        Arc::new(
            Resources::new(
                ResourcesConfig {
                    mode: ResourceMode::Ssbt,
                    pool_bytes: Some(64 << 20),
                    ..ResourcesConfig::default()
                },
                limits(),
                400,
                ResourceMetrics::default(),
            )
            .unwrap()
            .with_dump_min_upstreams(dump_min_upstreams),
        )
    }

    fn read_once(r: &Resources) -> (IntervalReport, Vec<(u64, IntervalObservation)>) {
        let mut report = IntervalReport::default();
        let mut read = r.read_upstreams(r.now(), &mut report);
        read.sort_by_key(|&(id, _)| id);
        (report, read)
    }

    #[test]
    fn the_dump_and_getsockopt_give_the_same_observations() {
        let (_peers, accepted) = upstream_pairs(6);
        let by_dump = dumping(1);
        let by_getsockopt = dumping(usize::MAX);
        let _a: Vec<_> = accepted.iter().map(|s| by_dump.track_upstream(s)).collect();
        let _b: Vec<_> = accepted
            .iter()
            .map(|s| by_getsockopt.track_upstream(s))
            .collect();
        let (dump_report, dumped) = read_once(&by_dump);
        let (getsockopt_report, read) = read_once(&by_getsockopt);
        assert_eq!(
            (
                dump_report.upstream_reads_dumped,
                dump_report.upstream_reads_fallback,
                dump_report.upstream_dump_failures,
                dump_report.read_errors
            ),
            (6, 0, 0, 0)
        );
        assert_eq!(
            (
                getsockopt_report.upstream_reads_dumped,
                getsockopt_report.upstream_reads_fallback,
                getsockopt_report.read_errors
            ),
            (0, 0, 0)
        );
        // Idle sockets: the same bytes received and stored either way,
        // each connection's own (the cookie matched each reply to it).
        assert_eq!(dumped, read);
        for (i, (_, observation)) in dumped.iter().enumerate() {
            assert_eq!(observation.received_bytes, 1000 + 100 * i as u64);
            assert!(observation.peak_stored_bytes >= 1000 + 100 * i as u64);
            assert!(!observation.loss);
        }
        // The next interval: nothing more received, by the dump too.
        let (_, again) = read_once(&by_dump);
        assert!(
            again.iter().all(|(_, o)| o.received_bytes == 0),
            "{again:?}"
        );
    }

    #[test]
    fn a_connection_missing_from_the_dump_is_read_by_getsockopt_and_counted() {
        let (mut peers, accepted) = upstream_pairs(3);
        let r = dumping(1);
        let _tracked: Vec<_> = accepted.iter().map(|s| r.track_upstream(s)).collect();
        // The first connection reset by its peer: closed, out of the
        // socket hash the dump walks, still readable by `getsockopt`.
        let peer = peers.remove(0);
        socket2::SockRef::from(&peer)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(peer);
        let deadline = Instant::now() + Duration::from_secs(10);
        const TCP_CLOSE: u8 = 7;
        while tcp_info::tcp_info(&accepted[0]).unwrap().state != TCP_CLOSE {
            assert!(Instant::now() < deadline, "not reset");
            std::thread::sleep(Duration::from_millis(1));
        }
        let (report, read) = read_once(&r);
        assert_eq!(
            (
                report.upstream_reads_dumped,
                report.upstream_reads_fallback,
                report.upstream_dump_failures,
                report.read_errors
            ),
            (2, 1, 0, 0)
        );
        assert_eq!(read.len(), 3, "every connection read: {read:?}");
        assert_eq!(read[0].1.received_bytes, 1000);
    }

    #[test]
    fn more_remote_ports_than_the_filter_holds_read_all_by_getsockopt() {
        let ports = sock_diag::MAX_FILTER_PORTS;
        let (_peers, accepted) = upstream_pairs(ports + 1);
        let r = dumping(1);
        let mut tracked: Vec<_> = accepted.iter().map(|s| r.track_upstream(s)).collect();
        let (report, read) = read_once(&r);
        assert_eq!(
            (
                report.upstream_reads_dumped,
                report.upstream_reads_fallback,
                report.upstream_dump_failures,
                report.read_errors
            ),
            (0, ports + 1, 0, 0)
        );
        assert_eq!(read.len(), ports + 1);
        // One fewer: the filter holds them, the dump reads them all.
        tracked.pop();
        let (report, read) = read_once(&r);
        assert_eq!(
            (report.upstream_reads_dumped, report.upstream_reads_fallback),
            (ports, 0)
        );
        assert_eq!(read.len(), ports);
    }

    #[test]
    fn a_dump_letting_through_many_other_sockets_is_left_for_a_while() {
        use std::io::Write;
        // Tracked: the connecting ends of two connections to a listener;
        // not tracked: three more connections to it, whose connecting
        // ends have the same remote port.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (mut own, mut accepted) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let mut stream = std::net::TcpStream::connect(address).unwrap();
            stream.write_all(&[1u8; 100]).unwrap();
            accepted.push(listener.accept().unwrap().0);
            own.push(stream);
        }
        let others = (own.split_off(2), accepted.split_off(2));
        let r = dumping(1);
        let _tracked: Vec<_> = own.iter().map(|s| r.track_upstream(s)).collect();
        let (first, read) = read_once(&r);
        assert_eq!(
            (first.upstream_reads_dumped, first.upstream_dump_matched),
            (2, 2)
        );
        assert!(first.upstream_dump_others >= 3, "{first:?}");
        assert_eq!(read.len(), 2);
        for i in 0..DUMP_RETRY_INTERVALS {
            let (report, read) = read_once(&r);
            assert_eq!(
                (report.upstream_reads_dumped, report.upstream_reads_fallback),
                (0, 2),
                "interval {i}"
            );
            assert_eq!(read.len(), 2);
        }
        // Tried again: still as many others, left again.
        let (again, _) = read_once(&r);
        assert_eq!(again.upstream_reads_dumped, 2);
        let (after, _) = read_once(&r);
        assert_eq!(after.upstream_reads_fallback, 2);
        // Without the others (closed: out of the dumped states), the
        // dump is kept once tried again.
        drop(others);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (report, _) = read_once(&r);
            if report.upstream_reads_dumped == 2 && report.upstream_dump_others == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "{report:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
        let (kept, _) = read_once(&r);
        assert_eq!(kept.upstream_reads_dumped, 2, "{kept:?}");
    }

    fn limits() -> KernelLimits {
        KernelLimits {
            send_max: 8 << 20,
            receive_max: 12 << 20,
            tcp_mem: Some(tcp_info::TcpMemLimits {
                low: 1000,
                pressure: 2000,
                high: 3000,
            }),
            page_bytes: 4096,
            descriptor_limit: 1000,
            cgroup: None,
        }
    }

    #[test]
    fn defaults_derive_the_pool_and_marks() {
        let config = ResourcesConfig {
            mode: ResourceMode::SsbtWithConnections,
            ..ResourcesConfig::default()
        };
        let r = Resources::new(config, limits(), 400, ResourceMetrics::default()).unwrap();
        assert_eq!(r.configured_pool(), 2000 * 4096 / 2);
        assert_eq!(
            r.thresholds[0],
            Threshold {
                high: 900,
                low: 800
            }
        );
        assert_eq!(
            r.thresholds[2],
            Threshold {
                high: 380,
                low: 360
            }
        );
        let ssbt = Resources::new(
            ResourcesConfig {
                mode: ResourceMode::Ssbt,
                pool_bytes: Some(1 << 20),
                ..ResourcesConfig::default()
            },
            limits(),
            400,
            ResourceMetrics::default(),
        )
        .unwrap();
        assert_eq!(ssbt.configured_pool(), 1 << 20);
        assert_eq!(ssbt.thresholds[0].high, u64::MAX, "no closes without +conn");
    }

    #[test]
    fn without_tcp_mem_a_tuned_mode_needs_a_pool_and_autotune_does_not() {
        let hidden = KernelLimits {
            tcp_mem: None,
            ..limits()
        };
        let with = |mode, pool_bytes| {
            Resources::new(
                ResourcesConfig {
                    mode,
                    pool_bytes,
                    ..ResourcesConfig::default()
                },
                hidden.clone(),
                400,
                ResourceMetrics::default(),
            )
        };
        assert!(with(ResourceMode::Autotune, None).is_ok());
        assert!(with(ResourceMode::Fixed, None).is_ok());
        let err = with(ResourceMode::Ssbt, None).err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("resources.pool_bytes")),
            "{err:?}"
        );
        let managed = with(ResourceMode::SsbtWithConnections, Some(1 << 20)).unwrap();
        assert_eq!(managed.configured_pool(), 1 << 20);
        assert_eq!(managed.thresholds[1].high, u64::MAX, "no memory mark");
        assert!(!managed.run_interval().pressure);
    }

    #[test]
    fn a_pressure_cut_sets_every_shrink_without_reading_and_the_next_interval_reads() {
        use std::io::{Read, Write};
        use vantage_sys::cgroup::CgroupMemorySource;
        let dir = std::env::temp_dir().join(format!(
            "vantage-proxy-cut-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let usage = dir.join("memory.kmem.tcp.usage_in_bytes");
        std::fs::write(&usage, "0\n").unwrap();
        let limit = 1 << 30;
        let limits = KernelLimits {
            tcp_mem: None,
            cgroup: Some(CgroupTcpMemory {
                source: CgroupMemorySource::V1Tcp,
                dir: dir.clone(),
                limit_bytes: limit,
            }),
            ..limits()
        };
        // 240 KiB: the receive half, 120 KiB, binds three upstream
        // connections (their tuners start from the kernel's initial
        // buffer, larger than 40 KiB each).
        let r = Arc::new(
            Resources::new(
                ResourcesConfig {
                    mode: ResourceMode::Ssbt,
                    pool_bytes: Some(240 << 10),
                    ..ResourcesConfig::default()
                },
                limits,
                400,
                ResourceMetrics::default(),
            )
            .unwrap(),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let mut peers = Vec::new();
        let mut tracked = Vec::new();
        for _ in 0..3 {
            let mut peer = std::net::TcpStream::connect(address).unwrap();
            let (mut accepted, _) = listener.accept().unwrap();
            accepted.write_all(&[0u8; 1000]).unwrap();
            peer.read_exact(&mut [0u8; 1000]).unwrap();
            // Data back, which acknowledges the first: TCP_INFO has an RTT.
            peer.write_all(&[0u8; 1000]).unwrap();
            accepted.read_exact(&mut [0u8; 1000]).unwrap();
            tracked.push(r.track_upstream(accepted));
            peers.push(peer);
        }
        let ids: Vec<u64> = tracked.iter().map(|t| t.id().unwrap()).collect();
        let held = |r: &Resources| -> Vec<u64> {
            let state = r.lock();
            ids.iter()
                .map(|id| state.upstreams[id].applied.unwrap())
                .collect()
        };
        let first = r.run_interval();
        assert!(first.read && !first.cut);
        assert_eq!(first.buffers_set, 3);
        let before = held(&r);
        // Pressure: a quarter off the pool, every buffer set smaller,
        // nothing read.
        std::fs::write(&usage, format!("{limit}\n")).unwrap();
        let cut = r.run_interval();
        assert!(cut.pressure && cut.cut && !cut.read);
        assert_eq!(cut.pool_bytes, (240 << 10) / 4 * 3);
        assert_eq!(cut.buffers_set, 3);
        let after = held(&r);
        for (b, a) in before.iter().zip(&after) {
            assert!(*a <= b - b / 5, "{before:?} → {after:?}");
        }
        // Still under pressure: this interval reads and holds the pool.
        let held_interval = r.run_interval();
        assert!(held_interval.read && !held_interval.cut);
        assert_eq!(held_interval.pool_bytes, cut.pool_bytes);
        assert_eq!(r.metrics.pressure_cuts.get(), 1);
        assert_eq!(r.metrics.unread_intervals.get(), 1);
        std::fs::write(&usage, "0\n").unwrap();
        let over = r.run_interval();
        assert!(over.read && over.pool_bytes > cut.pool_bytes);
        drop(tracked);
        assert_eq!(r.tracked().0, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cgroup_limit_below_tcp_mem_sets_the_pool_the_marks_and_the_pressure() {
        use vantage_sys::cgroup::CgroupMemorySource;
        let dir = std::env::temp_dir().join(format!("vantage-proxy-cgroup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let usage = dir.join("memory.kmem.tcp.usage_in_bytes");
        std::fs::write(&usage, "0\n").unwrap();
        // tcp_mem's pressure mark: 2000 pages of 4 KiB, 8,192,000 bytes;
        // the cgroup's: 90 % of 4 MiB, lower.
        let limit = 4 << 20;
        let capped = KernelLimits {
            cgroup: Some(CgroupTcpMemory {
                source: CgroupMemorySource::V1Tcp,
                dir: dir.clone(),
                limit_bytes: limit,
            }),
            ..limits()
        };
        assert_eq!(MemorySource::binding(&capped), Some(MemorySource::Cgroup));
        assert_eq!(MemorySource::binding(&limits()), Some(MemorySource::Host));
        let mark = limit / 10 * 9;
        let r = Resources::new(
            ResourcesConfig {
                mode: ResourceMode::SsbtWithConnections,
                ..ResourcesConfig::default()
            },
            capped.clone(),
            400,
            ResourceMetrics::default(),
        )
        .unwrap();
        assert_eq!(r.configured_pool(), mark / 2);
        assert_eq!(
            r.thresholds[1],
            Threshold {
                high: mark / 10 * 9,
                low: mark / 10 * 8
            }
        );
        let quiet = r.run_interval();
        assert_eq!(quiet.cgroup_tcp_bytes, Some(0));
        std::fs::write(&usage, format!("{mark}\n")).unwrap();
        let pressed = r.run_interval();
        assert_eq!(pressed.cgroup_tcp_bytes, Some(mark));
        assert!(pressed.pressure, "usage at 90 % of the cgroup limit");
        assert!(pressed.pool_bytes <= r.configured_pool() - r.configured_pool() / 4);
        // A cgroup alone (tcp_mem not visible) gives the default pool.
        let alone = Resources::new(
            ResourcesConfig {
                mode: ResourceMode::Ssbt,
                ..ResourcesConfig::default()
            },
            KernelLimits {
                tcp_mem: None,
                ..capped
            },
            400,
            ResourceMetrics::default(),
        )
        .unwrap();
        assert_eq!(alone.configured_pool(), mark / 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
