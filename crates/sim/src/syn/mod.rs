//! The Abacus paper's world (Section 6): clients whose connection requests
//! arrive by a workload, retransmit SYNs by their client profile, and meet
//! a SYN filter at the server's entry point. A scenario file describes the
//! experiment; [`execute`] runs every point of it.

pub mod execute;
pub mod filters;
pub mod metrics;
pub mod network;
pub mod run;
pub mod scenario;
pub mod workload;
pub use execute::{execute, steps, Effort, Repetition, Row, ScenarioResult, Timeline};
