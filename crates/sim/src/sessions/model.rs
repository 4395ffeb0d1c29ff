//! The event loop of the session model (see the module above for the
//! model and its departures from the paper).

use super::filemix::{draw_length, draw_size, mean_size};
use super::{RunConfig, Strategy};
use crate::engine::EventQueue;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use serde::Serialize;
use std::collections::VecDeque;
use vantage_core::admission::session::overhead::session_capacity;
use vantage_core::admission::session::{
    EwmaController, HybridController, IntervalMeasurement, PredictiveConfig, PredictiveController,
    SessionAdmission,
};
use vantage_core::Nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// A request is outstanding.
    Waiting,
    Thinking,
    Completed,
    /// Admitted (or unrestricted), then lost a request.
    Aborted,
    /// Rejected by admission control.
    Rejected,
    /// Its first request found the listen queue full.
    Refused,
}

struct Session {
    length: u32,
    served: u32,
    /// Sequence number of the current attempt (each send, retry included).
    attempt: u32,
    retries_left: u32,
    admitted: bool,
    counted: bool,
    state: State,
    /// When the current request (not a retry of it) was first sent.
    request_sent: Nanos,
    /// The attempt that first sent the current request.
    request_first_attempt: u32,
    /// Server time spent on this session's requests, ns.
    busy: u64,
}

#[derive(Clone, Copy)]
enum Job {
    Request {
        session: u32,
        attempt: u32,
        service: Nanos,
    },
    Rejection {
        service: Nanos,
    },
    /// The server's work to refuse a connection (a model reading).
    Refusal {
        service: Nanos,
    },
}

impl Job {
    fn is_first(&self, sessions: &[Session]) -> bool {
        match self {
            Job::Request { session, .. } => sessions[*session as usize].served == 0,
            Job::Rejection { .. } | Job::Refusal { .. } => true,
        }
    }
}

impl Job {
    fn service(&self) -> Nanos {
        match self {
            Job::Request { service, .. }
            | Job::Rejection { service }
            | Job::Refusal { service } => *service,
        }
    }
}

enum Event {
    SessionArrival,
    Send {
        session: u32,
    },
    Timeout {
        session: u32,
        attempt: u32,
    },
    ServiceDone,
    SharedDone {
        generation: u64,
    },
    Tick,
    /// The server learns that a session ended (see
    /// [`super::ModelReading::session_end_seen_after`]).
    SessionEndSeen,
}

/// Completed sessions by length: ≤ m, (m, 2m], > 2m (Figure 4b), percent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LengthBins {
    pub up_to_mean_pct: f64,
    pub up_to_twice_mean_pct: f64,
    pub longer_pct: f64,
}

impl LengthBins {
    fn from_counts(c: [u64; 3]) -> LengthBins {
        let total = (c[0] + c[1] + c[2]).max(1) as f64;
        LengthBins {
            up_to_mean_pct: 100.0 * c[0] as f64 / total,
            up_to_twice_mean_pct: 100.0 * c[1] as f64 / total,
            longer_pct: 100.0 * c[2] as f64 / total,
        }
    }
}

/// What happened in one segment of the load pattern (warm-up and tail
/// included), over every session, not only the measured cohort: the
/// traffic the server was offered and the work it did while the segment
/// lasted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SegmentTrace {
    pub seconds: f64,
    /// Offered load as a multiple of the capacity in sessions.
    pub load: f64,
    pub session_arrivals: u64,
    /// Requests that left their clients (first sends and retries).
    pub requests_sent: u64,
    /// Requests the server finished (replies, wanted or not).
    pub requests_served: u64,
    /// Server busy time, seconds.
    pub busy_s: f64,
}

impl SegmentTrace {
    fn per_s(&self, n: f64) -> f64 {
        if self.seconds > 0.0 {
            n / self.seconds
        } else {
            0.0
        }
    }

    pub fn sessions_per_s(&self) -> f64 {
        self.per_s(self.session_arrivals as f64)
    }

    pub fn requests_sent_per_s(&self) -> f64 {
        self.per_s(self.requests_sent as f64)
    }

    pub fn requests_served_per_s(&self) -> f64 {
        self.per_s(self.requests_served as f64)
    }

    /// Busy time over the segment's length, percent.
    pub fn utilization_pct(&self) -> f64 {
        100.0 * self.per_s(self.busy_s)
    }

    /// The same segments of several runs, as one: counts and times add up.
    pub fn pool(runs: &[&[SegmentTrace]]) -> Vec<SegmentTrace> {
        let Some(first) = runs.first() else {
            return Vec::new();
        };
        if runs.iter().any(|r| r.len() != first.len()) {
            return Vec::new();
        }
        (0..first.len())
            .map(|i| {
                let mut t = SegmentTrace {
                    load: first[i].load,
                    ..SegmentTrace::default()
                };
                for r in runs {
                    t.seconds += r[i].seconds;
                    t.session_arrivals += r[i].session_arrivals;
                    t.requests_sent += r[i].requests_sent;
                    t.requests_served += r[i].requests_served;
                    t.busy_s += r[i].busy_s;
                }
                t
            })
            .collect()
    }
}

