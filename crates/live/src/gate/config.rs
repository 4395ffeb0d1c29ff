//! The gate's TOML configuration: parsed with serde (unknown keys are
//! errors), then validated into a [`GateConfig`] with errors that name the
//! file, the key and the allowed range.
//!
//! The `[filter]` table is [`FilterSpec`], the format the simulator's
//! scenarios read too; here `kind` is required, `population` names the one
//! client population (default `mix-2026`) and `refill_rate` may be
//! `"measure"` (r_t estimated from the kernel's counters,
//! [`vantage_core::admission::syn::CapacityEstimator`]). `population` was
//! named `clients`: the old name is read until vantage
//! [`vantage_core::config::OLD_NAMES_REFUSED_FROM`], with a warning in
//! [`GateConfig::warnings`] that the daemon writes to its log.
//!
//! ```toml
//! [gate]
//! queue = 0              # first NFQUEUE number
//! queues = 1             # >1: --queue-balance queue:queue+queues-1, one thread per queue
//! queue_maxlen = 4096
//! reject_mark = 0x5647   # mark + NF_REPEAT → the chain's REJECT rule
//! interval_ms = 1000     # counters/metrics/log interval
//! dry_run = false        # compute and count verdicts, accept everything
//! busy_poll_us = 0       # keep reading this long after a packet instead of sleeping (latency for a core)
//! cpu_fanout = false     # queues > 1: a SYN goes to the queue of the CPU it arrived on, its thread pinned there
//! shortcut = "auto"      # iptables: the kernel applies the filter's verdict while it is constant (BPF match); true: required, false: off
//! metrics_listen = "127.0.0.1:9464"   # optional; /metrics (port 0: the kernel picks, printed)
//! log = "gate.jsonl"     # optional; JSON Lines, one line per interval
//! backend = "auto"       # auto | nft | iptables (auto: nft when the kernel takes the rules)
//! [[listeners]]
//! address = "10.77.0.2"  # optional (any address when absent)
//! port = 80
//! [filter]
//! kind = "abacus"        # tbf | tbf-reject | abacus | greedy
//! bucket_size = 120      # W
//! refill_rate = 120      # r_t tokens/s, or "measure" (then initial_refill_rate)
//! interval_ms = 1000     # T0
//! window_s = 50          # S; omitted: S = max{T_i ≤ r/h}
//! greedy_window_s = 50   # S_G; omitted: T_N of the clients
//! delay_cost = 1         # h
//! reject_cost = 75       # r
//! arrival_smoothing = 0.3
//! population = "mix-2026"   # or { "linux-6.5" = 0.7, "macos" = 0.3 }
//! ```

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::daemon::config_file::read_config_file;
pub use crate::daemon::config_file::ConfigError;
use serde::{Deserialize, Serialize};
pub use vantage_core::admission::syn::Refill;
use vantage_core::admission::syn::{
    AbacusWindow, FilterConfigError, FilterKind, FilterParams, FilterSpec, SynFilter,
};
use vantage_core::config;
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;

/// Default `[gate]` values.
pub const DEFAULT_QUEUE_MAXLEN: u32 = 4096;
/// `0x5647`, "VG": any non-zero mark no other rule of the host uses.
pub const DEFAULT_REJECT_MARK: u32 = 0x5647;
pub const DEFAULT_INTERVAL_MS: u64 = 1000;
/// Default T0, h, r and weight of the newest period in λ: the `[filter]`
/// table's ([`FilterSpec`]).
pub use vantage_core::admission::syn::{
    DEFAULT_ARRIVAL_SMOOTHING, DEFAULT_DELAY_COST, DEFAULT_FILTER_INTERVAL, DEFAULT_REJECT_COST,
};
/// Default client population: the project's assumed mixture of today's
/// clients (`ClientMix::builtin("mix-2026")`).
pub const DEFAULT_POPULATION: &str = "mix-2026";
/// Most queues (threads) one gate runs.
pub const MAX_QUEUES: u16 = 64;
/// Most listeners one gate protects (one iptables rule each).
pub const MAX_LISTENERS: usize = 64;

