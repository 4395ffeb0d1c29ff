//! What the proxy's own sockets hold, sampled from outside the proxy's
//! code: the proxy runs in this process (in the server namespace), so its
//! sockets are among `/proc/self/fd`; they are the ones whose local port is
//! the proxy's listening port (client connections, and the listener) or
//! whose peer is the backend (upstream connections). The clients, also in
//! this process, have ephemeral local ports and the proxy as their peer,
//! so they never match; nginx is another process.
//!
//! A socket's kernel TCP memory is `SO_MEMINFO`'s `rmem_alloc +
//! wmem_queued + fwd_alloc`: what it has charged to the protocol's memory
//! account (`tcp_memory_allocated`, which `/proc/net/sockstat` reports
//! as `mem` in pages for every namespace at once).

use std::mem::ManuallyDrop;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{BorrowedFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use vantage_sys::tcp_info;

/// Which sockets are the proxy's.
#[derive(Clone, Copy, Debug)]
pub struct ProxySockets {
    /// The proxy's listening address (client connections share its port).
    pub front: SocketAddr,
    /// The backend the proxy connects to.
    pub backend: SocketAddr,
}

/// One of the proxy's sockets.
#[derive(Clone, Copy, Debug)]
pub struct ProxySocket {
    pub fd: RawFd,
    pub peer: Option<SocketAddr>,
    /// A client connection (or the listener), not an upstream one.
    pub client_side: bool,
}

impl ProxySockets {
    /// The proxy's sockets now. A descriptor closed or reused while this
    /// runs is read as whatever it is then (only reads are made).
    pub fn list(&self) -> Vec<ProxySocket> {
        let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for entry in dir.flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<RawFd>().ok())
            else {
                continue;
            };
            // SAFETY: the descriptor is only borrowed (never closed: the
            // stream is not dropped); on anything but a TCP socket the
            // address calls fail.
            let stream = ManuallyDrop::new(unsafe { TcpStream::from_raw_fd(fd) });
            let Ok(local) = stream.local_addr() else {
                continue;
            };
            let peer = stream.peer_addr().ok();
            if local == self.front {
                found.push(ProxySocket {
                    fd,
                    peer,
                    client_side: true,
                });
            } else if peer == Some(self.backend) {
                found.push(ProxySocket {
                    fd,
                    peer,
                    client_side: false,
                });
            }
        }
        found
    }
}

fn borrowed(fd: RawFd) -> BorrowedFd<'static> {
    // SAFETY: only used for getsockopt on a descriptor listed just before;
    // a descriptor closed since makes the call fail (EBADF).
    unsafe { BorrowedFd::borrow_raw(fd) }
}

/// A socket's charge to the kernel's TCP memory, bytes: what it uses plus
/// what it has reserved ahead (`sk_forward_alloc`, a signed `int` that
/// `SO_MEMINFO` hands out as `u32`: negative when the socket used memory
/// the kernel let it take without reserving it, e.g. a receive buffer set
/// below what was already queued).
pub fn charged_bytes(m: &tcp_info::SocketMemory) -> u64 {
    let used = i64::from(m.rmem_alloc) + i64::from(m.wmem_queued);
    (used + i64::from(m.fwd_alloc as i32)).max(0) as u64
}

/// One memory sample.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct MemorySample {
    /// Since the run's first download was due, seconds.
    pub t_s: f64,
    /// Kernel TCP memory of the proxy's sockets, bytes.
    pub proxy_bytes: u64,
    /// Of which client-facing (send side mostly).
    pub proxy_client_bytes: u64,
    pub proxy_sockets: u32,
    /// `/proc/net/sockstat` TCP `mem` in bytes: every namespace's sockets
    /// (the clients' too).
    pub host_tcp_bytes: u64,
    /// Body bytes the clients had received by then.
    pub client_bytes: u64,
}

/// Most client connections whose state is traced in one run; those
/// accepted beyond it are counted in [`Sampled::untraced_samples`].
pub const MAX_TRACED_CONNECTIONS: usize = 20_000;

/// One client connection of the proxy at one memory sample, as the kernel
/// reports it (`SO_MEMINFO`, `TCP_INFO`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ConnectionSample {
    pub t_s: f64,
    /// `SO_SNDBUF` as the kernel holds it (twice what was set), bytes.
    pub send_buffer: u32,
    /// Bytes queued for sending (sent and not acknowledged, or not sent).
    pub send_queued: u32,
    /// Segments sent and not acknowledged.
    pub unacked: u32,
    pub cwnd: u32,
    pub mss: u32,
    pub rtt_us: u32,
    /// The retransmission time-out; Linux doubles it at each back-off
    /// (`icsk_rto`), so its growth over the connection's smallest value
    /// counts consecutive time-outs.
    pub rto_us: u32,
    /// `tcpi_total_retrans`: segments retransmitted so far.
    pub total_retrans: u32,
    /// `tcpi_notsent_bytes`: data queued and not yet sent (`None`: the
    /// kernel's `tcp_info` is too short to carry it).
    pub notsent: Option<u32>,
}

/// The proxy's client connections over a run, by peer (the client's
/// address and port), samples in time order.
pub type ConnectionTraces = std::collections::HashMap<SocketAddr, Vec<ConnectionSample>>;

/// What [`sample_memory`] gathered.
#[derive(Clone, Debug, Default)]
pub struct Sampled {
    pub memory: Vec<MemorySample>,
    pub connections: ConnectionTraces,
    /// Samples of client connections not traced: first seen after [`MAX_TRACED_CONNECTIONS`] were.
    pub untraced_samples: u64,
}

