//! Capture files: pcap and pcapng, plain or gzip-compressed, from a path or
//! from standard input, read as a stream of [`Packet`]s.
//!
//! # What
//!
//! * **pcap** (libpcap savefile): both byte orders, microsecond
//!   (`a1b2c3d4`) and nanosecond (`a1b23c4d`) magics, and the "modified"
//!   Kuznetzov variant (`a1b2cd34`) whose records carry 8 extra bytes.
//! * **pcapng**: any number of sections, each with its own byte order
//!   (from the section header's byte-order magic) and its own interfaces;
//!   each interface has its link type, snap length, `if_tsresol` (decimal or
//!   binary, default microseconds) and `if_tsoffset`. Enhanced, simple and
//!   obsolete packet blocks yield packets; every other block is skipped.
//! * **gzip**, detected by its magic `1f 8b` whatever the file is called,
//!   decompressed on the fly (concatenated members included). zstd, xz and
//!   bzip2 are recognised and refused with a clear message.
//!
//! # Why written by hand
//!
//! The record reader is written here instead of using `pcap-file` 2.0.0:
//! pcap-file refuses every packet whose original length exceeds its
//! captured length (every packet of a snaplen-68 trace) unless one drops to
//! `next_raw_packet()` and converts timestamps by hand, it does not report
//! byte offsets, and its pcapng path parses every block into owned
//! structures. The two formats' framing is small (a 24-byte header and
//! 16-byte records; blocks with a length at both ends), so owning it costs
//! little and gives exact error offsets and one code path for pcap and
//! pcapng. One reusable buffer (1 MiB, grown only to the largest record,
//! which is capped) holds the stream; a [`Packet`] borrows its bytes from
//! it, so the hot path allocates nothing and copies nothing. A regular file
//! that is not compressed is mapped into memory instead and is its own
//! buffer (no copy from the kernel at all); the same checks, offsets and
//! errors apply.
//!
//! Simple packet blocks (pcapng) carry no timestamp; their packets get time
//! zero, which the connection table then clamps like any timestamp that
//! goes backwards.
//!
//! # Robustness
//!
//! A corrupt file gives a [`TraceError`] naming the file and the byte offset
//! of the record at fault; it never panics, never loops, and never allocates
//! from an unchecked length field: pcap records are capped at
//! [`MAX_PCAP_RECORD`] bytes (libpcap's largest snap length) and pcapng
//! blocks at [`MAX_PCAPNG_BLOCK`] (libpcap's limit). After an error the
//! reader is finished.
//!
//! Departures from libpcap: a pcap record may be longer than the header's
//! snap length, up to the larger of the snap length and 65,535 bytes (old
//! writers put small or zero snap lengths in headers of full-size records);
//! beyond that it is an error, where libpcap silently truncates.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use vantage_core::Nanos;

use crate::error::{FormatProblem, Location, TraceError};
use crate::link_type::LinkType;

/// The largest pcap record accepted (libpcap's `MAXIMUM_SNAPLEN`).
pub const MAX_PCAP_RECORD: u32 = 262_144;
/// The largest pcapng block accepted (libpcap's limit for a block).
pub const MAX_PCAPNG_BLOCK: u32 = 16 * 1024 * 1024;
/// The most interfaces one pcapng section may describe.
pub const MAX_INTERFACES: usize = 65_536;

const READ_CHUNK: usize = 1 << 20;
/// Bytes of a mapped file read before their pages are let go (a power of
/// two).
const MAPPED_RELEASE: usize = 8 << 20;
const PCAPNG_SECTION_HEADER: u32 = 0x0A0D_0D0A;
const PCAPNG_INTERFACE_DESCRIPTION: u32 = 1;
const PCAPNG_OBSOLETE_PACKET: u32 = 2;
const PCAPNG_SIMPLE_PACKET: u32 = 3;
const PCAPNG_ENHANCED_PACKET: u32 = 6;
const PCAPNG_BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const OPTION_END: u16 = 0;
const OPTION_IF_TSRESOL: u16 = 9;
const OPTION_IF_TSOFFSET: u16 = 14;

