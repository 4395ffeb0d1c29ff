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
//! * [`rules`] — the nft table or iptables chain (REJECT on the mark,
//!   NFQUEUE with bypass), `verify`, `reload` and `clean`;
//! * [`shortcut`] — the in-kernel BPF match that repeats the filter's
//!   verdict while it is constant, so those SYNs are not queued;
//! * [`kernel`] — `/proc` counters for `refill_rate = "measure"`;
//! * [`metrics`] — the gate's metrics, served by [`crate::metrics`];
//! * [`log`] — JSON Lines per interval, readable by Certes;
//! * [`daemon`] — start-up, the interval clock, signals, reload,
//!   shut-down (on the skeleton of [`crate::daemon`]).
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
pub mod shortcut;
pub mod worker;

use std::path::PathBuf;

pub use config::{ConfigError, FilterConfig, GateConfig, Listener, Refill, ShortcutMode};
pub use counters::GateCounters;
pub use cpu::{allowed_cpus, fanout_cpus, pin_current_thread};
pub use daemon::{run, RunOptions, RunSummary};
pub use decide::{action_for, decide_batch, GateAction};
pub use packet::{classify, PacketClass, PassReason};
pub use rules::{clean, clean_with, describe, CleanReport, GateRules, RulesBackend, RulesStatus};
pub use vantage_core::admission::syn::record::GateCounts;
pub use worker::{queue_config, Gate, QueueWorker, WorkerReport};

use vantage_core::admission::syn::FilterConfigError;
use vantage_sys::nfqueue::NfqError;

/// The exit status of `vantage gate run` when its rules vanished while it
/// ran (any other error: 1).
pub const EXIT_RULES_VANISHED: i32 = 3;

/// Why the gate could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The kernel refused for want of a capability.
    #[error("{operation}: permission denied: the gate needs CAP_NET_ADMIN (run it as root, or grant the capability, e.g. systemd's AmbientCapabilities=CAP_NET_ADMIN)")]
    MissingCapability { operation: String },
    /// The queue is bound already (the kernel says EPERM for it too).
    #[error("queue {queue} is bound by another process (another gate, or another NFQUEUE program); choose another `queue`")]
    QueueBusy { queue: u16 },
    #[error("filter: {0}")]
    Filter(FilterConfigError),
    #[error("queue {queue}: {source}")]
    Queue {
        queue: u16,
        #[source]
        source: NfqError,
    },
    #[error("rules: {0}")]
    Rules(String),
    #[error("shortcut: {0} (the kernel-side shortcut needs CAP_BPF, and CAP_SYS_ADMIN when no bpffs is mounted at /sys/fs/bpf; `shortcut = \"auto\"` in [gate] runs without it when it cannot have it)")]
    Shortcut(#[from] vantage_sys::bpf::BpfError),
    /// The gate's rules were removed under it (`vantage gate clean
    /// --force`, a firewall reload): it decides nothing any more, so it
    /// stops ([`EXIT_RULES_VANISHED`]).
    #[error("rules vanished: {what}; the gate decided no SYN any more and stopped")]
    RulesVanished { what: String },
    /// Another gate's rules are in this namespace: SYNs to the same
    /// listeners would pass both, one behind the other.
    #[error("other gates' rules are in this network namespace ({}): a second gate for the same listeners stacks in front of or behind them; stop that gate (or remove a killed one's rules with `vantage gate clean`), or allow it with --allow-stacking", others.join(", "))]
    OtherGates { others: Vec<String> },
    #[error(transparent)]
    Metrics(#[from] crate::metrics::EndpointError),
    #[error("log {}: {source}", path.display())]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    ReadyFile(#[from] crate::daemon::ReadyFileError),
    #[error("{path}: {problem}")]
    Proc { path: String, problem: String },
    #[error(transparent)]
    Signal(#[from] crate::daemon::SignalError),
    #[error("cannot start a thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("the worker of queue {queue} panicked")]
    WorkerPanicked { queue: u16 },
}
