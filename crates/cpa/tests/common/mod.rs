//! Hand-built packets and capture files for the tests (the packet and pcap
//! builders are copied from `crates/trace/tests/common`), and `Exchange`:
//! one connection scripted in true time and written as the client's and
//! the server's captures, with known one-way delays, clock offset and
//! losses.

#![allow(dead_code)]

use std::net::IpAddr;
use std::path::PathBuf;

/// TCP flag bits.
pub const FIN: u16 = 0x01;
pub const SYN: u16 = 0x02;
pub const RST: u16 = 0x04;
pub const PSH: u16 = 0x08;
pub const ACK: u16 = 0x10;

/// A TCP segment to lay out.
#[derive(Clone, Debug)]
pub struct Tcp {
    pub source: (IpAddr, u16),
    pub destination: (IpAddr, u16),
    pub seq: u32,
    pub ack: u32,
    pub flags: u16,
    pub window: u16,
    /// Raw option bytes (padded to 4 by the builder).
    pub options: Vec<u8>,
    pub payload_len: usize,
    pub ip_id: u16,
    /// First payload bytes (the rest are `i as u8`).
    pub prefix: Vec<u8>,
}

impl Tcp {
    pub fn new(
        source: (&str, u16),
        destination: (&str, u16),
        seq: u32,
        ack: u32,
        flags: u16,
    ) -> Tcp {
        Tcp {
            source: (source.0.parse().unwrap(), source.1),
            destination: (destination.0.parse().unwrap(), destination.1),
            seq,
            ack,
            flags,
            window: 65_535,
            options: Vec::new(),
            payload_len: 0,
            ip_id: 1,
            prefix: Vec::new(),
        }
    }

    pub fn payload(mut self, len: usize) -> Tcp {
        self.payload_len = len;
        self
    }

    pub fn options(mut self, options: Vec<u8>) -> Tcp {
        self.options = options;
        self
    }

    pub fn ip_id(mut self, id: u16) -> Tcp {
        self.ip_id = id;
        self
    }

    /// TCP header and payload (payload bytes are `i as u8`).
    pub fn tcp_bytes(&self) -> Vec<u8> {
        let mut options = self.options.clone();
        while !options.len().is_multiple_of(4) {
            options.push(0);
        }
        let header_len = 20 + options.len();
        let mut bytes = Vec::with_capacity(header_len + self.payload_len);
        bytes.extend_from_slice(&self.source.1.to_be_bytes());
        bytes.extend_from_slice(&self.destination.1.to_be_bytes());
        bytes.extend_from_slice(&self.seq.to_be_bytes());
        bytes.extend_from_slice(&self.ack.to_be_bytes());
        let offset_flags = ((header_len as u16 / 4) << 12) | self.flags;
        bytes.extend_from_slice(&offset_flags.to_be_bytes());
        bytes.extend_from_slice(&self.window.to_be_bytes());
        bytes.extend_from_slice(&[0xAB, 0xCD, 0, 0]); // checksum, urgent pointer
        bytes.extend_from_slice(&options);
        bytes.extend((0..self.payload_len).map(|i| self.prefix.get(i).copied().unwrap_or(i as u8)));
        bytes
    }

    /// The IP packet (v4 or v6 by the addresses).
    pub fn ip_bytes(&self) -> Vec<u8> {
        let tcp = self.tcp_bytes();
        match (self.source.0, self.destination.0) {
            (IpAddr::V4(source), IpAddr::V4(destination)) => {
                let mut ip = ipv4_header(tcp.len(), self.ip_id, 6);
                ip[12..16].copy_from_slice(&source.octets());
                ip[16..20].copy_from_slice(&destination.octets());
                ip.extend_from_slice(&tcp);
                ip
            }
            (IpAddr::V6(source), IpAddr::V6(destination)) => {
                let mut ip = ipv6_header(tcp.len(), 6);
                ip[8..24].copy_from_slice(&source.octets());
                ip[24..40].copy_from_slice(&destination.octets());
                ip.extend_from_slice(&tcp);
                ip
            }
            _ => panic!("mixed address families"),
        }
    }

    /// An Ethernet II frame.
    pub fn ethernet(&self) -> Vec<u8> {
        let ether_type: u16 = if self.source.0.is_ipv4() {
            0x0800
        } else {
            0x86DD
        };
        let mut frame = ethernet_header(ether_type);
        frame.extend_from_slice(&self.ip_bytes());
        frame
    }
}

