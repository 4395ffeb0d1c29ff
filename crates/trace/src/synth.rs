//! Synthetic captures, laid out byte by byte from the RFCs and the
//! pcap/pcapng specifications: TCP segments over Ethernet, IPv4 or IPv6,
//! options, pcap and pcapng files, gzip. The reader and decoder are checked
//! against this independent construction, and the analyses built on them
//! use it to script exchanges with known timing.
//!
//! Written by hand on purpose: a test of a parser should not share the
//! parser's library.

use std::io::Write;
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

/// A pcapng writer for one byte order.
pub struct PcapNg {
    pub big_endian: bool,
    pub out: Vec<u8>,
}

/// An interface description: link type, snap length, if_tsresol byte.
pub struct InterfaceSpec {
    pub link_type: u16,
    pub snap_length: u32,
    pub tsresol: Option<u8>,
    pub tsoffset_seconds: Option<i64>,
}

impl PcapNg {
    pub fn new(big_endian: bool) -> PcapNg {
        PcapNg {
            big_endian,
            out: Vec::new(),
        }
    }

    fn u16(&self, value: u16) -> [u8; 2] {
        if self.big_endian {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        }
    }

    fn u32(&self, value: u32) -> [u8; 4] {
        if self.big_endian {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        }
    }

    pub fn block(&mut self, block_type: u32, body: &[u8]) {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let length = (body.len() + 12) as u32;
        let (t, l) = (self.u32(block_type), self.u32(length));
        self.out.extend_from_slice(&t);
        self.out.extend_from_slice(&l);
        self.out.extend_from_slice(&body);
        self.out.extend_from_slice(&l);
    }

    pub fn section(&mut self) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(0x1A2B_3C4D));
        body.extend_from_slice(&self.u16(1));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&u64::MAX.to_le_bytes()); // section length unknown
        self.block(0x0A0D_0D0A, &body);
    }

    pub fn interface(&mut self, spec: &InterfaceSpec) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u16(spec.link_type));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&self.u32(spec.snap_length));
        // A comment option first, to check options are walked.
        let comment = b"test interface";
        body.extend_from_slice(&self.u16(1));
        body.extend_from_slice(&self.u16(comment.len() as u16));
        body.extend_from_slice(comment);
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        if let Some(tsresol) = spec.tsresol {
            body.extend_from_slice(&self.u16(9));
            body.extend_from_slice(&self.u16(1));
            body.extend_from_slice(&[tsresol, 0, 0, 0]);
        }
        if let Some(offset) = spec.tsoffset_seconds {
            body.extend_from_slice(&self.u16(14));
            body.extend_from_slice(&self.u16(8));
            let raw = offset as u64;
            body.extend_from_slice(&if self.big_endian {
                raw.to_be_bytes()
            } else {
                raw.to_le_bytes()
            });
        }
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&self.u16(0));
        self.block(1, &body);
    }

    /// An enhanced packet block with a timestamp in interface units.
    pub fn enhanced_packet(&mut self, interface: u32, units: u64, frame: &[u8], original_len: u32) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(interface));
        body.extend_from_slice(&self.u32((units >> 32) as u32));
        body.extend_from_slice(&self.u32(units as u32));
        body.extend_from_slice(&self.u32(frame.len() as u32));
        body.extend_from_slice(&self.u32(original_len));
        body.extend_from_slice(frame);
        self.block(6, &body);
    }

    pub fn simple_packet(&mut self, frame: &[u8]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(frame.len() as u32));
        body.extend_from_slice(frame);
        self.block(3, &body);
    }
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

// Test fixtures: these panic on I/O failure, which is what a test wants.

/// A file under the target directory's temp area, removed on drop.
pub struct TempFile {
    pub path: PathBuf,
}

impl TempFile {
    pub fn new(name: &str, bytes: &[u8]) -> TempFile {
        let directory =
            std::env::temp_dir().join(format!("vantage-trace-tests-{}", std::process::id()));
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
