//! One connection's SASL authentication, on SASL_PLAINTEXT and SASL_SSL
//! listeners, as Kafka's broker runs it (KIP-43, KIP-152, KIP-368):
//!
//! 1. Until the connection has authenticated, only ApiVersions,
//!    SaslHandshake and SaslAuthenticate are served; any other request
//!    closes the connection. Frames are at most [`SASL_FRAME_BYTES_MAX`]
//!    until then (Kafka's `sasl.server.max.receive.size`).
//! 2. SaslHandshake names a mechanism; one not enabled is answered
//!    UNSUPPORTED_SASL_MECHANISM with the enabled list, and the client may
//!    try another. After a v0 handshake the client's tokens arrive as bare
//!    size-prefixed frames and are answered the same way; after v1 they
//!    arrive in SaslAuthenticate requests.
//! 3. PLAIN takes one token; SCRAM two (client-first, client-final).
//! 4. Success makes the principal `User:<name>`. With a session lifetime
//!    configured it is reported in the SaslAuthenticate answer (v1 and
//!    later); once it has passed, any request but a new SaslHandshake
//!    closes the connection. A new handshake on an authenticated
//!    connection re-authenticates (KIP-368), and must end as the same
//!    principal.
//! 5. Failure is counted, answered SASL_AUTHENTICATION_FAILED (never
//!    naming what was wrong with a secret, nor whether the user exists)
//!    after the failed-login delay, and the connection closes.

use std::time::Instant;

