//! The watch daemon's TOML configuration, validated into a [`WatchConfig`]
//! whose errors name the file, the line and the key. The model's keys are
//! `vantage certes estimate`'s options, with the same values.
//!
//! ```toml
//! listeners = ["0.0.0.0:80", "[::]:443", ":8080"]   # ADDR:PORT, [V6]:PORT or :PORT
//! interface = "eth0"              # optional; default: every interface
//! interval = "250ms"              # Δ, below the profile's first SYN timeout (default 250ms)
//! profile = "mix-2026"            # client SYN profile or mixture (`vantage profiles`)
//! frustration_timeout = "21s"     # FTO
//! network_loss = "none"           # none | 0.03 | retransmissions
//! undamped = false
//! max_connections = 100000        # connection table cap
//! learn = false                   # true: learn the clients' SYN schedules and give-ups
//! learn_every = "10s"             # with learn: how often they are learned again
//! metrics_listen = "127.0.0.1:9466"
//! log = "/var/log/vantage/watch.log"      # optional: start, reloads, warnings (appended)
//! jsonl = "/var/lib/vantage/watch.jsonl"  # optional: one object per interval (appended)
//! [classes]                        # optional: one estimator per class
//! by = "source-prefix/24"          # or "listener"
//! max = 64                         # more classes count as "other"
//! [ring]
//! block_size = 1048576             # bytes, a power of two ≥ the page size
//! block_count = 32                 # ring memory = block_size × block_count
//! block_timeout_ms = 50            # a block not full is handed over after this
//! [gate]                           # optional: a `vantage gate` guarding the listeners (or the proxy)
//! log = "/var/log/vantage/gate.jsonl"  # its log, followed (`super::gate_input`)
//! [proxy]                          # optional: a `vantage proxy` in front of the service
//! log = "/var/lib/vantage/proxy-certes.jsonl"  # its `[certes] log`, followed (`super::proxy_input`)
//! ```
//!
//! `listeners` (the capture) or `[proxy]` is required: Certes needs
//! COMPLETED and SYN-to-END (Eq. 4), which the capture and the proxy's
//! stream give and the gate's log does not. Without `listeners` there is no
//! capture, and the capture's keys (`interface`, `learn`, `[classes]`,
//! `[ring]`) are errors; `[gate]` with `[proxy]` alone merges the gate's
//! verdicts into the proxy's rows.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use vantage_core::certes::{Certes, CertesConfig, NetworkLoss};
use vantage_core::config;
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_sys::packet_ring::{RingConfig, MAX_PORTS};
use vantage_trace::handshake::{ClassBy, ServerFilter};

use crate::daemon::config_file::read_config_file;
pub use crate::daemon::config_file::ConfigError;

/// Most classes one daemon may be asked to keep.
pub const MAX_CLASSES: u64 = 10_000;
/// Most connections the table may be asked to hold.
pub const MAX_CONNECTIONS: u64 = 10_000_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    listeners: Option<Vec<String>>,
    interface: Option<String>,
    interval: Option<toml::Value>,
    profile: Option<String>,
    frustration_timeout: Option<toml::Value>,
    network_loss: Option<toml::Value>,
    undamped: Option<bool>,
    max_connections: Option<f64>,
    learn: Option<bool>,
    learn_every: Option<toml::Value>,
    metrics_listen: Option<String>,
    log: Option<PathBuf>,
    jsonl: Option<PathBuf>,
    classes: Option<RawClasses>,
    #[serde(default)]
    ring: RawRing,
    gate: Option<RawGate>,
    proxy: Option<RawProxy>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProxy {
    log: Option<PathBuf>,
}

/// The `[proxy]` input: the Certes counters stream of a `vantage proxy`
/// (its `[certes] log`), followed as it grows (`super::proxy_input`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyInputConfig {
    pub log: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGate {
    log: Option<PathBuf>,
}

