//! Packet capture of a namespace's interface, and the SYN audit read back
//! from it.
//!
//! Capture uses tcpdump from the distribution (`--time-stamp-precision=nano`,
//! snap length 128 bytes: headers only, `--immediate-mode` so that the last
//! second of packets is not left in a half-filled ring block at stop),
//! started inside the namespace and stopped with SIGINT so that it flushes
//! and reports how many packets the kernel dropped from its buffer; those
//! drops are part of the run's record, never hidden. tcpdump is preferred
//! over an in-process AF_PACKET reader because it is the reference every
//! reader of these captures already trusts.
//!
//! The child gets `PR_SET_PDEATHSIG` so that a killed run does not leave a
//! capture behind; the namespace teardown also kills whatever is left in it.
//!
//! [`syn_audit`] reads a capture of the server's interface and matches
//! every client SYN with the server's SYN-ACKs, so that SYNs the server
//! dropped (accept or SYN queue full) and their retransmission times can be
//! compared with the kernel's counters and the clients' profile.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use vantage_trace::TraceReader;

use crate::netns::Netns;

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("cannot start tcpdump in {namespace}: {source} (is the tcpdump package installed?)")]
    Spawn {
        namespace: String,
        #[source]
        source: std::io::Error,
    },
    #[error("tcpdump in {namespace} did not start listening within 5 s: {stderr}")]
    NotListening { namespace: String, stderr: String },
    #[error("cannot read capture {path}: {problem}")]
    Read { path: String, problem: String },
}

/// A running tcpdump.
pub struct Capture {
    child: Child,
    path: PathBuf,
    namespace: String,
    stderr_lines: std::sync::mpsc::Receiver<String>,
}

/// What tcpdump reported when stopped.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CaptureReport {
    pub path: PathBuf,
    pub captured: u64,
    pub received_by_filter: u64,
    pub dropped_by_kernel: u64,
}

impl Capture {
    /// Starts capturing TCP on `iface` inside `ns` into `path`, and returns
    /// once tcpdump says it is listening.
    pub fn start(
        ns: &Netns,
        iface: &str,
        path: &Path,
        snap_len: u32,
    ) -> Result<Capture, CaptureError> {
        Capture::start_filtered(ns, iface, path, snap_len, "tcp")
    }

    /// [`Capture::start`] with tcpdump's `filter` (a pcap-filter
    /// expression, e.g. `tcp and host 10.78.0.2`) instead of `tcp`.
    pub fn start_filtered(
        ns: &Netns,
        iface: &str,
        path: &Path,
        snap_len: u32,
        filter: &str,
    ) -> Result<Capture, CaptureError> {
        let mut command = ns.command("tcpdump");
        command
            .args(["-i", iface, "-n", "-U", "--immediate-mode", "-B", "65536"])
            .args(["--time-stamp-precision=nano", "-s", &snap_len.to_string()])
            .arg("-w")
            .arg(path)
            .args(filter.split_whitespace())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe and touches only this child.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let spawn_error = |source| CaptureError::Spawn {
            namespace: ns.name().to_string(),
            source,
        };
        let mut child = command.spawn().map_err(spawn_error)?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains("listening on") => break,
                Ok(line) => seen.push(line),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(CaptureError::NotListening {
                        namespace: ns.name().to_string(),
                        stderr: seen.join(" / "),
                    });
                }
            }
        }
        Ok(Capture {
            child,
            path: path.to_path_buf(),
            namespace: ns.name().to_string(),
            stderr_lines: rx,
        })
    }

    /// Stops tcpdump (SIGINT), waits for it to flush, and returns its counts.
    pub fn stop(mut self) -> CaptureReport {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(None) = self.child.try_wait() {
            eprintln!(
                "testbed: tcpdump in {} did not stop on SIGINT; killed",
                self.namespace
            );
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let mut report = CaptureReport {
            path: self.path.clone(),
            ..CaptureReport::default()
        };
        while let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_millis(200)) {
            let number = line
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(n) = number {
                if line.contains("captured") {
                    report.captured = n;
                } else if line.contains("received by filter") {
                    report.received_by_filter = n;
                } else if line.contains("dropped by kernel") {
                    report.dropped_by_kernel = n;
                }
            }
        }
        report
    }
}