/// One captured packet, borrowed from the reader's buffer until the next
/// call to [`TraceReader::next_packet`].
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    /// Capture time, nanoseconds since the Unix epoch (as the file says;
    /// not made monotonic here).
    pub timestamp: Nanos,
    /// Link-layer header type of the interface that captured the packet.
    pub link_type: LinkType,
    /// Interface index within its pcapng section (0 for pcap).
    pub interface: u32,
    /// Length of the packet on the wire; larger than `data.len()` when the
    /// capture's snap length cut it.
    pub original_len: u32,
    /// The captured bytes, starting with the link-layer header.
    pub data: &'a [u8],
    /// Byte offset of the packet's record in the (decompressed) stream.
    pub offset: u64,
}

/// The container format of a trace, as detected from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum TraceFormat {
    Pcap {
        big_endian: bool,
        nanosecond: bool,
        /// The "modified" (Kuznetzov) variant with 24-byte record headers.
        modified: bool,
        link_type: LinkType,
        snap_length: u32,
    },
    PcapNg {
        /// Byte order of the first section.
        big_endian: bool,
    },
}

/// Reads packets from a pcap or pcapng stream. See the module docs.
pub struct TraceReader {
    name: String,
    input: Input,
    state: State,
    format: TraceFormat,
    /// Compressed bytes read from the file, for gzip input.
    compressed_read: Option<Arc<AtomicU64>>,
    /// Bytes of the record last returned, released at the next call.
    pending_consume: usize,
    finished: bool,
}

enum State {
    Pcap {
        big_endian: bool,
        nanosecond: bool,
        record_header_len: usize,
        record_limit: u32,
        snap_length: u32,
        link_type: LinkType,
    },
    PcapNg(Section),
}

struct Section {
    big_endian: bool,
    interfaces: Vec<Interface>,
}

#[derive(Clone, Copy)]
struct Interface {
    link_type: LinkType,
    snap_length: u32,
    scale: TimeScale,
    offset_seconds: i64,
}

/// How a pcapng interface's timestamp units convert to nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimeScale {
    /// Units of at least a nanosecond: multiply.
    NanosPerUnit(u64),
    /// Finer units: `units * 1e9 / units_per_second`.
    UnitsPerSecond(u128),
}

impl TimeScale {
    fn from_tsresol(resolution: u8) -> Option<TimeScale> {
        let exponent = u32::from(resolution & 0x7F);
        if resolution & 0x80 == 0 {
            match exponent {
                0..=9 => Some(TimeScale::NanosPerUnit(10u64.pow(9 - exponent))),
                10..=38 => Some(TimeScale::UnitsPerSecond(10u128.pow(exponent))),
                _ => None,
            }
        } else if exponent == 0 {
            Some(TimeScale::NanosPerUnit(1_000_000_000))
        } else {
            Some(TimeScale::UnitsPerSecond(1u128 << exponent))
        }
    }

    fn to_nanos(self, units: u64) -> u64 {
        match self {
            TimeScale::NanosPerUnit(factor) => units.saturating_mul(factor),
            TimeScale::UnitsPerSecond(per_second) => {
                let nanos = u128::from(units) * 1_000_000_000 / per_second;
                u64::try_from(nanos).unwrap_or(u64::MAX)
            }
        }
    }
}

const MICROSECONDS: TimeScale = TimeScale::NanosPerUnit(1_000);

/// Where the current record's bytes lie and what it says, found without
/// borrowing the buffer (so the caller can then borrow it once).
struct Record {
    data_start: usize,
    data_len: usize,
    consume: usize,
    timestamp: Nanos,
    original_len: u32,
    link_type: LinkType,
    interface: u32,
    offset: u64,
}

impl TraceReader {
    /// Opens a trace by path; `-` reads standard input. Compression and
    /// format are detected from the content, not the name.
    pub fn open(path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
        let path = path.as_ref();
        if path.as_os_str() == "-" {
            return TraceReader::from_reader("<stdin>", io::stdin());
        }
        let name = path.display().to_string();
        match File::open(path) {
            Ok(file) => match map_uncompressed(&file) {
                Some(map) => TraceReader::from_input(name, Input::mapped(map), None),
                None => TraceReader::from_reader(name, file),
            },
            Err(source) => Err(TraceError::Open { file: name, source }),
        }
    }

