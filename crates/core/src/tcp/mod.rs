//! Client TCP behaviour that server-side mechanisms must know, as data.
//!
//! * [`syn_schedule`] — when a client re-sends a SYN that got no answer, and
//!   when it gives up (Abacus paper, Section 2, Table 1; Section 3.1, Eq. 1),
//!   for the paper-era operating systems and for today's.
//! * [`throughput`] — steady-state Reno throughput (Padhye et al.), the
//!   expected throughput of E-ATBT (proxy thesis, Section 3.1.1).

pub mod syn_schedule;
pub mod throughput;

pub use syn_schedule::{ClientMix, ProfileError, SynProfile};
