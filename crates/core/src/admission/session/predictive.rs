//! The *predictive* strategy of Section 12: a quota of new sessions per
//! ac-interval from Eq. 7, so that "on" intervals cannot admit more
//! sessions than the server can complete.
//!
//! At the end of each interval T_i the controller updates
//! * S_r — requests (session requests and rejection messages alike: a
//!   rejection costs one request, Section 8) processed per second of busy
//!   time, over the whole run;
//! * SesLength — requests of admitted sessions over sessions that ended
//!   (C_r / C_e, see the departures), over the whole run;
//! * Load — new-session arrivals of T_i per second, over S_s = S_r /
//!   SesLength (Eq. 1);
//!
//! and grants T_{i+1} the quota y(Load_i) · |T| of Eq. 7.
//!
//! The Remark's corrections: once T_i is over, its actual Load is known and
//! Eq. 7 tells how many sessions it should have admitted. An excess (the
//! quota was computed from an underestimated load, or a fraction was
//! rounded up) is a debt taken off the next quotas; a shortfall (unused
//! quota, or an overestimated load) is a credit that stays usable for
//! [`PredictiveConfig::carry_intervals`] intervals ("the last few
//! ac-intervals") once the current quota is spent.
//!
//! Departures: SesLength is C_r over *ended* sessions C_e, not over
//! admitted ones C_s as in Section 12. C_r / C_s counts sessions still in
//! progress and sessions cut short by aborts, both of which make it too
//! short; a short SesLength overstates S_s = S_r / SesLength, the quota
//! admits too many sessions, more are aborted, and the estimate shrinks
//! further — in our simulator this feedback left 30–70 % of admitted
//! sessions aborted at 150–300 % load. Each processed request ends its
//! session with probability 1 / SesLength, so C_r / C_e is right while
//! sessions are in progress, and aborted sessions (never counted as ended)
//! only make it longer, i.e. more cautious. C_r / C_s is used until a
//! session has ended. The quota is computed for U_ac · S_r rather than S_r
//! ([`PredictiveConfig::threshold`], 0.95 like the other strategies): at
//! exactly full utilization the listen queue of a server with
//! high-variance service times grows without bound and clients time out.
//! Until S_r and SesLength have been measured (no busy time or no admitted
//! session yet) every session is admitted, as f_ac(1) = U_ac admits in
//! Section 7. The *backlog guard* ([`PredictiveConfig::backlog_allowance`])
//! is ours: Eq. 7 is a steady-state balance and ignores the work of
//! sessions admitted before a load step; after a step from near capacity to
//! 300 % the rejections alone (one request each) plus the sessions still in
//! progress exceed the capacity, the listen queue fills and clients time
//! out. A listen-queue backlog beyond the allowance (250 ms of work by
//! default) is taken off the next quota, and banked credits are dropped.
//! The Load is that of the last interval (the paper's
//! prediction), not a smoothed one.
//!
//! Ends seen late ([`PredictiveConfig::end_seen_after`]): a live server
//! learns that a session ended only when it has been idle for T (footnote
//! 3), so at time t it knows the ends of the sessions whose last request
//! came before t − T. C_r / C_e then overstates SesLength by C_r(t) /
//! C_r(t − T) — twice at t = 2T, still 9 % an hour after a start with T =
//! 300 s — and the quota rejects too many. With the lag configured,
//! SesLength is C_r(t − T) / C_e(t): the requests that could have been a
//! known last one, over the known ends. C_r is sampled at interval ends at
//! most every T/1024, so the history holds at most about 1,024 samples.

use super::overhead::{rejection_overhead_pct, session_capacity, session_quota_per_s};
use super::{
    check, check_threshold, Decision, IntervalMeasurement, SessionAdmission, SessionConfigError,
    SessionCounters,
};
use crate::Nanos;
use std::collections::VecDeque;

/// Parameters of the predictive strategy.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PredictiveConfig {
    /// Share of the measured capacity S_r the quota may use, in (0, 1].
    pub threshold: f64,
    /// How many intervals unused quota stays usable (0: none).
    pub carry_intervals: u32,
    /// A known capacity in requests per second, instead of measuring S_r.
    pub capacity_requests_per_s: Option<f64>,
    /// Backlog guard: listen-queue backlog beyond this much work (at S_r)
    /// is taken off the next quota, in sessions of SesLength requests.
    /// `None` is the paper's strategy without the guard.
    pub backlog_allowance: Option<Nanos>,
    /// How long after its last request a session's end is reported in
    /// [`IntervalMeasurement::ended_sessions`] (the idle timeout T);
    /// `None`: at once.
    #[serde(default)]
    pub end_seen_after: Option<Nanos>,
}

