//! Vantage's discrete-event simulator: the mechanisms of `vantage-core`
//! driven in integer-nanosecond virtual time, with a seeded generator per
//! run, against the workloads and client populations of the papers.

pub mod engine;
pub mod filters;
pub mod metrics;
pub mod network;
pub mod run;
pub mod scenario;
pub mod sessions;
pub mod studies;
pub mod study;
pub mod webserver;
pub mod workload;
