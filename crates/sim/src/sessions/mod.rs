//! The session workload and web server of the SBAC paper
//! (`session-admission-control.txt`), Sections 4–6, driving the sans-IO
//! controllers of `vantage_core::admission::session` in virtual time.
//!
//! The model (Section 4, Fig. 1; parameters of Section 5):
//! * an open arrival process of sessions (Poisson, rate Load · S_s with
//!   S_s = capacity / mean session length, Eq. 1), piecewise constant over
//!   the segments of a [`LoadPattern`] (steady, the "usual day" and "busy
//!   day" of Figure 10, or a step);
//! * session lengths exponentially distributed with mean m — in whole
//!   requests, i.e. geometric on {1, 2, …} with mean m ([`filemix`]);
//! * each request fetches a file of the SpecWeb96 mix (four classes,
//!   35/50/14/1 %, nine sizes per class); its service time is proportional
//!   to its size, scaled so the server completes `capacity` (1,000) requests
//!   per second of the mix;
//! * one server (a CPU, first come first served) with a listen queue of
//!   1,024 entries: a request arriving at a full queue is refused and its
//!   session aborted (Section 4's Remark: no retry after a refusal);
//! * closed-loop clients: the next request of a session leaves an
//!   exponential think time (mean 5 s) after the reply; a client waits 1 s
//!   for a reply, then re-sends once (one retry), then aborts the session;
//! * admission (Section 7): only the first request of a session is subject
//!   to the controller; a rejected session costs the server one average
//!   request (the explicit rejection message) and its client leaves;
//! * CPU utilization and the other counters of
//!   [`vantage_core::admission::session::IntervalMeasurement`] are measured
//!   per ac-interval and handed to the controller at its end.
//!
//! Departures, with reasons:
//! * A request whose client has given up stays in the listen queue and is
//!   still processed: the server learns that the client closed only when it
//!   writes the reply (Section 11's "aborted requests … based on the client
//!   side closed connections"). Its work is wasted, and it is counted as an
//!   aborted request.
//! * The paper limits the population to N = 10,000 clients; we do not
//!   bound it (at the loads studied, fewer than 10,000 sessions are ever in
//!   progress at once, so the bound never binds).
//! * Sessions are known to the simulated server by id: the signed tokens of
//!   `vantage_core::admission::session::token` matter against forging
//!   clients, which the paper's model does not have.
//! * Where the text leaves room, [`ModelReading`] holds alternative
//!   readings of the server (which requests the queue limit refuses, the
//!   order of service, retries, abandoned requests, processor sharing, the
//!   client limit); the default is the model above. They were probed
//!   against Fig. 3b's fragility; `docs/differences/sbac.md` has the
//!   record.
//! * Metrics are per *cohort*: the sessions that arrive inside the
//!   measurement window, followed to their end (arrivals continue past the
//!   window for a tail, then stop and the server drains). Per-second
//!   figures divide by the window's length. In steady state this equals the
//!   time average and avoids counting sessions cut by the horizon. Beside
//!   it, [`SegmentTrace`] counts every session's arrivals, requests and the
//!   server's busy time per segment of the load pattern (what the server
//!   was offered over time).

pub mod filemix;
mod model;

pub use model::{run, LengthBins, RunOutcome, SegmentTrace};

use serde::Serialize;
use vantage_core::admission::session::{EwmaConfig, HybridConfig, PredictiveConfig};
use vantage_core::Nanos;

/// The admission strategy of a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Strategy {
    /// No admission control (Section 6).
    None,
    /// The EWMA family of Section 7 (stable k = 0.1, responsive k = 1).
    Ewma(EwmaConfig),
    /// Section 11.
    Hybrid(HybridConfig),
    /// Section 12.
    Predictive(PredictiveConfig),
}

impl Strategy {
    /// A short name for tables: `none`, `stable`, `responsive`, `k=0.3`,
    /// `hybrid`, `predictive`.
    pub fn name(&self) -> String {
        match self {
            Strategy::None => "none".into(),
            Strategy::Ewma(c) if c.weight == 0.1 => "stable".into(),
            Strategy::Ewma(c) if c.weight == 1.0 => "responsive".into(),
            Strategy::Ewma(c) => format!("k={}", c.weight),
            Strategy::Hybrid(_) => "hybrid".into(),
            Strategy::Predictive(_) => "predictive".into(),
        }
    }

    /// The ac-threshold U_ac; `None` without admission control.
    pub fn threshold(&self) -> Option<f64> {
        match self {
            Strategy::None => None,
            Strategy::Ewma(c) => Some(c.threshold),
            Strategy::Hybrid(c) => Some(c.threshold),
            Strategy::Predictive(c) => Some(c.threshold),
        }
    }