/// A 20-byte IPv4 header for `payload_len` bytes of `protocol`.
pub fn ipv4_header(payload_len: usize, id: u16, protocol: u8) -> Vec<u8> {
    let mut ip = vec![0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + payload_len) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64;
    ip[9] = protocol;
    ip[12..16].copy_from_slice(&[192, 0, 2, 1]);
    ip[16..20].copy_from_slice(&[192, 0, 2, 2]);
    ip
}

/// A 40-byte IPv6 header for `payload_len` bytes after it.
pub fn ipv6_header(payload_len: usize, next_header: u8) -> Vec<u8> {
    let mut ip = vec![0u8; 40];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&(payload_len as u16).to_be_bytes());
    ip[6] = next_header;
    ip[7] = 64;
    ip
}

pub fn ethernet_header(ether_type: u16) -> Vec<u8> {
    let mut frame = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    frame.extend_from_slice(&ether_type.to_be_bytes());
    frame
}

/// Option bytes: MSS, SACK-permitted, timestamps, NOP, window scale.
pub fn syn_options(mss: u16, window_scale: u8, ts_value: u32) -> Vec<u8> {
    let mut options = vec![2, 4];
    options.extend_from_slice(&mss.to_be_bytes());
    options.extend_from_slice(&[4, 2, 8, 10]);
    options.extend_from_slice(&ts_value.to_be_bytes());
    options.extend_from_slice(&0u32.to_be_bytes());
    options.extend_from_slice(&[1, 3, 3, window_scale]);
    options
}

/// Option bytes: NOP, NOP, timestamps.
pub fn timestamp_options(value: u32, echo: u32) -> Vec<u8> {
    let mut options = vec![1, 1, 8, 10];
    options.extend_from_slice(&value.to_be_bytes());
    options.extend_from_slice(&echo.to_be_bytes());
    options
}

/// Option bytes: NOP, NOP, SACK with the given blocks.
pub fn sack_options(blocks: &[(u32, u32)]) -> Vec<u8> {
    let mut options = vec![1, 1, 5, (2 + 8 * blocks.len()) as u8];
    for (left, right) in blocks {
        options.extend_from_slice(&left.to_be_bytes());
        options.extend_from_slice(&right.to_be_bytes());
    }
    options
}

/// One record to write: timestamp (ns since the epoch), frame, wire length.
#[derive(Clone, Debug)]
pub struct Record {
    pub timestamp_ns: u64,
    pub frame: Vec<u8>,
    pub original_len: u32,
    pub interface: u32,
}

impl Record {
    pub fn new(timestamp_ns: u64, frame: Vec<u8>) -> Record {
        let original_len = frame.len() as u32;
        Record {
            timestamp_ns,
            frame,
            original_len,
            interface: 0,
        }
    }

    /// Cuts the captured bytes to `snap` (keeping the wire length).
    pub fn snapped(mut self, snap: usize) -> Record {
        self.frame.truncate(snap);
        self
    }
}

/// A pcap file: byte order, resolution, link type, snap length.
pub struct Pcap {
    pub big_endian: bool,
    pub nanosecond: bool,
    pub link_type: u32,
    pub snap_length: u32,
}

impl Pcap {
    pub fn ethernet() -> Pcap {
        Pcap {
            big_endian: false,
            nanosecond: false,
            link_type: 1,
            snap_length: 65_535,
        }
    }

    pub fn header(&self) -> Vec<u8> {
        let magic: u32 = if self.nanosecond {
            0xA1B2_3C4D
        } else {
            0xA1B2_C3D4
        };
        let mut out = Vec::new();
        self.put32(&mut out, magic);
        self.put16(&mut out, 2);
        self.put16(&mut out, 4);
        self.put32(&mut out, 0);
        self.put32(&mut out, 0);
        self.put32(&mut out, self.snap_length);
        self.put32(&mut out, self.link_type);
        out
    }

    pub fn record(&self, out: &mut Vec<u8>, record: &Record) {
        let seconds = (record.timestamp_ns / 1_000_000_000) as u32;
        let fraction = record.timestamp_ns % 1_000_000_000;
        let fraction = if self.nanosecond {
            fraction
        } else {
            fraction / 1_000
        } as u32;
        self.put32(out, seconds);
        self.put32(out, fraction);
        self.put32(out, record.frame.len() as u32);
        self.put32(out, record.original_len);
        out.extend_from_slice(&record.frame);
    }

    pub fn file(&self, records: &[Record]) -> Vec<u8> {
        let mut out = self.header();
        for record in records {
            self.record(&mut out, record);
        }
        out
    }

