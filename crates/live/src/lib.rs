//! Live Linux drivers: the sans-IO mechanisms of `vantage-core` run in real
//! time against real traffic.
//!
//! * [`gate`] — the NFQUEUE SYN gate (`vantage gate`): the Abacus paper's
//!   token bucket, Abacus Filter and Predictive Greedy in front of a real
//!   listener (`docs/gate.md`).
//! * [`proxy`] — the HTTP reverse proxy with session-based admission
//!   control (`vantage proxy`): SBAC's controllers and signed session
//!   cookies in front of real web servers (`docs/proxy.md`).
//! * [`watch`] — the Certes watch daemon (`vantage certes watch`): the
//!   client-perceived response time of any listener, from an in-process
//!   capture, as Prometheus metrics (`docs/certes-watch.md`).
//! * [`daemon`] — what every daemon shares: signals as flags, the ready
//!   file, sd_notify, the descriptor budget, append-only logs;
//! * [`metrics`] — the hardened `/metrics` endpoint, the exposition
//!   formats, `process_*` and build info.
//! * [`synflood`] — crafted SYNs from a raw socket, the load the gate's
//!   tests and benchmarks throw at it.
//!
//! Drivers only do I/O: every decision is made by a type of
//! `vantage_core`, fed the time and what was observed.

pub mod daemon;
pub mod gate;
pub mod metrics;
pub mod proxy;
pub mod synflood;
pub mod watch;