    /// Reads a trace from any byte stream; `name` appears in errors.
    pub fn from_reader(
        name: impl Into<String>,
        source: impl Read + Send + 'static,
    ) -> Result<TraceReader, TraceError> {
        let name = name.into();
        let counter = Arc::new(AtomicU64::new(0));
        let counting = CountingReader {
            inner: source,
            count: Arc::clone(&counter),
        };
        TraceReader::from_input(name, Input::new(Box::new(counting)), Some(counter))
    }

    /// Detects compression and format on `input`; `counter` counts the
    /// bytes read from a stream (for errors in gzip input).
    fn from_input(
        name: String,
        mut input: Input,
        counter: Option<Arc<AtomicU64>>,
    ) -> Result<TraceReader, TraceError> {
        let mut compressed_read = None;
        let location = |offset: u64, compressed: &Option<Arc<AtomicU64>>| Location {
            file: name.clone(),
            offset,
            compressed_read: compressed.as_ref().map(|c| c.load(Ordering::Relaxed)),
        };
        let read_error =
            |source: io::Error, compressed: &Option<Arc<AtomicU64>>| TraceError::Read {
                location: location(0, compressed),
                source,
            };

        let available = input.fill(4).map_err(|e| read_error(e, &compressed_read))?;
        let head = input.peek(available);
        if available >= 2 && head[..2] == [0x1F, 0x8B] {
            input.restart_through_gzip();
            compressed_read = counter;
        } else if let Some(kind) = other_compression(head) {
            return Err(TraceError::Malformed {
                location: location(0, &compressed_read),
                problem: FormatProblem::UnsupportedCompression(kind),
            });
        }

        let available = input.fill(4).map_err(|e| read_error(e, &compressed_read))?;
        if available == 0 {
            return Err(TraceError::Malformed {
                location: location(0, &compressed_read),
                problem: FormatProblem::Empty,
            });
        }
        if available < 4 {
            return Err(TraceError::Truncated {
                location: location(0, &compressed_read),
                what: "file header",
                needed: 4,
                available: available as u64,
            });
        }
        let magic: [u8; 4] = input.peek(4).try_into().expect("four bytes");
        let (state, format) = if u32::from_be_bytes(magic) == PCAPNG_SECTION_HEADER {
            let available = input
                .fill(12)
                .map_err(|e| read_error(e, &compressed_read))?;
            if available < 12 {
                return Err(TraceError::Truncated {
                    location: location(0, &compressed_read),
                    what: "pcapng section header",
                    needed: 12,
                    available: available as u64,
                });
            }
            let order = u32::from_le_bytes(input.peek(12)[8..12].try_into().expect("4"));
            let big_endian = match order {
                0x4D3C_2B1A => true,
                PCAPNG_BYTE_ORDER_MAGIC => false,
                other => {
                    return Err(TraceError::Malformed {
                        location: location(8, &compressed_read),
                        problem: FormatProblem::BadByteOrderMagic(other),
                    })
                }
            };
            // The section header itself is parsed by the block loop.
            let section = Section {
                big_endian,
                interfaces: Vec::new(),
            };
            (State::PcapNg(section), TraceFormat::PcapNg { big_endian })
        } else {
            let (big_endian, nanosecond, modified) = match magic {
                [0xA1, 0xB2, 0xC3, 0xD4] => (true, false, false),
                [0xD4, 0xC3, 0xB2, 0xA1] => (false, false, false),
                [0xA1, 0xB2, 0x3C, 0x4D] => (true, true, false),
                [0x4D, 0x3C, 0xB2, 0xA1] => (false, true, false),
                [0xA1, 0xB2, 0xCD, 0x34] => (true, false, true),
                [0x34, 0xCD, 0xB2, 0xA1] => (false, false, true),
                other => {
                    return Err(TraceError::Malformed {
                        location: location(0, &compressed_read),
                        problem: FormatProblem::UnknownMagic(other),
                    })
                }
            };
            let available = input
                .fill(24)
                .map_err(|e| read_error(e, &compressed_read))?;
            if available < 24 {
                return Err(TraceError::Truncated {
                    location: location(0, &compressed_read),
                    what: "pcap file header",
                    needed: 24,
                    available: available as u64,
                });
            }
            let header = input.peek(24);
            let major = read_u16(header, 4, big_endian);
            let minor = read_u16(header, 6, big_endian);
            if major != 2 {
                return Err(TraceError::Malformed {
                    location: location(4, &compressed_read),
                    problem: FormatProblem::UnsupportedPcapVersion { major, minor },
                });
            }
            let snap_length = read_u32(header, 16, big_endian);
            // Upper bits carry the FCS length (libpcap's LT_LINKTYPE).
            let link_type = LinkType(read_u32(header, 20, big_endian) as u16);
            let record_limit = if snap_length == 0 || snap_length > MAX_PCAP_RECORD {
                MAX_PCAP_RECORD
            } else {
                snap_length.max(65_535)
            };
            input.consume(24);
            let state = State::Pcap {
                big_endian,
                nanosecond,
                record_header_len: if modified { 24 } else { 16 },
                record_limit,
                snap_length,
                link_type,
            };
            let format = TraceFormat::Pcap {
                big_endian,
                nanosecond,
                modified,
                link_type,
                snap_length,
            };
            (state, format)
        };
        Ok(TraceReader {
            name,
            input,
            state,
            format,
            compressed_read,
            pending_consume: 0,
            finished: false,
        })
    }

