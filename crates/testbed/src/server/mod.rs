//! Servers (being written).
