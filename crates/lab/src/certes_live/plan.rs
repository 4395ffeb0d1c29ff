//! The experiment file (`scenarios/certes-live/*.toml`): shared settings
//! and the configurations, each turned into one testbed spec.
//!
//! A configuration's `population` was named `clients`; the old name is
//! read, with a warning in [`CertesLivePlan::warnings`], until vantage
//! [`vantage_core::config::OLD_NAMES_REFUSED_FROM`].

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use vantage_core::config::Checker;
use vantage_core::tcp::SynProfile;
use vantage_testbed::profiles;

/// Longest arrival phase a configuration may ask for, seconds.
pub const MAX_DURATION_S: f64 = 600.0;
/// Most configurations in one file.
pub const MAX_CONFIGURATIONS: usize = 64;

/// Why a plan is not usable: its file, line and key.
pub type PlanError = vantage_core::config::ConfigError;

/// The whole file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertesLivePlan {
    pub experiment: Experiment,
    pub configuration: Vec<Configuration>,
    /// Old key names the file uses, one line each (file, line, old and new
    /// key): the caller shows them.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// `[experiment]`: what every configuration shares.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub name: String,
    pub seed: u64,
    /// Arrivals of each run, seconds.
    pub duration_s: f64,
    /// With `--quick`.
    pub quick_duration_s: f64,
    /// The configurations `--quick` runs (names); empty: all.
    #[serde(default)]
    pub quick: Vec<String>,
    /// Client namespaces; arrivals are dealt to them in turn.
    pub clients: usize,
    /// The clients' frustration timeout, seconds (also the daemon's FTO).
    pub frustration_timeout_s: f64,
    /// The daemon's interval Δ (`interval` of its configuration).
    pub interval: String,
    /// One-way WAN delay, ms.
    pub delay_ms: f64,
}

impl Experiment {
    /// `interval` in milliseconds (the daemons', the proxy's `[certes]`
    /// and, with the proxy, the gate's log interval).
    pub fn interval_ms(&self) -> Result<u64, String> {
        vantage_live::watch::config::parse_duration(&self.interval).map(|d| d.as_millis())
    }
}

/// Where the SYNs are dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drops {
    /// The server's accept queue overflows (the kernel drops).
    AcceptQueue,
    /// `vantage gate run` with the Abacus filter at `capacity` SYNs/s: it
    /// drops a SYN when a token is free by the client's next
    /// retransmission, else rejects it (a failure, outside both means).
    Abacus,
    /// `vantage gate run` with the token bucket that drops (the Abacus
    /// paper's TBF) at `capacity` SYNs/s: every SYN over the rate dropped.
    Tbf,
    /// Nothing is set to drop SYNs: the test server takes `capacity`
    /// accepts per second from a deep backlog, so overload is queueing in
    /// its accept queue (behind the proxy with `front = "proxy"`).
    None,
}

/// What stands between the clients and the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Front {
    /// The clients connect to the server itself.
    #[default]
    None,
    /// `vantage proxy` listens where the clients connect, forwards to the
    /// server on [`BACKEND_PORT`] and writes its `[certes]` stream, which a
    /// third watch daemon (`[proxy]`, with `[gate]` when a gate drops)
    /// estimates from.
    Proxy,
}

/// Which server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Server {
    Test,
    Nginx,
}

/// The offered load's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Load {
    /// Poisson arrivals at `rate` for the whole run.
    Steady,
    /// Poisson arrivals at twice `rate` for 5 s, none for 5 s.
    OnOff,
}

/// `[[configuration]]`: one testbed run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Configuration {
    pub name: String,
    /// The client population: SYN profiles of the client namespaces, dealt
    /// in turn (one: every client; several: a mixture, its shares the
    /// namespaces').
    #[serde(default)]
    pub population: Vec<String>,
    /// `population`'s old name, moved to it on loading.
    #[serde(default, rename = "clients", skip_serializing)]
    old_clients: Option<Vec<String>>,
    pub server: Server,
    pub drops: Drops,
    pub load: Load,
    /// Mean arrivals per second.
    pub rate: f64,
    /// What the server takes: the test server's accepts per second
    /// (`accept-queue`), or the gate's refill rate (`abacus`).
    pub capacity: f64,
    /// Packet loss each way on every client link, percent.
    #[serde(default)]
    pub wan_loss_pct: f64,
    /// The profile the daemon is told (`profile` of its configuration);
    /// default: the clients' one profile, `linux-6.5` for a mixture.
    #[serde(default)]
    pub told: Option<String>,
    /// Also run a second daemon with `learn = true`.
    #[serde(default)]
    pub learn: bool,
    /// What stands before the server (default `none`).
    #[serde(default)]
    pub front: Front,
}

