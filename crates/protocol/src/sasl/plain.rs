//! PLAIN (RFC 4616): the client's single token, both read and written.
//!
//! ```text
//! [authzid] NUL authcid NUL passwd        UTF-8, no NUL inside a field
//! ```
//!
//! The authorization id must be empty or the user name itself, as Kafka
//! requires: acting as someone else is not a thing strata offers. PLAIN
//! carries the password itself, so it belongs only on TLS listeners; the
//! broker checks it against the user's SCRAM credential (PLAIN has no
//! credentials of its own).

use std::fmt;

use super::{PASSWORD_BYTES_MAX, SaslError, USER_BYTES_MAX, check_size, check_user_and_password};

/// A PLAIN token: who, and the password they offer.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainToken {
    pub user: String,
    pub password: String,
}

impl PlainToken {
    /// Reads a client's token.
    pub fn parse(token: &[u8]) -> Result<Self, SaslError> {
        check_size("a PLAIN token", token)?;
        let malformed = || SaslError::Malformed {
            what: "PLAIN token (expected authzid NUL user NUL password)",
        };
        let mut fields = token.split(|b| *b == 0);
        let (Some(authzid), Some(user), Some(password), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(malformed());
        };
        let text = |bytes: &[u8], limit: usize, what: &'static str| {
            if bytes.len() > limit {
                return Err(SaslError::TooLarge {
                    what,
                    bytes: bytes.len(),
                    limit,
                });
            }
            String::from_utf8(bytes.to_vec()).map_err(|_| SaslError::Malformed {
                what: "PLAIN token (not UTF-8)",
            })
        };
        let authzid = text(authzid, USER_BYTES_MAX, "an authorization id")?;
        let user = text(user, USER_BYTES_MAX, "a user name")?;
        let password = text(password, PASSWORD_BYTES_MAX, "a password")?;
        check_user_and_password(&user, &password)?;
        if !authzid.is_empty() && authzid != user {
            return Err(SaslError::AuthorizationId);
        }
        Ok(Self { user, password })
    }

    /// The token a client sends for `user` and `password` (no
    /// authorization id).
    pub fn encode(user: &str, password: &str) -> Result<Vec<u8>, SaslError> {
        check_user_and_password(user, password)?;
        if user.contains('\0') || password.contains('\0') {
            return Err(SaslError::Malformed {
                what: "PLAIN user name or password (holds a NUL)",
            });
        }
        let mut token = Vec::with_capacity(2 + user.len() + password.len());
        token.push(0);
        token.extend_from_slice(user.as_bytes());
        token.push(0);
        token.extend_from_slice(password.as_bytes());
        Ok(token)
    }
}

/// Shows the user only.
impl fmt::Debug for PlainToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainToken")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed, TestRunner};

    use super::*;

    #[test]
    fn a_token_round_trips_and_an_authzid_equal_to_the_user_is_accepted() {
        let token = PlainToken::encode("alice", "secret").unwrap();
        assert_eq!(token, b"\0alice\0secret");
        let parsed = PlainToken::parse(&token).unwrap();
        assert_eq!(
            (parsed.user.as_str(), parsed.password.as_str()),
            ("alice", "secret")
        );
        assert_eq!(PlainToken::parse(b"alice\0alice\0secret").unwrap(), parsed);
    }

    #[test]
    fn malformed_tokens_are_refused_with_their_reason() {
        assert_eq!(
            PlainToken::parse(b"bob\0alice\0secret").unwrap_err(),
            SaslError::AuthorizationId
        );
        assert_eq!(
            PlainToken::parse(b"\0\0secret").unwrap_err(),
            SaslError::EmptyUser
        );
        assert_eq!(
            PlainToken::parse(b"\0alice\0").unwrap_err(),
            SaslError::EmptyPassword
        );
        for bad in [&b""[..], b"alice", b"\0alice", b"\0a\0b\0c", b"\0a\xff\0b"] {
            assert!(PlainToken::parse(bad).is_err(), "{bad:?}");
        }
        let long = [b"\0".as_slice(), &[b'a'; USER_BYTES_MAX + 1], b"\0pw"].concat();
        assert!(matches!(
            PlainToken::parse(&long),
            Err(SaslError::TooLarge { .. })
        ));
        assert!(PlainToken::encode("a\0b", "pw").is_err());
    }

    #[test]
    fn errors_and_debug_output_never_show_the_password() {
        let password = "hunter2-very-secret";
        let token = PlainToken::parse(format!("\0alice\0{password}").as_bytes()).unwrap();
        assert!(!format!("{token:?}").contains(password));
        for bad in [
            format!("bob\0alice\0{password}"),
            format!("\0alice\0{password}\0x"),
            format!("\0\0{password}"),
        ] {
            let error = PlainToken::parse(bad.as_bytes()).unwrap_err();
            assert!(!error.to_string().contains(password), "{error}");
            assert!(!format!("{error:?}").contains(password), "{error:?}");
        }
    }

    #[test]
    fn arbitrary_bytes_are_parsed_or_refused_without_panicking() {
        let mut runner = TestRunner::new(Config {
            cases: 2_000,
            rng_seed: RngSeed::Fixed(0x91a1_7e0c),
            failure_persistence: None,
            ..Config::default()
        });
        let bytes = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64),
            proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), any::<u8>()], 0..64),
        ];
        runner
            .run(&bytes, |token| {
                if let Ok(parsed) = PlainToken::parse(&token) {
                    prop_assert!(!parsed.user.is_empty() && !parsed.password.is_empty());
                    let again = PlainToken::encode(&parsed.user, &parsed.password).unwrap();
                    prop_assert_eq!(PlainToken::parse(&again).unwrap(), parsed);
                }
                Ok(())
            })
            .unwrap();
    }
}
