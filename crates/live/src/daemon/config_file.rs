//! Reading a daemon's TOML configuration file: size-capped
//! ([`MAX_CONFIG_BYTES`]), with one error type that names the file, and
//! for an invalid value its line and key path (from
//! `vantage_core::config`). Every daemon's `load` goes through here.

use std::path::Path;

use vantage_core::config::{self, read_capped, ReadCappedError, MAX_CONFIG_BYTES};

/// A configuration that cannot be used, with where.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin}: cannot read: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, an unknown key, or a value out of range: with the line
    /// and the key path.
    #[error(transparent)]
    Invalid(#[from] config::ConfigError),
}

impl ConfigError {
    /// The key path an invalid value's error names.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid(e) => e.key(),
            ConfigError::Read { .. } => None,
        }
    }
}

/// The file's text (at most [`MAX_CONFIG_BYTES`]) and its name for errors.
pub fn read_config_file(path: &Path) -> Result<(String, String), ConfigError> {
    let origin = path.display().to_string();
    let read_error = |source| ConfigError::Read {
        origin: origin.clone(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let text = read_capped(file, MAX_CONFIG_BYTES).map_err(|e| match e {
        ReadCappedError::Io(source) => read_error(source),
        other => read_error(std::io::Error::other(other)),
    })?;
    Ok((origin, text))
}
