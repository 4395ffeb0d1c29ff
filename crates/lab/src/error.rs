//! What can go wrong running a study or writing its results.

use std::path::PathBuf;
use thiserror::Error;
use vantage_sim::syn::scenario::ScenarioError;

#[derive(Debug, Error)]
pub enum LabError {
    #[error("unknown study `{name}` (known: {known})")]
    UnknownStudy { name: String, known: String },
    #[error("{origin}: `scenario.study` must be {allowed}, got \"{name}\"")]
    UnknownStudyInFile {
        origin: String,
        name: String,
        allowed: String,
    },
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("cannot create output directory {}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: csv::Error,
    },
    #[error("cannot draw {}", path.display())]
    Draw {
        path: PathBuf,
        #[source]
        source: Box<LabError>,
    },
    #[error("cannot write {}", path.display())]
    WriteFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} holds results that are not those of {scenario} ({}); remove it or choose another --out",
        dir.display(),
        recorded.as_deref().map_or_else(|| "no manifest.json names their scenario".to_string(), |r| format!("they are of {r}"))
    )]
    ResultsOfAnotherScenario {
        dir: PathBuf,
        scenario: String,
        recorded: Option<String>,
    },
    #[error(
        "{origin} is a testbed experiment, not a simulation: run it with \
         `vantage testbed tcpeval {origin}` (needs root), or the embedded plan \
         with `vantage reproduce cpa`"
    )]
    TestbedPlan { origin: String },
    #[error("{what}: {message}")]
    Experiment { what: String, message: String },
    #[error("plot: {0}")]
    Plot(String),
    #[error(transparent)]
    Csv(#[from] csv::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Creates `dir` and its parents, an error naming it.
pub(crate) fn create_dir(dir: &std::path::Path) -> Result<(), LabError> {
    std::fs::create_dir_all(dir).map_err(|source| LabError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes `text` to `dir/name`, an error naming the file.
pub(crate) fn write_file(dir: &std::path::Path, name: &str, text: String) -> Result<(), LabError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|source| LabError::WriteFile { path, source })
}
