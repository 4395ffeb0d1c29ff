//! SYN admission control in front of the server, inside the server
//! namespace (the spec's `[gate]`; `docs/testbed.md`): the Abacus paper's
//! Section 6 comparison run with real clients.
//!
//! * `none` (the default): nothing; a full accept queue makes the kernel
//!   drop SYNs itself (`ListenOverflows`);
//! * `iptables-limit`: an iptables `limit` match (a token bucket of `burst`
//!   tokens refilled at `rate_per_s`: the paper's W and r_t) on SYNs to the
//!   server, the rest dropped (*TBF*) or rejected (*TBF w/ Reject*); the
//!   rules' packet counters are read before they are removed;
//! * `vantage`: `vantage gate run` (the live NFQUEUE gate of `crates/live`)
//!   started in the server namespace with `[gate.config]` plus the
//!   listener and log the testbed fills in, stopped with SIGTERM (SIGKILL
//!   after `stop_timeout_s`); rules it left behind are listed and removed.
//!   The gate validates its own configuration.
//!
//! Rules are removed on normal teardown; a gate process is stopped when its
//! handle is dropped and gets SIGTERM if this process dies
//! (`PR_SET_PDEATHSIG`).

use std::io::Read;
use std::net::SocketAddr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use vantage_core::admission::syn::record::IntervalRecord;

use vantage_sys::iptables::{self as runner, Family, IptablesError};

use crate::netns::{Netns, NetnsError};

/// Largest `rate_per_s` iptables' `limit` match accepts.
pub const MAX_LIMIT_RATE: u32 = 10_000;
/// Largest `--limit-burst` iptables accepts.
pub const MAX_LIMIT_BURST: u32 = 10_000;
/// Longest `ready_timeout_s` and `stop_timeout_s`.
pub const MAX_GATE_WAIT_S: f64 = 120.0;
/// How often the ready file and the process are polled.
const POLL: Duration = Duration::from_millis(20);
/// Characters of the gate's standard error kept in messages.
const STDERR_TAIL: usize = 2000;

/// `[gate]`: what stands in front of the server (TOML table tagged by
/// `kind`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SynAdmissionSpec {
    /// Nothing: the kernel's accept-queue overflow is the only control.
    #[default]
    None,
    /// iptables `limit` (a token bucket) on SYNs to the server, the rest
    /// dropped or rejected with a TCP reset.
    IptablesLimit {
        /// Token refill rate r_t, SYNs per second, in [1, 10000].
        rate_per_s: u32,
        /// Bucket size W (`--limit-burst`), in [1, 10000].
        burst: u32,
        /// What happens to SYNs over the limit.
        action: LimitAction,
    },
    /// `vantage gate run` with this configuration.
    Vantage {
        /// The gate's configuration file as a table (`[gate]`, `[filter]`,
        /// …); `listeners` and `gate.log` are filled in by the testbed.
        config: toml::Table,
        /// How long the gate may take to create its ready file, seconds, in
        /// (0, 120]; default 10.
        #[serde(default = "default_ready_timeout")]
        ready_timeout_s: f64,
        /// How long the gate may take to exit after SIGTERM before it is
        /// killed, seconds, in (0, 120]; default 10.
        #[serde(default = "default_stop_timeout")]
        stop_timeout_s: f64,
    },
}

fn default_ready_timeout() -> f64 {
    10.0
}

fn default_stop_timeout() -> f64 {
    10.0
}

/// What `iptables-limit` does with SYNs over the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitAction {
    /// `-j DROP`: the client retransmits (the paper's TBF).
    Drop,
    /// `-j REJECT --reject-with tcp-reset`: the client gets
    /// `ECONNREFUSED` (the paper's TBF w/ Reject).
    Reject,
}

impl LimitAction {
    fn target(self) -> &'static [&'static str] {
        match self {
            LimitAction::Drop => &["DROP"],
            LimitAction::Reject => &["REJECT", "--reject-with", "tcp-reset"],
        }
    }
}

