//! `vantage certes watch`: Certes (Olshefski, Nieh and Agrawal, TOCS 2004,
//! Sections 3–4) running beside an unmodified server — the response time
//! its clients perceive, SYN retries and give-ups included, per interval,
//! as Prometheus metrics and JSON Lines. See `docs/certes-watch.md`.
//!
//! * [`config`] — the TOML file (the model's keys are `certes estimate`'s);
//! * [`capture`] — the thread that reads an `AF_PACKET` ring
//!   (`vantage_sys::packet_ring`, a kernel filter for the listeners' ports)
//!   into the same connection stream `certes estimate --trace` uses and
//!   runs the same estimator over each closed interval;
//! * [`metrics`] — the Prometheus families, with a histogram whose buckets
//!   are the clients' SYN-schedule points;
//! * [`gate_input`] — with `[gate]`, a `vantage gate`'s log followed
//!   ([`follow`]) and its exact SYN verdicts exported and estimated from
//!   beside the capture's;
//! * [`proxy_input`] — with `[proxy]`, a `vantage proxy`'s Certes counters
//!   stream followed and estimated (series `source="proxy"`), beside the
//!   capture or alone: without `listeners` there is no capture and no
//!   capability is needed.
//!
//! The daemon is put together like the gate and the proxy: signals as flags
//! (SIGTERM/SIGINT stop, SIGHUP reloads, SIGUSR1 reopens the log and the
//! JSON Lines file), the ready file, sd_notify, the hardened metrics
//! endpoint. It needs `CAP_NET_RAW` only (the packet socket; attaching a
//! classic filter and mapping the ring need nothing more), checked at
//! start — and nothing with `[proxy]` and no `listeners`. A reload that changes the capture or the model restarts the
//! capture thread (connections in flight at that instant are not
//! counted, and the estimate starts afresh; counters go on); one that
//! changes `metrics_listen` is refused.
//!
//! Departures from `certes estimate --trace`: the kernel filter drops pure
//! ACKs, so a handshake's RTT ends at the client's first segment with a
//! payload or FIN (its request) rather than at a bare ACK; intervals still
//! open when the daemon stops are not written.

pub mod capture;
pub mod config;
pub mod follow;
pub mod gate_input;
pub mod lines;
pub mod metrics;
pub mod proxy_input;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use capture::{CaptureReport, Pipeline};
pub use config::{ConfigError, WatchConfig};
pub use metrics::WatchMetrics;
pub use proxy_input::ProxyPipeline;

use crate::daemon::{
    connection_cap, descriptor_limit, notify, LogFile, NotifyState, ReadyFile, Signals,
};
use crate::metrics::{EndpointError, Format, Limits, MetricsServer, Render};
use vantage_sys::capabilities;
use vantage_sys::packet_ring::{PacketRingError, CAP_NET_RAW};

/// How often the main thread looks at the flags.
const TICK: Duration = Duration::from_millis(50);

