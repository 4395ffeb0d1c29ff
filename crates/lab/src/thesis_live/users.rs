//! The emulated users, measured at the client: each user is SURGE's
//! ON/OFF process (the thesis's reference [14], `core::traffic::surge`) —
//! a page's main document, its in-line objects after active off times,
//! then an inactive off (think) time — over one HTTP/1.1 persistent
//! connection to the proxy, opened again whenever the proxy closed it.
//!
//! Every request ends in exactly one [`Outcome`]. A connection the proxy
//! refuses (the connect fails, or a new connection is closed or reset
//! before any response byte) is a refusal, and the request is sent again
//! at once on a new connection (the thesis, Section 5.2), at most
//! `max_retries` times; then it has failed (`gave-up`). A persistent
//! connection the proxy closed while idle (its timer, or the connection
//! manager) is not a refusal: the request is sent again on a new
//! connection (a reconnect, counted; RFC 9112 §9.3.1 allows it for a GET);
//! a request reconnects at most once, since the new connection is fresh
//! and a close before any byte on it is a refusal. A connection closed or
//! reset after some of the response arrived is a failure (`broken`),
//! never retried: the proxy cut a response.
//! A request still running when the run ends is `cut`, neither completed
//! nor failed, and counted.
//!
//! Written by hand rather than run through httperf's `--wsesslog`: httperf
//! reports a session log's replies only in aggregate (no per-document
//! transfer time for percentiles), counts a refused connection as an error
//! without sending the request again, and its think times are per session
//! file rather than drawn per user from SURGE's distributions.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at, Instant};
use vantage_core::traffic::surge::Surge;

/// Largest response head read, bytes.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Read buffer per user.
const READ_BYTES: usize = 16 * 1024;

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The whole document arrived with status 200.
    Completed,
    /// Refused `max_retries` times in a row.
    GaveUp,
    /// Reset or closed after part of the response, or a malformed
    /// response.
    Broken,
    /// A status other than 200.
    BadStatus,
    /// No byte for `stall` while a response was due (or no connect).
    Stalled,
    /// The run ended first: neither completed nor failed.
    Cut,
}

impl Outcome {
    pub fn is_failure(self) -> bool {
        !matches!(self, Outcome::Completed | Outcome::Cut)
    }

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::GaveUp => "gave-up",
            Outcome::Broken => "broken",
            Outcome::BadStatus => "bad-status",
            Outcome::Stalled => "stalled",
            Outcome::Cut => "cut",
        }
    }
}

/// One document request as its user saw it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RequestRecord {
    /// Index of the path (client namespace).
    pub path: usize,
    pub outcome: Outcome,
    /// Body bytes received.
    pub bytes: u64,
    /// From the first attempt to the last body byte (or the failure),
    /// seconds: the thesis's document transfer time.
    pub transfer_s: f64,
    /// Connections refused on the way.
    pub refusals: u32,
    /// Persistent connections found closed on the way (0 or 1).
    pub reconnects: u32,
}

/// The users of one client namespace.
#[derive(Clone, Debug)]
pub struct UsersPlan {
    pub path: usize,
    /// Index of this namespace's first user among all (their seeds).
    pub first_user: u32,
    pub users: u32,
    pub target: SocketAddr,
    /// User `k` of `n` starts at `first_start + k · ramp / n`.
    pub first_start: std::time::Instant,
    pub ramp: Duration,
    /// No request starts after this; running ones are cut here.
    pub end: std::time::Instant,
    pub stall: Duration,
    pub max_retries: u32,
    pub seed: u64,
    /// Documents `/d0`, `/d1`, … the pages draw from.
    pub documents: u32,
    pub surge: Surge,
}

