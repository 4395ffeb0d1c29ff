//! Traffic models shared by the simulator and the testbed's load generator:
//! the self-similar arrival series of the Abacus paper's Section 6 (MWM) and
//! the Hurst estimators that check it.

pub mod hurst;
pub mod mwm;
