//! Load generation with client-side ground truth.
//!
//! The papers' numbers are client-perceived: Certes validated its
//! server-side estimate against response times measured at the clients,
//! the Abacus paper reports the delay clients see including SYN backoffs,
//! and the SBAC and proxy papers drive their servers with session workloads
//! (the proxy thesis with httperf). This module provides both kinds of load:
//!
//! * [`arrivals`] — open-loop schedules (constant, Poisson, on-off, MWM
//!   self-similar), seeded and bounded;
//! * [`client`] — Vantage's own generator: one task per arrival, each
//!   connection's timestamps (`CLOCK_REALTIME`, to line up with packet
//!   captures), outcome, SYN retransmissions from `TCP_INFO`, and a
//!   wall-clock frustration timeout;
//! * [`record`] — the per-connection records, their CSV form and summary;
//! * [`httperf`] — a driver for httperf's session workloads (`--wsess`),
//!   its command line and its summary output.

pub mod arrivals;
pub mod client;
pub mod httperf;
pub mod record;

pub use arrivals::{ArrivalConfig, ArrivalError, ArrivalPattern};
pub use client::{run, LoadConfig, LoadError};
pub use record::{summarize, write_csv, ConnectionRecord, LoadSummary, Outcome};