/// What one run measured (over the cohort of sessions arriving in the
/// measurement window, and the server's work inside that window).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunOutcome {
    pub window_s: f64,
    pub offered_sessions: u64,
    pub admitted_sessions: u64,
    pub rejected_sessions: u64,
    /// Sessions whose first request was refused (full listen queue).
    pub refused_sessions: u64,
    pub completed_sessions: u64,
    pub aborted_sessions: u64,
    pub completed_sessions_per_s: f64,
    /// Aborted sessions over admitted ones, percent.
    pub aborted_pct: f64,
    /// Rejected over offered sessions, percent.
    pub rejected_pct: f64,
    pub mean_completed_length: f64,
    pub mean_offered_length: f64,
    pub completed_bins: LengthBins,
    pub offered_bins: LengthBins,
    /// Server time spent on sessions that completed, over the window,
    /// percent (Section 6's useful utilization).
    pub useful_utilization_pct: f64,
    /// Server busy time in the window over its length, percent.
    pub utilization_pct: f64,
    /// Rejection messages over all requests processed in the window,
    /// percent (measured counterpart of Eq. 6).
    pub rejection_overhead_pct: f64,
    /// Requests (and rejections) processed per second in the window.
    pub requests_per_s: f64,
    /// Mean ac-weight k over the window's intervals (EWMA family, hybrid).
    pub mean_weight: Option<f64>,
    /// Share of the window's intervals that admitted, percent.
    pub admitting_intervals_pct: f64,
    /// Time from the load step to the first rejection, seconds.
    pub time_to_first_rejection_s: Option<f64>,
    /// Coefficient of variation of admitted sessions per second under
    /// steady overload.
    pub admitted_rate_cv: Option<f64>,
    /// Offered sessions with at least one request served, percent.
    pub started_pct: f64,
    /// Of the requests after a session's first, the share served in time,
    /// percent.
    pub later_success_pct: f64,
    /// Most sessions in progress at once.
    pub max_in_progress: u64,
    /// Events processed and virtual time simulated.
    pub events: u64,
    pub simulated_s: f64,
    /// Each segment of the load pattern, in order (repetitions pooled by
    /// [`SegmentTrace::pool`]; empty when the runs' patterns differ).
    pub segments: Vec<SegmentTrace>,
}

impl RunOutcome {
    /// One outcome for several runs of the same cell (repetitions with
    /// their own seeds), as if they were one long run: counts add up, rates
    /// and shares are recomputed from the sums, per-window quantities are
    /// weighted by window, per-session ones by their sessions, and the
    /// step measurements are averaged over the runs that have them.
    pub fn pool(runs: &[RunOutcome]) -> RunOutcome {
        let sum = |f: fn(&RunOutcome) -> u64| runs.iter().map(f).sum::<u64>();
        let weighted = |value: fn(&RunOutcome) -> f64, weight: fn(&RunOutcome) -> f64| {
            let total: f64 = runs.iter().map(weight).sum();
            if total > 0.0 {
                runs.iter().map(|r| value(r) * weight(r)).sum::<f64>() / total
            } else {
                0.0
            }
        };
        let mean_of = |value: fn(&RunOutcome) -> Option<f64>| {
            let present: Vec<f64> = runs.iter().filter_map(value).collect();
            (!present.is_empty()).then(|| present.iter().sum::<f64>() / present.len() as f64)
        };
        let share = |n: u64, d: u64| {
            if d == 0 {
                0.0
            } else {
                100.0 * n as f64 / d as f64
            }
        };
        let completed = |r: &RunOutcome| r.completed_sessions as f64;
        let offered = |r: &RunOutcome| r.offered_sessions as f64;
        let window = |r: &RunOutcome| r.window_s;
        let requests = |r: &RunOutcome| r.requests_per_s * r.window_s;
        let mut o = RunOutcome {
            window_s: runs.iter().map(window).sum(),
            offered_sessions: sum(|r| r.offered_sessions),
            admitted_sessions: sum(|r| r.admitted_sessions),
            rejected_sessions: sum(|r| r.rejected_sessions),
            refused_sessions: sum(|r| r.refused_sessions),
            completed_sessions: sum(|r| r.completed_sessions),
            aborted_sessions: sum(|r| r.aborted_sessions),
            events: sum(|r| r.events),
            simulated_s: runs.iter().map(|r| r.simulated_s).sum(),
            ..RunOutcome::default()
        };
        o.completed_sessions_per_s = o.completed_sessions as f64 / o.window_s.max(1e-9);
        o.aborted_pct = share(o.aborted_sessions, o.admitted_sessions);
        o.rejected_pct = share(o.rejected_sessions, o.offered_sessions);
        o.mean_completed_length = weighted(|r| r.mean_completed_length, completed);
        o.mean_offered_length = weighted(|r| r.mean_offered_length, offered);
        o.completed_bins = LengthBins {
            up_to_mean_pct: weighted(|r| r.completed_bins.up_to_mean_pct, completed),
            up_to_twice_mean_pct: weighted(|r| r.completed_bins.up_to_twice_mean_pct, completed),
            longer_pct: weighted(|r| r.completed_bins.longer_pct, completed),
        };
        o.offered_bins = LengthBins {
            up_to_mean_pct: weighted(|r| r.offered_bins.up_to_mean_pct, offered),
            up_to_twice_mean_pct: weighted(|r| r.offered_bins.up_to_twice_mean_pct, offered),
            longer_pct: weighted(|r| r.offered_bins.longer_pct, offered),
        };
        o.useful_utilization_pct = weighted(|r| r.useful_utilization_pct, window);
        o.utilization_pct = weighted(|r| r.utilization_pct, window);
        o.rejection_overhead_pct = weighted(|r| r.rejection_overhead_pct, requests);
        o.requests_per_s = runs.iter().map(requests).sum::<f64>() / o.window_s.max(1e-9);
        o.started_pct = weighted(|r| r.started_pct, offered);
        o.later_success_pct = weighted(|r| r.later_success_pct, offered);
        o.max_in_progress = runs.iter().map(|r| r.max_in_progress).max().unwrap_or(0);
        o.mean_weight = mean_of(|r| r.mean_weight);
        o.admitting_intervals_pct = weighted(|r| r.admitting_intervals_pct, window);
        o.time_to_first_rejection_s = mean_of(|r| r.time_to_first_rejection_s);
        o.admitted_rate_cv = mean_of(|r| r.admitted_rate_cv);
        let traces: Vec<&[SegmentTrace]> = runs.iter().map(|r| r.segments.as_slice()).collect();
        o.segments = SegmentTrace::pool(&traces);
        o
    }
}

