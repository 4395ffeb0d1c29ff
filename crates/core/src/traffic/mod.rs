//! Traffic models shared by the simulator and the testbed's load generator:
//! the self-similar arrival series of the Abacus paper's Section 6 (MWM),
//! the arrival times drawn from it, and the Hurst estimators that check it;
//! and the SURGE web workload of the proxy thesis's Section 4.2 ([`surge`]).

pub mod arrivals;
pub mod hurst;
pub mod mwm;
pub mod surge;
