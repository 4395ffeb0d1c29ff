//! What a web-server run records, per interval: the server-side counters
//! Certes reads (Section 3.1, Eq. 2–3; Section 4), and the truth the
//! simulator alone knows — every transaction's client-perceived time.
//!
//! Binning (the model's, Eq. 4): a completed connection belongs to the
//! interval of its END at the server; a client that gave up to the interval
//! in which it gave up. The truth of a completed connection is the time from
//! its client's first SYN to the arrival at the client of the response's
//! last byte (Eq. 1's CLIENT_RT, measured rather than inferred); of a
//! give-up, from the first SYN to the moment the client gave up.

use vantage_core::certes::learn::SynLearner;
use vantage_core::certes::IntervalCounters;
use vantage_core::Nanos;

/// The true client-perceived times of one interval's transactions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalTruth {
    /// Connections whose END fell in the interval.
    pub completed: u64,
    /// Clients who gave up in the interval.
    pub gave_up: u64,
    /// Σ client-perceived time over both.
    pub total: Nanos,
    /// Every transaction's time (for percentiles), in the order they ended.
    pub samples: Vec<Nanos>,
}

impl IntervalTruth {
    pub fn transactions(&self) -> u64 {
        self.completed + self.gave_up
    }

    pub fn mean(&self) -> Option<Nanos> {
        match self.transactions() {
            0 => None,
            n => Some(Nanos(self.total.0 / n)),
        }
    }

    /// The q-quantile (nearest rank) of the interval's times.
    pub fn quantile(&self, q: f64) -> Option<Nanos> {
        quantile(&self.samples, q)
    }

    pub(crate) fn record(&mut self, time: Nanos, gave_up: bool) {
        if gave_up {
            self.gave_up += 1;
        } else {
            self.completed += 1;
        }
        self.total += time;
        self.samples.push(time);
    }
}

/// Nearest-rank q-quantile of unsorted values.
pub fn quantile(values: &[Nanos], q: f64) -> Option<Nanos> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Server-side measurements beyond Certes' counters, per interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntervalExtras {
    /// Σ application-level time of the connections completed (END) in the
    /// interval: per request, from the worker reading it to handing the
    /// response to the kernel (what Apache or nginx log), summed over the
    /// connection's requests.
    pub application_sum: Nanos,
    /// Handshake ACKs dropped because the accept queue was full.
    pub listen_overflows: u64,
    /// SYNs sent by clients in the interval (the server sees only some).
    pub syns_sent: u64,
    /// SYNs lost in the network in the interval.
    pub syns_lost: u64,
    /// Largest accept-queue length seen in the interval.
    pub accept_queue_max: u32,
    /// Retransmitted SYNs that reached the server (Σ_{j≥1} R_i^j, known
    /// here, inferred by the model) and how many of them it dropped
    /// (Σ_{j≥1} D_i^j); the rest of OFFERED and DROPPED are first SYNs.
    pub retries_offered: u64,
    pub retries_dropped: u64,
}

/// Totals of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Events processed.
    pub events: u64,
    /// Transactions started.
    pub transactions_started: u64,
    /// Σ and count of the completed connections' RTT samples.
    pub rtt_sum: Nanos,
    pub rtt_samples: u64,
    /// SYN-ACKs the server re-sent (timer or duplicate SYN).
    pub synack_retransmissions: u64,
    /// Request sockets dropped after their last SYN-ACK retransmission.
    pub requests_expired: u64,
    /// Connections a worker took before their first request had arrived
    /// (an ACK alone completed the handshake): the worker waited for the
    /// client's retransmission.
    pub first_requests_awaited: u64,
    /// Completed connections (END before the horizon) by the attempt of
    /// their accepted SYN (0 = first SYN): the true C^j summed over the run.
    pub completed_by_attempt: Vec<u64>,
    /// Σ CONN-FAIL (first SYN sent to accepted SYN sent) over them.
    pub conn_fail_sum: Nanos,
    /// SYNs that reached the server (a duplicate of an answered SYN aside),
    /// and how many it dropped, by attempt (0 = first SYN): the true R^j and
    /// D^j summed over the run.
    pub offered_by_attempt: Vec<u64>,
    pub dropped_by_attempt: Vec<u64>,
}

/// Everything a run produced, per interval of `interval` from time zero to
/// the horizon.
#[derive(Clone, Debug)]
pub struct WebRun {
    pub interval: Nanos,
    /// What the server counts: Certes' input.
    pub counters: Vec<IntervalCounters>,
    /// What the clients perceived.
    pub truth: Vec<IntervalTruth>,
    pub extras: Vec<IntervalExtras>,
    pub stats: RunStats,
    /// The clients' SYN schedules and give-up times learned from the SYNs
    /// the server saw, per attempt (what a capture at the server shows).
    pub syn_learner: SynLearner,
}

impl WebRun {
    pub(crate) fn new(interval: Nanos, horizon: Nanos) -> WebRun {
        let n = horizon.0.div_ceil(interval.0.max(1)) as usize;
        WebRun {
            interval,
            counters: vec![IntervalCounters::default(); n],
            truth: vec![IntervalTruth::default(); n],
            extras: vec![IntervalExtras::default(); n],
            stats: RunStats::default(),
            syn_learner: SynLearner::with_builtin_profiles()
                .expect("the built-in profiles form a valid table"),
        }
    }

    /// Number of intervals.
    pub fn len(&self) -> usize {
        self.counters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// The interval index of an instant, if before the horizon.
    pub fn index(&self, at: Nanos) -> Option<usize> {
        let i = (at.0 / self.interval.0.max(1)) as usize;
        (i < self.counters.len()).then_some(i)
    }

    /// Transaction-weighted mean true time over intervals `range`.
    pub fn truth_mean(&self, range: std::ops::Range<usize>) -> Option<Nanos> {
        let (mut total, mut n) = (0u128, 0u64);
        for t in &self.truth[range] {
            total += u128::from(t.total.0);
            n += t.transactions();
        }
        (n > 0).then(|| Nanos((total / u128::from(n)) as u64))
    }
}