    /// The container format detected when the reader was opened.
    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// Whether the input was gzip-compressed.
    pub fn compressed(&self) -> bool {
        self.compressed_read.is_some()
    }

    /// The name given when opening (used in errors).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next packet, `Ok(None)` at the end of the trace. After an error
    /// every further call returns `Ok(None)`.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, TraceError> {
        if self.finished {
            return Ok(None);
        }
        self.input
            .consume(std::mem::take(&mut self.pending_consume));
        let record = match self.next_record() {
            Ok(Some(record)) => record,
            Ok(None) => {
                self.finished = true;
                return Ok(None);
            }
            Err(error) => {
                self.finished = true;
                return Err(error);
            }
        };
        self.pending_consume = record.consume;
        let start = self.input.start + record.data_start;
        Ok(Some(Packet {
            timestamp: record.timestamp,
            link_type: record.link_type,
            interface: record.interface,
            original_len: record.original_len,
            data: &self.input.bytes()[start..start + record.data_len],
            offset: record.offset,
        }))
    }

    fn location(&self, offset: u64) -> Location {
        Location {
            file: self.name.clone(),
            offset,
            compressed_read: self
                .compressed_read
                .as_ref()
                .map(|count| count.load(Ordering::Relaxed)),
        }
    }

    fn malformed(&self, offset: u64, problem: FormatProblem) -> TraceError {
        TraceError::Malformed {
            location: self.location(offset),
            problem,
        }
    }

    /// Makes `needed` bytes available at the read position; returns how
    /// many are (fewer only at the end of the stream).
    /// The common case (the bytes are already there) is inlined; reading
    /// and errors are not.
    #[inline]
    fn fill(&mut self, needed: usize) -> Result<usize, TraceError> {
        if self.input.buffered() >= needed {
            return Ok(needed);
        }
        self.fill_more(needed)
    }

    #[cold]
    fn fill_more(&mut self, needed: usize) -> Result<usize, TraceError> {
        match self.input.fill(needed) {
            Ok(available) => Ok(available),
            Err(source) => Err(TraceError::Read {
                location: self.location(self.input.offset + self.input.buffered() as u64),
                source,
            }),
        }
    }

    #[inline]
    fn require(&mut self, needed: usize, what: &'static str) -> Result<(), TraceError> {
        if self.input.buffered() >= needed {
            return Ok(());
        }
        self.require_more(needed, what)
    }

    #[cold]
    fn require_more(&mut self, needed: usize, what: &'static str) -> Result<(), TraceError> {
        let available = self.fill(needed)?;
        if available < needed {
            return Err(TraceError::Truncated {
                location: self.location(self.input.offset),
                what,
                needed: needed as u64,
                available: available as u64,
            });
        }
        Ok(())
    }

    fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        match self.state {
            State::Pcap {
                big_endian,
                nanosecond,
                record_header_len,
                record_limit,
                snap_length,
                link_type,
            } => {
                if self.fill(record_header_len)? == 0 {
                    return Ok(None);
                }
                self.require(record_header_len, "packet record header")?;
                let header = self.input.peek(record_header_len);
                let seconds = u64::from(read_u32(header, 0, big_endian));
                let fraction = u64::from(read_u32(header, 4, big_endian));
                let captured = read_u32(header, 8, big_endian);
                let original_len = read_u32(header, 12, big_endian);
                let offset = self.input.offset;
                if captured > record_limit {
                    return Err(self.malformed(
                        offset,
                        FormatProblem::RecordTooLong {
                            captured,
                            limit: record_limit,
                            snap_length,
                        },
                    ));
                }
                let total = record_header_len + captured as usize;
                self.require(total, "packet record")?;
                let fraction_nanos = if nanosecond {
                    fraction
                } else {
                    fraction * 1_000
                };
                Ok(Some(Record {
                    data_start: record_header_len,
                    data_len: captured as usize,
                    consume: total,
                    timestamp: Nanos(seconds * 1_000_000_000 + fraction_nanos),
                    original_len,
                    link_type,
                    interface: 0,
                    offset,
                }))
            }
            State::PcapNg(_) => self.next_pcapng_record(),
        }
    }

    fn next_pcapng_record(&mut self) -> Result<Option<Record>, TraceError> {
        loop {
            if self.fill(8)? == 0 {
                return Ok(None);
            }
            self.require(8, "pcapng block header")?;
            let offset = self.input.offset;
            let head = self.input.peek(8);
            let block_type_raw = u32::from_le_bytes(head[0..4].try_into().expect("4"));
            let mut big_endian = self.section().big_endian;
            let minimum = if block_type_raw == PCAPNG_SECTION_HEADER {
                // A new section: its byte order comes from its own magic.
                self.require(12, "pcapng section header")?;
                let order = u32::from_le_bytes(self.input.peek(12)[8..12].try_into().expect("4"));
                big_endian = match order {
                    0x4D3C_2B1A => true,
                    PCAPNG_BYTE_ORDER_MAGIC => false,
                    other => {
                        return Err(
                            self.malformed(offset + 8, FormatProblem::BadByteOrderMagic(other))
                        )
                    }
                };
                28
            } else {
                12
            };
            let head = self.input.peek(8);
            let block_type = read_u32(head, 0, big_endian);
            let length = read_u32(head, 4, big_endian);
            if !length.is_multiple_of(4) || length < minimum || length > MAX_PCAPNG_BLOCK {
                return Err(self.malformed(
                    offset + 4,
                    FormatProblem::BadBlockLength {
                        length,
                        minimum,
                        maximum: MAX_PCAPNG_BLOCK,
                    },
                ));
            }
            let length = length as usize;
            self.require(length, "pcapng block")?;
            let block = self.input.peek(length);
            let trailing = read_u32(block, length - 4, big_endian);
            if trailing != length as u32 {
                return Err(self.malformed(
                    offset + length as u64 - 4,
                    FormatProblem::BlockLengthMismatch {
                        block_type,
                        leading: length as u32,
                        trailing,
                    },
                ));
            }
            let body_len = length - 12;
            match block_type {
                PCAPNG_SECTION_HEADER => {
                    let body = &self.input.peek(length)[8..length - 4];
                    let major = read_u16(body, 4, big_endian);
                    let minor = read_u16(body, 6, big_endian);
                    if major != 1 {
                        return Err(self.malformed(
                            offset + 12,
                            FormatProblem::UnsupportedPcapngVersion { major, minor },
                        ));
                    }
                    if let State::PcapNg(section) = &mut self.state {
                        section.big_endian = big_endian;
                        section.interfaces.clear();
                    }
                }
                PCAPNG_INTERFACE_DESCRIPTION => {
                    let interface = self.parse_interface(offset, length, big_endian)?;
                    let described = self.section().interfaces.len();
                    if described >= MAX_INTERFACES {
                        return Err(self
                            .malformed(offset, FormatProblem::TooManyInterfaces(MAX_INTERFACES)));
                    }
                    if let State::PcapNg(section) = &mut self.state {
                        section.interfaces.push(interface);
                    }
                }
                PCAPNG_ENHANCED_PACKET | PCAPNG_OBSOLETE_PACKET => {
                    let body = &self.input.peek(length)[8..length - 4];
                    let needed = 20u64;
                    if (body_len as u64) < needed {
                        return Err(self.body_too_short(
                            offset,
                            block_type,
                            "packet fields",
                            needed,
                            body_len,
                        ));
                    }
                    let interface_id = if block_type == PCAPNG_ENHANCED_PACKET {
                        read_u32(body, 0, big_endian)
                    } else {
                        u32::from(read_u16(body, 0, big_endian))
                    };
                    let units = (u64::from(read_u32(body, 4, big_endian)) << 32)
                        | u64::from(read_u32(body, 8, big_endian));
                    let captured = read_u32(body, 12, big_endian);
                    let original_len = read_u32(body, 16, big_endian);
                    if u64::from(captured) > (body_len - 20) as u64 {
                        return Err(self.body_too_short(
                            offset,
                            block_type,
                            "captured packet data",
                            20 + u64::from(captured),
                            body_len,
                        ));
                    }
                    let interface = self.interface(offset, interface_id)?;
                    return Ok(Some(Record {
                        data_start: 8 + 20,
                        data_len: captured as usize,
                        consume: length,
                        timestamp: interface_time(interface, units),
                        original_len,
                        link_type: interface.link_type,
                        interface: interface_id,
                        offset,
                    }));
                }
                PCAPNG_SIMPLE_PACKET => {
                    if body_len < 4 {
                        return Err(self.body_too_short(
                            offset,
                            block_type,
                            "original length",
                            4,
                            body_len,
                        ));
                    }
                    let original_len = read_u32(self.input.peek(length), 8, big_endian);
                    let interface = self.interface(offset, 0)?;
                    let mut captured = (original_len as usize).min(body_len - 4);
                    if interface.snap_length != 0 {
                        captured = captured.min(interface.snap_length as usize);
                    }
                    return Ok(Some(Record {
                        data_start: 12,
                        data_len: captured,
                        consume: length,
                        // Simple packet blocks carry no timestamp.
                        timestamp: Nanos::ZERO,
                        original_len,
                        link_type: interface.link_type,
                        interface: 0,
                        offset,
                    }));
                }
                _ => {}
            }
            self.input.consume(length);
        }
    }

    fn section(&self) -> &Section {
        match &self.state {
            State::PcapNg(section) => section,
            State::Pcap { .. } => unreachable!("pcapng parsing only runs on pcapng state"),
        }
    }

    fn interface(&self, offset: u64, interface_id: u32) -> Result<Interface, TraceError> {
        let interfaces = &self.section().interfaces;
        match interfaces.get(interface_id as usize) {
            Some(interface) => Ok(*interface),
            None => Err(self.malformed(
                offset + 8,
                FormatProblem::UnknownInterface {
                    interface: interface_id,
                    described: interfaces.len(),
                },
            )),
        }
    }

    fn body_too_short(
        &self,
        offset: u64,
        block_type: u32,
        what: &'static str,
        needed: u64,
        available: usize,
    ) -> TraceError {
        self.malformed(
            offset + 8,
            FormatProblem::BlockBodyTooShort {
                block_type,
                what,
                needed,
                available: available as u64,
            },
        )
    }

    fn parse_interface(
        &self,
        offset: u64,
        length: usize,
        big_endian: bool,
    ) -> Result<Interface, TraceError> {
        let body = &self.input.peek(length)[8..length - 4];
        if body.len() < 8 {
            return Err(self.body_too_short(
                offset,
                PCAPNG_INTERFACE_DESCRIPTION,
                "link type and snap length",
                8,
                body.len(),
            ));
        }
        let mut interface = Interface {
            link_type: LinkType(read_u16(body, 0, big_endian)),
            snap_length: read_u32(body, 4, big_endian),
            scale: MICROSECONDS,
            offset_seconds: 0,
        };
        let mut position = 8;
        while position + 4 <= body.len() {
            let code = read_u16(body, position, big_endian);
            let value_len = read_u16(body, position + 2, big_endian);
            if code == OPTION_END {
                break;
            }
            let value_start = position + 4;
            let value_end = value_start + usize::from(value_len);
            if value_end > body.len() {
                return Err(self.malformed(
                    offset + 8 + position as u64,
                    FormatProblem::OptionOverrun {
                        code,
                        length: value_len,
                    },
                ));
            }
            let value = &body[value_start..value_end];
            match (code, value.len()) {
                (OPTION_IF_TSRESOL, 1) => {
                    interface.scale = TimeScale::from_tsresol(value[0]).ok_or_else(|| {
                        self.malformed(
                            offset + 8 + value_start as u64,
                            FormatProblem::UnsupportedTimestampResolution(value[0]),
                        )
                    })?;
                }
                (OPTION_IF_TSOFFSET, 8) => {
                    let raw = read_u64(value, 0, big_endian);
                    interface.offset_seconds = raw as i64;
                }
                _ => {}
            }
            position = value_start + usize::from(value_len).next_multiple_of(4);
        }
        Ok(interface)
    }
}

