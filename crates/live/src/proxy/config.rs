//! The proxy's TOML configuration: parsed with serde (unknown keys are
//! errors), then validated into a [`ProxyConfig`] whose errors name the
//! file, the line and the key (`FILE:LINE: \`sbac.keys[1]\` problem`).
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! upstreams = ["127.0.0.1:9000", "127.0.0.1:9001"]   # round robin
//! workers = 1                       # threads serving requests (1: a current-thread runtime)
//! metrics_listen = "127.0.0.1:9465" # optional
//! access_log = "proxy.jsonl"        # optional, JSON Lines
//! [tls]                             # optional: HTTPS (ALPN h2, http/1.1); files read again on reload
//! cert = "/etc/vantage/proxy.crt"   # PEM chain, leaf first
//! key = "/etc/vantage/proxy.key"    # PEM private key
//! [timeouts]
//! connect_ms = 1000                 # upstream connect
//! request_headers_ms = 5000         # the whole request head (slowloris)
//! idle_ms = 60000                   # a client keep-alive connection with no request
//! send_ms = 60000                   # a client taking no byte of a response while one waits
//! upstream_response_ms = 30000      # until the upstream's response head
//! upstream_down_ms = 5000           # an upstream that failed is skipped this long
//! [limits]
//! max_header_bytes = 16384          # request line and headers
//! max_body_bytes = 10485760         # request body, enforced while streaming
//! max_connections = 1024            # client connections at once; more are closed
//! upstream_idle_connections = 64    # pooled idle connections per upstream
//! listen_backlog = 4096             # the listener's SYN and accept queues (the kernel caps it at net.core.somaxconn)
//! [sbac]                            # absent: no admission control
//! strategy = "hybrid"               # stable | responsive | hybrid | predictive
//! interval_s = 1.0                  # the ac-interval
//! target_utilization = 0.95         # U_ac
//! session_timeout_s = 300           # T: a session idle this long ends
//! max_session_age_s = 3600          # no session lasts longer
//! keys = ["<hex, ≥ 16 bytes>"]      # the first signs, all verify
//! cookie = "vantage_session"
//! retry_after_s = 30
//! max_tracked_sessions = 100000     # sessions counted active at once
//! capacity_requests_per_s = 500     # predictive only, optional (else measured)
//! reject = { page = "<html>…</html>" }   # 503 + Retry-After; or { redirect = "https://…" }
//! [utilization]                     # the controllers' input
//! source = "occupancy"              # occupancy | orca | cgroup | pids
//! concurrency = 32                  # occupancy: requests the backend serves at once
//! cgroup = "/sys/fs/cgroup/system.slice/app.service"   # cgroup
//! pids = [1234]                     # pids
//! cores = 2.0                       # cgroup/pids: cores the backend may use (cgroup: default from cpu.max)
//! [resources]                       # socket buffers and idle connections (docs/proxy.md)
//! mode = "ssbt+conn"                # autotune (default) | fixed | ssbt | ssbt+conn
//! interval_ms = 1000                # the control loop's interval
//! send_bytes = 16384                # fixed only: client send buffers
//! receive_bytes = 16384             # fixed only: upstream receive buffers
//! pool_bytes = 67108864             # ssbt: the buffer pool (absent: half of tcp_mem's pressure mark)
//! send_fraction = 0.5               # ssbt: the pool's share for send buffers
//! descriptors = [3600, 3200]        # ssbt+conn: high, low (default: 90 %, 80 % of ulimit -n)
//! tcp_memory_bytes = [1e9, 9e8]     # ssbt+conn: kernel TCP memory high, low (default: 90 %, 80 % of tcp_mem's pressure mark)
//! connections = [950, 900]          # ssbt+conn: open client connections high, low (default: 95 %, 90 % of limits.max_connections)
//! min_idle_age_ms = 1000            # ssbt+conn: never close a connection idle for less
//! max_closes_per_interval = 256     # ssbt+conn
//! idle_buffer_half_life_ms = 5000   # ssbt, ssbt+conn: idle connections' buffers halve this often
//! [certes]                          # optional: Certes counters per interval (docs/proxy.md)
//! log = "/var/lib/vantage/proxy-certes.jsonl"   # appended, `certes estimate --counters` reads it
//! interval_ms = 250                 # Δ, on the wall clock's grid
//! accept_lag_ms = 1000              # a row waits this long for late accepts
//! ```

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::daemon::config_file::read_config_file;
pub use crate::daemon::config_file::ConfigError;
use serde::{Deserialize, Serialize};
use vantage_core::config;

