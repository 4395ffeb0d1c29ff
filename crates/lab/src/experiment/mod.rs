//! Testbed experiments: the Abacus paper's Section 6 comparison
//! (`abacus-filters-syn-control.txt`) rerun with real Linux clients on the
//! testbed, beside the simulator (`docs/gate-experiment.md`).
//!
//! One file ([`plan`]) makes a set of testbed runs — client profiles ×
//! variants, each variant a `[gate]` and optionally its own backlog — and
//! gives each variant the `vantage-core` filter the simulator runs for it.
//! The [`runner`] runs them live one after the other, all on the same
//! arrivals; each run's client records become the simulator's Section 6
//! [`tally`], its gate log is summed ([`gate_log`]), the simulator runs
//! every modelled variant ([`simulate`]), and the paper's statements are
//! judged ([`checks`]) and reported ([`report`], [`plot`]). The
//! [`seed_sweep`] asks how far those statements rest on the one slice of
//! arrivals a live experiment runs.
//!
//! Modules depend one way: `plan` and its parts (`clients`, `workload`) ←
//! `tally`, `gate_log` ← `results` ← `simulate`, `checks`, `live`, `plot`
//! ← `report` ← `runner`; `seed_sweep` uses `simulate` and `checks`.

pub mod checks;
pub mod clients;
pub mod error;
pub mod gate_log;
pub mod live;
pub mod plan;
pub mod plot;
pub mod progress;
pub mod report;
pub mod results;
pub mod runner;
pub mod seed_sweep;
pub mod simulate;
pub mod tally;
pub mod workload;

pub use error::ExperimentRunError;
pub use plan::{Experiment, ExperimentError};
pub use progress::Progress;
pub use runner::{run_experiment, ExperimentOutcome, LiveOptions};
