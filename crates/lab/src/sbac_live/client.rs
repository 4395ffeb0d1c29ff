//! The session clients of the live SBAC experiment, measured at the client.
//!
//! Each session follows the SBAC paper's client model (Section 3): it
//! arrives (Poisson, at the rate of the current load segment), makes a
//! geometrically distributed number of requests (mean L) separated by
//! exponential think times, waits at most `timeout` for each reply and
//! retries a failed request `retries` times before giving up. Every request
//! is HTTP/1.1 on its own connection (`Connection: close`), carrying the
//! cookie the server last set.
//!
//! Departure from the brief's httperf `--wsess`: httperf counts a `503`
//! reply as a completed call, so a rejected session and a completed one look
//! the same in its summary, and its sessions have a fixed length; this client
//! classifies each session by what its requests got and keeps every
//! response time (for p50 and p99). Written by hand because no HTTP load
//! crate models sessions with cookies, think times and retries.
//!
//! Every session ends in exactly one [`SessionOutcome`]; sessions still
//! running when the drain limit passes are `Unfinished`, counted, never
//! dropped. A warm-up before the segments (the plan's schedule, which the
//! simulator runs too) loads the backend with sessions that are run but
//! not counted. Per segment the clients record what they sent and how late
//! the open-loop generator started its arrivals ([`SegmentTraffic`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

/// Largest response read, bytes; a longer one is a failure.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// How a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionOutcome {
    /// Every request got a 2xx reply.
    Completed,
    /// The first request got a 2xx, a later one failed (after its retries)
    /// or was answered with a non-2xx status.
    Aborted,
    /// The first request was answered with a non-2xx status (503, 429, …):
    /// the server's "come back later".
    Rejected,
    /// The first request got no reply (time-out, reset, refusal) after its
    /// retries.
    FailedAtStart,
    /// Still running at the drain limit.
    Unfinished,
}

/// One session as the client saw it.
#[derive(Clone, Debug, Serialize)]
pub struct SessionRecord {
    /// Index of the load segment the session arrived in; `None` for the
    /// warm-up's sessions, which are run but not counted.
    pub segment: Option<usize>,
    pub planned_requests: u32,
    /// Requests answered 2xx.
    pub ok_requests: u32,
    pub outcome: SessionOutcome,
    /// Failed attempts (time-outs, resets, refusals, non-2xx replies).
    pub failed_attempts: u32,
}

/// A load segment: `sessions_per_s` for `seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Segment {
    pub sessions_per_s: f64,
    pub seconds: f64,
}

/// What the clients do.
#[derive(Clone, Debug)]
pub struct ClientPlan {
    pub target: SocketAddr,
    pub uri: String,
    /// Before the segments, at the first load; its sessions are run, not
    /// counted (`seconds` 0: none).
    pub warmup: Segment,
    pub segments: Vec<Segment>,
    pub session_length_mean: f64,
    pub think_time_s: f64,
    pub timeout_s: f64,
    pub retries: u32,
    /// After the last arrival, how long running sessions may take.
    pub drain_s: f64,
    pub seed: u64,
    /// Sessions at most (a bound on memory and sockets).
    pub max_sessions: usize,
}

/// All sessions and the response times of 2xx replies.
#[derive(Debug, Default)]
pub struct ClientResult {
    pub sessions: Vec<SessionRecord>,
    /// Response time of each 2xx reply of a session whose first request
    /// was answered 2xx, from the first attempt's start (retries included),
    /// seconds.
    pub response_times_s: Vec<f64>,
    /// Arrivals not started because `max_sessions` was reached.
    pub not_started: u64,
    /// From the pattern's start (after the warm-up) to the last session's
    /// end or the drain limit, seconds.
    pub elapsed_s: f64,
    /// What the clients sent during the warm-up and each segment.
    pub warmup_traffic: SegmentTraffic,
    pub traffic: Vec<SegmentTraffic>,
}

