//! Report writers shared by every study: the paper-versus-ours table and
//! CSV, and the document `vantage reproduce --json` prints for every study.
//! Each study's own tables, CSV files and SVG plots are in its module here.

pub mod abacus;
pub mod abacus_plot;
pub mod certes;
pub mod certes_estimate;
pub mod html;
pub mod interval;
pub mod sbac;
pub mod ssbt;
pub(crate) mod svg;

use crate::{Check, LabError, StudyOutcome};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use std::path::Path;
use vantage_sim::syn::metrics::Summary;

/// An empty table in the style every table for people uses.
pub fn new_table() -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table
}

/// A right-aligned cell (numbers).
pub fn right(text: String) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

/// The CSV columns of a Section 6 summary, in the order of [`summary_cells`].
pub(crate) const SUMMARY_COLUMNS: [&str; 10] = [
    "requests",
    "throughput_pct",
    "delay_mean_s",
    "delay_p50_s",
    "delay_p95_s",
    "delay_p99_s",
    "cost_mean",
    "timeouts_pct",
    "rejects_pct",
    "retransmissions_mean",
];

/// A Section 6 summary as CSV cells, under [`SUMMARY_COLUMNS`].
pub(crate) fn summary_cells(m: &Summary) -> [String; 10] {
    [
        m.requests.to_string(),
        m.throughput_pct.to_string(),
        m.delay_mean_s.to_string(),
        m.delay_p50_s.to_string(),
        m.delay_p95_s.to_string(),
        m.delay_p99_s.to_string(),
        m.cost_mean.to_string(),
        m.timeouts_pct.to_string(),
        m.rejects_pct.to_string(),
        m.retransmissions_mean.to_string(),
    ]
}

/// Prints the paper-versus-ours table.
pub fn print_checks(checks: &[Check]) {
    if checks.is_empty() {
        return;
    }
    println!("## The paper's statements beside our results\n");
    let mut table = new_table();
    table.set_header(vec![
        "figure",
        "profile",
        "statement",
        "paper",
        "ours",
        "difference",
        "criterion",
        "holds",
    ]);
    for c in checks {
        table.add_row(vec![
            Cell::new(&c.figure),
            Cell::new(&c.profile),
            Cell::new(&c.claim),
            right(c.paper.clone()),
            right(c.ours.clone()),
            right(c.difference.map_or(String::new(), |d| format!("{d:+.2}"))),
            Cell::new(&c.criterion),
            Cell::new(if c.holds { "yes" } else { "NO" }),
        ]);
    }
    println!("{table}\n");
}

pub fn write_checks_csv(path: &Path, checks: &[Check]) -> Result<(), LabError> {
    let mut w = csv::Writer::from_path(path).map_err(|source| LabError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    for c in checks {
        w.serialize(c)?;
    }
    w.flush()?;
    Ok(())
}

/// The document `vantage reproduce --json` prints when it runs every
/// study: the first study's rows and every study's checks at the top (the
/// format the Abacus study began with), then each further study's part
/// under its name.
pub fn all_studies_document(outcomes: &[(&str, StudyOutcome)]) -> serde_json::Value {
    let mut doc = serde_json::Map::new();
    if let Some((_, first)) = outcomes.first() {
        doc.insert("rows".into(), first.rows.clone());
    }
    let checks: Vec<&Check> = outcomes.iter().flat_map(|(_, o)| o.checks.iter()).collect();
    doc.insert(
        "checks".into(),
        serde_json::to_value(checks).unwrap_or(serde_json::Value::Null),
    );
    for (name, outcome) in outcomes.iter().skip(1) {
        doc.insert((*name).to_string(), outcome.summary.clone());
    }
    serde_json::Value::Object(doc)
}