/// The run's controller; predictive is told when its server learns of a
/// session's end ([`super::ModelReading::session_end_seen_after`]).
fn controller(
    strategy: &Strategy,
    reading: &super::ModelReading,
) -> Option<Box<dyn SessionAdmission>> {
    // Configurations are validated when scenarios load (`studies::sbac`);
    // an invalid one reaching here is a bug in the caller.
    match strategy {
        Strategy::None => None,
        Strategy::Ewma(c) => Some(Box::new(
            EwmaController::new(*c).expect("validated EWMA configuration"),
        )),
        Strategy::Hybrid(c) => Some(Box::new(
            HybridController::new(*c).expect("validated hybrid configuration"),
        )),
        Strategy::Predictive(c) => Some(Box::new(
            PredictiveController::new(PredictiveConfig {
                end_seen_after: reading.session_end_seen_after,
                ..*c
            })
            .expect("validated predictive configuration"),
        )),
    }
}

struct Sim<'a> {
    cfg: &'a RunConfig,
    rng: ChaCha8Rng,
    queue: EventQueue<Event>,
    sessions: Vec<Session>,
    listen: VecDeque<Job>,
    in_service: Option<Job>,
    busy_since: Option<Nanos>,
    /// Processor sharing: accepted jobs and their remaining work, ns.
    shared: Vec<(f64, Job)>,
    shared_at: Nanos,
    shared_generation: u64,
    controller: Option<Box<dyn SessionAdmission>>,
    interval: IntervalMeasurement,
    interval_busy_from: Nanos,
    think: Exp<f64>,
    ns_per_byte: f64,
    avg_service: Nanos,
    active: u64,
    max_active: u64,
    // Window accounting.
    window_busy: u64,
    window_requests: u64,
    window_rejections: u64,
    intervals_in_window: u64,
    admitting_in_window: u64,
    weight_sum: f64,
    weight_samples: u64,
    first_rejection_after_step: Option<Nanos>,
    admitted_per_second: Vec<u32>,
    /// Per pattern segment: arrivals, requests, busy time.
    segments: Vec<SegmentTrace>,
}