/// An arrival started later than this after its scheduled time counts as
/// late (the generator fell behind its open-loop schedule).
pub const LATE_ARRIVAL_S: f64 = 0.1;

/// What the clients sent while one segment lasted, by the time it was
/// sent: the offered load the backend saw, and whether the generator kept
/// its schedule.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SegmentTraffic {
    pub seconds: f64,
    pub session_arrivals: u64,
    /// Planned arrivals (the schedule's, before `max_sessions`).
    pub planned_arrivals: u64,
    /// Request attempts sent (retries included).
    pub requests_sent: u64,
    /// Attempts answered 2xx.
    pub requests_ok: u64,
    /// Arrivals started more than [`LATE_ARRIVAL_S`] after their time.
    pub late_arrivals: u64,
    /// Largest delay of an arrival past its time, seconds.
    pub max_lateness_s: f64,
}

impl SegmentTraffic {
    fn per_s(&self, n: u64) -> f64 {
        if self.seconds > 0.0 {
            n as f64 / self.seconds
        } else {
            0.0
        }
    }

    pub fn sessions_per_s(&self) -> f64 {
        self.per_s(self.session_arrivals)
    }

    pub fn requests_sent_per_s(&self) -> f64 {
        self.per_s(self.requests_sent)
    }

    pub fn requests_ok_per_s(&self) -> f64 {
        self.per_s(self.requests_ok)
    }
}

/// The run's clock: when it started and where each slot (the warm-up,
/// then each segment) ends, seconds from the start.
struct Timeline {
    start: Instant,
    ends: Vec<f64>,
}

impl Timeline {
    /// The slot holding `now` (0: the warm-up); `None` after the pattern.
    fn slot(&self, now: Instant) -> Option<usize> {
        let t = now.saturating_duration_since(self.start).as_secs_f64();
        self.ends.iter().position(|&end| t < end)
    }
}

#[derive(Debug)]
enum Attempt {
    Status(u16, Option<String>),
    Failed,
}

/// One request on its own connection, within `deadline`.
async fn request(
    target: SocketAddr,
    uri: &str,
    cookie: Option<&str>,
    deadline: Instant,
) -> Attempt {
    let work = async {
        let mut stream = TcpStream::connect(target).await.ok()?;
        let mut head = format!("GET {uri} HTTP/1.1\r\nHost: vantage\r\nConnection: close\r\n");
        if let Some(cookie) = cookie {
            head.push_str(&format!("Cookie: {cookie}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.ok()?;
        let mut bytes = Vec::new();
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let n = stream.read(&mut buffer).await.ok()?;
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&buffer[..n]);
            if bytes.len() > MAX_RESPONSE_BYTES {
                return None;
            }
            if complete(&bytes) {
                break;
            }
        }
        parse(&bytes)
    };
    match timeout_at(deadline, work).await {
        Ok(Some((status, cookie))) => Attempt::Status(status, cookie),
        _ => Attempt::Failed,
    }
}

/// Whether `bytes` hold a whole response framed by `Content-Length`.
fn complete(bytes: &[u8]) -> bool {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&bytes[..end]);
    let length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())
            .flatten()
    });
    length.is_some_and(|n| bytes.len() >= end + 4 + n)
}

/// Status and the first `Set-Cookie` pair of a response; `None` when the
/// head is incomplete or the body is shorter than its `Content-Length`.
fn parse(bytes: &[u8]) -> Option<(u16, Option<String>)> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]);
    let mut lines = head.lines();
    let status: u16 = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let mut cookie = None;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("set-cookie") && cookie.is_none() {
            cookie = value.split(';').next().map(|p| p.trim().to_string());
        }
        if name.trim().eq_ignore_ascii_case("content-length") {
            length = value.trim().parse::<usize>().ok();
        }
    }
    if let Some(n) = length {
        if bytes.len() < end + 4 + n {
            return None;
        }
    }
    Some((status, cookie))
}

