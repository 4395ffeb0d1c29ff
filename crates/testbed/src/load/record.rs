//! Client-side ground truth: one record per scheduled connection, its CSV
//! form and a summary.
//!
//! Certes validated its server-side estimate against response times
//! measured *at the clients* (its Section 4: WebStone clients with
//! re-placed timestamps and a true wall-clock frustration timeout), and the
//! Abacus paper reports client-perceived delay including SYN backoffs. A
//! [`ConnectionRecord`] is that measurement for one connection: when it was
//! scheduled, when the first SYN left (`start`), when the handshake
//! completed, when the request left, when the first and last response bytes
//! arrived, how many SYNs were retransmitted, and how it ended.
//!
//! Timestamps are nanoseconds since the UNIX epoch from `CLOCK_REALTIME`, the
//! clock packet captures stamp packets with, so a record can be joined with
//! a pcap by `local_port` and time. A timestamp the connection never reached
//! is `None` (an empty CSV field).
//!
//! Client-perceived response time is `last_byte − start` (Certes's
//! definition: from the first SYN the client sends to the last response
//! byte it receives), counted over `ok` connections.

use std::collections::BTreeMap;
use std::fmt;
use std::io;

use serde::{Deserialize, Serialize};

/// How a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every request got a complete response with status < 400.
    Ok,
    /// The server (or a filter) answered a SYN with a RST: `ECONNREFUSED`.
    Refused,
    /// The connection was reset after it was established: `ECONNRESET` or
    /// `EPIPE`.
    Reset,
    /// The kernel gave up: `ETIMEDOUT` (SYN retries or data retransmissions
    /// exhausted).
    TimedOut,
    /// The client's frustration timeout expired before the last response
    /// byte arrived (Certes, Section 3.2.2: the client hits reload or goes
    /// elsewhere), whether still in SYN-SENT or later.
    Frustrated,
    /// A response had status ≥ 400, could not be parsed, or the server closed
    /// the connection before all requests were answered.
    HttpError,
    /// Any other socket error (e.g. `EADDRNOTAVAIL`, `EHOSTUNREACH`).
    Failed,
    /// The run was stopped (its `stop` flag set) while the connection was in
    /// flight.
    Aborted,
    /// The connection never started: `max_concurrent` connections were
    /// already open, the run was stopped first, or no socket could be made.
    NotStarted,
}

impl Outcome {
    /// The kebab-case name used in CSV and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused => "refused",
            Outcome::Reset => "reset",
            Outcome::TimedOut => "timed-out",
            Outcome::Frustrated => "frustrated",
            Outcome::HttpError => "http-error",
            Outcome::Failed => "failed",
            Outcome::Aborted => "aborted",
            Outcome::NotStarted => "not-started",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Client-side ground truth for one scheduled connection. Times are ns since
/// the UNIX epoch (`CLOCK_REALTIME`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionRecord {
    /// Index of the arrival in this client's schedule (0, 1, …).
    pub id: u64,
    /// The generator's `client_index`, to tell clients apart when merged.
    pub client: u32,
    /// When the arrival schedule said the connection should start.
    pub scheduled_ns: u64,
    /// Just before `connect(2)`: when the first SYN left.
    pub start_ns: Option<u64>,
    /// When the handshake completed (the socket became writable without
    /// error).
    pub connected_ns: Option<u64>,
    /// When the first request was fully written to the socket.
    pub request_sent_ns: Option<u64>,
    /// When the first byte of the first response arrived.
    pub first_byte_ns: Option<u64>,
    /// When the last byte of the last response arrived.
    pub last_byte_ns: Option<u64>,
    /// When the client was done with the connection: it closed it, gave up
    /// on it (frustration, stop) or saw it fail. `end − start` of a
    /// `frustrated` record is the frustration timeout; of a `timed-out` one,
    /// how long the kernel kept trying.
    pub end_ns: Option<u64>,
    pub outcome: Outcome,
    /// SYN retransmissions (`tcpi_total_retrans` read when the handshake
    /// completed, or when the connection was given up in SYN-SENT). `None`
    /// when no socket existed or `TCP_INFO` could not be read.
    pub syn_retransmissions: Option<u32>,
    /// Requests answered completely.
    pub requests_completed: u32,
    /// Response bytes received (headers and bodies).
    pub bytes_received: u64,
    /// The client's ephemeral port, known from the moment `connect(2)` was
    /// called (so SYN-SENT give-ups can be found in a capture too).
    pub local_port: Option<u16>,
    /// Short description of what went wrong; empty when nothing did.
    pub error: String,
}