/// The host's TCP memory at which a run is stopped early: 90 % of
/// `net.ipv4.tcp_mem`'s hard limit (above it every TCP socket on the
/// machine is refused memory), in bytes; `None` where it cannot be read.
pub fn host_guard_bytes() -> Option<u64> {
    let limits = tcp_info::tcp_mem_limits().ok()?;
    Some(limits.high.saturating_mul(tcp_info::page_size()) / 10 * 9)
}

/// Samples every `period` until `stop`; `t_s` counts from `epoch`. Sets
/// `guard_tripped` once the host's TCP memory reaches `guard_bytes`.
/// Traces each client connection's send side too (one `TCP_INFO` more per
/// connection and sample).
pub fn sample_memory(
    sockets: ProxySockets,
    period: Duration,
    epoch: Instant,
    stop: &AtomicBool,
    client_bytes: &AtomicU64,
    guard_bytes: Option<u64>,
    guard_tripped: &AtomicBool,
) -> Sampled {
    let page = tcp_info::page_size();
    let mut sampled = Sampled::default();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let mut sample = MemorySample {
            t_s: epoch.elapsed().as_secs_f64(),
            proxy_bytes: 0,
            proxy_client_bytes: 0,
            proxy_sockets: 0,
            host_tcp_bytes: tcp_info::tcp_memory_pages().map_or(0, |p| p * page),
            client_bytes: client_bytes.load(Ordering::Relaxed),
        };
        for socket in sockets.list() {
            if let Ok(m) = tcp_info::socket_memory(borrowed(socket.fd)) {
                let bytes = charged_bytes(&m);
                sample.proxy_bytes += bytes;
                sample.proxy_sockets += 1;
                if socket.client_side {
                    sample.proxy_client_bytes += bytes;
                    if let Some(peer) = socket.peer {
                        trace(&mut sampled, peer, sample.t_s, &m, borrowed(socket.fd));
                    }
                }
            }
        }
        if guard_bytes.is_some_and(|g| sample.host_tcp_bytes >= g) {
            guard_tripped.store(true, Ordering::Relaxed);
        }
        sampled.memory.push(sample);
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    sampled
}

/// Adds one sample of the client connection to `peer`.
fn trace(
    sampled: &mut Sampled,
    peer: SocketAddr,
    t_s: f64,
    memory: &tcp_info::SocketMemory,
    fd: BorrowedFd<'_>,
) {
    let Ok(info) = tcp_info::tcp_info(fd) else {
        return;
    };
    let traced = sampled.connections.len();
    let samples = match sampled.connections.entry(peer) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            if traced >= MAX_TRACED_CONNECTIONS {
                sampled.untraced_samples += 1;
                return;
            }
            e.insert(Vec::new())
        }
    };
    samples.push(ConnectionSample {
        t_s,
        send_buffer: memory.sndbuf,
        send_queued: memory.wmem_queued,
        unacked: info.unacked,
        cwnd: info.snd_cwnd,
        mss: info.snd_mss,
        rtt_us: info.rtt_us,
        rto_us: info.rto_us,
        total_retrans: info.total_retrans,
        notsent: info.notsent_bytes,
    });
}

/// One client connection of the step run at one instant.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BufferSample {
    pub t_s: f64,
    /// The client's address and port: one connection.
    pub peer: SocketAddr,
    /// The send buffer the kernel holds (`SO_SNDBUF`), bytes.
    pub send_buffer: u64,
    pub rtt_s: f64,
    pub rto_s: f64,
    /// The peer's window in segments (`snd_wnd / snd_mss`).
    pub window_segments: f64,
    pub mss: u32,
}

/// Samples the send buffers of the proxy's client connections whose peer
/// address is `client` every `period` until `stop`.
pub fn sample_buffers(
    sockets: ProxySockets,
    client: std::net::IpAddr,
    period: Duration,
    epoch: Instant,
    stop: &AtomicBool,
) -> Vec<BufferSample> {
    let mut samples = Vec::new();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let t_s = epoch.elapsed().as_secs_f64();
        for socket in sockets.list() {
            let Some(peer) = socket
                .peer
                .filter(|p| socket.client_side && p.ip() == client)
            else {
                continue;
            };
            let fd = borrowed(socket.fd);
            let (Ok(send_buffer), Ok(info)) = (tcp_info::send_buffer(fd), tcp_info::tcp_info(fd))
            else {
                continue;
            };
            let mss = info.snd_mss.max(1);
            samples.push(BufferSample {
                t_s,
                peer,
                send_buffer: u64::from(send_buffer),
                rtt_s: f64::from(info.rtt_us) / 1e6,
                rto_s: f64::from(info.rto_us) / 1e6,
                window_segments: info
                    .snd_wnd
                    .map_or(f64::from(u32::MAX), |w| f64::from(w / mss).max(1.0)),
                mss,
            });
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_forward_allocation_reduces_the_charge() {
        let memory = |rmem_alloc, wmem_queued, fwd_alloc| tcp_info::SocketMemory {
            rmem_alloc,
            rcvbuf: 0,
            wmem_alloc: 0,
            sndbuf: 0,
            fwd_alloc,
            wmem_queued,
            optmem: 0,
            backlog: 0,
            drops: 0,
        };
        assert_eq!(charged_bytes(&memory(1000, 2000, 96)), 3096);
        assert_eq!(charged_bytes(&memory(8192, 0, (-4096i32) as u32)), 4096);
        assert_eq!(charged_bytes(&memory(0, 0, (-4096i32) as u32)), 0);
    }
}
