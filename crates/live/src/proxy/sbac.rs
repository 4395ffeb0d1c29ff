//! SBAC in front of the proxy (Sections 2–4, 7, 11, 12 of
//! `session-admission-control.txt`): a plain wrapper ([`Sbac`]) the server
//! calls before forwarding — tower is not used, the proxy has one service.
//!
//! A request whose cookie verifies ([`SessionGate`], `core`'s
//! [`TokenSigner`]: keys rotated, maximum age, issue time kept) passes and
//! its cookie is refreshed once T/16 has passed (each connection keeps
//! `core`'s `TokenMemo`, so the same cookie again costs no HMAC); any
//! other request is a new session and the
//! configured controller — `core`'s own [`EwmaController`],
//! [`HybridController`] or [`PredictiveController`], never a copy —
//! admits it (a `Set-Cookie`) or rejects it (`503` with `Retry-After` and a
//! small page, or a `302` to another URL: Section 1's "come back later").
//!
//! At the end of each ac-interval the driver ([`Sbac::end_interval`]) feeds
//! the controller one [`IntervalMeasurement`] of what was seen live: the
//! utilization, aborted requests and refused connections (Ab(i)), new,
//! admitted and ended sessions and the requests of admitted sessions
//! (Eq. 7's Load, C_s, C_r), rejections and inter-request gaps.
//!
//! Sessions in progress are tracked in a table (at most
//! `sbac.max_tracked_sessions`; beyond it an admitted session still works
//! but is counted as untracked) so that their end — idle for T or past the
//! maximum age — is seen and counted. Instants are wall-clock nanoseconds
//! since the Unix epoch, never going back within a process, so a token's
//! issue time keeps its meaning across restarts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use vantage_core::admission::session::{
    Decision, EwmaConfig, EwmaController, GateVerdict, HybridConfig, HybridController,
    IntervalMeasurement, PredictiveConfig, PredictiveController, SessionAdmission,
    SessionConfigError, SessionGate, TokenError, TokenMemo, TokenSigner,
};
use vantage_core::Nanos;

use super::config::{Reject, SbacConfig, Strategy};

/// One of the paper's controllers.
#[derive(Debug)]
pub enum Controller {
    Ewma(EwmaController),
    Hybrid(HybridController),
    Predictive(PredictiveController),
}

impl Controller {
    pub fn new(config: &SbacConfig) -> Result<Controller, SessionConfigError> {
        let threshold = config.target_utilization;
        Ok(match config.strategy {
            Strategy::Stable => Controller::Ewma(EwmaController::new(EwmaConfig {
                threshold,
                ..EwmaConfig::stable()
            })?),
            Strategy::Responsive => Controller::Ewma(EwmaController::new(EwmaConfig {
                threshold,
                ..EwmaConfig::responsive()
            })?),
            Strategy::Hybrid => Controller::Hybrid(HybridController::new(HybridConfig {
                threshold,
                ..HybridConfig::default()
            })?),
            Strategy::Predictive => {
                Controller::Predictive(PredictiveController::new(PredictiveConfig {
                    threshold,
                    capacity_requests_per_s: config.capacity_requests_per_s,
                    // The table below counts a session ended once idle for T.
                    end_seen_after: Some(Nanos::from_secs(config.session_timeout_s)),
                    ..PredictiveConfig::default()
                })?)
            }
        })
    }
}

impl SessionAdmission for Controller {
    fn on_interval(&mut self, now: Nanos, measured: &IntervalMeasurement) {
        match self {
            Controller::Ewma(c) => c.on_interval(now, measured),
            Controller::Hybrid(c) => c.on_interval(now, measured),
            Controller::Predictive(c) => c.on_interval(now, measured),
        }
    }

    fn admit_new_session(&mut self, now: Nanos) -> bool {
        match self {
            Controller::Ewma(c) => c.admit_new_session(now),
            Controller::Hybrid(c) => c.admit_new_session(now),
            Controller::Predictive(c) => c.admit_new_session(now),
        }
    }

    fn decision(&self) -> Decision {
        match self {
            Controller::Ewma(c) => c.decision(),
            Controller::Hybrid(c) => c.decision(),
            Controller::Predictive(c) => c.decision(),
        }
    }
}

/// The signer of a configuration: its keys and maximum age.
pub fn signer(config: &SbacConfig) -> Result<TokenSigner, TokenError> {
    Ok(TokenSigner::with_keys(&config.keys)?
        .with_max_age(Nanos::from_secs(config.max_session_age_s)))
}

