//! Session-based admission control (SBAC), as sans-IO controllers.
//!
//! Cherkasova and Phaal, "Session-Based Admission Control: A Mechanism for
//! Peak Load Management of Commercial Web Sites"
//! (`session-admission-control.txt`). A session is a sequence of requests;
//! the controller decides only on the *first* request of a session, so that
//! an admitted session is never cut off midway. Requests of sessions in
//! progress are always served.
//!
//! * [`EwmaController`] — Section 7: the predicted utilization
//!   f_ac(1) = U_ac, f_ac(i+1) = (1 − k)·f_ac(i) + k·U_i^measured; new
//!   sessions are rejected during T_{i+1} when f_ac(i+1) > U_ac. The named
//!   policies *ac-stable* (k = 0.1, [`EwmaConfig::stable`]) and
//!   *ac-responsive* (k = 1, [`EwmaConfig::responsive`]).
//! * [`HybridController`] — Section 11: k jumps to 1 after any interval with
//!   an aborted request or a refused connection (Ab(i) > 0) and falls by 0.1
//!   after every quiet ac_cycle; ac_cycle is estimated as in Section 12
//!   (mean inter-request time × mean session length).
//! * [`PredictiveController`] — Section 12: a quota of new sessions per
//!   interval from Eq. 7, with S_r, SesLength = C_r / C_s and Load measured,
//!   and the Remark's carry-over of mispredictions and unused quota.
//! * [`overhead`] — Section 8, Eq. 1–6: the worst-case rejection overhead
//!   and Eq. 7's session quota.
//! * [`token`] — Section 7, footnote 3: the cookie that tells sessions in
//!   progress from new ones, here signed (HMAC-SHA-256) and expiring, so a
//!   client cannot forge "already admitted"; [`SessionGate`] puts a
//!   controller and the tokens together, with idle sessions expiring after T.
//!
//! Every controller is fed the time ([`Nanos`]) and one
//! [`IntervalMeasurement`] at the end of each ac-interval, is asked
//! [`SessionAdmission::admit_new_session`] for each new session, and tells
//! why through [`SessionAdmission::decision`] (predicted utilization, k,
//! quota) for metrics. None owns a clock, a thread or a socket.

mod ewma;
mod gate;
mod hybrid;
pub mod overhead;
mod predictive;
pub mod token;

pub use ewma::{EwmaConfig, EwmaController};
pub use gate::{GateVerdict, SessionGate};
pub use hybrid::{HybridConfig, HybridController};
pub use predictive::{PredictiveConfig, PredictiveController};
pub use token::{SessionToken, TokenError, TokenMemo, TokenSigner};

use crate::Nanos;

/// What the server observed during one ac-interval T_i. Counters are for
/// this interval only (not running totals).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IntervalMeasurement {
    /// Length of the interval that just ended.
    pub elapsed: Nanos,
    /// Time the bottleneck resource (CPU) was busy during it; U_i^measured
    /// = busy / elapsed.
    pub busy: Nanos,
    /// Requests whose client had given up (timed out and closed) by the time
    /// the server answered: "aborted requests" of Section 11.
    pub aborted_requests: u64,
    /// Connections refused because the listen queue was full (Section 11).
    pub refused_connections: u64,
    /// First requests of new sessions that arrived (admitted, rejected or
    /// refused alike): the *Load* of Section 12.
    pub new_sessions: u64,
    /// New sessions admitted: the increment of C_s (Section 12).
    pub admitted_sessions: u64,
    /// Requests of admitted sessions the server processed: the increment of
    /// C_r (Section 12).
    pub session_requests: u64,
    /// Sessions of admitted clients that ended after a successful reply
    /// (the server learns it from the session's idle expiry T, footnote 3,
    /// or an explicit end). A session whose last request was aborted or
    /// refused is not counted.
    pub ended_sessions: u64,
    /// Requests waiting in the listen queue when the interval ended.
    pub queued_requests: u64,
    /// Rejection messages the server sent (each costs about one request).
    pub rejections: u64,
    /// Sum of the times between consecutive requests of the same session
    /// (response time plus think time), and how many such gaps: Section 12's
    /// approximation of ac_cycle.
    pub inter_request_sum: Nanos,
    pub inter_request_samples: u64,
}

impl IntervalMeasurement {
    /// U_i^measured, in [0, 1]; zero for an empty interval.
    pub fn utilization(&self) -> f64 {
        if self.elapsed.0 == 0 {
            0.0
        } else {
            (self.busy.0 as f64 / self.elapsed.0 as f64).clamp(0.0, 1.0)
        }
    }