/// Most upstreams one proxy balances over.
pub const MAX_UPSTREAMS: usize = 256;
/// Most worker threads.
pub const MAX_WORKERS: u64 = 256;
/// `limits.listen_backlog` when not given: `net.core.somaxconn`'s default
/// since Linux 5.4.
pub const DEFAULT_LISTEN_BACKLOG: u32 = 4096;
/// `sbac.session_timeout_s` when not given: T, seconds.
pub const DEFAULT_SESSION_TIMEOUT_S: u64 = 300;
/// The default rejection page.
pub const DEFAULT_REJECT_PAGE: &str = "<!doctype html><title>Busy</title><h1>The site is busy</h1><p>Please come back in a little while.</p>\n";
/// Largest rejection page accepted (it is sent for every rejection).
pub const MAX_REJECT_PAGE_BYTES: usize = 16 << 10;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    listen: String,
    upstreams: Vec<String>,
    workers: Option<f64>,
    metrics_listen: Option<String>,
    access_log: Option<PathBuf>,
    tls: Option<TlsConfig>,
    #[serde(default)]
    timeouts: RawTimeouts,
    #[serde(default)]
    limits: RawLimits,
    sbac: Option<RawSbac>,
    #[serde(default)]
    utilization: RawUtilization,
    #[serde(default)]
    resources: RawResources,
    certes: Option<RawCertes>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCertes {
    log: Option<PathBuf>,
    interval_ms: Option<f64>,
    accept_lag_ms: Option<f64>,
}

/// Longest `[certes] interval_ms`.
pub const MAX_CERTES_INTERVAL_MS: u64 = 60_000;

/// `[certes]`: the Certes counters of the listener, one JSON line per
/// interval (`super::certes_stream`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CertesStreamConfig {
    pub log: PathBuf,
    /// Δ in milliseconds; intervals start at multiples of it in UNIX time.
    pub interval_ms: u64,
    /// How long an interval's row waits after its end for connections
    /// whose SYN came in it but whose accept comes later (the accept-queue
    /// wait), in milliseconds.
    pub accept_lag_ms: u64,
}

/// Longest `[certes] accept_lag_ms`.
pub const MAX_CERTES_ACCEPT_LAG_MS: u64 = 60_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResources {
    mode: Option<ResourceMode>,
    interval_ms: Option<f64>,
    send_bytes: Option<f64>,
    receive_bytes: Option<f64>,
    pool_bytes: Option<f64>,
    send_fraction: Option<f64>,
    descriptors: Option<[f64; 2]>,
    tcp_memory_bytes: Option<[f64; 2]>,
    connections: Option<[f64; 2]>,
    min_idle_age_ms: Option<f64>,
    max_closes_per_interval: Option<f64>,
    idle_buffer_half_life_ms: Option<f64>,
}

/// How socket buffers are sized (`resources.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResourceMode {
    /// The kernel's autotuning: nothing is set.
    #[serde(rename = "autotune")]
    Autotune,
    /// Fixed sizes (the thesis's "traditional" scheme).
    #[serde(rename = "fixed")]
    Fixed,
    /// E-ATBT send buffers, tuned receive buffers, one pool.
    #[serde(rename = "ssbt")]
    Ssbt,
    /// SSBT and the connection manager.
    #[serde(rename = "ssbt+conn")]
    SsbtWithConnections,
}

impl ResourceMode {
    /// The name the configuration file gives.
    pub fn name(self) -> &'static str {
        match self {
            ResourceMode::Autotune => "autotune",
            ResourceMode::Fixed => "fixed",
            ResourceMode::Ssbt => "ssbt",
            ResourceMode::SsbtWithConnections => "ssbt+conn",
        }
    }
}

/// A high and a low mark; `None` in a field: derived when the proxy starts
/// (from the descriptor limit, `tcp_mem` or `limits.max_connections`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marks {
    pub high: u64,
    pub low: u64,
}

impl Serialize for Marks {
    /// As written: `[high, low]`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        [self.high, self.low].serialize(serializer)
    }
}

/// The validated `[resources]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ResourcesConfig {
    pub mode: ResourceMode,
    pub interval_ms: u64,
    /// `fixed`: held send buffer of client connections, bytes.
    pub send_bytes: Option<u64>,
    /// `fixed`: held receive buffer of upstream connections, bytes.
    pub receive_bytes: Option<u64>,
    /// `ssbt*`: the pool, bytes (None: derived from `tcp_mem`).
    pub pool_bytes: Option<u64>,
    pub send_fraction: f64,
    pub descriptors: Option<Marks>,
    pub tcp_memory_bytes: Option<Marks>,
    pub connections: Option<Marks>,
    pub min_idle_age_ms: u64,
    pub max_closes_per_interval: usize,
    pub idle_buffer_half_life_ms: Option<u64>,
}