/// What the proxy does with one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Forward it, and set this cookie (`Set-Cookie` value) when there is
    /// one (a session in progress gets a new token only once T/16 has
    /// passed: `core`'s `SessionGate`).
    Pass {
        session_id: u64,
        new_session: bool,
        /// Whether the session's last request was answered well, as the
        /// table has it ([`Sbac::on_response`] need not write it again).
        last_ok: bool,
        set_cookie: Option<String>,
        /// Why a cookie the client sent did not count.
        refused_token: Option<TokenError>,
    },
    /// Answer with the rejection.
    Reject { refused_token: Option<TokenError> },
}

impl Verdict {
    /// The access log's name for it.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Pass {
                new_session: false, ..
            } => "continue",
            Verdict::Pass { .. } => "admitted",
            Verdict::Reject { .. } => "rejected",
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Tracked {
    issued: Nanos,
    last: Nanos,
    /// Whether its last request was answered without a failure.
    last_ok: bool,
}

/// Counts of one interval, added to by the data path.
#[derive(Debug, Default)]
pub struct IntervalCounts {
    pub aborted_requests: AtomicU64,
    pub refused_connections: AtomicU64,
    pub session_requests: AtomicU64,
}

/// What one interval ended with, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IntervalReport {
    pub measurement: IntervalMeasurement,
    pub ended_idle: u64,
    pub ended_max_age: u64,
    pub active: u64,
    pub decision: Decision,
}

/// Hashes a session id by one multiplication. Ids are minted by the proxy
/// (consecutive from a random start, carried in signed tokens), never
/// chosen by a client, so the table needs no keyed hash against collision
/// attacks; SipHash cost some hundred instructions per request.
#[derive(Default)]
struct SessionIdHasher(u64);

impl std::hash::Hasher for SessionIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: consecutive ids spread over the high bits
        // (the table's tag) and the low ones (its bucket).
        self.0 = (self.0 ^ id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type SessionTable = HashMap<u64, Tracked, std::hash::BuildHasherDefault<SessionIdHasher>>;

struct State {
    gate: SessionGate<Controller>,
    sessions: SessionTable,
    new_sessions: u64,
    admitted_sessions: u64,
    rejections: u64,
    inter_request_sum: Nanos,
    inter_request_samples: u64,
    untracked: u64,
    last_now: Nanos,
}

/// The admission layer.
pub struct Sbac {
    state: Mutex<State>,
    pub counts: IntervalCounts,
    cookie: String,
    idle_timeout: Nanos,
    max_age: Nanos,
    max_tracked: usize,
}

impl std::fmt::Debug for Sbac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sbac")
            .field("cookie", &self.cookie)
            .finish()
    }
}

