//! `vantage proxy`: an HTTP reverse proxy with session-based admission
//! control (SBAC, Cherkasova and Phaal, `session-admission-control.txt`),
//! running the same `vantage_core::admission::session` objects the
//! simulator runs. See `docs/proxy.md`.
//!
//! * [`config`] — the TOML file, validated with file:line:key errors;
//! * [`server`] — the data path (hyper 1.x on tokio: one worker runs a
//!   current-thread runtime, more the multi-thread one): limits,
//!   timeouts, hop-by-hop headers, streaming bodies;
//! * [`upstream`] — round robin and passive failure detection;
//! * [`sbac`] — the admission layer and its per-interval driver;
//! * [`utilization`] — the controllers' input: occupancy, ORCA, cgroup or
//!   process CPU;
//! * [`tls`] — HTTPS to clients (rustls, ALPN h2 and http/1.1);
//! * [`metrics`] — the Prometheus families;
//! * [`certes_stream`] — with `[certes]`, the listener's Certes counters
//!   per interval as JSON Lines.
//!
//! [`Proxy`] is the library form (start, reload, reopen the log, stop);
//! [`run`] is the daemon: signals as flags, the ready file, sd_notify,
//! SIGHUP reload (an invalid file is refused and the running configuration
//! kept), SIGUSR1 log reopen.

pub mod certes_stream;
pub mod config;
pub mod metrics;
pub mod resources;
pub mod sbac;
pub mod server;
pub mod tls;
pub mod upstream;
pub mod utilization;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

pub use config::{ConfigError, ProxyConfig};

use self::metrics::ProxyMetrics;
use self::sbac::{Sbac, SbacError};
use self::server::{Settings, Shared};
use self::utilization::{CgroupError, Sampler};
use crate::daemon::{self, LogFile, NotifyState, ReadyFile, Signals};
use crate::metrics::{EndpointError, Format, Limits, MetricsServer, Render};

