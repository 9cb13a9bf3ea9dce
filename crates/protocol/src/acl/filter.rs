//! Which ACLs a DescribeAcls lists or a DeleteAcls removes, with Kafka's
//! filter semantics:
//!
//! | field | matches |
//! |---|---|
//! | resource type ANY | every type |
//! | pattern type ANY | LITERAL and PREFIXED ACLs, the name compared exactly |
//! | pattern type MATCH | every ACL that covers the named resource: LITERAL of that name, LITERAL `*`, PREFIXED of a prefix of it |
//! | pattern type LITERAL, PREFIXED | ACLs of that pattern type, the name compared exactly |
//! | name, principal, host null | any |
//! | operation, permission ANY | any |

use super::binding::AclBinding;
use super::entry::{AccessControlEntry, Permission};
use super::operation::Operation;
use super::pattern::{PatternType, ResourcePattern};
use super::resource::{ResourceType, WILDCARD_RESOURCE};

/// The resource half of a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternFilter {
    pub resource_type: ResourceType,
    /// `None` matches every name.
    pub name: Option<String>,
    pub pattern_type: PatternType,
}

impl PatternFilter {
    pub fn matches(&self, pattern: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != pattern.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != pattern.pattern_type
        {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if matches!(self.pattern_type, PatternType::Any)
            || self.pattern_type == pattern.pattern_type
        {
            return *name == pattern.name;
        }
        // MATCH: the ACLs that would apply to the resource named.
        match pattern.pattern_type {
            PatternType::Literal => *name == pattern.name || pattern.name == WILDCARD_RESOURCE,
            PatternType::Prefixed => name.starts_with(pattern.name.as_str()),
            PatternType::Any | PatternType::Match => false,
        }
    }
}

/// The entry half of a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFilter {
    /// `Kind:name`, compared with the ACL's exactly (`User:*` matches only
    /// ACLs for `User:*`); `None` matches every principal.
    pub principal: Option<String>,
    /// `None` matches every host.
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl EntryFilter {
    pub fn matches(&self, entry: &AccessControlEntry) -> bool {
        let principal = self.principal.as_deref().is_none_or(|wanted| {
            wanted.split_once(':')
                == Some((entry.principal.kind.as_str(), entry.principal.name.as_str()))
        });
        principal
            && self.host.as_deref().is_none_or(|host| host == entry.host)
            && (self.operation == Operation::Any || self.operation == entry.operation)
            && (self.permission == Permission::Any || self.permission == entry.permission)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    pub pattern: PatternFilter,
    pub entry: EntryFilter,
}

impl AclBindingFilter {
    /// Matches every ACL.
    pub fn any() -> Self {
        Self {
            pattern: PatternFilter {
                resource_type: ResourceType::Any,
                name: None,
                pattern_type: PatternType::Any,
            },
            entry: EntryFilter {
                principal: None,
                host: None,
                operation: Operation::Any,
                permission: Permission::Any,
            },
        }
    }

    /// Matches exactly `binding`.
    pub fn exactly(binding: &AclBinding) -> Self {
        Self {
            pattern: PatternFilter {
                resource_type: binding.pattern.resource_type,
                name: Some(binding.pattern.name.clone()),
                pattern_type: binding.pattern.pattern_type,
            },
            entry: EntryFilter {
                principal: Some(binding.entry.principal.to_string()),
                host: Some(binding.entry.host.clone()),
                operation: binding.entry.operation,
                permission: binding.entry.permission,
            },
        }
    }

    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.pattern.matches(&binding.pattern) && self.entry.matches(&binding.entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::Principal;

    fn binding(name: &str, pattern_type: PatternType, principal: &str) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern::new(ResourceType::Topic, name, pattern_type),
            entry: AccessControlEntry {
                principal: Principal::parse(principal).unwrap(),
                host: "*".into(),
                operation: Operation::Read,
                permission: Permission::Allow,
            },
        }
    }

    fn by_pattern(name: Option<&str>, pattern_type: PatternType) -> AclBindingFilter {
        let mut filter = AclBindingFilter::any();
        filter.pattern.resource_type = ResourceType::Topic;
        filter.pattern.name = name.map(str::to_string);
        filter.pattern.pattern_type = pattern_type;
        filter
    }

    #[test]
    fn match_finds_every_acl_that_applies_to_the_named_resource() {
        let literal = binding("orders-eu", PatternType::Literal, "User:a");
        let wildcard = binding("*", PatternType::Literal, "User:a");
        let prefix = binding("orders-", PatternType::Prefixed, "User:a");
        let other = binding("payments", PatternType::Literal, "User:a");
        let filter = by_pattern(Some("orders-eu"), PatternType::Match);
        for applies in [&literal, &wildcard, &prefix] {
            assert!(filter.matches(applies), "{applies}");
        }
        assert!(!filter.matches(&other));
    }

    #[test]
    fn any_and_exact_pattern_types_compare_names_exactly() {
        let prefix = binding("orders-", PatternType::Prefixed, "User:a");
        let wildcard = binding("*", PatternType::Literal, "User:a");
        assert!(by_pattern(Some("orders-"), PatternType::Any).matches(&prefix));
        assert!(!by_pattern(Some("orders-eu"), PatternType::Any).matches(&prefix));
        assert!(!by_pattern(Some("orders-eu"), PatternType::Any).matches(&wildcard));
        assert!(by_pattern(Some("orders-"), PatternType::Prefixed).matches(&prefix));
        assert!(!by_pattern(Some("orders-"), PatternType::Literal).matches(&prefix));
        assert!(by_pattern(None, PatternType::Prefixed).matches(&prefix));
        assert!(!by_pattern(None, PatternType::Literal).matches(&prefix));
    }

    #[test]
    fn entry_filters_compare_principal_and_host_exactly_and_any_matches_all() {
        let alice = binding("t", PatternType::Literal, "User:alice");
        let everyone = binding("t", PatternType::Literal, "User:*");
        let mut filter = AclBindingFilter::any();
        assert!(filter.matches(&alice) && filter.matches(&everyone));
        filter.entry.principal = Some("User:alice".into());
        assert!(filter.matches(&alice));
        assert!(!filter.matches(&everyone));
        filter.entry.operation = Operation::Write;
        assert!(!filter.matches(&alice));
        filter.entry.operation = Operation::Read;
        filter.entry.permission = Permission::Deny;
        assert!(!filter.matches(&alice));
        filter.entry.permission = Permission::Allow;
        filter.entry.host = Some("10.0.0.1".into());
        assert!(!filter.matches(&alice));
        assert!(AclBindingFilter::exactly(&alice).matches(&alice));
        assert!(!AclBindingFilter::exactly(&alice).matches(&everyone));
    }
}