impl Default for PredictiveConfig {
    fn default() -> Self {
        PredictiveConfig {
            threshold: 0.95,
            carry_intervals: 3,
            capacity_requests_per_s: None,
            backlog_allowance: Some(Nanos::from_millis(250)),
            end_seen_after: None,
        }
    }
}

impl PredictiveConfig {
    pub fn validate(&self) -> Result<(), SessionConfigError> {
        check_threshold(self.threshold)?;
        check(
            self.carry_intervals <= 1000,
            "carry_intervals",
            "at most 1000",
            self.carry_intervals,
        )?;
        if let Some(lag) = self.end_seen_after {
            check(
                lag <= Nanos::from_secs(30 * 86_400),
                "end_seen_after",
                "at most 30 days",
                lag.as_secs_f64(),
            )?;
        }
        if let Some(c) = self.capacity_requests_per_s {
            check(
                c.is_finite() && c > 0.0,
                "capacity_requests_per_s",
                "positive",
                c,
            )?;
        }
        Ok(())
    }
}

/// Section 12's quota controller.
#[derive(Clone, Debug)]
pub struct PredictiveController {
    config: PredictiveConfig,
    counters: SessionCounters,
    served_requests: u64,
    busy: u128,
    /// Sessions still allowed in the current interval (may be negative: a
    /// debt carried on).
    quota_left: f64,
    /// Credits of the last intervals, oldest first.
    credits: VecDeque<f64>,
    /// Admissions this interval paid from the quota (not from credits).
    admitted_from_quota: u64,
    measured: bool,
    load: Option<f64>,
    session_length: Option<f64>,
    capacity: Option<f64>,
    /// (interval end, C_r then), oldest first, with
    /// [`PredictiveConfig::end_seen_after`]: the first entry is the newest
    /// one at least T old once there is one.
    requests_before: VecDeque<(Nanos, u64)>,
}

impl PredictiveController {
    pub fn new(config: PredictiveConfig) -> Result<PredictiveController, SessionConfigError> {
        config.validate()?;
        Ok(PredictiveController {
            config,
            counters: SessionCounters::default(),
            served_requests: 0,
            busy: 0,
            quota_left: 0.0,
            credits: VecDeque::new(),
            admitted_from_quota: 0,
            measured: false,
            load: None,
            session_length: None,
            capacity: None,
            requests_before: VecDeque::new(),
        })
    }

    /// S_r: the configured capacity, or requests per busy second so far.
    pub fn capacity_requests_per_s(&self) -> Option<f64> {
        self.capacity
    }

    /// Sessions the current interval may still admit, credits included.
    pub fn quota(&self) -> f64 {
        self.quota_left.max(0.0) + self.credits.iter().sum::<f64>()
    }

    /// SesLength: C_r / C_e, or C_r(t − T) / C_e(t) when ends are seen T
    /// late; C_r / C_s until an end is known (see the module doc).
    fn measure_session_length(&mut self, now: Nanos) -> Option<f64> {
        let Some(lag) = self.config.end_seen_after else {
            return self.counters.ended_session_length();
        };
        let requests = self.counters.session_requests;
        let step = Nanos(lag.0 / 1024);
        match self.requests_before.back() {
            Some(&(at, _)) if now.saturating_sub(at) < step => {}
            _ => self.requests_before.push_back((now, requests)),
        }
        let horizon = now.saturating_sub(lag);
        while self.requests_before.len() > 1 && self.requests_before[1].0 <= horizon {
            self.requests_before.pop_front();
        }
        let lagged = match self.requests_before.front() {
            Some(&(at, requests)) if at <= horizon => requests,
            _ => 0,
        };
        let ended = self.counters.ended_sessions;
        if ended > 0 && lagged > 0 {
            Some(lagged as f64 / ended as f64)
        } else {
            self.counters.session_length()
        }
    }

    fn measure_capacity(&self) -> Option<f64> {
        if let Some(c) = self.config.capacity_requests_per_s {
            return Some(c);
        }
        (self.busy > 0 && self.served_requests > 0)
            .then(|| self.served_requests as f64 / (self.busy as f64 / 1e9))
    }
}