impl Sim<'_> {
    fn in_window(&self, t: Nanos) -> bool {
        t >= self.cfg.measure_from && t < self.cfg.measure_to
    }

    /// The trace of the pattern segment holding `t`; `None` past the end.
    fn trace_at(&mut self, t: Nanos) -> Option<&mut SegmentTrace> {
        let index = self.cfg.pattern.index_at(t)?;
        self.segments.get_mut(index)
    }

    /// Adds the busy span [from, to) to the segments it overlaps.
    fn trace_busy(&mut self, from: Nanos, to: Nanos) {
        let cfg = self.cfg;
        let mut start = Nanos::ZERO;
        for (segment, trace) in cfg.pattern.segments.iter().zip(&mut self.segments) {
            let end = start + segment.duration;
            let (a, b) = (from.max(start), to.min(end));
            if b > a {
                trace.busy_s += (b - a).as_secs_f64();
            }
            start = end;
        }
    }

    fn next_arrival(&mut self, mut t: Nanos) -> Option<Nanos> {
        let capacity_sessions = session_capacity(
            self.cfg.capacity_requests_per_s,
            self.cfg.session_length_mean,
        );
        loop {
            let (load, end) = self.cfg.pattern.at(t)?;
            let rate = load * capacity_sessions;
            if rate > 0.0 {
                let gap: f64 = Exp::new(rate).expect("positive rate").sample(&mut self.rng);
                let next = t + Nanos::from_secs_f64(gap);
                if next < end {
                    return Some(next.max(t + Nanos(1)));
                }
            }
            t = end;
        }
    }

    /// Busy time accrued up to `now` into the interval and the window.
    fn account_busy(&mut self, now: Nanos) {
        if let Some(since) = self.busy_since {
            let from = since.max(self.interval_busy_from);
            self.interval.busy += now - from;
            self.trace_busy(from, now);
            let w_from = from.max(self.cfg.measure_from);
            let w_to = now.min(self.cfg.measure_to);
            if w_to > w_from {
                self.window_busy += (w_to - w_from).0;
            }
            self.busy_since = Some(now);
        }
    }

    fn shared_advance(&mut self, now: Nanos) {
        let n = self.shared.len();
        if n > 0 {
            let each = (now - self.shared_at).0 as f64 / n as f64;
            for j in &mut self.shared {
                j.0 -= each;
            }
        }
        self.shared_at = now;
    }

    fn shared_reschedule(&mut self, now: Nanos) {
        self.shared_generation += 1;
        let n = self.shared.len();
        if let Some(min) = self.shared.iter().map(|j| j.0).reduce(f64::min) {
            let dt = (min.max(0.0) * n as f64).ceil() as u64;
            self.queue.schedule(
                now + Nanos(dt),
                Event::SharedDone {
                    generation: self.shared_generation,
                },
            );
        }
    }

    fn shared_done(&mut self, now: Nanos, generation: u64) {
        if generation != self.shared_generation {
            return;
        }
        self.shared_advance(now);
        let mut done = Vec::new();
        self.shared.retain(|j| {
            if j.0 <= 0.5 {
                done.push(j.1);
                false
            } else {
                true
            }
        });
        for job in done {
            self.finish(now, job);
        }
        if self.shared.is_empty() {
            self.account_busy(now);
            self.busy_since = None;
        }
        self.shared_reschedule(now);
    }

    fn start_service(&mut self, now: Nanos) {
        if self.cfg.reading.processor_sharing {
            if self.listen.is_empty() {
                return;
            }
            self.shared_advance(now);
            if self.shared.is_empty() {
                self.busy_since = Some(now);
            }
            while let Some(job) = self.listen.pop_front() {
                self.shared.push((job.service().0 as f64, job));
            }
            self.shared_reschedule(now);
            return;
        }
        if self.in_service.is_some() {
            return;
        }
        while let Some(job) = self.pop_job() {
            if self.cfg.reading.skip_closed_requests && !self.wanted(&job) {
                self.interval.aborted_requests += 1;
                continue;
            }
            self.in_service = Some(job);
            self.busy_since = Some(now);
            self.queue.schedule(now + job.service(), Event::ServiceDone);
            return;
        }
    }

    fn pop_job(&mut self) -> Option<Job> {
        if self.cfg.reading.later_requests_first {
            if let Some(i) = self.listen.iter().position(|j| !j.is_first(&self.sessions)) {
                return self.listen.remove(i);
            }
        }
        self.listen.pop_front()
    }

    /// Whether the client still waits for this job's reply.
    fn wanted(&self, job: &Job) -> bool {
        match job {
            Job::Rejection { .. } | Job::Refusal { .. } => true,
            Job::Request {
                session, attempt, ..
            } => {
                let s = &self.sessions[*session as usize];
                s.state == State::Waiting
                    && if self.cfg.reading.retry_joins_original {
                        *attempt >= s.request_first_attempt && *attempt <= s.attempt
                    } else {
                        *attempt == s.attempt
                    }
            }
        }
    }

    fn end_session(&mut self, s: u32, state: State) {
        let session = &mut self.sessions[s as usize];
        session.state = state;
        self.active -= 1;
    }

    /// A request (first, next or retry) of session `s` leaves its client.
    fn send(&mut self, now: Nanos, s: u32, retry: bool) {
        if let Some(trace) = self.trace_at(now) {
            trace.requests_sent += 1;
        }
        let timeout = self.cfg.timeout;
        let first = {
            let session = &mut self.sessions[s as usize];
            session.attempt += 1;
            session.state = State::Waiting;
            if !retry {
                session.retries_left = self.cfg.retries;
                session.request_sent = now;
                session.request_first_attempt = session.attempt;
            }
            !session.admitted
        };
        if first && !retry {
            self.interval.new_sessions += 1;
        }
        // The kernel's listen queue comes first: a full queue refuses.
        let occupied = self.listen.len() + self.shared.len();
        let bypass = self.cfg.reading.later_requests_bypass_queue_limit && !first;
        if occupied >= self.cfg.listen_queue && !bypass {
            self.interval.refused_connections += 1;
            if self.cfg.reading.refusal_cost > 0.0 {
                let service = Nanos(
                    (self.avg_service.0 as f64 * self.cfg.reading.refusal_cost).round() as u64,
                );
                self.listen.push_front(Job::Refusal { service });
                self.start_service(now);
            }
            let state = if first {
                State::Refused
            } else {
                State::Aborted
            };
            self.end_session(s, state);
            return;
        }
        if first {
            let admit = match self.controller.as_mut() {
                Some(c) => c.admit_new_session(now),
                None => true,
            };
            if !admit {
                self.interval.rejections += 1;
                if let Some(step) = self.cfg.step_at {
                    if now >= step && self.first_rejection_after_step.is_none() {
                        self.first_rejection_after_step = Some(now - step);
                    }
                }
                self.listen.push_back(Job::Rejection {
                    service: self.avg_service_scaled(),
                });
                self.end_session(s, State::Rejected);
                self.start_service(now);
                return;
            }
            self.interval.admitted_sessions += 1;
            self.sessions[s as usize].admitted = true;
            let second = (now.0 / 1_000_000_000) as usize;
            if second >= self.admitted_per_second.len() {
                self.admitted_per_second.resize(second + 1, 0);
            }
            self.admitted_per_second[second] += 1;
        }
        let size = draw_size(&mut self.rng);
        let service = Nanos(((size as f64) * self.ns_per_byte).round().max(1.0) as u64);
        let attempt = self.sessions[s as usize].attempt;
        self.listen.push_back(Job::Request {
            session: s,
            attempt,
            service,
        });
        self.queue.schedule(
            now + timeout,
            Event::Timeout {
                session: s,
                attempt,
            },
        );
        self.start_service(now);
    }

    fn avg_service_scaled(&self) -> Nanos {
        Nanos((self.avg_service.0 as f64 * self.cfg.rejection_cost).round() as u64)
    }

    fn service_done(&mut self, now: Nanos) {
        self.account_busy(now);
        self.busy_since = None;
        let job = self.in_service.take().expect("a job was in service");
        self.finish(now, job);
        self.start_service(now);
    }

    fn finish(&mut self, now: Nanos, job: Job) {
        let in_window = self.in_window(now);
        match job {
            Job::Rejection { .. } => {
                if in_window {
                    self.window_rejections += 1;
                }
            }
            Job::Refusal { .. } => {}
            Job::Request {
                session: s,
                service,
                ..
            } => {
                if in_window {
                    self.window_requests += 1;
                }
                if let Some(trace) = self.trace_at(now) {
                    trace.requests_served += 1;
                }
                self.interval.session_requests += 1;
                let think = Nanos::from_secs_f64(self.think.sample(&mut self.rng));
                let wanted = self.wanted(&job);
                let session = &mut self.sessions[s as usize];
                session.busy += service.0;
                if wanted {
                    session.served += 1;
                    if session.served >= session.length {
                        match self.cfg.reading.session_end_seen_after {
                            None => self.interval.ended_sessions += 1,
                            Some(idle) => self.queue.schedule(now + idle, Event::SessionEndSeen),
                        }
                        self.end_session(s, State::Completed);
                    } else {
                        session.state = State::Thinking;
                        self.queue.schedule(now + think, Event::Send { session: s });
                    }
                } else {
                    // The client closed: the reply has nowhere to go.
                    self.interval.aborted_requests += 1;
                }
            }
        }
    }

    fn timeout(&mut self, now: Nanos, s: u32, attempt: u32) {
        let session = &mut self.sessions[s as usize];
        if session.attempt != attempt || session.state != State::Waiting {
            return;
        }
        let may_retry = !(self.cfg.reading.first_request_no_retry && session.served == 0);
        if session.retries_left > 0 && may_retry {
            session.retries_left -= 1;
            self.send(now, s, true);
        } else {
            self.end_session(s, State::Aborted);
        }
    }

    fn tick(&mut self, now: Nanos) {
        self.account_busy(now);
        self.interval.elapsed = now - self.interval_busy_from;
        self.interval.queued_requests = self.listen.len() as u64;
        let measured = std::mem::take(&mut self.interval);
        self.interval_busy_from = now;
        if let Some(c) = self.controller.as_mut() {
            c.on_interval(now, &measured);
            if now >= self.cfg.measure_from && now < self.cfg.measure_to {
                let d = c.decision();
                self.intervals_in_window += 1;
                if d.admitting {
                    self.admitting_in_window += 1;
                }
                if let Some(k) = d.weight {
                    self.weight_sum += k;
                    self.weight_samples += 1;
                }
            }
        }
    }
}

