//! The downloads, measured at the client: each is one HTTP/1.1 keep-alive
//! connection that fetches a large object again and again while its
//! windows are open, counting every body byte as it arrives.
//!
//! Every download that starts ends in exactly one [`Outcome`]: it ran to
//! the end of its last window moving (completed), or it failed — connect
//! error, reset or early close, a status other than 200, a response
//! without `Content-Length`, or no byte for `stall` while a response was
//! due (stalled). A failed download is not restarted. Written by hand
//! because the load crates measure requests, not byte progress per
//! connection with stall detection.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at, Instant};

/// Largest response head read, bytes.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Read buffer per download.
const READ_BYTES: usize = 16 * 1024;
/// Width of the slots a download's bytes are counted in, seconds.
pub const SLOT_S: f64 = 10.0;
/// Slots kept per download (640 s from the first start); bytes after the
/// last slot count in it.
pub const MAX_SLOTS: usize = 64;

/// How a download ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Ran to the end of its last window without a failure.
    Completed,
    /// The connection could not be opened.
    ConnectFailed,
    /// Reset, closed early, or a malformed response.
    Broken,
    /// Answered with a status other than 200.
    BadStatus,
    /// No byte for `stall` while a response was due.
    Stalled,
}

impl Outcome {
    pub fn is_failure(self) -> bool {
        self != Outcome::Completed
    }
}

/// One download as the client saw it. Times `*_at_s` count from the
/// plan's `first_start`.
#[derive(Clone, Debug, Serialize)]
pub struct DownloadRecord {
    /// Index of the path (client namespace).
    pub path: usize,
    /// The client's address and port (the proxy's peer on this
    /// connection); `None` if the connect failed.
    pub local: Option<SocketAddr>,
    pub outcome: Outcome,
    /// Body bytes received.
    pub bytes: u64,
    /// Objects received whole.
    pub objects: u64,
    /// When the connect began.
    pub start_at_s: f64,
    /// From the connect to the end (or the failure), seconds.
    pub active_s: f64,
    /// From the connect to the first response byte; `None`: none came.
    pub first_byte_s: Option<f64>,
    /// The longest time without a response byte while one was due (from
    /// the connect, or from the previous byte, to the next byte or to the
    /// failure), and when it began.
    pub longest_gap_s: f64,
    pub longest_gap_at_s: f64,
    /// Body bytes per [`SLOT_S`] slot, counted from the plan's
    /// `first_start` (slot k: [k · SLOT_S, (k + 1) · SLOT_S) s), up to the
    /// slot of the last byte; at most [`MAX_SLOTS`].
    pub bytes_per_slot: Vec<u64>,
}

/// Adds `bytes` that arrived at `at_s` (since the first start) to their
/// slot.
pub fn add_to_slot(slots: &mut Vec<u64>, at_s: f64, bytes: u64) {
    let slot = ((at_s.max(0.0) / SLOT_S) as usize).min(MAX_SLOTS - 1);
    if slots.len() <= slot {
        slots.resize(slot + 1, 0);
    }
    slots[slot] += bytes;
}

/// The longest span without a byte, fed with each arrival.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GapTracker {
    /// The last arrival (or the start), seconds.
    last_s: f64,
    pub longest_s: f64,
    pub longest_at_s: f64,
}

impl GapTracker {
    /// Waiting since `start_s`.
    pub fn new(start_s: f64) -> GapTracker {
        GapTracker {
            last_s: start_s,
            longest_s: 0.0,
            longest_at_s: start_s,
        }
    }

    /// A byte arrived at `now_s`.
    pub fn arrived(&mut self, now_s: f64) {
        self.close_gap(now_s);
        self.last_s = now_s;
    }

    /// The wait ended at `now_s` without a byte (a failure): the open gap
    /// counts up to it.
    pub fn close_gap(&mut self, now_s: f64) {
        let gap = now_s - self.last_s;
        if gap > self.longest_s {
            self.longest_s = gap;
            self.longest_at_s = self.last_s;
        }
    }

    /// Waiting again from `now_s` (a new request after an idle pause).
    pub fn restart(&mut self, now_s: f64) {
        self.last_s = now_s;
    }
}

impl DownloadRecord {
    /// Body bytes per second over its active time.
    pub fn goodput_bps(&self) -> f64 {
        if self.active_s > 0.0 {
            self.bytes as f64 * 8.0 / self.active_s
        } else {
            0.0
        }
    }
}

/// The downloads of one client namespace.
#[derive(Clone, Debug)]
pub struct DownloadPlan {
    pub path: usize,
    pub target: SocketAddr,
    pub uri: String,
    pub downloads: u32,
    /// Download `k` of `n` starts at `first_start + k · ramp / n`.
    pub first_start: std::time::Instant,
    pub ramp: Duration,
    /// Windows in which requests are made: in every window but the last a
    /// download finishes the object it is fetching and then waits for the
    /// next window (its connection idle); at the end of the last window it
    /// stops mid-object.
    pub windows: Vec<(std::time::Instant, std::time::Instant)>,
    pub stall: Duration,
    /// Set from outside to end every download now, as at the end of its
    /// last window (the host's TCP memory guard).
    pub stop_early: Arc<AtomicBool>,
}

