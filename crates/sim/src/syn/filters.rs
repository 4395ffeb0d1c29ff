//! The SYN filters the simulator runs: built by `vantage-core` from the
//! same parameters the live gate takes.

pub use vantage_core::admission::syn::{AbacusWindow, FilterKind, FilterParams};
