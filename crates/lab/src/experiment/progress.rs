//! What an experiment reports while its live runs go, for a progress
//! display.

/// Receives an experiment's progress.
pub trait Progress {
    /// The live runs begin; `runs` of them (read back or run).
    fn live_runs_begin(&self, runs: u64);
    /// A line worth keeping (a failed run, one read back, an interruption).
    fn say(&self, line: String);
    /// What the current run is doing, replaced by the next status.
    fn status(&self, message: String);
    /// One more run done.
    fn run_done(&self);
    /// The live runs are over.
    fn live_runs_end(&self);
}
