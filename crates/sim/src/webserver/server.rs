//! The server: a listen socket's accept queue with a limit, a pool of
//! Apache-like workers, the pages they serve, and a processor-sharing CPU
//! (Certes paper, Section 4, Figures 13–14; Section 5.1: Apache 1.3 with 255
//! daemons on a dual-CPU machine, static pages of 1–15 KB and CGI scripts;
//! Section 5.3, Figure 20: the accept-queue limit switched every 10 s).
//!
//! * Accept queue: Linux's rule (`sk_acceptq_is_full`: the queue is full when
//!   it holds more than its limit). A SYN that arrives while the queue is
//!   full is dropped and counted in DROPPED; otherwise a request socket is
//!   made and a SYN-ACK sent. The handshake's ACK that arrives while the
//!   queue is full is dropped too ("listen overflow", Linux's default
//!   `tcp_abort_on_overflow = 0`); the connection then completes when a
//!   later retransmission of the client's request arrives with room in the
//!   queue. Handshakes in progress do not hold an accept-queue slot; they
//!   are request sockets in the SYN queue, whose own limit `syn_backlog`
//!   (`tcp_max_syn_backlog`: 1024 on the paper's Linux 2.4 with more than
//!   128 MB of memory) drops SYNs when reached (SYN cookies off, as in the
//!   paper's kernel). Without that limit, SYNs admitted whenever the accept
//!   queue is exactly at its limit pile up as handshakes whose ACKs overflow
//!   and whose clients back off exponentially — what Linux 2.4's source
//!   calls "clogging syn queue with openreqs with exponentially increasing
//!   timeout".
//! * Workers: a free worker takes the oldest connection of the accept queue
//!   and serves all its requests: one for HTTP/1.0, N for persistent
//!   HTTP/1.1 (the worker waits for each next request). With Apache 1.3's
//!   lingering close (`lingering_close`, the paper's server) a worker is free
//!   when the client's FIN arrives, one response transfer and a one-way
//!   delay after its last write; without it (an event-driven server) an
//!   HTTP/1.0 worker is free as soon as it has handed the response to the
//!   kernel and closed the socket. A persistent connection's worker always
//!   waits for the FIN.
//! * CPU: the requests being served share `cores` processors equally
//!   (processor sharing, as time slicing approximates), so a request's
//!   application-level time (from reading the request to handing the
//!   response to the kernel, what Apache logs) grows with the number of busy
//!   workers.
//! * A worker done with a connection must run again before it can take the
//!   next one: closing, logging and `accept()` are a CPU job of
//!   `worker_overhead` on the same shared processors, so under load a
//!   freed worker reaches the accept queue only after its turn on the CPU.
//!   Without this the worker freed by a client's FIN would empty a queue
//!   slot at the very instant that client's next SYN (sent with its FIN)
//!   arrives, and returning clients would jump the queue ahead of retrying
//!   ones, which no real server's scheduler allows.

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use vantage_core::Nanos;

/// The accept-queue limit (the `backlog` of `listen()`), fixed or switched
/// on a timetable.
#[derive(Clone, Debug, PartialEq)]
pub enum AcceptQueueLimit {
    Fixed(u32),
    /// Figure 20: `limits[0]` for the first `period`, then `limits[1]`, … and
    /// around again.
    Alternating {
        limits: Vec<u32>,
        period: Nanos,
    },
}

impl AcceptQueueLimit {
    pub fn at(&self, now: Nanos) -> u32 {
        match self {
            AcceptQueueLimit::Fixed(limit) => *limit,
            AcceptQueueLimit::Alternating { limits, period } => {
                let slot = now.0 / period.0.max(1);
                limits[(slot % limits.len() as u64) as usize]
            }
        }
    }

    /// Whether a queue of `length` is full (Linux: length > limit).
    pub fn is_full(&self, length: usize, now: Nanos) -> bool {
        length as u64 > u64::from(self.at(now))
    }
}

/// CPU time one request needs.
#[derive(Clone, Debug, PartialEq)]
pub enum ServiceTime {
    Constant(Nanos),
    Exponential {
        mean: Nanos,
    },
    /// Log-normal with the given mean and coefficient of variation.
    LogNormal {
        mean: Nanos,
        cv: f64,
    },
}

