//! TLS material from PEM files, with errors that name the file and say
//! what was wrong with it; the one crypto provider both sides use.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A PEM file that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("TLS file {}: {reason}", path.display())]
pub struct TlsFileError {
    pub path: PathBuf,
    pub reason: String,
}

fn error(path: &Path, reason: impl ToString) -> TlsFileError {
    TlsFileError {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// The certificates in a PEM file, in order (a chain starts with the leaf).
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsFileError> {
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(path, e))?;
    if certificates.is_empty() {
        return Err(error(path, "holds no PEM certificate (BEGIN CERTIFICATE)"));
    }
    Ok(certificates)
}

/// The first private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsFileError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => {
            error(path, "holds no PEM private key (BEGIN PRIVATE KEY)")
        }
        other => error(path, other),
    })
}

/// Trust anchors: every certificate in a PEM file.
pub fn root_store(path: &Path) -> Result<RootCertStore, TlsFileError> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates(path)? {
        roots
            .add(certificate)
            .map_err(|e| error(path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// ring, for every TLS configuration strata builds (never the process-wide
/// default, which another library in the process may have chosen).
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