impl Default for ResourcesConfig {
    fn default() -> Self {
        ResourcesConfig {
            mode: ResourceMode::Autotune,
            interval_ms: 1000,
            send_bytes: None,
            receive_bytes: None,
            pool_bytes: None,
            send_fraction: 0.5,
            descriptors: None,
            tcp_memory_bytes: None,
            connections: None,
            min_idle_age_ms: 1000,
            max_closes_per_interval: 256,
            idle_buffer_half_life_ms: Some(5000),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTimeouts {
    connect_ms: Option<f64>,
    request_headers_ms: Option<f64>,
    idle_ms: Option<f64>,
    send_ms: Option<f64>,
    upstream_response_ms: Option<f64>,
    upstream_down_ms: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_header_bytes: Option<f64>,
    max_body_bytes: Option<f64>,
    max_connections: Option<f64>,
    upstream_idle_connections: Option<f64>,
    listen_backlog: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSbac {
    strategy: Strategy,
    interval_s: Option<f64>,
    target_utilization: Option<f64>,
    session_timeout_s: Option<f64>,
    max_session_age_s: Option<f64>,
    keys: Vec<String>,
    cookie: Option<String>,
    retry_after_s: Option<f64>,
    max_tracked_sessions: Option<f64>,
    capacity_requests_per_s: Option<f64>,
    reject: Option<RawReject>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReject {
    page: Option<String>,
    redirect: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUtilization {
    source: Option<SourceKind>,
    concurrency: Option<f64>,
    cgroup: Option<PathBuf>,
    pids: Option<Vec<f64>>,
    cores: Option<f64>,
}

/// An SBAC strategy of the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Section 7, k = 0.1.
    Stable,
    /// Section 7, k = 1.
    Responsive,
    /// Section 11.
    Hybrid,
    /// Section 12.
    Predictive,
}

/// Where the utilization comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    Occupancy,
    Orca,
    Cgroup,
    Pids,
}

/// `[tls]`: the certificate chain and key files (PEM).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The validated `[timeouts]`, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Timeouts {
    pub connect_ms: u64,
    pub request_headers_ms: u64,
    pub idle_ms: u64,
    /// A client connection whose writes have waited this long without a
    /// byte going through is closed (nginx's `send_timeout`).
    pub send_ms: u64,
    pub upstream_response_ms: u64,
    pub upstream_down_ms: u64,
}

/// The validated `[limits]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub max_header_bytes: usize,
    pub max_body_bytes: u64,
    pub max_connections: usize,
    pub upstream_idle_connections: usize,
    /// `listen(2)`'s backlog: it bounds the accept queue and the SYN queue
    /// (half-open connections) alike; beyond the SYN queue the kernel
    /// answers with SYN cookies, and a handshake completed by a cookie
    /// takes its first RTT sample from the echoed timestamp of the
    /// SYN-ACK, which a lost ACK can stretch to tens of seconds (that RTT
    /// then seeds the next connections to that client through the
    /// kernel's metrics cache). nginx's default is 511, the Rust standard
    /// library's 128; the kernel caps it at `net.core.somaxconn`.
    pub listen_backlog: u32,
}

/// What a rejected new session gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reject {
    /// `503 Service Unavailable` with `Retry-After` and this HTML page.
    Page(String),
    /// `302 Found` to this URL.
    Redirect(String),
}

/// The validated `[sbac]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SbacConfig {
    pub strategy: Strategy,
    pub interval_s: f64,
    pub target_utilization: f64,
    pub session_timeout_s: u64,
    pub max_session_age_s: u64,
    /// The decoded keys; never printed.
    #[serde(skip)]
    pub keys: Vec<Vec<u8>>,
    pub cookie: String,
    pub retry_after_s: u64,
    pub max_tracked_sessions: usize,
    pub capacity_requests_per_s: Option<f64>,
    pub reject: Reject,
}

/// The validated `[utilization]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "source", rename_all = "lowercase")]
pub enum UtilizationConfig {
    Occupancy { concurrency: u64 },
    Orca,
    Cgroup { cgroup: PathBuf, cores: Option<f64> },
    Pids { pids: Vec<u32>, cores: f64 },
}

/// The validated configuration of one proxy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProxyConfig {
    /// The file it came from (for messages).
    #[serde(skip)]
    pub origin: String,
    pub listen: SocketAddr,
    pub upstreams: Vec<SocketAddr>,
    pub workers: usize,
    pub metrics_listen: Option<SocketAddr>,
    pub access_log: Option<PathBuf>,
    pub tls: Option<TlsConfig>,
    pub timeouts: Timeouts,
    pub limits: Limits,
    pub utilization: UtilizationConfig,
    pub sbac: Option<SbacConfig>,
    pub resources: ResourcesConfig,
    pub certes: Option<CertesStreamConfig>,
}

type Checker<'a> = config::Checker<'a, ConfigError>;

fn address(c: &Checker, key: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.parse::<SocketAddr>().map_err(|_| {
        c.fail(
            key,
            format!("must be ADDRESS:PORT such as \"127.0.0.1:8080\", got \"{text}\""),
        )
    })
}

fn millis(c: &Checker, key: &str, value: Option<f64>, default: u64) -> Result<u64, ConfigError> {
    match value {
        Some(v) => c.whole(key, v, 1.0, 86_400_000.0),
        None => Ok(default),
    }
}

fn hex_key(c: &Checker, key: &str, text: &str) -> Result<Vec<u8>, ConfigError> {
    let bad = |why: &str| c.fail(key, why.to_string());
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad("must be an even number of hex digits"));
    }
    let bytes: Vec<u8> = (0..text.len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect();
    if bytes.len() < vantage_core::admission::session::token::MIN_KEY_LEN {
        return Err(bad(&format!(
            "must be at least {} bytes ({} hex digits), got {}",
            vantage_core::admission::session::token::MIN_KEY_LEN,
            2 * vantage_core::admission::session::token::MIN_KEY_LEN,
            bytes.len()
        )));
    }
    Ok(bytes)
}

impl ProxyConfig {
    /// Reads (at most [`config::MAX_CONFIG_BYTES`]) and validates a file.
    pub fn load(path: &Path) -> Result<ProxyConfig, ConfigError> {
        let (origin, text) = read_config_file(path)?;
        ProxyConfig::from_toml(&text, &origin)
    }

