//! TLS to clients (rustls, ring provider): the certificate chain and key
//! from PEM files (read again at every reload, so a renewed certificate
//! takes effect on SIGHUP), ALPN offering `h2` then `http/1.1`. The
//! handshake must end within the request-header timeout.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Largest certificate or key file read.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// Why the certificate or key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls {}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("tls {}: {problem}", path.display())]
    Pem { path: PathBuf, problem: String },
    #[error("tls: {0}")]
    Rustls(#[from] rustls::Error),
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    let error = |source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(error)?;
    let text = vantage_core::config::read_capped(file, MAX_PEM_BYTES).map_err(|e| match e {
        vantage_core::config::ReadCappedError::Io(source) => error(source),
        other => error(std::io::Error::other(other)),
    })?;
    Ok(text.into_bytes())
}

/// An acceptor for the chain in `cert` and the key in `key`.
pub fn acceptor(cert: &Path, key: &Path) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
    let pem_error = |path: &Path, problem: String| TlsError::Pem {
        path: path.to_path_buf(),
        problem,
    };
    let cert_pem = read(cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_error(cert, "holds no CERTIFICATE block".into()));
    }
    let key_pem = read(key)?;
    let key_der =
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| pem_error(key, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
