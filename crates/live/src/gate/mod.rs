//! The live SYN gate: the Abacus paper's SYN admission filters in front of
//! a real Linux listener, through NFQUEUE.
//!
//! Abacus paper (`abacus-filters-syn-control.txt`): Section 3.2 (token
//! bucket, drop or reject), Section 4.3 (Predictive Greedy), Section 5
//! (Abacus Filter); Section 2 for what drop and reject do to a client. The
//! filters are the sans-IO types of `vantage_core::admission::syn`, built
//! from the same parameters the simulator uses
//! ([`FilterParams`](vantage_core::admission::syn::FilterParams)); this
//! module only moves packets and numbers:
//!
//! * [`config`] — the TOML configuration;
//! * [`packet`] — is this queued packet a SYN to a protected listener;
//! * [`decide`] — a batch of packets and the filter's verdicts → NFQUEUE
//!   verdicts (pure);
//! * [`worker`] — the verdict loop of one queue and the shared filter;
//! * [`counters`] — the counters every worker and the metrics share;
//! * [`cpu`] — CPU selection and pinning of the verdict threads;
//! * [`rules`] — the iptables chain (REJECT on the mark, NFQUEUE with
//!   bypass) and `clean`;
//! * [`kernel`] — `/proc` counters for `refill_rate = "measure"`;
//! * [`metrics`] — OpenMetrics on `GET /metrics`;
//! * [`log`] — JSON Lines per interval, readable by Certes;
//! * [`daemon`] — start-up, the interval clock, signals, shut-down.
//!
//! Departures from the paper: its prototype changed `ipchains` in a Linux
//! 2.2 kernel; the gate is an unmodified kernel's NFQUEUE target with
//! verdicts from user space, and rejects with `NF_REPEAT` + a mark that an
//! earlier REJECT rule turns into a RST. Time is `CLOCK_MONOTONIC` since
//! the gate started, in integer nanoseconds (the simulator's time base with
//! another origin). With `refill_rate = "measure"`, r_t — the server's
//! capacity, which the paper takes as known — is estimated from the
//! kernel's counters (beyond the paper; see
//! [`CapacityEstimator`](vantage_core::admission::syn::CapacityEstimator)).

pub mod config;
pub mod counters;
pub mod cpu;
pub mod daemon;
pub mod decide;
pub mod kernel;
pub mod log;
pub mod metrics;
pub mod packet;
pub mod rules;
pub mod worker;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use config::{ConfigError, FilterConfig, GateConfig, Listener, Refill};
pub use counters::GateCounters;
pub use cpu::{allowed_cpus, fanout_cpus, pin_current_thread};
pub use daemon::{register_signals, run, RunOptions, RunSummary};
pub use decide::{action_for, decide_batch, GateAction};
pub use packet::{classify, PacketClass, PassReason};
pub use rules::{clean, CleanReport, GateRules};
pub use vantage_core::admission::syn::record::GateCounts;
pub use worker::{queue_config, Gate, QueueWorker, WorkerReport};

use vantage_core::admission::syn::FilterConfigError;
use vantage_sys::nfqueue::NfqError;

/// Why the gate could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the gate needs root (CAP_NET_ADMIN) to bind NFQUEUE queues and change iptables rules; run it as root")]
    NotRoot,
    #[error("filter: {0}")]
    Filter(FilterConfigError),
    #[error("queue {queue}: {source}")]
    Queue {
        queue: u16,
        #[source]
        source: NfqError,
    },
    #[error("iptables: {0}")]
    Rules(String),
    #[error("metrics endpoint {address}: {message}")]
    Metrics {
        address: SocketAddr,
        message: String,
    },
    #[error("log {}: {source}", path.display())]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("ready file {}: {source}", path.display())]
    ReadyFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {problem}")]
    Proc { path: String, problem: String },
    #[error("cannot install the signal handlers: {0}")]
    Signal(#[source] std::io::Error),
    #[error("cannot start a thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("the worker of queue {queue} panicked")]
    WorkerPanicked { queue: u16 },
}
