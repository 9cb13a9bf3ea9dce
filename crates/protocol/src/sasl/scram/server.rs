//! The server's side of one SCRAM exchange: client-first in, server-first
//! out; client-final in, the authenticated user and server-final out.
//!
//! A user the lookup does not know is answered with a stand-in credential
//! ([`ScramCredential::stand_in`]) and fails at the proof, with the same
//! error as a wrong password, after the same work: neither the messages
//! nor their timing tell an attacker which names exist. The proof is
//! compared in constant time.
//!
//! Any error ends the exchange: a later message is refused as out of order.

use std::fmt;

use super::messages::{ClientFinal, ClientFirst, ServerFinal, ServerFirst};
use super::{Hash, ScramCredential, random_nonce, utf8, xor};
use crate::sasl::{Mechanism, SaslError, check_size, constant_time_eq};

/// A successful exchange: who authenticated, and the server-final message
/// to send them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    pub user: String,
    pub server_final: Vec<u8>,
}

/// One SCRAM exchange, server side.
pub struct ScramServer {
    mechanism: Mechanism,
    hash: Hash,
    state: State,
    /// The server's half of the nonce, drawn at construction.
    server_nonce: String,
}

enum State {
    AwaitingClientFirst,
    AwaitingClientFinal(Box<Challenge>),
    Ended,
}

/// What the server remembers between its two messages.
struct Challenge {
    user: String,
    /// The lookup found the user: a stand-in's proof never passes, however
    /// unlikely a match.
    known: bool,
    credential: ScramCredential,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl ScramServer {
    /// An exchange for a SCRAM `mechanism` (PLAIN is refused).
    pub fn new(mechanism: Mechanism) -> Result<Self, SaslError> {
        Self::with_server_nonce(mechanism, &random_nonce()?)
    }

    /// An exchange whose server nonce is `nonce` (tests reproduce RFC
    /// 7677's example with it).
    pub(in crate::sasl) fn with_server_nonce(
        mechanism: Mechanism,
        nonce: &str,
    ) -> Result<Self, SaslError> {
        Ok(Self {
            mechanism,
            hash: Hash::of(mechanism)?,
            state: State::AwaitingClientFirst,
            server_nonce: nonce.to_string(),
        })
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Reads the client-first message and answers with server-first.
    /// `lookup` finds the credential of the named user for this mechanism.
    pub fn receive_client_first(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<Vec<u8>, SaslError> {
        if !matches!(self.state, State::AwaitingClientFirst) {
            self.state = State::Ended;
            return Err(SaslError::OutOfOrder);
        }
        self.state = State::Ended;
        check_size("a SCRAM client-first message", message)?;
        let text = utf8(message, "SCRAM client-first message")?;
        let first = ClientFirst::parse(text)?;
        if first.token_auth {
            return Err(SaslError::DelegationToken);
        }
        if first.authzid.as_ref().is_some_and(|id| *id != first.user) {
            return Err(SaslError::AuthorizationId);
        }
        let (credential, known) = match lookup(&first.user) {
            Some(credential) => (credential, true),
            None => (
                ScramCredential::stand_in(self.mechanism, &first.user),
                false,
            ),
        };
        let nonce = format!("{}{}", first.nonce, self.server_nonce);
        let server_first = ServerFirst::write(&nonce, &credential.salt, credential.iterations);
        self.state = State::AwaitingClientFinal(Box::new(Challenge {
            user: first.user,
            known,
            credential,
            gs2_header: first.gs2_header.to_string(),
            client_first_bare: first.bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        }));
        Ok(server_first.into_bytes())
    }

    /// Reads the client-final message: checks the channel binding, the
    /// nonce and the proof, and returns the user with server-final.
    pub fn receive_client_final(&mut self, message: &[u8]) -> Result<Authenticated, SaslError> {
        let State::AwaitingClientFinal(challenge) =
            std::mem::replace(&mut self.state, State::Ended)
        else {
            return Err(SaslError::OutOfOrder);
        };
        check_size("a SCRAM client-final message", message)?;
        let text = utf8(message, "SCRAM client-final message")?;
        let last = ClientFinal::parse(text)?;
        if last.channel_binding != challenge.gs2_header.as_bytes() {
            return Err(SaslError::ChannelBinding);
        }
        // Kafka's broker accepts a nonce that ends with the exchange's (and
        // librdkafka 2.0 sends its own nonce again in front of it);
        // the proof covers the message as sent either way.
        if !last.nonce.ends_with(&challenge.nonce) {
            return Err(SaslError::NonceMismatch);
        }
        let auth_message = format!(
            "{},{},{}",
            challenge.client_first_bare, challenge.server_first, last.without_proof
        );
        let hash = self.hash;
        let credential = &challenge.credential;
        let client_signature = hash.hmac(&credential.stored_key, auth_message.as_bytes());
        // A proof of the wrong length is checked like any other, against
        // zeros, so its rejection costs what a wrong proof's does.
        let proof = if last.proof.len() == client_signature.len() {
            last.proof
        } else {
            vec![0; client_signature.len()]
        };
        let proof_matches = constant_time_eq(
            &hash.digest(&xor(&proof, &client_signature)),
            &credential.stored_key,
        );
        if !(proof_matches && challenge.known) {
            return Err(SaslError::AuthenticationFailed);
        }
        let signature = hash.hmac(&credential.server_key, auth_message.as_bytes());
        Ok(Authenticated {
            user: challenge.user,
            server_final: ServerFinal::write(&signature).into_bytes(),
        })
    }

    /// Whether the exchange is over (succeeded or failed).
    pub fn is_ended(&self) -> bool {
        matches!(self.state, State::Ended)
    }
}

/// Shows the mechanism and the step only.
impl fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = match self.state {
            State::AwaitingClientFirst => "awaiting client-first",
            State::AwaitingClientFinal(_) => "awaiting client-final",
            State::Ended => "ended",
        };
        f.debug_struct("ScramServer")
            .field("mechanism", &self.mechanism)
            .field("step", &step)
            .finish()
    }
}
