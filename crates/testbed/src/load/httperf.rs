//! httperf driver: session workloads, the command line, the summary.
//!
//! The SBAC paper measures a server in completed *sessions* (sequences of
//! requests with think times), and the proxy thesis drives its proxy with
//! httperf (Mosberger and Jin, 1998). httperf's `--wsess=N,C,T` workload
//! generator creates N sessions at `--rate` sessions per second, each of C
//! calls with T seconds of think time between bursts; without `--wsess`,
//! `--num-conns` connections of `--num-calls` calls each. This module
//! builds that command line from an [`HttperfConfig`], runs it with a
//! wall-clock limit, and parses httperf's summary into an
//! [`HttperfReport`].
//!
//! The command can be built here ([`HttperfConfig::command`]) or by the
//! caller, e.g. prefixed with `ip netns exec <ns>` to run inside a client
//! namespace (`Netns::command(program)` followed by
//! `.args(config.args())`); [`run_command`] runs any of them.
//!
//! The parser reads the line-oriented summary of httperf 0.9 (the format of
//! the test below, captured from `/usr/bin/httperf` 0.9.0 against the test
//! server). The `Total`, `Reply status` and both `Errors` lines are
//! required; every other line is optional because httperf versions differ in
//! what they print; unknown lines are ignored. Malformed output is an error,
//! never a panic.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How often a running httperf is checked for exit.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// httperf's session workload (`--wsess=sessions,calls,think_s`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionWorkload {
    /// Sessions to create, in [1, 1e7].
    pub sessions: u64,
    /// Calls (requests) per session, in [1, 1e6].
    pub calls: u32,
    /// Think time between calls, seconds, in [0, 3600].
    pub think_s: f64,
}

/// One httperf run (TOML; `server` and `port` required).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttperfConfig {
    /// The httperf binary; default `httperf` (found on `PATH`).
    #[serde(default = "default_program")]
    pub program: PathBuf,
    /// `--server`: host name or address.
    pub server: String,
    /// `--port`.
    pub port: u16,
    /// `--uri`; default `/`.
    #[serde(default = "default_uri")]
    pub uri: String,
    /// `--rate`: sessions per second with `session`, connections per second
    /// otherwise; absent = httperf's default (one after another).
    pub rate: Option<f64>,
    /// `--timeout`: seconds httperf waits on a socket before it counts a
    /// client timeout (`client-timo`).
    pub timeout_s: Option<f64>,
    /// `--num-conns`, without `session`.
    pub num_conns: Option<u64>,
    /// `--num-calls`: calls per connection, without `session`.
    pub num_calls: Option<u32>,
    /// `--wsess`: the session workload.
    pub session: Option<SessionWorkload>,
    /// `--http-version`: "1.0" or "1.1".
    pub http_version: Option<String>,
    /// `--hog`: use as many ephemeral ports as possible.
    #[serde(default)]
    pub hog: bool,
}

fn default_program() -> PathBuf {
    PathBuf::from("httperf")
}

fn default_uri() -> String {
    "/".to_string()
}

/// Why httperf could not be run or its output not read.
#[derive(Debug, thiserror::Error)]
pub enum HttperfError {
    #[error("httperf.{key} must be {allowed}, got {value}")]
    Config {
        key: &'static str,
        allowed: &'static str,
        value: String,
    },
    #[error("`{command}` could not start: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("`{command}` still running after {limit_s} s; killed")]
    TimedOut { command: String, limit_s: f64 },
    #[error("httperf output: {0}")]
    Malformed(String),
}

fn config_error(key: &'static str, allowed: &'static str, value: impl ToString) -> HttperfError {
    HttperfError::Config {
        key,
        allowed,
        value: value.to_string(),
    }
}

impl HttperfConfig {
    /// A plain run: `num_conns` connections of one call to `server:port/`.
    pub fn new(server: impl Into<String>, port: u16) -> Self {
        HttperfConfig {
            program: default_program(),
            server: server.into(),
            port,
            uri: default_uri(),
            rate: None,
            timeout_s: None,
            num_conns: None,
            num_calls: None,
            session: None,
            http_version: None,
            hog: false,
        }
    }

