//! The studies `vantage reproduce` runs: each a set of embedded scenario
//! files and the paper's stated results to compare against. [`certes`]
//! has its own scenario format and runner (it drives
//! [`crate::webserver`], not the SYN-filter simulator of [`Study`]).

pub mod abacus;
pub mod certes;
pub mod sbac;

use crate::scenario::{Scenario, ScenarioError};
use crate::study::ScenarioResult;
use serde::Serialize;

/// One of the paper's statements set beside our measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub figure: String,
    pub profile: String,
    /// What the paper states.
    pub claim: String,
    /// The paper's figure (a number, or a relation when it gives none).
    pub paper: String,
    /// Our measurement.
    pub ours: String,
    /// Ours minus the paper's, where both are numbers.
    pub difference: Option<f64>,
    /// Whether our result shows what the paper states.
    pub holds: bool,
}

/// A study: its name, scenarios and comparison with the paper.
pub struct Study {
    pub name: &'static str,
    pub paper: &'static str,
    scenario_files: &'static [(&'static str, &'static str)],
    checks: fn(&[(Scenario, ScenarioResult)]) -> Vec<Check>,
}

impl Study {
    /// Parses the embedded scenario files.
    pub fn scenarios(&self) -> Result<Vec<Scenario>, ScenarioError> {
        self.scenario_files
            .iter()
            .map(|(origin, text)| Scenario::from_toml(text, origin))
            .collect()
    }

    /// The paper's statements beside our results.
    pub fn checks(&self, results: &[(Scenario, ScenarioResult)]) -> Vec<Check> {
        (self.checks)(results)
    }
}

/// Every study, in the order `vantage reproduce` runs them.
pub fn all() -> Vec<Study> {
    vec![abacus::study()]
}
