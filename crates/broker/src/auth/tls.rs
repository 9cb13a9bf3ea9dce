//! The broker's TLS: its certificate and key, and optionally the CAs whose
//! client certificates it accepts, from PEM files, reloaded when a file
//! changes so certificates are rotated without a restart.
//!
//! Reload policy: at most once per [`RELOAD_CHECK_INTERVAL`], a new
//! connection compares each file's modification time and size with those
//! seen at the last load. On a change the whole configuration is built
//! again; connections accepted from then on use it, and connections
//! already open keep theirs. A change that does not load (a key written
//! before its certificate, a half-written file) leaves the previous
//! configuration serving and is logged; the next check tries again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::Principal;
use strata_protocol::security::{self, TlsFileError};

/// How often a new connection may look at the files for a change.
pub const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How long a client has to complete the TLS handshake after connecting.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether clients must present a certificate (mTLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    #[default]
    None,
    /// A client certificate is asked for and checked if sent; a client
    /// without one connects as `User:ANONYMOUS`.
    Requested,
    /// A client without a certificate the CAs vouch for is refused.
    Required,
}

impl std::str::FromStr for ClientAuth {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "none" => Ok(Self::None),
            "requested" => Ok(Self::Requested),
            "required" => Ok(Self::Required),
            _ => Err(format!(
                "client_auth {text:?}: use \"none\", \"requested\" or \"required\""
            )),
        }
    }
}

/// Where the broker's TLS material is (the `[tls]` table of strata.toml).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The certificate chain, leaf first, in PEM.
    pub cert: PathBuf,
    /// Its private key, in PEM.
    pub key: PathBuf,
    /// CA certificates that client certificates must chain to.
    pub client_ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

impl TlsSettings {
    /// The combinations that cannot serve.
    pub fn check(&self) -> Result<(), String> {
        if self.client_auth != ClientAuth::None && self.client_ca.is_none() {
            return Err(
                "[tls] client_auth asks for client certificates: set client_ca to the CA file that signs them"
                    .into(),
            );
        }
        Ok(())
    }

    fn files(&self) -> Vec<&Path> {
        let mut files = vec![self.cert.as_path(), self.key.as_path()];
        files.extend(self.client_ca.as_deref());
        files
    }
}

/// The acceptor for new connections, rebuilt when the files change.
pub struct TlsReloader {
    settings: TlsSettings,
    state: Mutex<Loaded>,
}

struct Loaded {
    acceptor: TlsAcceptor,
    stamps: Vec<Option<(SystemTime, u64)>>,
    checked: Instant,
    /// The stamps of a change that failed to load, so it is logged once.
    failed: Option<Vec<Option<(SystemTime, u64)>>>,
}

impl TlsReloader {
    /// Loads the files; an error here stops the broker from starting.
    pub fn load(settings: TlsSettings) -> Result<Self, TlsFileError> {
        let stamps = stamps(&settings);
        let acceptor = build(&settings)?;
        Ok(Self {
            settings,
            state: Mutex::new(Loaded {
                acceptor,
                stamps,
                checked: Instant::now(),
                failed: None,
            }),
        })
    }

    /// The acceptor for a new connection: the current configuration,
    /// reloaded first if a file changed.
    pub fn acceptor(&self) -> TlsAcceptor {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= RELOAD_CHECK_INTERVAL {
            state.checked = Instant::now();
            let now = stamps(&self.settings);
            if now != state.stamps && state.failed.as_ref() != Some(&now) {
                match build(&self.settings) {
                    Ok(acceptor) => {
                        tracing::info!("TLS certificates reloaded");
                        state.acceptor = acceptor;
                        state.stamps = now;
                        state.failed = None;
                    }
                    Err(error) => {
                        tracing::error!(
                            "TLS files changed but do not load; still serving the previous ones: {error}"
                        );
                        state.failed = Some(now);
                    }
                }
            }
        }
        state.acceptor.clone()
    }
}

impl TlsReloader {
    /// The TLS handshake, within [`TLS_HANDSHAKE_TIMEOUT`], and the
    /// connection's principal: a verified client certificate's subject
    /// (Kafka's default principal builder), else `User:ANONYMOUS`. The
    /// error says why the connection is to be closed.
    pub async fn accept(
        &self,
        stream: TcpStream,
    ) -> Result<(TlsStream<TcpStream>, Principal), String> {
        let stream = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, self.acceptor().accept(stream))
            .await
            .map_err(|_| format!("no TLS handshake within {TLS_HANDSHAKE_TIMEOUT:?}"))?
            .map_err(|e| format!("TLS handshake failed: {e}"))?;
        let certificate = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first());
        let principal = match certificate {
            Some(certificate) => {
                Principal::user(security::subject_name(certificate).map_err(|e| e.to_string())?)
            }
            None => Principal::anonymous(),
        };
        Ok((stream, principal))
    }
}

fn stamps(settings: &TlsSettings) -> Vec<Option<(SystemTime, u64)>> {
    settings
        .files()
        .into_iter()
        .map(|file| {
            let meta = std::fs::metadata(file).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

fn build(settings: &TlsSettings) -> Result<TlsAcceptor, TlsFileError> {
    let chain = security::certificates(&settings.cert)?;
    let key = security::private_key(&settings.key)?;
    let provider = security::crypto_provider();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(&settings.cert, e))?;
    let builder = match (&settings.client_ca, settings.client_auth) {
        (Some(ca), auth) if auth != ClientAuth::None => {
            let roots = Arc::new(security::root_store(ca)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| tls_error(ca, e))?)
        }
        _ => builder.with_no_client_auth(),
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        tls_error(
            &settings.key,
            format!("does not match the certificate: {e}"),
        )
    })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn tls_error(path: &Path, reason: impl ToString) -> TlsFileError {
    TlsFileError {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}
