//! Servers the testbed runs in its server namespace.
//!
//! * [`test_server`] — Vantage's own HTTP server whose behaviour is exactly
//!   known: listen backlog, paced `accept`, a fixed number of workers,
//!   service-time distribution, first-byte delay and response size are all
//!   configuration, so an experiment can make the accept queue overflow (and
//!   the kernel drop SYNs) on purpose and know what the server did.

pub mod haproxy;
pub mod nginx;
pub mod squid;
pub mod test_server;