/// Listen backlog of the test server when the accept queue is the drop.
const SMALL_BACKLOG: u32 = 16;
/// Listen backlog of the test server when nothing drops: deep enough that
/// the runs' queues never fill it.
const DEEP_BACKLOG: u32 = 1024;
/// Response size, bytes.
const RESPONSE_BYTES: u64 = 2000;
/// Where the server listens with `front = "proxy"` (the proxy takes port
/// 80).
pub const BACKEND_PORT: u16 = 8080;

impl CertesLivePlan {
    pub fn from_toml(text: &str, origin: &str) -> Result<CertesLivePlan, PlanError> {
        let checker = Checker::<PlanError>::new(origin, text);
        let mut plan: CertesLivePlan = checker.deserialize()?;
        for (i, c) in plan.configuration.iter_mut().enumerate() {
            let population = (!c.population.is_empty()).then(|| std::mem::take(&mut c.population));
            c.population = checker
                .renamed(
                    &format!("configuration[{i}].population"),
                    population,
                    &format!("configuration[{i}].clients"),
                    c.old_clients.take(),
                    &mut plan.warnings,
                )?
                .unwrap_or_default();
        }
        plan.validate(&checker)?;
        Ok(plan)
    }

    fn validate(&self, checker: &Checker<'_, PlanError>) -> Result<(), PlanError> {
        let e = &self.experiment;
        let positive = |key: &str, value: f64, high: f64| {
            if value.is_finite() && value > 0.0 && value <= high {
                Ok(())
            } else {
                Err(checker.fail(key, format!("must be in (0, {high}], got {value}")))
            }
        };
        positive("experiment.duration_s", e.duration_s, MAX_DURATION_S)?;
        positive(
            "experiment.quick_duration_s",
            e.quick_duration_s,
            MAX_DURATION_S,
        )?;
        positive(
            "experiment.frustration_timeout_s",
            e.frustration_timeout_s,
            180.0,
        )?;
        let interval_ms = e
            .interval_ms()
            .map_err(|problem| checker.fail("experiment.interval", problem))?;
        if !(10..=1000).contains(&interval_ms) {
            return Err(checker.fail(
                "experiment.interval",
                format!("must be 10 ms to 1 s (whole milliseconds), got {interval_ms} ms"),
            ));
        }
        if e.clients == 0 || e.clients > 16 {
            return Err(checker.fail(
                "experiment.clients",
                format!("must be in 1..=16, got {}", e.clients),
            ));
        }
        if self.configuration.is_empty() || self.configuration.len() > MAX_CONFIGURATIONS {
            return Err(checker.fail(
                "configuration",
                format!(
                    "must have 1 to {MAX_CONFIGURATIONS} [[configuration]] tables, got {}",
                    self.configuration.len()
                ),
            ));
        }
        let mut names = BTreeSet::new();
        for (i, c) in self.configuration.iter().enumerate() {
            let key = |name: &str| format!("configuration[{i}].{name}");
            let fail = |name: &str, problem: String| {
                checker.fail(&key(name), format!("({}) {problem}", c.name))
            };
            if !names.insert(c.name.as_str()) {
                return Err(fail("name", "is used twice".into()));
            }
            if c.population.is_empty() || c.population.len() > e.clients {
                return Err(fail(
                    "population",
                    format!("must name 1 to experiment.clients = {} profiles", e.clients),
                ));
            }
            for profile in &c.population {
                let p = SynProfile::builtin(profile)
                    .map_err(|err| fail("population", err.to_string()))?;
                profiles::kernel_settings(&p).map_err(|err| fail("population", err.to_string()))?;
            }
            if let Some(told) = &c.told {
                vantage_core::tcp::ClientMix::builtin(told)
                    .map_err(|err| fail("told", err.to_string()))?;
            }
            for (name, value) in [("rate", c.rate), ("capacity", c.capacity)] {
                positive(&key(name), value, 5000.0)?;
            }
            checker.range(&key("wan_loss_pct"), c.wan_loss_pct, 0.0, 20.0)?;
            if c.server == Server::Nginx && c.drops == Drops::AcceptQueue {
                return Err(fail(
                    "drops",
                    "nginx with accept-queue drops is not offered (its accept rate is not set, so its queue would overflow only at a load the run cannot size); use drops = \"tbf\" or \"abacus\"".into(),
                ));
            }
            if c.front == Front::Proxy && c.drops == Drops::AcceptQueue {
                return Err(fail(
                    "drops",
                    "accept-queue drops behind front = \"proxy\" are not offered: the proxy accepts every connection at once (one over limits.max_connections is closed at accept, a refusal, not a drop), so no SYN is dropped at its listener, and the backend's own queue overflowing would count in the proxy's DROPPED (ListenDrops is the namespace's) though no client SYN was dropped; use drops = \"none\" (queueing behind the proxy), \"tbf\" or \"abacus\"".into(),
                ));
            }
            if c.front == Front::Proxy && c.wan_loss_pct > 0.0 {
                return Err(fail(
                    "wan_loss_pct",
                    "must be 0 with front = \"proxy\": the proxy's stream has no segment counts, so its daemon cannot be told the loss".into(),
                ));
            }
        }
        for name in &e.quick {
            if !names.contains(name.as_str()) {
                return Err(checker.fail(
                    "experiment.quick",
                    format!("names `{name}`, not a configuration"),
                ));
            }
        }
        Ok(())
    }

