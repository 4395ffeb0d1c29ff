//! The plan file of the live SBAC experiment (`scenarios/proxy/sbac-live.toml`).

use serde::{Deserialize, Serialize};
use vantage_core::admission::session::overhead::session_capacity;
use vantage_core::config::Checker;

use super::client::Segment;
use crate::studies::sbac::warmup_s;

/// One load pattern: loads as percent of the backend's measured capacity,
/// each held for `segment_s`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternPlan {
    pub name: String,
    pub loads_pct: Vec<f64>,
    pub segment_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendPlan {
    /// CPU cap of the backend (nginx), cores (`cpu.max` quota / period).
    pub cpu_cores: f64,
    /// Size of the page every request fetches, bytes.
    pub page_bytes: u64,
    /// Closed-loop clients of the capacity measurement.
    pub capacity_connections: u32,
    /// Length of the capacity measurement, seconds.
    pub capacity_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsPlan {
    pub session_length_means: Vec<f64>,
    pub think_time_s: f64,
    pub timeout_s: f64,
    pub retries: u32,
    /// How long sessions may run after the last arrival.
    pub drain_s: f64,
    /// Sessions per run at most.
    pub max_sessions: usize,
    /// Warm-up before the pattern, in session lives (mean length × think
    /// time, at least 30 s unless 0): sessions arrive at the first
    /// segment's load so that the pattern starts on a backend already
    /// serving its steady share of sessions, as in the simulator's runs;
    /// sessions that arrive in it are run, not counted. 0: the pattern
    /// starts on an idle backend.
    #[serde(default)]
    pub warmup_lives: f64,
}

/// What `--quick` replaces.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickPlan {
    pub session_length_means: Vec<f64>,
    pub think_time_s: f64,
    pub drain_s: f64,
    pub capacity_s: f64,
    #[serde(default)]
    pub warmup_lives: f64,
    pub pattern: Vec<PatternPlan>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SbacPlan {
    pub interval_s: f64,
    pub target_utilization: f64,
    /// The proxy's utilization input: `occupancy` (requests in flight at
    /// the backend over `concurrency`), `cgroup` (the backend's CPU time per
    /// interval from its cgroup v2 `cpu.stat`, in microseconds, over the
    /// cap) or `pids` (the same from `/proc`, counted in 10 ms ticks, coarse
    /// for a small cap).
    pub utilization: UtilizationInput,
    /// With `occupancy`: requests the backend serves at once.
    #[serde(default = "one")]
    pub concurrency: u32,
    /// T: the proxy ends a session idle this long, and only then counts it
    /// ended (predictive's C_e). The simulator is told the same
    /// (`[model] session_end_seen_after_s`), so both learn ends alike.
    #[serde(default = "default_session_timeout_s")]
    pub session_timeout_s: u64,
}

fn one() -> u32 {
    1
}

fn default_session_timeout_s() -> u64 {
    vantage_live::proxy::config::DEFAULT_SESSION_TIMEOUT_S
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UtilizationInput {
    Occupancy,
    Cgroup,
    Pids,
}

/// How sessions reach the backend.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "kebab-case")]
pub enum VariantKind {
    /// Straight to the backend.
    None,
    /// nginx in front with `limit_conn` and/or `limit_req` (rate as percent
    /// of the measured capacity).
    Nginx {
        limit_conn: Option<u32>,
        limit_req_pct: Option<f64>,
        #[serde(default)]
        limit_req_burst: u32,
    },
    /// HAProxy with `maxconn` on the server and its queue.
    Haproxy { maxconn: u32, queue_timeout_ms: u64 },
    /// `vantage proxy` with SBAC.
    Sbac { strategy: String },
}

/// A variant; unknown keys are refused by [`VariantKind`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariantPlan {
    pub name: String,
    #[serde(flatten)]
    pub kind: VariantKind,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSection {
    pub name: String,
    pub seed: u64,
}

/// The whole plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SbacLivePlan {
    pub experiment: ExperimentSection,
    pub backend: BackendPlan,
    pub clients: ClientsPlan,
    pub sbac: SbacPlan,
    pub pattern: Vec<PatternPlan>,
    pub quick: QuickPlan,
    pub variant: Vec<VariantPlan>,
}

/// A plan that cannot be used: its file, line and key.
pub type PlanError = vantage_core::config::ConfigError;

impl SbacLivePlan {
    /// Parses and checks a plan.
    pub fn from_toml(text: &str, origin: &str) -> Result<SbacLivePlan, PlanError> {
        let checker = Checker::<PlanError>::new(origin, text);
        let plan: SbacLivePlan = checker.deserialize()?;
        plan.validate(&checker)?;
        Ok(plan)
    }

    fn validate(&self, checker: &Checker<'_, PlanError>) -> Result<(), PlanError> {
        let fail = |key: &str, problem: String| checker.fail(key, problem);
        let range = |key: &str, v: f64, lo: f64, hi: f64| checker.range(key, v, lo, hi).map(|_| ());
        range("backend.cpu_cores", self.backend.cpu_cores, 0.005, 64.0)?;
        range(
            "backend.page_bytes",
            self.backend.page_bytes as f64,
            1.0,
            1e6,
        )?;
        range(
            "backend.capacity_connections",
            self.backend.capacity_connections as f64,
            1.0,
            1000.0,
        )?;
        range("backend.capacity_s", self.backend.capacity_s, 0.5, 600.0)?;
        range("quick.capacity_s", self.quick.capacity_s, 0.5, 600.0)?;
        for (key, means) in [
            (
                "clients.session_length_means",
                &self.clients.session_length_means,
            ),
            (
                "quick.session_length_means",
                &self.quick.session_length_means,
            ),
        ] {
            if means.is_empty() {
                return Err(fail(key, "must list at least one mean".into()));
            }
            for m in means {
                range(key, *m, 1.0, 1000.0)?;
            }
        }
        range(
            "clients.think_time_s",
            self.clients.think_time_s,
            0.0,
            3600.0,
        )?;
        range("quick.think_time_s", self.quick.think_time_s, 0.0, 3600.0)?;
        range("clients.timeout_s", self.clients.timeout_s, 0.01, 3600.0)?;
        range("clients.retries", self.clients.retries as f64, 0.0, 10.0)?;
        range("clients.drain_s", self.clients.drain_s, 0.0, 3600.0)?;
        range("quick.drain_s", self.quick.drain_s, 0.0, 3600.0)?;
        range(
            "clients.warmup_lives",
            self.clients.warmup_lives,
            0.0,
            100.0,
        )?;
        range("quick.warmup_lives", self.quick.warmup_lives, 0.0, 100.0)?;
        range(
            "clients.max_sessions",
            self.clients.max_sessions as f64,
            1.0,
            1e6,
        )?;
        range("sbac.interval_s", self.sbac.interval_s, 0.05, 60.0)?;
        range(
            "sbac.session_timeout_s",
            self.sbac.session_timeout_s as f64,
            1.0,
            86_400.0,
        )?;
        range(
            "sbac.target_utilization",
            self.sbac.target_utilization,
            0.05,
            1.0,
        )?;
        for (key, patterns) in [
            ("pattern", &self.pattern),
            ("quick.pattern", &self.quick.pattern),
        ] {
            if patterns.is_empty() {
                return Err(fail(key, "must list at least one pattern".into()));
            }
            for p in patterns {
                if p.loads_pct.is_empty() {
                    return Err(fail(key, format!("{}: loads_pct is empty", p.name)));
                }
                for l in &p.loads_pct {
                    range(&format!("{key}.loads_pct"), *l, 1.0, 1000.0)?;
                }
                range(&format!("{key}.segment_s"), p.segment_s, 0.5, 3600.0)?;
            }
        }
        if self.variant.is_empty() {
            return Err(fail("variant", "must list at least one variant".into()));
        }
        for v in &self.variant {
            match &v.kind {
                VariantKind::Sbac { strategy } => {
                    if !["stable", "responsive", "hybrid", "predictive"]
                        .contains(&strategy.as_str())
                    {
                        return Err(fail(
                            "variant.strategy",
                            format!("{strategy:?} is not stable, responsive, hybrid or predictive"),
                        ));
                    }
                }
                VariantKind::Nginx {
                    limit_conn,
                    limit_req_pct,
                    ..
                } => {
                    if limit_conn.is_none() && limit_req_pct.is_none() {
                        return Err(fail(
                            "variant",
                            format!("{}: nginx needs limit_conn or limit_req_pct", v.name),
                        ));
                    }
                    if let Some(p) = limit_req_pct {
                        range("variant.limit_req_pct", *p, 1.0, 1000.0)?;
                    }
                }
                VariantKind::Haproxy { maxconn, .. } => {
                    range("variant.maxconn", *maxconn as f64, 1.0, 1e5)?;
                }
                VariantKind::None => {}
            }
        }
        Ok(())
    }

    /// The patterns, session means, think time, drain and capacity
    /// measurement of the chosen mode.
    pub fn mode(&self, quick: bool) -> Mode {
        if quick {
            Mode {
                patterns: self.quick.pattern.clone(),
                session_length_means: self.quick.session_length_means.clone(),
                think_time_s: self.quick.think_time_s,
                drain_s: self.quick.drain_s,
                capacity_s: self.quick.capacity_s,
                warmup_lives: self.quick.warmup_lives,
            }
        } else {
            Mode {
                patterns: self.pattern.clone(),
                session_length_means: self.clients.session_length_means.clone(),
                think_time_s: self.clients.think_time_s,
                drain_s: self.clients.drain_s,
                capacity_s: self.backend.capacity_s,
                warmup_lives: self.clients.warmup_lives,
            }
        }
    }
}

/// The parts of a plan that `--quick` changes.
#[derive(Clone, Debug, Serialize)]
pub struct Mode {
    pub patterns: Vec<PatternPlan>,
    pub session_length_means: Vec<f64>,
    pub think_time_s: f64,
    pub drain_s: f64,
    pub capacity_s: f64,
    /// Warm-up before each pattern, in session lives.
    #[serde(default)]
    pub warmup_lives: f64,
}

/// What the clients offer in one run: a warm-up at the first load (its
/// sessions are not counted), then the pattern's segments. The live
/// clients and the simulator both run it.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// `seconds` is 0 without a warm-up.
    pub warmup: Segment,
    pub segments: Vec<Segment>,
}