impl ServiceTime {
    pub fn mean(&self) -> Nanos {
        match self {
            ServiceTime::Constant(t) => *t,
            ServiceTime::Exponential { mean } | ServiceTime::LogNormal { mean, .. } => *mean,
        }
    }

    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Nanos {
        let secs = match self {
            ServiceTime::Constant(t) => return *t,
            ServiceTime::Exponential { mean } => {
                let rate = 1.0 / mean.as_secs_f64().max(1e-12);
                Exp::new(rate).map_or(0.0, |d| d.sample(rng))
            }
            ServiceTime::LogNormal { mean, cv } => {
                let sigma2 = (1.0 + cv * cv).ln();
                let mu = mean.as_secs_f64().max(1e-12).ln() - sigma2 / 2.0;
                LogNormal::new(mu, sigma2.sqrt()).map_or(0.0, |d| d.sample(rng))
            }
        };
        Nanos::from_secs_f64(secs).max(Nanos(1))
    }
}

/// Which instant the server's counters take as a connection's END.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndOfConnection {
    /// Section 4: the first of the last data segment and the first FIN or
    /// RST. The server's FIN rides on the first transmission of the
    /// response's last segment, so a loss in the last round delays the
    /// client beyond END + RTT unseen.
    FirstFin,
    /// The last transmission of response data, retransmissions included: a
    /// kernel knows it once the client has acknowledged everything. Not the
    /// paper's; offered to measure what the paper's END leaves out.
    LastTransmission,
}

/// A kind of page: how often it is asked for, its size and its CPU cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    pub weight: f64,
    pub size_bytes: u32,
    pub service: ServiceTime,
}

/// The server's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// Apache's `MaxClients` (the paper: 255).
    pub workers: u32,
    /// Processors the workers share.
    pub cores: u32,
    pub accept_queue: AcceptQueueLimit,
    /// The pages clients ask for, chosen by weight for every request.
    pub pages: Vec<Page>,
    /// Maximum segment size, bytes.
    pub mss: u32,
    /// Initial congestion window, segments (RFC 6928: 10).
    pub initial_window: u32,
    /// First SYN-ACK retransmission timeout (Linux `TCP_TIMEOUT_INIT`: 1 s;
    /// 3 s in the paper's Linux 2.4), doubled on each retransmission.
    pub synack_timeout: Nanos,
    /// SYN-ACK retransmissions before a request socket is dropped
    /// (`tcp_synack_retries`: 5).
    pub synack_retries: u32,
    /// Most request sockets (handshakes under way) before SYNs are dropped
    /// (`tcp_max_syn_backlog`).
    pub syn_backlog: u32,
    /// What the counters take as END.
    pub end_of_connection: EndOfConnection,
    /// Apache 1.3's lingering close: the worker stays with the connection
    /// until the client's FIN arrives.
    pub lingering_close: bool,
    /// CPU a worker needs between two connections (close, log, accept).
    pub worker_overhead: Nanos,
}

impl ServerConfig {
    /// Mean CPU time of a request, weighted over the pages.
    pub fn mean_service(&self) -> f64 {
        let total: f64 = self.pages.iter().map(|p| p.weight).sum();
        self.pages
            .iter()
            .map(|p| p.weight / total * p.service.mean().as_secs_f64())
            .sum()
    }

    /// Checks the ranges; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.workers == 0 || self.cores == 0 {
            return Err("workers and cores must be at least 1".into());
        }
        if let AcceptQueueLimit::Alternating { limits, period } = &self.accept_queue {
            if limits.is_empty() || *period == Nanos::ZERO {
                return Err("accept queue schedule needs limits and a positive period".into());
            }
        }
        if self.pages.is_empty() {
            return Err("pages: at least one page is needed".into());
        }
        for (i, p) in self.pages.iter().enumerate() {
            if !(p.weight.is_finite() && p.weight > 0.0) {
                return Err(format!("pages[{i}].weight must be positive"));
            }
            if p.size_bytes == 0 {
                return Err(format!("pages[{i}].size_bytes must be positive"));
            }
            if let ServiceTime::LogNormal { cv, .. } = p.service {
                if !(cv.is_finite() && cv > 0.0) {
                    return Err(format!("pages[{i}].cv must be positive"));
                }
            }
        }
        if self.mss == 0 || self.initial_window == 0 {
            return Err("mss and initial_window must be positive".into());
        }
        Ok(())
    }

    /// A page for a uniform draw in [0, 1).
    pub fn choose_page(&self, uniform: f64) -> &Page {
        let total: f64 = self.pages.iter().map(|p| p.weight).sum();
        let mut acc = 0.0;
        for page in &self.pages {
            acc += page.weight / total;
            if uniform < acc {
                return page;
            }
        }
        &self.pages[self.pages.len() - 1]
    }

    /// Segments of a response of `bytes` (at least one: headers).
    pub fn segments(&self, bytes: u32) -> u32 {
        bytes.div_ceil(self.mss).max(1)
    }
}