    /// Checks ranges and that the workload is either a session workload or
    /// a connection count, not both.
    pub fn validate(&self) -> Result<(), HttperfError> {
        let printable = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic());
        if !printable(&self.server) {
            return Err(config_error(
                "server",
                "a host name or address",
                format!("{:?}", self.server),
            ));
        }
        if self.port == 0 {
            return Err(config_error("port", "in [1, 65535]", self.port));
        }
        if !self.uri.starts_with('/') || !printable(&self.uri) {
            return Err(config_error(
                "uri",
                "a path starting with '/', printable ASCII without spaces",
                format!("{:?}", self.uri),
            ));
        }
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0 && rate <= 1e6) {
                return Err(config_error("rate", "in (0, 1e6] per second", rate));
            }
        }
        if let Some(timeout) = self.timeout_s {
            if !(timeout.is_finite() && timeout > 0.0 && timeout <= 3600.0) {
                return Err(config_error("timeout_s", "in (0, 3600] seconds", timeout));
            }
        }
        if let Some(connections) = self.num_conns {
            if !(1..=10_000_000).contains(&connections) {
                return Err(config_error("num_conns", "in [1, 1e7]", connections));
            }
        }
        if let Some(calls) = self.num_calls {
            if !(1..=1_000_000).contains(&calls) {
                return Err(config_error("num_calls", "in [1, 1e6]", calls));
            }
        }
        if let Some(session) = &self.session {
            if self.num_conns.is_some() || self.num_calls.is_some() {
                return Err(config_error(
                    "session",
                    "absent when num_conns or num_calls is given (httperf runs one workload)",
                    "both given",
                ));
            }
            if !(1..=10_000_000).contains(&session.sessions) {
                return Err(config_error(
                    "session.sessions",
                    "in [1, 1e7]",
                    session.sessions,
                ));
            }
            if !(1..=1_000_000).contains(&session.calls) {
                return Err(config_error("session.calls", "in [1, 1e6]", session.calls));
            }
            if !(session.think_s.is_finite() && (0.0..=3600.0).contains(&session.think_s)) {
                return Err(config_error(
                    "session.think_s",
                    "in [0, 3600] seconds",
                    session.think_s,
                ));
            }
        }
        if let Some(version) = &self.http_version {
            if version != "1.0" && version != "1.1" {
                return Err(config_error(
                    "http_version",
                    "\"1.0\" or \"1.1\"",
                    format!("{version:?}"),
                ));
            }
        }
        Ok(())
    }

    /// httperf's arguments, without the program name.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            format!("--server={}", self.server),
            format!("--port={}", self.port),
            format!("--uri={}", self.uri),
        ];
        if let Some(rate) = self.rate {
            args.push(format!("--rate={rate}"));
        }
        if let Some(timeout) = self.timeout_s {
            args.push(format!("--timeout={timeout}"));
        }
        if let Some(connections) = self.num_conns {
            args.push(format!("--num-conns={connections}"));
        }
        if let Some(calls) = self.num_calls {
            args.push(format!("--num-calls={calls}"));
        }
        if let Some(session) = &self.session {
            args.push(format!(
                "--wsess={},{},{}",
                session.sessions, session.calls, session.think_s
            ));
        }
        if let Some(version) = &self.http_version {
            args.push(format!("--http-version={version}"));
        }
        if self.hog {
            args.push("--hog".to_string());
        }
        args
    }

    /// The command `program args…`, to run as is or to take apart.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(self.args());
        command
    }

    /// Validates, runs [`command`](HttperfConfig::command) with a wall-clock
    /// `limit`, and parses its summary.
    pub fn run(&self, limit: Duration) -> Result<HttperfReport, HttperfError> {
        self.validate()?;
        run_command(self.command(), limit)
    }
}

fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Runs an httperf command (possibly wrapped, e.g. in `ip netns exec`),
/// kills it if it runs longer than `limit`, and parses its standard output.
/// A non-zero exit is an error quoting its standard error.
pub fn run_command(mut command: Command, limit: Duration) -> Result<HttperfReport, HttperfError> {
    let description = describe(&command);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| HttperfError::Spawn {
            command: description.clone(),
            source,
        })?;
    // Read both pipes on their own threads so a full pipe never blocks
    // httperf; they end when the child's ends close.
    let read_all = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = read_all(
        child
            .stdout
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn Read + Send>),
    );
    let stderr = read_all(
        child
            .stderr
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < limit => thread::sleep(EXIT_POLL),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = stdout.join();
                let _ = stderr.join();
                return Err(HttperfError::TimedOut {
                    command: description,
                    limit_s: limit.as_secs_f64(),
                });
            }
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if !status.success() {
        return Err(HttperfError::Failed {
            command: description,
            status: status.to_string(),
            stderr: stderr.trim().chars().take(2000).collect(),
        });
    }
    parse(&stdout)
}

/// `min avg max median stddev` of connection lifetimes, and the mean
/// connect time, milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnectionTimeMs {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub median: f64,
    pub stddev: f64,
    /// Mean time to establish a connection (`Connection time [ms]: connect`).
    pub connect: Option<f64>,
}

/// Reply rate sampled every 5 s.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplyRate {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub stddev: f64,
    pub samples: u64,
}

/// Mean reply sizes, bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplySize {
    pub header: f64,
    pub content: f64,
    pub footer: f64,
    pub total: f64,
}

/// Replies by status class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyStatus {
    pub informational_1xx: u64,
    pub success_2xx: u64,
    pub redirection_3xx: u64,
    pub client_error_4xx: u64,
    pub server_error_5xx: u64,
}

/// httperf's error counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    pub total: u64,
    /// `client-timo`: no progress within `--timeout`.
    pub client_timeout: u64,
    /// `socket-timo`: the kernel's TCP timeout (`ETIMEDOUT`).
    pub socket_timeout: u64,
    /// `connrefused`.
    pub connection_refused: u64,
    /// `connreset`.
    pub connection_reset: u64,
    /// `fd-unavail`: out of file descriptors.
    pub fd_unavailable: u64,
    /// `addrunavail`: out of local ports.
    pub address_unavailable: u64,
    /// `ftab-full`: httperf's file table full.
    pub ftab_full: u64,
    pub other: u64,
}

/// The session lines of a `--wsess` run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionStats {
    /// Session completion rate (sessions/s), sampled: min, avg, max, stddev.
    pub rate_min: f64,
    pub rate_avg: f64,
    pub rate_max: f64,
    pub rate_stddev: f64,
    /// Sessions that completed, of `sessions_total`.
    pub sessions_completed: u64,
    pub sessions_total: u64,
    pub connections_per_session: Option<f64>,
    /// Mean lifetime of completed sessions, seconds.
    pub lifetime_s: Option<f64>,
    /// Mean time until failure of failed sessions, seconds.
    pub failtime_s: Option<f64>,
    /// Entry k: sessions that completed k calls.
    pub length_histogram: Vec<u64>,
}

/// httperf's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HttperfReport {
    /// The command line httperf echoes first, if present.
    pub command_line: Option<String>,
    pub connections: u64,
    pub requests: u64,
    pub replies: u64,
    pub test_duration_s: f64,
    pub connection_rate_per_s: Option<f64>,
    /// Largest number of concurrent connections (`<=N concurrent`).
    pub max_concurrent_connections: Option<u64>,
    pub connection_time_ms: Option<ConnectionTimeMs>,
    /// Mean replies per connection.
    pub replies_per_connection: Option<f64>,
    pub request_rate_per_s: Option<f64>,
    pub reply_rate: Option<ReplyRate>,
    /// Mean response time (request sent to first reply byte) and transfer
    /// time, milliseconds.
    pub reply_time_response_ms: Option<f64>,
    pub reply_time_transfer_ms: Option<f64>,
    pub reply_size_bytes: Option<ReplySize>,
    pub reply_status: ReplyStatus,
    pub errors: ErrorCounts,
    /// Present for `--wsess` runs.
    pub session: Option<SessionStats>,
}

