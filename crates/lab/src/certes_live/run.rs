//! One testbed run per configuration, with the watch daemon (and a second,
//! learning one; with `front = "proxy"`, `vantage proxy` and a daemon on its
//! `[certes]` stream) in the server namespace and a real Prometheus scraping
//! them there.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use vantage_core::tcp::SynProfile;
use vantage_testbed::profiles;
use vantage_testbed::run::{run_beside, BesideServer, RunError, RunOutput};
use vantage_testbed::spec::{TestbedSpec, SERVER_PORT};
use vantage_testbed::topology::{Topology, HOST_IFACE, SERVER_ADDR};

use super::plan::{Configuration, Drops, Experiment, Front, BACKEND_PORT};

/// The Prometheus binary (the distribution's package).
pub const PROMETHEUS: &str = "/usr/bin/prometheus";
/// Where the told daemon, the learning one and Prometheus listen, inside
/// the server namespace.
const TOLD_METRICS: &str = "127.0.0.1:9464";
const LEARNED_METRICS: &str = "127.0.0.1:9465";
const PROXY_METRICS: &str = "127.0.0.1:9466";
/// The proxy's connection cap: above any queue the runs build, so that it
/// refuses nobody.
const PROXY_MAX_CONNECTIONS: usize = 4096;
/// How long a stopping proxy lets open responses finish.
const PROXY_GRACE: Duration = Duration::from_secs(2);
const PROMETHEUS_LISTEN: &str = "127.0.0.1:9090";
/// How long a daemon or Prometheus may take to get ready or to stop.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// After the load: an interval is handed over about 2 s after it ends,
/// plus the ring's block timeout; then two scrapes of 1 s.
const HAND_OVER_WAIT: Duration = Duration::from_secs(4);
const SCRAPE_WAIT: Duration = Duration::from_millis(2500);
/// Most bytes read from one Prometheus answer.
const MAX_ANSWER_BYTES: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("the live Certes experiment needs root (network namespaces, packet capture)")]
    NotRoot,
    #[error("{0} is not installed (apt-get install prometheus)")]
    Missing(&'static str),
    #[error("{name}: {source}")]
    Run {
        name: String,
        #[source]
        source: RunError,
    },
    #[error("{name}: the generated testbed spec is invalid: {message}")]
    Spec { name: String, message: String },
    #[error("{0}")]
    Io(String),
}

/// What Prometheus held for one daemon after the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Scraped {
    /// `up` of the target (1: the last scrape succeeded).
    pub up: Option<f64>,
    /// `vantage_certes_intervals_total`.
    pub intervals: Option<f64>,
    /// `vantage_certes_client_response_time_seconds_count` and `_sum`.
    pub histogram_count: Option<f64>,
    pub histogram_sum: Option<f64>,
    /// `vantage_certes_completed_total`, `_gave_up_estimated_total`.
    pub completed: Option<f64>,
    pub gave_up: Option<f64>,
    /// `vantage_certes_ring_drops_total`.
    pub ring_drops: Option<f64>,
    /// `histogram_quantile` of the whole run's histogram.
    pub p90_s: Option<f64>,
    pub p99_s: Option<f64>,
    /// The histogram count Prometheus had 6.5 s after the load ended,
    /// before the reload handed the open intervals over.
    pub histogram_count_at_load_end: Option<f64>,
    /// Samples of the histogram count Prometheus stored over the run.
    pub samples: Option<f64>,
    /// Queries that failed, and why.
    pub problems: Vec<String>,
}

/// Which watch daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DaemonKind {
    /// The capture's, told the configuration's profile.
    Told,
    /// The capture's, `learn = true`.
    Learned,
    /// The proxy's `[certes]` stream's (`[proxy]`, and `[gate]` when a
    /// gate drops), no capture.
    Proxy,
}

impl DaemonKind {
    fn name(self) -> &'static str {
        match self {
            DaemonKind::Told => "watch",
            DaemonKind::Learned => "watch-learned",
            DaemonKind::Proxy => "watch-proxy",
        }
    }

    fn metrics(self) -> &'static str {
        match self {
            DaemonKind::Told => TOLD_METRICS,
            DaemonKind::Learned => LEARNED_METRICS,
            DaemonKind::Proxy => PROXY_METRICS,
        }
    }
}