/// Runs one configuration to its end (arrivals stop at the pattern's end;
/// the server then drains).
pub fn run(cfg: &RunConfig) -> RunOutcome {
    let avg_service_s = 1.0 / cfg.capacity_requests_per_s;
    let mut sim = Sim {
        cfg,
        rng: ChaCha8Rng::seed_from_u64(cfg.seed),
        queue: EventQueue::new(),
        sessions: Vec::new(),
        listen: VecDeque::with_capacity(cfg.listen_queue + 1),
        in_service: None,
        busy_since: None,
        shared: Vec::new(),
        shared_at: Nanos::ZERO,
        shared_generation: 0,
        controller: controller(&cfg.strategy, &cfg.reading),
        interval: IntervalMeasurement::default(),
        interval_busy_from: Nanos::ZERO,
        think: Exp::new(1.0 / cfg.think_time_mean.as_secs_f64().max(1e-9)).expect("positive"),
        ns_per_byte: avg_service_s * 1e9 / mean_size(),
        avg_service: Nanos::from_secs_f64(avg_service_s),
        active: 0,
        max_active: 0,
        window_busy: 0,
        window_requests: 0,
        window_rejections: 0,
        intervals_in_window: 0,
        admitting_in_window: 0,
        weight_sum: 0.0,
        weight_samples: 0,
        first_rejection_after_step: None,
        admitted_per_second: Vec::new(),
        segments: cfg
            .pattern
            .segments
            .iter()
            .map(|s| SegmentTrace {
                seconds: s.duration.as_secs_f64(),
                load: s.load,
                ..SegmentTrace::default()
            })
            .collect(),
    };
    let pattern_end = cfg.pattern.end();
    if let Some(t) = sim.next_arrival(Nanos::ZERO) {
        sim.queue.schedule(t, Event::SessionArrival);
    }
    sim.queue.schedule(cfg.interval, Event::Tick);
    let mut events = 0u64;
    let mut last = Nanos::ZERO;
    while let Some((now, event)) = sim.queue.pop() {
        // A late-seen end is bookkeeping only: it neither counts as an
        // event nor extends the simulated time past the drain.
        if !matches!(event, Event::SessionEndSeen) {
            events += 1;
            last = now;
        }
        match event {
            Event::SessionArrival => {
                if let Some(t) = sim.next_arrival(now) {
                    sim.queue.schedule(t, Event::SessionArrival);
                }
                if let Some(trace) = sim.trace_at(now) {
                    trace.session_arrivals += 1;
                }
                let length = draw_length(&mut sim.rng, cfg.session_length_mean);
                let id = sim.sessions.len() as u32;
                let counted = sim.in_window(now);
                sim.sessions.push(Session {
                    length,
                    served: 0,
                    attempt: 0,
                    retries_left: cfg.retries,
                    admitted: false,
                    counted,
                    state: State::Waiting,
                    request_sent: now,
                    request_first_attempt: 0,
                    busy: 0,
                });
                sim.active += 1;
                if let Some(limit) = cfg.reading.client_limit {
                    if sim.active > limit {
                        sim.end_session(id, State::Refused);
                        continue;
                    }
                }
                sim.max_active = sim.max_active.max(sim.active);
                sim.send(now, id, false);
            }
            Event::Send { session } => {
                let gap = now - sim.sessions[session as usize].request_sent;
                sim.interval.inter_request_sum += gap;
                sim.interval.inter_request_samples += 1;
                sim.send(now, session, false);
            }
            Event::Timeout { session, attempt } => sim.timeout(now, session, attempt),
            Event::ServiceDone => sim.service_done(now),
            Event::SharedDone { generation } => sim.shared_done(now, generation),
            Event::SessionEndSeen => sim.interval.ended_sessions += 1,
            Event::Tick => {
                sim.tick(now);
                let busy =
                    sim.in_service.is_some() || !sim.listen.is_empty() || !sim.shared.is_empty();
                if now < pattern_end || sim.active > 0 || busy {
                    sim.queue.schedule(now + cfg.interval, Event::Tick);
                }
            }
        }
    }
    summarize(&sim, events, last)
}

