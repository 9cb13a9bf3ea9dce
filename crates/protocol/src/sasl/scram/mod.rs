//! SCRAM (RFC 5802) over SHA-256 and SHA-512 (RFC 7677), as Kafka runs it:
//! no channel binding, no SASLprep, the `tokenauth` extension for
//! delegation tokens (refused here), iterations between 4096 and 16384.
//!
//! ```text
//! client-first   n,,n=<user>,r=<client nonce>            (user: ',' as =2C, '=' as =3D)
//! server-first   r=<client nonce><server nonce>,s=<salt, base64>,i=<iterations>
//! client-final   c=biws,r=<client nonce><server nonce>,p=<proof, base64>
//! server-final   v=<server signature, base64>            (or e=<error>)
//!
//! SaltedPassword  = PBKDF2-HMAC-H(password, salt, iterations)
//! ClientKey       = HMAC(SaltedPassword, "Client Key")    StoredKey = H(ClientKey)
//! ServerKey       = HMAC(SaltedPassword, "Server Key")
//! AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
//! ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
//! ServerSignature = HMAC(ServerKey, AuthMessage)
//! ```
//!
//! The server keeps only the salt, the iterations, StoredKey and ServerKey
//! ([`ScramCredential`]): enough to check a proof and sign the answer, not
//! enough to log in as the user. `c=biws` is `n,,` in base64: the client's
//! gs2 header echoed, which is how RFC 5802 detects a downgrade of channel
//! binding.

mod client;
mod credential;
mod messages;
mod server;
#[cfg(test)]
mod tests;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

pub use client::ScramClient;
pub use credential::{SALT_BYTES, SALT_BYTES_MAX, SaltedPassword, ScramCredential};
pub use server::{Authenticated, ScramServer};

use super::{Mechanism, SaslError, random_bytes};

/// Fewest iterations accepted, in a stored credential or asked of a client
/// (Kafka's `ScramMechanism.minIterations`, RFC 7677's floor).
pub const ITERATIONS_MIN: u32 = 4096;
/// Most iterations a stored credential may have (Kafka's
/// `ScramMechanism.maxIterations`).
pub const ITERATIONS_MAX: u32 = 16384;
/// Iterations of a new credential when none are asked for (Kafka's
/// `kafka-configs` default), and of the stand-in credential an unknown user
/// is answered with.
pub const ITERATIONS_DEFAULT: u32 = 4096;
/// Most iterations the client computes for a server that asks. Above
/// Kafka's maximum, for Kafka-protocol servers that store more; a hostile
/// server asking for billions would otherwise pin a client's CPU.
pub const CLIENT_ITERATIONS_MAX: u32 = 1 << 16;
/// Random bytes of each side's half of the nonce (base64 on the wire).
const NONCE_BYTES: usize = 24;

/// The hash a SCRAM mechanism is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    fn of(mechanism: Mechanism) -> Result<Self, SaslError> {
        match mechanism {
            Mechanism::ScramSha256 => Ok(Self::Sha256),
            Mechanism::ScramSha512 => Ok(Self::Sha512),
            Mechanism::Plain => Err(SaslError::NotScram(mechanism)),
        }
    }

    /// Bytes of the hash's output: of every key and proof.
    fn len(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => Sha256::digest(data).to_vec(),
            Self::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        const ANY_KEY: &str = "HMAC takes keys of any length";
        match self {
            Self::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect(ANY_KEY);
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            Self::Sha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect(ANY_KEY);
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    /// RFC 5802's `Hi`: PBKDF2 with HMAC-H, one block.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.len()];
        match self {
            Self::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
            Self::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out),
        }
        out
    }

    fn client_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, b"Client Key")
    }

    fn server_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, b"Server Key")
    }
}

/// Checks that `iterations` lies in `min..=max`.
fn check_iterations(iterations: i64, min: u32, max: u32) -> Result<u32, SaslError> {
    u32::try_from(iterations)
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or(SaslError::Iterations {
            iterations,
            min,
            max,
        })
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// A fresh half nonce: [`NONCE_BYTES`] random bytes in base64, which has
/// no `,`.
fn random_nonce() -> Result<String, SaslError> {
    use base64::Engine;
    let mut nonce = [0u8; NONCE_BYTES];
    random_bytes(&mut nonce)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(nonce))
}

fn utf8<'a>(message: &'a [u8], what: &'static str) -> Result<&'a str, SaslError> {
    std::str::from_utf8(message).map_err(|_| SaslError::Malformed { what })
}
