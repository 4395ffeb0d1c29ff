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
//! dropped.

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
    /// Index of the load segment the session arrived in.
    pub segment: usize,
    pub planned_requests: u32,
    /// Requests answered 2xx.
    pub ok_requests: u32,
    pub outcome: SessionOutcome,
    /// Failed attempts (time-outs, resets, refusals, non-2xx replies).
    pub failed_attempts: u32,
}

/// A load segment: `sessions_per_s` for `seconds`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Segment {
    pub sessions_per_s: f64,
    pub seconds: f64,
}

/// What the clients do.
#[derive(Clone, Debug)]
pub struct ClientPlan {
    pub target: SocketAddr,
    pub uri: String,
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
    pub elapsed_s: f64,
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
}

async fn session(
    plan: Arc<ClientPlan>,
    index: usize,
    segment: usize,
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
            let deadline = Instant::now() + Duration::from_secs_f64(plan.timeout_s);
            match request(plan.target, &plan.uri, cookie.as_deref(), deadline).await {
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
    if record.outcome != SessionOutcome::Rejected && record.outcome != SessionOutcome::FailedAtStart
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
        let mut arrivals: Vec<(f64, usize, u32)> = Vec::new();
        let mut not_started = 0u64;
        let mut offset = 0.0;
        for (index, segment) in plan.segments.iter().enumerate() {
            let mut t = offset;
            loop {
                t += exponential(&mut rng, 1.0 / segment.sessions_per_s.max(1e-9));
                if t >= offset + segment.seconds {
                    break;
                }
                if arrivals.len() >= plan.max_sessions {
                    not_started += 1;
                    continue;
                }
                let length = geometric(&mut rng, plan.session_length_mean);
                arrivals.push((t, index, length));
            }
            offset += segment.seconds;
        }
        let shared = Arc::new(Mutex::new(Shared {
            sessions: vec![None; arrivals.len()],
            response_times_s: Vec::new(),
        }));
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(arrivals.len());
        for (index, (at, segment, length)) in arrivals.iter().copied().enumerate() {
            tokio::time::sleep_until(start + Duration::from_secs_f64(at)).await;
            let seed = plan.seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            tasks.push(tokio::spawn(session(
                Arc::clone(&plan),
                index,
                segment,
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
        let elapsed_s = start.elapsed().as_secs_f64();
        let shared = shared.lock().unwrap_or_else(|e| e.into_inner());
        let sessions = shared
            .sessions
            .iter()
            .zip(&arrivals)
            .map(|(s, (_, segment, length))| {
                s.clone().unwrap_or(SessionRecord {
                    segment: *segment,
                    planned_requests: *length,
                    ok_requests: 0,
                    outcome: SessionOutcome::Unfinished,
                    failed_attempts: 0,
                })
            })
            .collect();
        ClientResult {
            sessions,
            response_times_s: shared.response_times_s.clone(),
            not_started,
            elapsed_s,
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

    #[test]
    fn geometric_lengths_have_the_mean() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let n = 20_000;
        let mean = (0..n).map(|_| geometric(&mut rng, 5.0) as f64).sum::<f64>() / n as f64;
        assert!((mean - 5.0).abs() < 0.2, "{mean}");
    }
}
