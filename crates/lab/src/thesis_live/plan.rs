//! The plan file of the thesis's Section 5 experiment
//! (`scenarios/proxy/thesis-section5.toml`).

use serde::{Deserialize, Serialize};
use vantage_core::config::Checker;

/// Most client namespaces (paths) a plan may list.
pub const MAX_PATHS: usize = 32;
/// Most emulated users of one run.
pub const MAX_USERS: u32 = 5_000;
/// Most documents the origins serve.
pub const MAX_DOCUMENTS: u32 = 20_000;
/// Largest document, bytes (the origins' files are written to disk).
pub const MAX_DOCUMENT_BYTES: u64 = 64 << 20;
/// Most documents' bytes in all (disk, twice: one copy per origin).
pub const MAX_TOTAL_DOCUMENT_BYTES: u64 = 2 << 30;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSection {
    pub name: String,
    pub seed: u64,
}

/// The proxy's limits, as in the thesis (Section 5.2).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsPlan {
    /// Client connections the proxy holds at once.
    pub max_connections: u32,
    /// `ssbt+conn` closes idle persistent connections from this many open
    /// client connections on …
    pub close_persistent_from: u32,
    /// … down to this many.
    pub close_persistent_to: u32,
    /// A persistent connection idle this long is closed, seconds.
    pub persistent_timer_s: u32,
}

/// The users and their documents.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadPlan {
    /// Emulated users of each run (one run per scheme and count).
    pub users: Vec<u32>,
    /// Documents on the origins; sizes drawn from SURGE's file-size
    /// distribution, a page's objects drawn uniformly among them.
    pub documents: u32,
    /// SURGE's cap on a document's size, bytes.
    pub max_document_bytes: u64,
    /// Users start evenly over this span, seconds.
    pub ramp_s: f64,
    /// A request whose connection is refused is sent again at once, at
    /// most this many times; then it has failed.
    pub max_retries: u32,
    /// No byte for this long while a response is due: a failure, seconds.
    pub stall_s: f64,
}

/// One path through the WAN emulator.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkPlan {
    /// Round-trip propagation delay, ms (each direction gets half).
    pub rtt_ms: f64,
    /// Random loss each way, percent.
    pub loss_pct: f64,
    /// Bottleneck rate each way, Mbit/s.
    pub rate_mbit: f64,
}

/// One client namespace: its path and its share of the users.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathPlan {
    pub rtt_ms: f64,
    pub loss_pct: f64,
    pub rate_mbit: f64,
    /// Share of the users behind this path (the shares add up to 1).
    pub share: f64,
}

/// One scheme: a proxy and how it sizes socket buffers.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemePlan {
    /// Row name.
    pub name: String,
    /// `vantage`, `squid` or `nginx`.
    pub proxy: String,
    /// `fixed` (every proxy), or `autotune`, `ssbt`, `ssbt+conn` (vantage).
    pub mode: String,
    /// fixed: the send and receive buffers, bytes (what `setsockopt` is
    /// given).
    pub send_bytes: Option<u64>,
    pub receive_bytes: Option<u64>,
}

/// The timing of every run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    /// Users run this long after the first one started, seconds.
    pub duration_s: f64,
    /// Socket sampling period, ms.
    pub sample_ms: u64,
    /// vantage proxy's control interval (`resources.interval_ms`).
    pub interval_ms: u64,
    /// The ssbt pool, bytes.
    pub pool_bytes: u64,
    /// A kernel TCP memory limit on every proxy under test, bytes: a
    /// memory cgroup around the proxy's processes (vantage proxy's
    /// threads), `vantage_testbed::cgroup::TcpMemoryCap`. None: the
    /// host's `tcp_mem` only.
    #[serde(default)]
    pub proxy_tcp_memory_bytes: Option<u64>,
}

/// Which schemes the thesis's statements compare (by name).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatementsPlan {
    /// The thesis's proposed scheme.
    pub proposed: String,
    /// Its traditional schemes, (16 KB, 16 KB) and (256 KB, 256 KB), per
    /// proxy: `[small, large]` scheme names.
    pub fixed_pairs: Vec<[String; 2]>,
    /// The lower and higher user counts.
    pub users: [u32; 2],
}

