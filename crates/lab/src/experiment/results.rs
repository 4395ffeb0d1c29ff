//! The experiment's results: one row per run and source (live, the
//! simulator on the same arrivals, the simulator's long run), and the whole
//! report as written to `experiment.json`.

use std::path::PathBuf;

use crate::Check;
use serde::Serialize;
use vantage_sim::syn::metrics::{Summary, Tally};
use vantage_testbed::syn_admission::SynAdmissionReport;

use super::gate_log::GateLogTotals;
use super::plan::{FilterModel, PlannedRun};
use super::tally::Outcomes;
use super::workload::WorkloadStats;

/// One line of results.
#[derive(Clone, Debug, Serialize)]
pub struct ResultRow {
    pub profile: String,
    pub variant: String,
    pub label: String,
    /// `live`, `sim-same-arrivals` or `sim-long`.
    pub source: String,
    /// The simulator's filter (sim rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<Outcomes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<SynAdmissionReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_log: Option<GateLogTotals>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whole experiment output.
#[derive(Serialize)]
pub struct ExperimentReport {
    pub file: String,
    pub title: String,
    pub quick: bool,
    pub delay_cost: f64,
    pub reject_cost: f64,
    pub sim_repetitions: u32,
    pub sim_horizon_s: f64,
    pub workload: Vec<WorkloadStats>,
    pub rows: Vec<ResultRow>,
    pub checks: Vec<Check>,
    pub notes: Vec<String>,
}

/// A simulator row of `run`.
pub fn sim_row(
    run: &PlannedRun,
    model: &FilterModel,
    source: &str,
    tally: &Tally,
    h: f64,
    r: f64,
) -> ResultRow {
    ResultRow {
        profile: run.profile.clone(),
        variant: run.variant.id.clone(),
        label: run.variant.label.clone(),
        source: source.into(),
        model: Some(model.describe.clone()),
        summary: Some(tally.summary(h, r)),
        outcomes: None,
        dir: None,
        gate: None,
        gate_log: None,
        problems: Vec::new(),
        error: None,
    }
}
