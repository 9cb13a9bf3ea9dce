//! SASL mechanisms as Kafka speaks them: PLAIN (RFC 4616) and
//! SCRAM-SHA-256/512 (RFC 5802, RFC 7677), both sides of each exchange.
//!
//! Pure: no I/O and no knowledge of the broker or the client. The broker
//! feeds the tokens of SaslAuthenticate through a [`ScramServer`] (or
//! [`PlainToken`]) with a lookup into its credential store; the client
//! drives a [`ScramClient`] (or [`PlainToken::encode`]).
//!
//! Secrets never leave this module in a readable form: no error message and
//! no `Debug` output holds a password, a salted password, a proof or a key.
//! Errors quote only the mechanism, counts and limits, never bytes a client
//! sent (they could be a password typed in the wrong field).
//!
//! Passwords are used as their UTF-8 bytes, without SASLprep, as Kafka does:
//! a credential made by Kafka's tools verifies here and the other way round.

mod plain;
mod scram;

use std::fmt;
use std::str::FromStr;

pub use plain::PlainToken;
pub use scram::{
    Authenticated, CLIENT_ITERATIONS_MAX, ITERATIONS_DEFAULT, ITERATIONS_MAX, ITERATIONS_MIN,
    SALT_BYTES, SALT_BYTES_MAX, SaltedPassword, ScramClient, ScramCredential, ScramServer,
};

/// Longest token or SCRAM message accepted, in either direction, checked
/// before anything is parsed: real ones are a few hundred bytes.
pub const MESSAGE_BYTES_MAX: usize = 8 << 10;
/// Longest user name accepted, in bytes (UTF-8).
pub const USER_BYTES_MAX: usize = 1024;
/// Longest password accepted, in bytes (UTF-8).
pub const PASSWORD_BYTES_MAX: usize = 1024;

