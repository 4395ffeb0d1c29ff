//! Live Linux drivers: the sans-IO mechanisms of `vantage-core` run in real
//! time against real traffic.
//!
//! * [`gate`] — the NFQUEUE SYN gate (`vantage gate`): the Abacus paper's
//!   token bucket, Abacus Filter and Predictive Greedy in front of a real
//!   listener (`docs/gate.md`).
//! * [`synflood`] — crafted SYNs from a raw socket, the load the gate's
//!   tests and benchmarks throw at it.
//!
//! Drivers only do I/O: every decision is made by a type of
//! `vantage_core`, fed the time and what was observed.

pub mod gate;
pub mod synflood;