/// Whitespace-separated tokens of one summary line, with lookups that name
/// the line when something is missing.
struct Fields<'a> {
    label: &'a str,
    tokens: Vec<&'a str>,
}

impl<'a> Fields<'a> {
    fn new(label: &'a str, rest: &'a str) -> Self {
        Fields {
            label,
            tokens: rest.split_whitespace().collect(),
        }
    }

    fn malformed(&self, what: &str) -> HttperfError {
        HttperfError::Malformed(format!("line `{}`: {what}", self.label))
    }

    /// The token right after `key`, as text.
    fn after(&self, key: &str) -> Result<&'a str, HttperfError> {
        self.tokens
            .iter()
            .position(|token| *token == key)
            .and_then(|index| self.tokens.get(index + 1).copied())
            .ok_or_else(|| self.malformed(&format!("no value for `{key}`")))
    }

    fn float(&self, key: &str) -> Result<f64, HttperfError> {
        let text = self.after(key)?;
        parse_float(text)
            .ok_or_else(|| self.malformed(&format!("`{key}` is not a number: {text:?}")))
    }

    fn count(&self, key: &str) -> Result<u64, HttperfError> {
        let text = self.after(key)?;
        text.parse()
            .map_err(|_| self.malformed(&format!("`{key}` is not a count: {text:?}")))
    }

    /// The value of a `key=value` token.
    fn assigned(&self, key: &str) -> Result<u64, HttperfError> {
        let text = self
            .tokens
            .iter()
            .find_map(|token| {
                token
                    .strip_prefix(key)
                    .and_then(|rest| rest.strip_prefix('='))
            })
            .ok_or_else(|| self.malformed(&format!("no `{key}=`")))?;
        text.parse()
            .map_err(|_| self.malformed(&format!("`{key}` is not a count: {text:?}")))
    }

    /// The first token as a number.
    fn leading(&self) -> Result<f64, HttperfError> {
        let text = self.tokens.first().copied().unwrap_or("");
        parse_float(text).ok_or_else(|| self.malformed(&format!("expected a number, got {text:?}")))
    }
}

fn parse_float(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|value| value.is_finite())
}