use bytes::{BufMut, Bytes};
use kafka_protocol::messages::{
    ApiKey, RequestKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{CredentialStore, Principal, SaslSettings};
use crate::ErrorCode;
use crate::api::{self, DecodedRequest};
use crate::fetch_frame::Part;
use strata_protocol::sasl::{Mechanism, PlainToken, SaslError, ScramServer};

/// Largest frame read from a connection that has not authenticated.
pub const SASL_FRAME_BYTES_MAX: usize = 512 << 10;

/// The first SaslAuthenticate version whose answer carries the session
/// lifetime.
const SESSION_LIFETIME_VERSION: i16 = 1;

/// What to do with one frame.
pub(crate) enum Step {
    /// A request for the handlers: the connection may send it.
    Pass,
    /// The authentication's answer to this frame; more is to come.
    Answer(Part),
    /// The last answer: the connection is now authenticated (again) as
    /// [`SaslSession::principal`].
    Authenticated(Part),
    /// Authentication failed: this answer (if any), after the failed-login
    /// delay, then close.
    Fail(Option<Part>, String),
    /// Close at once: the client broke the protocol.
    Close(String),
}

enum State {
    /// Waiting for a SaslHandshake.
    Idle,
    /// A mechanism was chosen; its first token is next. `raw`: tokens come
    /// as bare frames (a v0 handshake).
    Chosen { mechanism: Mechanism, raw: bool },
    /// A SCRAM exchange waiting for the client-final message.
    Scram { server: Box<ScramServer>, raw: bool },
}

/// One connection's authentication.
pub(crate) struct SaslSession {
    settings: SaslSettings,
    state: State,
    /// Who the connection authenticated as, and until when.
    authenticated: Option<(Principal, Option<Instant>)>,
}

impl SaslSession {
    pub fn new(settings: SaslSettings) -> Self {
        Self {
            settings,
            state: State::Idle,
            authenticated: None,
        }
    }

    /// The principal, once authenticated.
    pub fn principal(&self) -> Option<&Principal> {
        self.authenticated.as_ref().map(|(principal, _)| principal)
    }

    /// Whether `frame` is an ordinary request of an authenticated, unexpired
    /// session: the handlers take it with no further look (the API key is
    /// the frame's first two bytes; neither SASL API is passed this way).
    pub fn passes(&self, frame: &[u8], now: Instant) -> bool {
        let authenticated = match &self.authenticated {
            Some((_, expiry)) => expiry.is_none_or(|expiry| now < expiry),
            None => false,
        };
        let key = match frame {
            [high, low, ..] => i16::from_be_bytes([*high, *low]),
            _ => return false,
        };
        authenticated
            && matches!(self.state, State::Idle)
            && key != ApiKey::SaslHandshake as i16
            && key != ApiKey::SaslAuthenticate as i16
    }

    /// Takes one frame. Blocks on the credential store's file and on PLAIN's
    /// key derivation: call it off the executor's threads.
    pub fn step(&mut self, frame: &Bytes, credentials: &CredentialStore, now: Instant) -> Step {
        if let State::Chosen { raw: true, .. } | State::Scram { raw: true, .. } = self.state {
            return self.token(frame, None, credentials, now);
        }
        let request = match api::decode_request(frame.clone()) {
            Ok(DecodedRequest::Request { key, header, body }) => (key, header, body),
            // Answered by the handlers, in v0, whatever the state.
            Ok(DecodedRequest::ApiVersionsTooNew { .. }) => return Step::Pass,
            Err(error) => return Step::Close(format!("during SASL authentication: {error}")),
        };
        match request {
            (ApiKey::SaslHandshake, header, RequestKind::SaslHandshake(handshake)) => {
                let version = header.request_api_version;
                let asked = handshake.mechanism.as_str();
                let enabled = self.settings.mechanisms.iter().copied();
                let answer = |error: ErrorCode| {
                    let response = SaslHandshakeResponse::default()
                        .with_error_code(error.code())
                        .with_mechanisms(
                            enabled
                                .clone()
                                .map(|m| StrBytes::from_static_str(m.name()))
                                .collect(),
                        );
                    api::respond(
                        ApiKey::SaslHandshake,
                        version,
                        header.correlation_id,
                        &response,
                    )
                };
                if !matches!(self.state, State::Idle) {
                    return Step::Close("a second SaslHandshake before authenticating".into());
                }
                // Re-authentication (KIP-368) goes through SaslAuthenticate:
                // bare tokens would be read as requests of the session.
                if version == 0 && self.authenticated.is_some() {
                    return Step::Close("re-authentication with a v0 SaslHandshake".into());
                }
                let chosen = asked
                    .parse::<Mechanism>()
                    .ok()
                    .filter(|m| self.settings.mechanisms.contains(m));
                let Some(mechanism) = chosen else {
                    return match answer(ErrorCode::UnsupportedSaslMechanism) {
                        Ok(part) => Step::Answer(part),
                        Err(error) => Step::Close(error.to_string()),
                    };
                };
                self.state = State::Chosen {
                    mechanism,
                    raw: version == 0,
                };
                match answer(ErrorCode::None) {
                    Ok(part) => Step::Answer(part),
                    Err(error) => Step::Close(error.to_string()),
                }
            }
            (ApiKey::SaslAuthenticate, header, RequestKind::SaslAuthenticate(request)) => {
                if matches!(self.state, State::Idle) {
                    return Step::Close("SaslAuthenticate before SaslHandshake".into());
                }
                let reply = (header.request_api_version, header.correlation_id);
                self.token(&request.auth_bytes, Some(reply), credentials, now)
            }
            (key, ..) => match &self.authenticated {
                Some((_, Some(expiry))) if now >= *expiry => Step::Close(format!(
                    "{key:?} after the SASL session expired: the client must re-authenticate"
                )),
                // ApiVersions is served before authentication too.
                _ if key == ApiKey::ApiVersions && matches!(self.state, State::Idle) => Step::Pass,
                Some(_) if matches!(self.state, State::Idle) => Step::Pass,
                _ => Step::Close(format!("{key:?} before SASL authentication completed")),
            },
        }
    }

    /// One client token, bare (`reply` None) or from a SaslAuthenticate
    /// request (`reply` its version and correlation id).
    fn token(
        &mut self,
        token: &[u8],
        reply: Option<(i16, i32)>,
        credentials: &CredentialStore,
        now: Instant,
    ) -> Step {
        let outcome = match std::mem::replace(&mut self.state, State::Idle) {
            State::Idle => return Step::Close("a SASL token before SaslHandshake".into()),
            State::Chosen {
                mechanism: Mechanism::Plain,
                ..
            } => PlainToken::parse(token).and_then(|plain| {
                if credentials.verify_plain(&plain.user, &plain.password) {
                    Ok(Exchange::Done(plain.user, Vec::new()))
                } else {
                    Err(SaslError::AuthenticationFailed)
                }
            }),
            State::Chosen { mechanism, raw } => {
                ScramServer::new(mechanism).and_then(|mut server| {
                    let first = server
                        .receive_client_first(token, |user| credentials.scram(user, mechanism))?;
                    self.state = State::Scram {
                        server: Box::new(server),
                        raw,
                    };
                    Ok(Exchange::Continue(first))
                })
            }
            State::Scram { mut server, .. } => server
                .receive_client_final(token)
                .map(|done| Exchange::Done(done.user, done.server_final)),
        };
        match outcome {
            Ok(Exchange::Continue(answer)) => self.answer(reply, ErrorCode::None, None, answer, 0),
            Ok(Exchange::Done(user, answer)) => {
                let principal = Principal::user(user);
                if let Some((before, _)) = &self.authenticated
                    && *before != principal
                {
                    let message = "re-authentication must keep the principal".to_string();
                    return self.fail(reply, message);
                }
                let lifetime = self.settings.session_lifetime;
                let expiry = lifetime.map(|lifetime| now + lifetime);
                self.authenticated = Some((principal, expiry));
                let lifetime_ms = match reply {
                    Some((version, _)) if version >= SESSION_LIFETIME_VERSION => {
                        lifetime.map_or(0, |l| i64::try_from(l.as_millis()).unwrap_or(i64::MAX))
                    }
                    _ => 0,
                };
                match self.answer(reply, ErrorCode::None, None, answer, lifetime_ms) {
                    Step::Answer(part) => Step::Authenticated(part),
                    other => other,
                }
            }
            Err(error) => self.fail(reply, error.to_string()),
        }
    }

    fn fail(&mut self, reply: Option<(i16, i32)>, message: String) -> Step {
        self.state = State::Idle;
        let answer = match reply {
            // A bare token exchange has no way to say why: it closes.
            None => None,
            Some(_) => match self.answer(
                reply,
                ErrorCode::SaslAuthenticationFailed,
                Some(&message),
                Vec::new(),
                0,
            ) {
                Step::Answer(part) => Some(part),
                _ => None,
            },
        };
        Step::Fail(answer, message)
    }

    fn answer(
        &self,
        reply: Option<(i16, i32)>,
        error: ErrorCode,
        message: Option<&str>,
        token: Vec<u8>,
        session_lifetime_ms: i64,
    ) -> Step {
        let Some((version, correlation_id)) = reply else {
            let mut frame = Vec::with_capacity(4 + token.len());
            frame.put_i32(i32::try_from(token.len()).unwrap_or(i32::MAX));
            frame.put_slice(&token);
            return Step::Answer(Part::Bytes(frame));
        };
        let response = SaslAuthenticateResponse::default()
            .with_error_code(error.code())
            .with_error_message(message.map(|m| StrBytes::from_string(m.to_string())))
            .with_auth_bytes(Bytes::from(token))
            .with_session_lifetime_ms(session_lifetime_ms);
        match api::respond(ApiKey::SaslAuthenticate, version, correlation_id, &response) {
            Ok(part) => Step::Answer(part),
            Err(error) => Step::Close(error.to_string()),
        }
    }
}

enum Exchange {
    /// Send this and wait for the client's next token.
    Continue(Vec<u8>),
    /// Authenticated as this user; send the last message.
    Done(String, Vec<u8>),
}
