//! Reading the daemon's JSON Lines back (`jsonl` in the configuration):
//! the fields `capture.rs` writes per closed interval, for programs that
//! judge the daemon's output (the testbed experiment). Unknown fields are
//! ignored, so older readers keep working when fields are added. The
//! `[proxy]` input's lines (`super::proxy_input`, which start with
//! `{"source":`) are another series: [`read_lines`] skips them,
//! [`read_proxy_lines`] reads only them.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Lines read at most (a day of 250 ms intervals for 20 classes).
pub const MAX_LINES: usize = 7_000_000;
/// Longest line accepted, bytes.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// One closed interval of one class, as the daemon wrote it.
#[derive(Clone, Debug, Deserialize)]
pub struct WatchLine {
    pub t_start_s: f64,
    pub t_start_unix_s: f64,
    #[serde(default)]
    pub class: Option<String>,
    pub dropped: u64,
    pub accepted: u64,
    /// REFUSED_i; absent (0) in lines written before it was counted.
    #[serde(default)]
    pub refused: u64,
    pub completed: u64,
    pub drop_rate: f64,
    /// Clients the model estimates gave up in the interval.
    pub gave_up: f64,
    pub estimate_mean_s: Option<f64>,
    pub syn_to_end_mean_s: Option<f64>,
    pub p50_s: Option<f64>,
    pub p90_s: Option<f64>,
    pub p99_s: Option<f64>,
    #[serde(default)]
    pub exact_mean_s: Option<f64>,
    #[serde(default)]
    pub exact_completed: Option<u64>,
    #[serde(default)]
    pub exact_gave_up: Option<u64>,
    pub kernel: Option<KernelLine>,
    /// 0 on the proxy input's lines (no capture).
    #[serde(default)]
    pub ring_drops_total: u64,
    /// `configured` or `learned`; empty on the proxy input's lines.
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub learned: Option<LearnedLine>,
}

impl WatchLine {
    /// The interval's transactions under the model: completed plus the
    /// estimated give-ups (`Estimate::transactions`), the weight of its
    /// mean in a whole-run mean (`certes::summary`: Σ Eq. 4 numerators /
    /// Σ transactions).
    pub fn transactions(&self) -> f64 {
        self.completed as f64 + self.gave_up
    }
}

/// The kernel counters over the interval.
#[derive(Clone, Debug, Deserialize)]
pub struct KernelLine {
    pub listen_drops: u64,
    pub listen_overflows: u64,
    pub passive_opens: u64,
}

/// The learned clients a row's model was given.
#[derive(Clone, Debug, Deserialize)]
pub struct LearnedLine {
    /// Profile name → share.
    pub profiles: BTreeMap<String, f64>,
    #[serde(default)]
    pub attempts: Option<u64>,
    #[serde(default)]
    pub classified: Option<u64>,
}

/// Why the lines could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LinesError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Bad {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: more than {MAX_LINES} lines")]
    TooMany { path: PathBuf },
}

/// Every line of the capture's series, in order; an empty line is
/// skipped, a line that does not parse is an error naming it.
pub fn read_lines(path: &Path) -> Result<Vec<WatchLine>, LinesError> {
    read_series(path, false)
}

/// Every line of the `[proxy]` input's series (`"source": "proxy"`), in
/// order, as [`read_lines`] reads the capture's.
pub fn read_proxy_lines(path: &Path) -> Result<Vec<WatchLine>, LinesError> {
    read_series(path, true)
}

fn read_series(path: &Path, proxy: bool) -> Result<Vec<WatchLine>, LinesError> {
    let io = |source| LinesError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut reader = std::io::BufReader::new(file);
    let mut lines = Vec::new();
    let mut buffer = Vec::new();
    let mut number = 0;
    loop {
        buffer.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buffer)
            .map_err(io)?;
        if read == 0 {
            break;
        }
        number += 1;
        if buffer.len() > MAX_LINE_BYTES {
            return Err(LinesError::Bad {
                path: path.to_path_buf(),
                line: number,
                message: format!("longer than {MAX_LINE_BYTES} bytes"),
            });
        }
        if buffer.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // The proxy input's lines: `source` is their first field.
        if buffer.starts_with(b"{\"source\":") != proxy {
            continue;
        }
        if lines.len() == MAX_LINES {
            return Err(LinesError::TooMany {
                path: path.to_path_buf(),
            });
        }
        let line: WatchLine = serde_json::from_slice(&buffer).map_err(|e| LinesError::Bad {
            path: path.to_path_buf(),
            line: number,
            message: e.to_string(),
        })?;
        lines.push(line);
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_daemon_writes_and_names_a_bad_line() {
        let dir = std::env::temp_dir().join(format!("vantage-watch-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("watch.jsonl");
        let good = r#"{"t_start_s":0.25,"dropped":3,"accepted":10,"completed":8,"drop_rate":0.23,"gave_up":0.5,"estimate_mean_s":1.5,"syn_to_end_mean_s":0.2,"rtt_mean_s":0.02,"conn_fail_mean_s":null,"p50_s":0.1,"p90_s":3.0,"p99_s":7.0,"t_start_unix_s":1700000000.25,"kernel":{"listen_drops":4,"listen_overflows":4,"passive_opens":10},"ring_drops_total":0,"model":"learned","learned":{"profiles":{"linux-3.7":0.75,"windows-9x-nt":0.25},"give_ups":[],"never_gives_up":1.0,"attempts":12,"classified":9}}"#;
        let proxy = r#"{"source":"proxy","t_start_s":0.0,"dropped":0,"accepted":4,"completed":4,"drop_rate":0.0,"gave_up":0.0,"estimate_mean_s":0.2,"syn_to_end_mean_s":0.2,"rtt_mean_s":0.0,"conn_fail_mean_s":null,"p50_s":0.2,"p90_s":0.2,"p99_s":0.2,"t_start_unix_s":1700000000.25}"#;
        std::fs::write(&path, format!("{good}\n\n{proxy}\n{good}\n")).unwrap();
        let lines = read_lines(&path).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].transactions(), 8.5);
        assert_eq!(lines[0].kernel.as_ref().unwrap().listen_drops, 4);
        assert_eq!(
            lines[0].learned.as_ref().unwrap().profiles["linux-3.7"],
            0.75
        );
        std::fs::write(&path, format!("{good}\n{{\"t_start_s\": 1}}\n")).unwrap();
        let error = read_lines(&path).unwrap_err().to_string();
        assert!(error.contains("watch.jsonl:2:"), "{error}");
        std::fs::write(&path, format!("{good}\n{proxy}\n{good}\n{proxy}\n")).unwrap();
        let lines = read_proxy_lines(&path).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].accepted, 4);
        assert_eq!(lines[1].estimate_mean_s, Some(0.2));
        assert_eq!(read_lines(&path).unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