/// Parses httperf's standard output.
pub fn parse(output: &str) -> Result<HttperfReport, HttperfError> {
    let mut report = HttperfReport::default();
    let mut saw_total = false;
    let mut saw_status = false;
    let mut saw_errors = [false, false];
    let mut session = SessionStats::default();
    let mut saw_session = false;
    for line in output.lines() {
        let line = line.trim();
        if line.starts_with("httperf --") || line.starts_with("httperf ") && line.contains(" --") {
            report.command_line = Some(line.to_string());
            continue;
        }
        let Some((label, rest)) = line.split_once(':') else {
            continue;
        };
        let fields = Fields::new(label, rest);
        match label {
            "Total" => {
                report.connections = fields.count("connections")?;
                report.requests = fields.count("requests")?;
                report.replies = fields.count("replies")?;
                report.test_duration_s = fields.float("test-duration")?;
                saw_total = true;
            }
            "Connection rate" => {
                report.connection_rate_per_s = Some(fields.leading()?);
                report.max_concurrent_connections = fields
                    .tokens
                    .iter()
                    .find_map(|token| token.strip_prefix("<="))
                    .map(|count| {
                        count
                            .parse()
                            .map_err(|_| fields.malformed(&format!("bad concurrency {count:?}")))
                    })
                    .transpose()?;
            }
            "Connection time [ms]" => {
                let times = report
                    .connection_time_ms
                    .get_or_insert_with(ConnectionTimeMs::default);
                if fields.tokens.first() == Some(&"connect") {
                    times.connect = Some(fields.float("connect")?);
                } else {
                    times.min = fields.float("min")?;
                    times.avg = fields.float("avg")?;
                    times.max = fields.float("max")?;
                    times.median = fields.float("median")?;
                    times.stddev = fields.float("stddev")?;
                }
            }
            "Connection length [replies/conn]" => {
                report.replies_per_connection = Some(fields.leading()?)
            }
            "Request rate" => report.request_rate_per_s = Some(fields.leading()?),
            "Reply rate [replies/s]" => {
                let samples_text = fields
                    .tokens
                    .iter()
                    .position(|token| token.starts_with("samples)"))
                    .and_then(|index| index.checked_sub(1))
                    .and_then(|index| fields.tokens.get(index))
                    .map(|token| token.trim_start_matches('('))
                    .ok_or_else(|| fields.malformed("no `(N samples)`"))?;
                report.reply_rate = Some(ReplyRate {
                    min: fields.float("min")?,
                    avg: fields.float("avg")?,
                    max: fields.float("max")?,
                    stddev: fields.float("stddev")?,
                    samples: samples_text.parse().map_err(|_| {
                        fields.malformed(&format!("bad sample count {samples_text:?}"))
                    })?,
                });
            }
            "Reply time [ms]" => {
                report.reply_time_response_ms = Some(fields.float("response")?);
                report.reply_time_transfer_ms = Some(fields.float("transfer")?);
            }
            "Reply size [B]" => {
                let total_text = fields.after("(total")?.trim_end_matches(')');
                report.reply_size_bytes = Some(ReplySize {
                    header: fields.float("header")?,
                    content: fields.float("content")?,
                    footer: fields.float("footer")?,
                    total: parse_float(total_text)
                        .ok_or_else(|| fields.malformed(&format!("bad total {total_text:?}")))?,
                });
            }
            "Reply status" => {
                report.reply_status = ReplyStatus {
                    informational_1xx: fields.assigned("1xx")?,
                    success_2xx: fields.assigned("2xx")?,
                    redirection_3xx: fields.assigned("3xx")?,
                    client_error_4xx: fields.assigned("4xx")?,
                    server_error_5xx: fields.assigned("5xx")?,
                };
                saw_status = true;
            }
            "Errors" if fields.tokens.first() == Some(&"total") => {
                report.errors.total = fields.count("total")?;
                report.errors.client_timeout = fields.count("client-timo")?;
                report.errors.socket_timeout = fields.count("socket-timo")?;
                report.errors.connection_refused = fields.count("connrefused")?;
                report.errors.connection_reset = fields.count("connreset")?;
                saw_errors[0] = true;
            }
            "Errors" => {
                report.errors.fd_unavailable = fields.count("fd-unavail")?;
                report.errors.address_unavailable = fields.count("addrunavail")?;
                report.errors.ftab_full = fields.count("ftab-full")?;
                report.errors.other = fields.count("other")?;
                saw_errors[1] = true;
            }
            "Session rate [sess/s]" => {
                session.rate_min = fields.float("min")?;
                session.rate_avg = fields.float("avg")?;
                session.rate_max = fields.float("max")?;
                session.rate_stddev = fields.float("stddev")?;
                let ratio = fields
                    .tokens
                    .last()
                    .and_then(|token| token.strip_prefix('('))
                    .and_then(|token| token.strip_suffix(')'))
                    .and_then(|token| token.split_once('/'))
                    .ok_or_else(|| fields.malformed("no `(completed/total)`"))?;
                session.sessions_completed = ratio
                    .0
                    .parse()
                    .map_err(|_| fields.malformed(&format!("bad completed count {:?}", ratio.0)))?;
                session.sessions_total = ratio
                    .1
                    .parse()
                    .map_err(|_| fields.malformed(&format!("bad session count {:?}", ratio.1)))?;
                saw_session = true;
            }
            "Session" => session.connections_per_session = Some(fields.float("avg")?),
            "Session lifetime [s]" => session.lifetime_s = Some(fields.leading()?),
            "Session failtime [s]" => session.failtime_s = Some(fields.leading()?),
            "Session length histogram" => {
                session.length_histogram = fields
                    .tokens
                    .iter()
                    .map(|token| {
                        token.parse().map_err(|_| {
                            fields.malformed(&format!("bad histogram entry {token:?}"))
                        })
                    })
                    .collect::<Result<_, _>>()?;
            }
            _ => {}
        }
    }
    let missing = [
        (saw_total, "Total"),
        (saw_status, "Reply status"),
        (saw_errors[0], "Errors: total …"),
        (saw_errors[1], "Errors: fd-unavail …"),
    ];
    if let Some((_, line)) = missing.iter().find(|(seen, _)| !seen) {
        return Err(HttperfError::Malformed(format!(
            "no `{line}` line (is this httperf's output?)"
        )));
    }
    if saw_session {
        report.session = Some(session);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Standard output of `/usr/bin/httperf` 0.9.0, session workload, run
    /// against the test server on loopback (exponential 2 ms service).
    const SESSION_RUN: &str = "\
httperf --timeout=5 --client=0/1 --server=127.0.0.1 --port=18080 --uri=/bytes/2048 --rate=10 --send-buffer=4096 --recv-buffer=16384 --wsess=20,5,0.100
Maximum connect burst length: 1

Total: connections 20 requests 100 replies 100 test-duration 2.317 s

Connection rate: 8.6 conn/s (115.9 ms/conn, <=5 concurrent connections)
Connection time [ms]: min 412.3 avg 420.4 max 430.2 median 420.5 stddev 4.2
Connection time [ms]: connect 0.0
Connection length [replies/conn]: 5.000

Request rate: 43.2 req/s (23.2 ms/req)
Request size [B]: 72.0

Reply rate [replies/s]: min 0.0 avg 0.0 max 0.0 stddev 0.0 (0 samples)
Reply time [ms]: response 3.6 transfer 0.0
Reply size [B]: header 134.0 content 2048.0 footer 0.0 (total 2182.0)
Reply status: 1xx=0 2xx=100 3xx=0 4xx=0 5xx=0

CPU time [s]: user 0.36 system 1.95 (user 15.6% system 84.3% total 99.9%)
Net I/O: 95.0 KB/s (0.8*10^6 bps)

Errors: total 0 client-timo 0 socket-timo 0 connrefused 0 connreset 0
Errors: fd-unavail 0 addrunavail 0 ftab-full 0 other 0

Session rate [sess/s]: min 0.00 avg 8.63 max 0.00 stddev 0.00 (20/20)
Session: avg 1.00 connections/session
Session lifetime [s]: 0.4
Session failtime [s]: 0.0
Session length histogram: 0 0 0 0 0 20
";

    /// Same httperf, plain workload with 3 HTTP/1.0 calls per connection:
    /// the server closes after the first, so httperf counts resets.
    const RESET_RUN: &str = "\
httperf --timeout=5 --client=0/1 --server=127.0.0.1 --port=18080 --uri=/ --http-version=1.0 --rate=100 --send-buffer=4096 --recv-buffer=16384 --num-conns=50 --num-calls=3
Maximum connect burst length: 1

Total: connections 50 requests 100 replies 50 test-duration 0.495 s

Connection rate: 100.9 conn/s (9.9 ms/conn, <=1 concurrent connections)
Connection time [ms]: min 1.4 avg 3.4 max 8.6 median 2.5 stddev 1.8
Connection time [ms]: connect 0.0
Connection length [replies/conn]: 1.000

Request rate: 201.8 req/s (5.0 ms/req)
Request size [B]: 86.0

Reply rate [replies/s]: min 0.0 avg 0.0 max 0.0 stddev 0.0 (0 samples)
Reply time [ms]: response 3.3 transfer 0.0
Reply size [B]: header 130.0 content 10240.0 footer 0.0 (total 10370.0)
Reply status: 1xx=0 2xx=50 3xx=0 4xx=0 5xx=0

CPU time [s]: user 0.07 system 0.43 (user 13.2% system 86.5% total 99.7%)
Net I/O: 1039.0 KB/s (8.5*10^6 bps)

Errors: total 50 client-timo 0 socket-timo 0 connrefused 0 connreset 50
Errors: fd-unavail 0 addrunavail 0 ftab-full 0 other 0
";

    #[test]
    fn parses_a_real_session_run() {
        let report = parse(SESSION_RUN).unwrap();
        assert_eq!(
            (report.connections, report.requests, report.replies),
            (20, 100, 100)
        );
        assert_eq!(report.test_duration_s, 2.317);
        assert_eq!(report.connection_rate_per_s, Some(8.6));
        assert_eq!(report.max_concurrent_connections, Some(5));
        let times = report.connection_time_ms.clone().unwrap();
        assert_eq!(
            (times.min, times.median, times.connect),
            (412.3, 420.5, Some(0.0))
        );
        assert_eq!(report.replies_per_connection, Some(5.0));
        assert_eq!(report.request_rate_per_s, Some(43.2));
        assert_eq!(report.reply_rate.clone().unwrap().samples, 0);
        assert_eq!(report.reply_time_response_ms, Some(3.6));
        assert_eq!(report.reply_size_bytes.clone().unwrap().total, 2182.0);
        assert_eq!(report.reply_status.success_2xx, 100);
        assert_eq!(report.errors, ErrorCounts::default());
        let session = report.session.unwrap();
        assert_eq!(
            (session.sessions_completed, session.sessions_total),
            (20, 20)
        );
        assert_eq!(session.rate_avg, 8.63);
        assert_eq!(session.connections_per_session, Some(1.0));
        assert_eq!(session.lifetime_s, Some(0.4));
        assert_eq!(session.length_histogram, vec![0, 0, 0, 0, 0, 20]);
        assert!(report.command_line.unwrap().contains("--wsess=20,5,0.100"));
    }

    #[test]
    fn parses_a_real_run_with_errors() {
        let report = parse(RESET_RUN).unwrap();
        assert_eq!(report.replies, 50);
        assert_eq!(report.errors.total, 50);
        assert_eq!(report.errors.connection_reset, 50);
        assert_eq!(report.errors.connection_refused, 0);
        assert!(report.session.is_none());
    }

    #[test]
    fn malformed_output_is_an_error_not_a_panic() {
        assert!(parse("").is_err());
        assert!(parse("hello: world\n:::\n\u{0}").is_err());
        // Every line cut short, one at a time.
        for (index, line) in SESSION_RUN.lines().enumerate() {
            let Some((label, _)) = line.split_once(':') else {
                continue;
            };
            let damaged: String = SESSION_RUN
                .lines()
                .enumerate()
                .map(|(other, text)| {
                    if other == index {
                        format!("{label}: x\n")
                    } else {
                        format!("{text}\n")
                    }
                })
                .collect();
            let result = parse(&damaged);
            let optional = [
                "Maximum connect burst length",
                "Request size [B]",
                "CPU time [s]",
                "Net I/O",
            ];
            if !optional.contains(&label) {
                assert!(result.is_err(), "damaged `{label}` accepted");
            }
        }
        let truncated = &SESSION_RUN[..SESSION_RUN.find("Errors").unwrap()];
        let error = parse(truncated).unwrap_err().to_string();
        assert!(error.contains("Errors"), "{error}");
    }

    #[test]
    fn command_line_follows_the_configuration() {
        let mut config = HttperfConfig::new("10.0.0.1", 8080);
        config.uri = "/file-10k".to_string();
        config.rate = Some(25.0);
        config.timeout_s = Some(5.0);
        config.session = Some(SessionWorkload {
            sessions: 100,
            calls: 5,
            think_s: 0.5,
        });
        config.validate().unwrap();
        assert_eq!(
            config.args(),
            vec![
                "--server=10.0.0.1",
                "--port=8080",
                "--uri=/file-10k",
                "--rate=25",
                "--timeout=5",
                "--wsess=100,5,0.5"
            ]
        );
        config.num_conns = Some(10);
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("httperf.session"));
        let text = "server = \"a\"\nport = 80\nrate = 10\n[session]\nsessions = 5\ncalls = 2\nthink_s = 1\n";
        let parsed: HttperfConfig = toml::from_str(text).unwrap();
        assert_eq!(parsed.session.unwrap().calls, 2);
    }
}