    fn put16(&self, out: &mut Vec<u8>, value: u16) {
        out.extend_from_slice(&if self.big_endian {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        });
    }

    fn put32(&self, out: &mut Vec<u8>, value: u32) {
        out.extend_from_slice(&if self.big_endian {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        });
    }
}

/// A file under the target directory's temp area, removed on drop.
pub struct TempFile {
    pub path: PathBuf,
}

impl TempFile {
    pub fn new(name: &str, bytes: &[u8]) -> TempFile {
        let directory =
            std::env::temp_dir().join(format!("vantage-cpa-tests-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join(name);
        std::fs::write(&path, bytes).unwrap();
        TempFile { path }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `<repo>/../shared/traces`, or None (with the reason printed) if absent.
pub fn shared_traces() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    if path.is_dir() {
        Some(path)
    } else {
        eprintln!(
            "skipping: {} is missing (the shared real traces live beside the repository)",
            path.display()
        );
        None
    }
}

/// Every trace file (not LICENSE or README) in a shared traces folder.
pub fn trace_files(folder: &str) -> Vec<PathBuf> {
    let Some(root) = shared_traces() else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(folder))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            !name.starts_with("LICENSE") && !name.starts_with("README")
        })
        .collect();
    files.sort();
    files
}

/// How a scripted packet reaches the captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Captured at the sender and, one delay later, at the receiver.
    Arrives,
    /// Captured at the sender only (lost in the network).
    Lost,
    /// Captured at the receiver only (the sender's capture dropped it).
    UnseenBySender,
    /// One super-segment at the sender (segmentation offload), `n` pieces
    /// at the receiver, arriving together.
    Pieces(usize),
}

