//! Where a run's results go and the record of how they were made: every
//! results folder carries a `manifest.json` (version and commit, command
//! line, quick or full, the seeds and repetitions its scenario files set,
//! threads, start time, duration, machine). Quick runs write under
//! `<out>/quick/`, so a quick run never overwrites a full run's files; `sim`
//! writes under `<out>/sim/<scenario file stem>/` and refuses a folder that
//! holds another scenario's results. With `--check`, a run whose papers'
//! statements do not all hold ends with [`STATEMENT_FAILED_STATUS`].

use crate::{Check, LabError, ScenarioFile};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The file name of the record in every results folder.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The exit status of a `--check` run in which a statement does not hold.
pub const STATEMENT_FAILED_STATUS: i32 = 1;

/// The scenario keys (at any depth) whose values the manifest copies.
const RECORDED_KEYS: [&str; 4] = [
    "seed",
    "repetitions",
    "quick_repetitions",
    "sim_repetitions",
];

/// The folder a run writes into: `out`, or `out/quick` for a quick run.
pub fn results_root(out: &Path, quick: bool) -> PathBuf {
    if quick {
        out.join("quick")
    } else {
        out.to_path_buf()
    }
}

/// The folder `vantage sim` writes one scenario file's results into:
/// `<results root>/sim/<file stem>`. An error when that folder already
/// holds files that are not the results of this same file (by canonical
/// path), so one scenario's run never overwrites another's.
pub fn sim_root(out: &Path, quick: bool, scenario: &Path) -> Result<PathBuf, LabError> {
    let stem = scenario
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .unwrap_or("scenario");
    let dir = results_root(out, quick).join("sim").join(stem);
    let this = canonical(scenario);
    let holds_files = std::fs::read_dir(&dir)
        .map(|mut entries| entries.next().is_some())
        .unwrap_or(false);
    if holds_files {
        let recorded = std::fs::read_to_string(dir.join(MANIFEST_FILE))
            .ok()
            .and_then(|text| serde_json::from_str::<ScenarioOfManifest>(&text).ok())
            .and_then(|m| m.scenario_file);
        if recorded.as_deref() != Some(this.as_str()) {
            return Err(LabError::ResultsOfAnotherScenario {
                dir,
                scenario: this,
                recorded,
            });
        }
    }
    Ok(dir)
}

/// The one field of a manifest [`sim_root`] reads back.
#[derive(Deserialize)]
struct ScenarioOfManifest {
    scenario_file: Option<String>,
}

fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// The exit status a `--check` run ends with: 0 when every statement holds,
/// [`STATEMENT_FAILED_STATUS`] otherwise.
pub fn check_status<'a>(checks: impl IntoIterator<Item = &'a Check>) -> i32 {
    if checks.into_iter().all(|c| c.holds) {
        0
    } else {
        STATEMENT_FAILED_STATUS
    }
}

/// The start of a run: what every manifest it writes shares.
#[derive(Clone, Debug)]
pub struct RunRecord {
    command_line: Vec<String>,
    quick: bool,
    started_at: String,
    started: Instant,
    scenario_file: Option<String>,
}

impl RunRecord {
    /// Starts the record now. `scenario_file` is the file `vantage sim`
    /// runs (none for `reproduce`).
    pub fn start(command_line: Vec<String>, quick: bool, scenario_file: Option<&Path>) -> Self {
        RunRecord {
            command_line,
            quick,
            started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            started: Instant::now(),
            scenario_file: scenario_file.map(canonical),
        }
    }

    /// The manifest of a folder holding the results of `studies`, each with
    /// the scenario files it ran; the duration is the time since
    /// [`RunRecord::start`].
    pub fn manifest(&self, studies: &[(&str, &[ScenarioFile])]) -> Manifest {
        Manifest {
            vantage_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: env!("VANTAGE_GIT_COMMIT").to_string(),
            command_line: self.command_line.clone(),
            mode: if self.quick { "quick" } else { "full" }.to_string(),
            scenario_file: self.scenario_file.clone(),
            threads: rayon::current_num_threads(),
            started_at: self.started_at.clone(),
            duration_s: self.started.elapsed().as_secs_f64(),
            machine: Machine::this(),
            studies: studies
                .iter()
                .map(|(name, files)| StudyRecord {
                    study: (*name).to_string(),
                    scenarios: files.iter().map(ScenarioRecord::of).collect(),
                })
                .collect(),
        }
    }
}

/// The record in a results folder (`manifest.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub vantage_version: String,
    /// `git rev-parse HEAD` at build time, "unknown" without git.
    pub git_commit: String,
    pub command_line: Vec<String>,
    /// "quick" or "full".
    pub mode: String,
    /// The scenario file `vantage sim` ran (canonical path); none for
    /// `reproduce`.
    pub scenario_file: Option<String>,
    /// Worker threads of the run.
    pub threads: usize,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub duration_s: f64,
    pub machine: Machine,
    pub studies: Vec<StudyRecord>,
}

impl Manifest {
    /// Writes the manifest as `dir/manifest.json` (creating `dir`).
    pub fn write(&self, dir: &Path) -> Result<(), LabError> {
        crate::error::create_dir(dir)?;
        let path = dir.join(MANIFEST_FILE);
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(&path, text + "\n").map_err(|source| LabError::WriteFile { path, source })
    }
}

