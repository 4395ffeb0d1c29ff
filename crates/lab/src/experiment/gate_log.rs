//! Totals of a `vantage gate run` log: its interval records
//! ([`IntervalRecord`], the format the gate writes) summed.

use std::path::{Path, PathBuf};

use serde::Serialize;
use vantage_core::admission::syn::record::{GateCounts, IntervalRecord};
use vantage_core::config::{CappedReader, MAX_COUNTERS_BYTES};

/// Totals of a gate log, summed over its lines.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GateLogTotals {
    pub lines: u64,
    /// SYNs to the listener the gate saw.
    pub arrivals: u64,
    /// The filter's verdicts on them, other packets let through, packets
    /// the kernel let through unseen, refused verdicts and failed sends.
    #[serde(flatten)]
    pub counts: GateCounts,
}

/// A gate log that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum GateLogError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} line {line}: {source}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
}

/// Sums the interval records of a gate log; an unreadable file or a line
/// that is not a record is an error naming the line.
pub fn gate_log_totals(path: &Path) -> Result<GateLogTotals, GateLogError> {
    use std::io::BufRead;
    let read_error = |source| GateLogError::Read {
        path: path.to_path_buf(),
        source,
    };
    // A log is read a line at a time, and no more than a counters file.
    let file = std::fs::File::open(path).map_err(read_error)?;
    let reader = std::io::BufReader::new(CappedReader::new(file, MAX_COUNTERS_BYTES));
    let mut totals = GateLogTotals::default();
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(read_error)?;
        let line = line.as_str();
        if line.trim().is_empty() {
            continue;
        }
        let record: IntervalRecord =
            serde_json::from_str(line).map_err(|source| GateLogError::Line {
                path: path.to_path_buf(),
                line: n + 1,
                source,
            })?;
        totals.lines += 1;
        totals.arrivals += record.arrivals;
        totals.counts.add(&record.counts);
    }
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_logs_add_up_their_intervals() {
        let dir = std::env::temp_dir().join(format!("vantage-gx-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gate.jsonl");
        std::fs::write(
            &path,
            "{\"time_s\":0.0,\"interval_s\":1.0,\"elapsed_s\":1.0,\"arrivals\":10,\"accepted\":7,\"dropped\":2,\"rejected\":1,\"passed\":3,\"overruns\":0,\"errors\":0,\"dry_run\":false,\"filter\":{\"tokens\":0}}\n\n{\"time_s\":1.0,\"arrivals\":5,\"accepted\":5,\"dropped\":0,\"rejected\":0,\"overruns\":2}\n",
        )
        .unwrap();
        let totals = gate_log_totals(&path).unwrap();
        assert_eq!(
            totals,
            GateLogTotals {
                lines: 2,
                arrivals: 15,
                counts: GateCounts {
                    accepted: 12,
                    dropped: 2,
                    rejected: 1,
                    passed: 3,
                    overruns: 2,
                    errors: 0,
                },
            }
        );
        std::fs::write(&path, "{\"time_s\":1}\n").unwrap();
        let error = gate_log_totals(&path).unwrap_err().to_string();
        assert!(
            error.contains("line 1") && error.contains("accepted"),
            "{error}"
        );
        assert!(gate_log_totals(&dir.join("missing")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