impl SynAdmissionSpec {
    /// The name of the kind, as in TOML.
    pub fn kind_name(&self) -> &'static str {
        match self {
            SynAdmissionSpec::None => "none",
            SynAdmissionSpec::IptablesLimit { .. } => "iptables-limit",
            SynAdmissionSpec::Vantage { .. } => "vantage",
        }
    }

    /// True when the gate needs the `iptables` program.
    pub fn needs_iptables(&self) -> bool {
        !matches!(self, SynAdmissionSpec::None)
    }

    /// Checks every key; the message names it (`gate.…`).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            SynAdmissionSpec::None => Ok(()),
            SynAdmissionSpec::IptablesLimit {
                rate_per_s, burst, ..
            } => {
                if !(1..=MAX_LIMIT_RATE).contains(rate_per_s) {
                    return Err(format!(
                        "gate.rate_per_s = {rate_per_s} is out of range (allowed 1..={MAX_LIMIT_RATE} SYNs per second, what iptables' `limit` match accepts)"
                    ));
                }
                if !(1..=MAX_LIMIT_BURST).contains(burst) {
                    return Err(format!(
                        "gate.burst = {burst} is out of range (allowed 1..={MAX_LIMIT_BURST}, what iptables' --limit-burst accepts)"
                    ));
                }
                Ok(())
            }
            SynAdmissionSpec::Vantage {
                config,
                ready_timeout_s,
                stop_timeout_s,
            } => {
                for (key, value) in [
                    ("ready_timeout_s", ready_timeout_s),
                    ("stop_timeout_s", stop_timeout_s),
                ] {
                    if !(value.is_finite() && *value > 0.0 && *value <= MAX_GATE_WAIT_S) {
                        return Err(format!(
                            "gate.{key} = {value} is out of range (allowed (0, {MAX_GATE_WAIT_S}] seconds)"
                        ));
                    }
                }
                if config.contains_key("listeners") {
                    return Err("gate.config.listeners: the testbed fills it in with the server's address and port; remove it".into());
                }
                match config.get("gate") {
                    None => {}
                    Some(toml::Value::Table(gate)) if gate.contains_key("log") => {
                        return Err("gate.config.gate.log: the testbed sets it to gate.jsonl in the result directory; remove it".into());
                    }
                    Some(toml::Value::Table(_)) => {}
                    Some(_) => return Err("gate.config.gate must be a table".into()),
                }
                match config.get("filter") {
                    Some(toml::Value::Table(_)) => Ok(()),
                    Some(_) => Err("gate.config.filter must be a table".into()),
                    None => Err(
                        "gate.config.filter is missing: the gate needs its filter (kind, bucket_size, refill_rate, …)".into(),
                    ),
                }
            }
        }
    }

    /// The gate's configuration file for a server at `listen`, logging to
    /// `log` (`vantage` kind only).
    pub fn render_config(&self, listen: SocketAddr, log: &Path) -> Option<String> {
        let SynAdmissionSpec::Vantage { config, .. } = self else {
            return None;
        };
        let mut config = config.clone();
        let gate = config
            .entry("gate")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(gate) = gate {
            gate.insert(
                "log".into(),
                toml::Value::String(log.to_string_lossy().into_owned()),
            );
        }
        let mut listener = toml::Table::new();
        listener.insert(
            "address".into(),
            toml::Value::String(listen.ip().to_string()),
        );
        listener.insert(
            "port".into(),
            toml::Value::Integer(i64::from(listen.port())),
        );
        config.insert(
            "listeners".into(),
            toml::Value::Array(vec![toml::Value::Table(listener)]),
        );
        // A table of plain TOML values always serializes.
        Some(toml::to_string(&config).unwrap_or_default())
    }
}

