//! Admission control, as sans-IO mechanisms.
//!
//! * [`syn`] — per-SYN decisions (accept, drop, reject) from the Abacus
//!   paper (`abacus-filters-syn-control.txt`).
//! * [`session`] — per-session decisions (SBAC: stable, responsive, hybrid,
//!   predictive) and signed session tokens from the SBAC paper
//!   (`session-admission-control.txt`).

pub mod session;
pub mod syn;
