//! The testbed spec: one TOML file that says what `vantage testbed run`
//! builds and runs. See `docs/testbed.md` for every key; examples are in
//! `scenarios/testbed/`.
//!
//! ```toml
//! name = "nginx-wan"
//! clients = 4                  # client namespaces
//! client_profile = "linux-6.5" # SYN schedule (core::tcp profile a Linux client can produce)
//! seed = 1
//!
//! [wan.upstream]               # client → server, every client link
//! delay_ms = 25
//! [wan.downstream]             # server → client
//! delay_ms = 25
//!
//! [server]
//! kind = "nginx"               # or "test"
//! backlog = 511
//!
//! [load]
//! requests_per_connection = 1
//! path = "/file-10k"
//! [load.arrivals]
//! duration_s = 60
//! pattern = { kind = "constant", rate = 1000 }
//!
//! [gate]                       # optional: SYN admission in front of the server
//! kind = "iptables-limit"      # none (default) | iptables-limit | vantage
//! rate_per_s = 120
//! burst = 120
//! action = "drop"              # or "reject" (TCP reset)
//! ```
//!
//! Unknown keys are errors; every error names the file, the key and its
//! line ([`vantage_core::config::Checker`]).

use std::net::{Ipv4Addr, SocketAddr};

use serde::{Deserialize, Serialize};
use vantage_core::config::{Checker, ConfigError};
use vantage_core::tcp::SynProfile;

use crate::load::LoadConfig;
use crate::profiles::{self, KernelSynSettings};
use crate::server::nginx::NginxConfig;
use crate::server::test_server::TestServerConfig;
use crate::syn_admission::SynAdmissionSpec;
use crate::topology::{self, MAX_CLIENTS, SERVER_ADDR};
use crate::wan::{ClientPrefix, LinkConfig, LinkRule, WanConfig};

/// TCP port the server listens on.
pub const SERVER_PORT: u16 = 80;
/// Longest run a spec may ask for: arrivals plus the frustration timeout.
pub const MAX_RUN_SECONDS: f64 = 3600.0;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedSpec {
    /// Name of the run (letters, digits, `-`, `_`); names the result directory.
    pub name: String,
    /// Number of client namespaces; arrivals are dealt to them in turn.
    #[serde(default = "one")]
    pub clients: usize,
    /// The clients' SYN retransmission profile (`vantage profiles`).
    #[serde(default = "default_profile")]
    pub client_profile: String,
    /// Seed of every random choice (arrivals, WAN fates, service times).
    #[serde(default = "one_u64")]
    pub seed: u64,
    #[serde(default)]
    pub wan: WanSpec,
    pub server: ServerSpec,
    pub load: LoadConfig,
    #[serde(default)]
    pub capture: CaptureSpec,
    #[serde(default)]
    pub counters: CounterSpec,
    /// SYN admission in front of the server (`crate::gate`); default none.
    #[serde(default)]
    pub gate: SynAdmissionSpec,
    /// The port the server listens on when a front stands before it:
    /// clients, the gate and the capture stay on [`SERVER_PORT`], where the
    /// caller's [`crate::run::BesideServer`] must start the front (a proxy)
    /// that forwards to `SERVER_ADDR:server_port`. Default none: the server
    /// itself on [`SERVER_PORT`].
    #[serde(default)]
    pub server_port: Option<u16>,
}

fn one() -> usize {
    1
}
fn one_u64() -> u64 {
    1
}
fn default_profile() -> String {
    "linux-6.5".into()
}

/// `[wan]`: the emulated links between each client and the router.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WanSpec {
    /// Client → server, every client unless `per_client` says otherwise.
    #[serde(default)]
    pub upstream: LinkConfig,
    /// Server → client.
    #[serde(default)]
    pub downstream: LinkConfig,
    /// Links of particular clients.
    #[serde(default)]
    pub per_client: Vec<ClientLink>,
    /// Kernel queue length (packets held at once); default 65536.
    #[serde(default)]
    pub queue_maxlen: Option<u32>,
}