/// What `--quick` replaces.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickPlan {
    pub duration_s: f64,
    pub ramp_s: f64,
}

/// The whole plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThesisPlan {
    pub experiment: ExperimentSection,
    pub limits: LimitsPlan,
    pub workload: WorkloadPlan,
    pub run: RunPlan,
    /// The far origin's path (the near one is on the proxy's host).
    pub far_origin: LinkPlan,
    pub path: Vec<PathPlan>,
    pub scheme: Vec<SchemePlan>,
    pub statements: StatementsPlan,
    pub quick: QuickPlan,
}

/// A plan that cannot be used: its file, line and key.
pub type PlanError = vantage_core::config::ConfigError;

/// The parts of a plan that `--quick` changes, resolved.
#[derive(Clone, Debug, Serialize)]
pub struct Mode {
    pub quick: bool,
    pub duration_s: f64,
    pub ramp_s: f64,
}

pub const PROXIES: [&str; 3] = ["vantage", "squid", "nginx"];

impl ThesisPlan {
    /// Parses and checks a plan.
    pub fn from_toml(text: &str, origin: &str) -> Result<ThesisPlan, PlanError> {
        let checker = Checker::<PlanError>::new(origin, text);
        let plan: ThesisPlan = checker.deserialize()?;
        plan.validate(&checker)?;
        Ok(plan)
    }