/// One connection scripted in true time (milliseconds), captured at both
/// ends: a packet leaves its sender at the given time and, unless lost,
/// arrives one one-way delay later. The server's capture is stamped with
/// its own clock (`server_clock_offset_ns` ahead of the client's).
pub struct Exchange {
    pub client: (&'static str, u16),
    pub server: (&'static str, u16),
    pub client_to_server_ns: u64,
    pub server_to_client_ns: u64,
    pub server_clock_offset_ns: i64,
    pub client_isn: u32,
    pub server_isn: u32,
    pub epoch_ns: u64,
    ip_id: [u16; 2],
    next_prefix: Vec<u8>,
    client_capture: Vec<(u64, usize, Vec<u8>)>,
    server_capture: Vec<(u64, usize, Vec<u8>)>,
    written: usize,
}

pub fn ms(value: f64) -> u64 {
    (value * 1e6).round() as u64
}

impl Exchange {
    pub fn new(client_to_server_ms: f64, server_to_client_ms: f64) -> Exchange {
        Exchange {
            client: ("10.0.0.1", 40_000),
            server: ("10.0.0.2", 80),
            client_to_server_ns: ms(client_to_server_ms),
            server_to_client_ns: ms(server_to_client_ms),
            server_clock_offset_ns: 0,
            client_isn: 1_000_000,
            server_isn: 4_000_000_000,
            epoch_ns: 1_700_000_000_000_000_000,
            ip_id: [100, 5000],
            next_prefix: Vec::new(),
            client_capture: Vec::new(),
            server_capture: Vec::new(),
            written: 0,
        }
    }

    fn frame(
        &mut self,
        from_client: bool,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
        ip_id: u16,
    ) -> Vec<u8> {
        let (source, destination, isn, peer_isn) = if from_client {
            (self.client, self.server, self.client_isn, self.server_isn)
        } else {
            (self.server, self.client, self.server_isn, self.client_isn)
        };
        let ack_value = if flags & ACK != 0 {
            peer_isn.wrapping_add(ack)
        } else {
            0
        };
        let mut tcp = Tcp::new(source, destination, isn.wrapping_add(seq), ack_value, flags)
            .payload(len)
            .ip_id(ip_id);
        tcp.prefix = self.next_prefix.clone();
        tcp.ethernet()
    }

    fn send(
        &mut self,
        from_client: bool,
        at_ms: f64,
        segment: (u32, u32, u16, usize),
        delivery: Delivery,
    ) -> &mut Exchange {
        let (seq, ack, flags, len) = segment;
        let id_slot = usize::from(!from_client);
        let first_id = self.ip_id[id_slot].wrapping_add(1);
        let pieces = match delivery {
            Delivery::Pieces(n) => n.max(1),
            _ => 1,
        };
        self.ip_id[id_slot] = self.ip_id[id_slot].wrapping_add(pieces as u16);
        let frame = self.frame(from_client, seq, ack, flags, len, first_id);
        let received: Vec<Vec<u8>> = if pieces == 1 {
            vec![frame.clone()]
        } else {
            let size = len / pieces;
            (0..pieces)
                .map(|k| {
                    let last = k + 1 == pieces;
                    let piece_len = if last { len - size * k } else { size };
                    let piece_flags = if last { flags } else { flags & !(FIN | PSH) };
                    self.frame(
                        from_client,
                        seq + (size * k) as u32,
                        ack,
                        piece_flags,
                        piece_len,
                        first_id.wrapping_add(k as u16),
                    )
                })
                .collect()
        };
        self.next_prefix.clear();
        let sent = ms(at_ms);
        let delay = if from_client {
            self.client_to_server_ns
        } else {
            self.server_to_client_ns
        };
        let order = self.written;
        self.written += 1;
        let (sender_capture, receiver_capture) = if from_client {
            (&mut self.client_capture, &mut self.server_capture)
        } else {
            (&mut self.server_capture, &mut self.client_capture)
        };
        if delivery != Delivery::UnseenBySender {
            sender_capture.push((sent, order, frame));
        }
        if delivery != Delivery::Lost {
            for piece in received {
                receiver_capture.push((sent + delay, order, piece));
            }
        }
        self
    }

    /// The client sends `len` bytes at relative sequence `seq` (the SYN is
    /// 0), acknowledging the server's relative `ack`; it arrives.
    pub fn client(
        &mut self,
        at_ms: f64,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
    ) -> &mut Exchange {
        self.send(true, at_ms, (seq, ack, flags, len), Delivery::Arrives)
    }

    pub fn client_lost(
        &mut self,
        at_ms: f64,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
    ) -> &mut Exchange {
        self.send(true, at_ms, (seq, ack, flags, len), Delivery::Lost)
    }

    pub fn server(
        &mut self,
        at_ms: f64,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
    ) -> &mut Exchange {
        self.send(false, at_ms, (seq, ack, flags, len), Delivery::Arrives)
    }

    pub fn server_lost(
        &mut self,
        at_ms: f64,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
    ) -> &mut Exchange {
        self.send(false, at_ms, (seq, ack, flags, len), Delivery::Lost)
    }

    /// The server sends a packet in some other way (see [`Delivery`]).
    pub fn server_delivered(
        &mut self,
        at_ms: f64,
        segment: (u32, u32, u16, usize),
        delivery: Delivery,
    ) -> &mut Exchange {
        self.send(false, at_ms, segment, delivery)
    }

    /// The client sends a packet in some other way (see [`Delivery`]).
    pub fn client_delivered(
        &mut self,
        at_ms: f64,
        segment: (u32, u32, u16, usize),
        delivery: Delivery,
    ) -> &mut Exchange {
        self.send(true, at_ms, segment, delivery)
    }

    /// The next packet's payload begins with `bytes` (an HTTP request line).
    pub fn starting(&mut self, bytes: &[u8]) -> &mut Exchange {
        self.next_prefix = bytes.to_vec();
        self
    }

    fn capture(&self, records: &[(u64, usize, Vec<u8>)], offset: i64) -> Vec<u8> {
        let mut sorted: Vec<&(u64, usize, Vec<u8>)> = records.iter().collect();
        sorted.sort_by_key(|(time, order, _)| (*time, *order));
        let pcap = Pcap {
            big_endian: false,
            nanosecond: true,
            link_type: 1,
            snap_length: 65_535,
        };
        let records: Vec<Record> = sorted
            .into_iter()
            .map(|(time, _, frame)| {
                let stamped = (self.epoch_ns + time) as i64 + offset;
                Record::new(stamped as u64, frame.clone())
            })
            .collect();
        pcap.file(&records)
    }

    /// The client's and the server's capture files.
    pub fn write(&self, name: &str) -> (TempFile, TempFile) {
        (
            TempFile::new(
                &format!("{name}-client.pcap"),
                &self.capture(&self.client_capture, 0),
            ),
            TempFile::new(
                &format!("{name}-server.pcap"),
                &self.capture(&self.server_capture, self.server_clock_offset_ns),
            ),
        )
    }

    /// The true time of a scripted instant, as the client's capture stamps it.
    pub fn at(&self, time_ms: f64) -> u64 {
        self.epoch_ns + ms(time_ms)
    }
}