/// Why the daemon could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("vantage certes watch needs CAP_NET_RAW to capture packets: run it as root, or give it the capability (setcap cap_net_raw+ep, or AmbientCapabilities=CAP_NET_RAW in its unit)")]
    MissingCapability,
    #[error("capture: {0}")]
    Capture(#[from] PacketRingError),
    #[error("capture stream: {0}")]
    Stream(#[from] vantage_trace::certes::CaptureInputError),
    #[error("model: {0}")]
    Model(#[source] vantage_core::certes::CertesError),
    #[error("client learner: {0}")]
    Learn(#[source] vantage_core::certes::learn::LearnError),
    #[error("{}: {source}", path.display())]
    Output {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("JSON Lines record: {0}")]
    Json(#[source] serde_json::Error),
    #[error(transparent)]
    Metrics(#[from] EndpointError),
    #[error(transparent)]
    Ready(#[from] crate::daemon::ReadyFileError),
    #[error("cannot start the capture thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("the capture thread panicked")]
    Panicked,
}

/// The log and the JSON Lines file, shared by the capture thread and the
/// main thread (which reopens them).
#[derive(Debug, Default)]
pub struct Outputs {
    log: Option<LogFile>,
    jsonl: Option<LogFile>,
    /// A write failed (reported once, then again after a success).
    failing: bool,
}

fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Outputs {
    fn open(config: &WatchConfig) -> Result<Outputs, WatchError> {
        let open = |path: &Option<PathBuf>| -> Result<Option<LogFile>, WatchError> {
            match path {
                Some(p) => LogFile::open(p)
                    .map(Some)
                    .map_err(|source| WatchError::Output {
                        path: p.clone(),
                        source,
                    }),
                None => Ok(None),
            }
        };
        Ok(Outputs {
            log: open(&config.log)?,
            jsonl: open(&config.jsonl)?,
            failing: false,
        })
    }

    fn lock(shared: &Mutex<Outputs>) -> std::sync::MutexGuard<'_, Outputs> {
        match shared.lock() {
            Ok(o) => o,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A line to the log (and standard error), stamped with UNIX seconds.
    pub fn log(shared: &Mutex<Outputs>, message: &str) {
        let line = format!("{:.3} vantage certes watch: {message}", unix_seconds());
        eprintln!("{line}");
        let mut outputs = Outputs::lock(shared);
        if let Some(log) = &mut outputs.log {
            if let Err(e) = log.write_line(line.as_bytes()) {
                eprintln!("vantage certes watch: log {}: {e}", log.path().display());
            }
        }
    }

    /// One interval's records to the JSON Lines file.
    pub fn write_jsonl(shared: &Mutex<Outputs>, lines: &[Vec<u8>]) {
        let mut outputs = Outputs::lock(shared);
        let mut error = None;
        if let Some(jsonl) = &mut outputs.jsonl {
            for line in lines {
                if let Err(e) = jsonl.write_line(line) {
                    error = Some(format!("{}: {e}", jsonl.path().display()));
                    break;
                }
            }
        }
        match error {
            Some(e) if !outputs.failing => {
                outputs.failing = true;
                drop(outputs);
                Outputs::log(shared, &format!("JSON Lines not written: {e}"));
            }
            Some(_) => {}
            None => outputs.failing = false,
        }
    }

    /// SIGUSR1: both files reopened by path (after logrotate).
    fn reopen(shared: &Mutex<Outputs>) {
        let mut outputs = Outputs::lock(shared);
        let mut errors = Vec::new();
        let Outputs { log, jsonl, .. } = &mut *outputs;
        for file in [log, jsonl].into_iter().flatten() {
            if let Err(e) = file.reopen() {
                errors.push(format!("{}: {e}", file.path().display()));
            }
        }
        drop(outputs);
        for e in errors {
            Outputs::log(shared, &format!("cannot reopen {e}"));
        }
    }
}

/// Options of one run beside the configuration.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Written (the pid) once capturing; removed on exit.
    pub ready_file: Option<PathBuf>,
    pub signals: Signals,
    /// The file a reload (SIGHUP) reads; without it a reload is refused.
    pub config_path: Option<PathBuf>,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RunSummary {
    pub duration_s: f64,
    pub reloads: u64,
    /// Over every capture thread of the run.
    pub packets: u64,
    pub intervals: u64,
    pub ring_drops: u64,
    /// With `[proxy]`: intervals of the proxy's stream estimated.
    pub proxy_intervals: u64,
}

/// `check`: the configuration is valid; what it says.
pub fn check(path: &Path) -> Result<String, WatchError> {
    Ok(WatchConfig::load(path)?.describe())
}

/// Runs the daemon until a stop signal.
pub fn run(config: &WatchConfig, options: &RunOptions) -> Result<RunSummary, WatchError> {
    if config.captures() && !capabilities::holds(CAP_NET_RAW) {
        return Err(WatchError::MissingCapability);
    }
    let started = Instant::now();
    let mut config = config.clone();
    let metrics = Arc::new(WatchMetrics::new());
    let outputs = Arc::new(Mutex::new(Outputs::open(&config)?));
    let server = match config.metrics_listen {
        None => None,
        Some(address) => {
            let limits = Limits {
                max_connections: connection_cap(descriptor_limit().unwrap_or(1024)),
                ..Limits::default()
            };
            let scrape = Arc::clone(&metrics);
            let render: Arc<Render> = Arc::new(move |format: Format| scrape.encode(format));
            let server =
                MetricsServer::start(address, limits, metrics.endpoint_counters(), render)?;
            if server.address().ip().is_unspecified() {
                Outputs::log(
                    &outputs,
                    &format!(
                        "warning: metrics on {} answer any host that reaches the port; bind to 127.0.0.1 or an internal address, or firewall it",
                        server.address()
                    ),
                );
            }
            Some(server)
        }
    };
    let mut pipeline = start_capture(&config, &metrics, &outputs)?;
    let mut proxy = ProxyPipeline::start(&config, Arc::clone(&metrics), Arc::clone(&outputs))?;
    let _ready = match &options.ready_file {
        Some(path) => Some(ReadyFile::create(path)?),
        None => None,
    };
    if let Err(e) = notify(NotifyState::Ready) {
        Outputs::log(&outputs, &format!("cannot notify systemd: {e}"));
    }
    let doing = if config.captures() {
        "capturing"
    } else {
        "following the proxy's stream"
    };
    Outputs::log(&outputs, &format!("{doing}: {}", config.describe()));
    if let Some(server) = &server {
        Outputs::log(
            &outputs,
            &format!("metrics on http://{}/metrics", server.address()),
        );
    }
    let mut summary = RunSummary::default();
    let add = |summary: &mut RunSummary, report: CaptureReport| {
        summary.packets += report.packets;
        summary.intervals += report.intervals;
        summary.ring_drops += report.ring_drops;
    };
    let signals = &options.signals;
    loop {
        std::thread::sleep(TICK);
        // A capture thread ends by itself only on an error (or a panic),
        // the proxy's only on a panic.
        if signals.stopping()
            || pipeline.as_ref().is_some_and(Pipeline::finished)
            || proxy.as_ref().is_some_and(ProxyPipeline::finished)
        {
            break;
        }
        if signals.take_reopen() {
            Outputs::reopen(&outputs);
        }
        if signals.take_reload() {
            let _ = notify(NotifyState::Reloading);
            match reload(options.config_path.as_deref(), &config) {
                Err(refusal) => {
                    metrics.count_reload(false);
                    Outputs::log(
                        &outputs,
                        &format!("reload refused, the running configuration goes on: {refusal}"),
                    );
                }
                Ok(new) => {
                    // The new capture first: if it cannot start, the old
                    // one goes on.
                    let started = start_capture(&new, &metrics, &outputs).and_then(|capture| {
                        Ok((
                            capture,
                            ProxyPipeline::start(&new, Arc::clone(&metrics), Arc::clone(&outputs))?,
                        ))
                    });
                    match started {
                        Err(e) => {
                            metrics.count_reload(false);
                            Outputs::log(
                                &outputs,
                                &format!("reload refused, the running configuration goes on: {e}"),
                            );
                        }
                        Ok((capture, new_proxy)) => {
                            let old = std::mem::replace(&mut pipeline, capture);
                            match old.map(Pipeline::stop) {
                                Some(Ok(report)) => add(&mut summary, report),
                                Some(Err(e)) => {
                                    Outputs::log(&outputs, &format!("old capture: {e}"))
                                }
                                None => {}
                            }
                            let old = std::mem::replace(&mut proxy, new_proxy);
                            match old.map(ProxyPipeline::stop) {
                                Some(Ok(intervals)) => summary.proxy_intervals += intervals,
                                Some(Err(e)) => {
                                    Outputs::log(&outputs, &format!("old proxy input: {e}"))
                                }
                                None => {}
                            }
                            if new.log != config.log || new.jsonl != config.jsonl {
                                match Outputs::open(&new) {
                                    Ok(o) => *Outputs::lock(&outputs) = o,
                                    Err(e) => Outputs::log(
                                        &outputs,
                                        &format!("new outputs not opened, old ones kept: {e}"),
                                    ),
                                }
                            }
                            metrics.count_reload(true);
                            summary.reloads += 1;
                            Outputs::log(&outputs, &format!("reloaded: {}", new.describe()));
                            config = new;
                        }
                    }
                }
            }
            let _ = notify(NotifyState::Ready);
        }
    }
    let _ = notify(NotifyState::Stopping);
    if let Some(pipeline) = pipeline {
        let report = pipeline.stop()?;
        add(&mut summary, report);
    }
    if let Some(proxy) = proxy {
        summary.proxy_intervals += proxy.stop()?;
    }
    summary.duration_s = started.elapsed().as_secs_f64();
    Outputs::log(
        &outputs,
        &format!(
            "stopped: {} packets, {} intervals, {} ring drops, {} intervals of the proxy's stream",
            summary.packets, summary.intervals, summary.ring_drops, summary.proxy_intervals
        ),
    );
    drop(server);
    Ok(summary)
}

/// The capture, when the configuration has listeners.
fn start_capture(
    config: &WatchConfig,
    metrics: &Arc<WatchMetrics>,
    outputs: &Arc<Mutex<Outputs>>,
) -> Result<Option<Pipeline>, WatchError> {
    if !config.captures() {
        return Ok(None);
    }
    Pipeline::start(config, Arc::clone(metrics), Arc::clone(outputs)).map(Some)
}

/// Reads the file again; refuses a change that needs a restart.
fn reload(path: Option<&Path>, running: &WatchConfig) -> Result<WatchConfig, String> {
    let path = path.ok_or("no configuration file to read")?;
    let new = WatchConfig::load(path).map_err(|e| e.to_string())?;
    if new.metrics_listen != running.metrics_listen {
        return Err("metrics_listen changed: restart the daemon for that".into());
    }
    if new.captures() && !running.captures() && !capabilities::holds(CAP_NET_RAW) {
        return Err("listeners added, and capturing needs CAP_NET_RAW, which the daemon lacks: restart it with the capability".into());
    }
    Ok(new)
}