fn exponential(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    if mean <= 0.0 {
        return 0.0;
    }
    let u: f64 = rng.gen_range(f64::EPSILON..1.0);
    -mean * u.ln()
}

/// Geometric on {1, 2, …} with mean `mean`.
fn geometric(rng: &mut ChaCha8Rng, mean: f64) -> u32 {
    let p = (1.0 / mean.max(1.0)).clamp(1e-6, 1.0);
    let mut n = 1u32;
    while n < 100_000 && rng.gen::<f64>() >= p {
        n += 1;
    }
    n
}

struct Shared {
    sessions: Vec<Option<SessionRecord>>,
    response_times_s: Vec<f64>,
    /// The warm-up, then each segment.
    traffic: Vec<SegmentTraffic>,
}

impl Shared {
    fn count(&mut self, timeline: &Timeline, at: Instant, ok: bool) {
        if let Some(t) = timeline.slot(at).and_then(|i| self.traffic.get_mut(i)) {
            t.requests_sent += 1;
            if ok {
                t.requests_ok += 1;
            }
        }
    }
}

async fn session(
    plan: Arc<ClientPlan>,
    timeline: Arc<Timeline>,
    index: usize,
    segment: Option<usize>,
    length: u32,
    seed: u64,
    shared: Arc<Mutex<Shared>>,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut cookie: Option<String> = None;
    let mut record = SessionRecord {
        segment,
        planned_requests: length,
        ok_requests: 0,
        outcome: SessionOutcome::Completed,
        failed_attempts: 0,
    };
    let mut times = Vec::new();
    'calls: for call in 0..length {
        if call > 0 {
            let think = exponential(&mut rng, plan.think_time_s);
            tokio::time::sleep(Duration::from_secs_f64(think)).await;
        }
        let started = Instant::now();
        let mut attempts = 0;
        loop {
            let sent = Instant::now();
            let deadline = sent + Duration::from_secs_f64(plan.timeout_s);
            let attempt = request(plan.target, &plan.uri, cookie.as_deref(), deadline).await;
            let ok = matches!(attempt, Attempt::Status(status, _) if (200..300).contains(&status));
            shared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .count(&timeline, sent, ok);
            match attempt {
                Attempt::Status(status, set) if (200..300).contains(&status) => {
                    if set.is_some() {
                        cookie = set;
                    }
                    record.ok_requests += 1;
                    times.push(started.elapsed().as_secs_f64());
                    continue 'calls;
                }
                Attempt::Status(_, _) => {
                    // An answer that refuses: no retry (the server spoke).
                    record.failed_attempts += 1;
                    record.outcome = if call == 0 {
                        SessionOutcome::Rejected
                    } else {
                        SessionOutcome::Aborted
                    };
                    break 'calls;
                }
                Attempt::Failed => {
                    record.failed_attempts += 1;
                    attempts += 1;
                    if attempts > plan.retries {
                        record.outcome = if call == 0 {
                            SessionOutcome::FailedAtStart
                        } else {
                            SessionOutcome::Aborted
                        };
                        break 'calls;
                    }
                }
            }
        }
    }
    let mut shared = shared.lock().unwrap_or_else(|e| e.into_inner());
    if segment.is_some()
        && record.outcome != SessionOutcome::Rejected
        && record.outcome != SessionOutcome::FailedAtStart
    {
        shared.response_times_s.extend(times);
    }
    shared.sessions[index] = Some(record);
}

