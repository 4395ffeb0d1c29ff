//! The plan file of the Section 4 experiment (`scenarios/cpa/section4.toml`).

use serde::{Deserialize, Serialize};
use vantage_core::config::Checker;

/// Most SURGE documents the server holds.
pub const MAX_DOCUMENTS: u32 = 20_000;
/// Largest SURGE document, bytes.
pub const MAX_DOCUMENT_BYTES: u64 = 16 << 20;
/// Most bytes of all SURGE documents (written to disk once).
pub const MAX_TOTAL_DOCUMENT_BYTES: u64 = 1 << 30;
/// Most background users.
pub const MAX_USERS: u32 = 2_000;
/// Most monitored fetches per path in one test.
pub const MAX_FETCHES: u32 = 10_000;
/// Most cross-traffic flows per path.
pub const MAX_FLOWS: u32 = 32;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSection {
    pub name: String,
    pub seed: u64,
}

/// The server: nginx, its CPU cap, its files.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerPlan {
    /// nginx's CPU cap, cores (`CpuCap`): what makes the high background
    /// load near overload on this machine.
    pub cpu_cores: f64,
    /// The monitored files, bytes (the paper: 1 KB, 20 KB, 500 KB).
    pub monitored_bytes: Vec<u64>,
    /// SURGE documents for the background load (the paper: 2,000 files,
    /// 80 bytes to 3.2 MB).
    pub documents: u32,
    pub max_document_bytes: u64,
}

/// Background SURGE users from the server's own namespace (no WAN).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerLoadPlan {
    /// SURGE user equivalents under low and high server load (the paper:
    /// 40 and 520).
    pub low_users: u32,
    pub high_users: u32,
    /// Users start evenly over this span before the first test, seconds.
    pub ramp_s: f64,
    /// A request with no byte for this long has failed, seconds.
    pub stall_s: f64,
}

/// The two paths: emulated links, each a bottleneck shared by the
/// monitored client and the cross traffic of its path.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathsPlan {
    /// One-way propagation delay of the long path, ms (the paper: 32).
    pub long_one_way_ms: f64,
    /// One-way propagation delay of the short path, ms.
    pub short_one_way_ms: f64,
    /// Bottleneck rate each way, Mbit/s (the paper's site: a 10 Mbit/s
    /// bridge).
    pub rate_mbit: f64,
    /// Bottleneck queue, packets.
    pub queue_packets: u32,
}

/// Cross traffic over each path's bottleneck, server side to the path's
/// cross-traffic namespace: bulk TCP flows.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkLoadPlan {
    /// Flows under low network load, and their total rate, Mbit/s (each
    /// paced to its share; 0 = not paced).
    pub low_flows: u32,
    pub low_rate_mbit: f64,
    /// Flows under high network load and their total rate (0 = not paced:
    /// TCP fills the bottleneck queue).
    pub high_flows: u32,
    pub high_rate_mbit: f64,
}

/// The monitored clients.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitoredPlan {
    /// Pause between one fetch's end and the next one's start, ms.
    pub gap_ms: u64,
    /// A fetch not finished after this long has failed, seconds.
    pub timeout_s: f64,
    /// Most fetches per path in one test.
    pub max_fetches: u32,
}

/// The timing of every test.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    /// Monitored fetches run this long per test, seconds.
    pub test_s: f64,
    /// Cross traffic runs this long before the fetches start, seconds.
    pub settle_s: f64,
}

/// What `--quick` replaces.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickPlan {
    pub test_s: f64,
    pub settle_s: f64,
    pub ramp_s: f64,
    pub documents: u32,
}

/// The whole plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpevalPlan {
    pub experiment: ExperimentSection,
    pub server: ServerPlan,
    pub server_load: ServerLoadPlan,
    pub paths: PathsPlan,
    pub network_load: NetworkLoadPlan,
    pub monitored: MonitoredPlan,
    pub run: RunPlan,
    pub quick: QuickPlan,
}

/// A plan that cannot be used: its file, line and key.
pub type PlanError = vantage_core::config::ConfigError;

/// The parts of a plan that `--quick` changes, resolved.
#[derive(Clone, Debug, Serialize)]
pub struct Mode {
    pub quick: bool,
    pub test_s: f64,
    pub settle_s: f64,
    pub ramp_s: f64,
    pub documents: u32,
}

impl TcpevalPlan {
    /// Parses and checks a plan.
    pub fn from_toml(text: &str, origin: &str) -> Result<TcpevalPlan, PlanError> {
        let checker = Checker::<PlanError>::new(origin, text);
        let plan: TcpevalPlan = checker.deserialize()?;
        plan.validate(&checker)?;
        Ok(plan)
    }

