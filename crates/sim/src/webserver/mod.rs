//! A web server, its clients and the network between them, simulated so
//! that every connection's true client-perceived time is known: the ground
//! truth against which Certes (`vantage_core::certes`) is validated.
//!
//! Certes paper (Olshefski, Nieh, Agrawal, ACM TOCS 2004), Section 5: a
//! Linux/Apache server with 255 workers, WebStone clients with a frustration
//! timeout and an on/sleep mode, a DummyNet WAN with 0.3–150 ms RTT and 0 %
//! or 3 % loss, HTTP/1.0 over one connection per request and HTTP/1.1 over
//! persistent connections (Table II); Section 5.3: the accept-queue limit
//! switched between 2^5 and 2^11 (Figures 20–21).
//!
//! * [`clients`] — closed-loop clients: SYN retries per OS profile (shared
//!   with the estimator through `vantage_core::tcp`), frustration timeouts
//!   (Section 3.2.2, Table I), on/off mode.
//! * [`network`] — per-client RTT, per-packet jitter and loss (Section
//!   3.2.1, Figure 4).
//! * [`server`] — accept queue with a (switchable) limit, workers, pages,
//!   processor-sharing CPU (Section 4, Figure 13).
//! * [`transfer`] — the response in TCP slow-start rounds with timeouts
//!   (Section 4, Figure 14); where END falls.
//! * [`record`] — per-interval server counters (Eq. 2–3) and the truth,
//!   binned as Eq. 4 bins them.
//! * [`simulate()`] — the event loop.
//!
//! What the server counts is exactly what a Linux kernel instrumented as in
//! Section 4 would count; the truth is what WebStone would have measured at
//! the clients. Departures from the paper's testbed are listed in each
//! module (no bandwidth bottleneck, no fast retransmit, processor sharing
//! for Apache's time slicing, today's 1 s SYN-ACK timer) and in
//! `docs/certes-simulation.md`.

pub mod clients;
pub mod network;
pub mod record;
pub mod server;
mod simulate;
pub mod transfer;

pub use clients::{ClientsConfig, Draw, OnOff};
pub use network::PathConfig;
pub use record::{IntervalExtras, IntervalTruth, RunStats, WebRun};
pub use server::{AcceptQueueLimit, EndOfConnection, Page, ServerConfig, ServiceTime};
pub use simulate::simulate;

use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;

/// Everything one run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct WebServerConfig {
    /// Virtual time simulated; clients start no transaction after it and
    /// nothing after it is counted.
    pub horizon: Nanos,
    /// Length of the counting intervals (the paper: 250 ms).
    pub interval: Nanos,
    /// The clients' SYN retransmission profiles and their weights.
    pub population: ClientMix,
    pub clients: ClientsConfig,
    pub server: ServerConfig,
    pub path: PathConfig,
}

/// A configuration the simulator cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("web server simulation: {part}: {problem}")]
pub struct ConfigError {
    /// Which part is wrong (`clients`, `server`, `path`, …).
    pub part: &'static str,
    pub problem: String,
}

/// Most intervals one run may record.
pub const MAX_INTERVALS: u64 = 10_000_000;

