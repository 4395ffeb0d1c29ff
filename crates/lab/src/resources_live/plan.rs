//! The plan file of the live socket-buffer experiment
//! (`scenarios/proxy/autotune-scale.toml`).

use serde::{Deserialize, Serialize};
use vantage_core::config::Checker;

/// Most client namespaces (paths) a plan may list: one per namespace, the
/// step path takes one more.
pub const MAX_PATHS: usize = 64;
/// Most concurrent downloads a run may open.
pub const MAX_DOWNLOADS: u32 = 20_000;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSection {
    pub name: String,
    pub seed: u64,
}

/// The backend: nginx in the server namespace serving one large object.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendPlan {
    /// Size of the object every download fetches, bytes; a connection that
    /// finishes it asks for it again on the same connection.
    pub object_bytes: u64,
}

/// One client namespace and its path through the emulator.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathPlan {
    /// Round-trip propagation delay, ms (each direction gets half).
    pub rtt_ms: f64,
    /// Random loss each way, percent.
    pub loss_pct: f64,
    /// Bottleneck rate each way, Mbit/s.
    pub rate_mbit: f64,
    /// Concurrent downloads from this namespace.
    pub downloads: u32,
}

/// Bottleneck queue: 200 ms at the link's rate in 1500-byte packets,
/// within [64, 1000] (the emulator's default 1,000 packets would be 12 s
/// of queueing at 1 Mbit/s).
pub fn queue_packets(rate_mbit: f64) -> u32 {
    ((rate_mbit * 1e6 * 0.2 / (1500.0 * 8.0)).round() as u32).clamp(64, 1000)
}

impl PathPlan {
    /// Packets the path holds at once: its bandwidth-delay product plus
    /// its bottleneck queue, in 1500-byte packets.
    pub fn packets_held(&self) -> f64 {
        self.rtt_ms / 1000.0 * self.rate_mbit * 1e6 / (1500.0 * 8.0)
            + f64::from(queue_packets(self.rate_mbit))
    }
}

/// How the proxy sizes socket buffers in one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantPlan {
    /// Row name.
    pub name: String,
    /// `resources.mode`: autotune, fixed, ssbt or ssbt+conn.
    pub mode: String,
    /// fixed: `send_bytes`, `receive_bytes`.
    pub send_bytes: Option<u64>,
    pub receive_bytes: Option<u64>,
    /// ssbt: the pool, bytes.
    pub pool_bytes: Option<u64>,
    /// ssbt: the pool as this fraction of the peak memory the `autotune`
    /// variant's proxy sockets took in the same invocation (that variant
    /// must run first).
    pub pool_fraction_of_autotune: Option<f64>,
}

/// The timing of every run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    /// Downloads run this long after the last one started, seconds.
    pub duration_s: f64,
    /// Downloads start evenly over this span, seconds.
    pub ramp_s: f64,
    /// A download with no byte for this long is stalled: a failure.
    pub stall_s: f64,
    /// Memory sampling period, ms.
    pub sample_ms: u64,
    /// The proxy's control interval (`resources.interval_ms`).
    pub interval_ms: u64,
    /// `resources.idle_buffer_half_life_ms` of the ssbt variants.
    pub idle_buffer_half_life_ms: u64,
}

/// What `--quick` replaces.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickPlan {
    pub duration_s: f64,
    pub ramp_s: f64,
    /// Every path's downloads are scaled by this (at least one each).
    pub downloads_scale: f64,
    pub object_bytes: u64,
    /// The step experiment's phase lengths are scaled by this.
    pub step_scale: f64,
}

/// The step responses: one more client namespace, whose loss changes.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepPlan {
    pub rtt_ms: f64,
    pub rate_mbit: f64,
    pub downloads: u32,
    /// The object the step's downloads fetch, bytes.
    pub object_bytes: u64,
    pub loss_before_pct: f64,
    pub loss_after_pct: f64,
    /// Downloading at `loss_before_pct`, seconds.
    pub before_s: f64,
    /// Downloading at `loss_after_pct`, seconds; then the downloads finish
    /// their object and go idle.
    pub after_s: f64,
    /// The connections stay idle this long (their buffers decay), seconds.
    pub idle_s: f64,
    /// Downloading again on the same connections, seconds.
    pub reuse_s: f64,
    /// The step run's proxy pool, bytes (large: the step is E-ATBT's, not
    /// the pool's).
    pub pool_bytes: u64,
}

/// The whole plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourcesLivePlan {
    pub experiment: ExperimentSection,
    pub backend: BackendPlan,
    pub run: RunPlan,
    pub path: Vec<PathPlan>,
    pub variant: Vec<VariantPlan>,
    pub step: StepPlan,
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
    pub object_bytes: u64,
    pub paths: Vec<PathPlan>,
    pub step: StepPlan,
}