fn interface_time(interface: Interface, units: u64) -> Nanos {
    let nanos = i128::from(interface.scale.to_nanos(units))
        + i128::from(interface.offset_seconds) * 1_000_000_000;
    Nanos(nanos.clamp(0, i128::from(u64::MAX)) as u64)
}

fn other_compression(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
        Some("zstd")
    } else if head.starts_with(&[0xFD, 0x37, 0x7A, 0x58]) {
        Some("xz")
    } else if head.starts_with(b"BZh") {
        Some("bzip2")
    } else {
        None
    }
}

fn read_u16(bytes: &[u8], at: usize, big_endian: bool) -> u16 {
    let raw: [u8; 2] = bytes[at..at + 2].try_into().expect("caller checked length");
    if big_endian {
        u16::from_be_bytes(raw)
    } else {
        u16::from_le_bytes(raw)
    }
}

fn read_u32(bytes: &[u8], at: usize, big_endian: bool) -> u32 {
    let raw: [u8; 4] = bytes[at..at + 4].try_into().expect("caller checked length");
    if big_endian {
        u32::from_be_bytes(raw)
    } else {
        u32::from_le_bytes(raw)
    }
}

fn read_u64(bytes: &[u8], at: usize, big_endian: bool) -> u64 {
    let raw: [u8; 8] = bytes[at..at + 8].try_into().expect("caller checked length");
    if big_endian {
        u64::from_be_bytes(raw)
    } else {
        u64::from_le_bytes(raw)
    }
}