fn bin_of(length: u32, mean: f64) -> usize {
    let l = length as f64;
    if l <= mean {
        0
    } else if l <= 2.0 * mean {
        1
    } else {
        2
    }
}

fn summarize(sim: &Sim<'_>, events: u64, last: Nanos) -> RunOutcome {
    let cfg = sim.cfg;
    let window_s = (cfg.measure_to - cfg.measure_from).as_secs_f64().max(1e-9);
    let mean = cfg.session_length_mean;
    let mut o = RunOutcome {
        window_s,
        events,
        simulated_s: last.as_secs_f64(),
        segments: sim.segments.clone(),
        ..RunOutcome::default()
    };
    let mut completed_bins = [0u64; 3];
    let mut offered_bins = [0u64; 3];
    let (mut completed_len, mut offered_len) = (0u64, 0u64);
    let mut useful = 0u64;
    let (mut started, mut later_ok, mut later_failed) = (0u64, 0u64, 0u64);
    for s in sim.sessions.iter().filter(|s| s.counted) {
        if s.served > 0 {
            started += 1;
            later_ok += u64::from(s.served - 1);
            if s.state == State::Aborted {
                later_failed += 1;
            }
        }
        o.offered_sessions += 1;
        offered_len += s.length as u64;
        offered_bins[bin_of(s.length, mean)] += 1;
        if s.admitted {
            o.admitted_sessions += 1;
        }
        match s.state {
            State::Completed => {
                o.completed_sessions += 1;
                completed_len += s.length as u64;
                completed_bins[bin_of(s.length, mean)] += 1;
                useful += s.busy;
            }
            State::Aborted => o.aborted_sessions += 1,
            State::Rejected => o.rejected_sessions += 1,
            State::Refused => o.refused_sessions += 1,
            State::Waiting | State::Thinking => {}
        }
    }
    let per = |n: u64, d: u64| {
        if d == 0 {
            0.0
        } else {
            100.0 * n as f64 / d as f64
        }
    };
    o.completed_sessions_per_s = o.completed_sessions as f64 / window_s;
    o.started_pct = per(started, o.offered_sessions);
    o.later_success_pct = per(later_ok, later_ok + later_failed);
    o.max_in_progress = sim.max_active;
    o.aborted_pct = per(o.aborted_sessions, o.admitted_sessions);
    o.rejected_pct = per(o.rejected_sessions, o.offered_sessions);
    o.mean_completed_length = if o.completed_sessions > 0 {
        completed_len as f64 / o.completed_sessions as f64
    } else {
        0.0
    };
    o.mean_offered_length = if o.offered_sessions > 0 {
        offered_len as f64 / o.offered_sessions as f64
    } else {
        0.0
    };
    o.completed_bins = LengthBins::from_counts(completed_bins);
    o.offered_bins = LengthBins::from_counts(offered_bins);
    o.useful_utilization_pct = 100.0 * useful as f64 / 1e9 / window_s;
    o.utilization_pct = 100.0 * sim.window_busy as f64 / 1e9 / window_s;
    o.rejection_overhead_pct = per(
        sim.window_rejections,
        sim.window_requests + sim.window_rejections,
    );
    o.requests_per_s = (sim.window_requests + sim.window_rejections) as f64 / window_s;
    o.mean_weight = (sim.weight_samples > 0).then(|| sim.weight_sum / sim.weight_samples as f64);
    o.admitting_intervals_pct = per(sim.admitting_in_window, sim.intervals_in_window);
    o.time_to_first_rejection_s = sim.first_rejection_after_step.map(|d| d.as_secs_f64());
    o.admitted_rate_cv = cfg.overload_window.and_then(|(from, to)| {
        let a = (from.0 / 1_000_000_000) as usize;
        let b = (to.0 / 1_000_000_000) as usize;
        if b <= a + 1 {
            return None;
        }
        let values: Vec<f64> = (a..b)
            .map(|i| sim.admitted_per_second.get(i).copied().unwrap_or(0) as f64)
            .collect();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        if mean <= 0.0 {
            return None;
        }
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        Some(var.sqrt() / mean)
    });
    o
}

