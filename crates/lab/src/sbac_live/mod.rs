//! The SBAC paper's Table 2 with real clients (Cherkasova and Phaal,
//! `session-admission-control.txt`, Sections 3–13): session clients
//! ([`client`]) drive a backend whose CPU is capped by a cgroup, straight
//! or through an admission peer — nginx `limit_conn`/`limit_req`, HAProxy
//! `maxconn` with its queue, or `vantage proxy` with each SBAC strategy —
//! under load patterns given as percent of the backend's capacity, which is
//! measured in the run. The same workload is run in the session simulator
//! (`studies::sbac`), and the paper's orderings are judged on both.
//!
//! Departures: the backend is nginx serving one small page (service times
//! are not the paper's exponential ones); the patterns are compressed to
//! minutes (quick: a step, with a shorter think time); see
//! `docs/sbac-live.md`.

pub mod client;
pub mod plan;
mod report;
mod run;

pub use plan::{SbacLivePlan, VariantKind, VariantPlan};
pub use report::{render, write_results, Comparison, LiveReport, LiveRow};
pub use run::{preflight, run, LiveError};

use std::path::{Path, PathBuf};

use crate::live_experiment::{read_plan_file, ExperimentError, PlanFile};
use crate::provenance::{results_root, RunRecord};
use crate::ScenarioFile;

/// Why `vantage testbed sbac` failed.
pub type SbacLiveError = ExperimentError<plan::PlanError, LiveError>;

/// Reads the plan `file`, runs it (`quick`: its `[quick]` settings) and
/// writes the results folder (`OUT` or `OUT/quick`): `report.json`,
/// `table.md`, `manifest.json` and each run's logs. Returns the report and
/// the folder.
pub fn run_file(
    file: &Path,
    quick: bool,
    out: &Path,
    command_line: Vec<String>,
    progress: &dyn Fn(&str),
) -> Result<(LiveReport, PathBuf), SbacLiveError> {
    let PlanFile { origin, text } = read_plan_file(file)?;
    let plan = SbacLivePlan::from_toml(&text, &origin).map_err(SbacLiveError::Plan)?;
    let record = RunRecord::start(command_line, quick, Some(file));
    let dir = results_root(out, quick);
    let report = run(&plan, quick, &dir.join("runs"), progress).map_err(SbacLiveError::Live)?;
    write_results(
        &report,
        &dir,
        &record,
        ScenarioFile {
            origin: &origin,
            text: &text,
        },
    )?;
    Ok((report, dir))
}
