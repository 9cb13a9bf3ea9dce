//! Principals in Kafka's notation (`User:alice`), and the caller of one
//! request: its principal, its host, and whether its listener
//! authenticates.

use std::fmt;

/// The kind of every principal strata authenticates, as Kafka's default
/// principal builder names it.
pub const USER: &str = "User";

/// The principal of a connection that did not authenticate (a PLAINTEXT
/// listener, or TLS without a client certificate), as Kafka names it.
pub const ANONYMOUS: &str = "ANONYMOUS";

/// An authenticated identity: a kind (always [`USER`] for strata's own
/// authentication) and a name, written `User:alice`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    pub kind: String,
    pub name: String,
}

impl Principal {
    /// `User:<name>`.
    pub fn user(name: impl Into<String>) -> Self {
        Self {
            kind: USER.to_string(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`: a connection that did not authenticate.
    pub fn anonymous() -> Self {
        Self::user(ANONYMOUS)
    }

    /// Parses `Kind:name` (the name may itself hold colons, as a
    /// certificate's distinguished name cannot but a SASL user name can).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(Self {
                kind: kind.to_string(),
                name: name.to_string(),
            }),
            _ => Err(format!(
                "principal {text:?} is not of the form Kind:name (e.g. User:alice)"
            )),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// Who sent one request: what the handlers check ACLs against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who the connection authenticated as ([`Principal::anonymous`] if
    /// its listener does not authenticate).
    pub principal: Principal,
    /// The peer's IP address, as ACLs and DescribeGroups show it (empty
    /// when unknown).
    pub host: String,
    /// The connection's listener authenticates its clients (SASL, or TLS
    /// requiring client certificates). On such a listener a request no ACL
    /// allows is denied; on one that does not, too, once any ACL exists
    /// (unless the broker trusts such listeners).
    pub secured: bool,
}

impl Caller {
    /// A caller on a listener that does not authenticate.
    pub fn anonymous(host: impl Into<String>) -> Self {
        Self {
            principal: Principal::anonymous(),
            host: host.into(),
            secured: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_print_and_parse_in_kafka_notation() {
        let alice = Principal::user("alice");
        assert_eq!(alice.to_string(), "User:alice");
        assert_eq!(Principal::parse("User:alice").unwrap(), alice);
        assert_eq!(
            Principal::parse("User:CN=app,O=example").unwrap().name,
            "CN=app,O=example"
        );
        assert_eq!(Principal::parse("User:a:b").unwrap().name, "a:b");
        for bad in ["alice", ":alice", "User:", ""] {
            assert!(Principal::parse(bad).is_err(), "{bad:?}");
        }
    }
}