/// One client connection attempt as the server's interface saw it.
#[derive(Clone, Debug, Serialize)]
pub struct SynAttempt {
    pub client: Ipv4Addr,
    pub client_port: u16,
    pub server_port: u16,
    /// Capture time of every SYN of this attempt (same ISN), ns since the
    /// UNIX epoch.
    pub syn_ns: Vec<u64>,
    /// For every SYN: did the server send a SYN-ACK before the next SYN?
    pub answered: Vec<bool>,
    /// Client segments (handshake ACK, request) that reached the server
    /// while it was still in SYN-RECV and were dropped: each is followed by
    /// a retransmitted SYN-ACK. The kernel drops them when the accept queue
    /// is full and counts them in `ListenDrops` too.
    pub handshake_segments_dropped: u64,
    /// Segments after the last one known dropped that may or may not have
    /// been: all but the last of them could have hit the still-full queue,
    /// and a server-side capture cannot tell which one completed the
    /// handshake (a dropped pure ACK looks like an accepted one).
    pub handshake_segments_uncertain: u64,
}

/// All SYNs of a server-side capture, matched with SYN-ACKs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SynAudit {
    pub attempts: Vec<SynAttempt>,
    pub syns: u64,
    pub unanswered_syns: u64,
    pub handshake_segments_dropped: u64,
    pub handshake_segments_uncertain: u64,
}

impl SynAudit {
    /// The least the kernel's `ListenDrops` counts when the accept queue
    /// overflows: SYNs dropped plus handshake segments known dropped.
    pub fn listen_drops_expected(&self) -> u64 {
        self.unanswered_syns + self.handshake_segments_dropped
    }

    /// The most: the above plus the segments the capture cannot decide.
    pub fn listen_drops_at_most(&self) -> u64 {
        self.listen_drops_expected() + self.handshake_segments_uncertain
    }
}

struct Segment {
    ts_ns: u64,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    src_port: u16,
    dst_port: u16,
    syn: bool,
    ack: bool,
    seq: u32,
    ack_number: u32,
    payload_len: u32,
}

fn read_segments(path: &Path) -> Result<Vec<Segment>, CaptureError> {
    let read_error = |problem: String| CaptureError::Read {
        path: path.display().to_string(),
        problem,
    };
    let mut reader = TraceReader::open(path).map_err(|e| read_error(e.to_string()))?;
    let mut segments = Vec::new();
    while let Some(packet) = reader
        .next_packet()
        .map_err(|e| read_error(e.to_string()))?
    {
        // Frames that are not IPv4 TCP are not connection attempts.
        let Ok(tcp) = vantage_trace::decode(&packet) else {
            continue;
        };
        let (IpAddr::V4(src), IpAddr::V4(dst)) = (tcp.source.ip, tcp.destination.ip) else {
            continue;
        };
        segments.push(Segment {
            ts_ns: tcp.timestamp.as_nanos(),
            src,
            dst,
            src_port: tcp.source.port,
            dst_port: tcp.destination.port,
            syn: tcp.flags.syn(),
            ack: tcp.flags.ack(),
            seq: tcp.seq,
            ack_number: tcp.ack,
            payload_len: tcp.payload_len,
        });
    }
    Ok(segments)
}

