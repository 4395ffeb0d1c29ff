//! Vantage's discrete-event simulators: the mechanisms of `vantage-core`
//! driven in integer-nanosecond virtual time on one event engine, with a
//! seeded generator per run. Each simulator is named by the world it
//! simulates:
//!
//! * [`syn`] — clients retransmitting SYNs through a SYN filter (Abacus);
//! * [`webserver`] — a web server and its clients (Certes);
//! * [`sessions`] — session-based admission control (SBAC);
//! * [`proxy`] — TCP flows through a proxy (the proxy thesis).
//!
//! [`seed`] derives each run's seed from its scenario's.

pub mod engine;
pub mod proxy;
pub mod seed;
pub mod sessions;
pub mod syn;
pub mod webserver;
