//! The skeleton every Vantage daemon shares: signals that only set flags
//! ([`signals`]), the ready file checked against a stale pid ([`ready`]),
//! systemd's readiness protocol ([`notify`]), the descriptor budget
//! ([`descriptors`]), append-only logs reopened on SIGUSR1
//! ([`log_file`]) and the size-capped configuration file
//! ([`config_file`]). Each daemon (the gate, the proxy) keeps its own loop
//! and looks at the flags there; nothing here decides anything.

pub mod config_file;
pub mod descriptors;
pub mod log_file;
pub mod notify;
pub mod ready;
pub mod signals;

pub use descriptors::{connection_cap, descriptor_limit, DescriptorReserve, RESERVED_DESCRIPTORS};
pub use log_file::LogFile;
pub use notify::{notify, NotifyState};
pub use ready::{ReadyFile, ReadyFileError};
pub use signals::{SignalError, Signals};
