//! Vantage core: the sans-IO mechanisms of the papers Vantage implements.
//!
//! Every type here owns no socket, clock, thread or file. It is handed the
//! current time ([`Nanos`]) and what was observed, and returns a decision.
//! The simulator drives these types in virtual time and the live drivers in
//! real time; neither copies an algorithm.
//!
//! * [`tcp`] — client SYN retransmission behaviour by operating system, as
//!   data (Abacus paper, Table 1 and Eq. 1; today's kernels).
//! * [`admission::syn`] — SYN admission filters: token bucket (drop or
//!   reject), Abacus Filter, Predictive Greedy (Abacus paper, Sections 3.2,
//!   4.3 and 5).
//! * [`traffic`] — self-similar arrival series (MWM) and Hurst estimators,
//!   shared by the simulator and the testbed load generator (Abacus paper,
//!   Section 6).
//! * [`lines`] — lines out of a growing byte stream, a partial line held
//!   up to a cap (the JSON Lines files one daemon follows of another).
//! * [`config`] — validation of every TOML format, with errors that name
//!   the file, the line and the key path.

pub mod admission;
pub mod certes;
pub mod config;
pub mod lines;
mod out_of_range;
pub mod resources;
pub mod tcp;
pub mod time;
pub mod traffic;

pub use out_of_range::OutOfRange;
pub use time::Nanos;
