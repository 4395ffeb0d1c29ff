//! The proxy thesis's world (Okamoto 2003, Section 4): TCP flows through a
//! proxy whose socket buffers and idle connections are managed by
//! [`vantage_core::resources`].
//!
//! * [`flow`] — a round-based TCP Reno flow whose window both socket
//!   buffers cap, checked against the Padhye et al. formula;
//! * [`single_path`] — one transfer on one path under E-ATBT or the
//!   receive-buffer tuner (Section 4.1, Figures 6 and 7);
//! * [`world`] — clients, a caching proxy and servers on heterogeneous
//!   links (Section 4.2, Figures 8 to 11).

pub mod flow;
pub mod single_path;
pub mod world;

pub use flow::{FlowPath, RenoFlow, Round};
