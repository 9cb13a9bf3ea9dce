//! Who may reach an HTTP endpoint the broker or an app serves (`/metrics`,
//! the query endpoint), by the rules the broker's Kafka listeners follow:
//!
//! 1. On a loopback address (the default), anyone on this machine, in
//!    clear.
//! 2. On any other address, only over TLS and with authentication: every
//!    request carries the token read from a file (`Authorization: Bearer
//!    TOKEN`, or HTTP Basic with the token as the password, which a
//!    browser can send), or a user's password where the process checks
//!    them ([`PasswordCheck`]: the broker's SCRAM credentials), or is
//!    answered 401. A token without TLS would travel in clear, and TLS
//!    without a token authenticates only the server, so neither opens a
//!    remote address alone.
//! 3. Unless the operator says otherwise: with `allow_unauthenticated_remote`
//!    any address is served as configured, TLS and token or not.
//!
//! The token is compared in constant time. Instances that forward queries
//! to each other send the same token, and verify each other's certificates
//! against the CA file given for that (`tls_ca`).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use rustls::{ClientConfig, ServerConfig};
use strata_protocol::security::{self, TlsFileError};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The shortest token accepted: guessing it must not be practical.
pub const TOKEN_CHARS_MIN: usize = 16;

/// Checks a user's password sent with HTTP Basic (the broker: against its
/// SCRAM credentials and ACLs). May take milliseconds (a key derivation),
/// so requests call it off the async threads.
pub trait PasswordCheck: Send + Sync + 'static {
    /// Whether `password` is `user`'s, asked from `peer`.
    fn check(&self, user: &str, password: &str, peer: IpAddr) -> bool;
}

/// How the HTTP endpoints of one process are secured, as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpSecurity {
    /// Certificate chain and private key (PEM) to serve TLS with.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// CA certificates (PEM) other instances' HTTP certificates chain to,
    /// for the queries one instance forwards to another over TLS.
    pub tls_ca: Option<PathBuf>,
    /// A file whose first line is the token every request must carry.
    pub token_file: Option<PathBuf>,
    /// Serve beyond loopback without TLS and a token.
    pub allow_unauthenticated_remote: bool,
}

/// Why an endpoint may not be served as configured.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(
        "the {what} would listen on {addr}, beyond this machine, without TLS and a token: give a loopback address, or TLS (certificate and key) with a token file, or allow it with --allow-unauthenticated-remote"
    )]
    UnauthenticatedRemote { what: String, addr: SocketAddr },
    #[error("token file {}: {reason}", path.display())]
    Token { path: PathBuf, reason: String },
    #[error(transparent)]
    TlsFile(#[from] TlsFileError),
    #[error("TLS for the HTTP endpoints: {0}")]
    Tls(String),
}

/// The security of one process's endpoints, loaded: what serving and
/// forwarding use.
#[derive(Clone, Default)]
pub struct Access {
    acceptor: Option<TlsAcceptor>,
    connector: Option<TlsConnector>,
    token: Option<Arc<str>>,
    passwords: Option<Arc<dyn PasswordCheck>>,
    allow_unauthenticated_remote: bool,
}

/// What a request's `Authorization` header gives.
enum Given<'a> {
    None,
    Token(&'a [u8]),
    /// HTTP Basic: a user and a password.
    Password(String, String),
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("tls", &self.acceptor.is_some())
            .field("token", &self.token.is_some())
            .field("passwords", &self.passwords.is_some())
            .finish_non_exhaustive()
    }
}