    /// The configurations a run runs.
    pub fn selected(&self, quick: bool) -> Vec<&Configuration> {
        self.configuration
            .iter()
            .filter(|c| {
                !quick
                    || self.experiment.quick.is_empty()
                    || self.experiment.quick.contains(&c.name)
            })
            .collect()
    }
}

impl Configuration {
    /// The client namespaces' profile, namespace by namespace.
    pub fn profile_of_client(&self, index: usize) -> &str {
        &self.population[index % self.population.len()]
    }

    /// The profile or mixture the daemon is told.
    pub fn told(&self) -> String {
        match (&self.told, self.population.as_slice()) {
            (Some(told), _) => told.clone(),
            (None, [one]) => one.clone(),
            (None, _) => "linux-6.5".into(),
        }
    }

    /// The Abacus filter's `population`: the true mixture.
    fn gate_population(&self, experiment: &Experiment) -> String {
        let mut shares = std::collections::BTreeMap::new();
        for i in 0..experiment.clients {
            *shares.entry(self.profile_of_client(i)).or_insert(0.0) += 1.0;
        }
        let entries: Vec<String> = shares
            .iter()
            .map(|(name, n)| format!("\"{name}\" = {:?}", n / experiment.clients as f64))
            .collect();
        format!("{{ {} }}", entries.join(", "))
    }

