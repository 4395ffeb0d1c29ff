//! Builds a larger benchmark trace from small ones: every input is copied
//! `--copies` times, copy k starting `k × --spacing-ms` after the first, and
//! each copy's IPv4 addresses are moved (bits 8–23 XOR-ed with the copy's
//! number, both endpoints, IP and TCP checksums updated by RFC 1624) so its
//! connections stay distinct from every other copy's. Packets of all copies
//! are merged in time order, each copy keeping its own packet order; the
//! output is a microsecond pcap of Ethernet frames. IPv6 addresses are
//! moved in their third 16-bit word instead. `--keep-addresses` leaves
//! every copy's addresses alone, so the copies of a connection merge into
//! one long connection. `--keep-port P` leaves the address of every
//! endpoint whose TCP port is P alone (one server, many clients: the shape
//! a listener's capture has).
//!
//! `cargo run --release -p vantage-trace --example replicate -- --copies 40
//! --spacing-ms 1000 --out loss.pcap dsack.dmp.gz`
//!
//! Every input must be Ethernet; packets that are neither IPv4 nor IPv6
//! are copied unchanged.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

use vantage_trace::TraceReader;

struct Frame {
    /// Nanoseconds after the input's first packet.
    offset_ns: u64,
    original_len: u32,
    data: Vec<u8>,
}

struct Args {
    copies: u32,
    spacing_ns: u64,
    out: String,
    inputs: Vec<String>,
    /// Keep every copy's addresses, merging the copies of a connection into
    /// one long connection (a hostile shape for the analyses).
    keep_addresses: bool,
    /// Endpoints on this TCP port keep their addresses.
    keep_port: Option<u16>,
}

fn parse_args() -> Result<Args, String> {
    let mut copies = None;
    let mut spacing_ns = None;
    let mut out = None;
    let mut inputs = Vec::new();
    let mut keep_addresses = false;
    let mut keep_port = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--copies" => {
                let v = value("--copies")?;
                copies = Some(v.parse::<u32>().map_err(|e| format!("--copies {v}: {e}"))?);
            }
            "--spacing-ms" => {
                let v = value("--spacing-ms")?;
                let ms = v
                    .parse::<f64>()
                    .map_err(|e| format!("--spacing-ms {v}: {e}"))?;
                if !(0.0..=3.6e6).contains(&ms) {
                    return Err(format!("--spacing-ms {v} is out of range (0..=3600000)"));
                }
                spacing_ns = Some((ms * 1e6).round() as u64);
            }
            "--out" => out = Some(value("--out")?),
            "--keep-addresses" => keep_addresses = true,
            "--keep-port" => {
                let v = value("--keep-port")?;
                keep_port = Some(
                    v.parse::<u16>()
                        .map_err(|e| format!("--keep-port {v}: {e}"))?,
                );
            }
            _ => inputs.push(arg),
        }
    }
    let copies = copies.ok_or("give --copies N")?;
    if !(1..=65_535).contains(&copies) {
        return Err(format!("--copies {copies} is out of range (1..=65535)"));
    }
    if inputs.is_empty() {
        return Err("give at least one input trace".into());
    }
    Ok(Args {
        copies,
        spacing_ns: spacing_ns.ok_or("give --spacing-ms MS")?,
        out: out.ok_or("give --out FILE")?,
        inputs,
        keep_addresses,
        keep_port,
    })
}

fn read_frames(path: &str) -> Result<Vec<Frame>, String> {
    let mut reader = TraceReader::open(path).map_err(|e| e.to_string())?;
    let mut frames = Vec::new();
    let mut first = None;
    while let Some(packet) = reader.next_packet().map_err(|e| e.to_string())? {
        if packet.link_type.0 != 1 {
            return Err(format!(
                "{path}: link type {} is not Ethernet",
                packet.link_type.0
            ));
        }
        let first = *first.get_or_insert(packet.timestamp.0);
        frames.push(Frame {
            offset_ns: packet.timestamp.0.saturating_sub(first),
            original_len: packet.original_len,
            data: packet.data.to_vec(),
        });
    }
    Ok(frames)
}