/// Why the layer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SbacError {
    #[error("session controller: {0}")]
    Controller(#[from] SessionConfigError),
    #[error("session keys: {0}")]
    Keys(#[from] TokenError),
}

/// Wall-clock nanoseconds since the Unix epoch.
pub fn wall_clock() -> Nanos {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Nanos(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
}

/// A random first session id (ids of a restarted proxy do not repeat
/// those of its earlier run).
fn random_u64() -> u64 {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => wall_clock().0 ^ u64::from(std::process::id()).rotate_left(32),
    }
}

impl Sbac {
    pub fn new(config: &SbacConfig) -> Result<Sbac, SbacError> {
        let gate = SessionGate::new(
            Controller::new(config)?,
            signer(config)?,
            Nanos::from_secs(config.session_timeout_s),
            random_u64(),
        );
        Ok(Sbac {
            state: Mutex::new(State {
                gate,
                sessions: SessionTable::default(),
                new_sessions: 0,
                admitted_sessions: 0,
                rejections: 0,
                inter_request_sum: Nanos::ZERO,
                inter_request_samples: 0,
                untracked: 0,
                last_now: Nanos::ZERO,
            }),
            counts: IntervalCounts::default(),
            cookie: config.cookie.clone(),
            idle_timeout: Nanos::from_secs(config.session_timeout_s),
            max_age: Nanos::from_secs(config.max_session_age_s),
            max_tracked: config.max_tracked_sessions,
        })
    }

    /// Takes over the sessions in progress and the counts of `old` (a
    /// reload: the controller starts afresh from the new parameters; the
    /// table and the current interval's counts carry on).
    pub fn take_over(&self, old: &Sbac) {
        let (Ok(mut new), Ok(mut old_state)) = (self.state.lock(), old.state.lock()) else {
            return;
        };
        new.sessions = std::mem::take(&mut old_state.sessions);
        new.new_sessions = old_state.new_sessions;
        new.admitted_sessions = old_state.admitted_sessions;
        new.rejections = old_state.rejections;
        new.inter_request_sum = old_state.inter_request_sum;
        new.inter_request_samples = old_state.inter_request_samples;
        new.last_now = old_state.last_now;
        for (mine, theirs) in [
            (&self.counts.aborted_requests, &old.counts.aborted_requests),
            (
                &self.counts.refused_connections,
                &old.counts.refused_connections,
            ),
            (&self.counts.session_requests, &old.counts.session_requests),
        ] {
            mine.fetch_add(theirs.swap(0, Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    pub fn cookie_name(&self) -> &str {
        &self.cookie
    }

    fn now(state: &mut State) -> Nanos {
        let now = wall_clock().max(state.last_now);
        state.last_now = now;
        now
    }

    /// The cookie value a request carries (the first cookie of our name),
    /// read from the header's bytes: no allocation, no pass to check the
    /// whole header first.
    pub fn find_cookie<'a>(&self, headers: &'a hyper::HeaderMap) -> Option<&'a str> {
        let name = self.cookie.as_bytes();
        for header in headers.get_all(hyper::header::COOKIE) {
            let mut rest = header.as_bytes();
            loop {
                // `memchr` looks for the `;` a word at a time, not a byte.
                let end = memchr::memchr(b';', rest).unwrap_or(rest.len());
                let pair = rest[..end].trim_ascii();
                if let Some(value) = pair.strip_prefix(name).and_then(|p| p.strip_prefix(b"=")) {
                    let value = value.trim_ascii();
                    let value = value
                        .strip_prefix(b"\"")
                        .and_then(|v| v.strip_suffix(b"\""))
                        .unwrap_or(value);
                    if let Ok(value) = std::str::from_utf8(value) {
                        return Some(value);
                    }
                }
                match rest.get(end + 1..) {
                    Some(after) => rest = after,
                    None => break,
                }
            }
        }
        None
    }

    /// The verdict for a request carrying `cookie`.
    pub fn on_request(&self, cookie: Option<&str>) -> Verdict {
        self.on_request_remembering(cookie, &mut TokenMemo::new())
    }

    /// As [`Sbac::on_request`], with `memo` the last token that
    /// authenticated on the request's connection (`core`'s [`TokenMemo`]:
    /// the same cookie again costs no HMAC).
    pub fn on_request_remembering(&self, cookie: Option<&str>, memo: &mut TokenMemo) -> Verdict {
        // The state stays consistent at every step, so a panic elsewhere
        // while it was held (a poisoned lock) does not stop admission.
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Sbac::now(&mut state);
        let verdict = state.gate.on_request_remembering(now, cookie, memo);
        let set_cookie = |token: &str| {
            format!(
                "{}={token}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax",
                self.cookie,
                self.idle_timeout.0 / 1_000_000_000
            )
        };
        match verdict {
            GateVerdict::Continue {
                session_id,
                issued,
                token,
            } => {
                let tracked_len = state.sessions.len();
                let mut last_ok = true;
                match state.sessions.get_mut(&session_id) {
                    Some(t) => {
                        let gap = now.saturating_sub(t.last);
                        t.last = now;
                        last_ok = t.last_ok;
                        state.inter_request_sum += gap;
                        state.inter_request_samples += 1;
                    }
                    // Admitted before a restart or a reload of the table.
                    None if tracked_len < self.max_tracked => {
                        state.sessions.insert(
                            session_id,
                            Tracked {
                                issued,
                                last: now,
                                last_ok: true,
                            },
                        );
                    }
                    None => {}
                }
                Verdict::Pass {
                    session_id,
                    new_session: false,
                    last_ok,
                    set_cookie: token.as_deref().map(set_cookie),
                    refused_token: None,
                }
            }
            GateVerdict::Admitted {
                session_id,
                token,
                presented,
            } => {
                state.new_sessions += 1;
                state.admitted_sessions += 1;
                if state.sessions.len() < self.max_tracked {
                    state.sessions.insert(
                        session_id,
                        Tracked {
                            issued: now,
                            last: now,
                            last_ok: true,
                        },
                    );
                } else {
                    state.untracked += 1;
                }
                Verdict::Pass {
                    session_id,
                    new_session: true,
                    last_ok: true,
                    set_cookie: Some(set_cookie(&token)),
                    refused_token: presented,
                }
            }
            GateVerdict::Rejected { presented } => {
                state.new_sessions += 1;
                state.rejections += 1;
                Verdict::Reject {
                    refused_token: presented,
                }
            }
        }
    }

    /// The answer to a request of `session_id` ended, well or not;
    /// `last_ok` is what its verdict said of the session's answer before.
    /// The table is written only when that changes (a request of the same
    /// session answered in between, over another connection, may have
    /// written it already: then the last to end is not always the one kept).
    pub fn on_response(&self, session_id: u64, ok: bool, last_ok: bool) {
        if ok {
            self.counts.session_requests.fetch_add(1, Ordering::Relaxed);
        }
        if ok == last_ok {
            return;
        }
        if let Ok(mut state) = self.state.lock() {
            if let Some(t) = state.sessions.get_mut(&session_id) {
                t.last_ok = ok;
            }
        }
    }

    /// Admitted sessions not tracked since the last call.
    pub fn take_untracked(&self) -> u64 {
        self.state
            .lock()
            .map(|mut s| std::mem::take(&mut s.untracked))
            .unwrap_or(0)
    }

    pub fn decision(&self) -> Decision {
        self.state
            .lock()
            .map(|s| s.gate.controller().decision())
            .unwrap_or_default()
    }

    /// Ends an ac-interval of `elapsed` with utilization `utilization` and
    /// `queued` requests waiting: sweeps ended sessions, feeds the
    /// controller, and says what it did.
    pub fn end_interval(&self, elapsed: Duration, utilization: f64, queued: u64) -> IntervalReport {
        let Ok(mut state) = self.state.lock() else {
            return IntervalReport::default();
        };
        let now = Sbac::now(&mut state);
        let (idle_timeout, max_age) = (self.idle_timeout, self.max_age);
        let (mut ended_idle, mut ended_max_age, mut ended_ok) = (0, 0, 0);
        state.sessions.retain(|_, t| {
            let idle = t.last.saturating_add(idle_timeout) <= now;
            let aged = t.issued.saturating_add(max_age) <= now;
            if idle || aged {
                if aged && !idle {
                    ended_max_age += 1;
                } else {
                    ended_idle += 1;
                }
                if t.last_ok {
                    ended_ok += 1;
                }
            }
            !(idle || aged)
        });
        let elapsed_ns = Nanos(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
        let measurement = IntervalMeasurement {
            elapsed: elapsed_ns,
            busy: Nanos((elapsed_ns.0 as f64 * utilization.clamp(0.0, 1.0)) as u64),
            aborted_requests: self.counts.aborted_requests.swap(0, Ordering::Relaxed),
            refused_connections: self.counts.refused_connections.swap(0, Ordering::Relaxed),
            new_sessions: std::mem::take(&mut state.new_sessions),
            admitted_sessions: std::mem::take(&mut state.admitted_sessions),
            session_requests: self.counts.session_requests.swap(0, Ordering::Relaxed),
            ended_sessions: ended_ok,
            queued_requests: queued,
            rejections: std::mem::take(&mut state.rejections),
            inter_request_sum: std::mem::take(&mut state.inter_request_sum),
            inter_request_samples: std::mem::take(&mut state.inter_request_samples),
        };
        state.gate.controller_mut().on_interval(now, &measurement);
        IntervalReport {
            measurement,
            ended_idle,
            ended_max_age,
            active: state.sessions.len() as u64,
            decision: state.gate.controller().decision(),
        }
    }
}

/// The rejection of a new session.
pub fn rejection(reject: &Reject, retry_after_s: u64) -> hyper::Response<bytes::Bytes> {
    use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, LOCATION, RETRY_AFTER};
    let mut response = hyper::Response::new(bytes::Bytes::new());
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    match reject {
        Reject::Page(page) => {
            *response.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
            let headers = response.headers_mut();
            headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            *response.body_mut() = bytes::Bytes::copy_from_slice(page.as_bytes());
        }
        Reject::Redirect(url) => {
            *response.status_mut() = hyper::StatusCode::FOUND;
            if let Ok(location) = HeaderValue::from_str(url) {
                response.headers_mut().insert(LOCATION, location);
            }
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(strategy: Strategy) -> SbacConfig {
        SbacConfig {
            strategy,
            interval_s: 1.0,
            target_utilization: 0.9,
            session_timeout_s: 60,
            max_session_age_s: 600,
            keys: vec![b"0123456789abcdef".to_vec()],
            cookie: "s".into(),
            retry_after_s: 7,
            max_tracked_sessions: 2,
            capacity_requests_per_s: None,
            reject: Reject::Page("busy".into()),
        }
    }

    #[test]
    fn admit_then_continue_then_reject_new_under_overload() {
        let sbac = Sbac::new(&config(Strategy::Responsive)).unwrap();
        let Verdict::Pass {
            set_cookie: Some(set_cookie),
            new_session: true,
            session_id,
            ..
        } = sbac.on_request(None)
        else {
            panic!("an idle proxy admits, with a cookie");
        };
        assert!(set_cookie.ends_with("; Path=/; Max-Age=60; HttpOnly; SameSite=Lax"));
        let token = set_cookie
            .strip_prefix("s=")
            .and_then(|r| r.split(';').next())
            .unwrap()
            .to_string();
        sbac.on_response(session_id, true, true);
        let report = sbac.end_interval(Duration::from_secs(1), 1.0, 0);
        assert_eq!(report.measurement.new_sessions, 1);
        assert_eq!(report.measurement.admitted_sessions, 1);
        assert_eq!(report.measurement.session_requests, 1);
        assert_eq!(report.active, 1);
        assert!(!report.decision.admitting);
        let mut headers = hyper::HeaderMap::new();
        headers.insert(
            hyper::header::COOKIE,
            format!("a=b; s={token}; c=d").parse().unwrap(),
        );
        assert_eq!(sbac.find_cookie(&headers), Some(token.as_str()));
        let verdict = sbac.on_request(Some(&token));
        assert!(
            matches!(
                verdict,
                Verdict::Pass {
                    new_session: false,
                    set_cookie: None,
                    ..
                }
            ),
            "a session in progress passes under overload, its fresh cookie kept: {verdict:?}"
        );
        assert_eq!(sbac.on_request(None).name(), "rejected");
        assert_eq!(
            sbac.on_request(Some("forged")),
            Verdict::Reject {
                refused_token: Some(TokenError::Malformed)
            }
        );
        let report = sbac.end_interval(Duration::from_secs(1), 0.1, 0);
        assert_eq!(report.measurement.rejections, 2);
        assert_eq!(report.measurement.inter_request_samples, 1);
        let response = rejection(&Reject::Page("busy".into()), 7);
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["retry-after"], "7");
        let response = rejection(&Reject::Redirect("https://example.org/".into()), 7);
        assert_eq!(response.status(), 302);
        assert_eq!(response.headers()["location"], "https://example.org/");
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let sbac = Sbac::new(&config(Strategy::Stable)).unwrap();
        let find = |values: &[&str]| {
            let mut headers = hyper::HeaderMap::new();
            for v in values {
                headers.append(hyper::header::COOKIE, v.parse().unwrap());
            }
            sbac.find_cookie(&headers).map(str::to_string)
        };
        assert_eq!(find(&["s=abc"]), Some("abc".into()));
        assert_eq!(find(&["ss=no; xs=no;s=yes"]), Some("yes".into()));
        assert_eq!(find(&["a=b", "c=d;  s=\"q\" ; s=second"]), Some("q".into()));
        assert_eq!(find(&["a=b; ss=c; s"]), None);
        assert_eq!(find(&[";;"]), None);
        assert_eq!(find(&[]), None);
    }

    #[test]
    fn every_strategy_builds_and_decides() {
        for strategy in [
            Strategy::Stable,
            Strategy::Responsive,
            Strategy::Hybrid,
            Strategy::Predictive,
        ] {
            let sbac = Sbac::new(&config(strategy)).unwrap();
            assert_eq!(sbac.on_request(None).name(), "admitted", "{strategy:?}");
            let report = sbac.end_interval(Duration::from_secs(1), 0.5, 0);
            assert_eq!(report.measurement.new_sessions, 1, "{strategy:?}");
        }
    }

    #[test]
    fn the_session_table_is_capped() {
        let sbac = Sbac::new(&config(Strategy::Stable)).unwrap();
        for _ in 0..5 {
            assert_eq!(sbac.on_request(None).name(), "admitted");
        }
        assert_eq!(sbac.take_untracked(), 3);
        let report = sbac.end_interval(Duration::from_secs(1), 0.0, 0);
        assert_eq!(report.active, 2);
    }
}