/// Whether the kernel-side shortcut is used (`[gate] shortcut`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ShortcutMode {
    /// Used when the process may load BPF programs (`CAP_BPF`, and
    /// `CAP_SYS_ADMIN` to mount bpffs when nothing is mounted); otherwise
    /// the gate warns and queues every SYN.
    #[default]
    Auto,
    /// Required: the gate does not start without it.
    On,
    /// Every SYN is queued.
    Off,
}

impl ShortcutMode {
    pub fn name(self) -> &'static str {
        match self {
            ShortcutMode::Auto => "auto",
            ShortcutMode::On => "true",
            ShortcutMode::Off => "false",
        }
    }
}

/// `shortcut = true | false | "auto"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawShortcut {
    Flag(bool),
    Word(String),
}

/// Which rule backend installs the gate's rules (`[gate] backend`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RulesBackend {
    /// nftables when `nft` works here, iptables otherwise.
    #[default]
    Auto,
    Nft,
    Iptables,
}

impl RulesBackend {
    pub fn name(self) -> &'static str {
        match self {
            RulesBackend::Auto => "auto",
            RulesBackend::Nft => "nft",
            RulesBackend::Iptables => "iptables",
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    gate: RawGate,
    #[serde(default)]
    listeners: Vec<RawListener>,
    filter: Option<FilterSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGate {
    queue: Option<f64>,
    queues: Option<f64>,
    queue_maxlen: Option<f64>,
    reject_mark: Option<f64>,
    interval_ms: Option<f64>,
    dry_run: Option<bool>,
    busy_poll_us: Option<f64>,
    cpu_fanout: Option<bool>,
    shortcut: Option<RawShortcut>,
    metrics_listen: Option<String>,
    log: Option<PathBuf>,
    backend: Option<RulesBackend>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawListener {
    address: Option<String>,
    port: Option<f64>,
}

/// One protected listener: SYNs to `port` (and `address`, when given).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Listener {
    /// Destination address, IPv4 or IPv6; `None` matches any of both.
    pub address: Option<IpAddr>,
    pub port: u16,
}

impl Listener {
    /// Whether a SYN to `destination:port` is for this listener.
    pub fn matches(&self, destination: IpAddr, port: u16) -> bool {
        self.port == port && (self.address.is_none() || self.address == Some(destination))
    }
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.address {
            Some(address) => write!(f, "{}", SocketAddr::new(address, self.port)),
            None => write!(f, "*:{}", self.port),
        }
    }
}

/// The validated `[filter]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterConfig {
    pub kind: FilterKind,
    /// Every parameter; `refill_rate` is the initial one with
    /// [`Refill::Measure`].
    pub params: FilterParams,
    pub refill: Refill,
    /// The client population the filter assumes.
    pub population: ClientMix,
}

impl FilterConfig {
    /// S, the Abacus window in effect (fixed, or max{T_i ≤ r/h}).
    pub fn window(&self) -> Nanos {
        self.params.abacus_window(&self.population)
    }

    /// S_G in effect: raised to T_N of the clients when shorter (Section
    /// 4.3), as [`FilterParams::build`] does.
    pub fn greedy_window(&self) -> Nanos {
        self.params.greedy_window_for(&self.population)
    }

    /// Builds the filter (the same object the simulator runs).
    pub fn build(&self) -> Result<Box<dyn SynFilter + Send>, FilterConfigError> {
        self.params.build(self.kind, &self.population)
    }
}

/// The validated configuration of one gate.
#[derive(Clone, Debug, PartialEq)]
pub struct GateConfig {
    /// The file it came from (for messages).
    pub origin: String,
    /// First NFQUEUE number.
    pub queue: u16,
    /// Number of queues (threads), `queue ..= queue + queues − 1`.
    pub queues: u16,
    pub queue_maxlen: u32,
    /// Mark that sends a SYN to the REJECT rule (never zero).
    pub reject_mark: u32,
    /// Counters, metrics and log interval.
    pub interval: Nanos,
    pub dry_run: bool,
    /// How long a verdict thread keeps reading without sleeping after its
    /// last packet (zero: it sleeps in `poll`).
    pub busy_poll: Duration,
    /// `--queue-cpu-fanout`: the kernel picks the queue `queue + CPU mod
    /// queues` from the CPU that handles the SYN, and verdict thread `i`
    /// runs only on the CPUs whose packets go to queue `queue + i` — no
    /// wake-up of another core per SYN.
    pub cpu_fanout: bool,
    /// While the filter's verdict is constant (`SynFilter::constant_until`),
    /// an in-kernel BPF match applies it without queueing (iptables backend,
    /// not in a dry run; `shortcut.rs`).
    pub shortcut: ShortcutMode,
    pub metrics_listen: Option<SocketAddr>,
    pub log: Option<PathBuf>,
    /// The rule backend (`auto`: nft when it accepts the rules).
    pub backend: RulesBackend,
    pub listeners: Vec<Listener>,
    pub filter: FilterConfig,
    /// Old key names the file uses, one line each (file, line, old and new
    /// key): the daemon writes them to its log, `gate check` to stderr.
    pub warnings: Vec<String>,
}