/// Why a gate could not be put in place.
#[derive(Debug, thiserror::Error)]
pub enum SynAdmissionError {
    #[error("iptables is not installed (looked in PATH, /usr/sbin and /sbin): the gate needs it (Debian/Ubuntu: apt-get install iptables)")]
    IptablesMissing,
    #[error("gate: {0}")]
    Namespace(#[from] NetnsError),
    #[error("gate: {0}")]
    Iptables(#[from] IptablesError),
    #[error("gate: cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("gate (kind = \"vantage\") needs the vantage binary, which the run was not given (RunOptions.watchdog names it)")]
    NoProgram,
    #[error("gate: cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("gate: `{command}` exited ({status}) before it was ready; its output: {stderr}")]
    ExitedEarly {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("gate: `{command}` did not create its ready file {ready} within {seconds} s; its output: {stderr}")]
    NotReady {
        command: String,
        ready: PathBuf,
        seconds: f64,
        stderr: String,
    },
}

/// What the gate did, as written to `gate.json` and the run summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SynAdmissionReport {
    pub kind: String,
    /// iptables: the rules installed (arguments after `-A`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// iptables: SYNs the `limit` rule accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_accepted: Option<u64>,
    /// iptables: SYNs over the limit, dropped or rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_refused: Option<u64>,
    /// vantage: the command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// vantage: its process id, and what it wrote into its ready file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_file_pid: Option<String>,
    /// vantage: seconds from start to ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_after_s: Option<f64>,
    /// vantage: how it ended — exit code, or the signal that ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_signal: Option<i32>,
    /// vantage: true when it had to be killed after `stop_timeout_s`.
    pub killed: bool,
    /// vantage: its JSON-lines log (lines, and lines that are not JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_bad_lines: Option<u64>,
    /// Rules found in the server namespace after the gate stopped (and then
    /// removed); a gate that cleans up leaves none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules_left_behind: Vec<String>,
    /// Problems met while stopping (the run's results are still valid).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl SynAdmissionReport {
    /// True when a `vantage` gate exited by itself with status 0.
    pub fn exited_cleanly(&self) -> bool {
        self.exit_code == Some(0) && !self.killed
    }
}

/// Entering the namespace or running iptables in it failed.
#[derive(Debug, thiserror::Error)]
enum InNamespaceError {
    #[error(transparent)]
    Enter(#[from] NetnsError),
    #[error(transparent)]
    Iptables(#[from] IptablesError),
}

impl From<InNamespaceError> for SynAdmissionError {
    fn from(error: InNamespaceError) -> Self {
        match error {
            InNamespaceError::Enter(e) => SynAdmissionError::Namespace(e),
            InNamespaceError::Iptables(e) => SynAdmissionError::Iptables(e),
        }
    }
}

/// Runs `iptables -w 5 ARGS` inside `ns` and returns its standard output.
fn iptables_in(ns: &Netns, program: &Path, args: &[String]) -> Result<String, InNamespaceError> {
    let program = program.to_path_buf();
    let args = args.to_vec();
    let output = ns.run(move || {
        let mut all: Vec<&str> = vec!["-w", "5"];
        all.extend(args.iter().map(String::as_str));
        runner::run(&program, &all)
    })??;
    Ok(output)
}

/// The two `iptables-limit` rules (arguments after `-A`/`-D`).
pub fn limit_rules(
    listen: SocketAddr,
    rate_per_s: u32,
    burst: u32,
    action: LimitAction,
) -> [Vec<String>; 2] {
    let syns = |extra: &[&str]| -> Vec<String> {
        let mut rule: Vec<String> = [
            "INPUT",
            "-p",
            "tcp",
            "-d",
            &listen.ip().to_string(),
            "--dport",
            &listen.port().to_string(),
            "--syn",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        rule.extend(extra.iter().map(|s| s.to_string()));
        rule
    };
    let rate = format!("{rate_per_s}/second");
    let burst = burst.to_string();
    let mut refuse = vec!["-j"];
    refuse.extend_from_slice(action.target());
    [
        syns(&[
            "-m",
            "limit",
            "--limit",
            &rate,
            "--limit-burst",
            &burst,
            "-j",
            "ACCEPT",
        ]),
        syns(&refuse),
    ]
}

/// Packet counts of the accept and refuse rules in `iptables -L INPUT -n
/// -v -x` output: the first ACCEPT row that shows a `limit:` match, and the
/// first DROP or REJECT row.
pub fn parse_limit_counters(listing: &str) -> (Option<u64>, Option<u64>) {
    let mut accepted = None;
    let mut refused = None;
    for line in listing.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(packets), Some(target)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        let Ok(packets) = packets.parse::<u64>() else {
            continue;
        };
        if *target == "ACCEPT" && line.contains("limit:") && accepted.is_none() {
            accepted = Some(packets);
        } else if (*target == "DROP" || *target == "REJECT") && refused.is_none() {
            refused = Some(packets);
        }
    }
    (accepted, refused)
}

/// The rules of the server namespace's `filter`, `mangle` and `raw` tables,
/// without the chain policies (`-P …`): what a gate left behind.
fn rules_in(ns: &Netns, program: &Path) -> Result<Vec<String>, InNamespaceError> {
    let mut rules = Vec::new();
    for table in ["filter", "mangle", "raw"] {
        let listing = iptables_in(ns, program, &["-t".into(), table.into(), "-S".into()])?;
        rules.extend(
            listing
                .lines()
                .filter(|l| l.starts_with("-A ") || l.starts_with("-N "))
                .map(|l| format!("{table}: {l}")),
        );
    }
    Ok(rules)
}

/// Flushes and deletes every chain of the server namespace's `filter`,
/// `mangle` and `raw` tables (it belongs to the run).
fn flush_all(ns: &Netns, program: &Path) -> Result<(), InNamespaceError> {
    for table in ["filter", "mangle", "raw"] {
        for op in ["-F", "-X"] {
            iptables_in(ns, program, &["-t".into(), table.into(), op.into()])?;
        }
    }
    Ok(())
}

/// A gate in place; stop it with [`RunningSynAdmission::stop`]. Dropped without
/// stopping (error paths, panics), it kills the gate process and removes
/// its rules.
pub struct RunningSynAdmission {
    ns: Netns,
    state: State,
}

enum State {
    None,
    Limit {
        program: PathBuf,
        rules: [Vec<String>; 2],
        installed: usize,
        dir: PathBuf,
    },
    Vantage(Box<VantageProcess>),
    Stopped,
}

struct VantageProcess {
    child: Child,
    command: String,
    iptables: Option<PathBuf>,
    log: PathBuf,
    stderr: PathBuf,
    ready_file_pid: String,
    ready_after: Duration,
    stop_timeout: Duration,
}

fn tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        let _ = file.read_to_string(&mut text);
    }
    let chars: Vec<char> = text.chars().collect();
    let start = chars.len().saturating_sub(STDERR_TAIL);
    chars[start..].iter().collect::<String>().trim().to_string()
}

fn describe_status(status: std::process::ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => "unknown status".into(),
    }
}

