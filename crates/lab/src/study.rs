//! What a study is: a paper, its embedded scenario files, and a run that
//! turns scenario files into result rows and the paper's statements set
//! beside our measurements.

use crate::LabError;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::path::PathBuf;

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

/// A scenario file's text and where it came from (a path, for messages).
#[derive(Clone, Copy, Debug)]
pub struct ScenarioFile<'a> {
    pub origin: &'a str,
    pub text: &'a str,
}

/// How to run a study and where its results go.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Fewer repetitions and a shorter horizon (each scenario says how many).
    pub quick: bool,
    /// Print the study's tables on stdout (off when the caller prints JSON).
    pub print_tables: bool,
    /// The study writes its CSV and SVG files under `out/<study name>`.
    pub out: PathBuf,
}

/// What one run of a study produced.
#[derive(Clone, Debug)]
pub struct StudyOutcome {
    /// The study's result rows.
    pub rows: serde_json::Value,
    /// The paper's statements beside ours.
    pub checks: Vec<Check>,
    /// The study's own JSON document, pretty-printed (what `vantage
    /// reproduce <study> --json` prints).
    pub document: String,
    /// The study's part of the document printed for every study (see
    /// [`crate::report::all_studies_document`]).
    pub summary: serde_json::Value,
}

/// A paper's experiments, rerun in a simulator and compared with the paper.
pub trait Study: Sync {
    /// The name `vantage reproduce` takes and scenario files give in
    /// `scenario.study`.
    fn name(&self) -> &'static str;
    /// The paper's file under `papers/`.
    fn paper(&self) -> &'static str;
    /// The embedded `scenarios/<study>/*.toml` files: (origin, text).
    fn scenario_files(&self) -> &'static [(&'static str, &'static str)];
    /// Runs the given scenario files: prints the study's tables and checks
    /// when `options.print_tables`, writes CSV and SVG files under
    /// `options.out/<name>`, and returns the rows and checks.
    fn run(&self, files: &[ScenarioFile], options: &RunOptions) -> Result<StudyOutcome, LabError>;

    /// [`Study::run`] on the embedded scenario files.
    fn reproduce(&self, options: &RunOptions) -> Result<StudyOutcome, LabError> {
        let files: Vec<ScenarioFile> = self
            .scenario_files()
            .iter()
            .map(|(origin, text)| ScenarioFile { origin, text })
            .collect();
        self.run(&files, options)
    }
}

/// The progress bar over a study's `runs` runs; `label` follows the count
/// (a study's name, or `{msg}` for a message set as the runs go).
pub(crate) fn runs_progress_bar(runs: u64, label: &str) -> ProgressBar {
    ProgressBar::new(runs).with_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} runs {label} (eta {{eta}})"
        ))
        .expect("progress template is valid"),
    )
}