type Checker<'a> = config::Checker<'a, ConfigError>;

impl GateConfig {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<GateConfig, ConfigError> {
        let (origin, text) = read_config_file(path)?;
        GateConfig::from_toml(&text, &origin)
    }

    /// Parses and validates a configuration; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<GateConfig, ConfigError> {
        let c = Checker::new(origin, text);
        let raw: RawFile = c.deserialize()?;
        let g = &raw.gate;

        let queue = match g.queue {
            Some(v) => c.whole("gate.queue", v, 0.0, 65535.0)? as u16,
            None => 0,
        };
        let queues = match g.queues {
            Some(v) => c.whole("gate.queues", v, 1.0, f64::from(MAX_QUEUES))? as u16,
            None => 1,
        };
        if u32::from(queue) + u32::from(queues) - 1 > 65535 {
            return Err(c.fail(
                "gate.queues",
                format!(
                    "takes queues {queue}..{}, past the last queue number 65535",
                    u32::from(queue) + u32::from(queues) - 1
                ),
            ));
        }
        let queue_maxlen = match g.queue_maxlen {
            Some(v) => c.whole("gate.queue_maxlen", v, 1.0, f64::from(1u32 << 20))? as u32,
            None => DEFAULT_QUEUE_MAXLEN,
        };
        let reject_mark = match g.reject_mark {
            Some(v) => c.whole("gate.reject_mark", v, 1.0, f64::from(u32::MAX))? as u32,
            None => DEFAULT_REJECT_MARK,
        };
        let interval = Nanos::from_millis(match g.interval_ms {
            Some(v) => c.whole("gate.interval_ms", v, 10.0, 3_600_000.0)?,
            None => DEFAULT_INTERVAL_MS,
        });
        let busy_poll = Duration::from_micros(match g.busy_poll_us {
            Some(v) => c.whole("gate.busy_poll_us", v, 0.0, 1_000_000.0)?,
            None => 0,
        });
        let cpu_fanout = g.cpu_fanout.unwrap_or(false);
        if cpu_fanout && queues < 2 {
            return Err(c.fail(
                "gate.cpu_fanout",
                "needs gate.queues of 2 or more (iptables takes --queue-cpu-fanout only with --queue-balance); one queue per CPU is the usual choice".into(),
            ));
        }
        let shortcut = match &g.shortcut {
            None => ShortcutMode::Auto,
            Some(RawShortcut::Flag(true)) => ShortcutMode::On,
            Some(RawShortcut::Flag(false)) => ShortcutMode::Off,
            Some(RawShortcut::Word(word)) if word == "auto" => ShortcutMode::Auto,
            Some(RawShortcut::Word(word)) => {
                return Err(c.fail(
                    "gate.shortcut",
                    format!("must be true, false or \"auto\", got \"{word}\""),
                ))
            }
        };
        let metrics_listen = match &g.metrics_listen {
            None => None,
            Some(text) => Some(text.parse::<SocketAddr>().map_err(|_| {
                c.fail(
                    "gate.metrics_listen",
                    format!("must be ADDRESS:PORT such as \"127.0.0.1:9464\", got \"{text}\""),
                )
            })?),
        };
        let log = match &g.log {
            Some(path) if path.as_os_str().is_empty() => {
                return Err(c.fail("gate.log", "must be a file name, got \"\"".into()))
            }
            other => other.clone(),
        };

        let listeners = listeners(&c, &raw.listeners)?;
        let mut warnings = Vec::new();
        let filter = filter(&c, raw.filter.as_ref(), &mut warnings)?;