/// The controller interval when SBAC is off (utilization metrics only).
const METRICS_INTERVAL: Duration = Duration::from_secs(1);
/// How long a stopping proxy lets open responses finish.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why the proxy could not start or reload.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("listen {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Sbac(#[from] SbacError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("utilization: {0}")]
    Utilization(#[from] CgroupError),
    #[error("access log {}: {source}", path.display())]
    AccessLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("certes log {}: {source}", path.display())]
    CertesLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Metrics(#[from] EndpointError),
    #[error(transparent)]
    Ready(#[from] daemon::ReadyFileError),
    #[error(transparent)]
    Signals(#[from] daemon::SignalError),
    #[error("`{key}` cannot change while the proxy runs (restart it)")]
    NeedsRestart { key: &'static str },
    #[error(transparent)]
    Resources(#[from] resources::ResourcesError),
}

/// The tokio runtime the proxy runs on: with one worker, a current-thread
/// runtime driven by a thread of its own (no work-stealing scheduler to pay
/// for); with more, the multi-thread runtime.
struct Engine {
    handle: tokio::runtime::Handle,
    runtime: Option<tokio::runtime::Runtime>,
    exit: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Engine {
    fn new(workers: usize) -> std::io::Result<Engine> {
        if workers > 1 {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name("vantage-proxy")
                .enable_all()
                .build()?;
            return Ok(Engine {
                handle: runtime.handle().clone(),
                runtime: Some(runtime),
                exit: None,
                thread: None,
            });
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (exit, exited) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("vantage-proxy".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = exited.await;
                });
                runtime.shutdown_timeout(Duration::from_millis(100));
            })?;
        Ok(Engine {
            handle,
            runtime: None,
            exit: Some(exit),
            thread: Some(thread),
        })
    }

    fn running(&self) -> bool {
        self.runtime.is_some() || self.thread.is_some()
    }

    fn stop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_millis(100));
        }
        if let Some(exit) = self.exit.take() {
            let _ = exit.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A running proxy; stopped on drop.
pub struct Proxy {
    engine: Engine,
    shared: Arc<Shared>,
    address: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    metrics_server: Option<MetricsServer>,
    resource_loop: Option<std::thread::JoinHandle<()>>,
    certes_loop: Option<std::thread::JoinHandle<()>>,
    /// Tells the `[certes]` thread to write its last row and end.
    certes_stop: Arc<std::sync::atomic::AtomicBool>,
}

fn open_log(path: &Option<PathBuf>) -> Result<Option<LogFile>, ProxyError> {
    path.as_ref()
        .map(|p| {
            LogFile::open(p).map_err(|source| ProxyError::AccessLog {
                path: p.clone(),
                source,
            })
        })
        .transpose()
}

/// A non-blocking listener on `address` with `SO_REUSEADDR` (a restart
/// binds while old connections sit in TIME-WAIT) and the given backlog:
/// the standard library's `TcpListener::bind` fixes it at 128.
fn bind_listener(address: SocketAddr, backlog: u32) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    // The kernel caps it at net.core.somaxconn; the config caps it at 65535.
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

impl Proxy {
    /// Binds, starts the runtime, the accept loop, the interval driver and
    /// the metrics endpoint.
    pub fn start(config: ProxyConfig) -> Result<Proxy, ProxyError> {
        let engine = Engine::new(config.workers).map_err(ProxyError::Runtime)?;
        let runtime = engine.handle.clone();
        let listen = config.listen;
        let bind_error = |source| ProxyError::Bind {
            address: listen,
            source,
        };
        let listener = bind_listener(listen, config.limits.listen_backlog).map_err(bind_error)?;
        let address = listener.local_addr().map_err(bind_error)?;
        let sbac = config
            .sbac
            .as_ref()
            .map(|c| Sbac::new(c).map(Arc::new))
            .transpose()?;
        let metrics = Arc::new(ProxyMetrics::new(config.sbac.as_ref().map(|s| s.strategy)));
        if let Some(s) = &sbac {
            metrics.set_decision(&s.decision());
        }
        let budget = server::connection_budget(&config, daemon::descriptor_limit().ok());
        if budget < config.limits.max_connections {
            eprintln!(
                "vantage proxy: serving at most {budget} connections at once, not limits.max_connections = {}: the descriptor limit (ulimit -n) allows no more",
                config.limits.max_connections
            );
        }
        let sampler = Sampler::new(&config.utilization)?;
        let access_log = open_log(&config.access_log)?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let metrics_listen = config.metrics_listen;
        let resources = Arc::new(resources::Resources::new(
            config.resources,
            resources::KernelLimits::read().map_err(resources::ResourcesError::from)?,
            budget,
            metrics.resources.clone(),
        )?);
        resources.prepare_listener(&listener).map_err(bind_error)?;
        let certes = config
            .certes
            .as_ref()
            .map(|c| {
                certes_stream::CertesStream::open(c, metrics.certes_late_accepts.clone())
                    .map(Arc::new)
                    .map_err(|source| ProxyError::CertesLog {
                        path: c.log.clone(),
                        source,
                    })
            })
            .transpose()?;
        let settings = {
            let _entered = runtime.enter();
            Settings::new(config, sbac, &metrics, &resources)?
        };
        let resource_loop = {
            let resources = Arc::clone(&resources);
            let stop = stop_rx.clone();
            std::thread::Builder::new()
                .name("vantage-resources".into())
                .spawn(move || resources::run_loop(resources, stop))
                .map_err(ProxyError::Runtime)?
        };
        let shared = Arc::new(Shared {
            certes,
            resources,
            settings: RwLock::new(Arc::new(settings)),
            metrics: Arc::clone(&metrics),
            in_flight: Default::default(),
            logging: std::sync::atomic::AtomicBool::new(access_log.is_some()),
            access_log: Mutex::new(access_log),
            sampler: Mutex::new(sampler),
            open: Mutex::new(Default::default()),
            next_connection: Default::default(),
            stop: stop_rx,
        });
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(bind_error)?
        };
        runtime.spawn(server::serve(listener, Arc::clone(&shared)));
        runtime.spawn(drive(Arc::clone(&shared)));
        let metrics_server = match metrics_listen {
            None => None,
            Some(address) => {
                let limits = Limits {
                    max_connections: daemon::connection_cap(
                        daemon::descriptor_limit().unwrap_or(1024),
                    ),
                    ..Limits::default()
                };
                let scrape = Arc::clone(&metrics);
                let render: Arc<Render> = Arc::new(move |format: Format| scrape.encode(format));
                Some(MetricsServer::start(
                    address,
                    limits,
                    metrics.endpoint.clone(),
                    render,
                )?)
            }
        };
        // Started last, so that no error after it leaves it running; it
        // stops after the runtime, so the connections that end in the
        // shutdown's grace are in its last row.
        let certes_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let certes_loop = match &shared.certes {
            None => None,
            Some(stream) => {
                let stream = Arc::clone(stream);
                let stop = Arc::clone(&certes_stop);
                Some(
                    std::thread::Builder::new()
                        .name("vantage-certes".into())
                        .spawn(move || certes_stream::run_loop(stream, stop))
                        .map_err(ProxyError::Runtime)?,
                )
            }
        };
        Ok(Proxy {
            certes_stop,
            engine,
            shared,
            address,
            stop: stop_tx,
            metrics_server,
            resource_loop: Some(resource_loop),
            certes_loop,
        })
    }

    /// The socket-buffer and idle-connection manager (`[resources]`).
    pub fn resources(&self) -> &Arc<resources::Resources> {
        &self.shared.resources
    }

    /// The address it listens on (the chosen port for port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.metrics_server.as_ref().map(|m| m.address())
    }

    /// The metrics, as a scrape would see them.
    pub fn metrics_text(&self, format: Format) -> String {
        self.shared.metrics.encode(format)
    }

    pub fn metrics(&self) -> &ProxyMetrics {
        &self.shared.metrics
    }

    /// The configuration in force.
    pub fn config(&self) -> ProxyConfig {
        self.shared.settings().config.clone()
    }

    /// Applies a new configuration to new connections and requests (open
    /// connections keep their limits). The listener, the workers, the
    /// metrics address and the SBAC strategy (on/off included) need a
    /// restart; the TLS certificate and key files are read again; changed SBAC parameters start the controller afresh and
    /// keep the sessions in progress (keys: rotation).
    pub fn reload(&self, config: ProxyConfig) -> Result<(), ProxyError> {
        let result = self.apply(config);
        self.shared.metrics.count_reload(result.is_ok());
        result
    }

    /// Loads `path` and applies it; on any error the running configuration
    /// stays.
    pub fn reload_file(&self, path: &Path) -> Result<(), ProxyError> {
        match ProxyConfig::load(path) {
            Ok(config) => self.reload(config),
            Err(e) => {
                self.shared.metrics.count_reload(false);
                Err(e.into())
            }
        }
    }

    fn apply(&self, config: ProxyConfig) -> Result<(), ProxyError> {
        let old = self.shared.settings();
        let before = &old.config;
        // The running listener: as configured, or as bound (port 0).
        if config.listen != before.listen && config.listen != self.address {
            return Err(ProxyError::NeedsRestart { key: "listen" });
        }
        if config.workers != before.workers {
            return Err(ProxyError::NeedsRestart { key: "workers" });
        }
        if config.metrics_listen != before.metrics_listen {
            return Err(ProxyError::NeedsRestart {
                key: "metrics_listen",
            });
        }
        let strategy = |c: &ProxyConfig| c.sbac.as_ref().map(|s| s.strategy);
        if strategy(&config) != strategy(before) {
            return Err(ProxyError::NeedsRestart {
                key: "sbac.strategy",
            });
        }
        if config.resources != before.resources {
            return Err(ProxyError::NeedsRestart { key: "resources" });
        }
        if config.certes != before.certes {
            return Err(ProxyError::NeedsRestart { key: "certes" });
        }
        let sampler = (config.utilization != before.utilization)
            .then(|| Sampler::new(&config.utilization))
            .transpose()?;
        let log = (config.access_log != before.access_log)
            .then(|| open_log(&config.access_log))
            .transpose()?;
        let sbac = match (&config.sbac, &old.sbac) {
            (Some(new), Some(running)) if Some(new) != before.sbac.as_ref() => {
                let fresh = Arc::new(Sbac::new(new)?);
                fresh.take_over(running);
                Some(fresh)
            }
            (_, running) => running.clone(),
        };
        if !self.engine.running() {
            return Err(ProxyError::NeedsRestart {
                key: "the runtime (stopped)",
            });
        }
        let runtime = &self.engine.handle;
        let settings = {
            let _entered = runtime.enter();
            Settings::new(config, sbac, &self.shared.metrics, &self.shared.resources)?
        };
        if let Some(mut sampler) = sampler {
            sampler.start();
            if let Ok(mut s) = self.shared.sampler.lock() {
                *s = sampler;
            }
        }
        if let Some(log) = log {
            if let Ok(mut l) = self.shared.access_log.lock() {
                self.shared
                    .logging
                    .store(log.is_some(), std::sync::atomic::Ordering::Relaxed);
                *l = log;
            }
        }
        if let Some(sbac) = &settings.sbac {
            self.shared.metrics.set_decision(&sbac.decision());
        }
        match self.shared.settings.write() {
            Ok(mut s) => *s = Arc::new(settings),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(settings),
        }
        Ok(())
    }

    /// Reopens the access log and the certes log by their paths
    /// (SIGUSR1, after logrotate).
    pub fn reopen_log(&self) -> std::io::Result<()> {
        let certes = self.shared.certes.as_ref().map_or(Ok(()), |c| c.reopen());
        if let Ok(mut log) = self.shared.access_log.lock() {
            log.as_mut().map_or(Ok(()), |l| l.reopen())?;
        }
        certes
    }

    /// Stops accepting, lets open responses finish for up to `grace`, then
    /// stops everything.
    pub fn shutdown(mut self, grace: Duration) {
        self.stop_within(grace);
    }

    fn stop_within(&mut self, grace: Duration) {
        let _ = self.stop.send(true);
        let deadline = Instant::now() + grace;
        while self.shared.metrics.connections_open.get() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.engine.stop();
        self.metrics_server.take();
        if let Some(resource_loop) = self.resource_loop.take() {
            let _ = resource_loop.join();
        }
        self.certes_stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(certes_loop) = self.certes_loop.take() {
            let _ = certes_loop.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if self.engine.running() {
            self.stop_within(Duration::ZERO);
        }
    }
}

/// Ends an interval every ac-interval (or every second without SBAC):
/// reads the utilization, feeds the controller, sets the gauges.
async fn drive(shared: Arc<Shared>) {
    let mut stop = shared.stop.clone();
    if let Ok(mut sampler) = shared.sampler.lock() {
        sampler.start();
    }
    let mut last = Instant::now();
    let mut utilization = 0.0;
    loop {
        let settings = shared.settings();
        let interval = settings
            .config
            .sbac
            .as_ref()
            .map_or(METRICS_INTERVAL, |s| Duration::from_secs_f64(s.interval_s));
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep_until((last + interval).into()) => {}
        }
        let settings = shared.settings();
        let now = Instant::now();
        let elapsed = now.duration_since(last);
        last = now;
        let (mean_in_flight, in_flight) = shared.in_flight.take(elapsed);
        let sample = shared
            .sampler
            .lock()
            .ok()
            .and_then(|mut s| s.sample(elapsed, mean_in_flight, settings.orca.mean()));
        match sample {
            Some(u) => utilization = u,
            None => {
                shared.metrics.utilization_unavailable.inc();
            }
        }
        shared.metrics.utilization.set(utilization);
        let Some(sbac) = &settings.sbac else {
            continue;
        };
        // Requests beyond the backend's declared concurrency wait in its
        // queue (occupancy only; the other inputs do not know it).
        let queued = match settings.config.utilization {
            config::UtilizationConfig::Occupancy { concurrency } => {
                in_flight.saturating_sub(concurrency)
            }
            _ => 0,
        };
        let report = sbac.end_interval(elapsed, utilization, queued);
        let m = &shared.metrics;
        m.sessions_active.set(report.active as i64);
        for (reason, n) in [
            ("idle", report.ended_idle),
            ("max_age", report.ended_max_age),
        ] {
            m.sessions_ended
                .get_or_create(&metrics::ReasonLabel {
                    reason: reason.into(),
                })
                .inc_by(n);
        }
        m.sessions_untracked.inc_by(sbac.take_untracked());
        m.set_decision(&report.decision);
    }
}

/// The daemon: runs the configuration at `path` until SIGINT or SIGTERM.
pub fn run(path: &Path, ready_file: Option<&Path>) -> Result<(), ProxyError> {
    let signals = Signals::new();
    signals.register()?;
    let config = ProxyConfig::load(path)?;
    let upstreams = config.upstreams.len();
    let sbac = config.sbac.as_ref().map_or("off".to_string(), |s| {
        format!("{:?}", s.strategy).to_lowercase()
    });
    let proxy = Proxy::start(config)?;
    eprintln!(
        "vantage proxy: listening on {}, {upstreams} upstream(s), sbac {sbac}{}",
        proxy.address(),
        proxy.metrics_address().map_or(String::new(), |a| format!(
            ", metrics on http://{a}/metrics"
        ))
    );
    let ready = ready_file.map(ReadyFile::create).transpose()?;
    let _ = daemon::notify(NotifyState::Ready);
    while !signals.stopping() {
        std::thread::sleep(Duration::from_millis(100));
        if signals.take_reload() {
            let _ = daemon::notify(NotifyState::Reloading);
            match proxy.reload_file(path) {
                Ok(()) => eprintln!("vantage proxy: reloaded {}", path.display()),
                Err(e) => {
                    eprintln!("vantage proxy: reload refused, the running configuration stays: {e}")
                }
            }
            let _ = daemon::notify(NotifyState::Ready);
        }
        if signals.take_reopen() {
            if let Err(e) = proxy.reopen_log() {
                eprintln!("vantage proxy: cannot reopen the access log: {e}");
            }
        }
    }
    let _ = daemon::notify(NotifyState::Stopping);
    proxy.shutdown(STOP_GRACE);
    drop(ready);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listener_takes_the_configured_backlog() {
        // On a listening socket TCP_INFO's tcpi_sacked is its backlog.
        for backlog in [7, 1000] {
            let listener = bind_listener("127.0.0.1:0".parse().unwrap(), backlog).unwrap();
            let info = vantage_sys::tcp_info::tcp_info(&listener).unwrap();
            assert_eq!(info.sacked, backlog);
        }
    }
}