/// A study and the scenario files it ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StudyRecord {
    pub study: String,
    pub scenarios: Vec<ScenarioRecord>,
}

/// A scenario file and the seeds and repetitions it sets.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScenarioRecord {
    pub origin: String,
    /// Every `seed`, `repetitions`, `quick_repetitions` and
    /// `sim_repetitions` key of the file, by dotted path, as the file gives
    /// it; a key the file leaves out takes the study's default (see
    /// `docs/scenarios.md`) and is not listed.
    pub settings: serde_json::Map<String, serde_json::Value>,
}

impl ScenarioRecord {
    fn of(file: &ScenarioFile) -> Self {
        let mut settings = serde_json::Map::new();
        if let Ok(value) = toml::from_str::<toml::Value>(file.text) {
            collect_settings(&value, "", &mut settings);
        }
        ScenarioRecord {
            origin: file.origin.to_string(),
            settings,
        }
    }
}

fn collect_settings(
    value: &toml::Value,
    prefix: &str,
    out: &mut serde_json::Map<String, serde_json::Value>,
) {
    match value {
        toml::Value::Table(table) => {
            for (key, item) in table {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                if RECORDED_KEYS.contains(&key.as_str()) {
                    if let Ok(json) = serde_json::to_value(item) {
                        out.insert(path.clone(), json);
                    }
                }
                collect_settings(item, &path, out);
            }
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_settings(item, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The machine a run ran on; a field Linux does not give is "unknown".
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub kernel_release: String,
    pub cpu_count: usize,
    pub cpu_model: String,
}

impl Machine {
    fn this() -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|s| s.trim().to_string())
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "unknown".to_string())
        };
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .filter_map(|line| line.split_once(':'))
                    .find(|(key, _)| key.trim() == "model name")
                    .map(|(_, model)| model.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        Machine {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel_release: read("/proc/sys/kernel/osrelease"),
            cpu_count: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(holds: bool) -> Check {
        Check::statement("fig", "p", "c", "1", "1").relation("c", holds)
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("vantage-prov-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn check_status_is_zero_only_when_every_statement_holds() {
        assert_eq!(check_status(&[check(true), check(true)]), 0);
        assert_eq!(
            check_status(&[check(true), check(false)]),
            STATEMENT_FAILED_STATUS
        );
        assert_ne!(STATEMENT_FAILED_STATUS, 0);
        assert_eq!(check_status(&[]), 0);
    }

    #[test]
    fn quick_runs_go_under_quick() {
        let out = Path::new("results");
        assert_eq!(results_root(out, false), Path::new("results"));
        assert_eq!(results_root(out, true), Path::new("results/quick"));
    }

    #[test]
    fn manifest_is_written_and_parses_with_the_scenario_settings() {
        let dir = temp_dir("manifest");
        let text =
            "[scenario]\nseed = 7\nrepetitions = 30\nquick_repetitions = 3\n[[runs]]\nseed = 9\n";
        let files = [ScenarioFile {
            origin: "scenarios/x/a.toml",
            text,
        }];
        let record = RunRecord::start(vec!["vantage".into(), "sim".into()], true, None);
        record
            .manifest(&[("abacus", files.as_slice())])
            .write(&dir)
            .unwrap();
        let written = std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
        let back: Manifest = serde_json::from_str(&written).unwrap();
        assert_eq!(back.mode, "quick");
        assert_eq!(back.command_line, ["vantage", "sim"]);
        assert!(back.threads >= 1);
        assert!(chrono::DateTime::parse_from_rfc3339(&back.started_at).is_ok());
        assert!(back.started_at.ends_with('Z'));
        assert!(back.duration_s >= 0.0);
        assert!(!back.git_commit.is_empty());
        assert_eq!(back.vantage_version, env!("CARGO_PKG_VERSION"));
        let settings = &back.studies[0].scenarios[0].settings;
        assert_eq!(settings["scenario.seed"], 7);
        assert_eq!(settings["scenario.repetitions"], 30);
        assert_eq!(settings["scenario.quick_repetitions"], 3);
        assert_eq!(settings["runs[0].seed"], 9);
        assert_eq!(settings.len(), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sim_refuses_a_folder_holding_another_scenarios_results() {
        let dir = temp_dir("sim");
        let (a, b) = (dir.join("one/same.toml"), dir.join("two/same.toml"));
        for file in [&a, &b] {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, "[scenario]\n").unwrap();
        }
        let out = dir.join("results");
        let target = sim_root(&out, false, &a).unwrap();
        assert_eq!(target, out.join("sim/same"));
        // Empty or missing: free for any scenario.
        assert!(sim_root(&out, false, &b).is_ok());
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("fig.csv"), "x\n").unwrap();
        // Files without a manifest: nobody's, refused.
        assert!(sim_root(&out, false, &a).is_err());
        RunRecord::start(vec![], false, Some(&a))
            .manifest(&[])
            .write(&target)
            .unwrap();
        assert_eq!(sim_root(&out, false, &a).unwrap(), target);
        let err = sim_root(&out, false, &b).unwrap_err();
        assert!(
            matches!(err, LabError::ResultsOfAnotherScenario { .. }),
            "{err}"
        );
        // Quick runs of either go elsewhere.
        assert_eq!(
            sim_root(&out, true, &b).unwrap(),
            out.join("quick/sim/same")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