impl ConnectionRecord {
    /// A record for an arrival that never started.
    pub fn not_started(id: u64, client: u32, scheduled_ns: u64, why: &str) -> Self {
        ConnectionRecord {
            id,
            client,
            scheduled_ns,
            start_ns: None,
            connected_ns: None,
            request_sent_ns: None,
            first_byte_ns: None,
            last_byte_ns: None,
            end_ns: None,
            outcome: Outcome::NotStarted,
            syn_retransmissions: None,
            requests_completed: 0,
            bytes_received: 0,
            local_port: None,
            error: why.to_string(),
        }
    }

    /// Client-perceived response time in ns (`last_byte − start`), for `ok`
    /// connections only.
    pub fn client_perceived_ns(&self) -> Option<u64> {
        match (self.outcome, self.start_ns, self.last_byte_ns) {
            (Outcome::Ok, Some(start), Some(last)) => Some(last.saturating_sub(start)),
            _ => None,
        }
    }
}

/// Errors writing or reading record CSV.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("connection records CSV: {0}")]
    Csv(#[from] csv::Error),
    #[error("connection records CSV: {0}")]
    Io(#[from] io::Error),
}

/// Writes records as CSV with a header row; missing timestamps are empty
/// fields.
pub fn write_csv<W: io::Write>(records: &[ConnectionRecord], writer: W) -> Result<(), RecordError> {
    let mut csv_writer = csv::Writer::from_writer(writer);
    for record in records {
        csv_writer.serialize(record)?;
    }
    csv_writer.flush()?;
    Ok(())
}

/// Reads records written by [`write_csv`].
pub fn read_csv<R: io::Read>(reader: R) -> Result<Vec<ConnectionRecord>, RecordError> {
    let mut csv_reader = csv::Reader::from_reader(reader);
    let mut records = Vec::new();
    for row in csv_reader.deserialize() {
        records.push(row?);
    }
    Ok(records)
}

/// Client-perceived response time over `ok` connections, seconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseTimeStats {
    pub count: u64,
    pub mean_s: f64,
    /// Nearest-rank median.
    pub p50_s: f64,
    /// Nearest-rank 99th percentile.
    pub p99_s: f64,
    pub max_s: f64,
}

/// What a run's records add up to.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadSummary {
    /// Number of records (= number of scheduled arrivals).
    pub connections: u64,
    /// Records per outcome; outcomes that never happened are absent.
    pub outcomes: BTreeMap<Outcome, u64>,
    /// `last_byte − start` over `ok` connections; `None` if there were none.
    pub client_perceived: Option<ResponseTimeStats>,
    /// Histogram of SYN retransmissions: count → connections, over records
    /// that have the count.
    pub syn_retransmissions: BTreeMap<u32, u64>,
}

impl LoadSummary {
    /// Number of records with `outcome`.
    pub fn count(&self, outcome: Outcome) -> u64 {
        self.outcomes.get(&outcome).copied().unwrap_or(0)
    }
}