impl HttpSecurity {
    /// Reads the files named: certificate, key, CA and token.
    pub fn load(&self) -> Result<Access, AccessError> {
        let provider = security::crypto_provider();
        let acceptor = match &self.tls {
            Some((cert, key)) => {
                let mut config = ServerConfig::builder_with_provider(Arc::clone(&provider))
                    .with_safe_default_protocol_versions()
                    .map_err(|e| AccessError::Tls(e.to_string()))?
                    .with_no_client_auth()
                    .with_single_cert(security::certificates(cert)?, security::private_key(key)?)
                    .map_err(|e| AccessError::Tls(format!("{}: {e}", key.display())))?;
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                Some(TlsAcceptor::from(Arc::new(config)))
            }
            None => None,
        };
        let connector = match &self.tls_ca {
            Some(ca) => {
                let config = ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| AccessError::Tls(e.to_string()))?
                    .with_root_certificates(security::root_store(ca)?)
                    .with_no_client_auth();
                Some(TlsConnector::from(Arc::new(config)))
            }
            None => None,
        };
        let token = match &self.token_file {
            Some(path) => Some(read_token(path)?),
            None => None,
        };
        Ok(Access {
            acceptor,
            connector,
            token,
            passwords: None,
            allow_unauthenticated_remote: self.allow_unauthenticated_remote,
        })
    }
}

/// The token: the file's first line, trimmed.
fn read_token(path: &Path) -> Result<Arc<str>, AccessError> {
    let failed = |reason: String| AccessError::Token {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    let token = text.lines().next().unwrap_or_default().trim();
    if token.chars().count() < TOKEN_CHARS_MIN {
        return Err(failed(format!(
            "the token (its first line) is shorter than {TOKEN_CHARS_MIN} characters; write a longer random one, e.g. `openssl rand -hex 32`"
        )));
    }
    if !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err(failed(
            "the token holds characters an HTTP header cannot carry; use printable ASCII".into(),
        ));
    }
    Ok(token.into())
}

impl Access {
    /// Also admits a user whose HTTP Basic password `check` accepts.
    pub fn with_passwords(mut self, check: Arc<dyn PasswordCheck>) -> Self {
        self.passwords = Some(check);
        self
    }

    /// Whether a request must authenticate (a token, or a password).
    pub fn authenticates(&self) -> bool {
        self.token.is_some() || self.passwords.is_some()
    }

    /// Refuses to serve the `what` endpoint on `addr` beyond loopback
    /// without TLS and authentication (unless allowed).
    pub fn check_bind(&self, addr: SocketAddr, what: &str) -> Result<(), AccessError> {
        let secured = self.acceptor.is_some() && self.authenticates();
        if addr.ip().is_loopback() || secured || self.allow_unauthenticated_remote {
            return Ok(());
        }
        Err(AccessError::UnauthenticatedRemote {
            what: what.to_string(),
            addr,
        })
    }

    /// `https` when the endpoints serve TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.acceptor.is_some() {
            "https"
        } else {
            "http"
        }
    }

    pub(crate) fn acceptor(&self) -> Option<&TlsAcceptor> {
        self.acceptor.as_ref()
    }

    pub(crate) fn connector(&self) -> Option<&TlsConnector> {
        self.connector.as_ref()
    }

    /// The token requests must carry, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Whether `header` (an `Authorization` value) authenticates: the
    /// token (`Bearer TOKEN`, or as the password of HTTP Basic, any user),
    /// or a user's password the [`PasswordCheck`] accepts from `peer`; true
    /// when nothing is required. A password check may be slow: the server
    /// calls this off its async threads when [`Access::checks_password`]
    /// says so.
    pub fn admits(&self, header: Option<&[u8]>, peer: IpAddr) -> bool {
        if !self.authenticates() {
            return true;
        }
        match given(header) {
            Given::None => false,
            Given::Token(token) => self.token_is(token),
            Given::Password(user, password) => {
                self.token_is(password.as_bytes())
                    || (self.passwords.as_ref())
                        .is_some_and(|check| check.check(&user, &password, peer))
            }
        }
    }

    /// Whether admitting `header` may call the (slow) password check.
    pub fn checks_password(&self, header: Option<&[u8]>) -> bool {
        self.passwords.is_some() && matches!(given(header), Given::Password(..))
    }

    fn token_is(&self, given: &[u8]) -> bool {
        (self.token.as_ref()).is_some_and(|token| constant_time_eq(given, token.as_bytes()))
    }
}