/// A SASL mechanism strata serves and speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    /// Every mechanism, in the order they are advertised.
    pub const ALL: [Mechanism; 3] = [Self::Plain, Self::ScramSha256, Self::ScramSha512];

    /// The SCRAM mechanisms, strongest first (what PLAIN checks a password
    /// against, in that order).
    pub const SCRAM: [Mechanism; 2] = [Self::ScramSha512, Self::ScramSha256];

    /// The name clients configure (`sasl.mechanism`) and SaslHandshake
    /// carries.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    pub fn is_scram(self) -> bool {
        matches!(self, Self::ScramSha256 | Self::ScramSha512)
    }

    /// The mechanism's number in DescribeUserScramCredentials and
    /// AlterUserScramCredentials (Kafka's `ScramMechanism` type: 1 and 2;
    /// 0 is UNKNOWN). `None` for PLAIN, which has no credentials of its own.
    pub fn scram_type(self) -> Option<i8> {
        match self {
            Self::Plain => None,
            Self::ScramSha256 => Some(1),
            Self::ScramSha512 => Some(2),
        }
    }

    /// The SCRAM mechanism numbered `scram_type` on the wire.
    pub fn from_scram_type(scram_type: i8) -> Option<Self> {
        match scram_type {
            1 => Some(Self::ScramSha256),
            2 => Some(Self::ScramSha512),
            _ => None,
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mechanism {
    type Err = SaslError;

    /// Case-sensitive, as Kafka matches `sasl.enabled.mechanisms`.
    fn from_str(name: &str) -> Result<Self, SaslError> {
        Self::ALL
            .into_iter()
            .find(|mechanism| mechanism.name() == name)
            .ok_or_else(|| SaslError::UnsupportedMechanism {
                name: name.chars().take(MECHANISM_NAME_CHARS_MAX).collect(),
            })
    }
}

/// Longest mechanism name quoted back in an error.
const MECHANISM_NAME_CHARS_MAX: usize = 32;

/// Why an exchange or a credential failed. Messages are short, say what to
/// do where there is something to do, and never quote a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    #[error("unsupported SASL mechanism {name:?}; supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")]
    UnsupportedMechanism { name: String },
    #[error("{0} is not a SCRAM mechanism")]
    NotScram(Mechanism),
    /// Every failed proof or password, whether or not the user exists.
    #[error("authentication failed: invalid user name or password")]
    AuthenticationFailed,
    #[error("malformed {what}")]
    Malformed { what: &'static str },
    #[error("{what} of {bytes} bytes exceeds the limit of {limit}")]
    TooLarge {
        what: &'static str,
        bytes: usize,
        limit: usize,
    },
    #[error("the user name is empty")]
    EmptyUser,
    #[error("the password is empty")]
    EmptyPassword,
    #[error("the authorization id must be empty or equal to the user name")]
    AuthorizationId,
    #[error("channel binding is not supported: configure the client without it")]
    ChannelBinding,
    #[error("SCRAM mandatory extensions (m=) are not supported")]
    MandatoryExtension,
    #[error("delegation tokens (the SCRAM tokenauth extension) are not supported")]
    DelegationToken,
    #[error("the SCRAM nonce does not match this exchange")]
    NonceMismatch,
    #[error("{iterations} iterations is outside {min}..={max}")]
    Iterations { iterations: i64, min: u32, max: u32 },
    #[error("{what} must be {expected} bytes for {mechanism}, not {bytes}")]
    KeyLength {
        what: &'static str,
        mechanism: Mechanism,
        expected: usize,
        bytes: usize,
    },
    #[error("the server's signature does not verify: it does not hold this user's credential")]
    ServerSignature,
    #[error("the server refused authentication: {0}")]
    ServerError(String),
    #[error("a SASL message arrived after the exchange ended or out of order")]
    OutOfOrder,
    #[error("no secure random numbers: {0}")]
    Random(String),
}

/// Fills `bytes` from the operating system's secure random source.
fn random_bytes(bytes: &mut [u8]) -> Result<(), SaslError> {
    getrandom::fill(bytes).map_err(|e| SaslError::Random(e.to_string()))
}

/// Refuses a token larger than [`MESSAGE_BYTES_MAX`] before it is parsed.
fn check_size(what: &'static str, bytes: &[u8]) -> Result<(), SaslError> {
    if bytes.len() > MESSAGE_BYTES_MAX {
        return Err(SaslError::TooLarge {
            what,
            bytes: bytes.len(),
            limit: MESSAGE_BYTES_MAX,
        });
    }
    Ok(())
}

/// Checks a user name's and a password's sizes (the user also not empty).
fn check_user_and_password(user: &str, password: &str) -> Result<(), SaslError> {
    if user.is_empty() {
        return Err(SaslError::EmptyUser);
    }
    if password.is_empty() {
        return Err(SaslError::EmptyPassword);
    }
    let limit = |what, bytes: usize, limit| {
        if bytes > limit {
            Err(SaslError::TooLarge { what, bytes, limit })
        } else {
            Ok(())
        }
    };
    limit("a user name", user.len(), USER_BYTES_MAX)?;
    limit("a password", password.len(), PASSWORD_BYTES_MAX)
}

/// Whether `a` and `b` are equal, in a time that depends only on their
/// lengths (which are public: every key of a mechanism has the same).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanisms_parse_by_their_exact_names_only() {
        for mechanism in Mechanism::ALL {
            assert_eq!(mechanism.name().parse::<Mechanism>(), Ok(mechanism));
            assert_eq!(mechanism.to_string(), mechanism.name());
        }
        let error = "scram-sha-256".parse::<Mechanism>().unwrap_err();
        let message = error.to_string();
        for part in [
            "\"scram-sha-256\"",
            "PLAIN",
            "SCRAM-SHA-256",
            "SCRAM-SHA-512",
        ] {
            assert!(message.contains(part), "{message}");
        }
        assert!("GSSAPI".parse::<Mechanism>().is_err());
        assert!("".parse::<Mechanism>().is_err());
    }

    #[test]
    fn only_scram_mechanisms_have_a_wire_type() {
        assert!(!Mechanism::Plain.is_scram());
        assert_eq!(Mechanism::Plain.scram_type(), None);
        for mechanism in Mechanism::SCRAM {
            assert!(mechanism.is_scram());
            let number = mechanism.scram_type().unwrap();
            assert_eq!(Mechanism::from_scram_type(number), Some(mechanism));
        }
        assert_eq!(Mechanism::from_scram_type(0), None);
        assert_eq!(Mechanism::from_scram_type(3), None);
    }

    #[test]
    fn a_long_unknown_mechanism_is_quoted_cut_short() {
        let name = "X".repeat(10_000);
        let message = name.parse::<Mechanism>().unwrap_err().to_string();
        assert!(message.len() < 200, "{message}");
    }

    #[test]
    fn constant_time_eq_compares_whole_slices() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