impl Mode {
    /// The schedule of `pattern` for sessions of mean length `mean` on a
    /// backend of `capacity_rps`: a load of x % offers x % of the capacity
    /// in sessions (Eq. 1, S_s = S_r / SesLength) as new sessions per
    /// second.
    pub fn schedule(&self, pattern: &PatternPlan, mean: f64, capacity_rps: f64) -> Schedule {
        let sessions_per_s =
            |load_pct: f64| load_pct / 100.0 * session_capacity(capacity_rps, mean);
        let first = pattern.loads_pct.first().copied().unwrap_or(0.0);
        Schedule {
            warmup: Segment {
                sessions_per_s: sessions_per_s(first),
                seconds: warmup_s(self.warmup_lives, mean * self.think_time_s),
            },
            segments: pattern
                .loads_pct
                .iter()
                .map(|&load| Segment {
                    sessions_per_s: sessions_per_s(load),
                    seconds: pattern.segment_s,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_plans_parse_and_a_bad_one_names_its_line() {
        for text in [
            include_str!("../../../../scenarios/proxy/sbac-live.toml"),
            include_str!("../../../../scenarios/proxy/sbac-live-busy-day.toml"),
            include_str!("../../../../scenarios/proxy/sbac-live-usual-day.toml"),
            include_str!("../../../../scenarios/proxy/sbac-live-busy-day-l50.toml"),
        ] {
            SbacLivePlan::from_toml(text, "s.toml").unwrap();
        }
        let text = include_str!("../../../../scenarios/proxy/sbac-live.toml");
        let (index, first_table) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.starts_with('['))
            .unwrap();
        let bad = text.replacen(first_table, &format!("{first_table}\nno_such_key = 1"), 1);
        let error = SbacLivePlan::from_toml(&bad, "s.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!("s.toml:{}: ", index + 2)) && error.contains("no_such_key"),
            "{error}"
        );
    }
}
