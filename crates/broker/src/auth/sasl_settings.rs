//! What the broker's SASL listeners accept (the `[sasl]` table): apart
//! from the session that applies it, so the configuration does not depend
//! on request handling.

use std::time::Duration;

use strata_protocol::sasl::Mechanism;

/// What the broker's SASL listeners accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslSettings {
    /// Enabled mechanisms, in the order the handshake lists them.
    pub mechanisms: Vec<Mechanism>,
    /// How long an authentication lasts before the client must
    /// re-authenticate (Kafka's `connections.max.reauth.ms`); `None` is
    /// for the connection's life.
    pub session_lifetime: Option<Duration>,
    /// How long a failed authentication waits before its answer and the
    /// close, so guessing passwords is slow.
    pub failed_login_delay: Duration,
    /// How long a connection has from its start (after the TLS handshake,
    /// on SASL_SSL) to authenticate before it is closed: one that never
    /// does cannot hold a connection slot by sending a request now and
    /// then (the idle timeout alone would let it).
    pub login_timeout: Duration,
}

impl Default for SaslSettings {
    fn default() -> Self {
        Self {
            mechanisms: vec![
                Mechanism::ScramSha512,
                Mechanism::ScramSha256,
                Mechanism::Plain,
            ],
            session_lifetime: None,
            failed_login_delay: Duration::from_secs(1),
            login_timeout: Duration::from_secs(30),
        }
    }
}