/// One daemon of a run.
#[derive(Clone, Debug, Serialize)]
pub struct DaemonRun {
    pub kind: DaemonKind,
    pub jsonl: PathBuf,
    pub scraped: Scraped,
    /// Its JSON summary on standard output when it stopped.
    pub summary: Option<serde_json::Value>,
    pub exit: String,
}

/// The daemons and Prometheus beside the server of one run.
struct Beside<'a> {
    configuration: &'a Configuration,
    experiment: &'a Experiment,
    vantage: PathBuf,
    dir: PathBuf,
    daemons: Vec<(DaemonKind, Child, PathBuf)>,
    /// `vantage proxy` (`front = "proxy"`), stopped before the daemons.
    proxy: Option<vantage_live::proxy::Proxy>,
    /// The gate's log (the testbed writes it), for the proxy's daemon.
    gate_log: PathBuf,
    prometheus: Option<Child>,
    prometheus_data: PathBuf,
    finished: Vec<DaemonRun>,
    problems: Vec<String>,
}

fn io<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Beside<'_> {
    fn proxy_log(&self) -> PathBuf {
        self.dir.join("proxy-certes.jsonl")
    }

    /// Starts `vantage proxy` in the server namespace: on the clients'
    /// address, before the server on [`BACKEND_PORT`], with `[certes]` on
    /// the daemons' interval.
    fn start_proxy(&mut self, topology: &Topology) -> Result<(), String> {
        let text = proxy_config(self.experiment, &self.proxy_log())?;
        std::fs::write(self.dir.join("proxy.toml"), &text).map_err(io("writing proxy.toml"))?;
        let config = vantage_live::proxy::ProxyConfig::from_toml(&text, "proxy.toml")
            .map_err(|e| e.to_string())?;
        let proxy = topology
            .server
            .run(move || vantage_live::proxy::Proxy::start(config))
            .map_err(io("server namespace"))?
            .map_err(io("starting vantage proxy"))?;
        self.proxy = Some(proxy);
        Ok(())
    }

    fn watch_config(&self, kind: DaemonKind) -> (String, PathBuf) {
        let name = kind.name();
        let jsonl = self.dir.join(format!("{name}.jsonl"));
        // What every daemon of the run is told alike.
        let common = format!(
            "interval = \"{interval}\"\nprofile = \"{told}\"\nfrustration_timeout = \"{fto}s\"\n\
             metrics_listen = \"{metrics}\"\nlog = \"{log}\"\njsonl = \"{jsonl}\"\n",
            interval = self.experiment.interval,
            told = self.configuration.told(),
            fto = self.experiment.frustration_timeout_s,
            metrics = kind.metrics(),
            log = self.dir.join(format!("{name}.log")).display(),
            jsonl = jsonl.display(),
        );
        if kind == DaemonKind::Proxy {
            let gate = match self.configuration.drops {
                Drops::Abacus | Drops::Tbf => {
                    format!("[gate]\nlog = \"{}\"\n", self.gate_log.display())
                }
                Drops::AcceptQueue | Drops::None => String::new(),
            };
            let text = format!(
                "{common}[proxy]\nlog = \"{proxy_log}\"\n{gate}",
                proxy_log = self.proxy_log().display(),
            );
            return (text, jsonl);
        }
        let learn = kind == DaemonKind::Learned;
        let loss = if self.configuration.wan_loss_pct > 0.0 {
            "retransmissions"
        } else {
            "none"
        };
        let text = format!(
            "listeners = [\"{SERVER_ADDR}:80\"]\ninterface = \"{HOST_IFACE}\"\n\
             network_loss = \"{loss}\"\nlearn = {learn}\n{common}"
        );
        (text, jsonl)
    }

    fn start_daemon(&mut self, topology: &Topology, kind: DaemonKind) -> Result<(), String> {
        let name = kind.name();
        let (text, jsonl) = self.watch_config(kind);
        let config = self.dir.join(format!("{name}.toml"));
        std::fs::write(&config, text).map_err(io("writing the watch configuration"))?;
        let ready = self.dir.join(format!("{name}.ready"));
        let stdout = std::fs::File::create(self.dir.join(format!("{name}.stdout.log")))
            .map_err(io("daemon log"))?;
        let stderr_path = self.dir.join(format!("{name}.stderr.log"));
        let stderr = std::fs::File::create(&stderr_path).map_err(io("daemon log"))?;
        let mut command = topology.server.command(&self.vantage.to_string_lossy());
        command
            .args(["certes", "watch", "--config"])
            .arg(&config)
            .arg("--ready-file")
            .arg(&ready)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr));
        let child = command
            .spawn()
            .map_err(io("starting vantage certes watch"))?;
        self.daemons.push((kind, child, jsonl));
        let started = Instant::now();
        loop {
            if ready.exists() {
                return Ok(());
            }
            let (_, child, _) = self.daemons.last_mut().expect("just pushed");
            if let Ok(Some(status)) = child.try_wait() {
                let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                return Err(format!(
                    "vantage certes watch exited ({status}): {}",
                    stderr.trim()
                ));
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "vantage certes watch not ready within {READY_TIMEOUT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn start_prometheus(&mut self, topology: &Topology) -> Result<(), String> {
        let targets: Vec<String> = self
            .daemons
            .iter()
            .map(|(kind, _, _)| format!("\"{}\"", kind.metrics()))
            .collect();
        let config = self.dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: vantage-watch\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            ),
        )
        .map_err(io("writing prometheus.yml"))?;
        std::fs::create_dir_all(&self.prometheus_data).map_err(io("Prometheus data directory"))?;
        let log =
            std::fs::File::create(self.dir.join("prometheus.log")).map_err(io("Prometheus log"))?;
        let mut command = topology.server.command(PROMETHEUS);
        command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                self.prometheus_data.display()
            ))
            .arg(format!("--web.listen-address={PROMETHEUS_LISTEN}"))
            .arg("--storage.tsdb.retention.time=1h")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        self.prometheus = Some(command.spawn().map_err(io("starting Prometheus"))?);
        let started = Instant::now();
        loop {
            if let Some(child) = &mut self.prometheus {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "Prometheus exited ({status}); see {}",
                        self.dir.join("prometheus.log").display()
                    ));
                }
            }
            let ready = topology
                .server
                .run(|| http_get(PROMETHEUS_LISTEN, "/-/ready"))
                .map_err(io("server namespace"))?;
            if matches!(ready, Ok((200, _))) {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!("Prometheus not ready within {READY_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn query(topology: &Topology, expression: &str, scraped: &mut Scraped) -> Option<f64> {
        let path = format!("/api/v1/query?query={}", percent_encode(expression));
        let answer = topology
            .server
            .run(move || http_get(PROMETHEUS_LISTEN, &path))
            .map_err(|e| e.to_string())
            .and_then(|r| r);
        match answer {
            Ok((200, body)) => match first_value(&body) {
                Ok(value) => value,
                Err(e) => {
                    scraped.problems.push(format!("{expression}: {e}"));
                    None
                }
            },
            Ok((status, body)) => {
                scraped.problems.push(format!(
                    "{expression}: HTTP {status}: {}",
                    body.chars().take(200).collect::<String>()
                ));
                None
            }
            Err(e) => {
                scraped.problems.push(format!("{expression}: {e}"));
                None
            }
        }
    }

    fn scraped(topology: &Topology, target: &str) -> Scraped {
        let mut s = Scraped::default();
        let sel = format!("{{instance=\"{target}\"}}");
        s.up = Self::query(topology, &format!("up{sel}"), &mut s);
        s.intervals = Self::query(
            topology,
            &format!("vantage_certes_intervals_total{sel}"),
            &mut s,
        );
        s.histogram_count = Self::query(
            topology,
            &format!("sum(vantage_certes_client_response_time_seconds_count{sel})"),
            &mut s,
        );
        s.histogram_sum = Self::query(
            topology,
            &format!("sum(vantage_certes_client_response_time_seconds_sum{sel})"),
            &mut s,
        );
        s.completed = Self::query(
            topology,
            &format!("sum(vantage_certes_completed_total{sel})"),
            &mut s,
        );
        s.gave_up = Self::query(
            topology,
            &format!("sum(vantage_certes_gave_up_estimated_total{sel})"),
            &mut s,
        );
        s.ring_drops = Self::query(
            topology,
            &format!("sum(vantage_certes_ring_drops_total{sel})"),
            &mut s,
        );
        for (q, slot) in [(0.9, &mut s.p90_s), (0.99, &mut s.p99_s)] {
            let mut problems = Scraped::default();
            *slot = Self::query(
                topology,
                &format!(
                    "histogram_quantile({q}, sum by (le) (vantage_certes_client_response_time_seconds_bucket{sel}))"
                ),
                &mut problems,
            );
            s.problems.extend(problems.problems);
        }
        s.samples = Self::query(
            topology,
            &format!(
                "sum(count_over_time(vantage_certes_client_response_time_seconds_count{sel}[10m]))"
            ),
            &mut s,
        );
        s
    }
}