/// Runs the plan on a current-thread runtime of the calling thread (so a
/// thread that entered a client namespace opens every socket there).
pub fn run(plan: ClientPlan) -> std::io::Result<ClientResult> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let plan = Arc::new(plan);
    Ok(runtime.block_on(async move {
        let mut rng = ChaCha8Rng::seed_from_u64(plan.seed);
        // The arrival schedule, open loop: a slow server does not slow it.
        // Slot 0 is the warm-up, slot i + 1 the pattern's segment i.
        let slots: Vec<Segment> = std::iter::once(plan.warmup)
            .chain(plan.segments.iter().copied())
            .collect();
        let mut arrivals: Vec<(f64, usize, u32)> = Vec::new();
        let mut traffic: Vec<SegmentTraffic> = Vec::with_capacity(slots.len());
        let mut ends = Vec::with_capacity(slots.len());
        let mut not_started = 0u64;
        let mut offset = 0.0;
        for (slot, segment) in slots.iter().enumerate() {
            let mut planned = 0u64;
            let mut t = offset;
            loop {
                t += exponential(&mut rng, 1.0 / segment.sessions_per_s.max(1e-9));
                if t >= offset + segment.seconds {
                    break;
                }
                planned += 1;
                if arrivals.len() >= plan.max_sessions {
                    not_started += 1;
                    continue;
                }
                let length = geometric(&mut rng, plan.session_length_mean);
                arrivals.push((t, slot, length));
            }
            offset += segment.seconds;
            ends.push(offset);
            traffic.push(SegmentTraffic {
                seconds: segment.seconds,
                planned_arrivals: planned,
                ..SegmentTraffic::default()
            });
        }
        let shared = Arc::new(Mutex::new(Shared {
            sessions: vec![None; arrivals.len()],
            response_times_s: Vec::new(),
            traffic,
        }));
        let timeline = Arc::new(Timeline {
            start: Instant::now(),
            ends,
        });
        let start = timeline.start;
        let mut tasks = Vec::with_capacity(arrivals.len());
        for (index, (at, slot, length)) in arrivals.iter().copied().enumerate() {
            let due = start + Duration::from_secs_f64(at);
            tokio::time::sleep_until(due).await;
            let late = Instant::now().saturating_duration_since(due).as_secs_f64();
            {
                let mut shared = shared.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(t) = shared.traffic.get_mut(slot) {
                    t.session_arrivals += 1;
                    t.max_lateness_s = t.max_lateness_s.max(late);
                    if late > LATE_ARRIVAL_S {
                        t.late_arrivals += 1;
                    }
                }
            }
            let seed = plan.seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            tasks.push(tokio::spawn(session(
                Arc::clone(&plan),
                Arc::clone(&timeline),
                index,
                slot.checked_sub(1),
                length,
                seed,
                Arc::clone(&shared),
            )));
        }
        let drain_until = start + Duration::from_secs_f64(offset + plan.drain_s);
        for task in &mut tasks {
            if timeout_at(drain_until, &mut *task).await.is_err() {
                break;
            }
        }
        for task in &tasks {
            task.abort();
        }
        // From the pattern's start: the warm-up is not part of the run's time.
        let elapsed_s = start.elapsed().as_secs_f64() - plan.warmup.seconds;
        let shared = shared.lock().unwrap_or_else(|e| e.into_inner());
        let sessions = shared
            .sessions
            .iter()
            .zip(&arrivals)
            .map(|(s, (_, slot, length))| {
                s.clone().unwrap_or(SessionRecord {
                    segment: slot.checked_sub(1),
                    planned_requests: *length,
                    ok_requests: 0,
                    outcome: SessionOutcome::Unfinished,
                    failed_attempts: 0,
                })
            })
            .collect();
        let mut traffic = shared.traffic.clone();
        let warmup_traffic = if traffic.is_empty() {
            SegmentTraffic::default()
        } else {
            traffic.remove(0)
        };
        ClientResult {
            sessions,
            response_times_s: shared.response_times_s.clone(),
            not_started,
            elapsed_s,
            warmup_traffic,
            traffic,
        }
    }))
}

