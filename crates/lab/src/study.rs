//! What a study is: a paper, its embedded scenario files, and a run that
//! turns scenario files into result rows and the paper's statements set
//! beside our measurements.

use crate::LabError;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::path::PathBuf;

/// One of the paper's statements set beside our measurement. Built with
/// [`Check::statement`] and judged by a [`Criterion`], which also gives
/// the `criterion` and `tolerance` fields, so the verdict and the text that
/// describes its rule come from one place.
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
    /// Whether our result shows what the paper states, by `criterion`.
    pub holds: bool,
    /// The unit of the number the criterion judges, where it has one.
    pub unit: Option<String>,
    /// The exact rule `holds` is computed by, in words.
    pub criterion: String,
    /// The rule's tolerance, in `unit`, where the rule has one.
    pub tolerance: Option<f64>,
}

/// The rule a statement's verdict is computed by. Every variant but
/// [`Criterion::Relation`] judges one number of ours ([`Criterion::holds`]);
/// a relation among several numbers is judged by its caller and says in
/// its text exactly what is compared.
#[derive(Clone, Debug, PartialEq)]
pub enum Criterion {
    /// |ours − target| ≤ tolerance.
    Within { target: f64, tolerance: f64 },
    /// ours ≤ limit.
    AtMost(f64),
    /// ours < limit.
    Below(f64),
    /// ours ≥ limit.
    AtLeast(f64),
    /// ours > limit.
    Above(f64),
    /// low ≤ ours ≤ high.
    Between { low: f64, high: f64 },
    /// ours > 0: the paper's direction only, not its size.
    SameDirection,
    /// A relation among our numbers, in words; see [`Statement::relation`].
    Relation(String),
}

impl Criterion {
    /// Whether `ours` meets the rule; a [`Criterion::Relation`] is judged
    /// by its caller and never holds here.
    pub fn holds(&self, ours: f64) -> bool {
        match *self {
            Criterion::Within { target, tolerance } => (ours - target).abs() <= tolerance,
            Criterion::AtMost(limit) => ours <= limit,
            Criterion::Below(limit) => ours < limit,
            Criterion::AtLeast(limit) => ours >= limit,
            Criterion::Above(limit) => ours > limit,
            Criterion::Between { low, high } => (low..=high).contains(&ours),
            Criterion::SameDirection => ours > 0.0,
            Criterion::Relation(_) => false,
        }
    }

    /// The tolerance, in the statement's unit, of a rule that has one.
    pub fn tolerance(&self) -> Option<f64> {
        match *self {
            Criterion::Within { tolerance, .. } => Some(tolerance),
            _ => None,
        }
    }

    /// The rule in words, numbers in `unit`.
    pub fn describe(&self, unit: Option<&str>) -> String {
        let n = |x: f64| with_unit(x, unit);
        match self {
            Criterion::Within { target, tolerance } if *target == 0.0 => {
                format!("|ours| ≤ {}", n(*tolerance))
            }
            Criterion::Within { target, tolerance } => {
                format!("ours within ±{} of {}", n(*tolerance), n(*target))
            }
            Criterion::AtMost(limit) => format!("ours ≤ {}", n(*limit)),
            Criterion::Below(limit) => format!("ours < {}", n(*limit)),
            Criterion::AtLeast(limit) => format!("ours ≥ {}", n(*limit)),
            Criterion::Above(limit) => format!("ours > {}", n(*limit)),
            Criterion::Between { low, high } => {
                format!("{} ≤ ours ≤ {}", number(*low), n(*high))
            }
            Criterion::SameDirection => {
                "same direction only: ours > 0 (the paper's size is not checked)".to_string()
            }
            Criterion::Relation(text) => text.clone(),
        }
    }
}