impl BesideServer for Beside<'_> {
    fn start(&mut self, topology: &Topology) -> Result<(), String> {
        // A mixture: the client namespaces after the first take their own
        // profiles (the run applied the first one to all).
        for (i, client) in topology.clients.iter().enumerate() {
            let name = self.configuration.profile_of_client(i);
            let profile = SynProfile::builtin(name).map_err(|e| e.to_string())?;
            let settings = profiles::kernel_settings(&profile).map_err(|e| e.to_string())?;
            profiles::apply(client, &settings).map_err(|e| e.to_string())?;
        }
        if self.configuration.front == Front::Proxy {
            self.start_proxy(topology)?;
        }
        self.start_daemon(topology, DaemonKind::Told)?;
        if self.configuration.learn {
            self.start_daemon(topology, DaemonKind::Learned)?;
        }
        if self.configuration.front == Front::Proxy {
            self.start_daemon(topology, DaemonKind::Proxy)?;
        }
        self.start_prometheus(topology)
    }

    fn finish(&mut self, topology: &Topology) {
        std::thread::sleep(HAND_OVER_WAIT + SCRAPE_WAIT);
        // What Prometheus had when the load ended: the daemon's lag.
        let at_load_end: Vec<Option<f64>> = self
            .daemons
            .iter()
            .map(|(kind, _, _)| {
                let target = kind.metrics();
                let mut ignored = Scraped::default();
                Self::query(
                    topology,
                    &format!(
                        "sum(vantage_certes_client_response_time_seconds_count{{instance=\"{target}\"}})"
                    ),
                    &mut ignored,
                )
            })
            .collect();
        // The proxy stops first: it writes the rows it still holds, which
        // its daemon reads within a poll.
        if let Some(proxy) = self.proxy.take() {
            proxy.shutdown(PROXY_GRACE);
        }
        // A reload (SIGHUP) stops the capture, which hands over the
        // intervals still open, and starts a fresh one; the daemon goes on
        // serving its metrics for the last scrapes. (The proxy's daemon
        // has no capture: its rows are in already.)
        for (kind, child, _) in &self.daemons {
            if *kind == DaemonKind::Proxy {
                continue;
            }
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGHUP);
            }
            let log = self.dir.join(format!("{}.log", kind.name()));
            let started = Instant::now();
            while !std::fs::read_to_string(&log).is_ok_and(|t| t.contains("reloaded:")) {
                if started.elapsed() > STOP_TIMEOUT {
                    self.problems.push(format!(
                        "the daemon {} did not log its reload within {STOP_TIMEOUT:?}",
                        kind.name()
                    ));
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        std::thread::sleep(SCRAPE_WAIT);
        let mut scraped: Vec<Scraped> = self
            .daemons
            .iter()
            .map(|(kind, _, _)| Self::scraped(topology, kind.metrics()))
            .collect();
        for (s, before) in scraped.iter_mut().zip(at_load_end) {
            s.histogram_count_at_load_end = before;
        }
        for ((kind, mut child, jsonl), scraped) in std::mem::take(&mut self.daemons)
            .into_iter()
            .zip(scraped.drain(..))
        {
            let exit = terminate(&mut child);
            let name = kind.name();
            let summary = std::fs::read_to_string(self.dir.join(format!("{name}.stdout.log")))
                .ok()
                .and_then(|text| serde_json::from_str(text.trim()).ok());
            self.finished.push(DaemonRun {
                kind,
                jsonl,
                scraped,
                summary,
                exit,
            });
        }
        if let Some(mut child) = self.prometheus.take() {
            let exit = terminate(&mut child);
            if !exit.starts_with("exit status: 0") && !exit.contains("signal: 15") {
                self.problems.push(format!("Prometheus ended with {exit}"));
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.prometheus_data) {
            self.problems
                .push(format!("removing {}: {e}", self.prometheus_data.display()));
        }
    }
}

impl Drop for Beside<'_> {
    fn drop(&mut self) {
        for (_, child, _) in &mut self.daemons {
            terminate(child);
        }
        if let Some(child) = &mut self.prometheus {
            terminate(child);
        }
        let _ = std::fs::remove_dir_all(&self.prometheus_data);
    }
}