/// A reader that counts the bytes it hands out (compressed bytes, for gzip
/// input, so errors can say how far into the file decompression got).
struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.count.fetch_add(read as u64, Ordering::Relaxed);
        Ok(read)
    }
}

/// Maps a regular, non-empty file that is not gzip-compressed; `None`
/// when it cannot be mapped (a pipe, a special file, an empty file) or is
/// compressed, which are read as a stream.
///
/// Reading a mapped file saves the kernel's copy of every byte into the
/// read buffer (measured in `bench/cpa`); the packets then borrow the
/// mapping. memmap2 is the maintained crate for this (std has no mapping).
fn map_uncompressed(file: &File) -> Option<memmap2::Mmap> {
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.len() == 0 {
        return None;
    }
    // SAFETY: the mapping is only read, and only through bounds-checked
    // slices. If another process truncates the file while it is read,
    // access beyond the new end faults (SIGBUS), as for every program that
    // maps its input (ripgrep, git); a file changed in place gives bytes of
    // either version, which the reader checks like any input.
    let map = unsafe { memmap2::MmapOptions::new().map(file) }.ok()?;
    #[cfg(unix)]
    let _ = map.advise(memmap2::Advice::Sequential);
    (map.get(..2) != Some(&[0x1F, 0x8B][..])).then_some(map)
}

