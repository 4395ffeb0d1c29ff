//! `vantage testbed experiment FILE --seed-sweep N`: how far the paper's
//! statements in a live experiment rest on the one slice of arrivals the
//! experiment runs (its `seed`).
//!
//! The Abacus paper's Section 6 results are averages of 30 × 600 s of
//! self-similar arrivals; a live experiment runs one slice of minutes, and a
//! Hurst-0.8 slice can hold one burst that decides a 99th percentile alone.
//! For every seed 1..=N the simulator runs the candidate and baseline
//! variants of `[experiment.checks]` on that seed's arrivals, with clients
//! that behave as the live ones — exactly the experiment's
//! `sim-same-arrivals` rows — and evaluates the same four statements with
//! the same thresholds ([`statements_hold`]). Seeds in which the baseline
//! timed no client out are counted apart: there the statements about
//! time-outs and delay tails have nothing to bite on.
//!
//! It also ranks the seeds by how well their arrivals match the arrival
//! model's moments, |mean − μ|/μ + |σ − σ_model|/σ_model (MWM arrivals
//! only): the rule by which the scenario files pick their seed, on the
//! arrivals alone, before any filter has run on them.
//!
//! Output: two tables ([`render_sweep`]) and `seed-sweep.csv`.

use std::fmt::Write as _;
use std::path::Path;

use comfy_table::Cell;
use rayon::prelude::*;
use serde::Serialize;
use vantage_sim::syn::metrics::Summary;
use vantage_testbed::load::arrivals::{ArrivalPattern, MAX_CONNECTIONS_LIMIT};

use super::checks::statements_hold;
use super::error::ExperimentRunError;
use super::plan::Experiment;
use super::results::sim_row;
use super::simulate::simulate_model;
use super::workload::{workload_stats, WorkloadStats};
use crate::report::{new_table, right};

/// `println!` into a `String`.
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// The four statements, in [`statements_hold`]'s order.
const STATEMENTS: [&str; 4] = [
    "p99 well below",
    "mean well below",
    "comparable success",
    "far fewer time-outs",
];

/// One seed × profile × (candidate, baseline) comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SeedComparison {
    pub seed: u64,
    pub profile: String,
    pub candidate: String,
    pub baseline: String,
    pub candidate_summary: Summary,
    pub baseline_summary: Summary,
    /// The four statements, in the order of `statements`.
    pub holds: [bool; 4],
}

/// The arrivals of one seed.
#[derive(Clone, Debug, Serialize)]
pub struct SeedWorkload {
    #[serde(flatten)]
    pub stats: WorkloadStats,
    /// |mean − μ|/μ + |σ − σ_model|/σ_model; MWM arrivals only.
    pub moment_distance: Option<f64>,
}

/// How often each statement held, for one profile and pair.
#[derive(Clone, Debug, Serialize)]
pub struct SweepSummary {
    pub profile: String,
    pub candidate: String,
    pub baseline: String,
    /// Seeds in which the baseline timed at least one client out.
    pub seeds_with_baseline_timeouts: usize,
    /// Of those, how many bear out each statement (order of `statements`).
    pub holds: [usize; 4],
    /// Of those, how many bear out all four.
    pub all_hold: usize,
}

