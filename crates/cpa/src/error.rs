use vantage_trace::TraceError;

/// Why an analysis or a rendering failed.
#[derive(Debug, thiserror::Error)]
pub enum CpaError {
    /// Neither a client-side nor a server-side trace was given.
    #[error("no input: give a server-side trace, a client-side trace, or both")]
    NoInput,
    /// A trace could not be read.
    #[error("{side} trace: {source}")]
    Trace {
        side: &'static str,
        #[source]
        source: TraceError,
    },
    /// Every packet of a trace has a link type the decoder does not know.
    #[error("{side} trace: link type {link_type} is not supported ({packets} packets skipped); supported: Ethernet (1), raw IP (12, 14, 101, 228, 229), BSD loopback (0, 108), Linux SLL (113) and SLL2 (276), FDDI (10)")]
    UnsupportedLinkType {
        side: &'static str,
        link_type: u16,
        packets: u64,
    },
    /// An option is out of its range.
    #[error("option {name}: {problem}")]
    InvalidOption { name: &'static str, problem: String },
    /// A transaction number that the analysis does not have.
    #[error("transaction {number} does not exist: the analysis found {count} (numbered from 1)")]
    NoSuchTransaction { number: usize, count: usize },
    /// A rendering needs the packets, which were not kept.
    #[error("transaction {number}: the sequence plot needs every packet; analyze with Options::keep_packets")]
    PacketsNotKept { number: usize },
    /// The plotting backend failed.
    #[error("plot: {0}")]
    Plot(String),
}
