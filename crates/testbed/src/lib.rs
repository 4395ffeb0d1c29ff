//! Vantage testbed: real clients, a real server and an emulated WAN on one
//! Linux machine, built from network namespaces.
//!
//! The papers validated their systems on testbeds — Certes with client
//! machines, a DummyNet WAN and Apache; the Abacus and proxy papers with real
//! Linux kernels and httperf. This crate rebuilds that on one machine:
//!
//! * [`netns`] — create, enter and delete named network namespaces;
//! * [`topology`] — one server, one router and N client namespaces joined by
//!   veth links, torn down on every exit path;
//! * [`wan`] — the WAN emulator: NFQUEUE verdicts on the router's FORWARD
//!   hook give per-link delay, jitter, loss and rate limits;
//! * [`profiles`] — client SYN retransmission schedules applied per client
//!   namespace through `net.ipv4.tcp_syn_retries` and
//!   `net.ipv4.tcp_syn_linear_timeouts`;
//! * [`server`] — nginx from the distribution, and a test server whose
//!   behaviour is exactly known;
//! * [`load`] — an open-loop load generator that records client-side ground
//!   truth for every connection;
//! * [`recorders`] — server-side kernel counters and packet captures;
//! * [`syn_admission`] — SYN admission in front of the server (the spec's
//!   `[gate]`): none, iptables `limit` with DROP or REJECT, or `vantage
//!   gate run`;
//! * [`spec`] — the TOML spec of a run (`docs/testbed.md`);
//! * [`run`] — `vantage testbed run`: all of the above from one spec;
//! * [`watchdog`] — cleanup after a run killed outright.

pub mod cgroup;
pub mod load;
pub mod netns;
pub mod profiles;
pub mod recorders;
pub mod run;
pub mod server;
pub mod spec;
pub mod syn_admission;
pub mod topology;
pub mod wan;
pub mod watchdog;