/// Reads an `Authorization` header: `Bearer TOKEN`, or `Basic` with
/// base64 of `user:password` (anything else gives nothing).
fn given(header: Option<&[u8]>) -> Given<'_> {
    let Some(header) = header else {
        return Given::None;
    };
    if let Some(token) = header.strip_prefix(b"Bearer ") {
        return Given::Token(token);
    }
    let Some(encoded) = header.strip_prefix(b"Basic ") else {
        return Given::None;
    };
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim_ascii());
    let Some(text) = decoded.ok().and_then(|d| String::from_utf8(d).ok()) else {
        return Given::None;
    };
    match text.split_once(':') {
        Some((user, password)) => Given::Password(user.to_string(), password.to_string()),
        None => Given::None,
    }
}

/// Equality whose time depends on the lengths only, not on where the
/// bytes first differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn with_token(dir: &Path, token: &str) -> Result<Access, AccessError> {
        let path = dir.join("token");
        std::fs::write(&path, token).unwrap();
        HttpSecurity {
            token_file: Some(path),
            ..HttpSecurity::default()
        }
        .load()
    }

    #[test]
    fn beyond_loopback_only_tls_with_a_token_or_an_explicit_allowance_serves() {
        let anywhere: SocketAddr = "0.0.0.0:9100".parse().unwrap();
        let loopback: SocketAddr = "127.0.0.1:9100".parse().unwrap();
        let open = Access::default();
        assert!(open.check_bind(loopback, "metrics endpoint").is_ok());
        let refused = open.check_bind(anywhere, "metrics endpoint").unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("--allow-unauthenticated-remote"),
            "{refused}"
        );
        let dir = tempfile::tempdir().unwrap();
        let token_only = with_token(dir.path(), "0123456789abcdef0123").unwrap();
        assert!(
            token_only.check_bind(anywhere, "query endpoint").is_err(),
            "a token in clear"
        );
        let allowed = HttpSecurity {
            allow_unauthenticated_remote: true,
            ..HttpSecurity::default()
        };
        assert!(
            allowed
                .load()
                .unwrap()
                .check_bind(anywhere, "query endpoint")
                .is_ok()
        );
    }

    #[test]
    fn a_request_is_admitted_with_the_exact_token_only() {
        let dir = tempfile::tempdir().unwrap();
        let access = with_token(dir.path(), "0123456789abcdef0123\nignored").unwrap();
        assert!(access.admits(Some(b"Bearer 0123456789abcdef0123"), HERE));
        assert!(!access.admits(Some(b"Bearer 0123456789abcdef012"), HERE));
        assert!(!access.admits(Some(b"Bearer 0123456789abcdef01234"), HERE));
        assert!(!access.admits(Some(b"Basic 0123456789abcdef0123"), HERE));
        assert!(!access.admits(None, HERE));
        // The token as HTTP Basic's password, as a browser sends it.
        let basic = |user_and_password: &str| {
            let encoded = base64::engine::general_purpose::STANDARD.encode(user_and_password);
            format!("Basic {encoded}")
        };
        assert!(access.admits(Some(basic("anyone:0123456789abcdef0123").as_bytes()), HERE));
        assert!(!access.admits(Some(basic("anyone:0123456789abcdef012").as_bytes()), HERE));
        assert!(!access.admits(Some(basic("0123456789abcdef0123").as_bytes()), HERE));
        assert!(
            Access::default().admits(None, HERE),
            "no token, nothing asked"
        );
        // A process that checks passwords admits the users it accepts.
        struct Alice;
        impl PasswordCheck for Alice {
            fn check(&self, user: &str, password: &str, _: IpAddr) -> bool {
                user == "alice" && password == "wonderland"
            }
        }
        let passwords = Access::default().with_passwords(Arc::new(Alice));
        assert!(passwords.checks_password(Some(basic("alice:wonderland").as_bytes())));
        assert!(passwords.admits(Some(basic("alice:wonderland").as_bytes()), HERE));
        assert!(!passwords.admits(Some(basic("alice:looking-glass").as_bytes()), HERE));
        assert!(!passwords.admits(Some(b"Bearer wonderland"), HERE));
        assert!(!passwords.admits(None, HERE));
        let short = with_token(dir.path(), "short").unwrap_err();
        assert!(short.to_string().contains("openssl rand"), "{short}");
    }
}