/// Runs the users of `plan` on a current-thread runtime in the calling
/// thread (which has entered the client namespace).
pub fn run(plan: UsersPlan) -> std::io::Result<Vec<RequestRecord>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let plan = Arc::new(plan);
        let now_std = std::time::Instant::now();
        let now = Instant::now();
        let to_tokio = |at: std::time::Instant| now + at.saturating_duration_since(now_std);
        let n = plan.users.max(1);
        let end = to_tokio(plan.end);
        let mut tasks = Vec::with_capacity(n as usize);
        for k in 0..plan.users {
            let start = to_tokio(plan.first_start + plan.ramp.mul_f64(f64::from(k) / f64::from(n)));
            let plan = plan.clone();
            tasks.push(tokio::spawn(async move {
                user(&plan, plan.first_user + k, start, end).await
            }));
        }
        let mut records = Vec::new();
        for task in tasks {
            records.extend(task.await.map_err(std::io::Error::other)?);
        }
        Ok(records)
    })
}

/// One user's requests until `end`.
async fn user(plan: &UsersPlan, index: u32, start: Instant, end: Instant) -> Vec<RequestRecord> {
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed ^ (u64::from(index) << 20));
    let mut records = Vec::new();
    let mut connection: Option<TcpStream> = None;
    let mut buffer = vec![0u8; READ_BYTES];
    sleep_until(start).await;
    while Instant::now() < end {
        let inline = plan.surge.inline_count(&mut rng);
        for object in 0..=inline {
            if object > 0 {
                let off = plan.surge.active_off(&mut rng);
                sleep_until((Instant::now() + Duration::from_nanos(off.as_nanos())).min(end)).await;
            }
            if Instant::now() >= end {
                return records;
            }
            let document = rng.gen_range(0..plan.documents.max(1));
            records.push(fetch(plan, document, &mut connection, &mut buffer, end).await);
        }
        let think = plan.surge.inactive_off(&mut rng);
        sleep_until((Instant::now() + Duration::from_nanos(think.as_nanos())).min(end)).await;
    }
    records
}

/// Why one attempt did not give a response.
enum Attempt {
    /// Closed or reset before any response byte.
    NoByte,
    Failed(Outcome),
}

/// One document, with the retries the module documentation describes.
async fn fetch(
    plan: &UsersPlan,
    document: u32,
    connection: &mut Option<TcpStream>,
    buffer: &mut [u8],
    end: Instant,
) -> RequestRecord {
    let started = Instant::now();
    let mut record = RequestRecord {
        path: plan.path,
        outcome: Outcome::Completed,
        bytes: 0,
        transfer_s: 0.0,
        refusals: 0,
        reconnects: 0,
    };
    let request = format!(
        "GET /d{document} HTTP/1.1\r\nHost: origin\r\nUser-Agent: vantage-thesis-live\r\n\r\n"
    );
    let outcome = loop {
        if Instant::now() >= end {
            break Outcome::Cut;
        }
        let fresh = connection.is_none();
        if fresh {
            let deadline = (Instant::now() + plan.stall).min(end);
            match timeout_at(deadline, TcpStream::connect(plan.target)).await {
                Ok(Ok(stream)) => *connection = Some(stream),
                Ok(Err(_)) => {
                    record.refusals += 1;
                    if record.refusals > plan.max_retries {
                        break Outcome::GaveUp;
                    }
                    continue;
                }
                Err(_) if Instant::now() >= end => break Outcome::Cut,
                Err(_) => break Outcome::Stalled,
            }
        }
        let Some(stream) = connection.as_mut() else {
            continue;
        };
        let result = match stream.write_all(request.as_bytes()).await {
            Ok(()) => response(stream, buffer, plan.stall, end, &mut record).await,
            Err(_) => Err(Attempt::NoByte),
        };
        match result {
            Ok(keep) => {
                if !keep {
                    *connection = None;
                }
                break Outcome::Completed;
            }
            Err(Attempt::NoByte) => {
                *connection = None;
                if fresh {
                    record.refusals += 1;
                    if record.refusals > plan.max_retries {
                        break Outcome::GaveUp;
                    }
                } else {
                    record.reconnects += 1;
                }
            }
            Err(Attempt::Failed(outcome)) => {
                *connection = None;
                break outcome;
            }
        }
    };
    record.outcome = outcome;
    record.transfer_s = started.elapsed().as_secs_f64();
    record
}