impl ResourcesLivePlan {
    /// Parses and checks a plan.
    pub fn from_toml(text: &str, origin: &str) -> Result<ResourcesLivePlan, PlanError> {
        let checker = Checker::<PlanError>::new(origin, text);
        let plan: ResourcesLivePlan = checker.deserialize()?;
        plan.validate(&checker)?;
        Ok(plan)
    }

    fn validate(&self, checker: &Checker<'_, PlanError>) -> Result<(), PlanError> {
        let fail = |key: &str, problem: String| checker.fail(key, problem);
        let range = |key: &str, v: f64, lo: f64, hi: f64| checker.range(key, v, lo, hi).map(|_| ());
        let gib = (1u64 << 30) as f64;
        range(
            "backend.object_bytes",
            self.backend.object_bytes as f64,
            1024.0,
            gib,
        )?;
        range(
            "quick.object_bytes",
            self.quick.object_bytes as f64,
            1024.0,
            gib,
        )?;
        range("run.duration_s", self.run.duration_s, 1.0, 3600.0)?;
        range("quick.duration_s", self.quick.duration_s, 1.0, 3600.0)?;
        range("run.ramp_s", self.run.ramp_s, 0.0, 600.0)?;
        range("quick.ramp_s", self.quick.ramp_s, 0.0, 600.0)?;
        range("run.stall_s", self.run.stall_s, 0.5, 600.0)?;
        range("run.sample_ms", self.run.sample_ms as f64, 50.0, 10_000.0)?;
        range(
            "run.interval_ms",
            self.run.interval_ms as f64,
            50.0,
            60_000.0,
        )?;
        range(
            "run.idle_buffer_half_life_ms",
            self.run.idle_buffer_half_life_ms as f64,
            1.0,
            3_600_000.0,
        )?;
        range(
            "quick.downloads_scale",
            self.quick.downloads_scale,
            1e-4,
            1.0,
        )?;
        range("quick.step_scale", self.quick.step_scale, 0.05, 1.0)?;
        if self.path.is_empty() || self.path.len() > MAX_PATHS {
            return Err(fail(
                "path",
                format!("must list 1 to {MAX_PATHS} paths, got {}", self.path.len()),
            ));
        }
        let mut total = 0u64;
        for p in &self.path {
            range("path.rtt_ms", p.rtt_ms, 0.0, 2000.0)?;
            range("path.loss_pct", p.loss_pct, 0.0, 50.0)?;
            range("path.rate_mbit", p.rate_mbit, 0.01, 10_000.0)?;
            range(
                "path.downloads",
                p.downloads as f64,
                1.0,
                MAX_DOWNLOADS as f64,
            )?;
            total += u64::from(p.downloads);
        }
        if total > u64::from(MAX_DOWNLOADS) {
            return Err(fail(
                "path.downloads",
                format!("add up to {total}, more than {MAX_DOWNLOADS}"),
            ));
        }
        if self.variant.is_empty() {
            return Err(fail("variant", "must list at least one variant".into()));
        }
        for (i, v) in self.variant.iter().enumerate() {
            let key = |k: &str| format!("variant[{i}].{k}");
            match v.mode.as_str() {
                "autotune" => {}
                "fixed" => {
                    if v.send_bytes.is_none() || v.receive_bytes.is_none() {
                        return Err(fail(
                            &key("mode"),
                            "fixed needs send_bytes and receive_bytes".into(),
                        ));
                    }
                }
                "ssbt" | "ssbt+conn" => match (v.pool_bytes, v.pool_fraction_of_autotune) {
                    (Some(_), None) => {}
                    (None, Some(f)) => {
                        range(&key("pool_fraction_of_autotune"), f, 0.01, 10.0)?;
                        let autotune_before =
                            self.variant[..i].iter().any(|w| w.mode == "autotune");
                        if !autotune_before {
                            return Err(fail(
                                &key("pool_fraction_of_autotune"),
                                "needs an autotune variant listed before it".into(),
                            ));
                        }
                    }
                    _ => {
                        return Err(fail(
                            &key("mode"),
                            "ssbt needs exactly one of pool_bytes, pool_fraction_of_autotune"
                                .into(),
                        ))
                    }
                },
                other => {
                    return Err(fail(
                        &key("mode"),
                        format!("{other:?} is not autotune, fixed, ssbt or ssbt+conn"),
                    ))
                }
            }
        }
        let s = &self.step;
        range("step.rtt_ms", s.rtt_ms, 0.0, 2000.0)?;
        range("step.rate_mbit", s.rate_mbit, 0.01, 10_000.0)?;
        range("step.downloads", s.downloads as f64, 1.0, 256.0)?;
        range("step.object_bytes", s.object_bytes as f64, 1024.0, gib)?;
        range("step.loss_before_pct", s.loss_before_pct, 0.0, 50.0)?;
        range("step.loss_after_pct", s.loss_after_pct, 0.0, 50.0)?;
        for (k, v) in [
            ("step.before_s", s.before_s),
            ("step.after_s", s.after_s),
            ("step.idle_s", s.idle_s),
            ("step.reuse_s", s.reuse_s),
        ] {
            range(k, v, 0.5, 3600.0)?;
        }
        range("step.pool_bytes", s.pool_bytes as f64, 65536.0, 1e12)?;
        Ok(())
    }

