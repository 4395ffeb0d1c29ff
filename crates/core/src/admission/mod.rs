//! Admission control, as sans-IO mechanisms.
//!
//! * [`syn`] — per-SYN decisions (accept, drop, reject) from the Abacus
//!   paper (`abacus-filters-syn-control.txt`).

pub mod syn;