/// Reads one response; `Ok(keep)`: whole, and whether the connection may
/// carry the next request.
async fn response(
    stream: &mut TcpStream,
    buffer: &mut [u8],
    stall: Duration,
    end: Instant,
    record: &mut RequestRecord,
) -> Result<bool, Attempt> {
    let mut head = Vec::with_capacity(1024);
    let (head_info, mut received) = loop {
        let n = read(stream, buffer, stall, end).await.map_err(|failure| {
            if head.is_empty() && failure == Outcome::Broken {
                Attempt::NoByte
            } else {
                Attempt::Failed(failure)
            }
        })?;
        head.extend_from_slice(&buffer[..n]);
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let info = parse_head(&head[..at]).map_err(Attempt::Failed)?;
            let body = (head.len() - at - 4) as u64;
            break (info, body);
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(Attempt::Failed(Outcome::Broken));
        }
    };
    record.bytes = received;
    while received < head_info.length {
        let n = read(stream, buffer, stall, end)
            .await
            .map_err(Attempt::Failed)?;
        received += n as u64;
        record.bytes = received;
    }
    if received > head_info.length {
        return Err(Attempt::Failed(Outcome::Broken));
    }
    Ok(!head_info.close)
}

/// One read: `n > 0` bytes; the end of the run is `Cut`, a stall
/// `Stalled`, an error or the end of the stream `Broken`.
async fn read(
    stream: &mut TcpStream,
    buffer: &mut [u8],
    stall: Duration,
    end: Instant,
) -> Result<usize, Outcome> {
    let stall_at = Instant::now() + stall;
    match timeout_at(stall_at.min(end), stream.read(buffer)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Err(Outcome::Broken),
        Ok(Ok(n)) => Ok(n),
        Err(_) if Instant::now() >= end => Err(Outcome::Cut),
        Err(_) => Err(Outcome::Stalled),
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Head {
    length: u64,
    /// `Connection: close`: the server closes after this response.
    close: bool,
}

/// Status 200, `Content-Length` and `Connection` from a response head.
fn parse_head(head: &[u8]) -> Result<Head, Outcome> {
    let text = std::str::from_utf8(head).map_err(|_| Outcome::Broken)?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().ok_or(Outcome::Broken)?;
    let status = status_line.split(' ').nth(1).ok_or(Outcome::Broken)?;
    if status != "200" {
        return Err(Outcome::BadStatus);
    }
    let mut length = None;
    let mut close = status_line.starts_with("HTTP/1.0");
    for (name, value) in lines.filter_map(|l| l.split_once(':')) {
        let name = name.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse().ok();
        } else if name.eq_ignore_ascii_case("connection") {
            let value = value.trim();
            close = value.eq_ignore_ascii_case("close");
        }
    }
    Ok(Head {
        length: length.ok_or(Outcome::Broken)?,
        close,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_give_the_length_and_whether_the_connection_stays() {
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nServer: x\r\ncontent-length: 42"),
            Ok(Head {
                length: 42,
                close: false
            })
        );
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close"),
            Ok(Head {
                length: 1,
                close: true
            })
        );
        assert_eq!(
            parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 1"),
            Ok(Head {
                length: 1,
                close: true
            })
        );
        assert_eq!(
            parse_head(b"HTTP/1.1 503 Busy\r\nContent-Length: 3"),
            Err(Outcome::BadStatus)
        );
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"),
            Err(Outcome::Broken)
        );
    }

    #[test]
    fn only_completed_and_cut_are_not_failures() {
        assert!(!Outcome::Completed.is_failure());
        assert!(!Outcome::Cut.is_failure());
        for o in [
            Outcome::GaveUp,
            Outcome::Broken,
            Outcome::BadStatus,
            Outcome::Stalled,
        ] {
            assert!(o.is_failure(), "{o:?}");
        }
    }
}