    /// The run settings of the chosen mode.
    pub fn mode(&self, quick: bool) -> Mode {
        if !quick {
            return Mode {
                quick,
                duration_s: self.run.duration_s,
                ramp_s: self.run.ramp_s,
                object_bytes: self.backend.object_bytes,
                paths: self.path.clone(),
                step: self.step.clone(),
            };
        }
        let scale = self.quick.downloads_scale;
        let paths = self
            .path
            .iter()
            .map(|p| PathPlan {
                downloads: ((f64::from(p.downloads) * scale).round() as u32).max(1),
                ..p.clone()
            })
            .collect();
        let k = self.quick.step_scale;
        let step = StepPlan {
            before_s: self.step.before_s * k,
            after_s: self.step.after_s * k,
            idle_s: self.step.idle_s * k,
            reuse_s: self.step.reuse_s * k,
            ..self.step.clone()
        };
        Mode {
            quick,
            duration_s: self.quick.duration_s,
            ramp_s: self.quick.ramp_s,
            object_bytes: self.quick.object_bytes,
            paths,
            step,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_plan_parses_and_quick_scales_it() {
        let text = include_str!("../../../../scenarios/proxy/autotune-scale.toml");
        let plan = ResourcesLivePlan::from_toml(text, "autotune-scale.toml").unwrap();
        let full = plan.mode(false);
        let quick = plan.mode(true);
        let total = |m: &Mode| m.paths.iter().map(|p| p.downloads).sum::<u32>();
        assert!(total(&full) >= 2000, "the issue asks for ≥ 2,000 downloads");
        assert!(total(&quick) < total(&full));
        assert!(quick.paths.iter().all(|p| p.downloads >= 1));
    }

    #[test]
    fn the_send_buffer_control_has_the_main_plans_load() {
        let main = ResourcesLivePlan::from_toml(
            include_str!("../../../../scenarios/proxy/autotune-scale.toml"),
            "autotune-scale.toml",
        )
        .unwrap();
        let control = ResourcesLivePlan::from_toml(
            include_str!("../../../../scenarios/proxy/autotune-scale-sndbuf.toml"),
            "autotune-scale-sndbuf.toml",
        )
        .unwrap();
        let load = |p: &ResourcesLivePlan| {
            p.mode(false)
                .paths
                .iter()
                .map(|q| (q.rtt_ms, q.loss_pct, q.rate_mbit, q.downloads))
                .collect::<Vec<_>>()
        };
        assert_eq!(load(&main), load(&control));
        let sends: Vec<Option<u64>> = control.variant.iter().map(|v| v.send_bytes).collect();
        assert_eq!(sends, vec![None, Some(4096), Some(32768), Some(262144)]);
    }

    #[test]
    fn a_path_holds_its_bandwidth_delay_product_and_its_queue() {
        let path = PathPlan {
            rtt_ms: 5.0,
            loss_pct: 0.0,
            rate_mbit: 50.0,
            downloads: 680,
        };
        // 50 Mbit/s: 833 packets queue 200 ms, 20.8 are in flight at 5 ms.
        assert_eq!(queue_packets(50.0), 833);
        assert!((path.packets_held() - 853.83).abs() < 0.01);
        // The queue's bounds.
        assert_eq!((queue_packets(1.0), queue_packets(100.0)), (64, 1000));
    }

    #[test]
    fn bad_plans_name_the_key() {
        let text = include_str!("../../../../scenarios/proxy/autotune-scale.toml");
        let bad = text.replacen("mode = \"fixed\"", "mode = \"bsd\"", 1);
        let error = ResourcesLivePlan::from_toml(&bad, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("mode") && error.contains("bsd"), "{error}");
        let bad = text.replacen("duration_s =", "duration_s = -1 #", 1);
        let error = ResourcesLivePlan::from_toml(&bad, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("run.duration_s"), "{error}");
        let line = bad
            .lines()
            .position(|l| l.starts_with("duration_s = -1"))
            .map(|i| i + 1);
        assert!(
            line.is_some_and(|n| error.starts_with(&format!("p.toml:{n}: "))),
            "the error names the file and the key's line: {error}"
        );
        let bad = text.replacen("[experiment]", "[experiment]\nextra = 1", 1);
        assert!(ResourcesLivePlan::from_toml(&bad, "p.toml").is_err());
    }
}