/// `x` with at most four decimals, trailing zeros dropped (so a limit
/// nudged by a rounding allowance reads as the limit).
pub fn number(x: f64) -> String {
    let text = format!("{x:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

fn with_unit(x: f64, unit: Option<&str>) -> String {
    match unit {
        Some("×") => format!("{}×", number(x)),
        Some(u) => format!("{} {u}", number(x)),
        None => number(x),
    }
}

/// A statement not yet judged: what the paper says and what we measured.
#[derive(Clone, Debug)]
pub struct Statement {
    figure: String,
    profile: String,
    claim: String,
    paper: String,
    ours: String,
    unit: Option<String>,
    difference: Option<f64>,
}

impl Check {
    /// A statement of the paper's `figure` under `profile`: the `claim`,
    /// the paper's figure and ours, to be judged by a [`Criterion`].
    pub fn statement(
        figure: impl Into<String>,
        profile: impl Into<String>,
        claim: impl Into<String>,
        paper: impl Into<String>,
        ours: impl Into<String>,
    ) -> Statement {
        Statement {
            figure: figure.into(),
            profile: profile.into(),
            claim: claim.into(),
            paper: paper.into(),
            ours: ours.into(),
            unit: None,
            difference: None,
        }
    }
}

impl Statement {
    /// The unit of the number the criterion judges.
    pub fn unit(mut self, unit: &str) -> Self {
        self.unit = Some(unit.to_string());
        self
    }

    /// Ours minus the paper's, where both are numbers.
    pub fn difference(mut self, difference: Option<f64>) -> Self {
        self.difference = difference;
        self
    }

    /// Judges our number `ours` by `criterion` (not a relation: see
    /// [`Statement::relation`]).
    pub fn judge(self, ours: f64, criterion: Criterion) -> Check {
        debug_assert!(
            !matches!(criterion, Criterion::Relation(_)),
            "a relation is judged by Statement::relation"
        );
        let holds = criterion.holds(ours);
        self.finish(criterion, holds)
    }

    /// [`Statement::judge`], with `note` after the rule in brackets: what
    /// its limit is, or which of the paper's values it does not check.
    pub fn judge_noted(self, ours: f64, criterion: Criterion, note: &str) -> Check {
        let mut check = self.judge(ours, criterion);
        check.criterion = format!("{} ({note})", check.criterion);
        check
    }

    /// Judges a relation among our numbers, which the caller computed as
    /// `holds`; `text` says exactly what was compared.
    pub fn relation(self, text: impl Into<String>, holds: bool) -> Check {
        self.finish(Criterion::Relation(text.into()), holds)
    }

    fn finish(self, criterion: Criterion, holds: bool) -> Check {
        Check {
            criterion: criterion.describe(self.unit.as_deref()),
            tolerance: criterion.tolerance(),
            figure: self.figure,
            profile: self.profile,
            claim: self.claim,
            paper: self.paper,
            ours: self.ours,
            difference: self.difference,
            holds,
            unit: self.unit,
        }
    }
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

impl StudyOutcome {
    /// The outcome of a study the machine could not run (or that was
    /// skipped), for `reason`: no rows, no statements, and `"ran": false`
    /// with the reason in its JSON, so it never reads as a pass.
    pub fn not_run(reason: &str) -> StudyOutcome {
        let summary = serde_json::json!({ "ran": false, "reason": reason });
        StudyOutcome {
            rows: serde_json::Value::Array(Vec::new()),
            checks: Vec::new(),
            document: serde_json::to_string_pretty(&summary)
                .unwrap_or_else(|_| summary.to_string()),
            summary,
        }
    }

    /// Why the study was not run, if it was not (see [`StudyOutcome::not_run`]).
    pub fn not_run_reason(&self) -> Option<&str> {
        if self.summary.get("ran") == Some(&serde_json::Value::Bool(false)) {
            self.summary.get("reason").and_then(|r| r.as_str())
        } else {
            None
        }
    }
}

/// A paper's experiments, rerun in a simulator and compared with the paper.
pub trait Study: Sync {
    /// The name `vantage reproduce` takes and scenario files give in
    /// `scenario.study`.
    fn name(&self) -> &'static str;
    /// The paper's file under `papers/`.
    fn paper(&self) -> &'static str;
    /// The paper's title, for reports.
    fn paper_title(&self) -> &'static str {
        paper_title(self.paper())
    }
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

/// The title of the paper in `papers/<file>`; the file name when unknown.
pub fn paper_title(file: &str) -> &str {
    match file {
        "abacus-filters-syn-control.txt" => {
            "Re-synchronization and Controllability of Bursty Service Requests \
             (Jamjoom, Pillai, Shin)"
        }
        "certes-client-response-time.txt" => {
            "Using Certes to Infer Client Response Time at the Web Server \
             (Olshefski, Nieh, Agrawal)"
        }
        "session-admission-control.txt" => {
            "Session-Based Admission Control: A Mechanism for Peak Load Management \
             of Commercial Web Sites (Cherkasova, Phaal)"
        }
        "proxy-resource-management.txt" => {
            "Design, Implementation and Evaluation of Scalable Resource Management \
             System for Internet Servers (Okamoto, master's thesis)"
        }
        "critical-path-tcp.txt" => "Critical Path Analysis of TCP Transactions (Barford, Crovella)",
        other => other,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(ours: f64, criterion: Criterion) -> Check {
        Check::statement("f", "p", "c", "1", "1")
            .unit("%")
            .judge(ours, criterion)
    }

    #[test]
    fn each_criterion_judges_and_describes_its_rule() {
        let within = Criterion::Within {
            target: 0.0,
            tolerance: 2.5,
        };
        assert!(judged(-2.5, within.clone()).holds);
        assert!(!judged(2.6, within.clone()).holds);
        let c = judged(1.0, within);
        assert_eq!(c.criterion, "|ours| ≤ 2.5 %");
        assert_eq!(c.tolerance, Some(2.5));
        assert_eq!(c.unit.as_deref(), Some("%"));
        let around = judged(
            12.0,
            Criterion::Within {
                target: 10.0,
                tolerance: 3.0,
            },
        );
        assert!(around.holds);
        assert_eq!(around.criterion, "ours within ±3 % of 10 %");
        assert!(judged(7.0, Criterion::AtMost(7.0)).holds);
        assert!(!judged(7.0, Criterion::Below(7.0)).holds);
        assert!(judged(7.0, Criterion::AtLeast(7.0)).holds);
        assert!(!judged(7.0, Criterion::Above(7.0)).holds);
        let between = judged(
            4.5,
            Criterion::Between {
                low: 1.0,
                high: 4.0,
            },
        );
        assert!(!between.holds);
        assert_eq!(between.criterion, "1 ≤ ours ≤ 4 %");
        assert_eq!(between.tolerance, None);
        let direction = judged(957.0, Criterion::SameDirection);
        assert!(direction.holds);
        assert!(direction.criterion.contains("not checked"));
        assert!(!judged(-1.0, Criterion::SameDirection).holds);
        assert_eq!(
            judged(20.0 + 1e-6, Criterion::AtMost(20.0 + 1e-6)).criterion,
            "ours ≤ 20 %"
        );
    }

    #[test]
    fn a_relation_keeps_its_callers_verdict_and_text() {
        let c =
            Check::statement("f", "p", "c", "AF < TBF", "1 vs 2").relation("AF's < TBF's", true);
        assert!(c.holds);
        assert_eq!(c.criterion, "AF's < TBF's");
        assert_eq!(c.unit, None);
        assert!(!Criterion::Relation("x".into()).holds(1.0));
        let noted = Check::statement("f", "p", "c", "55 %", "9 %")
            .unit("%")
            .judge_noted(9.0, Criterion::Above(3.0), "m = 15's");
        assert!(noted.holds);
        assert_eq!(noted.criterion, "ours > 3 % (m = 15's)");
    }

    #[test]
    fn json_keeps_the_old_keys_and_adds_the_criterion() {
        let c = judged(3.0, Criterion::AtMost(5.0));
        let v = serde_json::to_value(&c).unwrap();
        for key in [
            "figure",
            "profile",
            "claim",
            "paper",
            "ours",
            "difference",
            "holds",
            "unit",
            "criterion",
            "tolerance",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        assert_eq!(v["criterion"], "ours ≤ 5 %");
    }

    #[test]
    fn numbers_drop_trailing_zeros() {
        assert_eq!(number(220.0), "220");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(-0.00001), "0");
        assert_eq!(number(1.23456), "1.2346");
    }
}
