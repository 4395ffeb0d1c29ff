//! The proxy's sockets seen from outside any proxy's code, so that the
//! same reading covers vantage proxy, Squid and nginx: `ss -tmnHO` (the
//! kernel's `sock_diag`) in the proxy's namespace, the sockets whose local
//! port is the proxy's (client connections) or whose peer port is the
//! origins' (upstream connections). For each: the buffer the thesis's
//! schemes assign (Figure 14) as the kernel holds it (twice what
//! `setsockopt` was given) — the send buffer (`tb`) of a client connection,
//! the receive buffer (`rb`) of an upstream one: the buffers in the
//! documents' direction —, both buffers of every socket besides, and its
//! charge to the kernel's TCP memory (`r + w + f`, the reading of
//! `resources_live::sampler::charged_bytes`).
//!
//! `ss` rather than `resources_live::sampler`'s `/proc/self/fd` walk:
//! Squid and nginx are other processes.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use vantage_sys::tcp_info::{self, SocketMemory};
use vantage_testbed::netns::Netns;

use crate::resources_live::sampler::charged_bytes;

/// One sample of the proxy's sockets.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct SocketSample {
    /// Since the run's first user started, seconds.
    pub t_s: f64,
    pub client_connections: u32,
    pub upstream_connections: u32,
    /// Σ held `SO_SNDBUF` of client connections and `SO_RCVBUF` of
    /// upstream connections (the documents' direction), bytes.
    pub assigned_bytes: u64,
    /// Σ held (`SO_SNDBUF` + `SO_RCVBUF`) of every socket, bytes.
    pub all_buffers_bytes: u64,
    /// Σ kernel TCP memory charged by the proxy's sockets, bytes.
    pub charged_bytes: u64,
    /// `/proc/net/sockstat` TCP `mem` (every namespace), bytes.
    pub host_tcp_bytes: u64,
}

/// One socket as `ss` shows it; `memory` is `None` for a socket without
/// one (a closed socket's `FIN-WAIT-2` remainder, which charges nothing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SsSocket {
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub memory: Option<SocketMemory>,
}

/// Parses one line of `ss -tmnHO`: the first two addresses are the local
/// and the peer one (the state column is there or not), then `skmem:(…)`.
pub fn parse_ss_line(line: &str) -> Option<SsSocket> {
    let mut addresses = line
        .split_whitespace()
        .filter_map(|t| t.parse::<SocketAddr>().ok());
    let local = addresses.next()?;
    let peer = addresses.next()?;
    let Some(skmem) = line.split("skmem:(").nth(1) else {
        return Some(SsSocket {
            local,
            peer,
            memory: None,
        });
    };
    let skmem = skmem.split(')').next()?;
    let mut memory = SocketMemory {
        rmem_alloc: 0,
        rcvbuf: 0,
        wmem_alloc: 0,
        sndbuf: 0,
        fwd_alloc: 0,
        wmem_queued: 0,
        optmem: 0,
        backlog: 0,
        drops: 0,
    };
    for field in skmem.split(',') {
        let split = field.find(|c: char| c.is_ascii_digit())?;
        let (name, value) = field.split_at(split);
        let value: u32 = value.parse().ok()?;
        match name {
            "r" => memory.rmem_alloc = value,
            "rb" => memory.rcvbuf = value,
            "t" => memory.wmem_alloc = value,
            "tb" => memory.sndbuf = value,
            "f" => memory.fwd_alloc = value,
            "w" => memory.wmem_queued = value,
            "o" => memory.optmem = value,
            "bl" => memory.backlog = value,
            "d" => memory.drops = value,
            _ => {}
        }
    }
    Some(SsSocket {
        local,
        peer,
        memory: Some(memory),
    })
}

/// Which sockets are the proxy's.
#[derive(Clone, Copy, Debug)]
pub struct ProxyPorts {
    pub front: u16,
    pub origin: u16,
}