impl SessionAdmission for PredictiveController {
    fn on_interval(&mut self, now: Nanos, measured: &IntervalMeasurement) {
        self.counters.add(measured);
        self.served_requests += measured.session_requests + measured.rejections;
        self.busy += measured.busy.0 as u128;
        self.capacity = self.measure_capacity();
        self.session_length = self.measure_session_length(now);
        let (Some(capacity), Some(length)) = (self.capacity, self.session_length) else {
            return;
        };
        let seconds = measured.elapsed.as_secs_f64();
        if seconds <= 0.0 {
            return;
        }
        let usable = capacity * self.config.threshold;
        let sessions_capacity = session_capacity(usable, length);
        let load = if sessions_capacity > 0.0 {
            measured.new_sessions as f64 / seconds / sessions_capacity
        } else {
            0.0
        };
        self.load = Some(load);
        let deserved = session_quota_per_s(usable, length, load) * seconds;
        // What T_i should have admitted at the load it really had, against
        // what it admitted from its quota.
        let balance = if self.measured {
            deserved - self.admitted_from_quota as f64
        } else {
            0.0
        };
        let carried_debt = (-self.quota_left).max(0.0);
        let debt = carried_debt + (-balance).max(0.0);
        if balance > 0.0 {
            self.credits.push_back(balance);
        }
        while self.credits.len() > self.config.carry_intervals as usize {
            self.credits.pop_front();
        }
        // T_{i+1} gets Eq. 7 at the load just seen, less the debt.
        self.quota_left = deserved - debt;
        if let Some(allowance) = self.config.backlog_allowance {
            let allowed = capacity * allowance.as_secs_f64();
            let excess = (measured.queued_requests as f64 - allowed).max(0.0);
            if excess > 0.0 {
                self.quota_left -= excess / length;
                self.credits.clear();
            }
        }
        self.admitted_from_quota = 0;
        self.measured = true;
    }

    fn admit_new_session(&mut self, _now: Nanos) -> bool {
        if !self.measured {
            return true;
        }
        if self.quota_left >= 1.0 {
            self.quota_left -= 1.0;
            self.admitted_from_quota += 1;
            return true;
        }
        if self.credits.iter().sum::<f64>() >= 1.0 {
            let mut need = 1.0;
            while need > 0.0 {
                let Some(front) = self.credits.front_mut() else {
                    break;
                };
                let take = front.min(need);
                *front -= take;
                need -= take;
                if *front <= 1e-12 {
                    self.credits.pop_front();
                }
            }
            return true;
        }
        false
    }