/// The `[gate]` input: the log of a `vantage gate` in front of the
/// listeners, followed as it grows (`super::gate_input`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateInputConfig {
    /// The gate's JSON Lines log (its `log` key).
    pub log: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClasses {
    by: String,
    max: Option<f64>,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct RawRing {
    block_size: Option<f64>,
    block_count: Option<f64>,
    block_timeout_ms: Option<f64>,
}

/// Classes of traffic: how, and at most how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classes {
    pub by: ClassBy,
    pub max: usize,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// The file it came from (for messages).
    pub origin: String,
    /// The capture's listeners; empty: no capture (`[proxy]` only).
    pub listeners: Vec<ServerFilter>,
    /// `None`: every interface.
    pub interface: Option<String>,
    /// The model, as `certes estimate` builds it from the same keys.
    pub model: CertesConfig,
    /// The model's frustration timeout (`frustration_timeout`).
    pub frustration_timeout: Nanos,
    pub max_connections: usize,
    /// Learn the clients' SYN schedules and give-up times from the capture
    /// and give them to the model (`vantage_core::certes::learn`).
    pub learn: bool,
    /// With `learn`: how often (of the capture's clock) each class's
    /// clients are learned again, at least one interval.
    pub learn_every: Nanos,
    pub classes: Option<Classes>,
    pub ring: RingConfig,
    pub metrics_listen: Option<SocketAddr>,
    pub log: Option<PathBuf>,
    pub jsonl: Option<PathBuf>,
    /// `[gate]`: the gate's exact SYN verdicts per interval, beside the
    /// capture's.
    pub gate: Option<GateInputConfig>,
    /// `[proxy]`: the proxy's Certes counters stream, estimated beside the
    /// capture's (or alone).
    pub proxy: Option<ProxyInputConfig>,
}

/// Parses `250ms`, `1s`, `1.5s`, `500us`, `100ns`, `2min`; a bare number is
/// seconds. `vantage certes estimate`'s durations too.
pub fn parse_duration(text: &str) -> Result<Nanos, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 250ms, 1s, 21s)"))?;
    let scale = match unit.trim() {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "min" => 60e9,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (known: ns, us, ms, s, min)"
            ))
        }
    };
    let nanos = value * scale;
    if !(1.0..=86_400e9).contains(&nanos) {
        return Err(format!("`{text}` is out of range (1 ns to 24 h)"));
    }
    Ok(Nanos(nanos.round() as u64))
}

/// `none`, `retransmissions` or a fraction in [0, 1); `vantage certes
/// estimate --network-loss` too.
pub fn parse_network_loss(text: &str) -> Result<NetworkLoss, String> {
    match text.trim() {
        "none" => Ok(NetworkLoss::None),
        "retransmissions" => Ok(NetworkLoss::FromRetransmissions),
        other => match other.parse::<f64>() {
            Ok(q) if (0.0..1.0).contains(&q) => Ok(NetworkLoss::Fixed(q)),
            _ => Err(format!(
                "`{other}` is not a network loss: give `none`, `retransmissions` or a fraction in [0, 1) such as 0.03"
            )),
        },
    }
}

type Checker<'a> = config::Checker<'a, ConfigError>;

fn duration(
    c: &Checker,
    key: &str,
    value: &Option<toml::Value>,
    default: Nanos,
) -> Result<Nanos, ConfigError> {
    match value {
        None => Ok(default),
        Some(toml::Value::String(text)) => parse_duration(text).map_err(|e| c.fail(key, e)),
        Some(toml::Value::Integer(n)) => parse_duration(&n.to_string()).map_err(|e| c.fail(key, e)),
        Some(toml::Value::Float(x)) => parse_duration(&x.to_string()).map_err(|e| c.fail(key, e)),
        Some(other) => Err(c.fail(
            key,
            format!("must be a duration such as \"250ms\" or \"21s\", got {other}"),
        )),
    }
}

fn address(c: &Checker, key: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.parse::<SocketAddr>().map_err(|_| {
        c.fail(
            key,
            format!("must be ADDRESS:PORT such as \"127.0.0.1:9466\", got \"{text}\""),
        )
    })
}

fn file_name(c: &Checker, key: &str, path: &Option<PathBuf>) -> Result<(), ConfigError> {
    if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
        return Err(c.fail(key, "must be a file name, got \"\"".into()));
    }
    Ok(())
}

impl WatchConfig {
    /// Reads (at most [`config::MAX_CONFIG_BYTES`]) and validates a file.
    pub fn load(path: &Path) -> Result<WatchConfig, ConfigError> {
        let (origin, text) = read_config_file(path)?;
        WatchConfig::from_toml(&text, &origin)
    }