#[derive(Serialize)]
pub struct SweepReport {
    pub file: String,
    pub seeds: u64,
    pub duration_s: f64,
    pub statements: [&'static str; 4],
    pub summary: Vec<SweepSummary>,
    pub workloads: Vec<SeedWorkload>,
    pub comparisons: Vec<SeedComparison>,
}

/// Distance of a slice's moments from its MWM model's, or `None` for other
/// arrival patterns.
fn moment_distance(pattern: &ArrivalPattern, stats: &WorkloadStats) -> Option<f64> {
    match pattern {
        ArrivalPattern::Mwm { mean, std_dev, .. } if *mean > 0.0 && *std_dev > 0.0 => Some(
            (stats.mean_per_s - mean).abs() / mean
                + (stats.std_dev_per_s - std_dev).abs() / std_dev,
        ),
        _ => None,
    }
}

/// Simulates one seed: its arrivals and every candidate-vs-baseline
/// comparison.
fn sweep_seed(
    x: &Experiment,
    seed: u64,
) -> Result<(SeedWorkload, Vec<SeedComparison>), ExperimentRunError> {
    let c = &x.checks;
    let wanted = |id: &String| c.candidates.contains(id) || c.baselines.contains(id);
    let mut rows = Vec::new();
    let mut workload = None;
    for run in x.runs.iter().filter(|r| wanted(&r.variant.id)) {
        let Some(model) = &run.model else { continue };
        let mut spec = run.spec.clone();
        spec.seed = seed;
        // Simulation only: no client namespace has to start them all.
        spec.load.arrivals.max_connections = MAX_CONNECTIONS_LIMIT;
        let schedule = spec
            .load
            .arrivals
            .schedule(seed)
            .map_err(|e| ExperimentRunError::Arrivals(format!("seed {seed}: {e}")))?;
        if workload.is_none() {
            let stats = workload_stats(&spec, &schedule);
            workload = Some(SeedWorkload {
                moment_distance: moment_distance(&spec.load.arrivals.pattern, &stats),
                stats,
            });
        }
        // The same generator seed as the experiment's sim-same-arrivals row.
        let tally = simulate_model(model, &run.sim_clients, &schedule, seed ^ 0xC11E)?;
        rows.push(sim_row(
            run,
            model,
            "sim-same-arrivals",
            &tally,
            x.delay_cost,
            x.reject_cost,
        ));
    }
    let workload = workload.ok_or(ExperimentRunError::NothingModelled)?;
    let summary_of = |profile: &str, variant: &str| {
        rows.iter()
            .find(|r| r.profile == profile && r.variant == variant)
            .and_then(|r| r.summary.clone())
    };
    let mut comparisons = Vec::new();
    for profile in &x.profiles {
        for candidate in &c.candidates {
            for baseline in &c.baselines {
                let (Some(af), Some(tbf)) = (
                    summary_of(profile, candidate),
                    summary_of(profile, baseline),
                ) else {
                    continue;
                };
                comparisons.push(SeedComparison {
                    seed,
                    profile: profile.clone(),
                    candidate: candidate.clone(),
                    baseline: baseline.clone(),
                    holds: statements_hold(c, &af, &tbf),
                    candidate_summary: af,
                    baseline_summary: tbf,
                });
            }
        }
    }
    Ok((workload, comparisons))
}

/// Checks a seed count for [`seed_sweep`] (1..=100000).
pub fn check_seed_count(seeds: u64) -> Result<(), ExperimentRunError> {
    if !(1..=100_000).contains(&seeds) {
        return Err(ExperimentRunError::SeedCount(seeds));
    }
    Ok(())
}

/// Runs the sweep over seeds 1..=`seeds` and writes `seed-sweep.csv` in
/// `out`; `on_seed` is called (from any thread) as each seed is done.
pub fn seed_sweep(
    x: &Experiment,
    seeds: u64,
    out: &Path,
    on_seed: &(dyn Fn() + Sync),
) -> Result<SweepReport, ExperimentRunError> {
    check_seed_count(seeds)?;
    if x.checks.candidates.is_empty() || x.checks.baselines.is_empty() {
        return Err(ExperimentRunError::NoComparison(x.file.clone()));
    }
    std::fs::create_dir_all(out).map_err(|source| ExperimentRunError::CreateDir {
        path: out.to_path_buf(),
        source,
    })?;
    type SeedResult = Result<(SeedWorkload, Vec<SeedComparison>), ExperimentRunError>;
    let per_seed: Vec<SeedResult> = (1..=seeds)
        .into_par_iter()
        .map(|seed| {
            let result = sweep_seed(x, seed);
            on_seed();
            result
        })
        .collect();
    let mut workloads = Vec::new();
    let mut comparisons = Vec::new();
    for result in per_seed {
        let (workload, mut seed_comparisons) = result?;
        workloads.push(workload);
        comparisons.append(&mut seed_comparisons);
    }
    let summary = summarize(x, &comparisons);
    let duration_s = x
        .runs
        .first()
        .map_or(0.0, |r| r.spec.load.arrivals.duration_s);
    let report = SweepReport {
        file: x.file.clone(),
        seeds,
        duration_s,
        statements: STATEMENTS,
        summary,
        workloads,
        comparisons,
    };
    write_csv(&report, &out.join("seed-sweep.csv"))?;
    Ok(report)
}

/// Counts, per profile and pair, the seeds that bear out each statement
/// among those in which the baseline timed clients out.
fn summarize(x: &Experiment, comparisons: &[SeedComparison]) -> Vec<SweepSummary> {
    let mut out = Vec::new();
    for profile in &x.profiles {
        for candidate in &x.checks.candidates {
            for baseline in &x.checks.baselines {
                let stressed: Vec<&SeedComparison> = comparisons
                    .iter()
                    .filter(|c| {
                        &c.profile == profile
                            && &c.candidate == candidate
                            && &c.baseline == baseline
                            && c.baseline_summary.timeouts_pct > 0.0
                    })
                    .collect();
                let mut holds = [0usize; 4];
                for c in &stressed {
                    for (count, held) in holds.iter_mut().zip(c.holds) {
                        *count += usize::from(held);
                    }
                }
                out.push(SweepSummary {
                    profile: profile.clone(),
                    candidate: candidate.clone(),
                    baseline: baseline.clone(),
                    seeds_with_baseline_timeouts: stressed.len(),
                    holds,
                    all_hold: stressed
                        .iter()
                        .filter(|c| c.holds.iter().all(|&h| h))
                        .count(),
                });
            }
        }
    }
    out
}

/// The two tables for people.
pub fn render_sweep(report: &SweepReport) -> String {
    let mut out = String::new();
    outln!(
            out,
        "Seed sweep of {}: seeds 1–{}, {:.0} s of arrivals each, the simulator on each seed's arrivals\n",
        report.file, report.seeds, report.duration_s
    );
    let mut table = new_table();
    let mut header = vec![
        "profile".to_string(),
        "candidate vs baseline".to_string(),
        "seeds where the baseline timed clients out".to_string(),
    ];
    header.extend(STATEMENTS.iter().map(|s| s.to_string()));
    header.push("all four".to_string());
    table.set_header(header);
    for s in &report.summary {
        let n = s.seeds_with_baseline_timeouts;
        let share = |k: usize| {
            if n == 0 {
                "–".to_string()
            } else {
                format!("{k} ({:.0} %)", 100.0 * k as f64 / n as f64)
            }
        };
        let mut row = vec![
            Cell::new(&s.profile),
            Cell::new(format!("({}) vs ({})", s.candidate, s.baseline)),
            right(format!("{n} of {}", report.seeds)),
        ];
        row.extend(s.holds.iter().map(|&k| right(share(k))));
        row.push(right(share(s.all_hold)));
        table.add_row(row);
    }
    outln!(out, "{table}\n");

    let mut ranked: Vec<&SeedWorkload> = report
        .workloads
        .iter()
        .filter(|w| w.moment_distance.is_some())
        .collect();
    if ranked.is_empty() {
        return out;
    }
    ranked.sort_by(|a, b| {
        a.moment_distance
            .partial_cmp(&b.moment_distance)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    outln!(
        out,
        "Seeds whose arrivals best match the model's moments (chosen on the arrivals alone):\n"
    );
    let mut table = new_table();
    table.set_header(vec![
        "seed",
        "mean /s",
        "σ /s",
        "peak /s",
        "moment distance",
        "all four statements hold",
    ]);
    for w in ranked.iter().take(5) {
        let verdicts: Vec<String> = report
            .comparisons
            .iter()
            .filter(|c| c.seed == w.stats.seed)
            .map(|c| {
                let verdict = if c.baseline_summary.timeouts_pct <= 0.0 {
                    "no baseline time-outs".to_string()
                } else if c.holds.iter().all(|&h| h) {
                    "yes".to_string()
                } else {
                    let failed: Vec<&str> = STATEMENTS
                        .iter()
                        .zip(c.holds)
                        .filter(|(_, h)| !h)
                        .map(|(s, _)| *s)
                        .collect();
                    format!("no: {}", failed.join(", "))
                };
                format!(
                    "{} ({}) vs ({}): {verdict}",
                    c.profile, c.candidate, c.baseline
                )
            })
            .collect();
        table.add_row(vec![
            right(w.stats.seed.to_string()),
            right(format!("{:.1}", w.stats.mean_per_s)),
            right(format!("{:.1}", w.stats.std_dev_per_s)),
            right(w.stats.peak_per_s.to_string()),
            right(format!("{:.3}", w.moment_distance.unwrap_or(f64::NAN))),
            Cell::new(verdicts.join("\n")),
        ]);
    }
    outln!(out, "{table}\n");
    out
}

fn write_csv(report: &SweepReport, path: &Path) -> Result<(), ExperimentRunError> {
    let mut w = csv::Writer::from_path(path).map_err(|source| ExperimentRunError::CreateCsv {
        path: path.to_path_buf(),
        source,
    })?;
    w.write_record([
        "seed",
        "mean_per_s",
        "std_dev_per_s",
        "peak_per_s",
        "moment_distance",
        "profile",
        "candidate",
        "baseline",
        "candidate_success_pct",
        "baseline_success_pct",
        "candidate_delay_mean_s",
        "baseline_delay_mean_s",
        "candidate_delay_p99_s",
        "baseline_delay_p99_s",
        "candidate_timeouts_pct",
        "baseline_timeouts_pct",
        "p99_well_below",
        "mean_well_below",
        "comparable_success",
        "far_fewer_timeouts",
    ])?;
    for c in &report.comparisons {
        let Some(workload) = report.workloads.iter().find(|w| w.stats.seed == c.seed) else {
            continue;
        };
        let (a, b) = (&c.candidate_summary, &c.baseline_summary);
        let mut record = vec![
            c.seed.to_string(),
            workload.stats.mean_per_s.to_string(),
            workload.stats.std_dev_per_s.to_string(),
            workload.stats.peak_per_s.to_string(),
            workload
                .moment_distance
                .map_or(String::new(), |d| d.to_string()),
            c.profile.clone(),
            c.candidate.clone(),
            c.baseline.clone(),
            a.throughput_pct.to_string(),
            b.throughput_pct.to_string(),
            a.delay_mean_s.to_string(),
            b.delay_mean_s.to_string(),
            a.delay_p99_s.to_string(),
            b.delay_p99_s.to_string(),
            a.timeouts_pct.to_string(),
            b.timeouts_pct.to_string(),
        ];
        record.extend(c.holds.iter().map(|h| h.to_string()));
        w.write_record(&record)?;
    }
    w.flush().map_err(|source| ExperimentRunError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn scenario() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/gate/section6.toml")
    }

    #[test]
    fn moment_distance_is_zero_for_a_slice_that_matches_its_model() {
        let pattern = ArrivalPattern::Mwm {
            mean: 100.0,
            std_dev: 55.0,
            hurst: 0.8,
            scales: 10,
        };
        let stats = WorkloadStats {
            seed: 1,
            duration_s: 10.0,
            connections: 1000,
            mean_per_s: 100.0,
            std_dev_per_s: 55.0,
            peak_per_s: 200,
            seconds_above_capacity: 2,
            capacity_ratio: None,
        };
        assert_eq!(moment_distance(&pattern, &stats), Some(0.0));
        let off = WorkloadStats {
            mean_per_s: 110.0,
            std_dev_per_s: 44.0,
            ..stats.clone()
        };
        // 10 % off in the mean, 20 % in σ.
        assert!((moment_distance(&pattern, &off).unwrap() - 0.3).abs() < 1e-12);
        let constant = ArrivalPattern::Constant {
            rate: 100.0,
            poisson: false,
        };
        assert_eq!(moment_distance(&constant, &stats), None);
    }

    /// The sweep's seed reproduces the experiment's own simulator row, and
    /// its verdicts are the experiment's checks on that row.
    #[test]
    fn a_seed_of_the_sweep_is_the_experiments_sim_same_arrivals_run() {
        let x = Experiment::load(&scenario(), true).unwrap();
        let seed = x.runs[0].spec.seed;
        let (workload, comparisons) = sweep_seed(&x, seed).unwrap();
        assert_eq!(workload.stats.seed, seed);
        let profiles = x.profiles.len();
        let pairs = x.checks.candidates.len() * x.checks.baselines.len();
        assert_eq!(comparisons.len(), profiles * pairs);
        for c in &comparisons {
            let run = x
                .runs
                .iter()
                .find(|r| r.profile == c.profile && r.variant.id == c.candidate)
                .unwrap();
            let schedule = run.spec.load.arrivals.schedule(seed).unwrap();
            let tally = simulate_model(
                run.model.as_ref().unwrap(),
                &run.sim_clients,
                &schedule,
                seed ^ 0xC11E,
            )
            .unwrap();
            let expected = tally.summary(x.delay_cost, x.reject_cost);
            assert_eq!(c.candidate_summary.requests, expected.requests);
            assert_eq!(c.candidate_summary.delay_p99_s, expected.delay_p99_s);
            assert_eq!(
                c.holds,
                statements_hold(&x.checks, &c.candidate_summary, &c.baseline_summary)
            );
            // Every request is accepted, rejected or timed out.
            assert_eq!(c.candidate_summary.requests as usize, schedule.len());
        }
    }
}
