//! The client's side of one SCRAM exchange: client-first out; server-first
//! in, client-final out; server-final in, the server's signature checked.
//!
//! The client refuses a server that could be an impostor or a nuisance: a
//! nonce that does not extend its own (a replayed exchange), iterations
//! below [`ITERATIONS_MIN`] (a downgrade that makes the proof cheap to
//! brute-force) or above [`CLIENT_ITERATIONS_MAX`] (a CPU trap), and a
//! server signature that does not verify (a server that does not hold the
//! user's credential). The password is dropped once the proof is made.

use std::fmt;

use super::messages::{ClientFinal, ClientFirst, ServerFinal, ServerFirst};
use super::{
    CLIENT_ITERATIONS_MAX, Hash, ITERATIONS_MIN, SALT_BYTES_MAX, check_iterations, random_nonce,
    utf8, xor,
};
use crate::sasl::{Mechanism, SaslError, check_size, check_user_and_password, constant_time_eq};

/// The gs2 header the client sends: no channel binding, no authorization
/// id (Kafka's clients send the same).
const GS2_HEADER: &str = "n,,";

/// One SCRAM exchange, client side. A clone goes on from the same step on
/// its own.
#[derive(Clone)]
pub struct ScramClient {
    mechanism: Mechanism,
    hash: Hash,
    /// Taken when the proof is computed.
    password: Option<String>,
    client_nonce: String,
    client_first_bare: String,
    state: State,
}

#[derive(Clone)]
enum State {
    AwaitingServerFirst,
    AwaitingServerFinal { server_signature: Vec<u8> },
    Ended,
}

impl ScramClient {
    /// An exchange for `user` with `password` over a SCRAM `mechanism`.
    pub fn new(mechanism: Mechanism, user: &str, password: &str) -> Result<Self, SaslError> {
        Self::with_client_nonce(mechanism, user, password, &random_nonce()?)
    }

    /// An exchange whose client nonce is `nonce` (tests reproduce RFC
    /// 7677's example with it).
    pub(in crate::sasl) fn with_client_nonce(
        mechanism: Mechanism,
        user: &str,
        password: &str,
        nonce: &str,
    ) -> Result<Self, SaslError> {
        let hash = Hash::of(mechanism)?;
        check_user_and_password(user, password)?;
        Ok(Self {
            mechanism,
            hash,
            password: Some(password.to_string()),
            client_nonce: nonce.to_string(),
            client_first_bare: ClientFirst::write_bare(user, nonce),
            state: State::AwaitingServerFirst,
        })
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// The client-first message, the exchange's opening.
    pub fn client_first(&self) -> Vec<u8> {
        format!("{GS2_HEADER}{}", self.client_first_bare).into_bytes()
    }

    /// Reads server-first and answers with client-final (the proof).
    pub fn receive_server_first(&mut self, message: &[u8]) -> Result<Vec<u8>, SaslError> {
        let awaiting = matches!(self.state, State::AwaitingServerFirst);
        self.state = State::Ended;
        let password = self.password.take();
        let (true, Some(password)) = (awaiting, password) else {
            return Err(SaslError::OutOfOrder);
        };
        check_size("a SCRAM server-first message", message)?;
        let text = utf8(message, "SCRAM server-first message")?;
        let first = ServerFirst::parse(text)?;
        if first.nonce.len() <= self.client_nonce.len()
            || !first.nonce.starts_with(&self.client_nonce)
        {
            return Err(SaslError::NonceMismatch);
        }
        let iterations = check_iterations(first.iterations, ITERATIONS_MIN, CLIENT_ITERATIONS_MAX)?;
        if first.salt.len() > SALT_BYTES_MAX {
            return Err(SaslError::TooLarge {
                what: "a SCRAM salt",
                bytes: first.salt.len(),
                limit: SALT_BYTES_MAX,
            });
        }
        let hash = self.hash;
        let salted = hash.salted_password(password.as_bytes(), &first.salt, iterations);
        drop(password);
        let client_key = hash.client_key(&salted);
        let without_proof = ClientFinal::write_without_proof(GS2_HEADER, first.nonce);
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_signature = hash.hmac(&hash.digest(&client_key), auth_message.as_bytes());
        let proof = xor(&client_key, &client_signature);
        let server_signature = hash.hmac(&hash.server_key(&salted), auth_message.as_bytes());
        self.state = State::AwaitingServerFinal { server_signature };
        Ok(ClientFinal::write(&without_proof, &proof).into_bytes())
    }

    /// Reads server-final: the server's signature must verify; an `e=`
    /// error is returned as [`SaslError::ServerError`].
    pub fn receive_server_final(&mut self, message: &[u8]) -> Result<(), SaslError> {
        let State::AwaitingServerFinal { server_signature } =
            std::mem::replace(&mut self.state, State::Ended)
        else {
            return Err(SaslError::OutOfOrder);
        };
        check_size("a SCRAM server-final message", message)?;
        let text = utf8(message, "SCRAM server-final message")?;
        let last = ServerFinal::parse(text)?;
        if !constant_time_eq(&last.signature, &server_signature) {
            return Err(SaslError::ServerSignature);
        }
        Ok(())
    }

    /// Whether the exchange is over (succeeded or failed).
    pub fn is_ended(&self) -> bool {
        matches!(self.state, State::Ended)
    }
}

/// Shows the mechanism and the step only.
impl fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = match self.state {
            State::AwaitingServerFirst => "awaiting server-first",
            State::AwaitingServerFinal { .. } => "awaiting server-final",
            State::Ended => "ended",
        };
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .field("step", &step)
            .finish_non_exhaustive()
    }
}
