//! The four SCRAM messages, read and written (RFC 5802 §7).
//!
//! Readers check every attribute they use and the shape of those they
//! skip (`key=value` extensions), borrow from the message where they can,
//! and fail with [`SaslError::Malformed`] naming the message, never quoting
//! it: a client-final carries a proof.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::sasl::{SaslError, USER_BYTES_MAX};

/// Longest `e=` text from a server quoted in an error.
const SERVER_ERROR_CHARS_MAX: usize = 128;

/// `gs2-header client-first-bare`: `n,,n=<user>,r=<nonce>[,ext=value…]`.
#[derive(Debug)]
pub(super) struct ClientFirst<'a> {
    /// `n,,`, `y,,` or `n,a=<authzid>,`: what client-final's `c=` echoes.
    pub gs2_header: &'a str,
    pub authzid: Option<String>,
    pub user: String,
    pub nonce: &'a str,
    /// The message after the gs2 header: the first part of AuthMessage.
    pub bare: &'a str,
    /// Kafka's `tokenauth=true` extension: the password is a delegation
    /// token's HMAC.
    pub token_auth: bool,
}

impl<'a> ClientFirst<'a> {
    pub fn parse(text: &'a str) -> Result<Self, SaslError> {
        let malformed = || SaslError::Malformed {
            what: "SCRAM client-first message",
        };
        let mut parts = text.splitn(3, ',');
        let (Some(flag), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed());
        };
        match flag {
            // "y": the client could bind but believes the server cannot,
            // which is true.
            "n" | "y" => {}
            _ if flag.starts_with("p=") => return Err(SaslError::ChannelBinding),
            _ => return Err(malformed()),
        }
        let gs2_header = &text[..text.len() - bare.len()];
        let authzid = match authzid {
            "" => None,
            _ => Some(unescape_name(
                authzid.strip_prefix("a=").ok_or_else(malformed)?,
            )?),
        };
        let mut fields = bare.split(',');
        let first = fields.next().ok_or_else(malformed)?;
        if first.starts_with("m=") {
            return Err(SaslError::MandatoryExtension);
        }
        let user = unescape_name(first.strip_prefix("n=").ok_or_else(malformed)?)?;
        let nonce = fields
            .next()
            .and_then(|field| field.strip_prefix("r="))
            .filter(|nonce| is_nonce(nonce))
            .ok_or_else(malformed)?;
        let mut token_auth = false;
        for field in fields {
            let (key, value) = extension(field).ok_or_else(malformed)?;
            if key == "tokenauth" && value.eq_ignore_ascii_case("true") {
                token_auth = true;
            }
        }
        Ok(Self {
            gs2_header,
            authzid,
            user,
            nonce,
            bare,
            token_auth,
        })
    }

    /// The bare part a client sends after `n,,`.
    pub fn write_bare(user: &str, nonce: &str) -> String {
        format!("n={},r={nonce}", escape_name(user))
    }
}

/// `r=<nonce>,s=<salt>,i=<iterations>[,ext=value…]`.
#[derive(Debug)]
pub(super) struct ServerFirst<'a> {
    pub nonce: &'a str,
    pub salt: Vec<u8>,
    /// As sent; the client checks the bounds.
    pub iterations: i64,
}

impl<'a> ServerFirst<'a> {
    pub fn parse(text: &'a str) -> Result<Self, SaslError> {
        let malformed = || SaslError::Malformed {
            what: "SCRAM server-first message",
        };
        if let Some(error) = text.strip_prefix("e=") {
            return Err(server_error(error));
        }
        if text.starts_with("m=") {
            return Err(SaslError::MandatoryExtension);
        }
        let mut fields = text.split(',');
        let nonce = fields
            .next()
            .and_then(|field| field.strip_prefix("r="))
            .filter(|nonce| is_nonce(nonce))
            .ok_or_else(malformed)?;
        let salt = fields
            .next()
            .and_then(|field| field.strip_prefix("s="))
            .and_then(decode_base64)
            .filter(|salt| !salt.is_empty())
            .ok_or_else(malformed)?;
        let iterations = fields
            .next()
            .and_then(|field| field.strip_prefix("i="))
            .filter(|digits| {
                (1..=10).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
            })
            .and_then(|digits| digits.parse::<i64>().ok())
            .ok_or_else(malformed)?;
        if fields.any(|field| extension(field).is_none()) {
            return Err(malformed());
        }
        Ok(Self {
            nonce,
            salt,
            iterations,
        })
    }

