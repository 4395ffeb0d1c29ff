//! The Abacus study's results for people (a table per scenario) and
//! machines (a CSV file per scenario). Where a row pools two or more
//! repetitions, each metric is printed `pooled ± half-width` of its 95 %
//! interval over seeds ([`Spread`]), and the CSV carries `repetitions` and
//! `<metric>_ci95` after the old columns.

use super::interval::with_interval;
use super::new_table;
use super::{right, summary_cells, SUMMARY_COLUMNS};
use crate::studies::abacus::spread::{Spread, SPREAD_COLUMNS};
use crate::LabError;
use comfy_table::Cell;
use std::collections::BTreeSet;
use std::path::Path;
use vantage_sim::syn::scenario::Scenario;
use vantage_sim::syn::{Row, ScenarioResult};

fn short(parameter: &Option<String>) -> String {
    parameter
        .as_deref()
        .map(|p| p.rsplit('.').next().unwrap_or(p).to_string())
        .unwrap_or_default()
}

fn num(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v}"))
}

/// Prints one scenario: a table of every row, or for a one-filter scenario
/// with a series, a cost pivot (sweep value × series value) per profile.
pub fn print_scenario(s: &Scenario, r: &ScenarioResult) {
    println!("## {} — {} ({})", s.figure, s.title, s.origin);
    let runs = r
        .rows
        .iter()
        .map(|x| x.per_repetition.len())
        .max()
        .unwrap_or(0);
    if runs > 1 {
        println!(
            "Each cell pools {runs} runs with their own seeds; `± x` is the half-width of the 95 % interval of the mean over them (Student t)."
        );
    }
    if s.filters.len() == 1 && s.series.is_some() {
        print_pivot(s, r);
        return;
    }
    let extras: BTreeSet<String> = r
        .rows
        .iter()
        .flat_map(|x| x.extras.keys().cloned())
        .collect();
    let mut table = new_table();
    let mut header = vec!["profile".to_string(), "filter".to_string()];
    if s.series.is_some() {
        header.push(short(&s.series.as_ref().map(|a| a.parameter.clone())));
    }
    if s.sweep.is_some() {
        header.push(short(&s.sweep.as_ref().map(|a| a.parameter.clone())));
    }
    header.extend(
        [
            "throughput %",
            "delay s",
            "p50 s",
            "p95 s",
            "p99 s",
            "cost",
            "timed out %",
            "rejected %",
            "retx",
        ]
        .map(String::from),
    );
    header.extend(extras.iter().cloned());
    table.set_header(header);
    for row in &r.rows {
        let m = &row.summary;
        let spread = Spread::of(row);
        let mut cells = vec![Cell::new(&row.profile), Cell::new(row.filter)];
        if s.series.is_some() {
            cells.push(right(num(row.series_value)));
        }
        if s.sweep.is_some() {
            cells.push(right(num(row.value)));
        }
        for v in [
            with_interval(m.throughput_pct, spread.throughput_pct_ci95, 2),
            with_interval(m.delay_mean_s, spread.delay_mean_s_ci95, 3),
            with_interval(m.delay_p50_s, spread.delay_p50_s_ci95, 3),
            with_interval(m.delay_p95_s, spread.delay_p95_s_ci95, 3),
            with_interval(m.delay_p99_s, spread.delay_p99_s_ci95, 3),
            with_interval(m.cost_mean, spread.cost_mean_ci95, 3),
            with_interval(m.timeouts_pct, spread.timeouts_pct_ci95, 3),
            with_interval(m.rejects_pct, spread.rejects_pct_ci95, 2),
            with_interval(m.retransmissions_mean, spread.retransmissions_mean_ci95, 3),
        ] {
            cells.push(right(v));
        }
        for key in &extras {
            let half = match key.as_str() {
                "settle_mean_s" => spread.settle_mean_s_ci95,
                _ => None,
            };
            cells.push(right(
                row.extras
                    .get(key)
                    .map_or(String::new(), |v| with_interval(*v, half, 2)),
            ));
        }
        table.add_row(cells);
    }
    println!("{table}");
}

fn print_pivot(s: &Scenario, r: &ScenarioResult) {
    let series_name = short(&s.series.as_ref().map(|a| a.parameter.clone()));
    let sweep_name = short(&s.sweep.as_ref().map(|a| a.parameter.clone()));
    for clients in &s.populations {
        let rows: Vec<&Row> = r
            .rows
            .iter()
            .filter(|x| x.profile == clients.name)
            .collect();
        let series: Vec<Option<f64>> = s.series_values();
        let mut table = new_table();
        let mut header = vec![format!("{} · {sweep_name} \\ {series_name}", clients.name)];
        header.extend(series.iter().map(|v| format!("cost @ {}", num(*v))));
        table.set_header(header);
        for value in s.sweep_values() {
            let mut cells = vec![right(num(value))];
            for sv in &series {
                let cost = rows
                    .iter()
                    .find(|x| x.value == value && x.series_value == *sv)
                    .map_or(String::new(), |x| {
                        with_interval(x.summary.cost_mean, Spread::of(x).cost_mean_ci95, 3)
                    });
                cells.push(right(cost));
            }
            table.add_row(cells);
        }
        println!("{table}");
    }
}

/// One CSV row per result row; extras become columns, then the spread
/// over seeds ([`SPREAD_COLUMNS`], and `settle_mean_s_ci95` where rows
/// have a settling time).
pub fn write_csv(path: &Path, r: &ScenarioResult) -> Result<(), LabError> {
    let extras: BTreeSet<String> = r
        .rows
        .iter()
        .flat_map(|x| x.extras.keys().cloned())
        .collect();
    let settle = extras.contains("settle_mean_s");
    let mut w = csv::Writer::from_path(path).map_err(|source| LabError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    let mut header: Vec<String> = [
        "study",
        "figure",
        "profile",
        "filter",
        "parameter",
        "value",
        "series_parameter",
        "series_value",
    ]
    .map(String::from)
    .to_vec();
    header.extend(SUMMARY_COLUMNS.map(String::from));
    header.extend(extras.iter().cloned());
    header.extend(SPREAD_COLUMNS.map(String::from));
    if settle {
        header.push("settle_mean_s_ci95".into());
    }
    w.write_record(&header)?;
    for row in &r.rows {
        let mut record = vec![
            row.study.clone(),
            row.figure.clone(),
            row.profile.clone(),
            row.filter.to_string(),
            row.parameter.clone().unwrap_or_default(),
            num(row.value),
            row.series_parameter.clone().unwrap_or_default(),
            num(row.series_value),
        ];
        record.extend(summary_cells(&row.summary));
        for key in &extras {
            record.push(row.extras.get(key).map_or(String::new(), |v| v.to_string()));
        }
        let spread = Spread::of(row);
        record.extend(spread.cells());
        if settle {
            record.push(
                spread
                    .settle_mean_s_ci95
                    .map_or(String::new(), |h| h.to_string()),
            );
        }
        w.write_record(&record)?;
    }
    w.flush()?;
    Ok(())
}
