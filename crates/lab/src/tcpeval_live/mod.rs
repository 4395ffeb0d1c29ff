//! tcpeval's Section 4 experiment on the testbed (Barford and Crovella,
//! "Critical Path Analysis of TCP Transactions", Section 4.1; Figures 4–8):
//! nginx serves the monitored files of 1 KB, 20 KB and 500 KB and a SURGE
//! file set; SURGE users load it from its own namespace (no WAN), few or
//! many, its CPU capped ([`vantage_testbed::cgroup::CpuCap`]) so that the
//! many keep it near overload; monitored HTTP/1.0 clients fetch one file
//! size at a time over a long and a short emulated path whose bottleneck
//! carries light or heavy cross traffic ([`traffic`]). Both ends are
//! captured and every transaction is analysed with [`vantage_cpa`]; the
//! profiles are averaged per test (file size × server load × network load
//! × path) as in Figures 4, 6 and 7, and the critical-path lengths
//! histogrammed as in Figure 8.
//!
//! Departures (`docs/tcpeval-live.md`): one machine, so one clock (the
//! paper's NTP offsets of about 1 ms are zero here); the network load is
//! cross traffic through a rate-limited bottleneck rather than the time of
//! day; the paper's 520 SURGE users near overload become a CPU cap on
//! nginx; our clients start with 10 segments (RFC 6928), not 1–2, so the
//! paper's packet counts are judged beside counts expected for ours.

mod plan;
mod plot;
mod report;
mod run;
pub mod traffic;

pub use plan::{Mode, TcpevalPlan};
pub use report::{
    checks, expected_packets, render, write_results, PathLengths, TcpevalReport, TestRow,
};
pub use run::{preflight, run, runs_dir, tag, Level, LiveError, PathName};

use std::path::{Path, PathBuf};

use crate::live_experiment::{read_plan_file, ExperimentError, PlanFile};
use crate::provenance::{results_root, RunRecord};
use crate::ScenarioFile;

/// Why `vantage testbed tcpeval` failed.
pub type TcpevalLiveError = ExperimentError<plan::PlanError, LiveError>;

/// Reads the plan `file`, runs it (`quick`: its `[quick]` settings) and
/// writes the results folder (`OUT` or `OUT/quick`): `report.json`,
/// `table.md`, `figure4.svg`, `manifest.json` and the captures under
/// `runs/`.
pub fn run_file(
    file: &Path,
    quick: bool,
    out: &Path,
    command_line: Vec<String>,
    progress: &dyn Fn(&str),
) -> Result<(TcpevalReport, PathBuf), TcpevalLiveError> {
    let PlanFile { origin, text } = read_plan_file(file)?;
    let plan = TcpevalPlan::from_toml(&text, &origin).map_err(TcpevalLiveError::Plan)?;
    let record = RunRecord::start(command_line, quick, Some(file));
    let dir = results_root(out, quick);
    let report = run(&plan, quick, &runs_dir(&dir), progress).map_err(TcpevalLiveError::Live)?;
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
