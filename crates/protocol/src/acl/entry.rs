//! Who an ACL is about and what it says: a principal, a host, an operation,
//! and ALLOW or DENY.

use std::fmt;

use super::operation::Operation;
use crate::principal::{Caller, Principal};

/// An ACL host matching every host.
pub const WILDCARD_HOST: &str = "*";

/// The kind and name of `User:*`, the ACL principal matching every
/// principal (of any kind), as Kafka's.
const WILDCARD_PRINCIPAL: (&str, &str) = ("User", "*");

/// Kafka's permission types, with their wire codes. ANY appears only in
/// filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i8)]
pub enum Permission {
    Any = 1,
    Deny = 2,
    Allow = 3,
}

impl Permission {
    pub const ALL: [Self; 3] = [Self::Any, Self::Deny, Self::Allow];

    pub fn code(self) -> i8 {
        self as i8
    }

    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Any => "ANY",
            Self::Deny => "DENY",
            Self::Allow => "ALLOW",
        }
    }

    /// Kafka's name in any case (`allow`, `DENY`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let wanted = super::normalized(text);
        Self::ALL
            .into_iter()
            .find(|p| super::normalized(p.name()) == wanted)
            .ok_or_else(|| format!("unknown permission {text:?}: use allow, deny or any"))
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The principal, host, operation and permission of one ACL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessControlEntry {
    /// Exactly this principal, or every one as `User:*`.
    pub principal: Principal,
    /// Exactly this peer IP address, as the connection sees it, or every
    /// host as `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl AccessControlEntry {
    /// Whether this entry is about `caller`: its principal (or `User:*`) and
    /// its host (or `*`). The operation is the authorizer's to weigh.
    pub fn concerns(&self, caller: &Caller) -> bool {
        let principal = self.principal == caller.principal
            || (self.principal.kind.as_str(), self.principal.name.as_str()) == WILDCARD_PRINCIPAL;
        principal && (self.host == WILDCARD_HOST || self.host == caller.host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(principal: &str, host: &str) -> AccessControlEntry {
        AccessControlEntry {
            principal: Principal::parse(principal).unwrap(),
            host: host.to_string(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    fn caller(principal: &str, host: &str) -> Caller {
        Caller {
            principal: Principal::parse(principal).unwrap(),
            host: host.to_string(),
            secured: true,
        }
    }

    #[test]
    fn an_entry_concerns_its_principal_or_everyone_from_its_host_or_anywhere() {
        let alice = caller("User:alice", "10.0.0.1");
        assert!(entry("User:alice", "10.0.0.1").concerns(&alice));
        assert!(entry("User:alice", "*").concerns(&alice));
        assert!(entry("User:*", "*").concerns(&alice));
        assert!(!entry("User:bob", "*").concerns(&alice));
        assert!(!entry("User:alice", "10.0.0.2").concerns(&alice));
        // The wildcard is `User:*`; another kind's `*` is just a name.
        assert!(!entry("Group:*", "*").concerns(&alice));
    }

    #[test]
    fn permissions_round_trip_their_codes_and_names() {
        for p in Permission::ALL {
            assert_eq!(Permission::from_code(p.code()), Some(p));
            assert_eq!(Permission::parse(&p.name().to_lowercase()).unwrap(), p);
        }
        assert_eq!(Permission::from_code(0), None);
        assert!(Permission::parse("maybe").is_err());
    }
}
