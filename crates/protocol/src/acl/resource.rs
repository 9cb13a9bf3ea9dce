//! What an ACL protects: a type of resource and, for a request, the one
//! resource it acts on.

use std::fmt;

/// The one name a CLUSTER resource has, as Kafka names it.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// A LITERAL resource name matching every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";

/// Kafka's resource types, with their wire codes. ANY appears only in
/// filters; an ACL names a concrete type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i8)]
pub enum ResourceType {
    Any = 1,
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
    User = 7,
}

impl ResourceType {
    pub const ALL: [Self; 7] = [
        Self::Any,
        Self::Topic,
        Self::Group,
        Self::Cluster,
        Self::TransactionalId,
        Self::DelegationToken,
        Self::User,
    ];

    pub fn code(self) -> i8 {
        self as i8
    }

    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.code() == code)
    }

    /// Kafka's name (`TRANSACTIONAL_ID`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Any => "ANY",
            Self::Topic => "TOPIC",
            Self::Group => "GROUP",
            Self::Cluster => "CLUSTER",
            Self::TransactionalId => "TRANSACTIONAL_ID",
            Self::DelegationToken => "DELEGATION_TOKEN",
            Self::User => "USER",
        }
    }

    /// Kafka's name in any case, with `-` or `_` or neither
    /// (`transactional-id`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let wanted = super::normalized(text);
        Self::ALL
            .into_iter()
            .find(|t| super::normalized(t.name()) == wanted)
            .ok_or_else(|| {
                format!(
                    "unknown resource type {text:?}: use topic, group, cluster, \
                     transactional-id, delegation-token or user"
                )
            })
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The resource one request acts on: a concrete type and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource<'a> {
    pub resource_type: ResourceType,
    pub name: &'a str,
}

impl<'a> Resource<'a> {
    pub fn topic(name: &'a str) -> Self {
        Self {
            resource_type: ResourceType::Topic,
            name,
        }
    }

    pub fn group(name: &'a str) -> Self {
        Self {
            resource_type: ResourceType::Group,
            name,
        }
    }

    pub fn transactional_id(name: &'a str) -> Self {
        Self {
            resource_type: ResourceType::TransactionalId,
            name,
        }
    }

    /// The cluster, the resource of cluster-wide operations (creating
    /// topics, managing ACLs, idempotent writes).
    pub fn cluster() -> Self {
        Self {
            resource_type: ResourceType::Cluster,
            name: CLUSTER_NAME,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_types_round_trip_their_codes_and_parse_as_the_command_line_writes_them() {
        for t in ResourceType::ALL {
            assert_eq!(ResourceType::from_code(t.code()), Some(t));
            assert_eq!(ResourceType::parse(t.name()).unwrap(), t);
        }
        assert_eq!(ResourceType::from_code(0), None);
        assert_eq!(ResourceType::from_code(8), None);
        assert_eq!(
            ResourceType::parse("transactional-id").unwrap(),
            ResourceType::TransactionalId
        );
        assert_eq!(ResourceType::parse("Topic").unwrap(), ResourceType::Topic);
        let error = ResourceType::parse("queue").unwrap_err();
        assert!(error.contains("transactional-id"), "{error}");
    }
}