#[cfg(test)]
mod tests {
    use super::super::{LoadPattern, ModelReading, Segment};
    use super::*;
    use vantage_core::admission::session::EwmaConfig;

    fn config(load: f64, mean: f64, strategy: Strategy) -> RunConfig {
        RunConfig {
            capacity_requests_per_s: 1000.0,
            listen_queue: 1024,
            session_length_mean: mean,
            think_time_mean: Nanos::from_secs(5),
            timeout: Nanos::from_secs(1),
            retries: 1,
            rejection_cost: 1.0,
            strategy,
            interval: Nanos::from_secs(1),
            pattern: LoadPattern {
                segments: vec![Segment {
                    duration: Nanos::from_secs(400),
                    load,
                }],
            },
            measure_from: Nanos::from_secs(100),
            measure_to: Nanos::from_secs(300),
            step_at: None,
            overload_window: None,
            seed: 7,
            reading: Default::default(),
        }
    }

    #[test]
    fn light_load_completes_every_session() {
        let o = run(&config(0.5, 5.0, Strategy::None));
        assert!(o.offered_sessions > 10_000);
        assert_eq!(o.aborted_sessions + o.refused_sessions, 0);
        assert_eq!(o.completed_sessions, o.offered_sessions);
        // Half the capacity, all of it useful.
        assert!((o.utilization_pct - 50.0).abs() < 4.0, "{o:?}");
        assert!((o.useful_utilization_pct - o.utilization_pct).abs() < 4.0);
        assert!((o.mean_completed_length / 5.0 - 1.0).abs() < 0.05);
    }

    /// The per-segment trace sees every arrival and request of the run,
    /// splits busy time at segment boundaries, and follows the load: a
    /// segment from an empty server offers fewer requests than the same
    /// load after the sessions have built up.
    #[test]
    fn segment_trace_follows_the_pattern() {
        let mut cfg = config(0.5, 5.0, Strategy::None);
        cfg.pattern = LoadPattern {
            segments: vec![
                Segment {
                    duration: Nanos::from_secs(10),
                    load: 0.5,
                },
                Segment {
                    duration: Nanos::from_secs(190),
                    load: 0.5,
                },
                Segment {
                    duration: Nanos::from_secs(200),
                    load: 1.0,
                },
            ],
        };
        let o = run(&cfg);
        let t = &o.segments;
        assert_eq!(t.len(), 3);
        assert_eq!(t[1].load, 0.5);
        // Arrivals at Load · capacity / mean: 100 and 200 sessions/s.
        assert!((t[1].sessions_per_s() / 100.0 - 1.0).abs() < 0.05, "{t:?}");
        assert!((t[2].sessions_per_s() / 200.0 - 1.0).abs() < 0.05, "{t:?}");
        // Sessions of about 25 s: the first 10 s offer well under half the
        // capacity, later segments about their load.
        assert!(t[0].requests_sent_per_s() < 400.0, "{t:?}");
        assert!((t[1].utilization_pct() - 50.0).abs() < 5.0, "{t:?}");
        assert!(
            t[2].utilization_pct() > 90.0 && t[2].utilization_pct() <= 100.0,
            "{t:?}"
        );
        let served: u64 = t.iter().map(|s| s.requests_served).sum();
        let sent: u64 = t.iter().map(|s| s.requests_sent).sum();
        assert!(served <= sent && served > 0);
        let pooled = RunOutcome::pool(&[o.clone(), o.clone()]);
        assert_eq!(
            pooled.segments[2].session_arrivals,
            2 * t[2].session_arrivals
        );
        assert_eq!(pooled.segments[2].sessions_per_s(), t[2].sessions_per_s());
    }

    #[test]
    fn same_seed_same_run() {
        let a = run(&config(2.0, 5.0, Strategy::Ewma(EwmaConfig::responsive())));
        let b = run(&config(2.0, 5.0, Strategy::Ewma(EwmaConfig::responsive())));
        assert_eq!(a.events, b.events);
        assert_eq!(a.completed_sessions, b.completed_sessions);
    }

    /// Pooled repetitions count as one long run: counts add up, shares are
    /// the shares of the sums, and a run pooled with itself keeps its rates.
    #[test]
    fn pooled_runs_add_counts_and_recompute_shares() {
        let a = run(&config(2.0, 5.0, Strategy::Ewma(EwmaConfig::stable())));
        let b = run(&RunConfig {
            seed: 8,
            ..config(2.0, 5.0, Strategy::Ewma(EwmaConfig::stable()))
        });
        let p = RunOutcome::pool(&[a.clone(), b.clone()]);
        assert_eq!(
            p.admitted_sessions,
            a.admitted_sessions + b.admitted_sessions
        );
        assert_eq!(p.aborted_sessions, a.aborted_sessions + b.aborted_sessions);
        let share = 100.0 * p.aborted_sessions as f64 / p.admitted_sessions as f64;
        assert!((p.aborted_pct - share).abs() < 1e-9);
        assert_eq!(p.window_s, a.window_s + b.window_s);
        let per_s = (a.completed_sessions + b.completed_sessions) as f64 / p.window_s;
        assert!((p.completed_sessions_per_s - per_s).abs() < 1e-9);
        let lo = a.utilization_pct.min(b.utilization_pct);
        let hi = a.utilization_pct.max(b.utilization_pct);
        assert!(p.utilization_pct >= lo && p.utilization_pct <= hi);
        let same = RunOutcome::pool(&[a.clone(), a.clone()]);
        for (x, y) in [
            (same.aborted_pct, a.aborted_pct),
            (same.completed_sessions_per_s, a.completed_sessions_per_s),
            (same.mean_completed_length, a.mean_completed_length),
            (same.completed_bins.longer_pct, a.completed_bins.longer_pct),
            (same.useful_utilization_pct, a.useful_utilization_pct),
            (same.rejection_overhead_pct, a.rejection_overhead_pct),
            (same.requests_per_s, a.requests_per_s),
        ] {
            assert!((x - y).abs() < 1e-9, "{x} vs {y}");
        }
        assert_eq!(same.completed_sessions, 2 * a.completed_sessions);
    }

