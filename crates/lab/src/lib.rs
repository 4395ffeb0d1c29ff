//! Studies and experiments: each paper's experiments rerun in the
//! simulators of `vantage-sim` ([`studies`], one [`Study`] per paper; the
//! registry [`studies::all`] is what `vantage reproduce` and `vantage sim`
//! run) or on the testbed beside the simulator ([`experiment`]), set beside
//! the paper's published results, and reported as tables, CSV files and SVG
//! plots ([`report`]).

pub mod certes_live;
pub mod error;
pub mod experiment;
pub mod live_experiment;
pub mod provenance;
pub mod report;
pub mod resources_live;
pub mod sbac_live;
pub mod studies;
pub mod study;
pub mod tcpeval_live;
pub mod thesis_live;

pub use error::LabError;
pub use study::{Check, Criterion, RunOptions, ScenarioFile, Statement, Study, StudyOutcome};