        Ok(GateConfig {
            origin: origin.to_string(),
            queue,
            queues,
            queue_maxlen,
            reject_mark,
            interval,
            dry_run: g.dry_run.unwrap_or(false),
            busy_poll,
            cpu_fanout,
            shortcut,
            metrics_listen,
            log,
            backend: g.backend.unwrap_or_default(),
            listeners,
            filter,
            warnings,
        })
    }

    /// The queue numbers, `queue ..= queue + queues − 1`.
    pub fn queue_numbers(&self) -> impl Iterator<Item = u16> {
        let first = self.queue;
        (0..self.queues).map(move |i| first + i)
    }

    /// The effective configuration as text: every value, defaults and
    /// derived ones (S from the costs, S_G raised to T_N) included.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let f = &self.filter;
        let p = &f.params;
        let last = self.queue + self.queues - 1;
        let _ = writeln!(out, "configuration     {}", self.origin);
        if self.queues == 1 {
            let _ = writeln!(out, "queue             {}", self.queue);
        } else if self.cpu_fanout {
            let _ = writeln!(
                out,
                "queues            {}..{} (--queue-balance --queue-cpu-fanout: queue {} + CPU mod {}; thread i pinned to those CPUs)",
                self.queue, last, self.queue, self.queues
            );
        } else {
            let _ = writeln!(
                out,
                "queues            {}..{} (--queue-balance, one thread each)",
                self.queue, last
            );
        }
        let _ = writeln!(out, "queue_maxlen      {}", self.queue_maxlen);
        let _ = writeln!(out, "reject_mark       {:#x}", self.reject_mark);
        let _ = writeln!(out, "interval          {} ms", self.interval.as_millis());
        let _ = writeln!(out, "dry_run           {}", self.dry_run);
        let _ = writeln!(out, "busy_poll         {} µs", self.busy_poll.as_micros());
        let _ = writeln!(out, "shortcut          {}", self.shortcut.name());
        let _ = writeln!(
            out,
            "metrics_listen    {}",
            self.metrics_listen
                .map_or_else(|| "(none)".to_string(), |a| format!("http://{a}/metrics"))
        );
        let _ = writeln!(
            out,
            "log               {}",
            self.log
                .as_ref()
                .map_or_else(|| "(none)".to_string(), |p| p.display().to_string())
        );
        let _ = writeln!(out, "backend           {}", self.backend.name());
        let names: Vec<String> = self.listeners.iter().map(|l| l.to_string()).collect();
        let _ = writeln!(out, "listeners         {}", names.join(", "));
        let _ = writeln!(out, "filter            {}", f.kind.name());
        let _ = writeln!(out, "  bucket_size W   {} tokens", p.bucket_size);
        match f.refill {
            Refill::Fixed => {
                let _ = writeln!(out, "  refill_rate r_t {} tokens/s", p.refill_rate);
            }
            Refill::Measure => {
                let _ = writeln!(
                    out,
                    "  refill_rate r_t measured (accept rate of saturated intervals), from {} tokens/s",
                    p.refill_rate
                );
            }
        }
        let _ = writeln!(out, "  interval T0     {} ms", p.interval.as_millis());
        let window = match p.window {
            AbacusWindow::Fixed(_) => "fixed",
            AbacusWindow::CostOptimal => "max{T_i ≤ r/h}",
        };
        let _ = writeln!(
            out,
            "  window S        {} s ({window}){}",
            f.window().as_secs_f64(),
            if f.kind == FilterKind::Abacus {
                ""
            } else {
                "; used by abacus only"
            }
        );
        let _ = writeln!(
            out,
            "  greedy window   {} s (at least T_N = {} s){}",
            f.greedy_window().as_secs_f64(),
            f.population.last_retransmission().as_secs_f64(),
            if f.kind == FilterKind::Greedy {
                ""
            } else {
                "; used by greedy only"
            }
        );
        let _ = writeln!(out, "  delay_cost h    {}", p.delay_cost);
        let _ = writeln!(
            out,
            "  reject_cost r   {} (r/h = {} s)",
            p.reject_cost,
            ratio(p)
        );
        let _ = writeln!(
            out,
            "  smoothing       {} (arrival_smoothing: weight of the newest period in λ)",
            p.arrival_smoothing
        );
        let mix: Vec<String> = f
            .population
            .entries()
            .iter()
            .map(|(profile, weight)| format!("{} {:.0} %", profile.name, 100.0 * weight))
            .collect();
        let _ = writeln!(
            out,
            "  population      {} ({})",
            f.population.name,
            mix.join(", ")
        );
        out
    }
}