    /// Parses and validates a configuration; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<ProxyConfig, ConfigError> {
        let c = Checker::new(origin, text);
        let raw: RawFile = c.deserialize()?;
        let listen = address(&c, "listen", &raw.listen)?;
        if raw.upstreams.is_empty() || raw.upstreams.len() > MAX_UPSTREAMS {
            return Err(c.fail(
                "upstreams",
                format!(
                    "must list between 1 and {MAX_UPSTREAMS} ADDRESS:PORT, got {}",
                    raw.upstreams.len()
                ),
            ));
        }
        let upstreams = raw
            .upstreams
            .iter()
            .enumerate()
            .map(|(i, u)| address(&c, &format!("upstreams[{i}]"), u))
            .collect::<Result<Vec<_>, _>>()?;
        let workers = match raw.workers {
            Some(v) => c.whole("workers", v, 1.0, MAX_WORKERS as f64)? as usize,
            None => 1,
        };
        let metrics_listen = match &raw.metrics_listen {
            Some(text) => Some(address(&c, "metrics_listen", text)?),
            None => None,
        };
        if raw
            .access_log
            .as_ref()
            .is_some_and(|p| p.as_os_str().is_empty())
        {
            return Err(c.fail("access_log", "must be a file name, got \"\"".into()));
        }
        if let Some(tls) = &raw.tls {
            for (key, path) in [("tls.cert", &tls.cert), ("tls.key", &tls.key)] {
                if path.as_os_str().is_empty() {
                    return Err(c.fail(key, "must be a file name, got \"\"".into()));
                }
            }
        }
        let t = &raw.timeouts;
        let timeouts = Timeouts {
            connect_ms: millis(&c, "timeouts.connect_ms", t.connect_ms, 1000)?,
            request_headers_ms: millis(
                &c,
                "timeouts.request_headers_ms",
                t.request_headers_ms,
                5000,
            )?,
            idle_ms: millis(&c, "timeouts.idle_ms", t.idle_ms, 60_000)?,
            send_ms: millis(&c, "timeouts.send_ms", t.send_ms, 60_000)?,
            upstream_response_ms: millis(
                &c,
                "timeouts.upstream_response_ms",
                t.upstream_response_ms,
                30_000,
            )?,
            upstream_down_ms: millis(&c, "timeouts.upstream_down_ms", t.upstream_down_ms, 5000)?,
        };
        let l = &raw.limits;
        let limits = Limits {
            // hyper's read buffer takes no less than 8 KiB.
            max_header_bytes: match l.max_header_bytes {
                Some(v) => c.whole("limits.max_header_bytes", v, 8192.0, 1048576.0)? as usize,
                None => 16 << 10,
            },
            max_body_bytes: match l.max_body_bytes {
                Some(v) => c.whole("limits.max_body_bytes", v, 0.0, (1u64 << 40) as f64)?,
                None => 10 << 20,
            },
            max_connections: match l.max_connections {
                Some(v) => c.whole("limits.max_connections", v, 1.0, 1048576.0)? as usize,
                None => 1024,
            },
            upstream_idle_connections: match l.upstream_idle_connections {
                Some(v) => c.whole("limits.upstream_idle_connections", v, 0.0, 65536.0)? as usize,
                None => 64,
            },
            listen_backlog: match l.listen_backlog {
                Some(v) => c.whole("limits.listen_backlog", v, 1.0, 65535.0)? as u32,
                None => DEFAULT_LISTEN_BACKLOG,
            },
        };
        let utilization = utilization(&c, &raw.utilization)?;
        let sbac = match &raw.sbac {
            Some(s) => Some(sbac(&c, s)?),
            None => None,
        };
        let resources = resources(&c, &raw.resources)?;
        let certes = match &raw.certes {
            None => None,
            Some(certes) => Some(certes_stream(&c, certes, raw.access_log.as_ref())?),
        };
        Ok(ProxyConfig {
            certes,
            resources,
            origin: origin.to_string(),
            listen,
            upstreams,
            workers,
            metrics_listen,
            access_log: raw.access_log,
            tls: raw.tls,
            timeouts,
            limits,
            utilization,
            sbac,
        })
    }

    /// The effective configuration as TOML, every default filled in and
    /// the keys replaced by their count.
    pub fn effective(&self) -> String {
        let mut out = toml::to_string(self).unwrap_or_else(|e| format!("# cannot print: {e}\n"));
        if let Some(s) = &self.sbac {
            let _ = writeln!(out, "# sbac.keys: {} key(s), not shown", s.keys.len());
        }
        out
    }
}

fn certes_stream(
    c: &Checker,
    raw: &RawCertes,
    access_log: Option<&PathBuf>,
) -> Result<CertesStreamConfig, ConfigError> {
    let Some(log) = &raw.log else {
        return Err(c.fail(
            "certes",
            "needs `log`: the file the per-interval counters are appended to".into(),
        ));
    };
    if log.as_os_str().is_empty() {
        return Err(c.fail("certes.log", "must be a file name, got \"\"".into()));
    }
    if access_log == Some(log) {
        return Err(c.fail(
            "certes.log",
            format!(
                "is the access log (`{}`): give a file of its own",
                log.display()
            ),
        ));
    }
    let interval_ms = match raw.interval_ms {
        Some(v) => c.whole("certes.interval_ms", v, 10.0, MAX_CERTES_INTERVAL_MS as f64)?,
        None => 250,
    };
    let accept_lag_ms = match raw.accept_lag_ms {
        Some(v) => c.whole(
            "certes.accept_lag_ms",
            v,
            0.0,
            MAX_CERTES_ACCEPT_LAG_MS as f64,
        )?,
        None => 1000,
    };
    Ok(CertesStreamConfig {
        log: log.clone(),
        interval_ms,
        accept_lag_ms,
    })
}

