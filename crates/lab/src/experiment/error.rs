//! Why an experiment or a seed sweep could not be run or written.

use std::path::PathBuf;

use vantage_core::admission::syn::FilterConfigError;
use vantage_testbed::load::record::RecordError;

use super::plan::ExperimentError;

/// An experiment or seed sweep that could not be completed; the message
/// names the file or the key.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentRunError {
    #[error(transparent)]
    File(#[from] ExperimentError),
    #[error(transparent)]
    Filter(#[from] FilterConfigError),
    /// Arrivals that cannot be drawn.
    #[error("{0}")]
    Arrivals(String),
    #[error("no long-run arrivals for variant {0}")]
    NoLongRunArrivals(String),
    #[error("the live runs need root (they build network namespaces); `--sim-only` prints the simulator's numbers without them")]
    NotRoot,
    #[error("cannot install the Ctrl-C handler")]
    Begin(#[source] std::io::Error),
    #[error("cannot create output directory {}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a run summary", path.display())]
    Summary {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot open {}", path.display())]
    OpenClients {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", path.display())]
    ReadClients { path: PathBuf, source: RecordError },
    #[error("cannot write {}", path.display())]
    CreateCsv { path: PathBuf, source: csv::Error },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Csv(#[from] csv::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("plot: {0}")]
    Plot(String),
    #[error("--seed-sweep {0}: give a number of seeds in 1..=100000")]
    SeedCount(u64),
    #[error("{0}: [experiment.checks] needs candidates and baselines for a seed sweep")]
    NoComparison(String),
    #[error("[experiment.checks] names no candidate or baseline variant the simulator models")]
    NothingModelled,
}
