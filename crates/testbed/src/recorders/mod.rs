//! Server-side recorders: the kernel's TCP counters of the server namespace
//! and packet captures of the server's (and, when asked, the clients')
//! interfaces.

pub mod capture;
pub mod counters;