/// `[[wan.per_client]]`: one client's own links.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientLink {
    /// Client index, 0-based.
    pub client: usize,
    #[serde(default)]
    pub upstream: LinkConfig,
    #[serde(default)]
    pub downstream: LinkConfig,
}

/// `[server]`: which server runs in the server namespace.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ServerSpec {
    /// nginx from the distribution.
    Nginx(NginxConfig),
    /// Vantage's test server, whose behaviour is exactly known.
    Test(TestServerConfig),
}

/// `[capture]`: packet captures.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureSpec {
    /// Capture the server's interface.
    pub server: bool,
    /// Also capture every client's interface (dual-vantage traces).
    pub clients: bool,
    /// Bytes kept of each packet (headers: 128).
    pub snap_len: u32,
}

impl Default for CaptureSpec {
    fn default() -> Self {
        CaptureSpec {
            server: true,
            clients: false,
            snap_len: 128,
        }
    }
}

/// `[counters]`: server kernel counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CounterSpec {
    /// Sampling interval, ms.
    pub interval_ms: u64,
}

impl Default for CounterSpec {
    fn default() -> Self {
        CounterSpec { interval_ms: 1000 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{file}{}: {message}", at_line(*line))]
    Parse {
        file: String,
        line: Option<usize>,
        message: String,
    },
    #[error("{file}{}: {message}", at_line(*line))]
    Invalid {
        file: String,
        line: Option<usize>,
        message: String,
    },
}

fn at_line(line: Option<usize>) -> String {
    line.map_or_else(String::new, |line| format!(":{line}"))
}

/// The key path a validation message starts with (`load.arrivals.rate`,
/// `wan.per_client[0].client`).
fn leading_key(message: &str) -> &str {
    let end = message
        .find(|c: char| !(c.is_ascii_alphanumeric() || "_.[]-".contains(c)))
        .unwrap_or(message.len());
    &message[..end]
}

impl TestbedSpec {
    /// Parses and validates a spec; `file` names the source in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<TestbedSpec, SpecError> {
        let c: Checker = Checker::new(file, text);
        let spec: TestbedSpec = c.deserialize().map_err(|e| match e {
            ConfigError::Syntax {
                line,
                message,
                excerpt,
                ..
            } => SpecError::Parse {
                file: file.to_string(),
                line,
                message: match excerpt {
                    Some(excerpt) => format!("{message}\n  | {excerpt}"),
                    None => message,
                },
            },
            ConfigError::Invalid { line, problem, .. } => SpecError::Parse {
                file: file.to_string(),
                line,
                message: problem,
            },
        })?;
        spec.validate().map_err(|message| SpecError::Invalid {
            file: file.to_string(),
            line: c.line_of_key(leading_key(&message)),
            message,
        })?;
        Ok(spec)
    }

    /// Where the clients connect (the server, or the front before it).
    pub fn server_addr(&self) -> SocketAddr {
        SocketAddr::from((SERVER_ADDR, SERVER_PORT))
    }

    /// Where the server itself listens: `server_port`, else
    /// [`SERVER_PORT`].
    pub fn backend_addr(&self) -> SocketAddr {
        SocketAddr::from((SERVER_ADDR, self.server_port.unwrap_or(SERVER_PORT)))
    }

    /// The client profile and the sysctls that produce it.
    pub fn kernel_settings(&self) -> Result<(SynProfile, KernelSynSettings), String> {
        let profile = SynProfile::builtin(&self.client_profile)
            .map_err(|e| format!("client_profile: {e}"))?;
        let settings =
            profiles::kernel_settings(&profile).map_err(|e| format!("client_profile: {e}"))?;
        Ok((profile, settings))
    }

    /// Checks every section; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_ok {
            return Err(format!(
                "name = {:?}: must be 1..=64 letters, digits, '-' or '_'",
                self.name
            ));
        }
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return Err(format!(
                "clients = {} is out of range (allowed 1..={MAX_CLIENTS})",
                self.clients
            ));
        }
        self.kernel_settings()?;
        if let Some(port) = self.server_port {
            if port == 0 || port == SERVER_PORT {
                return Err(format!(
                    "server_port = {port}: must be a port other than 0 and {SERVER_PORT} (where the front listens)"
                ));
            }
        }
        for (label, link) in [
            ("wan.upstream", &self.wan.upstream),
            ("wan.downstream", &self.wan.downstream),
        ] {
            link.validate().map_err(|e| format!("{label}.{e}"))?;
        }
        for (i, per) in self.wan.per_client.iter().enumerate() {
            if per.client >= self.clients {
                return Err(format!(
                    "wan.per_client[{i}].client = {} but there are only {} clients (0..={})",
                    per.client,
                    self.clients,
                    self.clients - 1
                ));
            }
            per.upstream
                .validate()
                .map_err(|e| format!("wan.per_client[{i}].upstream.{e}"))?;
            per.downstream
                .validate()
                .map_err(|e| format!("wan.per_client[{i}].downstream.{e}"))?;
        }
        self.wan_config()
            .validate()
            .map_err(|e| format!("wan.{e}"))?;
        match &self.server {
            ServerSpec::Nginx(c) => c.validate()?,
            ServerSpec::Test(c) => c.validate().map_err(|e| format!("server.{e}"))?,
        }
        self.load
            .validate(self.server_addr())
            .map_err(|e| format!("load.{e}"))?;
        let run_s = self.load.arrivals.duration_s + self.load.frustration_timeout_s;
        if run_s > MAX_RUN_SECONDS {
            return Err(format!(
                "load.arrivals.duration_s + load.frustration_timeout_s = {run_s} s exceeds the {MAX_RUN_SECONDS} s a run may take"
            ));
        }
        if !(20..=65535).contains(&self.capture.snap_len) {
            return Err(format!(
                "capture.snap_len = {} is out of range (allowed 20..=65535)",
                self.capture.snap_len
            ));
        }
        if !(10..=60_000).contains(&self.counters.interval_ms) {
            return Err(format!(
                "counters.interval_ms = {} is out of range (allowed 10..=60000)",
                self.counters.interval_ms
            ));
        }
        self.gate.validate()?;
        Ok(())
    }

    /// True when every link is a plain wire (no delay, jitter, loss or rate
    /// limit): then the router forwards without the emulator.
    pub fn wan_is_transparent(&self) -> bool {
        let plain = |l: &LinkConfig| {
            l.delay_ms == 0.0 && l.jitter_ms == 0.0 && l.loss_pct == 0.0 && l.rate_mbit == 0.0
        };
        plain(&self.wan.upstream)
            && plain(&self.wan.downstream)
            && self
                .wan
                .per_client
                .iter()
                .all(|p| plain(&p.upstream) && plain(&p.downstream))
    }

    /// The emulator configuration: per-client rules first, then one rule for
    /// all clients (10.78.0.0/16).
    pub fn wan_config(&self) -> WanConfig {
        let mut links: Vec<LinkRule> = self
            .wan
            .per_client
            .iter()
            .map(|p| LinkRule {
                client: ClientPrefix::new(topology::client_addr(p.client), 32)
                    .expect("a /32 prefix is valid"),
                upstream: p.upstream.clone(),
                downstream: p.downstream.clone(),
            })
            .collect();
        links.push(LinkRule {
            client: ClientPrefix::new(Ipv4Addr::new(10, 78, 0, 0), 16).expect("/16 is valid"),
            upstream: self.wan.upstream.clone(),
            downstream: self.wan.downstream.clone(),
        });
        let mut config = WanConfig::new(0, links);
        if let Some(len) = self.wan.queue_maxlen {
            config.queue_maxlen = len;
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syn_admission::LimitAction;

    const BASE: &str = "name = \"gate-spec\"\n[server]\nkind = \"test\"\n[load.arrivals]\nduration_s = 1\npattern = { kind = \"constant\", rate = 1 }\n";

    fn spec(gate: &str) -> Result<TestbedSpec, SpecError> {
        TestbedSpec::from_toml(&format!("{BASE}{gate}"), "gate.toml")
    }

    #[test]
    fn gate_defaults_to_none() {
        assert_eq!(spec("").unwrap().gate, SynAdmissionSpec::None);
    }

    #[test]
    fn server_port_moves_only_the_server() {
        let spec = TestbedSpec::from_toml(BASE, "t.toml").unwrap();
        assert_eq!(spec.backend_addr(), spec.server_addr());
        let behind = format!("server_port = 8080\n{BASE}");
        let spec = TestbedSpec::from_toml(&behind, "t.toml").unwrap();
        assert_eq!(spec.server_addr().port(), SERVER_PORT);
        assert_eq!(spec.backend_addr().port(), 8080);
        for port in [0, SERVER_PORT] {
            let error = TestbedSpec::from_toml(&format!("server_port = {port}\n{BASE}"), "t.toml")
                .unwrap_err()
                .to_string();
            assert!(error.contains("server_port"), "{error}");
        }
    }

    #[test]
    fn gate_sections_parse() {
        let parsed = spec("[gate]\nkind = \"iptables-limit\"\nrate_per_s = 120\nburst = 120\naction = \"reject\"\n")
            .unwrap();
        assert_eq!(
            parsed.gate,
            SynAdmissionSpec::IptablesLimit {
                rate_per_s: 120,
                burst: 120,
                action: LimitAction::Reject
            }
        );
        let parsed = spec("[gate]\nkind = \"vantage\"\n[gate.config.gate]\nqueue = 0\n[gate.config.filter]\nkind = \"abacus\"\nbucket_size = 120\n")
            .unwrap();
        assert_eq!(parsed.gate.kind_name(), "vantage");
        // The spec as run round-trips through TOML.
        let text = toml::to_string(&parsed).unwrap();
        let again = TestbedSpec::from_toml(&text, "again.toml").unwrap();
        assert_eq!(again.gate, parsed.gate);
    }

    #[test]
    fn gate_errors_name_the_file_and_the_key() {
        for (gate, expected) in [
            (
                "[gate]\nkind = \"iptables-limit\"\nrate_per_s = 0\nburst = 120\naction = \"drop\"\n",
                "gate.rate_per_s = 0",
            ),
            (
                "[gate]\nkind = \"iptables-limit\"\nrate_per_s = 120\nburst = 120\n",
                "missing field `action`",
            ),
            (
                "[gate]\nkind = \"iptables-limit\"\nrate_per_s = 120\nburst = 99999\naction = \"drop\"\n",
                "gate.burst = 99999",
            ),
            ("[gate]\nkind = \"vantage\"\n", "missing field `config`"),
            (
                "[gate]\nkind = \"vantage\"\n[gate.config]\nfilter = 3\n",
                "gate.config.filter must be a table",
            ),
        ] {
            let error = spec(gate).unwrap_err().to_string();
            assert!(error.starts_with("gate.toml:"), "{error}");
            assert!(error.contains(expected), "{gate}\n→ {error}");
        }
    }

    #[test]
    fn errors_give_the_line_of_the_key() {
        // BASE has 6 lines; the gate table starts on line 7.
        let error = spec(
            "[gate]\nkind = \"iptables-limit\"\nrate_per_s = 0\nburst = 120\naction = \"drop\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("gate.toml:9: gate.rate_per_s = 0"),
            "{error}"
        );
        let error = TestbedSpec::from_toml(&BASE.replace("rate = 1", "rate = -1"), "s.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("s.toml:6: load.arrivals.pattern.rate"),
            "{error}"
        );
    }
}