/// Puts `spec` in front of the server listening on `listen` in `ns`. Files
/// go in `dir`; `program` is the vantage binary (for `kind = "vantage"`).
pub fn start(
    spec: &SynAdmissionSpec,
    ns: &Netns,
    listen: SocketAddr,
    dir: &Path,
    program: Option<&Path>,
) -> Result<RunningSynAdmission, SynAdmissionError> {
    let state = match spec {
        SynAdmissionSpec::None => State::None,
        SynAdmissionSpec::IptablesLimit {
            rate_per_s,
            burst,
            action,
        } => {
            let iptables = runner::find(Family::Ipv4).ok_or(SynAdmissionError::IptablesMissing)?;
            let rules = limit_rules(listen, *rate_per_s, *burst, *action);
            let mut gate = RunningSynAdmission {
                ns: ns.clone(),
                state: State::Limit {
                    program: iptables.clone(),
                    rules: rules.clone(),
                    installed: 0,
                    dir: dir.to_path_buf(),
                },
            };
            for rule in &rules {
                let mut args = vec!["-A".to_string()];
                args.extend(rule.iter().cloned());
                iptables_in(ns, &iptables, &args)?;
                if let State::Limit { installed, .. } = &mut gate.state {
                    *installed += 1;
                }
            }
            return Ok(gate);
        }
        SynAdmissionSpec::Vantage {
            ready_timeout_s,
            stop_timeout_s,
            ..
        } => {
            let program = program.ok_or(SynAdmissionError::NoProgram)?;
            let dir = std::path::absolute(dir).map_err(|source| SynAdmissionError::Write {
                path: dir.to_path_buf(),
                source,
            })?;
            let write_error = |path: &Path| {
                let path = path.to_path_buf();
                move |source| SynAdmissionError::Write { path, source }
            };
            let config_path = dir.join("gate.toml");
            let log = dir.join("gate.jsonl");
            let ready = dir.join("gate.ready");
            let stdout_path = dir.join("gate.stdout.log");
            let stderr_path = dir.join("gate.stderr.log");
            let text = spec.render_config(listen, &log).unwrap_or_default();
            std::fs::write(&config_path, text).map_err(write_error(&config_path))?;
            match std::fs::remove_file(&ready) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(write_error(&ready)(source)),
            }
            let stdout = std::fs::File::create(&stdout_path).map_err(write_error(&stdout_path))?;
            let stderr = std::fs::File::create(&stderr_path).map_err(write_error(&stderr_path))?;
            let args = [
                "gate".to_string(),
                "run".to_string(),
                "--config".to_string(),
                config_path.to_string_lossy().into_owned(),
                "--ready-file".to_string(),
                ready.to_string_lossy().into_owned(),
            ];
            let command_line = format!("{} {}", program.display(), args.join(" "));
            let mut command = ns.command(&program.to_string_lossy());
            command
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::from(stdout))
                .stderr(Stdio::from(stderr));
            // SAFETY: prctl is async-signal-safe and touches only this child.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let started = Instant::now();
            let child = command.spawn().map_err(|source| SynAdmissionError::Spawn {
                command: command_line.clone(),
                source,
            })?;
            let mut process = VantageProcess {
                child,
                command: command_line.clone(),
                iptables: runner::find(Family::Ipv4),
                log,
                stderr: stderr_path.clone(),
                ready_file_pid: String::new(),
                ready_after: Duration::ZERO,
                stop_timeout: Duration::from_secs_f64(*stop_timeout_s),
            };
            let limit = Duration::from_secs_f64(*ready_timeout_s);
            // Bounded by `limit`.
            loop {
                if let Ok(Some(status)) = process.child.try_wait() {
                    return Err(SynAdmissionError::ExitedEarly {
                        command: command_line,
                        status: describe_status(status),
                        stderr: tail(&stderr_path),
                    });
                }
                let content = std::fs::read_to_string(&ready).unwrap_or_default();
                if !content.trim().is_empty() {
                    process.ready_file_pid = content.trim().to_string();
                    process.ready_after = started.elapsed();
                    break;
                }
                if started.elapsed() >= limit {
                    let gate = RunningSynAdmission {
                        ns: ns.clone(),
                        state: State::Vantage(Box::new(process)),
                    };
                    drop(gate);
                    return Err(SynAdmissionError::NotReady {
                        command: command_line,
                        ready,
                        seconds: *ready_timeout_s,
                        stderr: tail(&stderr_path),
                    });
                }
                std::thread::sleep(POLL);
            }
            State::Vantage(Box::new(process))
        }
    };
    Ok(RunningSynAdmission {
        ns: ns.clone(),
        state,
    })
}

