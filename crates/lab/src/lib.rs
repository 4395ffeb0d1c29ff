//! Vantage's studies: each paper's experiments rerun in the simulators of
//! `vantage-sim`, set beside the paper's published results, and reported as
//! tables, CSV files and SVG plots. One [`Study`] per paper; the registry
//! [`studies::all`] is what `vantage reproduce` and `vantage sim` run.

pub mod error;
pub mod report;
pub mod studies;
pub mod study;

pub use error::LabError;
pub use study::{Check, RunOptions, ScenarioFile, Study, StudyOutcome};