    fn validate(&self, checker: &Checker<'_, PlanError>) -> Result<(), PlanError> {
        let fail = |key: &str, problem: String| checker.fail(key, problem);
        let range = |key: &str, v: f64, lo: f64, hi: f64| checker.range(key, v, lo, hi).map(|_| ());
        let l = &self.limits;
        range(
            "limits.max_connections",
            l.max_connections.into(),
            4.0,
            100_000.0,
        )?;
        range(
            "limits.close_persistent_from",
            l.close_persistent_from.into(),
            1.0,
            l.max_connections.into(),
        )?;
        range(
            "limits.close_persistent_to",
            l.close_persistent_to.into(),
            0.0,
            l.close_persistent_from.into(),
        )?;
        range(
            "limits.persistent_timer_s",
            l.persistent_timer_s.into(),
            1.0,
            3600.0,
        )?;
        let w = &self.workload;
        if w.users.is_empty() || w.users.len() > 8 {
            return Err(fail(
                "workload.users",
                "must list 1 to 8 user counts".into(),
            ));
        }
        for &u in &w.users {
            range("workload.users", u.into(), 1.0, MAX_USERS.into())?;
        }
        range(
            "workload.documents",
            w.documents.into(),
            1.0,
            MAX_DOCUMENTS.into(),
        )?;
        range(
            "workload.max_document_bytes",
            w.max_document_bytes as f64,
            1024.0,
            MAX_DOCUMENT_BYTES as f64,
        )?;
        range("workload.ramp_s", w.ramp_s, 0.0, 600.0)?;
        range("quick.ramp_s", self.quick.ramp_s, 0.0, 600.0)?;
        range("workload.max_retries", w.max_retries.into(), 0.0, 10_000.0)?;
        range("workload.stall_s", w.stall_s, 0.5, 600.0)?;
        range("run.duration_s", self.run.duration_s, 1.0, 7200.0)?;
        range("quick.duration_s", self.quick.duration_s, 1.0, 7200.0)?;
        range("run.sample_ms", self.run.sample_ms as f64, 100.0, 60_000.0)?;
        range(
            "run.interval_ms",
            self.run.interval_ms as f64,
            50.0,
            60_000.0,
        )?;
        range("run.pool_bytes", self.run.pool_bytes as f64, 65536.0, 1e12)?;
        if let Some(bytes) = self.run.proxy_tcp_memory_bytes {
            range(
                "run.proxy_tcp_memory_bytes",
                bytes as f64,
                (1u64 << 20) as f64,
                (1u64 << 40) as f64,
            )?;
        }
        let link = |key: &str, rtt: f64, loss: f64, rate: f64| -> Result<(), PlanError> {
            range(&format!("{key}.rtt_ms"), rtt, 0.0, 2000.0)?;
            range(&format!("{key}.loss_pct"), loss, 0.0, 50.0)?;
            range(&format!("{key}.rate_mbit"), rate, 0.01, 10_000.0)
        };
        let o = &self.far_origin;
        link("far_origin", o.rtt_ms, o.loss_pct, o.rate_mbit)?;
        if self.path.is_empty() || self.path.len() > MAX_PATHS {
            return Err(fail(
                "path",
                format!("must list 1 to {MAX_PATHS} paths, got {}", self.path.len()),
            ));
        }
        for p in &self.path {
            link("path", p.rtt_ms, p.loss_pct, p.rate_mbit)?;
            range("path.share", p.share, 0.0, 1.0)?;
        }
        let shares: f64 = self.path.iter().map(|p| p.share).sum();
        if (shares - 1.0).abs() > 1e-6 {
            return Err(fail("path.share", format!("add up to {shares}, not 1")));
        }
        if self.scheme.is_empty() {
            return Err(fail("scheme", "must list at least one scheme".into()));
        }
        for (i, s) in self.scheme.iter().enumerate() {
            let key = |k: &str| format!("scheme[{i}].{k}");
            if !PROXIES.contains(&s.proxy.as_str()) {
                return Err(fail(
                    &key("proxy"),
                    format!("{:?} is not vantage, squid or nginx", s.proxy),
                ));
            }
            if self.scheme[..i].iter().any(|t| t.name == s.name) {
                return Err(fail(&key("name"), format!("{:?} is listed twice", s.name)));
            }
            match (s.proxy.as_str(), s.mode.as_str()) {
                (_, "fixed") => {
                    let (Some(send), Some(receive)) = (s.send_bytes, s.receive_bytes) else {
                        return Err(fail(
                            &key("mode"),
                            "fixed needs send_bytes and receive_bytes".into(),
                        ));
                    };
                    range(&key("send_bytes"), send as f64, 1024.0, (1u64 << 30) as f64)?;
                    range(
                        &key("receive_bytes"),
                        receive as f64,
                        1024.0,
                        (1u64 << 30) as f64,
                    )?;
                }
                ("vantage", "autotune" | "ssbt" | "ssbt+conn") => {}
                (proxy, mode) => {
                    return Err(fail(
                        &key("mode"),
                        format!(
                            "{mode:?} is not a mode of {proxy} (vantage: autotune, fixed, ssbt, \
                             ssbt+conn; squid and nginx: fixed)"
                        ),
                    ))
                }
            }
        }
        let st = &self.statements;
        let known = |name: &str| self.scheme.iter().any(|s| s.name == name);
        if !known(&st.proposed) {
            return Err(fail(
                "statements.proposed",
                format!("{:?} is not a scheme of the plan", st.proposed),
            ));
        }
        for pair in &st.fixed_pairs {
            for name in pair {
                if !known(name) {
                    return Err(fail(
                        "statements.fixed_pairs",
                        format!("{name:?} is not a scheme of the plan"),
                    ));
                }
            }
        }
        for u in st.users {
            if !w.users.contains(&u) {
                return Err(fail(
                    "statements.users",
                    format!("{u} is not among workload.users"),
                ));
            }
        }
        Ok(())
    }

    /// The run settings of the chosen mode.
    pub fn mode(&self, quick: bool) -> Mode {
        if quick {
            Mode {
                quick,
                duration_s: self.quick.duration_s,
                ramp_s: self.quick.ramp_s,
            }
        } else {
            Mode {
                quick,
                duration_s: self.run.duration_s,
                ramp_s: self.workload.ramp_s,
            }
        }
    }