    /// Parses and validates a configuration; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<WatchConfig, ConfigError> {
        let c = Checker::new(origin, text);
        let raw: RawFile = c.deserialize()?;
        let proxy = match &raw.proxy {
            None => None,
            Some(proxy) => {
                let Some(log) = &proxy.log else {
                    return Err(c.fail(
                        "proxy",
                        "needs `log`: the path of the proxy's Certes stream (its `[certes] log` key)"
                            .into(),
                    ));
                };
                file_name(&c, "proxy.log", &proxy.log)?;
                if raw.jsonl.as_ref() == Some(log) || raw.log.as_ref() == Some(log) {
                    return Err(c.fail(
                        "proxy.log",
                        format!(
                            "is a file this daemon writes (`{}`): give the proxy's `[certes] log`",
                            log.display()
                        ),
                    ));
                }
                if raw.gate.as_ref().and_then(|g| g.log.as_ref()) == Some(log) {
                    return Err(c.fail(
                        "proxy.log",
                        format!("is the gate's log too (`{}`)", log.display()),
                    ));
                }
                Some(ProxyInputConfig { log: log.clone() })
            }
        };
        let no_listeners: Vec<String> = Vec::new();
        let raw_listeners = match &raw.listeners {
            Some(listeners) => listeners,
            None if proxy.is_some() => {
                // The proxy's stream alone: no capture, so none of its keys.
                let capture_only = [
                    ("learn", raw.learn == Some(true), "the clients are learned from the SYN times the capture sees; the proxy's stream has none"),
                    ("classes", raw.classes.is_some(), "classes are the capture's; the proxy's stream is one class"),
                    ("interface", raw.interface.is_some(), "there is no capture without `listeners`"),
                    ("ring", raw.ring != RawRing::default(), "there is no capture without `listeners`"),
                    ("max_connections", raw.max_connections.is_some(), "there is no capture without `listeners`"),
                    ("learn_every", raw.learn_every.is_some(), "the clients are learned from the capture only"),
                ];
                if let Some((key, _, why)) = capture_only.iter().find(|(_, set, _)| *set) {
                    return Err(c.fail(key, format!("needs `listeners` (a capture): {why}")));
                }
                &no_listeners
            }
            None => {
                let problem = if raw.gate.is_some() {
                    "required: the gate's log gives DROPPED and ACCEPTED only, and Certes (Eq. 4) needs COMPLETED and the SYN-to-END sum, which the capture of the listeners (or a proxy's stream, `[proxy]`) gives; name the listeners the gate guards"
                } else {
                    "required: the listeners whose clients to estimate, e.g. listeners = [\":80\"], or `[proxy] log`, a vantage proxy's Certes stream"
                };
                return Err(c.fail("listeners", problem.into()));
            }
        };
        if (raw.listeners.is_some() && raw_listeners.is_empty()) || raw_listeners.len() > MAX_PORTS
        {
            return Err(c.fail(
                "listeners",
                format!(
                    "must list between 1 and {MAX_PORTS} listeners, got {}",
                    raw_listeners.len()
                ),
            ));
        }
        let mut listeners = Vec::new();
        for (i, text) in raw_listeners.iter().enumerate() {
            let key = format!("listeners[{i}]");
            let filter: ServerFilter = text.parse().map_err(|e: String| c.fail(&key, e))?;
            if filter.port.is_none() {
                return Err(c.fail(
                    &key,
                    format!("must name a port (ADDR:PORT or :PORT), got \"{text}\""),
                ));
            }
            listeners.push(filter);
        }
        if raw.interface.as_ref().is_some_and(|i| i.is_empty()) {
            return Err(c.fail("interface", "must be an interface name, got \"\"".into()));
        }
        let profile = raw.profile.as_deref().unwrap_or("linux-6.5");
        let clients = ClientMix::builtin(profile).map_err(|e| c.fail("profile", e.to_string()))?;
        let interval = duration(&c, "interval", &raw.interval, Nanos::from_millis(250))?;
        let frustration_timeout = duration(
            &c,
            "frustration_timeout",
            &raw.frustration_timeout,
            Nanos::from_secs(21),
        )?;
        let network_loss = match &raw.network_loss {
            None => NetworkLoss::None,
            Some(toml::Value::String(text)) => {
                parse_network_loss(text).map_err(|e| c.fail("network_loss", e))?
            }
            Some(toml::Value::Float(x)) => {
                parse_network_loss(&x.to_string()).map_err(|e| c.fail("network_loss", e))?
            }
            Some(other) => {
                return Err(c.fail(
                    "network_loss",
                    format!("must be \"none\", \"retransmissions\" or a fraction, got {other}"),
                ))
            }
        };
        let mut model = CertesConfig::new(interval, clients, frustration_timeout);
        model.network_loss = network_loss;
        model.damping = !raw.undamped.unwrap_or(false);
        // The model's own checks (interval below the first SYN timeout, …).
        Certes::new(model.clone()).map_err(|e| c.fail("interval", e.to_string()))?;
        let learn_every = duration(&c, "learn_every", &raw.learn_every, Nanos::from_secs(10))?;
        if learn_every < interval {
            return Err(c.fail(
                "learn_every",
                format!(
                    "must be at least the interval ({} s)",
                    interval.as_secs_f64()
                ),
            ));
        }
        let max_connections = match raw.max_connections {
            Some(v) => c.whole("max_connections", v, 1.0, MAX_CONNECTIONS as f64)? as usize,
            None => 100_000,
        };
        let classes = match &raw.classes {
            None => None,
            Some(classes) => {
                let by: ClassBy = classes
                    .by
                    .parse()
                    .map_err(|e: String| c.fail("classes.by", e))?;
                let max = match classes.max {
                    Some(v) => c.whole("classes.max", v, 1.0, MAX_CLASSES as f64)? as usize,
                    None => 64,
                };
                Some(Classes { by, max })
            }
        };
        let defaults = RingConfig::default();
        let r = &raw.ring;
        let ring = RingConfig {
            block_size: match r.block_size {
                Some(v) => c.whole("ring.block_size", v, 4096.0, (1u64 << 30) as f64)? as u32,
                None => defaults.block_size,
            },
            block_count: match r.block_count {
                Some(v) => c.whole("ring.block_count", v, 1.0, 65_536.0)? as u32,
                None => defaults.block_count,
            },
            block_timeout_ms: match r.block_timeout_ms {
                Some(v) => c.whole("ring.block_timeout_ms", v, 1.0, 1000.0)? as u32,
                None => defaults.block_timeout_ms,
            },
        };
        ring.check().map_err(|e| c.fail("ring", e.to_string()))?;
        let metrics_listen = match &raw.metrics_listen {
            Some(text) => Some(address(&c, "metrics_listen", text)?),
            None => None,
        };
        file_name(&c, "log", &raw.log)?;
        file_name(&c, "jsonl", &raw.jsonl)?;
        let gate = match &raw.gate {
            None => None,
            Some(gate) => {
                let Some(log) = &gate.log else {
                    return Err(c.fail(
                        "gate",
                        "needs `log`: the path of the gate's JSON Lines log (its own `log` key)"
                            .into(),
                    ));
                };
                file_name(&c, "gate.log", &gate.log)?;
                if raw.jsonl.as_ref() == Some(log) || raw.log.as_ref() == Some(log) {
                    return Err(c.fail(
                        "gate.log",
                        format!(
                            "is a file this daemon writes (`{}`): give the gate's log",
                            log.display()
                        ),
                    ));
                }
                Some(GateInputConfig { log: log.clone() })
            }
        };
        Ok(WatchConfig {
            origin: origin.to_string(),
            listeners,
            interface: raw.interface,
            model,
            frustration_timeout,
            max_connections,
            learn: raw.learn.unwrap_or(false),
            learn_every,
            classes,
            ring,
            metrics_listen,
            log: raw.log,
            jsonl: raw.jsonl,
            gate,
            proxy,
        })
    }

    /// The listener ports, each once, for the kernel filter.
    pub fn ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self.listeners.iter().filter_map(|l| l.port).collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Whether the daemon captures packets (it has listeners).
    pub fn captures(&self) -> bool {
        !self.listeners.is_empty()
    }

    /// What one line of a check prints.
    pub fn describe(&self) -> String {
        let proxy = match &self.proxy {
            Some(p) => format!(", proxy stream {}", p.log.display()),
            None => String::new(),
        };
        if !self.captures() {
            return format!(
                "{}: no capture, interval {:.3} s, profile {}, frustration timeout {:.1} s{proxy}",
                self.origin,
                self.model.interval.as_secs_f64(),
                self.model.clients.name,
                self.frustration_timeout.as_secs_f64(),
            );
        }
        self.describe_capture() + &proxy
    }

    fn describe_capture(&self) -> String {
        let listeners: Vec<String> = self.listeners.iter().map(|l| l.to_string()).collect();
        format!(
            "{}: listeners {}, interface {}, interval {:.3} s, profile {}{}, frustration timeout {:.1} s, ring {} × {} bytes ({} MiB), connection cap {}{}{}",
            self.origin,
            listeners.join(", "),
            self.interface.as_deref().unwrap_or("all"),
            self.model.interval.as_secs_f64(),
            self.model.clients.name,
            if self.learn {
                " (clients learned once seen)"
            } else {
                ""
            },
            self.frustration_timeout.as_secs_f64(),
            self.ring.block_count,
            self.ring.block_size,
            self.ring.bytes() >> 20,
            self.max_connections,
            match &self.classes {
                Some(c) => format!(", classes {:?} (at most {})", c.by, c.max),
                None => String::new(),
            },
            match &self.gate {
                Some(g) => format!(", gate log {}", g.log.display()),
                None => String::new(),
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_parses() {
        let text = r#"
listeners = ["127.0.0.1:80", ":8080"]
interface = "lo"
interval = "250ms"
profile = "mix-2026"
frustration_timeout = 21
network_loss = 0.01
max_connections = 5000
learn = true
metrics_listen = "127.0.0.1:9466"
log = "watch.log"
jsonl = "watch.jsonl"
[classes]
by = "source-prefix/24"
max = 8
[ring]
block_size = 65536
block_count = 4
[gate]
log = "/var/log/vantage/gate.jsonl"
"#;
        let config = WatchConfig::from_toml(text, "w.toml").unwrap();
        assert_eq!(config.ports(), vec![80, 8080]);
        assert_eq!(config.model.interval, Nanos::from_millis(250));
        assert_eq!(config.model.network_loss, NetworkLoss::Fixed(0.01));
        assert_eq!(config.ring.bytes(), 4 * 65536);
        assert_eq!(config.classes.unwrap().max, 8);
        assert_eq!(
            config.gate.as_ref().map(|g| g.log.clone()),
            Some(PathBuf::from("/var/log/vantage/gate.jsonl"))
        );
        assert!(config
            .describe()
            .contains("gate log /var/log/vantage/gate.jsonl"));
        assert!(config.learn);
        assert!(
            !WatchConfig::from_toml("listeners = [\":80\"]", "w.toml")
                .unwrap()
                .learn
        );
    }

    #[test]
    fn errors_name_the_line_and_key() {
        for (text, key) in [
            ("listeners = []", "listeners"),
            ("listeners = [\"10.0.0.1\"]", "listeners[0]"),
            ("listeners = [\":80\"]\ninterval = \"5s\"", "interval"),
            ("listeners = [\":80\"]\nprofile = \"bsd\"", "profile"),
            ("listeners = [\":80\"]\nnetwork_loss = 2.0", "network_loss"),
            (
                "listeners = [\":80\"]\nlearn_every = \"100ms\"",
                "learn_every",
            ),
            ("listeners = [\":80\"]\n[ring]\nblock_size = 5000", "ring"),
            (
                "listeners = [\":80\"]\n[classes]\nby = \"ports\"",
                "classes.by",
            ),
            (
                "listeners = [\":80\"]\nmetrics_listen = \"x\"",
                "metrics_listen",
            ),
            ("interval = \"250ms\"", "listeners"),
            ("listeners = [\":80\"]\n[gate]", "gate"),
            ("listeners = [\":80\"]\n[gate]\nlog = \"\"", "gate.log"),
            (
                "listeners = [\":80\"]\njsonl = \"w.jsonl\"\n[gate]\nlog = \"w.jsonl\"",
                "gate.log",
            ),
        ] {
            let error = WatchConfig::from_toml(text, "w.toml").unwrap_err();
            assert_eq!(error.key(), Some(key), "{error}");
            assert!(error.to_string().contains("w.toml"), "{error}");
        }
        let error =
            WatchConfig::from_toml("listeners = [\":80\"]\nport = 1", "w.toml").unwrap_err();
        assert!(error.to_string().contains("port"), "{error}");
        let error = WatchConfig::from_toml(
            "listeners = [\":80\"]\n[gate]\nlog = \"g\"\nfile = 1",
            "w.toml",
        )
        .unwrap_err();
        assert!(error.to_string().contains("file"), "{error}");
    }

    /// The gate's log alone gives no COMPLETED or SYN-to-END: a daemon fed
    /// only from it is refused, saying why, never run to export nothing.
    #[test]
    fn a_gate_without_a_capture_is_refused_saying_why() {
        let error = WatchConfig::from_toml("[gate]\nlog = \"gate.jsonl\"", "w.toml").unwrap_err();
        assert_eq!(error.key(), Some("listeners"), "{error}");
        let message = error.to_string();
        assert!(message.contains("COMPLETED"), "{message}");
        assert!(message.contains("SYN-to-END"), "{message}");
    }

    /// `[proxy]` alone runs without a capture; the capture's keys, and an
    /// input set that gives no estimate, are refused naming the key.
    #[test]
    fn a_proxy_stream_alone_needs_no_capture() {
        let config =
            WatchConfig::from_toml("[proxy]\nlog = \"proxy-certes.jsonl\"", "w.toml").unwrap();
        assert!(!config.captures());
        assert!(config.listeners.is_empty());
        assert_eq!(
            config.proxy,
            Some(ProxyInputConfig {
                log: "proxy-certes.jsonl".into()
            })
        );
        assert!(
            config.describe().contains("no capture"),
            "{}",
            config.describe()
        );
        let both = WatchConfig::from_toml(
            "listeners = [\":80\"]\n[proxy]\nlog = \"p.jsonl\"",
            "w.toml",
        )
        .unwrap();
        assert!(both.captures() && both.proxy.is_some());
        assert!(both.describe().contains("proxy stream p.jsonl"));
        // A gate in front of the proxy: its verdicts merge into the
        // proxy's rows, no capture needed.
        let gated = WatchConfig::from_toml(
            "[gate]\nlog = \"g.jsonl\"\n[proxy]\nlog = \"p.jsonl\"",
            "w.toml",
        )
        .unwrap();
        assert!(!gated.captures() && gated.gate.is_some() && gated.proxy.is_some());
        for (text, key, says) in [
            ("[proxy]", "proxy", "needs `log`"),
            ("[proxy]\nlog = \"\"", "proxy.log", "file name"),
            (
                "jsonl = \"w.jsonl\"\n[proxy]\nlog = \"w.jsonl\"",
                "proxy.log",
                "this daemon writes",
            ),
            (
                "log = \"w.log\"\n[proxy]\nlog = \"w.log\"",
                "proxy.log",
                "this daemon writes",
            ),
            (
                "listeners = [\":80\"]\n[gate]\nlog = \"g\"\n[proxy]\nlog = \"g\"",
                "proxy.log",
                "gate's log",
            ),
            (
                "learn = true\n[proxy]\nlog = \"p\"",
                "learn",
                "needs `listeners`",
            ),
            (
                "interface = \"lo\"\n[proxy]\nlog = \"p\"",
                "interface",
                "needs `listeners`",
            ),
            (
                "max_connections = 10\n[proxy]\nlog = \"p\"",
                "max_connections",
                "needs `listeners`",
            ),
            (
                "[classes]\nby = \"listener\"\n[proxy]\nlog = \"p\"",
                "classes",
                "needs `listeners`",
            ),
            (
                "[ring]\nblock_count = 4\n[proxy]\nlog = \"p\"",
                "ring",
                "needs `listeners`",
            ),
            (
                "listeners = []\n[proxy]\nlog = \"p\"",
                "listeners",
                "between 1 and",
            ),
            ("interval = \"250ms\"", "listeners", "[proxy]"),
        ] {
            let error = WatchConfig::from_toml(text, "w.toml").unwrap_err();
            assert_eq!(error.key(), Some(key), "{text}: {error}");
            assert!(error.to_string().contains(says), "{text}: {error}");
            assert!(error.to_string().contains("w.toml"), "{error}");
        }
        let error = WatchConfig::from_toml("[proxy]\nlog = \"p\"\nfile = 1", "w.toml").unwrap_err();
        assert!(error.to_string().contains("file"), "{error}");
    }

    #[test]
    fn durations_and_losses_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Nanos::from_millis(250)));
        assert_eq!(parse_duration("2min"), Ok(Nanos::from_secs(120)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3 fortnights").is_err());
        assert_eq!(parse_network_loss("0.03"), Ok(NetworkLoss::Fixed(0.03)));
        assert!(parse_network_loss("1.5").is_err());
    }
}