/// Nearest-rank percentile of sorted values; `q` in [0, 1].
fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Counts per outcome, response-time statistics and the SYN retransmission
/// histogram of a run.
pub fn summarize(records: &[ConnectionRecord]) -> LoadSummary {
    let mut outcomes = BTreeMap::new();
    let mut syn_retransmissions = BTreeMap::new();
    let mut times: Vec<u64> = Vec::new();
    for record in records {
        *outcomes.entry(record.outcome).or_insert(0) += 1;
        if let Some(retransmissions) = record.syn_retransmissions {
            *syn_retransmissions.entry(retransmissions).or_insert(0) += 1;
        }
        if let Some(ns) = record.client_perceived_ns() {
            times.push(ns);
        }
    }
    times.sort_unstable();
    let client_perceived = (!times.is_empty()).then(|| {
        let sum: u128 = times.iter().map(|&t| t as u128).sum();
        ResponseTimeStats {
            count: times.len() as u64,
            mean_s: sum as f64 / times.len() as f64 / 1e9,
            p50_s: nearest_rank(&times, 0.5) as f64 / 1e9,
            p99_s: nearest_rank(&times, 0.99) as f64 / 1e9,
            max_s: *times.last().unwrap_or(&0) as f64 / 1e9,
        }
    });
    LoadSummary {
        connections: records.len() as u64,
        outcomes,
        client_perceived,
        syn_retransmissions,
    }
}

impl fmt::Display for LoadSummary {
    /// A human table: outcomes, response time, SYN retransmissions.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "connections        {}", self.connections)?;
        for (outcome, count) in &self.outcomes {
            writeln!(f, "  {:<16} {count}", outcome.name())?;
        }
        match &self.client_perceived {
            Some(stats) => writeln!(
                f,
                "client-perceived   mean {:.3} s  p50 {:.3} s  p99 {:.3} s  max {:.3} s  ({} ok)",
                stats.mean_s, stats.p50_s, stats.p99_s, stats.max_s, stats.count
            )?,
            None => writeln!(f, "client-perceived   no ok connections")?,
        }
        writeln!(f, "syn retransmissions")?;
        for (retransmissions, count) in &self.syn_retransmissions {
            writeln!(f, "  {retransmissions:<16} {count}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(id: u64, start: u64, last: u64, retransmissions: u32) -> ConnectionRecord {
        ConnectionRecord {
            id,
            client: 0,
            scheduled_ns: start,
            start_ns: Some(start),
            connected_ns: Some(start + 1),
            request_sent_ns: Some(start + 2),
            first_byte_ns: Some(start + 3),
            last_byte_ns: Some(last),
            end_ns: Some(last + 1),
            outcome: Outcome::Ok,
            syn_retransmissions: Some(retransmissions),
            requests_completed: 1,
            bytes_received: 100,
            local_port: Some(40000),
            error: String::new(),
        }
    }

    #[test]
    fn csv_round_trip_keeps_missing_fields_empty() {
        let records = vec![
            ok(0, 1_000, 2_001_000, 0),
            ConnectionRecord::not_started(1, 0, 5, "max_concurrent reached"),
        ];
        let mut bytes = Vec::new();
        write_csv(&records, &mut bytes).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with("id,client,scheduled_ns,start_ns,connected_ns"),
            "{text}"
        );
        assert!(
            text.contains(",not-started,,0,0,,max_concurrent reached"),
            "{text}"
        );
        assert_eq!(read_csv(bytes.as_slice()).unwrap(), records);
    }

    #[test]
    fn summary_counts_and_percentiles() {
        let mut records: Vec<_> = (0..100)
            .map(|i| ok(i, 0, (i + 1) * 1_000_000, (i % 3) as u32))
            .collect();
        records.push(ConnectionRecord::not_started(100, 0, 0, "stopped"));
        let summary = summarize(&records);
        assert_eq!(summary.connections, 101);
        assert_eq!(summary.count(Outcome::Ok), 100);
        assert_eq!(summary.count(Outcome::NotStarted), 1);
        let stats = summary.client_perceived.clone().unwrap();
        assert_eq!(stats.count, 100);
        assert!((stats.p50_s - 0.050).abs() < 1e-12);
        assert!((stats.p99_s - 0.099).abs() < 1e-12);
        assert!((stats.mean_s - 0.0505).abs() < 1e-12);
        assert_eq!(summary.syn_retransmissions[&0], 34);
        assert_eq!(summary.syn_retransmissions[&2], 33);
        assert!(summary.to_string().contains("not-started"));
    }
}