/// The `[[listeners]]`: at least one, at most [`MAX_LISTENERS`], no repeats.
fn listeners(c: &Checker, raw: &[RawListener]) -> Result<Vec<Listener>, ConfigError> {
    if raw.is_empty() {
        return Err(c.fail(
            "listeners",
            "is missing: give at least one [[listeners]] with a port".into(),
        ));
    }
    if raw.len() > MAX_LISTENERS {
        return Err(c.fail(
            "listeners",
            format!("has {} entries; at most {MAX_LISTENERS}", raw.len()),
        ));
    }
    let mut listeners: Vec<Listener> = Vec::new();
    for (i, l) in raw.iter().enumerate() {
        let port = match l.port {
            Some(v) => c.whole(&format!("listeners[{i}].port"), v, 1.0, 65535.0)? as u16,
            None => return Err(c.fail(&format!("listeners[{i}].port"), "is missing".into())),
        };
        let address = match &l.address {
            None => None,
            Some(text) => Some(text.parse::<IpAddr>().map_err(|_| {
                c.fail(
                    &format!("listeners[{i}].address"),
                    format!(
                        "must be an IPv4 or IPv6 address such as \"10.77.0.2\" or \"fd00::2\", got \"{text}\""
                    ),
                )
            })?),
        };
        let listener = Listener { address, port };
        if listeners.contains(&listener) {
            return Err(c.fail(
                &format!("listeners[{i}]"),
                format!("repeats listener {listener}"),
            ));
        }
        listeners.push(listener);
    }
    Ok(listeners)
}

/// The `[filter]` table ([`FilterSpec`]) with the gate's rules: `kind`
/// required, W ≥ 1, `population` defaulting to [`DEFAULT_POPULATION`];
/// old key names read are added to `warnings`.
fn filter(
    c: &Checker,
    raw: Option<&FilterSpec>,
    warnings: &mut Vec<String>,
) -> Result<FilterConfig, ConfigError> {
    let Some(f) = raw else {
        return Err(c.fail(
            "filter",
            "is missing: give a [filter] section with its kind".into(),
        ));
    };
    let valid = f.validate(c, "filter")?;
    warnings.extend(valid.warnings);
    // A gate with W = 0 would admit nothing.
    if valid.params.bucket_size == 0 {
        return Err(c.fail(
            "filter.bucket_size",
            "must be a whole number between 1 and 1000000000, got 0".into(),
        ));
    }
    let Some(kind) = valid.kind else {
        return Err(c.fail(
            "filter.kind",
            "is missing (tbf, tbf-reject, abacus, greedy)".into(),
        ));
    };
    let population = match valid.population {
        Some(population) => population,
        None => ClientMix::builtin(DEFAULT_POPULATION)
            .map_err(|e| c.fail("filter.population", e.to_string()))?,
    };
    let filter = FilterConfig {
        kind,
        params: valid.params,
        refill: valid.refill,
        population,
    };
    filter
        .build()
        .map_err(|e| c.fail("filter", e.to_string()))?;
    Ok(filter)
}