impl WebServerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |part, problem| Err(ConfigError { part, problem });
        if self.interval == Nanos::ZERO {
            return fail("interval", "must be positive".into());
        }
        if self.horizon == Nanos::ZERO {
            return fail("horizon", "must be positive".into());
        }
        let intervals = self.horizon.0.div_ceil(self.interval.0);
        if intervals > MAX_INTERVALS {
            return fail(
                "interval",
                format!("gives {intervals} intervals; at most {MAX_INTERVALS}"),
            );
        }
        if self.population.entries().len() > usize::from(u16::MAX) {
            return fail("population", "too many profiles".into());
        }
        self.clients
            .validate()
            .or_else(|problem| fail("clients", problem))?;
        self.server
            .validate()
            .or_else(|problem| fail("server", problem))?;
        self.path
            .validate()
            .or_else(|problem| fail("path", problem))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A light load: 20 clients, 1 ms of CPU, 10 KB pages, 100 ms RTT.
    pub(crate) fn light(profile: &str) -> WebServerConfig {
        WebServerConfig {
            horizon: Nanos::from_secs(60),
            interval: Nanos::from_millis(250),
            population: ClientMix::builtin(profile).unwrap(),
            clients: ClientsConfig {
                count: 20,
                ramp: Nanos::from_secs(1),
                think_time: Nanos::ZERO,
                requests_per_connection: 1,
                frustration_timeouts: vec![(Nanos::from_secs(21), 1.0)],
                draw: Draw::PerTransaction,
                on_off: None,
            },
            server: ServerConfig {
                workers: 255,
                cores: 2,
                accept_queue: AcceptQueueLimit::Fixed(128),
                pages: vec![Page {
                    weight: 1.0,
                    size_bytes: 10_000,
                    service: ServiceTime::Constant(Nanos::from_millis(1)),
                }],
                mss: 1460,
                initial_window: 10,
                synack_timeout: Nanos::from_secs(1),
                synack_retries: 5,
                syn_backlog: 1024,
                end_of_connection: EndOfConnection::FirstFin,
                lingering_close: true,
                worker_overhead: Nanos::from_micros(100),
            },
            path: PathConfig::fixed(Nanos::from_millis(100)),
        }
    }

    #[test]
    fn same_seed_same_run() {
        let mut config = light("mix-2026");
        config.path.loss = 0.03;
        config.path.jitter = Nanos::from_millis(5);
        config.server.accept_queue = AcceptQueueLimit::Fixed(1);
        let a = simulate(&config, 11).unwrap();
        let b = simulate(&config, 11).unwrap();
        assert_eq!(a.counters, b.counters);
        assert_eq!(a.truth, b.truth);
        assert_eq!(a.stats, b.stats);
        let c = simulate(&config, 12).unwrap();
        assert_ne!(a.truth, c.truth);
    }

    /// Without loss, drops or queueing, each transaction takes exactly its
    /// handshake RTT, the CPU time and one RTT for a one-round response: Eq. 1
    /// with CONN-FAIL = 0 holds per connection.
    #[test]
    fn unloaded_transaction_is_rtt_plus_service_plus_rtt() {
        let mut config = light("windows-9x-nt");
        // Enough processors that no two requests slow each other down.
        config.server.cores = 64;
        let run = simulate(&config, 1).unwrap();
        let total: u64 = run.truth.iter().map(|t| t.completed).sum();
        assert!(total > 1000, "{total}");
        for (t, c) in run.truth.iter().zip(&run.counters) {
            assert_eq!(t.gave_up, 0);
            assert_eq!(c.dropped, 0);
            for &v in &t.samples {
                assert_eq!(v, Nanos::from_millis(201), "1 ms CPU + 2 RTT");
            }
            // SYN-to-END = RTT (handshake) + 1 ms; CLIENT_RT = SYN-to-END + RTT.
            if c.completed > 0 {
                assert_eq!(c.syn_to_end_mean(), Some(Nanos::from_millis(101)));
                assert_eq!(c.rtt_mean(), Some(Nanos::from_millis(100)));
                assert_eq!(t.completed, c.completed);
            }
        }
    }

    /// A handshake completed by an ACK alone (answering a re-sent SYN-ACK
    /// after the first ACK and its request overflowed the accept queue)
    /// gets a worker that must wait for the request's retransmission: it
    /// is not served before the request reaches the server.
    #[test]
    fn request_lost_to_an_overflow_is_awaited() {
        let mut config = light("linux-6.5");
        config.clients.count = 200;
        config.server.accept_queue = AcceptQueueLimit::Fixed(1);
        config.server.workers = 4;
        config.server.pages[0].service = ServiceTime::Constant(Nanos::from_millis(5));
        // The server re-sends its SYN-ACK long before the client's RTO.
        config.server.synack_timeout = Nanos::from_millis(20);
        let run = simulate(&config, 3).unwrap();
        let overflows: u64 = run.extras.iter().map(|e| e.listen_overflows).sum();
        assert!(overflows > 0);
        assert!(run.stats.first_requests_awaited > 0, "{:?}", run.stats);
        // No transaction is shorter than its two round trips plus service.
        for t in &run.truth {
            for &v in &t.samples {
                assert!(v >= Nanos::from_millis(205), "{v:?}");
            }
        }
    }

    #[test]
    fn bad_configuration_names_the_part() {
        let mut config = light("linux-6.5");
        config.clients.requests_per_connection = 0;
        let err = simulate(&config, 1).unwrap_err();
        assert_eq!(err.part, "clients");
        let mut config = light("linux-6.5");
        config.path.loss = 0.9;
        assert_eq!(simulate(&config, 1).unwrap_err().part, "path");
    }
}
