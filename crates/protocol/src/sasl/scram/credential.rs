//! What a server stores of a SCRAM password ([`ScramCredential`]), and
//! what a client sends to set one ([`SaltedPassword`], the body of
//! AlterUserScramCredentials: the password never leaves the client).
//!
//! The stand-in credential for a user the server does not know
//! ([`ScramCredential::stand_in`]) is derived from the user's name and a
//! secret drawn once per process: the same name is always offered the same
//! salt (a salt that changed between attempts would betray the absence),
//! and nobody can know its keys, so its proof check fails like a wrong
//! password's.

use std::fmt;
use std::sync::OnceLock;

use super::{Hash, ITERATIONS_DEFAULT, ITERATIONS_MAX, ITERATIONS_MIN, check_iterations};
use crate::sasl::{Mechanism, SaslError, check_user_and_password, constant_time_eq, random_bytes};

/// Bytes of the salt of a new credential (Kafka's `ScramFormatter` draws 32
/// too).
pub const SALT_BYTES: usize = 32;
/// Longest salt accepted from a client or a file.
pub const SALT_BYTES_MAX: usize = 1024;

/// A user's SCRAM credential as the server keeps it: no password, nothing
/// that logs in as the user.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramCredential {
    /// The credential of `password` with `salt` and `iterations` (checked
    /// against [`ITERATIONS_MIN`]..=[`ITERATIONS_MAX`]).
    pub fn derive(
        mechanism: Mechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, SaslError> {
        let salted = SaltedPassword::derive(mechanism, password, salt, iterations)?;
        Self::from_salted(mechanism, &salted)
    }

    /// The credential of a password salted by the client, as
    /// AlterUserScramCredentials carries it.
    pub fn from_salted_password(
        mechanism: Mechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, SaslError> {
        let hash = Hash::of(mechanism)?;
        check_iterations(i64::from(iterations), ITERATIONS_MIN, ITERATIONS_MAX)?;
        check_salt(salt)?;
        check_length("the salted password", mechanism, hash, salted_password)?;
        Ok(Self {
            salt: salt.to_vec(),
            iterations,
            stored_key: hash.digest(&hash.client_key(salted_password)),
            server_key: hash.server_key(salted_password),
        })
    }

    /// The credential of `password` with a fresh random salt.
    pub fn generate(
        mechanism: Mechanism,
        password: &str,
        iterations: u32,
    ) -> Result<Self, SaslError> {
        let salted = SaltedPassword::generate(mechanism, password, iterations)?;
        Self::from_salted(mechanism, &salted)
    }

    fn from_salted(mechanism: Mechanism, salted: &SaltedPassword) -> Result<Self, SaslError> {
        Self::from_salted_password(
            mechanism,
            &salted.salted_password,
            &salted.salt,
            salted.iterations,
        )
    }

    /// Whether `password` is the one this credential was made from (PLAIN
    /// checks passwords this way). Compared in constant time; costs one
    /// PBKDF2 of the credential's iterations, right or wrong.
    pub fn verify_password(&self, mechanism: Mechanism, password: &str) -> bool {
        let Ok(hash) = Hash::of(mechanism) else {
            return false;
        };
        let salted = hash.salted_password(password.as_bytes(), &self.salt, self.iterations);
        let stored_key = hash.digest(&hash.client_key(&salted));
        constant_time_eq(&stored_key, &self.stored_key)
    }

    /// Checks a credential read from elsewhere (a file) for `mechanism`:
    /// iterations in bounds, a salt, keys of the hash's length.
    pub fn check(&self, mechanism: Mechanism) -> Result<(), SaslError> {
        let hash = Hash::of(mechanism)?;
        check_iterations(i64::from(self.iterations), ITERATIONS_MIN, ITERATIONS_MAX)?;
        check_salt(&self.salt)?;
        check_length("the stored key", mechanism, hash, &self.stored_key)?;
        check_length("the server key", mechanism, hash, &self.server_key)
    }

    /// The credential an unknown user is answered with, so the exchange
    /// runs to the proof check (which fails) exactly as for a known user
    /// with a wrong password: same messages, same work. Stable for a name
    /// within a process; its keys are unknowable.
    pub fn stand_in(mechanism: Mechanism, user: &str) -> Self {
        let hash = Hash::of(mechanism).unwrap_or(Hash::Sha512);
        let derive = |label: &str, len: usize| {
            let mut input = Vec::with_capacity(label.len() + 16 + user.len());
            input.extend_from_slice(label.as_bytes());
            input.push(0);
            input.extend_from_slice(mechanism.name().as_bytes());
            input.push(0);
            input.extend_from_slice(user.as_bytes());
            let mut out = hash.hmac(stand_in_secret(), &input);
            out.truncate(len);
            out
        };
        Self {
            salt: derive("salt", SALT_BYTES),
            iterations: ITERATIONS_DEFAULT,
            stored_key: derive("stored key", hash.len()),
            server_key: derive("server key", hash.len()),
        }
    }
}

/// Shows the salt's size and the iterations only.
impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("salt_bytes", &self.salt.len())
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// A password salted and hashed by the client: what
/// AlterUserScramCredentials sends (Kafka's `ScramCredentialUpsertion`).
#[derive(Clone, PartialEq, Eq)]
pub struct SaltedPassword {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub salted_password: Vec<u8>,
}

impl SaltedPassword {
    /// `password` salted with `salt` over `iterations` (checked against
    /// [`ITERATIONS_MIN`]..=[`ITERATIONS_MAX`]).
    pub fn derive(
        mechanism: Mechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, SaslError> {
        let hash = Hash::of(mechanism)?;
        check_iterations(i64::from(iterations), ITERATIONS_MIN, ITERATIONS_MAX)?;
        check_salt(salt)?;
        // The name is not known here; any non-empty one checks the password.
        check_user_and_password("-", password)?;
        Ok(Self {
            salt: salt.to_vec(),
            iterations,
            salted_password: hash.salted_password(password.as_bytes(), salt, iterations),
        })
    }

    /// `password` salted with [`SALT_BYTES`] fresh random bytes.
    pub fn generate(
        mechanism: Mechanism,
        password: &str,
        iterations: u32,
    ) -> Result<Self, SaslError> {
        let mut salt = [0u8; SALT_BYTES];
        random_bytes(&mut salt)?;
        Self::derive(mechanism, password, &salt, iterations)
    }
}

/// Shows the salt's size and the iterations only.
impl fmt::Debug for SaltedPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaltedPassword")
            .field("salt_bytes", &self.salt.len())
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

fn check_salt(salt: &[u8]) -> Result<(), SaslError> {
    if salt.is_empty() {
        return Err(SaslError::Malformed {
            what: "SCRAM salt (empty)",
        });
    }
    if salt.len() > SALT_BYTES_MAX {
        return Err(SaslError::TooLarge {
            what: "a SCRAM salt",
            bytes: salt.len(),
            limit: SALT_BYTES_MAX,
        });
    }
    Ok(())
}

fn check_length(
    what: &'static str,
    mechanism: Mechanism,
    hash: Hash,
    bytes: &[u8],
) -> Result<(), SaslError> {
    if bytes.len() != hash.len() {
        return Err(SaslError::KeyLength {
            what,
            mechanism,
            expected: hash.len(),
            bytes: bytes.len(),
        });
    }
    Ok(())
}

/// The per-process secret stand-in credentials are derived from.
fn stand_in_secret() -> &'static [u8] {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    SECRET.get_or_init(|| {
        let mut secret = [0u8; 32];
        if random_bytes(&mut secret).is_err() {
            // No OS randomness: std's per-process random hash keys still
            // make the secret unguessable from outside.
            use std::hash::{BuildHasher, Hasher};
            for chunk in secret.chunks_mut(8) {
                let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
                hasher.write_usize(chunk.as_ptr() as usize);
                chunk.copy_from_slice(&hasher.finish().to_le_bytes());
            }
        }
        secret
    })
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD as BASE64;

    use super::*;

    #[test]
    fn a_credential_verifies_its_password_and_no_other() {
        for mechanism in Mechanism::SCRAM {
            let credential = ScramCredential::generate(mechanism, "pencil", 4096).unwrap();
            assert!(credential.verify_password(mechanism, "pencil"));
            assert!(!credential.verify_password(mechanism, "pencil "));
            assert!(!credential.verify_password(mechanism, ""));
            credential.check(mechanism).unwrap();
            assert_eq!(credential.salt.len(), SALT_BYTES);
        }
    }

    #[test]
    fn a_salted_password_from_a_client_makes_the_same_credential() {
        let salted =
            SaltedPassword::derive(Mechanism::ScramSha512, "pencil", b"salt", 8192).unwrap();
        let from_client = ScramCredential::from_salted_password(
            Mechanism::ScramSha512,
            &salted.salted_password,
            &salted.salt,
            salted.iterations,
        )
        .unwrap();
        let direct = ScramCredential::derive(Mechanism::ScramSha512, "pencil", b"salt", 8192);
        assert_eq!(from_client, direct.unwrap());
    }

    #[test]
    fn iterations_outside_kafkas_bounds_are_refused() {
        for iterations in [0, 4095, 16385, u32::MAX] {
            let error =
                ScramCredential::derive(Mechanism::ScramSha256, "p", b"s", iterations).unwrap_err();
            assert!(matches!(error, SaslError::Iterations { .. }), "{error}");
        }
        for iterations in [ITERATIONS_MIN, ITERATIONS_MAX] {
            ScramCredential::derive(Mechanism::ScramSha256, "p", b"s", iterations).unwrap();
        }
    }

    #[test]
    fn a_salted_password_of_the_wrong_length_or_an_empty_salt_is_refused() {
        let short =
            ScramCredential::from_salted_password(Mechanism::ScramSha512, &[0; 32], b"s", 4096);
        assert!(matches!(
            short,
            Err(SaslError::KeyLength { expected: 64, .. })
        ));
        let no_salt =
            ScramCredential::from_salted_password(Mechanism::ScramSha256, &[0; 32], b"", 4096);
        assert!(no_salt.is_err());
        let plain = ScramCredential::generate(Mechanism::Plain, "p", 4096);
        assert_eq!(plain, Err(SaslError::NotScram(Mechanism::Plain)));
    }

    #[test]
    fn debug_output_shows_no_key_or_salt() {
        let credential =
            ScramCredential::derive(Mechanism::ScramSha256, "pencil", b"NaCl", 4096).unwrap();
        let shown = format!("{credential:?}");
        assert!(
            !shown.contains(&BASE64.encode(&credential.stored_key)),
            "{shown}"
        );
        assert!(!shown.contains("stored_key"), "{shown}");
        let salted =
            SaltedPassword::derive(Mechanism::ScramSha256, "pencil", b"NaCl", 4096).unwrap();
        assert!(!format!("{salted:?}").contains("salted_password"));
    }

    #[test]
    fn a_stand_in_is_stable_per_name_and_differs_between_names() {
        let a = ScramCredential::stand_in(Mechanism::ScramSha256, "ghost");
        assert_eq!(
            a,
            ScramCredential::stand_in(Mechanism::ScramSha256, "ghost")
        );
        assert_ne!(
            a.salt,
            ScramCredential::stand_in(Mechanism::ScramSha256, "ghost2").salt
        );
        a.check(Mechanism::ScramSha256).unwrap();
        ScramCredential::stand_in(Mechanism::ScramSha512, "ghost")
            .check(Mechanism::ScramSha512)
            .unwrap();
    }
}
