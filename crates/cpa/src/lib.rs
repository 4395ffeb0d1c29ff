//! Vantage critical-path analysis: why did each TCP/HTTP transaction take
//! as long as it did — the server, the client, propagation, network
//! variation, or losses repaired by a time-out or a fast retransmit?
//!
//! This is the method of Barford and Crovella, "Critical Path Analysis of
//! TCP Transactions" (SIGCOMM 2000, tool `tcpeval`; `shared/papers/
//! critical-path-tcp.txt`), Section 3, module by module:
//!
//! * [`view`](mod@view) — a connection's packets as both endpoints saw them
//!   (Section 3.1's nodes), from two captures matched packet by packet with
//!   their clock offset, or from one capture with the other endpoint
//!   placed (single vantage); capture artefacts of Section 3.5.
//! * [`transaction`](mod@transaction) — the four parts of an HTTP
//!   transaction (Figure 2, Section 3.2); HTTP/1.0 and persistent,
//!   non-pipelined HTTP/1.1.
//! * [`reno`] — the forward pass of rounds: a TCP Reno sender model
//!   (RFC 5681) finding the ACK that liberated each data packet (Section
//!   3.3, Figure 3), flagging hidden time-outs and packets sent beyond the
//!   window.
//! * [`graph`] — the packet dependence graph and its arc kinds (Section
//!   3.1, plus the application dependences of Section 3.2).
//! * [`critical_path`](mod@critical_path) — the backward pass up the
//!   critical path (Section 3.3).
//! * [`profile`] — the six-category profile (Section 3.4); the categories
//!   sum exactly to each transaction's duration.
//! * [`report`] and [`plot`] — tables per transaction and per
//!   response-size class (Figures 4, 6, 7), the histogram of packets on the
//!   critical path (Figure 8), verdict lines, JSON Lines, the arc chain,
//!   and SVG time-line (Figure 5) and sequence plots.
//!
//! The analysis itself ([`Analyzer`]) is sans-IO: it is handed finished
//! connections and never reads a file or a clock. [`analyze`] is the thin
//! driver that reads one or two trace files with `vantage-trace`.

mod analysis;
pub mod critical_path;
mod error;
pub mod graph;
mod ingest;
mod packet_label;
pub mod plot;
pub mod profile;
pub mod reno;
pub mod report;
pub mod transaction;
pub mod view;

use std::path::PathBuf;

use serde::Serialize;
use vantage_core::Nanos;
use vantage_trace::TableConfig;

pub use analysis::{
    conserves, Analysis, AnalysisStats, Analyzer, ClockOffset, Failure, Failures, InputSummary,
    PathDelays,
};
pub use error::CpaError;
pub use graph::{ArcKind, Phase};
pub use profile::{
    Category, LossCounts, PacketEvent, PacketLabel, PathArc, PathNode, Phases, Profile,
    Transaction, TransactionFlags,
};
pub use reno::{LossRepair, RenoConfig, RenoSender};
pub use report::SizeClasses;
pub use transaction::StaleResends;

pub use view::{CapturedConnection, PayloadStart, SegmentExtra, Vantage};

/// An endpoint of a connection: the client (the initiator) or the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }

    /// 0 for the client, 1 for the server.
    pub fn index(self) -> usize {
        match self {
            Side::Client => 0,
            Side::Server => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// The traces to analyse: at least one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inputs {
    /// Captured at the server.
    pub server: Option<PathBuf>,
    /// Captured at the client.
    pub client: Option<PathBuf>,
}

/// When the tear-down (FIN, ACK, FIN, ACK) is part of a connection's last
/// transaction. The paper's Figure 2 includes it: its HTTP/1.0 server
/// closes as it sends the response. A persistent connection closed after
/// seconds idle is not part of any response time, so by default the
/// tear-down counts only when it follows the exchange promptly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Teardown {
    /// When the connection's first FIN left no later than the larger of one
    /// round trip and [`Options::min_rto`] after the response's last byte
    /// arrived: a close that ends the exchange, as in HTTP/1.0 (persistent
    /// connections are closed on idle timers of seconds).
    #[default]
    Prompt,
    /// Always (the paper's Figure 2 literally).
    Always,
    /// Never: transactions end when the response's last byte arrives.
    Never,
}