fn utilization(c: &Checker, u: &RawUtilization) -> Result<UtilizationConfig, ConfigError> {
    let cores = match u.cores {
        Some(v) => Some(c.range("utilization.cores", v, 0.01, 4096.0)?),
        None => None,
    };
    let unused = |key: &str, present: bool, source: &str| {
        if present {
            Err(c.fail(
                &format!("utilization.{key}"),
                format!("is not used with source = \"{source}\""),
            ))
        } else {
            Ok(())
        }
    };
    Ok(match u.source.unwrap_or(SourceKind::Occupancy) {
        SourceKind::Occupancy => {
            unused("cgroup", u.cgroup.is_some(), "occupancy")?;
            unused("pids", u.pids.is_some(), "occupancy")?;
            unused("cores", u.cores.is_some(), "occupancy")?;
            let Some(v) = u.concurrency else {
                return Err(c.fail(
                    "utilization.concurrency",
                    "is required with source = \"occupancy\" (requests the backend serves at once)"
                        .into(),
                ));
            };
            UtilizationConfig::Occupancy {
                concurrency: c.whole("utilization.concurrency", v, 1.0, 1048576.0)?,
            }
        }
        SourceKind::Orca => {
            unused("concurrency", u.concurrency.is_some(), "orca")?;
            unused("cgroup", u.cgroup.is_some(), "orca")?;
            unused("pids", u.pids.is_some(), "orca")?;
            unused("cores", u.cores.is_some(), "orca")?;
            UtilizationConfig::Orca
        }
        SourceKind::Cgroup => {
            unused("concurrency", u.concurrency.is_some(), "cgroup")?;
            unused("pids", u.pids.is_some(), "cgroup")?;
            let Some(cgroup) = u.cgroup.clone() else {
                return Err(c.fail(
                    "utilization.cgroup",
                    "is required with source = \"cgroup\" (the backend's cgroup v2 directory)"
                        .into(),
                ));
            };
            UtilizationConfig::Cgroup { cgroup, cores }
        }
        SourceKind::Pids => {
            unused("concurrency", u.concurrency.is_some(), "pids")?;
            unused("cgroup", u.cgroup.is_some(), "pids")?;
            let pids = match &u.pids {
                Some(p) if !p.is_empty() && p.len() <= 4096 => p
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        c.whole(&format!("utilization.pids[{i}]"), *v, 1.0, 4194304.0)
                            .map(|p| p as u32)
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                _ => {
                    return Err(c.fail(
                        "utilization.pids",
                        "must list between 1 and 4096 process ids with source = \"pids\"".into(),
                    ))
                }
            };
            let Some(cores) = cores else {
                return Err(c.fail(
                    "utilization.cores",
                    "is required with source = \"pids\" (cores the backend may use)".into(),
                ));
            };
            UtilizationConfig::Pids { pids, cores }
        }
    })
}

/// Largest buffer or pool size accepted, bytes (1 TiB).
const MAX_BUFFER_BYTES: f64 = (1u64 << 40) as f64;

fn marks(c: &Checker, key: &str, value: [f64; 2], low_limit: f64) -> Result<Marks, ConfigError> {
    let high = c.whole(key, value[0], low_limit, MAX_BUFFER_BYTES)?;
    let low = c.whole(key, value[1], 0.0, MAX_BUFFER_BYTES)?;
    if low > high {
        return Err(c.fail(
            key,
            format!("must be [high, low] with low ≤ high, got [{high}, {low}]"),
        ));
    }
    Ok(Marks { high, low })
}

