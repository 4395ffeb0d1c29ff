//! Arrival workloads of the Abacus paper's experiments.
//!
//! * [`mwm`] — self-similar arrivals from the Multifractal Wavelet Model
//!   (Section 6).
//! * [`hurst`] — Hurst estimators that check them.

pub mod hurst;
pub mod mwm;
