//! Servers (being written).
pub mod nginx;