    fn decision(&self) -> Decision {
        Decision {
            admitting: !self.measured || self.quota() >= 1.0,
            quota: self.measured.then(|| self.quota()),
            rejection_overhead_pct: match (self.session_length, self.load) {
                (Some(l), Some(load)) => Some(rejection_overhead_pct(l, load)),
                _ => None,
            },
            load: self.load,
            session_length: self.session_length,
            ..Decision::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One second in which `arrivals` new sessions came, `admitted` were
    /// admitted, and the server, at 1000 requests per busy second, served
    /// `length` requests per admitted session and one per rejection.
    fn second(arrivals: u64, admitted: u64, length: u64) -> IntervalMeasurement {
        let rejected = arrivals - admitted;
        let requests = admitted * length;
        IntervalMeasurement {
            ended_sessions: admitted,
            elapsed: Nanos::from_secs(1),
            busy: Nanos::from_millis(requests + rejected),
            new_sessions: arrivals,
            admitted_sessions: admitted,
            session_requests: requests,
            rejections: rejected,
            ..Default::default()
        }
    }

    fn admit_all(c: &mut PredictiveController, arrivals: u64) -> u64 {
        (0..arrivals)
            .filter(|_| c.admit_new_session(Nanos::ZERO))
            .count() as u64
    }

    #[test]
    fn quota_is_eq_7_at_the_measured_load() {
        let mut c = PredictiveController::new(PredictiveConfig {
            threshold: 1.0,
            carry_intervals: 0,
            capacity_requests_per_s: None,
            backlog_allowance: None,
            end_seen_after: None,
        })
        .unwrap();
        assert!(c.admit_new_session(Nanos::ZERO)); // nothing measured yet
                                                   // SesLength 15, S_r 1000: S_s = 66.7; 133 arrivals = Load 2.
        c.on_interval(Nanos::from_secs(1), &second(133, 61, 15));
        let length = c.decision().session_length.unwrap();
        assert_eq!(length, 15.0);
        let s_r = c.capacity_requests_per_s().unwrap();
        assert!((s_r - 1000.0).abs() < 1e-6);
        let load = c.decision().load.unwrap();
        assert!((load - 133.0 / (1000.0 / 15.0)).abs() < 1e-9);
        let expected = session_quota_per_s(1000.0, 15.0, load);
        assert!((c.quota() - expected).abs() < 1e-9, "{}", c.quota());
        assert_eq!(admit_all(&mut c, 200), expected.floor() as u64);
        let overhead = c.decision().rejection_overhead_pct.unwrap();
        assert!((overhead - rejection_overhead_pct(15.0, load)).abs() < 1e-9);
    }

    #[test]
    fn over_admission_is_paid_back_and_unused_quota_carried() {
        let config = PredictiveConfig {
            threshold: 1.0,
            carry_intervals: 2,
            capacity_requests_per_s: Some(1000.0),
            backlog_allowance: None,
            end_seen_after: None,
        };
        let mut c = PredictiveController::new(config).unwrap();
        // Load 1 with SesLength 10: quota 100 per second.
        c.on_interval(Nanos::from_secs(1), &second(100, 100, 10));
        assert!((c.quota() - 100.0).abs() < 1e-9);
        let admitted = admit_all(&mut c, 100);
        assert_eq!(admitted, 100);
        // The load turned out to be 300 %: Eq. 7 says 300 arrivals at
        // SesLength 10 deserve 77.8, so 22.2 were too many; they come off
        // the next quota, computed at the new load.
        c.on_interval(Nanos::from_secs(2), &second(300, 100, 10));
        let deserved = session_quota_per_s(1000.0, 10.0, 3.0);
        let debt = 100.0 - deserved;
        assert!((c.quota() - (deserved - debt)).abs() < 1e-9);
        // A quiet interval leaves unused quota that the next may spend.
        let before = admit_all(&mut c, 10);
        assert_eq!(before, 10);
        c.on_interval(Nanos::from_secs(3), &second(10, 10, 10));
        let fresh = session_quota_per_s(1000.0, 10.0, 0.1); // S_s = 100
        let credit = fresh - 10.0;
        assert!((c.quota() - (fresh + credit)).abs() < 1e-9);
        assert_eq!(admit_all(&mut c, 1000), (fresh + credit).floor() as u64);
        // Credits expire after `carry_intervals` intervals.
        for t in 4..10 {
            c.on_interval(Nanos::from_secs(t), &second(0, 0, 10));
        }
        assert!(c.credits.len() <= 2);
    }

    #[test]
    fn a_backlog_beyond_the_allowance_shrinks_the_quota() {
        let config = PredictiveConfig {
            threshold: 1.0,
            carry_intervals: 2,
            capacity_requests_per_s: Some(1000.0),
            backlog_allowance: Some(Nanos::from_millis(250)),
            end_seen_after: None,
        };
        let mut calm = PredictiveController::new(config).unwrap();
        let mut queued = PredictiveController::new(config).unwrap();
        let mut m = second(100, 100, 10);
        calm.on_interval(Nanos::from_secs(1), &m);
        m.queued_requests = 650; // 400 requests beyond 250 ms of work
        queued.on_interval(Nanos::from_secs(1), &m);
        assert!((calm.quota() - queued.quota() - 40.0).abs() < 1e-9);
    }

    #[test]
    fn no_admission_when_the_load_exceeds_the_session_length() {
        let mut c = PredictiveController::new(PredictiveConfig {
            capacity_requests_per_s: Some(1000.0),
            carry_intervals: 0,
            ..PredictiveConfig::default()
        })
        .unwrap();
        c.on_interval(Nanos::from_secs(1), &second(10, 10, 5));
        // 2000 arrivals per second at SesLength 5 (S_s = 190): Load > 10.
        c.on_interval(Nanos::from_secs(2), &second(2000, 0, 5));
        assert_eq!(admit_all(&mut c, 100), 0);
        assert!(!c.decision().admitting);
    }

    /// 1,000 requests a second, one in ten the last of its session
    /// (SesLength 10), each end reported 300 s after it happened: at t =
    /// 600 s C_r / C_e is 20, twice the truth; C_r(t − T) / C_e is 10.
    #[test]
    fn ends_seen_late_are_matched_with_the_requests_before_them() {
        let controller = |end_seen_after| {
            PredictiveController::new(PredictiveConfig {
                capacity_requests_per_s: Some(2000.0),
                end_seen_after,
                ..PredictiveConfig::default()
            })
            .unwrap()
        };
        let mut late = controller(Some(Nanos::from_secs(300)));
        let mut plain = controller(None);
        for second in 1..=600u64 {
            let m = IntervalMeasurement {
                elapsed: Nanos::from_secs(1),
                busy: Nanos::from_millis(500),
                new_sessions: 100,
                admitted_sessions: 100,
                session_requests: 1000,
                ended_sessions: if second > 300 { 100 } else { 0 },
                ..Default::default()
            };
            late.on_interval(Nanos::from_secs(second), &m);
            plain.on_interval(Nanos::from_secs(second), &m);
            if second == 300 {
                // No end known yet: C_r / C_s.
                assert_eq!(late.decision().session_length, Some(10.0));
            }
        }
        let length = |c: &PredictiveController| c.decision().session_length.unwrap();
        assert!((length(&late) - 10.0).abs() < 0.05, "{}", length(&late));
        assert!((length(&plain) - 20.0).abs() < 0.05, "{}", length(&plain));
        assert!(
            late.requests_before.len() <= 302,
            "{}",
            late.requests_before.len()
        );
    }

    #[test]
    fn the_end_lag_is_bounded() {
        let config = PredictiveConfig {
            end_seen_after: Some(Nanos::from_secs(31 * 86_400)),
            ..PredictiveConfig::default()
        };
        assert!(PredictiveController::new(config).is_err());
    }
}