/// Settings of an analysis.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Initial congestion window in segments for every sender; `None`
    /// infers it per connection from the first flight.
    pub initial_window: Option<u32>,
    /// Initial window when the first flight does not show one (Linux and
    /// RFC 6928: 10 segments).
    pub default_initial_window: u32,
    /// Initial slow-start threshold in segments; `None` is unlimited (RFC
    /// 5681's "arbitrarily high", Linux's choice).
    pub initial_ssthresh: Option<u32>,
    /// Most segments slow start adds per ACK (RFC 3465's L; 1 is RFC 5681).
    pub slow_start_limit_segments: u32,
    /// Lower bound of the retransmission timeout (Linux: 200 ms); used to
    /// tell retransmissions apart when a connection has no RTT sample, and
    /// for the restart after idle.
    pub min_rto: Nanos,
    /// Restart from the initial window after an idle period (RFC 5681
    /// §4.1; Linux's default).
    pub restart_after_idle: bool,
    /// Server clock minus client clock in nanoseconds, when known; `None`
    /// estimates it (two captures only).
    pub clock_offset: Option<i64>,
    /// When a connection's tear-down counts in its last transaction.
    pub teardown: Teardown,
    /// Keep every packet event of each transaction (for sequence plots).
    pub keep_packets: bool,
    /// Connection table timeouts (segments are always recorded).
    pub table: TableConfig,
    /// Cores to use: 1 reads and analyses on one thread; 2 (the default)
    /// pipelines reading, connection tracking and analysis on their own
    /// threads once the trace has shown [`Options::parallel_after_packets`]
    /// packets, analyses connections that finish together, profiles the
    /// transactions and renders `--json` on two. The output is the same
    /// either way (every stage sees its items in the same order).
    pub threads: usize,
    /// Packets read before a second thread starts: a smaller trace is done
    /// before the thread pays for itself.
    pub parallel_after_packets: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            initial_window: None,
            default_initial_window: 10,
            initial_ssthresh: None,
            slow_start_limit_segments: 2,
            min_rto: Nanos::from_millis(200),
            restart_after_idle: true,
            clock_offset: None,
            teardown: Teardown::Prompt,
            keep_packets: false,
            table: TableConfig::default(),
            threads: 2,
            parallel_after_packets: 20_000,
        }
    }
}

impl Options {
    /// Checks ranges; errors name the option.
    pub fn validate(&self) -> Result<(), CpaError> {
        let invalid = |name: &'static str, problem: &str| {
            Err(CpaError::InvalidOption {
                name,
                problem: problem.to_string(),
            })
        };
        if self.initial_window == Some(0) {
            return invalid("initial_window", "must be at least 1 segment");
        }
        if self.default_initial_window == 0 {
            return invalid("default_initial_window", "must be at least 1 segment");
        }
        if self.initial_ssthresh.is_some_and(|s| s < 2) {
            return invalid("initial_ssthresh", "must be at least 2 segments (RFC 5681)");
        }
        if self.slow_start_limit_segments == 0 {
            return invalid("slow_start_limit_segments", "must be at least 1 segment");
        }
        if self.min_rto == Nanos::ZERO {
            return invalid("min_rto", "must be positive");
        }
        if !(1..=2).contains(&self.threads) {
            return invalid(
                "threads",
                "must be 1 or 2 (the pipeline is made for two cores)",
            );
        }
        Ok(())
    }
}

/// Analyses the traces: every transaction's critical path and profile.
///
/// With both traces, packets are matched between them and the clock offset
/// is estimated (or taken from [`Options::clock_offset`]); with one, the
/// other endpoint is placed from it (see [`profile`] for the
/// approximation, which [`Analysis::approximations`] states).
pub fn analyze(inputs: &Inputs, options: &Options) -> Result<Analysis, CpaError> {
    options.validate()?;
    let mut analyzer = Analyzer::new(options.clone());
    let summaries = match (&inputs.client, &inputs.server) {
        (None, None) => return Err(CpaError::NoInput),
        (Some(client), None) => vec![ingest::single(
            client,
            Side::Client,
            options,
            &mut analyzer,
        )?],
        (None, Some(server)) => vec![ingest::single(
            server,
            Side::Server,
            options,
            &mut analyzer,
        )?],
        (Some(client), Some(server)) => {
            ingest::dual(client, server, options, &mut analyzer)?.to_vec()
        }
    };
    let mut analysis = analyzer.finish();
    analysis.stats.inputs = summaries;
    Ok(analysis)
}
