//! A server-side capture as Certes input: [`handshake`](crate::handshake)
//! reads one observation per connection, and `vantage_core::certes::observed`
//! turns them into the interval counters the server would have counted
//! (Section 4) and the exact client-perceived times (Eq. 1 with the real
//! retry count), per class (Section 3.2.4) when asked.

use std::collections::BTreeMap;
use std::path::Path;

use vantage_core::certes::input::{
    check_class_intervals, observe_class, CaptureNotes, ClassInput, EstimateInput,
    TooManyClassIntervals,
};
use vantage_core::certes::observed::{ExactConfig, ObservedError};
use vantage_core::certes::CertesConfig;

use crate::error::TraceError;
use crate::handshake::{read_handshakes, ClassBy, HandshakeConfig, ServerFilter};

/// Why a capture gives no Certes input.
#[derive(Debug, thiserror::Error)]
pub enum CaptureInputError {
    #[error("cannot read capture {path}")]
    Read {
        path: String,
        #[source]
        source: TraceError,
    },
    /// No SYN to a selected listener; the message says what was seen.
    #[error("{0}")]
    NoConnection(String),
    /// More classes × intervals than one run takes.
    #[error("{path}: {source}")]
    TooLarge {
        path: String,
        source: TooManyClassIntervals,
    },
    /// The interval grid or the exact figures' configuration.
    #[error(transparent)]
    Setup(ObservedError),
    /// Bucketing or the exact figures, naming the capture.
    #[error("{path}")]
    Observed {
        path: String,
        #[source]
        source: ObservedError,
    },
}

/// Reads a server-side capture (`-` for standard input) into per-class
/// intervals of `model.interval` aligned to the UNIX epoch, with the exact
/// figures beside the counters. `server` selects the listener (default:
/// every listener that answered a SYN); `by` splits into classes.
pub fn capture_input(
    path: &Path,
    server: Option<ServerFilter>,
    by: Option<ClassBy>,
    model: &CertesConfig,
) -> Result<EstimateInput, CaptureInputError> {
    let handshake_config = HandshakeConfig {
        server,
        ..HandshakeConfig::default()
    };
    let name = path.display().to_string();
    let trace =
        read_handshakes(path, &handshake_config).map_err(|source| CaptureInputError::Read {
            path: name.clone(),
            source,
        })?;
    let listeners: Vec<String> = trace.listeners.iter().map(|l| l.to_string()).collect();
    if trace.handshakes.is_empty() {
        let target = match &server {
            Some(filter) => format!("to {filter}"),
            None => "to a listener that answered a SYN".to_string(),
        };
        let attempts = trace.stats.connections - trace.stats.without_syn;
        let seen = if attempts == 0 {
            "no SYN captured".to_string()
        } else {
            format!("{attempts} connections opened by a SYN, none {target}")
        };
        return Err(CaptureInputError::NoConnection(format!(
            "{name}: no connection attempt {target} ({seen}; {} packets, {} connections; listeners seen: {}){}",
            trace.stats.packets,
            trace.stats.connections,
            if listeners.is_empty() {
                "none".to_string()
            } else {
                listeners.join(", ")
            },
            if server.is_none() {
                "; if every SYN to your listener was dropped or refused, name it with --server ADDR:PORT"
            } else {
                ""
            }
        )));
    }
    let grid = trace
        .grid(model.interval)
        .map_err(CaptureInputError::Setup)?;
    let capture_end = trace.capture_end();
    let exact_config = ExactConfig::from_model(model).map_err(CaptureInputError::Setup)?;
    let classes_observed = match by {
        Some(by) => trace.observations_by_class(by),
        None => BTreeMap::from([(String::new(), trace.observations())]),
    };
    let key = match by {
        Some(ClassBy::Listener) => "--by listener".to_string(),
        Some(ClassBy::SourcePrefix(bits)) => format!("--by source-prefix/{bits}"),
        None => "none".to_string(),
    };
    let intervals_through_end = grid
        .checked_count_through(capture_end)
        .map_err(CaptureInputError::Setup)?;
    check_class_intervals(classes_observed.len(), intervals_through_end, &key).map_err(
        |source| CaptureInputError::TooLarge {
            path: name.clone(),
            source,
        },
    )?;
    let mut notes = CaptureNotes {
        packets: trace.stats.packets,
        connections: trace.handshakes.len() as u64,
        listeners,
        connections_without_syn: trace.stats.without_syn,
        connections_to_other_servers: trace.stats.other_servers,
        connections_evicted: trace.stats.evicted,
        connections_evicted_half_open: trace.stats.evicted_half_open,
        cut_off: trace.stats.cut_off.clone(),
        ..CaptureNotes::default()
    };
    let observed_error = |source| CaptureInputError::Observed {
        path: name.clone(),
        source,
    };
    let mut classes = Vec::new();
    let mut intervals = 0;
    for (class, mut observations) in classes_observed {
        let observed = observe_class(&mut observations, grid, capture_end, &exact_config)
            .map_err(observed_error)?;
        let counted = observed.counters;
        notes.abandoned += observed.abandoned;
        notes.syns_after_answer += counted.stats.syns_after_answer;
        notes.rtt_missing += counted.stats.rtt_missing;
        intervals = counted.intervals.len();
        classes.push(ClassInput::from_dense(
            class,
            counted.intervals,
            Some(observed.exact),
        ));
    }
    Ok(EstimateInput {
        description: name,
        t0_s: 0.0,
        origin_unix: Some(grid.start),
        intervals,
        classes,
        capture_notes: Some(notes),
    })
}