/// RFC 1624 incremental update of a one's-complement checksum for one
/// 16-bit word changing from `old` to `new`.
fn update_checksum(checksum: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!checksum) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Moves both addresses of an Ethernet frame (untagged or one VLAN tag)
/// by `mask` and fixes the checksums: IPv4 bits 8–23 (IP and TCP
/// checksums), IPv6 the address's third 16-bit word (TCP checksum; no
/// extension headers expected). An endpoint whose TCP port is `keep_port`
/// keeps its address.
fn move_addresses(frame: &mut [u8], mask: u16, keep_port: Option<u16>) {
    let word = |frame: &[u8], at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    // Whether the source and the destination keep their addresses: their
    // TCP port (at `tcp`) is `keep_port`.
    let kept = |frame: &[u8], tcp: Option<usize>| match (keep_port, tcp) {
        (Some(port), Some(tcp)) if frame.len() >= tcp + 4 => {
            (word(frame, tcp) == port, word(frame, tcp + 2) == port)
        }
        _ => (false, false),
    };
    let mut ip = 14;
    let mut ether_type = (frame.len() >= 14).then(|| word(frame, 12));
    if ether_type == Some(0x8100) && frame.len() >= 18 {
        ether_type = Some(word(frame, 16));
        ip = 18;
    }
    // (word offset, new value) of each changed address word; then the
    // checksum fields to update.
    let mut changes = Vec::with_capacity(4);
    let mut checksums = Vec::with_capacity(2);
    match ether_type {
        Some(0x0800) if frame.len() >= ip + 20 => {
            let header_len = usize::from(frame[ip] & 0x0f) * 4;
            let fragment_offset = word(frame, ip + 6) & 0x1fff;
            let tcp = (frame[ip + 9] == 6 && fragment_offset == 0).then_some(ip + header_len);
            let (keep_source, keep_destination) = kept(frame, tcp);
            // The middle of each address holds bits 8–23.
            if !keep_source {
                changes.push((ip + 12, word(frame, ip + 12) ^ (mask >> 8)));
                changes.push((ip + 14, word(frame, ip + 14) ^ (mask << 8)));
            }
            if !keep_destination {
                changes.push((ip + 16, word(frame, ip + 16) ^ (mask >> 8)));
                changes.push((ip + 18, word(frame, ip + 18) ^ (mask << 8)));
            }
            checksums.push(ip + 10);
            if let Some(tcp) = tcp {
                checksums.push(tcp + 16);
            }
        }
        Some(0x86dd) if frame.len() >= ip + 40 => {
            let tcp = (frame[ip + 6] == 6).then_some(ip + 40);
            let (keep_source, keep_destination) = kept(frame, tcp);
            if !keep_source {
                changes.push((ip + 8 + 4, word(frame, ip + 8 + 4) ^ mask));
            }
            if !keep_destination {
                changes.push((ip + 24 + 4, word(frame, ip + 24 + 4) ^ mask));
            }
            if frame[ip + 6] == 6 {
                checksums.push(ip + 40 + 16);
            }
        }
        _ => return,
    }
    let mut changed = Vec::with_capacity(changes.len());
    for (at, new) in changes {
        changed.push((word(frame, at), new));
        frame[at..at + 2].copy_from_slice(&new.to_be_bytes());
    }
    for at in checksums {
        if frame.len() >= at + 2 {
            let mut checksum = word(frame, at);
            for &(old, new) in &changed {
                checksum = update_checksum(checksum, old, new);
            }
            frame[at..at + 2].copy_from_slice(&checksum.to_be_bytes());
        }
    }
}

fn run(args: Args) -> Result<u64, String> {
    let inputs: Vec<Vec<Frame>> = args
        .inputs
        .iter()
        .map(|path| read_frames(path))
        .collect::<Result<_, _>>()?;
    let file = std::fs::File::create(&args.out).map_err(|e| format!("{}: {e}", args.out))?;
    let mut out = BufWriter::new(file);
    let mut header = Vec::with_capacity(24);
    header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    header.extend_from_slice(&0i32.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    header.extend_from_slice(&262_144u32.to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes());
    out.write_all(&header).map_err(|e| e.to_string())?;

    // One stream per (copy, input); the heap holds each stream's next
    // packet, earliest first (ties: lower stream first).
    let streams = args.copies as usize * inputs.len();
    let start_of = |stream: usize| (stream / inputs.len()) as u64 * args.spacing_ns;
    let mut next = vec![0usize; streams];
    let mut heap = BinaryHeap::new();
    for stream in 0..streams {
        if let Some(frame) = inputs[stream % inputs.len()].first() {
            heap.push(Reverse((start_of(stream) + frame.offset_ns, stream)));
        }
    }
    // A fixed start time (2026-01-01) so the output does not depend on the
    // inputs' dates.
    let base_ns = 1_767_225_600_000_000_000u64;
    let mut written = 0u64;
    let mut frame_buf = Vec::new();
    while let Some(Reverse((time, stream))) = heap.pop() {
        let frames = &inputs[stream % inputs.len()];
        let frame = &frames[next[stream]];
        frame_buf.clear();
        frame_buf.extend_from_slice(&frame.data);
        // Stream 0 keeps the original addresses.
        if !args.keep_addresses {
            move_addresses(&mut frame_buf, stream as u16, args.keep_port);
        }
        let at = base_ns + time;
        let mut record = Vec::with_capacity(16);
        record.extend_from_slice(&((at / 1_000_000_000) as u32).to_le_bytes());
        record.extend_from_slice(&((at % 1_000_000_000 / 1000) as u32).to_le_bytes());
        record.extend_from_slice(&(frame_buf.len() as u32).to_le_bytes());
        record.extend_from_slice(&frame.original_len.max(frame_buf.len() as u32).to_le_bytes());
        out.write_all(&record).map_err(|e| e.to_string())?;
        out.write_all(&frame_buf).map_err(|e| e.to_string())?;
        written += 1;
        next[stream] += 1;
        if let Some(following) = frames.get(next[stream]) {
            heap.push(Reverse((start_of(stream) + following.offset_ns, stream)));
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok(written)
}

fn main() -> ExitCode {
    match parse_args().and_then(|args| {
        if args.copies as usize * args.inputs.len() > 65_536 {
            return Err("copies × inputs must be at most 65536".into());
        }
        run(args)
    }) {
        Ok(written) => {
            eprintln!("{written} packets written");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("replicate: {message}");
            ExitCode::FAILURE
        }
    }
}