    /// Ab(i) of Section 11: aborted requests plus refused connections.
    pub fn troubles(&self) -> u64 {
        self.aborted_requests + self.refused_connections
    }
}

/// Why a controller decides as it does now, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Decision {
    /// Whether a new session arriving now would be admitted.
    pub admitting: bool,
    /// U^predicted_{i+1} = f_ac(i+1) (EWMA family and hybrid).
    pub predicted_utilization: Option<f64>,
    /// The ac-weight k in force (EWMA family and hybrid).
    pub weight: Option<f64>,
    /// New sessions still allowed in this interval (predictive), including
    /// carried-over quota.
    pub quota: Option<f64>,
    /// Eq. 6's rejection overhead at the measured load, in percent of the
    /// requests the server processes (predictive).
    pub rejection_overhead_pct: Option<f64>,
    /// The measured Load, as a multiple of the capacity in sessions
    /// (predictive).
    pub load: Option<f64>,
    /// Mean session length C_r / C_s (predictive, hybrid).
    pub session_length: Option<f64>,
    /// ac_cycle in intervals (hybrid).
    pub ac_cycle_intervals: Option<u64>,
}

/// A session admission controller.
pub trait SessionAdmission {
    /// An ac-interval ended at `now` with what was measured during it.
    fn on_interval(&mut self, now: Nanos, measured: &IntervalMeasurement);
    /// The first request of a new session arrives at `now`: admit it?
    fn admit_new_session(&mut self, now: Nanos) -> bool;
    /// Why it decides as it does now.
    fn decision(&self) -> Decision;
}

/// Why a controller's parameters are unusable.
pub type SessionConfigError = crate::OutOfRange;

pub(crate) fn check(
    ok: bool,
    parameter: &'static str,
    expected: &'static str,
    value: impl std::fmt::Display,
) -> Result<(), SessionConfigError> {
    crate::OutOfRange::check(ok, parameter, expected, value)
}

/// U_ac, the utilization every controller admits below: in (0, 1].
pub(crate) fn check_threshold(threshold: f64) -> Result<(), SessionConfigError> {
    check(
        threshold > 0.0 && threshold <= 1.0,
        "threshold",
        "in (0, 1]",
        threshold,
    )
}

/// A one-second interval busy `utilization_pct` % of the time, nothing else.
#[cfg(test)]
pub(crate) fn busy_second(utilization_pct: u64) -> IntervalMeasurement {
    IntervalMeasurement {
        elapsed: Nanos::from_secs(1),
        busy: Nanos::from_millis(10 * utilization_pct),
        ..Default::default()
    }
}

/// Running totals C_s and C_r of Section 12, and the inter-request gaps.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct SessionCounters {
    pub admitted_sessions: u64,
    pub session_requests: u64,
    pub ended_sessions: u64,
    pub inter_request_sum: u128,
    pub inter_request_samples: u64,
}

impl SessionCounters {
    pub fn add(&mut self, m: &IntervalMeasurement) {
        self.admitted_sessions += m.admitted_sessions;
        self.session_requests += m.session_requests;
        self.ended_sessions += m.ended_sessions;
        self.inter_request_sum += m.inter_request_sum.0 as u128;
        self.inter_request_samples += m.inter_request_samples;
    }

    /// Requests per *ended* session, C_r / C_e: each processed request is
    /// the last of its session with probability 1 / SesLength, so this ratio
    /// is unbiased while sessions are still in progress, and sessions cut
    /// short by aborts only make it larger (more cautious). Falls back to
    /// C_r / C_s before any session has ended.
    pub fn ended_session_length(&self) -> Option<f64> {
        if self.ended_sessions > 0 && self.session_requests > 0 {
            Some(self.session_requests as f64 / self.ended_sessions as f64)
        } else {
            self.session_length()
        }
    }

    /// SesLength = C_r / C_s, once a session has been admitted and served.
    pub fn session_length(&self) -> Option<f64> {
        (self.admitted_sessions > 0 && self.session_requests > 0)
            .then(|| self.session_requests as f64 / self.admitted_sessions as f64)
    }

    /// Mean time between consecutive requests of a session.
    pub fn inter_request(&self) -> Option<Nanos> {
        (self.inter_request_samples > 0)
            .then(|| Nanos((self.inter_request_sum / self.inter_request_samples as u128) as u64))
    }
}