    pub fn write(nonce: &str, salt: &[u8], iterations: u32) -> String {
        format!("r={nonce},s={},i={iterations}", BASE64.encode(salt))
    }
}

/// `c=<gs2 header, base64>,r=<nonce>[,ext=value…],p=<proof>`.
#[derive(Debug)]
pub(super) struct ClientFinal<'a> {
    pub channel_binding: Vec<u8>,
    pub nonce: &'a str,
    pub proof: Vec<u8>,
    /// The message up to `,p=`: the last part of AuthMessage.
    pub without_proof: &'a str,
}

impl<'a> ClientFinal<'a> {
    pub fn parse(text: &'a str) -> Result<Self, SaslError> {
        let malformed = || SaslError::Malformed {
            what: "SCRAM client-final message",
        };
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(malformed)?;
        let proof = decode_base64(proof).ok_or_else(malformed)?;
        let mut fields = without_proof.split(',');
        let channel_binding = fields
            .next()
            .and_then(|field| field.strip_prefix("c="))
            .and_then(decode_base64)
            .ok_or_else(malformed)?;
        let nonce = fields
            .next()
            .and_then(|field| field.strip_prefix("r="))
            .filter(|nonce| is_nonce(nonce))
            .ok_or_else(malformed)?;
        if fields.any(|field| extension(field).is_none()) {
            return Err(malformed());
        }
        Ok(Self {
            channel_binding,
            nonce,
            proof,
            without_proof,
        })
    }

    pub fn write_without_proof(gs2_header: &str, nonce: &str) -> String {
        format!("c={},r={nonce}", BASE64.encode(gs2_header))
    }

    pub fn write(without_proof: &str, proof: &[u8]) -> String {
        format!("{without_proof},p={}", BASE64.encode(proof))
    }
}

/// `v=<server signature>` or `e=<error>`, extensions after either.
#[derive(Debug)]
pub(super) struct ServerFinal {
    pub signature: Vec<u8>,
}

impl ServerFinal {
    /// The signature, or the server's `e=` error as [`SaslError::ServerError`].
    pub fn parse(text: &str) -> Result<Self, SaslError> {
        let malformed = || SaslError::Malformed {
            what: "SCRAM server-final message",
        };
        let first = fields_first(text);
        if let Some(error) = first.strip_prefix("e=") {
            return Err(server_error(error));
        }
        let signature = first
            .strip_prefix("v=")
            .and_then(decode_base64)
            .ok_or_else(malformed)?;
        if text
            .split(',')
            .skip(1)
            .any(|field| extension(field).is_none())
        {
            return Err(malformed());
        }
        Ok(Self { signature })
    }

    pub fn write(signature: &[u8]) -> String {
        format!("v={}", BASE64.encode(signature))
    }
}

fn fields_first(text: &str) -> &str {
    text.split(',').next().unwrap_or(text)
}

/// An extension `key=value`: a key of letters, a value of at least one
/// character.
fn extension(field: &str) -> Option<(&str, &str)> {
    field.split_once('=').filter(|(key, value)| {
        !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic()) && !value.is_empty()
    })
}

/// A nonce: printable ASCII but `,`, at least one character.
fn is_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    BASE64.decode(text).ok()
}

/// The server's `e=` text, cut short and stripped to printable ASCII: it is
/// shown to users and logged.
fn server_error(text: &str) -> SaslError {
    let shown: String = text
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(SERVER_ERROR_CHARS_MAX)
        .collect();
    SaslError::ServerError(shown)
}

/// A user name as SCRAM writes it: `,` as `=2C`, `=` as `=3D`.
pub(super) fn escape_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            ',' => out.push_str("=2C"),
            '=' => out.push_str("=3D"),
            _ => out.push(c),
        }
    }
    out
}

