//! Signals as flags: SIGINT and SIGTERM ask to stop, SIGHUP to reload the
//! configuration, SIGUSR1 to reopen the logs. The handlers only store to
//! an atomic (async-signal-safe); the daemon's loop reads and clears the
//! flags. A second SIGINT while stopping sets the same flag again: it never
//! interrupts the clean-up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};

#[derive(Debug, thiserror::Error)]
#[error("cannot install the signal handlers: {0}")]
pub struct SignalError(#[source] pub std::io::Error);

/// The flags the handlers set.
#[derive(Clone, Debug, Default)]
pub struct Signals {
    pub stop: Arc<AtomicBool>,
    pub reload: Arc<AtomicBool>,
    pub reopen: Arc<AtomicBool>,
}

impl Signals {
    /// Flags no handler sets (for a caller that stops the daemon itself).
    pub fn new() -> Signals {
        Signals::default()
    }

    /// Installs the handlers for these flags.
    pub fn register(&self) -> Result<(), SignalError> {
        for (signal, flag) in [
            (SIGINT, &self.stop),
            (SIGTERM, &self.stop),
            (SIGHUP, &self.reload),
            (SIGUSR1, &self.reopen),
        ] {
            signal_hook::flag::register(signal, Arc::clone(flag)).map_err(SignalError)?;
        }
        Ok(())
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether a reload was asked since the last call.
    pub fn take_reload(&self) -> bool {
        self.reload.swap(false, Ordering::Relaxed)
    }

    /// Whether a log reopen was asked since the last call.
    pub fn take_reopen(&self) -> bool {
        self.reopen.swap(false, Ordering::Relaxed)
    }
}