    fn with(reading: ModelReading, load: f64, mean: f64) -> RunOutcome {
        run(&RunConfig {
            reading,
            ..config(load, mean, Strategy::None)
        })
    }

    /// Every reading of the server leaves a lightly loaded server alone:
    /// all sessions complete, at the offered utilization.
    #[test]
    fn every_reading_completes_everything_at_light_load() {
        let readings = [
            ModelReading {
                later_requests_bypass_queue_limit: true,
                ..Default::default()
            },
            ModelReading {
                later_requests_first: true,
                ..Default::default()
            },
            ModelReading {
                retry_joins_original: true,
                ..Default::default()
            },
            ModelReading {
                skip_closed_requests: true,
                ..Default::default()
            },
            ModelReading {
                refusal_cost: 1.0,
                ..Default::default()
            },
            ModelReading {
                first_request_no_retry: true,
                ..Default::default()
            },
            ModelReading {
                processor_sharing: true,
                ..Default::default()
            },
            ModelReading {
                client_limit: Some(10_000),
                ..Default::default()
            },
        ];
        for reading in readings {
            let o = with(reading.clone(), 0.5, 5.0);
            assert_eq!(o.completed_sessions, o.offered_sessions, "{reading:?}");
            assert!((o.utilization_pct - 50.0).abs() < 4.0, "{reading:?}: {o:?}");
            assert_eq!(o.started_pct, 100.0);
            assert_eq!(o.later_success_pct, 100.0);
        }
    }

    /// The model as read: one FIFO queue for every request treats a
    /// session's first request like its later ones under overload (the
    /// paper's Figs. 3b and 4a together need first requests to fail far
    /// more often; docs/differences/sbac.md).
    #[test]
    fn fifo_server_fails_first_and_later_requests_alike() {
        let o = with(ModelReading::default(), 3.0, 15.0);
        assert!(o.started_pct < 95.0, "{o:?}");
        assert!(
            (o.started_pct - o.later_success_pct).abs() < 4.0,
            "{} vs {}",
            o.started_pct,
            o.later_success_pct
        );
    }

    #[test]
    fn serving_sessions_in_progress_first_starves_new_sessions() {
        let reading = ModelReading {
            later_requests_first: true,
            ..Default::default()
        };
        let o = with(reading, 3.0, 50.0);
        assert!(o.later_success_pct > 98.0, "{o:?}");
        assert!(o.started_pct < 60.0, "{o:?}");
    }

    #[test]
    fn dropping_abandoned_requests_saves_work_for_useful_sessions() {
        let skip = ModelReading {
            skip_closed_requests: true,
            ..Default::default()
        };
        let base = with(ModelReading::default(), 3.0, 5.0);
        let o = with(skip, 3.0, 5.0);
        assert!(
            o.useful_utilization_pct > base.useful_utilization_pct + 5.0,
            "{} vs {}",
            o.useful_utilization_pct,
            base.useful_utilization_pct
        );
    }

    #[test]
    fn client_limit_bounds_sessions_in_progress() {
        let reading = ModelReading {
            client_limit: Some(200),
            ..Default::default()
        };
        let o = with(reading, 1.0, 5.0);
        assert!(o.max_in_progress <= 200, "{}", o.max_in_progress);
        assert!(o.refused_sessions > 0);
        let free = with(ModelReading::default(), 1.0, 5.0);
        assert!(free.max_in_progress > 200);
    }

    /// Predictive's SesLength is C_r / C_e once a session has ended, and
    /// C_r / C_s (too short while sessions are in progress: more admitted)
    /// before. A server that learns ends only after T idle (the live
    /// proxy) has no C_e during a 200-s overload of 250-s sessions, so it
    /// admits more than one told of each end at once.
    #[test]
    fn ends_seen_after_the_idle_timeout_leave_predictive_less_cautious() {
        let day = |seen_after| {
            let mut c = config(3.0, 50.0, Strategy::Predictive(Default::default()));
            c.pattern.segments[0].duration = Nanos::from_secs(200);
            (c.measure_from, c.measure_to) = (Nanos::ZERO, Nanos::from_secs(200));
            c.reading.session_end_seen_after = seen_after;
            run(&c)
        };
        let at_once = day(None);
        let late = day(Some(Nanos::from_secs(300)));
        assert!(
            2.0 * late.rejected_pct < at_once.rejected_pct,
            "rejected: {:.1} % seen late, {:.1} % seen at once",
            late.rejected_pct,
            at_once.rejected_pct
        );
    }

    #[test]
    fn overload_without_control_discriminates_against_long_sessions() {
        let o = run(&config(3.0, 15.0, Strategy::None));
        assert!(o.mean_completed_length < 0.6 * 15.0, "{o:?}");
        assert!(o.completed_bins.up_to_mean_pct > o.offered_bins.up_to_mean_pct + 15.0);
        assert!(o.useful_utilization_pct < 40.0);
    }
}
