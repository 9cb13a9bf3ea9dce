//! The client side of a SASL login, right after ApiVersions:
//! SaslHandshake v1 names the mechanism, then SaslAuthenticate (the
//! newest version both sides speak, up to 2) carries its tokens — one for
//! PLAIN, two rounds for SCRAM, whose last answer proves the broker knew
//! the password too.
//!
//! A refusal is [`ClientError::Authentication`] with the user and the
//! broker's message, never the password.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use super::error::codes;
use super::security::ClientSecurity;
use super::{ClientError, Connection};
use strata_protocol::sasl::{Mechanism, PlainToken, ScramClient};

/// SaslHandshake v1: the tokens that follow go in SaslAuthenticate.
const HANDSHAKE_VERSION: i16 = 1;
/// Newest SaslAuthenticate this client speaks (v2 is flexible).
const AUTHENTICATE_VERSION_MAX: i16 = 2;

/// Share of a SASL session's lifetime after which the connection is
/// replaced (the broker closes it at the end; a request then in flight
/// would fail).
const SESSION_MARGIN: f64 = 0.1;

/// Connects as `security` says: TLS before the first request, ApiVersions,
/// then SASL; a connection whose session has a lifetime counts as broken
/// once `SESSION_MARGIN` of it is left.
pub async fn connect_secured(
    addr: &str,
    client_id: &str,
    timeout: std::time::Duration,
    security: &ClientSecurity,
) -> Result<Connection, ClientError> {
    let mut connection = Connection::connect_transport(addr, client_id, timeout, security).await?;
    if security.protocol.uses_sasl() {
        let started = std::time::Instant::now();
        if let Some(lifetime) = authenticate(&connection, security).await? {
            connection.expire_at(started + lifetime.mul_f64(1.0 - SESSION_MARGIN));
        }
    }
    Ok(connection)
}

/// Logs in on `connection`; returns the session lifetime the broker set
/// (after which it closes the connection), if any.
pub(crate) async fn authenticate(
    connection: &Connection,
    security: &ClientSecurity,
) -> Result<Option<Duration>, ClientError> {
    let user = security.username.clone().unwrap_or_default();
    let password = security
        .password
        .as_ref()
        .map(|p| p.expose())
        .unwrap_or_default();
    let mechanism = security.sasl_mechanism();
    let refused = |message: String| ClientError::Authentication {
        user: user.clone(),
        message,
    };
    let handshake = connection
        .send_versioned(
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str(mechanism.name())),
            HANDSHAKE_VERSION,
        )
        .await?;
    match handshake.error_code {
        0 => {}
        codes::UNSUPPORTED_SASL_MECHANISM => {
            let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(refused(format!(
                "the broker does not offer {mechanism} (it offers {}): set sasl.mechanism to one of those",
                offered.join(", ")
            )));
        }
        // ILLEGAL_SASL_STATE and the like: the listener is not a SASL one,
        // or the exchange is out of step.
        code => {
            return Err(refused(format!(
                "the broker refused the SASL handshake with {}: check security.protocol against the listener",
                super::error::code_name(code)
            )));
        }
    }
    let version = connection.version::<SaslAuthenticateRequest>(AUTHENTICATE_VERSION_MAX)?;
    let exchange = Exchange {
        connection,
        version,
        user: &user,
    };
    let sasl = |e: strata_protocol::sasl::SaslError| refused(e.to_string());
    match mechanism {
        Mechanism::Plain => {
            let token = PlainToken::encode(&user, password).map_err(sasl)?;
            exchange.round(token).await.map(|(_, lifetime)| lifetime)
        }
        Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
            let mut scram = ScramClient::new(mechanism, &user, password).map_err(sasl)?;
            let (server_first, _) = exchange.round(scram.client_first()).await?;
            let client_final = scram.receive_server_first(&server_first).map_err(sasl)?;
            let (server_final, lifetime) = exchange.round(client_final).await?;
            scram.receive_server_final(&server_final).map_err(|e| {
                refused(format!(
                    "the broker's final SCRAM message does not verify: {e}"
                ))
            })?;
            Ok(lifetime)
        }
    }
}

/// One connection's SaslAuthenticate exchange.
struct Exchange<'a> {
    connection: &'a Connection,
    version: i16,
    user: &'a str,
}

impl Exchange<'_> {
    /// Sends one token; returns the broker's and the session lifetime.
    async fn round(&self, token: Vec<u8>) -> Result<(Bytes, Option<Duration>), ClientError> {
        let response = self
            .connection
            .send_versioned(
                &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
                self.version,
            )
            .await?;
        if response.error_code != 0 {
            let message = response
                .error_message
                .as_ref()
                .map(|m| m.as_str().to_string())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| super::error::code_name(response.error_code));
            return Err(ClientError::Authentication {
                user: self.user.to_string(),
                message,
            });
        }
        let lifetime = u64::try_from(response.session_lifetime_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis);
        Ok((response.auth_bytes, lifetime))
    }
}
