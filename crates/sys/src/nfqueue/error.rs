//! Errors, each naming the operation that failed.

use std::io;

pub use crate::netlink::ParseError;

/// Errors of the NFQUEUE binding.
#[derive(Debug, thiserror::Error)]
pub enum NfqError {
    /// A system call failed; `operation` says which and on what.
    #[error("nfqueue: {operation}: {source}")]
    Io {
        operation: String,
        #[source]
        source: io::Error,
    },
    /// The kernel answered a request with an error.
    #[error("nfqueue: {operation}: the kernel refused: {}", io::Error::from_raw_os_error(*errno))]
    Kernel { operation: String, errno: i32 },
    /// The kernel did not acknowledge a request in time.
    #[error("nfqueue: {operation}: no acknowledgement from the kernel within {timeout_ms} ms")]
    NoAcknowledgement { operation: String, timeout_ms: u64 },
    /// A received datagram did not fit the receive buffer.
    #[error("nfqueue: received a {length}-byte datagram, larger than the {buffer}-byte receive buffer (raise the copy range margin)")]
    DatagramTooLarge { length: usize, buffer: usize },
    /// A received message was malformed.
    #[error("nfqueue: malformed message from the kernel: {0}")]
    Malformed(#[from] ParseError),
}

impl NfqError {
    pub(crate) fn last_os_error(operation: impl Into<String>) -> Self {
        NfqError::Io {
            operation: operation.into(),
            source: io::Error::last_os_error(),
        }
    }

    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            NfqError::Io { source, .. } => source.raw_os_error(),
            NfqError::Kernel { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}
