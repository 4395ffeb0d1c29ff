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
