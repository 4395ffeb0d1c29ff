//! The proxy thesis's world (Okamoto 2003, Section 4): TCP flows through a
//! proxy whose socket buffers and idle connections are managed by
//! [`vantage_core::resources`].
//!
//! * [`flow`] — a round-based TCP Reno flow whose window both socket
//!   buffers cap, checked against the Padhye et al. formula.

pub mod flow;

pub use flow::{FlowPath, RenoFlow, Round};