/// Runs the downloads of `plan` on a current-thread runtime in the calling
/// thread (which has entered the client namespace); `bytes` counts every
/// body byte as it arrives.
pub fn run(plan: DownloadPlan, bytes: Arc<AtomicU64>) -> std::io::Result<Vec<DownloadRecord>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let plan = Arc::new(plan);
        let now_std = std::time::Instant::now();
        let now = Instant::now();
        let to_tokio = |at: std::time::Instant| now + at.saturating_duration_since(now_std);
        let n = plan.downloads.max(1);
        let mut tasks = Vec::with_capacity(n as usize);
        for k in 0..plan.downloads {
            let start = to_tokio(plan.first_start + plan.ramp.mul_f64(f64::from(k) / f64::from(n)));
            let windows: Vec<(Instant, Instant)> = plan
                .windows
                .iter()
                .map(|&(a, b)| (to_tokio(a), to_tokio(b)))
                .collect();
            let plan = plan.clone();
            let bytes = bytes.clone();
            tasks.push(tokio::spawn(async move {
                download(&plan, start, &windows, &bytes).await
            }));
        }
        let mut records = Vec::with_capacity(tasks.len());
        for task in tasks {
            records.push(task.await.map_err(std::io::Error::other)?);
        }
        Ok(records)
    })
}

async fn download(
    plan: &DownloadPlan,
    start: Instant,
    windows: &[(Instant, Instant)],
    counter: &AtomicU64,
) -> DownloadRecord {
    sleep_until(start).await;
    let connected_at = Instant::now();
    let clock = Clock {
        epoch: plan.first_start,
    };
    let start_at_s = clock.seconds(connected_at);
    let mut record = DownloadRecord {
        path: plan.path,
        local: None,
        outcome: Outcome::Completed,
        bytes: 0,
        objects: 0,
        start_at_s,
        active_s: 0.0,
        first_byte_s: None,
        longest_gap_s: 0.0,
        longest_gap_at_s: start_at_s,
        bytes_per_slot: Vec::new(),
    };
    let stream = match timeout_at(connected_at + plan.stall, TcpStream::connect(plan.target)).await
    {
        Ok(Ok(s)) => s,
        _ => {
            record.outcome = Outcome::ConnectFailed;
            record.active_s = connected_at.elapsed().as_secs_f64();
            return record;
        }
    };
    record.local = stream.local_addr().ok();
    let mut stream = stream;
    let mut progress = Progress {
        record,
        gaps: GapTracker::new(start_at_s),
        clock,
        counter,
    };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: vantage-resources-live\r\n\r\n",
        plan.uri, plan.target
    );
    let mut buffer = vec![0u8; READ_BYTES];
    let last = windows.len().saturating_sub(1);
    'windows: for (index, &(from, to)) in windows.iter().enumerate() {
        if from > Instant::now() {
            sleep_until(from).await;
            progress.gaps.restart(progress.clock.now());
        }
        let cut_at = (index == last).then_some(to);
        while Instant::now() < to {
            match fetch(
                &mut stream,
                &request,
                &mut buffer,
                plan,
                cut_at,
                &mut progress,
            )
            .await
            {
                Ok(Fetched::Whole) => progress.record.objects += 1,
                Ok(Fetched::Cut) => break 'windows,
                Err(outcome) => {
                    progress.record.outcome = outcome;
                    progress.gaps.close_gap(progress.clock.now());
                    break 'windows;
                }
            }
        }
    }
    let Progress {
        mut record, gaps, ..
    } = progress;
    record.active_s = connected_at.elapsed().as_secs_f64();
    record.longest_gap_s = gaps.longest_s;
    record.longest_gap_at_s = gaps.longest_at_s;
    record
}

/// A download's record as it goes, its gaps, and the run's byte counter.
struct Progress<'a> {
    record: DownloadRecord,
    gaps: GapTracker,
    clock: Clock,
    counter: &'a AtomicU64,
}

impl Progress<'_> {
    /// A read of `body` response-body bytes arrived now (the head's bytes
    /// count for the gaps, not as body).
    fn arrived(&mut self, body: u64) {
        let now_s = self.clock.now();
        self.gaps.arrived(now_s);
        if self.record.first_byte_s.is_none() {
            self.record.first_byte_s = Some(now_s - self.record.start_at_s);
        }
        self.record.bytes += body;
        if body > 0 {
            add_to_slot(&mut self.record.bytes_per_slot, now_s, body);
        }
        self.counter.fetch_add(body, Ordering::Relaxed);
    }
}