    /// Users behind each path for `users` in all: the shares rounded by
    /// the largest remainder, so they add up to `users`.
    pub fn users_per_path(&self, users: u32) -> Vec<u32> {
        let exact: Vec<f64> = self
            .path
            .iter()
            .map(|p| p.share * f64::from(users))
            .collect();
        let mut counts: Vec<u32> = exact.iter().map(|x| x.floor() as u32).collect();
        let mut left = users.saturating_sub(counts.iter().sum());
        let mut order: Vec<usize> = (0..exact.len()).collect();
        order.sort_by(|&a, &b| {
            let ra = exact[a] - exact[a].floor();
            let rb = exact[b] - exact[b].floor();
            rb.total_cmp(&ra).then(a.cmp(&b))
        });
        for i in order.into_iter().cycle() {
            if left == 0 {
                break;
            }
            counts[i] += 1;
            left -= 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = include_str!("../../../../scenarios/proxy/thesis-section5.toml");

    #[test]
    fn the_shipped_plan_has_the_thesis_settings() {
        let plan = ThesisPlan::from_toml(SHIPPED, "thesis-section5.toml").unwrap();
        assert_eq!(plan.workload.users, vec![200, 600]);
        assert_eq!(plan.limits.max_connections, 400);
        assert_eq!(plan.limits.close_persistent_from, 300);
        assert_eq!(plan.limits.persistent_timer_s, 15);
        assert_eq!(plan.run.duration_s, 500.0);
        for proxy in PROXIES {
            assert!(plan.scheme.iter().any(|s| s.proxy == proxy), "{proxy}");
        }
        let quick = plan.mode(true);
        let runs = (plan.scheme.len() * plan.workload.users.len()) as f64;
        assert!(
            runs * quick.duration_s < 180.0,
            "a quick plan of a few minutes"
        );
    }

    #[test]
    fn the_memory_limited_plan_differs_only_in_the_limit_and_pool() {
        const LIMITED: &str =
            include_str!("../../../../scenarios/proxy/thesis-section5-tcp-memory.toml");
        let plan = ThesisPlan::from_toml(LIMITED, "thesis-section5-tcp-memory.toml").unwrap();
        let shipped = ThesisPlan::from_toml(SHIPPED, "thesis-section5.toml").unwrap();
        assert_eq!(shipped.run.proxy_tcp_memory_bytes, None);
        // 400 connections × (16 KB + 16 KB) as the kernel holds them (twice).
        let limit = 400 * 2 * (16384 + 16384);
        assert_eq!(plan.run.proxy_tcp_memory_bytes, Some(limit));
        assert_eq!(plan.run.pool_bytes, limit);
        assert_eq!(plan.workload.users, shipped.workload.users);
        assert_eq!(plan.scheme.len(), shipped.scheme.len());
        assert_eq!(plan.limits.max_connections, shipped.limits.max_connections);
        let bad = LIMITED.replacen(
            "proxy_tcp_memory_bytes = ",
            "proxy_tcp_memory_bytes = 10 #",
            1,
        );
        let error = ThesisPlan::from_toml(&bad, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("run.proxy_tcp_memory_bytes"), "{error}");
    }

    #[test]
    fn users_are_split_by_share_and_add_up() {
        let plan = ThesisPlan::from_toml(SHIPPED, "p.toml").unwrap();
        for users in [1, 7, 200, 600] {
            let split = plan.users_per_path(users);
            assert_eq!(split.iter().sum::<u32>(), users);
            assert_eq!(split.len(), plan.path.len());
        }
    }

    #[test]
    fn bad_plans_name_the_key() {
        let bad = SHIPPED.replacen("proxy = \"squid\"", "proxy = \"varnish\"", 1);
        let error = ThesisPlan::from_toml(&bad, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("proxy") && error.contains("varnish"),
            "{error}"
        );
        let bad = SHIPPED.replacen("share = ", "share = 0.5 + ", 1);
        assert!(ThesisPlan::from_toml(&bad, "p.toml").is_err());
        let bad = SHIPPED.replacen("duration_s =", "duration_s = -1 #", 1);
        let error = ThesisPlan::from_toml(&bad, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("run.duration_s"), "{error}");
        let bad = SHIPPED.replacen("proposed = \"", "proposed = \"none", 1);
        let error = ThesisPlan::from_toml(&bad, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("statements.proposed"), "{error}");
        let bad = SHIPPED.replacen("[experiment]", "[experiment]\nextra = 1", 1);
        assert!(ThesisPlan::from_toml(&bad, "p.toml").is_err());
    }
}