/// The reusable read buffer: bytes `[start, end)` of `buffer` are the
/// stream from byte `offset` on. A mapped file is its own buffer, whole
/// from the start.
struct Input {
    source: Box<dyn Read + Send>,
    buffer: Vec<u8>,
    mapped: Option<memmap2::Mmap>,
    /// Bytes of the mapping before this were given back to the kernel.
    released: usize,
    start: usize,
    end: usize,
    offset: u64,
    at_end: bool,
}

impl Input {
    fn new(source: Box<dyn Read + Send>) -> Input {
        Input {
            source,
            buffer: vec![0; READ_CHUNK],
            mapped: None,
            released: 0,
            start: 0,
            end: 0,
            offset: 0,
            at_end: false,
        }
    }

    fn mapped(map: memmap2::Mmap) -> Input {
        Input {
            source: Box::new(io::empty()),
            buffer: Vec::new(),
            end: map.len(),
            mapped: Some(map),
            released: 0,
            start: 0,
            offset: 0,
            at_end: true,
        }
    }

    /// The bytes `start` and `end` index.
    fn bytes(&self) -> &[u8] {
        match &self.mapped {
            Some(map) => map,
            None => &self.buffer,
        }
    }

    fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Makes `needed` bytes available from `start`, reading as required;
    /// returns how many are available (fewer than `needed` only at the end
    /// of the stream). `needed` is bounded by the callers' record caps.
    fn fill(&mut self, needed: usize) -> io::Result<usize> {
        if self.buffered() >= needed {
            return Ok(needed);
        }
        if self.mapped.is_some() {
            // All of the file is there: what is missing is beyond its end.
            return Ok(self.buffered());
        }
        if self.buffer.len() - self.start < needed {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buffer.len() < needed {
                self.buffer.resize(needed.next_power_of_two(), 0);
            }
        }
        while self.buffered() < needed && !self.at_end {
            match self.source.read(&mut self.buffer[self.end..]) {
                Ok(0) => self.at_end = true,
                Ok(read) => self.end += read,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(self.buffered().min(needed))
    }

    fn peek(&self, len: usize) -> &[u8] {
        &self.bytes()[self.start..self.start + len]
    }

    fn consume(&mut self, len: usize) {
        debug_assert!(len <= self.buffered());
        self.start += len;
        self.offset += len as u64;
        #[cfg(unix)]
        if let Some(map) = &self.mapped {
            // The pages read are let go every few MiB, so the resident
            // memory of a large mapped file stays a window, not the file.
            let done = self.start & !(MAPPED_RELEASE - 1);
            if done >= self.released + MAPPED_RELEASE {
                // SAFETY: the mapping is a read-only view of a file; pages
                // given up are read again from the file if touched, with
                // the same bytes (and nothing before `start` is touched
                // again: a packet borrows only the current record).
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        self.released,
                        done - self.released,
                    )
                };
                self.released = done;
            }
        }
    }