/// The user name an escaped `saslname` stands for: not empty, no NUL, no
/// `=` but in `=2C` and `=3D`, at most [`USER_BYTES_MAX`] bytes.
fn unescape_name(escaped: &str) -> Result<String, SaslError> {
    let malformed = || SaslError::Malformed {
        what: "SCRAM user name",
    };
    let mut name = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find('=') {
        name.push_str(&rest[..at]);
        let escape = &rest[at..];
        if escape.starts_with("=2C") {
            name.push(',');
        } else if escape.starts_with("=3D") {
            name.push('=');
        } else {
            return Err(malformed());
        }
        rest = &escape[3..];
    }
    name.push_str(rest);
    if name.is_empty() {
        return Err(SaslError::EmptyUser);
    }
    if name.contains('\0') {
        return Err(malformed());
    }
    if name.len() > USER_BYTES_MAX {
        return Err(SaslError::TooLarge {
            what: "a user name",
            bytes: name.len(),
            limit: USER_BYTES_MAX,
        });
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_with_commas_and_equals_signs_survive_escaping() {
        for name in ["alice", "a,b", "a=b", "=2C", ",,==", "ünï"] {
            assert_eq!(unescape_name(&escape_name(name)).unwrap(), name);
        }
        assert_eq!(escape_name("a,b=c"), "a=2Cb=3Dc");
        for bad in ["a=b", "a=2c", "a=", "=", ""] {
            assert!(unescape_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_client_first_message_yields_its_parts() {
        let first = ClientFirst::parse("n,,n=us=2Cer,r=abc").unwrap();
        assert_eq!(first.gs2_header, "n,,");
        assert_eq!(first.user, "us,er");
        assert_eq!(first.nonce, "abc");
        assert_eq!(first.bare, "n=us=2Cer,r=abc");
        assert_eq!(first.authzid, None);
        assert!(!first.token_auth);

        let first = ClientFirst::parse("n,a=bob,n=bob,r=abc,tokenauth=true").unwrap();
        assert_eq!(first.gs2_header, "n,a=bob,");
        assert_eq!(first.authzid.as_deref(), Some("bob"));
        assert!(first.token_auth);
    }

    #[test]
    fn client_first_messages_asking_for_what_is_not_served_say_so() {
        assert_eq!(
            ClientFirst::parse("p=tls-unique,,n=u,r=abc").unwrap_err(),
            SaslError::ChannelBinding
        );
        assert_eq!(
            ClientFirst::parse("n,,m=ext,n=u,r=abc").unwrap_err(),
            SaslError::MandatoryExtension
        );
        for bad in [
            "",
            "n",
            "n,,",
            "n,,n=u",
            "n,,r=abc,n=u",
            "x,,n=u,r=abc",
            "n,,n=u,r=a,b",
        ] {
            assert!(ClientFirst::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_server_error_is_surfaced_printable_and_short() {
        let long = format!("e=other-error\u{7}{}", "x".repeat(500));
        let Err(SaslError::ServerError(text)) = ServerFinal::parse(&long) else {
            panic!("expected the server's error");
        };
        assert!(text.starts_with("other-error"), "{text}");
        assert_eq!(text.len(), SERVER_ERROR_CHARS_MAX);
    }

    #[test]
    fn server_first_messages_need_nonce_salt_and_iterations_in_order() {
        let first = ServerFirst::parse("r=abc,s=QSXCR+Q6sek8bf92,i=4096,x=y").unwrap();
        assert_eq!((first.nonce, first.iterations), ("abc", 4096));
        for bad in [
            "r=abc,s=QSXCR+Q6sek8bf92",
            "s=QSXCR+Q6sek8bf92,r=abc,i=4096",
            "r=abc,s=!!,i=4096",
            "r=abc,s=,i=4096",
            "r=abc,s=QSXCR+Q6sek8bf92,i=-1",
            "r=abc,s=QSXCR+Q6sek8bf92,i=99999999999",
        ] {
            assert!(ServerFirst::parse(bad).is_err(), "{bad:?}");
        }
    }
}