    fn validate(&self, checker: &Checker<'_, PlanError>) -> Result<(), PlanError> {
        let range = |key: &str, v: f64, lo: f64, hi: f64| checker.range(key, v, lo, hi).map(|_| ());
        let s = &self.server;
        range("server.cpu_cores", s.cpu_cores, 0.01, 64.0)?;
        if s.monitored_bytes.is_empty() || s.monitored_bytes.len() > 8 {
            return Err(checker.fail(
                "server.monitored_bytes",
                "must list 1 to 8 file sizes".into(),
            ));
        }
        for (i, &b) in s.monitored_bytes.iter().enumerate() {
            range("server.monitored_bytes", b as f64, 1.0, 64e6)?;
            if s.monitored_bytes[..i].contains(&b) {
                return Err(checker.fail("server.monitored_bytes", format!("{b} is listed twice")));
            }
        }
        range(
            "server.documents",
            s.documents.into(),
            1.0,
            MAX_DOCUMENTS.into(),
        )?;
        range(
            "quick.documents",
            self.quick.documents.into(),
            1.0,
            MAX_DOCUMENTS.into(),
        )?;
        range(
            "server.max_document_bytes",
            s.max_document_bytes as f64,
            1024.0,
            MAX_DOCUMENT_BYTES as f64,
        )?;
        let l = &self.server_load;
        range(
            "server_load.low_users",
            l.low_users.into(),
            0.0,
            MAX_USERS.into(),
        )?;
        range(
            "server_load.high_users",
            l.high_users.into(),
            l.low_users.into(),
            MAX_USERS.into(),
        )?;
        range("server_load.ramp_s", l.ramp_s, 0.0, 600.0)?;
        range("quick.ramp_s", self.quick.ramp_s, 0.0, 600.0)?;
        range("server_load.stall_s", l.stall_s, 0.5, 600.0)?;
        let p = &self.paths;
        range("paths.long_one_way_ms", p.long_one_way_ms, 0.0, 1000.0)?;
        range(
            "paths.short_one_way_ms",
            p.short_one_way_ms,
            0.0,
            p.long_one_way_ms,
        )?;
        range("paths.rate_mbit", p.rate_mbit, 0.1, 1000.0)?;
        range("paths.queue_packets", p.queue_packets.into(), 2.0, 10_000.0)?;
        let n = &self.network_load;
        range(
            "network_load.low_flows",
            n.low_flows.into(),
            0.0,
            MAX_FLOWS.into(),
        )?;
        range(
            "network_load.high_flows",
            n.high_flows.into(),
            0.0,
            MAX_FLOWS.into(),
        )?;
        range("network_load.low_rate_mbit", n.low_rate_mbit, 0.0, 1000.0)?;
        range("network_load.high_rate_mbit", n.high_rate_mbit, 0.0, 1000.0)?;
        let m = &self.monitored;
        range("monitored.gap_ms", m.gap_ms as f64, 0.0, 60_000.0)?;
        range("monitored.timeout_s", m.timeout_s, 0.5, 600.0)?;
        range(
            "monitored.max_fetches",
            m.max_fetches.into(),
            1.0,
            MAX_FETCHES.into(),
        )?;
        range("run.test_s", self.run.test_s, 1.0, 3600.0)?;
        range("quick.test_s", self.quick.test_s, 1.0, 3600.0)?;
        range("run.settle_s", self.run.settle_s, 0.0, 600.0)?;
        range("quick.settle_s", self.quick.settle_s, 0.0, 600.0)?;
        Ok(())
    }

    /// The run settings of the chosen mode.
    pub fn mode(&self, quick: bool) -> Mode {
        if quick {
            Mode {
                quick,
                test_s: self.quick.test_s,
                settle_s: self.quick.settle_s,
                ramp_s: self.quick.ramp_s,
                documents: self.quick.documents,
            }
        } else {
            Mode {
                quick,
                test_s: self.run.test_s,
                settle_s: self.run.settle_s,
                ramp_s: self.server_load.ramp_s,
                documents: self.server.documents,
            }
        }
    }

    /// Tests in the plan: file sizes × server load × network load (each
    /// measured on both paths at once).
    pub fn tests(&self) -> usize {
        self.server.monitored_bytes.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = include_str!("../../../../scenarios/cpa/section4.toml");

    #[test]
    fn the_shipped_plan_has_the_papers_tests_and_a_short_quick_plan() {
        let plan = TcpevalPlan::from_toml(SHIPPED, "section4.toml").unwrap();
        assert_eq!(
            plan.server.monitored_bytes,
            vec![1024, 20 * 1024, 500 * 1024]
        );
        assert_eq!(plan.paths.long_one_way_ms, 32.0);
        assert!(plan.server_load.low_users < plan.server_load.high_users);
        let quick = plan.mode(true);
        let per_test = quick.test_s + quick.settle_s + 2.0;
        assert!(
            quick.ramp_s + plan.tests() as f64 * per_test < 150.0,
            "a quick plan of a few minutes"
        );
    }

    #[test]
    fn bad_plans_name_the_key() {
        let bad = SHIPPED.replacen("cpu_cores =", "cpu_cores = -1 #", 1);
        let error = TcpevalPlan::from_toml(&bad, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("server.cpu_cores"), "{error}");
        let bad = SHIPPED.replacen("[experiment]", "[experiment]\nextra = 1", 1);
        assert!(TcpevalPlan::from_toml(&bad, "p.toml").is_err());
        let bad = SHIPPED.replacen("monitored_bytes = [", "monitored_bytes = [1024, ", 1);
        let error = TcpevalPlan::from_toml(&bad, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("twice"), "{error}");
    }
}
