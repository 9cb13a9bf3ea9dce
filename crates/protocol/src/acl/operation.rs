//! What a request does to a resource, as Kafka names it, and which
//! operations an ALLOW of another operation grants.

use std::fmt;

use super::resource::ResourceType;

/// Kafka's ACL operations, with their wire codes. ANY appears only in
/// filters; ALL in an ACL stands for every operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i8)]
pub enum Operation {
    Any = 1,
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
}

impl Operation {
    pub const ALL: [Self; 14] = [
        Self::Any,
        Self::All,
        Self::Read,
        Self::Write,
        Self::Create,
        Self::Delete,
        Self::Alter,
        Self::Describe,
        Self::ClusterAction,
        Self::DescribeConfigs,
        Self::AlterConfigs,
        Self::IdempotentWrite,
        Self::CreateTokens,
        Self::DescribeTokens,
    ];

    pub fn code(self) -> i8 {
        self as i8
    }

    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Any => "ANY",
            Self::All => "ALL",
            Self::Read => "READ",
            Self::Write => "WRITE",
            Self::Create => "CREATE",
            Self::Delete => "DELETE",
            Self::Alter => "ALTER",
            Self::Describe => "DESCRIBE",
            Self::ClusterAction => "CLUSTER_ACTION",
            Self::DescribeConfigs => "DESCRIBE_CONFIGS",
            Self::AlterConfigs => "ALTER_CONFIGS",
            Self::IdempotentWrite => "IDEMPOTENT_WRITE",
            Self::CreateTokens => "CREATE_TOKENS",
            Self::DescribeTokens => "DESCRIBE_TOKENS",
        }
    }

    /// Kafka's name in any case, with `-` or `_` or neither
    /// (`describe-configs`, `IdempotentWrite`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let wanted = super::normalized(text);
        Self::ALL
            .into_iter()
            .find(|o| super::normalized(o.name()) == wanted)
            .ok_or_else(|| {
                format!(
                    "unknown operation {text:?}: use read, write, create, delete, alter, \
                     describe, cluster-action, describe-configs, alter-configs, \
                     idempotent-write, create-tokens, describe-tokens or all"
                )
            })
    }

    /// Whether an ALLOW ACL of this operation grants `wanted`: itself, ALL
    /// grants everything, and (Kafka's implications) READ, WRITE, DELETE and
    /// ALTER grant DESCRIBE, ALTER_CONFIGS grants DESCRIBE_CONFIGS. A DENY
    /// implies nothing: it refuses its own operation (or, as ALL, every one).
    pub fn allows(self, wanted: Self) -> bool {
        self == Self::All
            || self == wanted
            || match wanted {
                Self::Describe => {
                    matches!(self, Self::Read | Self::Write | Self::Delete | Self::Alter)
                }
                Self::DescribeConfigs => self == Self::AlterConfigs,
                _ => false,
            }
    }

    /// The operations Kafka defines on a resource type: what an authorized
    /// operations field (DescribeGroups, Metadata, DescribeCluster) lists.
    pub fn supported_on(resource_type: ResourceType) -> &'static [Self] {
        use Operation::*;
        match resource_type {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Any => &[],
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_round_trip_their_codes_and_parse_as_the_command_line_writes_them() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_code(op.code()), Some(op));
            assert_eq!(Operation::parse(op.name()).unwrap(), op);
        }
        assert_eq!(Operation::from_code(0), None);
        assert_eq!(Operation::from_code(15), None);
        assert_eq!(
            Operation::parse("describe-configs").unwrap(),
            Operation::DescribeConfigs
        );
        assert_eq!(
            Operation::parse("IdempotentWrite").unwrap(),
            Operation::IdempotentWrite
        );
        assert!(Operation::parse("publish").is_err());
    }

    #[test]
    fn describe_is_implied_by_read_write_delete_and_alter_and_describe_configs_by_alter_configs() {
        for op in [
            Operation::Read,
            Operation::Write,
            Operation::Delete,
            Operation::Alter,
        ] {
            assert!(op.allows(Operation::Describe), "{op}");
        }
        assert!(!Operation::Create.allows(Operation::Describe));
        assert!(!Operation::Describe.allows(Operation::Read));
        assert!(Operation::AlterConfigs.allows(Operation::DescribeConfigs));
        assert!(!Operation::AlterConfigs.allows(Operation::Describe));
        assert!(!Operation::DescribeConfigs.allows(Operation::AlterConfigs));
        for op in Operation::ALL {
            assert!(Operation::All.allows(op), "{op}");
        }
    }
}
