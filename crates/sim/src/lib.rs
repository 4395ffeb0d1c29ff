//! Vantage's discrete-event simulator.

pub mod workload;
