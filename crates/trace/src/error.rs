//! Errors of trace ingest: every one names the file and, once reading has
//! begun, the byte offset where the problem was found.
//!
//! Offsets count bytes of the capture format itself: for a gzip-compressed
//! trace that is the decompressed stream (the message says so, and adds how
//! far into the compressed file the decompressor had read), because record
//! boundaries only exist there.
//!
//! Only problems with the *file* are errors. A packet that is not TCP, or
//! whose headers cannot be decoded, is counted by reason in
//! [`crate::decode::SkipCounts`] and never stops a read.

use std::fmt;
use std::io;

/// Where in a trace a problem was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file name as given (`<stdin>` for standard input).
    pub file: String,
    /// Byte offset into the capture stream (decompressed, for gzip input).
    pub offset: u64,
    /// For gzip input: how many compressed bytes had been read from the
    /// file when the problem was found (the decompressor reads ahead, so
    /// this is an upper bound).
    pub compressed_read: Option<u64>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.compressed_read {
            None => write!(f, "{}: byte {}", self.file, self.offset),
            Some(read) => write!(
                f,
                "{}: decompressed byte {} (compressed bytes read: {})",
                self.file, self.offset, read
            ),
        }
    }
}

/// A problem with the structure of a pcap or pcapng file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatProblem {
    #[error("not a pcap or pcapng file (first bytes {0:02x?})")]
    UnknownMagic([u8; 4]),
    #[error("compressed with {0}, which is not supported; decompress it first")]
    UnsupportedCompression(&'static str),
    #[error("empty file")]
    Empty,
    #[error("pcap version {major}.{minor} is not supported (expected 2.x)")]
    UnsupportedPcapVersion { major: u16, minor: u16 },
    #[error(
        "packet record length {captured} exceeds the limit {limit} (snap length {snap_length})"
    )]
    RecordTooLong {
        captured: u32,
        limit: u32,
        snap_length: u32,
    },
    #[error(
        "pcapng section header byte-order magic {0:#010x} is neither 0x1a2b3c4d nor 0x4d3c2b1a"
    )]
    BadByteOrderMagic(u32),
    #[error("pcapng section version {major}.{minor} is not supported (expected 1.x)")]
    UnsupportedPcapngVersion { major: u16, minor: u16 },
    #[error("pcapng block length {length} is invalid (must be a multiple of 4, at least {minimum} and at most {maximum})")]
    BadBlockLength {
        length: u32,
        minimum: u32,
        maximum: u32,
    },
    #[error("pcapng block of type {block_type:#x}: trailing length {trailing} differs from leading length {leading}")]
    BlockLengthMismatch {
        block_type: u32,
        leading: u32,
        trailing: u32,
    },
    #[error("pcapng block of type {block_type:#x}: {what} needs {needed} bytes but the block body has {available}")]
    BlockBodyTooShort {
        block_type: u32,
        what: &'static str,
        needed: u64,
        available: u64,
    },
    #[error("pcapng packet refers to interface {interface} but the section describes {described}")]
    UnknownInterface { interface: u32, described: usize },
    #[error("pcapng section describes more than {0} interfaces")]
    TooManyInterfaces(usize),
    #[error("pcapng interface option if_tsresol {0:#04x} gives a resolution finer than 10^-38 s")]
    UnsupportedTimestampResolution(u8),
    #[error("pcapng option {code} of length {length} runs past the end of its block")]
    OptionOverrun { code: u16, length: u16 },
}

/// An error reading a trace. A reader that returned one stops: its next
/// call returns `Ok(None)`.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{file}: cannot open: {source}")]
    Open { file: String, source: io::Error },
    #[error("{location}: read failed: {source}")]
    Read {
        location: Location,
        source: io::Error,
    },
    #[error("{location}: {problem}")]
    Malformed {
        location: Location,
        problem: FormatProblem,
    },
    #[error("{location}: truncated {what}: needs {needed} bytes, the file ends after {available}")]
    Truncated {
        location: Location,
        what: &'static str,
        needed: u64,
        available: u64,
    },
}

impl TraceError {
    /// The byte offset the error names, if reading had begun.
    pub fn offset(&self) -> Option<u64> {
        self.location().map(|location| location.offset)
    }

    /// The capture stops in the middle of a record (or of the compressed
    /// stream): every packet before the offset is complete and usable, as
    /// `tcpdump -r` and `tshark -r` use them.
    pub fn is_cut_off(&self) -> bool {
        match self {
            TraceError::Truncated { .. } => true,
            TraceError::Read { source, .. } => source.kind() == io::ErrorKind::UnexpectedEof,
            TraceError::Open { .. } | TraceError::Malformed { .. } => false,
        }
    }

    /// Where the error was found, if reading had begun.
    pub fn location(&self) -> Option<&Location> {
        match self {
            TraceError::Open { .. } => None,
            TraceError::Read { location, .. }
            | TraceError::Malformed { location, .. }
            | TraceError::Truncated { location, .. } => Some(location),
        }
    }
}