/// Closed-loop saturation: `connections` clients request `uri` one after
/// another for `seconds`; returns 2xx replies per second and failures.
pub fn saturate(
    target: SocketAddr,
    uri: &str,
    connections: usize,
    seconds: f64,
) -> std::io::Result<(f64, u64)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let uri = uri.to_string();
    Ok(runtime.block_on(async move {
        let start = Instant::now();
        let end = start + Duration::from_secs_f64(seconds);
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let uri = uri.clone();
            tasks.push(tokio::spawn(async move {
                let (mut ok, mut failed) = (0u64, 0u64);
                while Instant::now() < end {
                    match request(
                        target,
                        &uri,
                        None,
                        end.max(Instant::now()) + Duration::from_secs(2),
                    )
                    .await
                    {
                        Attempt::Status(status, _) if (200..300).contains(&status) => ok += 1,
                        _ => failed += 1,
                    }
                }
                (ok, failed)
            }));
        }
        let (mut ok, mut failed) = (0, 0);
        for task in tasks {
            if let Ok((o, f)) = task.await {
                ok += o;
                failed += f;
            }
        }
        let elapsed = start.elapsed().as_secs_f64().max(1e-9);
        (ok as f64 / elapsed, failed)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_cookie_and_framing() {
        let text = b"HTTP/1.1 200 OK\r\nSet-Cookie: s=abc; Path=/\r\nContent-Length: 3\r\n\r\nabc";
        assert!(complete(text));
        assert_eq!(parse(text), Some((200, Some("s=abc".to_string()))));
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab";
        assert!(!complete(short));
        assert_eq!(parse(short), None);
        assert_eq!(parse(b"garbage"), None);
    }

    /// A local server that answers every request 200: the warm-up's
    /// sessions run but carry no segment, every arrival is counted in its
    /// slot of the schedule, and no reply is counted that was not sent.
    #[test]
    fn warmup_sessions_run_uncounted_and_traffic_is_counted_by_slot() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut buffer = [0u8; 1024];
                let _ = stream.read(&mut buffer);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        });
        let result = run(ClientPlan {
            target,
            uri: "/".into(),
            warmup: Segment {
                sessions_per_s: 40.0,
                seconds: 0.5,
            },
            segments: vec![
                Segment {
                    sessions_per_s: 40.0,
                    seconds: 0.5,
                },
                Segment {
                    sessions_per_s: 80.0,
                    seconds: 0.5,
                },
            ],
            session_length_mean: 2.0,
            think_time_s: 0.01,
            timeout_s: 1.0,
            retries: 1,
            drain_s: 5.0,
            seed: 3,
            max_sessions: 10_000,
        })
        .unwrap();
        let warm = result
            .sessions
            .iter()
            .filter(|s| s.segment.is_none())
            .count() as u64;
        assert!(warm > 0);
        assert_eq!(warm, result.warmup_traffic.session_arrivals);
        assert_eq!(result.traffic.len(), 2);
        for (i, t) in result.traffic.iter().enumerate() {
            let n = result
                .sessions
                .iter()
                .filter(|s| s.segment == Some(i))
                .count() as u64;
            assert_eq!(n, t.session_arrivals, "segment {i}");
            assert_eq!(t.planned_arrivals, t.session_arrivals);
            assert!(t.requests_ok <= t.requests_sent);
        }
        assert!(result
            .sessions
            .iter()
            .all(|s| s.outcome == SessionOutcome::Completed));
        let sent: u64 = std::iter::once(&result.warmup_traffic)
            .chain(&result.traffic)
            .map(|t| t.requests_sent)
            .sum();
        let made: u64 = result.sessions.iter().map(|s| s.ok_requests as u64).sum();
        assert!(sent <= made && sent > 0, "{sent} {made}");
    }

    #[test]
    fn geometric_lengths_have_the_mean() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let n = 20_000;
        let mean = (0..n).map(|_| geometric(&mut rng, 5.0) as f64).sum::<f64>() / n as f64;
        assert!((mean - 5.0).abs() < 0.2, "{mean}");
    }
}
