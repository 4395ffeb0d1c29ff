//! The proxy thesis's socket-buffer management against Linux autotuning,
//! at scale, with real sockets (issue 24's Experiment 2; the thesis is
//! `proxy-resource-management.txt`, Sections 3 and 5): many concurrent
//! downloads ([`client`]) from client namespaces behind mixed WAN paths
//! through `vantage proxy` to nginx serving a large object, the same load
//! under each `[resources]` mode; the kernel TCP memory of the proxy's own
//! sockets sampled from outside its code ([`sampler`]); then the step
//! responses of E-ATBT to a loss change and of idle buffers to reuse.
//!
//! Departures: the thesis had no autotuning to compare with (FreeBSD 4.6);
//! the pool-below-autotune case runs SSBT with a pool set to a fraction of
//! the autotune run's measured peak instead of lowering the host's
//! `net.ipv4.tcp_mem` (which would squeeze every process on the machine);
//! see `docs/resources-live.md`.

pub mod client;
pub mod downloads;
pub mod plan;
mod report;
mod run;
pub mod sampler;

pub use plan::{ResourcesLivePlan, VariantPlan};
pub use report::{render, write_results, ResourcesReport, RunRow, StepReport, WanSummary};
pub use run::{preflight, run, tag, LiveError};

use std::path::{Path, PathBuf};

use crate::live_experiment::{read_plan_file, ExperimentError, PlanFile};
use crate::provenance::{results_root, RunRecord};
use crate::ScenarioFile;

/// Why `vantage testbed resources` failed.
pub type ResourcesLiveError = ExperimentError<plan::PlanError, LiveError>;

/// Reads the plan `file`, runs it (`quick`: its `[quick]` settings) and
/// writes the results folder (`OUT` or `OUT/quick`): `report.json`,
/// `downloads.jsonl`, `table.md`, `memory.svg`, `manifest.json` and each
/// run's files.
pub fn run_file(
    file: &Path,
    quick: bool,
    out: &Path,
    command_line: Vec<String>,
    progress: &dyn Fn(&str),
) -> Result<(ResourcesReport, PathBuf), ResourcesLiveError> {
    let PlanFile { origin, text } = read_plan_file(file)?;
    let plan = ResourcesLivePlan::from_toml(&text, &origin).map_err(ResourcesLiveError::Plan)?;
    let record = RunRecord::start(command_line, quick, Some(file));
    let dir = results_root(out, quick);
    let report =
        run(&plan, quick, &dir.join("runs"), progress).map_err(ResourcesLiveError::Live)?;
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
