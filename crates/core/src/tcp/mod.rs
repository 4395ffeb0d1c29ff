//! Client TCP behaviour that server-side mechanisms must know, as data.
//!
//! * [`syn_schedule`] — when a client re-sends a SYN that got no answer, and
//!   when it gives up (Abacus paper, Section 2, Table 1; Section 3.1, Eq. 1),
//!   for the paper-era operating systems and for today's.

pub mod syn_schedule;

pub use syn_schedule::{ClientMix, ProfileError, SynProfile};