fn ratio(p: &FilterParams) -> String {
    if p.delay_cost > 0.0 {
        format!("{}", p.reject_cost / p.delay_cost)
    } else {
        "∞".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
[gate]
queue = 0
queues = 1
queue_maxlen = 4096
reject_mark = 0x5647
interval_ms = 1000
dry_run = false
metrics_listen = "127.0.0.1:9464"
log = "gate.jsonl"
[[listeners]]
address = "10.77.0.2"
port = 80
[filter]
kind = "abacus"
bucket_size = 120
refill_rate = 120
interval_ms = 1000
window_s = 50
greedy_window_s = 50
delay_cost = 1
reject_cost = 75
arrival_smoothing = 0.5
population = "linux-6.5"
"#;

    fn parse(text: &str) -> Result<GateConfig, ConfigError> {
        GateConfig::from_toml(text, "gate.toml")
    }

    fn error_of(text: &str) -> String {
        parse(text).expect_err("must be rejected").to_string()
    }

    #[test]
    fn the_documented_example_parses() {
        let c = parse(EXAMPLE).unwrap();
        assert_eq!((c.queue, c.queues, c.queue_maxlen), (0, 1, 4096));
        assert_eq!(c.reject_mark, 0x5647);
        assert_eq!(c.interval, Nanos::from_secs(1));
        assert!(!c.dry_run);
        assert_eq!(c.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(c.log, Some(PathBuf::from("gate.jsonl")));
        assert_eq!(
            c.listeners,
            vec![Listener {
                address: Some(IpAddr::from([10, 77, 0, 2])),
                port: 80
            }]
        );
        let f = &c.filter;
        assert_eq!(f.kind, FilterKind::Abacus);
        assert_eq!(f.refill, Refill::Fixed);
        assert_eq!(f.params.bucket_size, 120);
        assert_eq!(f.params.refill_rate, 120.0);
        assert_eq!(f.params.arrival_smoothing, 0.5);
        assert_eq!(f.window(), Nanos::from_secs(50));
        assert_eq!(f.population.name, "linux-6.5");
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert_eq!(f.build().unwrap().snapshot().bucket_size, 120);
        let text = c.describe();
        assert!(text.contains("window S        50 s (fixed)"), "{text}");
    }

    #[test]
    fn defaults_and_cost_optimal_window() {
        let c = parse(
            "[[listeners]]\nport = 8080\n[filter]\nkind = \"abacus\"\nbucket_size = 10\nrefill_rate = 5\npopulation = \"windows-9x-nt\"\n",
        )
        .unwrap();
        assert_eq!(c.queue, 0);
        assert_eq!(c.queues, 1);
        assert_eq!(c.reject_mark, DEFAULT_REJECT_MARK);
        assert_eq!(c.metrics_listen, None);
        assert_eq!(c.listeners[0].address, None);
        assert_eq!(c.shortcut, ShortcutMode::Auto);
        for (text, mode) in [
            ("true", ShortcutMode::On),
            ("false", ShortcutMode::Off),
            ("\"auto\"", ShortcutMode::Auto),
        ] {
            let c = parse(&format!(
                "[gate]\nshortcut = {text}\n[[listeners]]\nport = 80\n[filter]\nkind = \"tbf\"\nbucket_size = 1\nrefill_rate = 1\n"
            ))
            .unwrap();
            assert_eq!(c.shortcut, mode, "{text}");
        }
        let p = &c.filter.params;
        assert_eq!((p.delay_cost, p.reject_cost), (1.0, 75.0));
        assert_eq!(p.arrival_smoothing, DEFAULT_ARRIVAL_SMOOTHING);
        assert_eq!(p.interval, Nanos::from_secs(1));
        // Windows 9x/NT retransmits at 3, 9, 21 s; r/h = 75 s: S = 21 s.
        assert_eq!(c.filter.window(), Nanos::from_secs(21));
        // S_G defaults to T_N = 21 s.
        assert_eq!(c.filter.greedy_window(), Nanos::from_secs(21));
        assert!(c
            .describe()
            .contains("window S        21 s (max{T_i ≤ r/h})"));
        // reject_cost 5 s: the largest T_i ≤ 5 s is 3 s.
        let c = parse(
            "[[listeners]]\nport = 8080\n[filter]\nkind = \"abacus\"\nbucket_size = 10\nrefill_rate = 5\nreject_cost = 5\npopulation = \"windows-9x-nt\"\n",
        )
        .unwrap();
        assert_eq!(c.filter.window(), Nanos::from_secs(3));
    }

    #[test]
    fn measure_needs_an_initial_rate() {
        let base = "[[listeners]]\nport = 80\n[filter]\nkind = \"tbf\"\nbucket_size = 10\n";
        let c = parse(&format!(
            "{base}refill_rate = \"measure\"\ninitial_refill_rate = 30\n"
        ))
        .unwrap();
        assert_eq!(c.filter.refill, Refill::Measure);
        assert_eq!(c.filter.params.refill_rate, 30.0);
        let e = parse(&format!("{base}refill_rate = \"measure\"\n")).unwrap_err();
        assert_eq!(e.key(), Some("filter.initial_refill_rate"));
        let e = parse(&format!(
            "{base}refill_rate = 3\ninitial_refill_rate = 30\n"
        ))
        .unwrap_err();
        assert_eq!(e.key(), Some("filter.initial_refill_rate"));
        let e = parse(&format!("{base}refill_rate = \"fast\"\n")).unwrap_err();
        assert_eq!(e.key(), Some("filter.refill_rate"));
        assert!(e.to_string().contains("\"measure\""), "{e}");
    }

    #[test]
    fn a_table_of_weights_is_a_mixture() {
        let c = parse(&EXAMPLE.replace(
            "population = \"linux-6.5\"",
            "population = { \"linux-6.5\" = 0.7, \"macos\" = 0.3 }",
        ))
        .unwrap();
        let entries = c.filter.population.entries();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].0.name, "linux-6.5");
        assert!((entries[0].1 - 0.7).abs() < 1e-12);
        let e = error_of(&EXAMPLE.replace(
            "population = \"linux-6.5\"",
            "population = { \"os2-warp\" = 1 }",
        ));
        assert!(
            e.contains("`filter.population.os2-warp`") && e.contains("unknown client profile"),
            "{e}"
        );
        let e = error_of(&EXAMPLE.replace(
            "population = \"linux-6.5\"",
            "population = { \"macos\" = -1 }",
        ));
        assert!(
            e.contains("`filter.population`") && e.contains("weight"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_file_key_and_range() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "queue = 0",
                "queue = 70000",
                "`gate.queue` must be a whole number between 0 and 65535",
            ),
            (
                "queues = 1",
                "queues = 0",
                "`gate.queues` must be a whole number between 1 and 64",
            ),
            (
                "queue = 0\nqueues = 1",
                "queue = 65535\nqueues = 2",
                "`gate.queues` takes queues 65535..65536",
            ),
            (
                "queue_maxlen = 4096",
                "queue_maxlen = 0",
                "`gate.queue_maxlen`",
            ),
            (
                "reject_mark = 0x5647",
                "reject_mark = 0",
                "`gate.reject_mark` must be a whole number between 1 and 4294967295",
            ),
            (
                "interval_ms = 1000\ndry",
                "interval_ms = 1.5\ndry",
                "`gate.interval_ms`",
            ),
            (
                "dry_run = false",
                "dry_run = false\nbusy_poll_us = 2000000",
                "`gate.busy_poll_us` must be a whole number between 0 and 1000000",
            ),
            (
                "dry_run = false",
                "dry_run = false\ncpu_fanout = true",
                "`gate.cpu_fanout` needs gate.queues of 2 or more",
            ),
            (
                "dry_run = false",
                "dry_run = false\nshortcut = \"yes\"",
                "`gate.shortcut` must be true, false or \"auto\", got \"yes\"",
            ),
            (
                "\"127.0.0.1:9464\"",
                "\"localhost\"",
                "`gate.metrics_listen` must be ADDRESS:PORT",
            ),
            (
                "port = 80",
                "port = 0",
                "`listeners[0].port` must be a whole number between 1 and 65535",
            ),
            (
                "\"10.77.0.2\"",
                "\"10.77.0\"",
                "`listeners[0].address` must be an IPv4 or IPv6 address",
            ),
            (
                "kind = \"abacus\"",
                "kind = \"red\"",
                "`filter.kind` must be tbf, tbf-reject, abacus or greedy",
            ),
            (
                "bucket_size = 120",
                "bucket_size = 0",
                "`filter.bucket_size` must be a whole number between 1",
            ),
            (
                "refill_rate = 120",
                "refill_rate = -3",
                "`filter.refill_rate` must be between 0 and 1000000000",
            ),
            (
                "window_s = 50",
                "window_s = \"forever\"",
                "`filter.window_s` must be seconds",
            ),
            (
                "reject_cost = 75",
                "reject_cost = -1",
                "`filter.reject_cost`",
            ),
            (
                "arrival_smoothing = 0.5",
                "arrival_smoothing = 0",
                "`filter.arrival_smoothing` must be in (0, 1]",
            ),
            (
                "population = \"linux-6.5\"",
                "population = \"beos\"",
                "`filter.population` unknown client profile `beos`",
            ),
            (
                "population = \"linux-6.5\"",
                "population = 3",
                "`filter.population` must be a profile",
            ),
        ];
        for (from, to, expected) in cases {
            assert!(EXAMPLE.contains(from), "{from}");
            let text = EXAMPLE.replacen(from, to, 1);
            let e = error_of(&text);
            // The named key is on the last line of `to` that sets a value.
            let start = text.find(to).unwrap_or(0);
            let setting = to
                .lines()
                .collect::<Vec<_>>()
                .iter()
                .rposition(|l| l.contains(" = "))
                .unwrap_or(0);
            let line = text[..start].matches('\n').count() + 1 + setting;
            assert!(e.starts_with(&format!("gate.toml:{line}: ")), "{e}");
            assert!(e.contains(expected), "{to}: {e}");
        }
    }

    #[test]
    fn unknown_keys_missing_sections_and_duplicates_are_errors() {
        let e = error_of(&EXAMPLE.replace("dry_run = false", "dry_run = false\nverbose = true"));
        assert!(
            e.contains("gate.toml") && e.contains("unknown field `verbose`"),
            "{e}"
        );
        let e = error_of(&EXAMPLE.replace("kind = \"abacus\"", "kind = \"abacus\"\nbucket = 3"));
        assert!(e.contains("unknown field `bucket`"), "{e}");
        let e = error_of("[gate]\nqueue = 1\n[[listeners]]\nport = 80\n");
        assert!(e.contains("`filter` is missing"), "{e}");
        let e = error_of("[filter]\nkind = \"tbf\"\nbucket_size = 1\nrefill_rate = 1\n");
        assert!(e.contains("`listeners` is missing"), "{e}");
        let e = error_of(&EXAMPLE.replace(
            "[filter]",
            "[[listeners]]\naddress = \"10.77.0.2\"\nport = 80\n[filter]",
        ));
        assert!(
            e.contains("`listeners[1]` repeats listener 10.77.0.2:80"),
            "{e}"
        );
        let e = error_of("this is not toml");
        assert!(e.starts_with("gate.toml:1: "), "{e}");
        assert!(e.ends_with("  | this is not toml"), "{e}");
    }

    #[test]
    fn the_old_name_filter_clients_loads_with_a_warning() {
        use vantage_core::config::OLD_NAMES_REFUSED_FROM;
        let old = EXAMPLE.replace("population = ", "clients = ");
        let c = parse(&old).unwrap();
        assert_eq!(c.filter.population.name, "linux-6.5");
        let line = old.lines().position(|l| l.starts_with("clients")).unwrap() + 1;
        assert_eq!(
            c.warnings,
            [format!("gate.toml:{line}: `filter.clients` is the old name of `filter.population`; it is read until vantage {OLD_NAMES_REFUSED_FROM}, rename it")]
        );
        let both = EXAMPLE.replace(
            "population = \"linux-6.5\"",
            "population = \"linux-6.5\"\nclients = \"macos\"",
        );
        let e = error_of(&both);
        assert!(
            e.contains("`filter.clients` and `filter.population` are the same setting"),
            "{e}"
        );
        let e = error_of(&EXAMPLE.replace("population = ", "populations = "));
        assert!(e.contains("unknown field `populations`"), "{e}");
    }

    #[test]
    fn listener_matching() {
        let any = Listener {
            address: None,
            port: 80,
        };
        let one = Listener {
            address: Some(IpAddr::from([10, 0, 0, 1])),
            port: 80,
        };
        let six = Listener {
            address: Some("fd00::2".parse().unwrap()),
            port: 80,
        };
        assert!(any.matches(IpAddr::from([1, 2, 3, 4]), 80));
        assert!(any.matches("::1".parse().unwrap(), 80));
        assert!(!any.matches(IpAddr::from([1, 2, 3, 4]), 81));
        assert!(one.matches(IpAddr::from([10, 0, 0, 1]), 80));
        assert!(!one.matches(IpAddr::from([10, 0, 0, 2]), 80));
        assert!(six.matches("fd00::2".parse().unwrap(), 80));
        assert!(!six.matches("fd00::3".parse().unwrap(), 80));
        assert_eq!(six.to_string(), "[fd00::2]:80");
    }

    #[test]
    fn queue_numbers_span_the_balance_range() {
        let c = parse(&EXAMPLE.replace("queue = 0\nqueues = 1", "queue = 7\nqueues = 3")).unwrap();
        assert_eq!(c.queue_numbers().collect::<Vec<_>>(), vec![7, 8, 9]);
        assert!(c.describe().contains("queues            7..9"));
    }
}