    /// The testbed spec of this configuration.
    pub fn testbed_spec(&self, experiment: &Experiment, quick: bool, index: usize) -> String {
        let duration = if quick {
            experiment.quick_duration_s
        } else {
            experiment.duration_s
        };
        // Behind the proxy the server closes after each response, so that
        // every client connection is one accept of the server's (the
        // proxy's pool would otherwise reuse its connections past the
        // accept pacing).
        let keep_alive = match self.front {
            Front::None => "",
            Front::Proxy => "keep_alive = false\n",
        };
        let server_port = match self.front {
            Front::None => String::new(),
            Front::Proxy => format!("server_port = {BACKEND_PORT}\n"),
        };
        let (server, path) = match (self.server, self.drops) {
            (Server::Test, Drops::AcceptQueue) => (
                format!(
                    "kind = \"test\"\nbacklog = {SMALL_BACKLOG}\naccept_rate = {:?}\naccept_poisson = true\nresponse_bytes = {RESPONSE_BYTES}\n",
                    self.capacity
                ),
                "/",
            ),
            (Server::Test, Drops::None) => (
                format!(
                    "kind = \"test\"\nbacklog = {DEEP_BACKLOG}\naccept_rate = {:?}\naccept_poisson = true\nresponse_bytes = {RESPONSE_BYTES}\n{keep_alive}",
                    self.capacity
                ),
                "/",
            ),
            (Server::Test, Drops::Abacus | Drops::Tbf) => (
                // Accepts well above the gate's rate: only the gate drops.
                format!(
                    "kind = \"test\"\nbacklog = {DEEP_BACKLOG}\naccept_rate = {:?}\naccept_poisson = true\nresponse_bytes = {RESPONSE_BYTES}\n{keep_alive}",
                    (self.capacity * 4.0).max(400.0)
                ),
                "/",
            ),
            (Server::Nginx, _) => (
                format!(
                    "kind = \"nginx\"\nbacklog = 1024\nfiles = [{{ path = \"/page\", bytes = {RESPONSE_BYTES} }}]\n"
                ),
                "/page",
            ),
        };
        let pattern = match self.load {
            Load::Steady => format!(
                "{{ kind = \"constant\", rate = {:?}, poisson = true }}",
                self.rate
            ),
            Load::OnOff => format!(
                "{{ kind = \"on-off\", rate = {:?}, on_s = 5.0, off_s = 5.0, poisson = true }}",
                self.rate * 2.0
            ),
        };
        // The gate logs every second; behind the proxy on the proxy's
        // interval, so that its drops merge into the proxy's rows
        // (interval checked when the plan was loaded: 10 to 1000 ms).
        let gate_interval_ms = match self.front {
            Front::None => 1000,
            Front::Proxy => experiment.interval_ms().unwrap_or(1000),
        };
        let gate_head = format!("\n[gate]\nkind = \"vantage\"\n[gate.config.gate]\nqueue = 0\nqueues = 1\nqueue_maxlen = 4096\ninterval_ms = {gate_interval_ms}\ndry_run = false\n[gate.config.filter]\n");
        let rate = self.capacity.round();
        let gate = match self.drops {
            Drops::AcceptQueue | Drops::None => String::new(),
            // The costs of the Abacus paper's Section 6 runs.
            Drops::Abacus => format!(
                "{gate_head}kind = \"abacus\"\nbucket_size = {rate:?}\nrefill_rate = {rate:?}\ninterval_ms = 1000\n\
                 greedy_window_s = 50\ndelay_cost = 1\nreject_cost = 21\npopulation = {population}\n",
                population = self.gate_population(experiment),
            ),
            Drops::Tbf => format!(
                "{gate_head}kind = \"tbf\"\nbucket_size = {rate:?}\nrefill_rate = {rate:?}\ninterval_ms = 1000\n"
            ),
        };
        format!(
            "name = \"{name}\"\nclients = {clients}\nclient_profile = \"{profile}\"\nseed = {seed}\n{server_port}\n\
             [wan.upstream]\ndelay_ms = {delay:?}\nloss_pct = {loss:?}\n[wan.downstream]\ndelay_ms = {delay:?}\nloss_pct = {loss:?}\n\n\
             [server]\n{server}\n[load]\npath = \"{path}\"\nfrustration_timeout_s = {fto:?}\n[load.arrivals]\nduration_s = {duration:?}\npattern = {pattern}\n\n\
             [capture]\nserver = false\n{gate}",
            name = self.name,
            clients = experiment.clients,
            profile = self.profile_of_client(0),
            seed = experiment.seed.wrapping_add(index as u64),
            delay = experiment.delay_ms,
            loss = self.wan_loss_pct,
            fto = experiment.frustration_timeout_s,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_testbed::spec::TestbedSpec;

    const FILES: [(&str, &str); 5] = [
        (
            "configurations.toml",
            include_str!("../../../../scenarios/certes-live/configurations.toml"),
        ),
        (
            "followup.toml",
            include_str!("../../../../scenarios/certes-live/followup.toml"),
        ),
        (
            "smoke.toml",
            include_str!("../../../../scenarios/certes-live/smoke.toml"),
        ),
        (
            "proxy.toml",
            include_str!("../../../../scenarios/certes-live/proxy.toml"),
        ),
        (
            "abacus.toml",
            include_str!("../../../../scenarios/certes-live/abacus.toml"),
        ),
    ];

    #[test]
    fn every_file_gives_valid_testbed_specs() {
        for (name, text) in FILES {
            let plan = CertesLivePlan::from_toml(text, name).unwrap();
            for quick in [false, true] {
                for (i, c) in plan.selected(quick).into_iter().enumerate() {
                    let spec = c.testbed_spec(&plan.experiment, quick, i);
                    let parsed = TestbedSpec::from_toml(&spec, &c.name)
                        .unwrap_or_else(|e| panic!("{name}: {}: {e}\n{spec}", c.name));
                    let duration = if quick {
                        plan.experiment.quick_duration_s
                    } else {
                        plan.experiment.duration_s
                    };
                    assert_eq!(parsed.load.arrivals.duration_s, duration);
                    assert_eq!(
                        parsed.gate.kind_name() == "none",
                        matches!(c.drops, Drops::AcceptQueue | Drops::None)
                    );
                    assert_eq!(
                        parsed.backend_addr().port(),
                        match c.front {
                            Front::None => 80,
                            Front::Proxy => BACKEND_PORT,
                        }
                    );
                }
            }
        }
        for (name, text) in FILES {
            let plan = CertesLivePlan::from_toml(text, name).unwrap();
            assert!(plan.warnings.is_empty(), "{name}: {:?}", plan.warnings);
        }
        let full = CertesLivePlan::from_toml(FILES[0].1, FILES[0].0).unwrap();
        assert!(full.configuration.len() >= 16);
        let proxied: Vec<&Configuration> = full
            .configuration
            .iter()
            .filter(|c| c.front == Front::Proxy)
            .collect();
        assert!(proxied.iter().any(|c| c.drops == Drops::None));
        assert!(proxied
            .iter()
            .any(|c| matches!(c.drops, Drops::Tbf | Drops::Abacus)));
        assert_eq!(full.selected(true).len(), 3);
    }

    #[test]
    fn a_mixture_deals_its_profiles_and_is_told_linux_6_5() {
        let plan = CertesLivePlan::from_toml(FILES[2].1, FILES[2].0).unwrap();
        let mix = &plan.configuration[1];
        let dealt: Vec<&str> = (0..4).map(|i| mix.profile_of_client(i)).collect();
        assert_eq!(dealt, ["linux-6.5", "linux-3.7", "linux-6.5", "linux-3.7"]);
        assert_eq!(mix.told(), "linux-6.5");
        assert_eq!(plan.configuration[0].told(), "linux-6.5");
    }

    #[test]
    fn the_old_name_clients_is_read_with_a_warning() {
        use vantage_core::config::OLD_NAMES_REFUSED_FROM;
        let text = FILES[2].1;
        let at = text.find("population = [").unwrap();
        let line = text[..at].matches('\n').count() + 1;
        let old = text.replacen("population = [", "clients = [", 1);
        let plan = CertesLivePlan::from_toml(&old, "f.toml").unwrap();
        let new = CertesLivePlan::from_toml(text, "f.toml").unwrap();
        assert_eq!(
            plan.configuration[0].population,
            new.configuration[0].population
        );
        assert_eq!(
            plan.warnings,
            [format!("f.toml:{line}: `configuration[0].clients` is the old name of `configuration[0].population`; it is read until vantage {OLD_NAMES_REFUSED_FROM}, rename it")]
        );
        let abacus = CertesLivePlan::from_toml(
            &old.replace("drops = \"tbf\"", "drops = \"abacus\""),
            "f.toml",
        )
        .unwrap();
        let spec = abacus.configuration[1].testbed_spec(&abacus.experiment, true, 1);
        assert!(
            spec.contains("population = { \"linux-3.7\" = 0.5, \"linux-6.5\" = 0.5 }"),
            "{spec}"
        );
        let both = text.replacen(
            "population = [",
            "clients = [\"linux-6.5\"]\npopulation = [",
            1,
        );
        let error = CertesLivePlan::from_toml(&both, "f.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "`configuration[0].clients` and `configuration[0].population` are the same setting"
            ),
            "{error}"
        );
        let neither = text.replacen("population = [\"linux-6.5\"]\n", "", 1);
        let error = CertesLivePlan::from_toml(&neither, "f.toml").unwrap_err();
        assert_eq!(error.key(), Some("configuration[0].population"));
    }

    #[test]
    fn front_proxy_loads_and_moves_the_server_behind_it() {
        let text = FILES[2].1.replacen(
            "drops = \"accept-queue\"",
            "front = \"proxy\"\ndrops = \"none\"",
            1,
        );
        let plan = CertesLivePlan::from_toml(&text, "f.toml").unwrap();
        let c = &plan.configuration[0];
        assert_eq!((c.front, c.drops), (Front::Proxy, Drops::None));
        assert_eq!(plan.configuration[1].front, Front::None);
        let spec = c.testbed_spec(&plan.experiment, true, 0);
        let parsed = TestbedSpec::from_toml(&spec, "generated").unwrap();
        assert_eq!(parsed.server_port, Some(BACKEND_PORT));
        assert_eq!(parsed.server_addr().port(), 80);
        assert!(spec.contains("keep_alive = false"), "{spec}");
        assert!(spec.contains("backlog = 1024"), "{spec}");
        // Without the proxy the server stays on port 80 and keeps its
        // connections alive (the existing configurations are unchanged).
        let direct = plan.configuration[1].testbed_spec(&plan.experiment, true, 1);
        assert!(!direct.contains("server_port"), "{direct}");
        assert!(!direct.contains("keep_alive"), "{direct}");
        // Behind the proxy the gate logs on the daemons' interval (its drops
        // merge into the proxy's rows); without it, every second as before.
        let gated = CertesLivePlan::from_toml(
            &text.replacen("drops = \"none\"", "drops = \"tbf\"", 1),
            "f.toml",
        )
        .unwrap();
        let spec = gated.configuration[0].testbed_spec(&gated.experiment, true, 0);
        assert!(spec.contains("interval_ms = 250\ndry_run"), "{spec}");
        assert!(direct.contains("interval_ms = 1000\ndry_run"), "{direct}");
    }

    #[test]
    fn a_bad_front_is_named_with_its_file_line_and_key() {
        let text = FILES[2].1;
        let line_of =
            |text: &str, needle: &str| text[..text.find(needle).unwrap()].matches('\n').count() + 1;
        let bad = text.replacen(
            "server = \"test\"",
            "server = \"test\"\nfront = \"haproxy\"",
            1,
        );
        let error = CertesLivePlan::from_toml(&bad, "f.toml").unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("f.toml:{}:", line_of(&bad, "front = "))),
            "{message}"
        );
        assert!(message.contains("front"), "{message}");
        assert!(message.contains("haproxy"), "{message}");
        // The proxy accepts at once: the accept queue never drops behind it.
        let queue = text.replacen(
            "server = \"test\"",
            "server = \"test\"\nfront = \"proxy\"",
            1,
        );
        let error = CertesLivePlan::from_toml(&queue, "f.toml").unwrap_err();
        assert_eq!(error.key(), Some("configuration[0].drops"));
        assert!(error.line().is_some(), "{error}");
        assert!(error.to_string().contains("accept-queue"), "{error}");
        let lossy = text.replacen(
            "drops = \"accept-queue\"",
            "front = \"proxy\"\ndrops = \"none\"\nwan_loss_pct = 1.0",
            1,
        );
        let error = CertesLivePlan::from_toml(&lossy, "f.toml").unwrap_err();
        assert_eq!(error.key(), Some("configuration[0].wan_loss_pct"));
    }

    #[test]
    fn refuses_what_cannot_run() {
        let text = FILES[2].1;
        let nginx_queue = text.replacen("server = \"test\"", "server = \"nginx\"", 1);
        let error = CertesLivePlan::from_toml(&nginx_queue, "f.toml").unwrap_err();
        assert!(error.to_string().contains("accept-queue"), "{error}");
        assert!(
            error.key().is_some_and(|k| k.ends_with("].drops")) && error.line().is_some(),
            "{error}"
        );
        let unknown = text.replace("quick = []", "quick = [\"nothing\"]");
        let error = CertesLivePlan::from_toml(&unknown, "f.toml").unwrap_err();
        assert!(error.to_string().contains("nothing"), "{error}");
        let windows = text.replacen(
            "population = [\"linux-6.5\"]",
            "population = [\"windows-7\"]",
            1,
        );
        assert!(CertesLivePlan::from_toml(&windows, "f.toml").is_err());
        let long = text.replace("duration_s = 20", "duration_s = 6000");
        assert!(CertesLivePlan::from_toml(&long, "f.toml").is_err());
    }
}