/// Sums the proxy's sockets of one `ss` output; lines that do not parse
/// are counted in `unparsed`, the proxy's sockets without memory in
/// `without_memory` (neither is a connection).
pub fn summarize(text: &str, ports: ProxyPorts) -> (SocketSample, Skipped) {
    let mut sample = SocketSample::default();
    let mut skipped = Skipped::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Some(socket) = parse_ss_line(line) else {
            skipped.unparsed += 1;
            continue;
        };
        let ours = socket.local.port() == ports.front || socket.peer.port() == ports.origin;
        let Some(m) = socket.memory.as_ref() else {
            skipped.without_memory += u32::from(ours);
            continue;
        };
        if socket.local.port() == ports.front {
            sample.client_connections += 1;
            sample.assigned_bytes += u64::from(m.sndbuf);
        } else if socket.peer.port() == ports.origin {
            sample.upstream_connections += 1;
            sample.assigned_bytes += u64::from(m.rcvbuf);
        } else {
            continue;
        }
        sample.all_buffers_bytes += u64::from(m.sndbuf) + u64::from(m.rcvbuf);
        sample.charged_bytes += charged_bytes(m);
    }
    (sample, skipped)
}

/// Lines of `ss` output not counted as connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Lines that did not parse.
    pub unparsed: u32,
    /// The proxy's sockets without memory (closed, in `FIN-WAIT-2`).
    pub without_memory: u32,
}

/// What a sampling thread returns.
#[derive(Debug, Default)]
pub struct Sampled {
    pub samples: Vec<SocketSample>,
    /// `ss` runs that failed (not started, or a non-zero exit).
    pub failed_reads: u32,
    /// Summed over the samples.
    pub skipped: Skipped,
}

/// Samples every `period` until `stop`; `t_s` counts from `epoch`.
pub fn sample(
    namespace: &Netns,
    ports: ProxyPorts,
    period: Duration,
    epoch: Instant,
    stop: &AtomicBool,
) -> Sampled {
    let page = tcp_info::page_size();
    let filter = format!("( sport = :{} or dport = :{} )", ports.front, ports.origin);
    let mut out = Sampled::default();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let t_s = epoch.elapsed().as_secs_f64();
        let output = namespace
            .command("ss")
            .args([
                "-tmnHO",
                "state",
                "connected",
                "exclude",
                "time-wait",
                "exclude",
                "syn-recv",
                &filter,
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        match output {
            Ok(o) if o.status.success() => {
                let (mut s, skipped) = summarize(&String::from_utf8_lossy(&o.stdout), ports);
                s.t_s = t_s;
                s.host_tcp_bytes = tcp_info::tcp_memory_pages().map_or(0, |p| p * page);
                out.skipped.unparsed += skipped.unparsed;
                out.skipped.without_memory += skipped.without_memory;
                out.samples.push(s);
            }
            _ => out.failed_reads += 1,
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ss_lines_give_the_buffers_and_the_charge() {
        let ports = ProxyPorts {
            front: 8080,
            origin: 8081,
        };
        let text = "\
ESTAB 0 0 10.77.0.1:8080 10.78.0.2:41000 skmem:(r0,rb131072,t0,tb32768,f4096,w2000,o0,bl0,d0)
0 0 10.77.0.1:45000 10.78.6.2:8081 skmem:(r1000,rb65536,t0,tb16384,f0,w0,o0,bl0,d3)
ESTAB 0 0 127.0.0.1:8081 127.0.0.1:45001 skmem:(r0,rb1,t0,tb1,f0,w0,o0,bl0,d0)
FIN-WAIT-2 0 0 10.77.0.1:8080 10.78.0.2:41001
garbage line
";
        let (s, skipped) = summarize(text, ports);
        assert_eq!(
            skipped,
            Skipped {
                unparsed: 1,
                without_memory: 1
            }
        );
        assert_eq!(s.client_connections, 1);
        assert_eq!(s.upstream_connections, 1);
        assert_eq!(s.assigned_bytes, 32768 + 65536);
        assert_eq!(s.all_buffers_bytes, 131072 + 32768 + 65536 + 16384);
        assert_eq!(s.charged_bytes, 4096 + 2000 + 1000);
    }
}