/// Matches every client SYN in a server-side capture with the server's
/// SYN-ACKs. Attempts are keyed by 4-tuple and initial sequence number, so
/// retransmitted SYNs group together and a reused port starts a new attempt.
pub fn syn_audit(path: &Path, server: Ipv4Addr) -> Result<SynAudit, CaptureError> {
    let segments = read_segments(path)?;
    type Key = (Ipv4Addr, u16, u16, u32);
    let mut attempts: Vec<SynAttempt> = Vec::new();
    let mut by_key: HashMap<Key, usize> = HashMap::new();
    let mut synack_times: HashMap<Key, Vec<u64>> = HashMap::new();
    type Connection = (Ipv4Addr, u16, u16);
    /// (capture time, sequence number, payload length) of a client segment.
    type ClientSegment = (u64, u32, u32);
    let mut client_segments: HashMap<Connection, Vec<ClientSegment>> = HashMap::new();
    let mut server_segments: HashMap<Connection, Vec<u64>> = HashMap::new();
    for s in &segments {
        if !s.syn && s.dst == server {
            client_segments
                .entry((s.src, s.src_port, s.dst_port))
                .or_default()
                .push((s.ts_ns, s.seq, s.payload_len));
        } else if !s.syn && s.src == server {
            server_segments
                .entry((s.dst, s.dst_port, s.src_port))
                .or_default()
                .push(s.ts_ns);
        }
        if s.syn && !s.ack && s.dst == server {
            let key = (s.src, s.src_port, s.dst_port, s.seq);
            let index = *by_key.entry(key).or_insert_with(|| {
                attempts.push(SynAttempt {
                    client: s.src,
                    client_port: s.src_port,
                    server_port: s.dst_port,
                    syn_ns: Vec::new(),
                    answered: Vec::new(),
                    handshake_segments_dropped: 0,
                    handshake_segments_uncertain: 0,
                });
                attempts.len() - 1
            });
            attempts[index].syn_ns.push(s.ts_ns);
        } else if s.syn && s.ack && s.src == server {
            let key = (s.dst, s.dst_port, s.src_port, s.ack_number.wrapping_sub(1));
            synack_times.entry(key).or_default().push(s.ts_ns);
        }
    }
    let mut audit = SynAudit::default();
    for (key, index) in &by_key {
        let attempt = &mut attempts[*index];
        let replies = synack_times.get(key).map(Vec::as_slice).unwrap_or(&[]);
        attempt.answered = (0..attempt.syn_ns.len())
            .map(|i| {
                let from = attempt.syn_ns[i];
                let until = attempt.syn_ns.get(i + 1).copied().unwrap_or(u64::MAX);
                replies.iter().any(|&t| t >= from && t < until)
            })
            .collect();
        // Client segments between the first SYN-ACK and the server's first
        // segment of the established connection reached a server that was
        // still in SYN-RECV, or completed the handshake. A segment was
        // dropped (accept queue full) when the server later retransmitted
        // its SYN-ACK, or when it carried data the client later sent again;
        // the server leaves SYN-RECV only once, so every segment before a
        // dropped one was dropped too.
        if let Some(&first_synack) = replies.first() {
            let conn = (key.0, key.1, key.2);
            let established_at = server_segments
                .get(&conn)
                .and_then(|times| times.iter().copied().find(|&t| t > first_synack))
                .unwrap_or(u64::MAX);
            let window: Vec<&(u64, u32, u32)> = client_segments
                .get(&conn)
                .map(|v| {
                    v.iter()
                        .filter(|(t, _, _)| *t > first_synack && *t < established_at)
                        .collect()
                })
                .unwrap_or_default();
            let dropped = |i: usize| {
                let (t, seq, len) = *window[i];
                let synack_later = replies.iter().any(|&r| r > t);
                let sent_again =
                    len > 0 && window[i + 1..].iter().any(|(_, s, l)| *s == seq && *l > 0);
                synack_later || sent_again
            };
            if let Some(last) = (0..window.len()).rev().find(|&i| dropped(i)) {
                attempt.handshake_segments_dropped = last as u64 + 1;
                // The queue was full moments ago: of the segments after the
                // last known drop, all but the final one may have been dropped.
                attempt.handshake_segments_uncertain = window.len().saturating_sub(last + 2) as u64;
            }
        }
    }
    attempts.sort_by_key(|a| a.syn_ns.first().copied());
    audit.syns = attempts.iter().map(|a| a.syn_ns.len() as u64).sum();
    audit.unanswered_syns = attempts
        .iter()
        .map(|a| a.answered.iter().filter(|&&x| !x).count() as u64)
        .sum();
    audit.handshake_segments_dropped = attempts.iter().map(|a| a.handshake_segments_dropped).sum();
    audit.handshake_segments_uncertain = attempts
        .iter()
        .map(|a| a.handshake_segments_uncertain)
        .sum();
    audit.attempts = attempts;
    Ok(audit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use pcap_file::{DataLink, TsResolution};

    const CLIENT: [u8; 4] = [10, 78, 0, 2];
    const SERVER: [u8; 4] = [10, 77, 0, 2];

    fn segment(from_client: bool, port: u16, seq: u32, ack: Option<u32>) -> Vec<u8> {
        let (src, dst, sport, dport) = if from_client {
            (CLIENT, SERVER, port, 80)
        } else {
            (SERVER, CLIENT, 80, port)
        };
        let mut builder = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4(src, dst, 64)
            .tcp(sport, dport, seq, 64240)
            .syn();
        if let Some(a) = ack {
            builder = builder.ack(a);
        }
        let mut out = Vec::new();
        builder.write(&mut out, &[]).unwrap();
        out
    }

    #[test]
    fn audit_groups_retransmitted_syns_and_finds_the_unanswered_ones() {
        let path = std::env::temp_dir().join(format!("vantage-audit-{}.pcap", std::process::id()));
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        let mut writer =
            PcapWriter::with_header(std::fs::File::create(&path).unwrap(), header).unwrap();
        let secs = |s: f64| Duration::from_secs_f64(1_700_000_000.0 + s);
        // Port 1000: SYN dropped at 0 s and 1 s, answered at 2 s.
        // Port 1001: answered at once. Port 1000 reused later with a new ISN.
        let packets = [
            (0.0, segment(true, 1000, 500, None)),
            (0.1, segment(true, 1001, 900, None)),
            (0.1001, segment(false, 1001, 7, Some(901))),
            (1.0, segment(true, 1000, 500, None)),
            (2.0, segment(true, 1000, 500, None)),
            (2.0002, segment(false, 1000, 8, Some(501))),
            (50.0, segment(true, 1000, 77, None)),
        ];
        for (t, data) in &packets {
            writer
                .write_packet(&PcapPacket::new(secs(*t), data.len() as u32, data))
                .unwrap();
        }
        drop(writer);
        let audit = syn_audit(&path, Ipv4Addr::from(SERVER)).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(audit.syns, 5);
        assert_eq!(audit.unanswered_syns, 3);
        assert_eq!(audit.attempts.len(), 3);
        let first = &audit.attempts[0];
        assert_eq!(first.client_port, 1000);
        assert_eq!(first.answered, vec![false, false, true]);
        let gaps: Vec<u64> = first.syn_ns.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, vec![1_000_000_000, 1_000_000_000]);
        assert_eq!(audit.attempts[1].answered, vec![true]);
        assert_eq!(audit.attempts[2].answered, vec![false]);
    }

    /// A non-SYN segment of port `port`'s connection.
    fn data(from_client: bool, port: u16, seq: u32, payload: usize) -> Vec<u8> {
        let (src, dst, sport, dport) = if from_client {
            (CLIENT, SERVER, port, 80)
        } else {
            (SERVER, CLIENT, 80, port)
        };
        let mut out = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4(src, dst, 64)
            .tcp(sport, dport, seq, 64240)
            .ack(1)
            .write(&mut out, &vec![b'x'; payload])
            .unwrap();
        out
    }

    fn audit_of(packets: &[(f64, Vec<u8>)], name: &str) -> SynAudit {
        let path = std::env::temp_dir().join(format!("vantage-{name}-{}.pcap", std::process::id()));
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        let mut writer =
            PcapWriter::with_header(std::fs::File::create(&path).unwrap(), header).unwrap();
        for (t, frame) in packets {
            let ts = Duration::from_secs_f64(1_700_000_000.0 + t);
            writer
                .write_packet(&PcapPacket::new(ts, frame.len() as u32, frame))
                .unwrap();
        }
        drop(writer);
        let audit = syn_audit(&path, Ipv4Addr::from(SERVER)).unwrap();
        std::fs::remove_file(&path).unwrap();
        audit
    }

    /// A handshake that completes into a full accept queue: the ACK and the
    /// first copies of the request are dropped until a copy gets through;
    /// with a SYN-ACK retransmitted in between, the client's answer to it
    /// completes the handshake.
    #[test]
    fn handshake_segments_dropped_at_a_full_accept_queue_are_counted() {
        let retransmitted_request = [
            (0.0, segment(true, 2000, 10, None)),
            (0.01, segment(false, 2000, 5, Some(11))),
            (0.02, data(true, 2000, 11, 0)),
            (0.021, data(true, 2000, 11, 100)),
            (0.25, data(true, 2000, 11, 100)),
            (0.70, data(true, 2000, 11, 100)),
            (0.71, data(false, 2000, 6, 0)),
            (0.72, data(true, 2000, 111, 0)),
        ];
        assert_eq!(
            audit_of(&retransmitted_request, "hs1").handshake_segments_dropped,
            3
        );
        let synack_again = [
            (0.0, segment(true, 2001, 10, None)),
            (0.01, segment(false, 2001, 5, Some(11))),
            (0.02, data(true, 2001, 11, 0)),
            (0.021, data(true, 2001, 11, 100)),
            (1.01, segment(false, 2001, 5, Some(11))),
            (1.02, data(true, 2001, 11, 0)),
            (1.03, data(true, 2001, 11, 100)),
            (1.04, data(false, 2001, 6, 0)),
        ];
        let audit = audit_of(&synack_again, "hs2");
        assert_eq!(audit.handshake_segments_dropped, 2);
        // After the second SYN-ACK: an ACK then the request again; the ACK
        // may have been dropped too, the request completed the handshake.
        assert_eq!(audit.handshake_segments_uncertain, 1);
        let clean = [
            (0.0, segment(true, 2002, 10, None)),
            (0.01, segment(false, 2002, 5, Some(11))),
            (0.02, data(true, 2002, 11, 0)),
            (0.021, data(true, 2002, 11, 100)),
            (0.03, data(false, 2002, 6, 0)),
        ];
        assert_eq!(audit_of(&clean, "hs3").handshake_segments_dropped, 0);
    }

    #[test]
    fn a_file_that_is_not_a_capture_is_a_named_error() {
        let path =
            std::env::temp_dir().join(format!("vantage-notpcap-{}.pcap", std::process::id()));
        std::fs::write(&path, b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let err = syn_audit(&path, Ipv4Addr::from(SERVER))
            .unwrap_err()
            .to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("vantage-notpcap"), "{err}");
    }
}