impl RunningSynAdmission {
    /// Stops the gate: reads the iptables counters and removes the rules,
    /// or sends the gate process SIGTERM (SIGKILL after `stop_timeout_s`),
    /// records how it ended and removes anything it left behind. Problems
    /// are recorded in the report.
    pub fn stop(mut self) -> SynAdmissionReport {
        let state = std::mem::replace(&mut self.state, State::Stopped);
        let mut report = SynAdmissionReport::default();
        match state {
            State::None | State::Stopped => report.kind = "none".into(),
            State::Limit {
                program,
                rules,
                installed,
                dir,
            } => {
                report.kind = "iptables-limit".into();
                report.rules = rules.iter().map(|r| r.join(" ")).collect();
                let args: Vec<String> = ["-L", "INPUT", "-n", "-v", "-x"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                match iptables_in(&self.ns, &program, &args) {
                    Ok(listing) => {
                        let (accepted, refused) = parse_limit_counters(&listing);
                        report.limit_accepted = accepted;
                        report.limit_refused = refused;
                        let path = dir.join("iptables.txt");
                        if let Err(e) = std::fs::write(&path, &listing) {
                            report
                                .problems
                                .push(format!("cannot write {}: {e}", path.display()));
                        }
                    }
                    Err(e) => report.problems.push(format!("reading counters: {e}")),
                }
                remove_limit_rules(&self.ns, &program, &rules[..installed], &mut report);
            }
            State::Vantage(mut process) => {
                report.kind = "vantage".into();
                report.command = Some(process.command.clone());
                report.pid = Some(process.child.id());
                report.ready_file_pid = Some(process.ready_file_pid.clone());
                report.ready_after_s = Some(process.ready_after.as_secs_f64());
                let (status, killed) = terminate(&mut process);
                report.killed = killed;
                match status {
                    Some(status) => {
                        report.exit_code = status.code();
                        report.exit_signal = status.signal();
                        if !status.success() {
                            report.problems.push(format!(
                                "the gate ended with {}: {}",
                                describe_status(status),
                                tail(&process.stderr)
                            ));
                        }
                    }
                    None => report
                        .problems
                        .push("the gate's exit status could not be read".into()),
                }
                if killed {
                    report
                        .problems
                        .push("the gate did not exit after SIGTERM and was killed".into());
                }
                let (lines, bad) = count_log_lines(&process.log);
                report.log = Some(process.log.clone());
                report.log_lines = Some(lines);
                report.log_bad_lines = Some(bad);
                if let Some(program) = &process.iptables {
                    match rules_in(&self.ns, program) {
                        Ok(left) => {
                            if !left.is_empty() {
                                if let Err(e) = flush_all(&self.ns, program) {
                                    report
                                        .problems
                                        .push(format!("removing rules left behind: {e}"));
                                }
                            }
                            report.rules_left_behind = left;
                        }
                        Err(e) => report
                            .problems
                            .push(format!("listing rules left behind: {e}")),
                    }
                }
            }
        }
        report
    }
}

fn remove_limit_rules(
    ns: &Netns,
    program: &Path,
    rules: &[Vec<String>],
    report: &mut SynAdmissionReport,
) {
    for rule in rules.iter().rev() {
        let mut args = vec!["-D".to_string()];
        args.extend(rule.iter().cloned());
        if let Err(e) = iptables_in(ns, program, &args) {
            report.problems.push(format!("removing a rule: {e}"));
        }
    }
}

/// SIGTERM, wait up to the stop timeout, then SIGKILL. Returns the exit
/// status and whether the process had to be killed.
fn terminate(process: &mut VantageProcess) -> (Option<std::process::ExitStatus>, bool) {
    if let Ok(Some(status)) = process.child.try_wait() {
        return (Some(status), false);
    }
    let pid = nix::unistd::Pid::from_raw(process.child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + process.stop_timeout;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = process.child.try_wait() {
            return (Some(status), false);
        }
        std::thread::sleep(POLL);
    }
    let _ = process.child.kill();
    (process.child.wait().ok(), true)
}

/// Lines of the gate's log, and how many of them are not an interval
/// record ([`IntervalRecord`], the format the gate writes).
pub fn count_log_lines(path: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines = 0;
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        lines += 1;
        if serde_json::from_str::<IntervalRecord>(line).is_err() {
            bad += 1;
        }
    }
    (lines, bad)
}