    /// Re-reads the stream through a gzip decompressor, starting with the
    /// bytes already buffered.
    fn restart_through_gzip(&mut self) {
        // (A mapped file is never compressed: `map_uncompressed`.)
        let buffered = self.bytes()[self.start..self.end].to_vec();
        if self.mapped.take().is_some() {
            self.buffer = vec![0; READ_CHUNK];
        }
        let rest = std::mem::replace(&mut self.source, Box::new(io::empty()));
        let compressed = io::Cursor::new(buffered).chain(rest);
        self.source = Box::new(flate2::read::MultiGzDecoder::new(compressed));
        self.start = 0;
        self.end = 0;
        self.offset = 0;
        self.at_end = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsresol_decimal_and_binary() {
        assert_eq!(
            TimeScale::from_tsresol(6),
            Some(TimeScale::NanosPerUnit(1_000))
        );
        assert_eq!(TimeScale::from_tsresol(9), Some(TimeScale::NanosPerUnit(1)));
        assert_eq!(
            TimeScale::from_tsresol(0),
            Some(TimeScale::NanosPerUnit(1_000_000_000))
        );
        let picos = TimeScale::from_tsresol(12).unwrap();
        assert_eq!(picos.to_nanos(1_500_000), 1_500);
        let binary = TimeScale::from_tsresol(0x80 | 10).unwrap();
        assert_eq!(binary.to_nanos(1024), 1_000_000_000);
        assert_eq!(TimeScale::from_tsresol(39), None);
        // Saturates rather than wrapping.
        assert_eq!(TimeScale::NanosPerUnit(1_000).to_nanos(u64::MAX), u64::MAX);
    }

    #[test]
    fn input_fill_grows_and_compacts() {
        let data: Vec<u8> = (0..=255u8).cycle().take(3 * READ_CHUNK).collect();
        let mut input = Input::new(Box::new(io::Cursor::new(data.clone())));
        assert_eq!(input.fill(10).unwrap(), 10);
        input.consume(READ_CHUNK - 5);
        // Needs bytes past the end of the first chunk: compacts and reads.
        assert_eq!(input.fill(20).unwrap(), 20);
        assert_eq!(input.peek(20), &data[READ_CHUNK - 5..READ_CHUNK + 15]);
        // A record larger than the buffer grows it.
        assert_eq!(input.fill(READ_CHUNK + 7).unwrap(), READ_CHUNK + 7);
        input.consume(READ_CHUNK + 7);
        assert_eq!(input.offset, 2 * READ_CHUNK as u64 + 2);
        assert_eq!(input.fill(usize::MAX >> 40).unwrap(), READ_CHUNK - 2);
    }
}