/// The proxy's configuration: on the clients' address, before the server on
/// [`BACKEND_PORT`], with `[certes]` on the daemons' `interval` into `log`.
/// (`[utilization]` is required by the proxy's file; without `[sbac]`
/// nothing reads it.)
fn proxy_config(experiment: &Experiment, log: &Path) -> Result<String, String> {
    let interval_ms = experiment
        .interval_ms()
        .map_err(|e| format!("experiment.interval: {e}"))?;
    Ok(format!(
        "listen = \"{SERVER_ADDR}:{SERVER_PORT}\"\nupstreams = [\"{SERVER_ADDR}:{BACKEND_PORT}\"]\n\
         [limits]\nmax_connections = {PROXY_MAX_CONNECTIONS}\n\
         [utilization]\nsource = \"occupancy\"\nconcurrency = {PROXY_MAX_CONNECTIONS}\n\
         [certes]\nlog = \"{log}\"\ninterval_ms = {interval_ms}\n",
        log = log.display(),
    ))
}

/// SIGTERM, then SIGKILL after [`STOP_TIMEOUT`]; how it ended.
fn terminate(child: &mut Child) -> String {
    if let Ok(Some(status)) = child.try_wait() {
        return status.to_string();
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let started = Instant::now();
    while started.elapsed() < STOP_TIMEOUT {
        if let Ok(Some(status)) = child.try_wait() {
            return status.to_string();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    match child.wait() {
        Ok(status) => format!("{status} (killed after {STOP_TIMEOUT:?})"),
        Err(e) => format!("unknown ({e})"),
    }
}

/// One `GET` over HTTP/1.0 to a local Prometheus: status and body. Written
/// out because the workspace builds hyper as a server only; bounded in
/// time (5 s) and size ([`MAX_ANSWER_BYTES`]).
fn http_get(address: &str, path: &str) -> Result<(u16, String), String> {
    let address: SocketAddr = address.parse().map_err(io("address"))?;
    let timeout = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(io("connect"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(io("socket"))?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(io("socket"))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").map_err(io("send"))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER_BYTES)
        .read_to_end(&mut answer)
        .map_err(io("receive"))?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("no HTTP header in the answer")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no HTTP status in the answer")?;
    Ok((status, body.to_string()))
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The first sample's value of an instant-vector answer; `None` when the
/// vector is empty.
fn first_value(body: &str) -> Result<Option<f64>, String> {
    let v: serde_json::Value = serde_json::from_str(body).map_err(io("answer"))?;
    if v["status"] != "success" {
        return Err(format!("status {}", v["status"]));
    }
    let Some(first) = v["data"]["result"].as_array().and_then(|r| r.first()) else {
        return Ok(None);
    };
    let value = first["value"][1]
        .as_str()
        .ok_or("no value in the answer")?
        .parse::<f64>()
        .map_err(io("value"))?;
    Ok(value.is_finite().then_some(value))
}

/// What one configuration's run left.
pub struct ConfigurationRun {
    pub output: RunOutput,
    pub daemons: Vec<DaemonRun>,
    pub problems: Vec<String>,
    pub seconds: f64,
}

/// Checks root and Prometheus.
pub fn preflight() -> Result<(), LiveError> {
    if !vantage_sys::privilege::is_root() {
        return Err(LiveError::NotRoot);
    }
    if !Path::new(PROMETHEUS).is_file() {
        return Err(LiveError::Missing(PROMETHEUS));
    }
    Ok(())
}

/// Runs one configuration into `dir` (which must not exist).
pub fn run_configuration(
    experiment: &Experiment,
    configuration: &Configuration,
    index: usize,
    quick: bool,
    vantage: &Path,
    dir: &Path,
    stop: Arc<AtomicBool>,
) -> Result<ConfigurationRun, LiveError> {
    let started = Instant::now();
    let text = configuration.testbed_spec(experiment, quick, index);
    let spec = TestbedSpec::from_toml(&text, &format!("{} (generated)", configuration.name))
        .map_err(|e| LiveError::Spec {
            name: configuration.name.clone(),
            message: e.to_string(),
        })?;
    std::fs::create_dir_all(dir).map_err(|e| LiveError::Io(format!("{}: {e}", dir.display())))?;
    let beside_dir = std::path::absolute(dir.join("watch"))
        .map_err(|e| LiveError::Io(format!("{}: {e}", dir.display())))?;
    std::fs::create_dir_all(&beside_dir)
        .map_err(|e| LiveError::Io(format!("{}: {e}", beside_dir.display())))?;
    let mut beside = Beside {
        configuration,
        experiment,
        vantage: vantage.to_path_buf(),
        dir: beside_dir.clone(),
        daemons: Vec::new(),
        proxy: None,
        gate_log: std::path::absolute(dir.join("testbed").join("gate.jsonl"))
            .map_err(|e| LiveError::Io(format!("{}: {e}", dir.display())))?,
        prometheus: None,
        prometheus_data: beside_dir.join("prometheus-data"),
        finished: Vec::new(),
        problems: Vec::new(),
    };
    let options =
        crate::experiment::live::watched_run_options(dir.join("testbed"), vantage.to_path_buf());
    let output =
        run_beside(&spec, &text, &options, stop, &|_| {}, &mut beside).map_err(|source| {
            LiveError::Run {
                name: configuration.name.clone(),
                source,
            }
        })?;
    Ok(ConfigurationRun {
        output,
        daemons: std::mem::take(&mut beside.finished),
        problems: std::mem::take(&mut beside.problems),
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certes_live::CertesLivePlan;
    use vantage_live::proxy::ProxyConfig;
    use vantage_live::watch::WatchConfig;

    #[test]
    fn the_proxy_and_its_daemon_get_files_they_accept() {
        let plan = CertesLivePlan::from_toml(
            include_str!("../../../../scenarios/certes-live/configurations.toml"),
            "configurations.toml",
        )
        .unwrap();
        let dir = std::env::temp_dir().join("p37-certes-live-files");
        let text = proxy_config(&plan.experiment, &dir.join("proxy-certes.jsonl")).unwrap();
        let proxy = ProxyConfig::from_toml(&text, "proxy.toml").unwrap();
        assert_eq!(proxy.listen.port(), SERVER_PORT);
        assert_eq!(proxy.upstreams[0].port(), BACKEND_PORT);
        let certes = proxy.certes.expect("[certes]");
        assert_eq!(certes.interval_ms, 250);
        for configuration in plan
            .configuration
            .iter()
            .filter(|c| c.front == Front::Proxy)
        {
            let beside = Beside {
                configuration,
                experiment: &plan.experiment,
                vantage: PathBuf::new(),
                dir: dir.clone(),
                daemons: Vec::new(),
                proxy: None,
                gate_log: dir.join("gate.jsonl"),
                prometheus: None,
                prometheus_data: dir.join("prometheus-data"),
                finished: Vec::new(),
                problems: Vec::new(),
            };
            let (text, _) = beside.watch_config(DaemonKind::Proxy);
            let watch = WatchConfig::from_toml(&text, "watch-proxy.toml")
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", configuration.name));
            assert!(watch.listeners.is_empty(), "{}", configuration.name);
            assert_eq!(
                text.contains("[gate]"),
                configuration.drops != Drops::None,
                "{}",
                configuration.name
            );
            let (told, _) = beside.watch_config(DaemonKind::Told);
            WatchConfig::from_toml(&told, "watch.toml").unwrap();
        }
    }
}