impl Drop for RunningSynAdmission {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.state, State::Stopped) {
            State::None | State::Stopped => {}
            State::Limit {
                program,
                rules,
                installed,
                ..
            } => {
                let mut report = SynAdmissionReport::default();
                remove_limit_rules(&self.ns, &program, &rules[..installed], &mut report);
                for problem in report.problems {
                    eprintln!("testbed: gate: {problem}");
                }
            }
            State::Vantage(mut process) => {
                process.stop_timeout = process.stop_timeout.min(Duration::from_secs(2));
                terminate(&mut process);
                if let Some(program) = &process.iptables {
                    if matches!(rules_in(&self.ns, program), Ok(left) if !left.is_empty()) {
                        let _ = flush_all(&self.ns, program);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SynAdmissionSpec, String> {
        #[derive(Deserialize)]
        struct Wrapper {
            gate: SynAdmissionSpec,
        }
        let wrapper: Wrapper = toml::from_str(text).map_err(|e| e.to_string())?;
        wrapper.gate.validate()?;
        Ok(wrapper.gate)
    }

    #[test]
    fn limit_rules_accept_within_the_bucket_and_refuse_the_rest() {
        let listen: SocketAddr = "10.77.0.2:80".parse().unwrap();
        let [accept, refuse] = limit_rules(listen, 120, 60, LimitAction::Reject);
        assert_eq!(
            accept.join(" "),
            "INPUT -p tcp -d 10.77.0.2 --dport 80 --syn -m limit --limit 120/second --limit-burst 60 -j ACCEPT"
        );
        assert_eq!(
            refuse.join(" "),
            "INPUT -p tcp -d 10.77.0.2 --dport 80 --syn -j REJECT --reject-with tcp-reset"
        );
        let [_, drop] = limit_rules(listen, 120, 60, LimitAction::Drop);
        assert!(drop.join(" ").ends_with("--syn -j DROP"));
    }

    #[test]
    fn counters_come_from_the_limit_and_refuse_rows() {
        let listing = "\
Chain INPUT (policy ACCEPT 10 packets, 600 bytes)
    pkts      bytes target     prot opt in     out     source               destination
    1234    74040 ACCEPT     6    --  *      *       0.0.0.0/0            10.77.0.2            tcp dpt:80 flags:0x17/0x02 limit: avg 120/sec burst 120
     56     3360 REJECT     6    --  *      *       0.0.0.0/0            10.77.0.2            tcp dpt:80 flags:0x17/0x02 reject-with tcp-reset
";
        assert_eq!(parse_limit_counters(listing), (Some(1234), Some(56)));
        assert_eq!(parse_limit_counters("Chain INPUT\n"), (None, None));
    }

    #[test]
    fn kinds_parse_with_defaults() {
        assert_eq!(
            parse("[gate]\nkind = \"none\"\n").unwrap(),
            SynAdmissionSpec::None
        );
        let limit = parse(
            "[gate]\nkind = \"iptables-limit\"\nrate_per_s = 120\nburst = 120\naction = \"drop\"\n",
        )
        .unwrap();
        assert_eq!(
            limit,
            SynAdmissionSpec::IptablesLimit {
                rate_per_s: 120,
                burst: 120,
                action: LimitAction::Drop
            }
        );
        let vantage = parse(
            "[gate]\nkind = \"vantage\"\n[gate.config.gate]\nqueue = 0\n[gate.config.filter]\nkind = \"abacus\"\n",
        )
        .unwrap();
        match vantage {
            SynAdmissionSpec::Vantage {
                ready_timeout_s,
                stop_timeout_s,
                config,
            } => {
                assert_eq!(ready_timeout_s, 10.0);
                assert_eq!(stop_timeout_s, 10.0);
                assert!(config.contains_key("filter"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                "[gate]\nkind = \"iptables-limit\"\nrate_per_s = 0\nburst = 1\naction = \"drop\"\n",
                "gate.rate_per_s = 0",
            ),
            (
                "[gate]\nkind = \"iptables-limit\"\nrate_per_s = 20000\nburst = 1\naction = \"drop\"\n",
                "gate.rate_per_s = 20000",
            ),
            (
                "[gate]\nkind = \"iptables-limit\"\nrate_per_s = 10\nburst = 0\naction = \"drop\"\n",
                "gate.burst = 0",
            ),
            (
                "[gate]\nkind = \"iptables-limit\"\nrate_per_s = 10\nburst = 5\naction = \"bounce\"\n",
                "bounce",
            ),
            (
                "[gate]\nkind = \"iptables-limit\"\nrate = 10\nburst = 5\naction = \"drop\"\n",
                "unknown field `rate`",
            ),
            ("[gate]\nkind = \"firewall\"\n", "unknown variant `firewall`"),
            (
                "[gate]\nkind = \"vantage\"\n[gate.config]\ngate = { queue = 0 }\n",
                "gate.config.filter is missing",
            ),
            (
                "[gate]\nkind = \"vantage\"\n[gate.config.filter]\nkind = \"tbf\"\n[[gate.config.listeners]]\nport = 80\n",
                "gate.config.listeners",
            ),
            (
                "[gate]\nkind = \"vantage\"\n[gate.config.gate]\nlog = \"x\"\n[gate.config.filter]\nkind = \"tbf\"\n",
                "gate.config.gate.log",
            ),
            (
                "[gate]\nkind = \"vantage\"\nready_timeout_s = 0\n[gate.config.filter]\nkind = \"tbf\"\n",
                "gate.ready_timeout_s = 0",
            ),
            (
                "[gate]\nkind = \"vantage\"\nstop_timeout_s = 500\n[gate.config.filter]\nkind = \"tbf\"\n",
                "gate.stop_timeout_s = 500",
            ),
        ];
        for (text, expected) in cases {
            let error = parse(text).unwrap_err();
            assert!(error.contains(expected), "{text}\n→ {error}");
        }
    }

    #[test]
    fn config_gets_the_listener_and_the_log() {
        let spec = parse(
            "[gate]\nkind = \"vantage\"\n[gate.config.gate]\nqueue = 3\n[gate.config.filter]\nkind = \"abacus\"\nbucket_size = 120\n",
        )
        .unwrap();
        let text = spec
            .render_config(
                "10.77.0.2:80".parse().unwrap(),
                Path::new("/tmp/run/gate.jsonl"),
            )
            .unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(table["gate"]["queue"].as_integer(), Some(3));
        assert_eq!(table["gate"]["log"].as_str(), Some("/tmp/run/gate.jsonl"));
        assert_eq!(table["filter"]["kind"].as_str(), Some("abacus"));
        assert_eq!(table["filter"]["bucket_size"].as_integer(), Some(120));
        let listeners = table["listeners"].as_array().unwrap();
        assert_eq!(listeners.len(), 1);
        assert_eq!(listeners[0]["address"].as_str(), Some("10.77.0.2"));
        assert_eq!(listeners[0]["port"].as_integer(), Some(80));
        assert_eq!(
            SynAdmissionSpec::None.render_config("10.77.0.2:80".parse().unwrap(), Path::new("x")),
            None
        );
    }

    #[test]
    fn log_lines_that_are_not_interval_records_are_counted() {
        let dir = std::env::temp_dir().join(format!("vantage-gate-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gate.jsonl");
        let record =
            r#"{"time_s":0.0,"interval_s":1.0,"arrivals":1,"accepted":1,"dropped":0,"rejected":0}"#;
        std::fs::write(
            &path,
            format!("{record}\n\nnot json\n{{\"b\":2}}\n{record}\n"),
        )
        .unwrap();
        assert_eq!(count_log_lines(&path), (4, 2));
        assert_eq!(count_log_lines(&dir.join("missing")), (0, 0));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