/// Seconds since the plan's first start.
struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    fn seconds(&self, at: Instant) -> f64 {
        at.into_std()
            .saturating_duration_since(self.epoch)
            .as_secs_f64()
    }

    fn now(&self) -> f64 {
        self.seconds(Instant::now())
    }
}

enum Fetched {
    Whole,
    /// The last window ended mid-object.
    Cut,
}

/// One request and its response body.
async fn fetch(
    stream: &mut TcpStream,
    request: &str,
    buffer: &mut [u8],
    plan: &DownloadPlan,
    cut_at: Option<Instant>,
    progress: &mut Progress<'_>,
) -> Result<Fetched, Outcome> {
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|_| Outcome::Broken)?;
    let mut head = Vec::with_capacity(1024);
    // Reads until the head is complete; what follows it is body.
    let (length, mut received) = loop {
        let n = match read(stream, buffer, plan, cut_at).await? {
            Some(n) => n,
            None => return Ok(Fetched::Cut),
        };
        head.extend_from_slice(&buffer[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let length = parse_head(&head[..end])?;
            let body = (head.len() - end - 4) as u64;
            progress.arrived(body);
            break (length, body);
        }
        progress.arrived(0);
        if head.len() > MAX_HEAD_BYTES {
            return Err(Outcome::Broken);
        }
    };
    while received < length {
        let n = match read(stream, buffer, plan, cut_at).await? {
            Some(n) => n as u64,
            None => return Ok(Fetched::Cut),
        };
        received += n;
        progress.arrived(n);
    }
    if received > length {
        return Err(Outcome::Broken);
    }
    Ok(Fetched::Whole)
}

/// One read: `Some(n)` bytes, `None` when `cut_at` came first or the
/// downloads are stopped early; a stall, an error or the end of the stream
/// is the failure.
async fn read(
    stream: &mut TcpStream,
    buffer: &mut [u8],
    plan: &DownloadPlan,
    cut_at: Option<Instant>,
) -> Result<Option<usize>, Outcome> {
    if plan.stop_early.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let stall_at = Instant::now() + plan.stall;
    let deadline = cut_at.map_or(stall_at, |c| c.min(stall_at));
    match timeout_at(deadline, stream.read(buffer)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Err(Outcome::Broken),
        Ok(Ok(n)) => Ok(Some(n)),
        Err(_) if cut_at.is_some_and(|c| Instant::now() >= c) => Ok(None),
        Err(_) => Err(Outcome::Stalled),
    }
}

/// Status 200 and `Content-Length` from a response head.
fn parse_head(head: &[u8]) -> Result<u64, Outcome> {
    let text = std::str::from_utf8(head).map_err(|_| Outcome::Broken)?;
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .ok_or(Outcome::Broken)?;
    if status != "200" {
        return Err(Outcome::BadStatus);
    }
    lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .ok_or(Outcome::Broken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_give_the_length_or_the_failure() {
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nServer: x\r\ncontent-length: 42"),
            Ok(42)
        );
        assert_eq!(
            parse_head(b"HTTP/1.1 503 Busy\r\nContent-Length: 3"),
            Err(Outcome::BadStatus)
        );
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"),
            Err(Outcome::Broken)
        );
        assert_eq!(parse_head(b"\xff"), Err(Outcome::Broken));
    }

    #[test]
    fn the_longest_gap_and_its_start_are_kept() {
        let mut gaps = GapTracker::new(1.0);
        gaps.arrived(1.5); // first byte after 0.5 s
        gaps.arrived(1.75);
        gaps.arrived(4.75); // 3 s without a byte from 1.75
        gaps.arrived(5.0);
        assert_eq!((gaps.longest_s, gaps.longest_at_s), (3.0, 1.75));
        // An idle pause between windows is not a gap.
        gaps.restart(20.0);
        gaps.arrived(21.0);
        assert_eq!((gaps.longest_s, gaps.longest_at_s), (3.0, 1.75));
        // A stall: the open gap counts up to the failure.
        gaps.close_gap(45.0);
        assert_eq!((gaps.longest_s, gaps.longest_at_s), (24.0, 21.0));
    }

    #[test]
    fn bytes_go_to_their_ten_second_slot_up_to_the_cap() {
        let mut slots = Vec::new();
        add_to_slot(&mut slots, 0.5, 10);
        add_to_slot(&mut slots, 9.99, 5);
        add_to_slot(&mut slots, 30.0, 7);
        assert_eq!(slots, vec![15, 0, 0, 7]);
        add_to_slot(&mut slots, 1e6, 1);
        assert_eq!(slots.len(), MAX_SLOTS);
        assert_eq!(slots[MAX_SLOTS - 1], 1);
    }

    #[test]
    fn a_download_without_any_byte_waits_from_its_start() {
        let mut gaps = GapTracker::new(2.0);
        gaps.close_gap(22.0);
        assert_eq!((gaps.longest_s, gaps.longest_at_s), (20.0, 2.0));
    }
}