/// Processor sharing among the requests in service, by virtual time: every
/// job receives `min(1, cores / n)` seconds of service per second, so a job
/// finishes when the virtual clock has advanced by its demand since it
/// started. Only the earliest finishing job matters for the next event.
#[derive(Debug)]
pub struct ProcessorSharing {
    cores: f64,
    /// Service each job has received since time zero, nanoseconds.
    virtual_time: f64,
    last: Nanos,
    /// (virtual finish time, arrival order, job).
    jobs: BinaryHeap<Reverse<(u64, u64, u32)>>,
    arrivals: u64,
}

impl ProcessorSharing {
    pub fn new(cores: u32) -> ProcessorSharing {
        ProcessorSharing {
            cores: f64::from(cores.max(1)),
            virtual_time: 0.0,
            last: Nanos::ZERO,
            jobs: BinaryHeap::new(),
            arrivals: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    fn rate(&self) -> f64 {
        match self.jobs.len() {
            0 => 0.0,
            n => (self.cores / n as f64).min(1.0),
        }
    }

    fn advance(&mut self, now: Nanos) {
        let elapsed = now.saturating_sub(self.last).0 as f64;
        self.virtual_time += elapsed * self.rate();
        self.last = self.last.max(now);
    }

    /// A job needing `demand` of CPU starts at `now`.
    pub fn add(&mut self, now: Nanos, demand: Nanos, job: u32) {
        self.advance(now);
        let finish = self.virtual_time.ceil() as u64 + demand.0;
        self.jobs.push(Reverse((finish, self.arrivals, job)));
        self.arrivals += 1;
    }

    /// When the earliest job will finish if nothing changes.
    pub fn next_completion(&self) -> Option<Nanos> {
        let Reverse((finish, _, _)) = self.jobs.peek()?;
        let remaining = (*finish as f64 - self.virtual_time).max(0.0);
        Some(self.last + Nanos((remaining / self.rate()).ceil() as u64))
    }

    /// Jobs finished by `now`, earliest first.
    pub fn finished(&mut self, now: Nanos, out: &mut Vec<u32>) {
        self.advance(now);
        while let Some(Reverse((finish, _, job))) = self.jobs.peek().copied() {
            if finish as f64 <= self.virtual_time + 1.0 {
                self.jobs.pop();
                out.push(job);
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn accept_queue_is_full_above_its_limit_and_switches() {
        let fixed = AcceptQueueLimit::Fixed(2);
        assert!(!fixed.is_full(2, Nanos::ZERO));
        assert!(fixed.is_full(3, Nanos::ZERO));
        let switching = AcceptQueueLimit::Alternating {
            limits: vec![32, 2048],
            period: Nanos::from_secs(10),
        };
        assert_eq!(switching.at(Nanos::from_secs(9)), 32);
        assert_eq!(switching.at(Nanos::from_secs(10)), 2048);
        assert_eq!(switching.at(Nanos::from_secs(25)), 32);
    }

    #[test]
    fn processor_sharing_slows_jobs_beyond_the_cores() {
        let mut cpu = ProcessorSharing::new(2);
        let mut done = Vec::new();
        // Four jobs of 10 ms on two cores: each runs at half speed, all end at 20 ms.
        for job in 0..4 {
            cpu.add(Nanos::ZERO, Nanos::from_millis(10), job);
        }
        assert_eq!(cpu.next_completion(), Some(Nanos::from_millis(20)));
        cpu.finished(Nanos::from_millis(20), &mut done);
        assert_eq!(done, vec![0, 1, 2, 3]);
        // One job alone runs at full speed on one core.
        cpu.add(Nanos::from_millis(30), Nanos::from_millis(5), 9);
        assert_eq!(cpu.next_completion(), Some(Nanos::from_millis(35)));
        // A second and a third arrive at 32 ms: the first has 3 ms left at rate 2/3.
        cpu.add(Nanos::from_millis(32), Nanos::from_millis(50), 10);
        cpu.add(Nanos::from_millis(32), Nanos::from_millis(50), 11);
        assert_eq!(cpu.next_completion(), Some(Nanos::from_micros(36_500)));
        done.clear();
        cpu.finished(Nanos::from_micros(36_500), &mut done);
        assert_eq!(done, vec![9]);
    }

    #[test]
    fn service_time_means() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for s in [
            ServiceTime::Exponential {
                mean: Nanos::from_millis(4),
            },
            ServiceTime::LogNormal {
                mean: Nanos::from_millis(4),
                cv: 2.0,
            },
        ] {
            let n = 200_000;
            let total: f64 = (0..n).map(|_| s.sample(&mut rng).as_secs_f64()).sum();
            let mean = total / f64::from(n);
            assert!((mean / 0.004 - 1.0).abs() < 0.03, "{s:?}: {mean}");
        }
    }
}