fn resources(c: &Checker, r: &RawResources) -> Result<ResourcesConfig, ConfigError> {
    let defaults = ResourcesConfig::default();
    let mode = r.mode.unwrap_or(ResourceMode::Autotune);
    let name = mode.name();
    let only = |key: &str, present: bool, used: bool| {
        if present && !used {
            Err(c.fail(
                &format!("resources.{key}"),
                format!("is not used with mode = \"{name}\""),
            ))
        } else {
            Ok(())
        }
    };
    let fixed = mode == ResourceMode::Fixed;
    let tuned = matches!(mode, ResourceMode::Ssbt | ResourceMode::SsbtWithConnections);
    let manages = mode == ResourceMode::SsbtWithConnections;
    only("send_bytes", r.send_bytes.is_some(), fixed)?;
    only("receive_bytes", r.receive_bytes.is_some(), fixed)?;
    only("pool_bytes", r.pool_bytes.is_some(), tuned)?;
    only("send_fraction", r.send_fraction.is_some(), tuned)?;
    only(
        "idle_buffer_half_life_ms",
        r.idle_buffer_half_life_ms.is_some(),
        tuned,
    )?;
    only("descriptors", r.descriptors.is_some(), manages)?;
    only("tcp_memory_bytes", r.tcp_memory_bytes.is_some(), manages)?;
    only("connections", r.connections.is_some(), manages)?;
    only("min_idle_age_ms", r.min_idle_age_ms.is_some(), manages)?;
    only(
        "max_closes_per_interval",
        r.max_closes_per_interval.is_some(),
        manages,
    )?;
    if fixed && r.send_bytes.is_none() && r.receive_bytes.is_none() {
        return Err(c.fail(
            "resources.mode",
            "\"fixed\" needs send_bytes, receive_bytes or both".into(),
        ));
    }
    let size = |key: &str, v: Option<f64>| {
        v.map(|v| c.whole(&format!("resources.{key}"), v, 4096.0, MAX_BUFFER_BYTES))
            .transpose()
    };
    Ok(ResourcesConfig {
        mode,
        interval_ms: match r.interval_ms {
            Some(v) => c.whole("resources.interval_ms", v, 10.0, 3_600_000.0)?,
            None => defaults.interval_ms,
        },
        send_bytes: size("send_bytes", r.send_bytes)?,
        receive_bytes: size("receive_bytes", r.receive_bytes)?,
        pool_bytes: match r.pool_bytes {
            Some(v) => Some(c.whole("resources.pool_bytes", v, 65536.0, MAX_BUFFER_BYTES)?),
            None => None,
        },
        send_fraction: match r.send_fraction {
            Some(v) => c.range("resources.send_fraction", v, 0.05, 0.95)?,
            None => defaults.send_fraction,
        },
        descriptors: r
            .descriptors
            .map(|v| marks(c, "resources.descriptors", v, 1.0))
            .transpose()?,
        tcp_memory_bytes: r
            .tcp_memory_bytes
            .map(|v| marks(c, "resources.tcp_memory_bytes", v, 4096.0))
            .transpose()?,
        connections: r
            .connections
            .map(|v| marks(c, "resources.connections", v, 1.0))
            .transpose()?,
        min_idle_age_ms: match r.min_idle_age_ms {
            Some(v) => c.whole("resources.min_idle_age_ms", v, 0.0, 86_400_000.0)?,
            None => defaults.min_idle_age_ms,
        },
        max_closes_per_interval: match r.max_closes_per_interval {
            Some(v) => c.whole("resources.max_closes_per_interval", v, 1.0, 1_048_576.0)? as usize,
            None => defaults.max_closes_per_interval,
        },
        idle_buffer_half_life_ms: match r.idle_buffer_half_life_ms {
            Some(0.0) => None,
            Some(v) => Some(c.whole("resources.idle_buffer_half_life_ms", v, 1.0, 86_400_000.0)?),
            None => defaults.idle_buffer_half_life_ms,
        },
    })
}

