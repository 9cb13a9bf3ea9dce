//! One ACL: a resource pattern and an entry. What CreateAcls adds, the
//! store keeps and DescribeAcls lists.

use std::fmt;

use super::InvalidAcl;
use super::entry::{AccessControlEntry, Permission};
use super::operation::Operation;
use super::pattern::{PatternType, ResourcePattern};
use super::resource::{CLUSTER_NAME, ResourceType};

/// Longest resource name, principal or host an ACL may hold, in bytes:
/// far past any topic (249), group or principal name in use, and a bound
/// on what one CreateAcls can make the broker keep.
pub const ACL_TEXT_BYTES_MAX: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AccessControlEntry,
}

impl AclBinding {
    /// Whether this binding can be stored, with Kafka's rules: a concrete
    /// resource type; LITERAL or PREFIXED (not ANY or MATCH, which only
    /// filters use); a concrete operation and permission; a non-empty name,
    /// and `kafka-cluster` for the cluster. strata also refuses an empty
    /// host (it would match no connection) and texts past
    /// [`ACL_TEXT_BYTES_MAX`].
    pub fn check(&self) -> Result<(), InvalidAcl> {
        let invalid = |reason: String| Err(InvalidAcl(reason));
        let pattern = &self.pattern;
        if pattern.resource_type == ResourceType::Any {
            return invalid("an ACL names a resource type, not ANY".into());
        }
        if !matches!(
            pattern.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return invalid(format!(
                "an ACL's pattern type is LITERAL or PREFIXED, not {} (only filters use it)",
                pattern.pattern_type
            ));
        }
        if self.entry.operation == Operation::Any {
            return invalid("an ACL names an operation (or ALL), not ANY".into());
        }
        if self.entry.permission == Permission::Any {
            return invalid("an ACL is ALLOW or DENY, not ANY".into());
        }
        if pattern.name.is_empty() {
            return invalid("the resource name is empty".into());
        }
        if pattern.resource_type == ResourceType::Cluster && pattern.name != CLUSTER_NAME {
            return invalid(format!(
                "the only valid name for the CLUSTER resource is {CLUSTER_NAME}, not {:?}",
                pattern.name
            ));
        }
        if self.entry.host.is_empty() {
            return invalid("the host is empty: give an IP address, or * for every host".into());
        }
        let principal = &self.entry.principal;
        if principal.kind.is_empty() || principal.name.is_empty() {
            return invalid(format!(
                "principal {principal} is not of the form Kind:name (e.g. User:alice)"
            ));
        }
        for (what, len) in [
            ("resource name", pattern.name.len()),
            ("principal", principal.kind.len() + 1 + principal.name.len()),
            ("host", self.entry.host.len()),
        ] {
            if len > ACL_TEXT_BYTES_MAX {
                return invalid(format!(
                    "the {what} is {len} bytes, more than {ACL_TEXT_BYTES_MAX}"
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entry = &self.entry;
        write!(
            f,
            "{} {} {} from host {} on {}",
            entry.principal, entry.permission, entry.operation, entry.host, self.pattern
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::Principal;

    fn binding(
        resource_type: ResourceType,
        name: &str,
        pattern_type: PatternType,
        operation: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern::new(resource_type, name, pattern_type),
            entry: AccessControlEntry {
                principal: Principal::user("alice"),
                host: "*".into(),
                operation,
                permission,
            },
        }
    }

    #[test]
    fn concrete_bindings_pass_and_filter_only_values_are_refused() {
        use Operation::{Any as AnyOp, Read};
        use PatternType::{Any, Literal, Match, Prefixed};
        use Permission::{Allow, Any as AnyPermission, Deny};
        let topic = ResourceType::Topic;
        assert!(
            binding(topic, "orders", Literal, Read, Allow)
                .check()
                .is_ok()
        );
        assert!(binding(topic, "ord", Prefixed, Read, Deny).check().is_ok());
        assert!(
            binding(topic, "*", Literal, Operation::All, Allow)
                .check()
                .is_ok()
        );
        for bad in [
            binding(ResourceType::Any, "orders", Literal, Read, Allow),
            binding(topic, "orders", Match, Read, Allow),
            binding(topic, "orders", Any, Read, Allow),
            binding(topic, "orders", Literal, AnyOp, Allow),
            binding(topic, "orders", Literal, Read, AnyPermission),
            binding(topic, "", Literal, Read, Allow),
            binding(ResourceType::Cluster, "my-cluster", Literal, Read, Allow),
            binding(
                topic,
                &"x".repeat(ACL_TEXT_BYTES_MAX + 1),
                Literal,
                Read,
                Allow,
            ),
        ] {
            assert!(
                matches!(bad.check(), Err(InvalidAcl(_))),
                "{bad} was accepted"
            );
        }
        let cluster = binding(ResourceType::Cluster, CLUSTER_NAME, Literal, Read, Allow);
        assert!(cluster.check().is_ok());
        let mut no_host = binding(topic, "orders", Literal, Read, Allow);
        no_host.entry.host.clear();
        assert!(no_host.check().is_err());
    }
}