    /// The ac-weight k, for the EWMA family.
    pub fn weight(&self) -> Option<f64> {
        match self {
            Strategy::Ewma(c) => Some(c.weight),
            _ => None,
        }
    }
}

/// One stretch of constant offered load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    pub duration: Nanos,
    /// Offered load as a multiple of the capacity in sessions (3 = 300 %).
    pub load: f64,
}

/// The offered load over time: segments back to back from time zero.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadPattern {
    pub segments: Vec<Segment>,
}

impl LoadPattern {
    pub fn end(&self) -> Nanos {
        self.segments
            .iter()
            .fold(Nanos::ZERO, |t, s| t + s.duration)
    }

    /// The index of the segment holding `t`; `None` past the end.
    pub fn index_at(&self, t: Nanos) -> Option<usize> {
        let mut start = Nanos::ZERO;
        for (index, s) in self.segments.iter().enumerate() {
            start += s.duration;
            if t < start {
                return Some(index);
            }
        }
        None
    }

    /// The load at `t` and when its segment ends; `None` past the end.
    pub fn at(&self, t: Nanos) -> Option<(f64, Nanos)> {
        let mut start = Nanos::ZERO;
        for s in &self.segments {
            let end = start + s.duration;
            if t < end {
                return Some((s.load, end));
            }
            start = end;
        }
        None
    }
}

/// Everything one run needs.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Server capacity in requests per second of the SpecWeb96 mix (1,000).
    pub capacity_requests_per_s: f64,
    /// Listen queue entries (1,024).
    pub listen_queue: usize,
    /// Mean session length m, in requests.
    pub session_length_mean: f64,
    /// Mean think time between a reply and the next request (5 s).
    pub think_time_mean: Nanos,
    /// Client timeout before re-sending (1 s).
    pub timeout: Nanos,
    /// Re-sends after a timeout before the session is aborted (1).
    pub retries: u32,
    /// Cost of a rejection message, in average requests (1).
    pub rejection_cost: f64,
    pub strategy: Strategy,
    /// The ac-interval length.
    pub interval: Nanos,
    pub pattern: LoadPattern,
    /// Sessions arriving in [from, to) are the measured cohort.
    pub measure_from: Nanos,
    pub measure_to: Nanos,
    /// For Section "beyond the paper": the instant of a load step, from
    /// which the time to the first rejection is measured.
    pub step_at: Option<Nanos>,
    /// Window of steady overload over which the coefficient of variation of
    /// admitted sessions per second is measured.
    pub overload_window: Option<(Nanos, Nanos)>,
    pub seed: u64,
    /// Readings of the paper's server that it leaves open.
    pub reading: ModelReading,
}

/// Readings of the server model where the paper's text leaves room
/// (Sections 4–5). The default is the model above; each field is one
/// alternative reading, kept so that the fragility of Fig. 3b can be
/// probed (`docs/differences/sbac.md` records what each one gives).
#[derive(Clone, Debug, PartialEq, Default, Serialize)]
pub struct ModelReading {
    /// The listen-queue limit refuses only a session's first request; the
    /// later requests (and retries) of a session in progress always queue,
    /// as on a connection the server already accepted.
    pub later_requests_bypass_queue_limit: bool,
    /// The server takes a session's later requests before any first
    /// request.
    pub later_requests_first: bool,
    /// A retry joins the original instead of replacing it: the first reply
    /// of either satisfies the client.
    pub retry_joins_original: bool,
    /// The server drops, without serving it, a queued request whose client
    /// has given up.
    pub skip_closed_requests: bool,
    /// Server time charged for each refused connection, in average
    /// requests, taken before the queued work.
    pub refusal_cost: f64,
    /// A session's first request is not re-sent after a timeout.
    pub first_request_no_retry: bool,
    /// The server shares its CPU equally among every accepted request
    /// (processor sharing) instead of serving them one at a time in order.
    pub processor_sharing: bool,
    /// Sessions in progress at most (Section 4's N clients); a new session
    /// that finds no free client counts as refused. `None`: unbounded.
    pub client_limit: Option<u64>,
    /// The server learns that a session ended only once it has been idle
    /// this long after its last reply (footnote 3: the cookie's expiry T,
    /// as HP WebQoS and `vantage proxy` learn it), so predictive's C_e
    /// (Section 12) lags; the predictive controller is told the lag
    /// (`PredictiveConfig::end_seen_after`). `None`: at its last reply, as
    /// the simulator knows.
    pub session_end_seen_after: Option<Nanos>,
}