fn sbac(c: &Checker, s: &RawSbac) -> Result<SbacConfig, ConfigError> {
    let interval_s = match s.interval_s {
        Some(v) => c.range("sbac.interval_s", v, 0.01, 3600.0)?,
        None => 1.0,
    };
    let target_utilization = match s.target_utilization {
        Some(v) => c.range("sbac.target_utilization", v, 0.01, 1.0)?,
        None => 0.95,
    };
    let session_timeout_s = match s.session_timeout_s {
        Some(v) => c.whole("sbac.session_timeout_s", v, 1.0, 86_400.0)?,
        None => DEFAULT_SESSION_TIMEOUT_S,
    };
    let max_session_age_s = match s.max_session_age_s {
        Some(v) => c.whole("sbac.max_session_age_s", v, 1.0, 30.0 * 86_400.0)?,
        None => 3600,
    };
    if max_session_age_s < session_timeout_s {
        return Err(c.fail(
            "sbac.max_session_age_s",
            format!("must be at least sbac.session_timeout_s ({session_timeout_s})"),
        ));
    }
    if s.keys.is_empty() || s.keys.len() > vantage_core::admission::session::token::MAX_KEYS {
        return Err(c.fail(
            "sbac.keys",
            format!(
                "must list between 1 and {} hex keys (the first signs)",
                vantage_core::admission::session::token::MAX_KEYS
            ),
        ));
    }
    let keys = s
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| hex_key(c, &format!("sbac.keys[{i}]"), k))
        .collect::<Result<Vec<_>, _>>()?;
    let cookie = s.cookie.clone().unwrap_or_else(|| "vantage_session".into());
    let token_char = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if cookie.is_empty() || cookie.len() > 64 || !cookie.bytes().all(token_char) {
        return Err(c.fail(
            "sbac.cookie",
            format!("must be a cookie name (1 to 64 token characters), got \"{cookie}\""),
        ));
    }
    let retry_after_s = match s.retry_after_s {
        Some(v) => c.whole("sbac.retry_after_s", v, 0.0, 86_400.0)?,
        None => 30,
    };
    let max_tracked_sessions = match s.max_tracked_sessions {
        Some(v) => c.whole("sbac.max_tracked_sessions", v, 1.0, 16_777_216.0)? as usize,
        None => 100_000,
    };
    let capacity_requests_per_s = match s.capacity_requests_per_s {
        Some(_) if s.strategy != Strategy::Predictive => {
            return Err(c.fail(
                "sbac.capacity_requests_per_s",
                "is used only with strategy = \"predictive\"".into(),
            ))
        }
        Some(v) => Some(c.range("sbac.capacity_requests_per_s", v, 0.001, 1e9)?),
        None => None,
    };
    let reject = match &s.reject {
        None => Reject::Page(DEFAULT_REJECT_PAGE.into()),
        Some(RawReject {
            page: Some(page),
            redirect: None,
        }) => {
            if page.len() > MAX_REJECT_PAGE_BYTES {
                return Err(c.fail(
                    "sbac.reject.page",
                    format!(
                        "must be at most {MAX_REJECT_PAGE_BYTES} bytes, got {}",
                        page.len()
                    ),
                ));
            }
            Reject::Page(page.clone())
        }
        Some(RawReject {
            page: None,
            redirect: Some(url),
        }) => {
            let valid = url.parse::<hyper::Uri>().is_ok()
                && !url.is_empty()
                && url.bytes().all(|b| b.is_ascii_graphic());
            if !valid {
                return Err(c.fail(
                    "sbac.reject.redirect",
                    format!("must be a URL, got \"{url}\""),
                ));
            }
            Reject::Redirect(url.clone())
        }
        Some(_) => {
            return Err(c.fail(
                "sbac.reject",
                "must be { page = \"…\" } or { redirect = \"URL\" }".into(),
            ))
        }
    };
    Ok(SbacConfig {
        strategy: s.strategy,
        interval_s,
        target_utilization,
        session_timeout_s,
        max_session_age_s,
        keys,
        cookie,
        retry_after_s,
        max_tracked_sessions,
        capacity_requests_per_s,
        reject,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f";

    fn parse(text: &str) -> Result<ProxyConfig, ConfigError> {
        ProxyConfig::from_toml(text, "p.toml")
    }

    #[test]
    fn the_listen_backlog_has_a_default_and_bounds() {
        let base = "listen = \"127.0.0.1:8080\"\nupstreams = [\"127.0.0.1:9000\"]\n[utilization]\nconcurrency = 8\n";
        assert_eq!(
            parse(base).unwrap().limits.listen_backlog,
            DEFAULT_LISTEN_BACKLOG
        );
        let c = parse(&format!("{base}\n[limits]\nlisten_backlog = 511\n")).unwrap();
        assert_eq!(c.limits.listen_backlog, 511);
        for bad in ["0", "65536", "1.5"] {
            let e = parse(&format!("{base}\n[limits]\nlisten_backlog = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("`limits.listen_backlog`"), "{e}");
        }
    }

    #[test]
    fn the_certes_stream_keys_and_their_errors() {
        let base = "listen = \"127.0.0.1:8080\"\nupstreams = [\"127.0.0.1:9000\"]\naccess_log = \"a.jsonl\"\n[utilization]\nconcurrency = 8\n";
        assert_eq!(parse(base).unwrap().certes, None);
        let c = parse(&format!("{base}[certes]\nlog = \"c.jsonl\"\n")).unwrap();
        assert_eq!(
            c.certes,
            Some(CertesStreamConfig {
                log: "c.jsonl".into(),
                interval_ms: 250,
                accept_lag_ms: 1000
            })
        );
        assert!(c.effective().contains("[certes]"), "{}", c.effective());
        let c = parse(&format!(
            "{base}[certes]\nlog = \"c.jsonl\"\ninterval_ms = 1000\n"
        ))
        .unwrap();
        assert_eq!(c.certes.unwrap().interval_ms, 1000);
        let c = parse(&format!(
            "{base}[certes]\nlog = \"c.jsonl\"\naccept_lag_ms = 0\n"
        ))
        .unwrap();
        assert_eq!(c.certes.unwrap().accept_lag_ms, 0);
        for (table, key) in [
            ("[certes]\n", "certes"),
            ("[certes]\nlog = \"\"\n", "certes.log"),
            ("[certes]\nlog = \"a.jsonl\"\n", "certes.log"),
            (
                "[certes]\nlog = \"c\"\ninterval_ms = 5\n",
                "certes.interval_ms",
            ),
            (
                "[certes]\nlog = \"c\"\ninterval_ms = 0.5\n",
                "certes.interval_ms",
            ),
            (
                "[certes]\nlog = \"c\"\ninterval_ms = 60001\n",
                "certes.interval_ms",
            ),
            (
                "[certes]\nlog = \"c\"\naccept_lag_ms = -1\n",
                "certes.accept_lag_ms",
            ),
            (
                "[certes]\nlog = \"c\"\naccept_lag_ms = 60001\n",
                "certes.accept_lag_ms",
            ),
        ] {
            let error = parse(&format!("{base}{table}")).unwrap_err();
            assert_eq!(error.key(), Some(key), "{error}");
            assert!(error.to_string().contains("p.toml"), "{error}");
        }
        let error = parse(&format!("{base}[certes]\nlog = \"c\"\nfile = 1\n")).unwrap_err();
        assert!(error.to_string().contains("file"), "{error}");
    }

    #[test]
    fn defaults_and_a_full_file() {
        let c = parse(
            "listen = \"127.0.0.1:8080\"\nupstreams = [\"127.0.0.1:9000\"]\n[utilization]\nconcurrency = 8\n",
        )
        .unwrap();
        assert_eq!(c.workers, 1);
        assert_eq!(c.timeouts.request_headers_ms, 5000);
        assert_eq!(c.timeouts.send_ms, 60_000, "nginx's send_timeout");
        assert!(c.sbac.is_none());
        let full = format!(
            "listen = \"127.0.0.1:8080\"\nupstreams = [\"127.0.0.1:9000\", \"[::1]:9001\"]\n\
             [sbac]\nstrategy = \"predictive\"\nkeys = [\"{KEY}\"]\ncapacity_requests_per_s = 100\n\
             reject = {{ redirect = \"https://example.org/later\" }}\n\
             [utilization]\nsource = \"orca\"\n"
        );
        let c = parse(&full).unwrap();
        let s = c.sbac.as_ref().unwrap();
        assert_eq!(s.strategy, Strategy::Predictive);
        assert_eq!(s.keys[0].len(), 16);
        assert_eq!(
            s.reject,
            Reject::Redirect("https://example.org/later".into())
        );
        let printed = c.effective();
        assert!(printed.contains("strategy = \"predictive\""), "{printed}");
        assert!(!printed.contains(KEY), "{printed}");
        // The printed configuration is itself TOML.
        assert!(printed.parse::<toml::Table>().is_ok(), "{printed}");
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let text = format!(
            "listen = \"127.0.0.1:8080\"\nupstreams = [\"127.0.0.1:9000\"]\n[utilization]\nconcurrency = 8\n\
             [sbac]\nstrategy = \"stable\"\nkeys = [\"{KEY}\",\n  \"abcd\"]\n"
        );
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.starts_with("p.toml:8: `sbac.keys[1]`"), "{e}");
        let e = parse("listen = \"x\"\nupstreams = []\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.toml:1: `listen`"), "{e}");
        let e = parse("listen = \"127.0.0.1:1\"\nupstreams = [\"127.0.0.1:2\"]\nbogus = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.toml:3:"), "{e}");
        let e = parse(
            "listen = \"127.0.0.1:1\"\nupstreams = [\"127.0.0.1:2\"]\n[timeouts]\nidle_ms = 0\n",
        )
        .unwrap_err();
        assert_eq!(e.key(), Some("timeouts.idle_ms"));
        let e = parse("listen = \"127.0.0.1:1\"\nupstreams = [\"127.0.0.1:2\"]\n").unwrap_err();
        assert_eq!(e.key(), Some("utilization.concurrency"));
    }

    #[test]
    fn resources_table() {
        let head = "listen = \"127.0.0.1:1\"\nupstreams = [\"127.0.0.1:2\"]\n[utilization]\nconcurrency = 8\n";
        let r = parse(head).unwrap().resources;
        assert_eq!(r, ResourcesConfig::default());
        assert_eq!(r.mode, ResourceMode::Autotune);
        let r = parse(&format!(
            "{head}[resources]\nmode = \"ssbt+conn\"\ninterval_ms = 500\npool_bytes = 1048576\n\
             descriptors = [3600, 3200]\nconnections = [300, 280]\nmin_idle_age_ms = 2000\n"
        ))
        .unwrap()
        .resources;
        assert_eq!(r.mode, ResourceMode::SsbtWithConnections);
        assert_eq!(r.interval_ms, 500);
        assert_eq!(r.pool_bytes, Some(1 << 20));
        assert_eq!(
            r.descriptors,
            Some(Marks {
                high: 3600,
                low: 3200
            })
        );
        assert_eq!(
            r.connections,
            Some(Marks {
                high: 300,
                low: 280
            })
        );
        assert_eq!(r.tcp_memory_bytes, None);
        let printed = toml::to_string(&r).unwrap();
        assert!(printed.contains("descriptors = [3600, 3200]"), "{printed}");
        let r = parse(&format!(
            "{head}[resources]\nmode = \"fixed\"\nsend_bytes = 16384\nreceive_bytes = 262144\n"
        ))
        .unwrap()
        .resources;
        assert_eq!((r.send_bytes, r.receive_bytes), (Some(16384), Some(262144)));
        for (body, key, line) in [
            (
                "mode = \"ssbt\"\nsend_bytes = 16384\n",
                "resources.send_bytes",
                7,
            ),
            ("mode = \"fixed\"\n", "resources.mode", 6),
            (
                "mode = \"fixed\"\nsend_bytes = 100\n",
                "resources.send_bytes",
                7,
            ),
            (
                "mode = \"ssbt\"\nconnections = [10, 20]\n",
                "resources.connections",
                7,
            ),
            (
                "mode = \"ssbt+conn\"\nconnections = [10, 20]\n",
                "resources.connections",
                7,
            ),
            (
                "mode = \"ssbt+conn\"\ninterval_ms = 1\n",
                "resources.interval_ms",
                7,
            ),
            (
                "mode = \"ssbt\"\nsend_fraction = 1.5\n",
                "resources.send_fraction",
                7,
            ),
        ] {
            let e = parse(&format!("{head}[resources]\n{body}")).unwrap_err();
            assert_eq!(e.key(), Some(key), "{body}: {e}");
            assert!(e.to_string().starts_with(&format!("p.toml:{line}:")), "{e}");
        }
        assert!(parse(&format!("{head}[resources]\nmode = \"bogus\"\n")).is_err());
    }
}
