//! One immutable version of the broker's ACLs, indexed for authorization:
//! the entries covering a resource are found with a hash lookup per
//! candidate pattern (its literal name, the wildcard, and each prefix of
//! the name when the type has PREFIXED ACLs), not a scan of every ACL.
//!
//! Changes make a new set ([`AclSet::with`], [`AclSet::without`]); the store
//! swaps it in whole, so a reader always sees one consistent version.

use std::collections::{BTreeSet, HashMap};

use strata_protocol::acl::AccessControlEntry;
use strata_protocol::acl::AclBinding;
use strata_protocol::acl::AclBindingFilter;
use strata_protocol::acl::PatternType;
use strata_protocol::acl::{Resource, ResourceType, WILDCARD_RESOURCE};

#[derive(Debug, Default, Clone)]
pub struct AclSet {
    /// Every ACL once, in a stable order (what DescribeAcls lists and the
    /// file holds).
    bindings: BTreeSet<AclBinding>,
    /// The entries of each resource type, by pattern.
    by_type: HashMap<ResourceType, TypeIndex>,
}

#[derive(Debug, Default, Clone)]
struct TypeIndex {
    /// LITERAL name (`*` included) → entries.
    literal: HashMap<String, Vec<AccessControlEntry>>,
    /// PREFIXED name → entries.
    prefixed: HashMap<String, Vec<AccessControlEntry>>,
}

impl AclSet {
    /// The set of `bindings` (duplicates once). Every binding must have
    /// passed [`AclBinding::check`].
    pub fn new(bindings: BTreeSet<AclBinding>) -> Self {
        let mut by_type: HashMap<ResourceType, TypeIndex> = HashMap::new();
        for binding in &bindings {
            debug_assert!(binding.check().is_ok(), "{binding}");
            let index = by_type.entry(binding.pattern.resource_type).or_default();
            let names = match binding.pattern.pattern_type {
                PatternType::Prefixed => &mut index.prefixed,
                _ => &mut index.literal,
            };
            names
                .entry(binding.pattern.name.clone())
                .or_default()
                .push(binding.entry.clone());
        }
        Self { bindings, by_type }
    }

    pub fn len(&self) -> usize {
        self.bindings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }

    pub fn contains(&self, binding: &AclBinding) -> bool {
        self.bindings.contains(binding)
    }

    /// Every ACL, in a stable order.
    pub fn iter(&self) -> impl Iterator<Item = &AclBinding> {
        self.bindings.iter()
    }

    /// The ACLs `filter` matches.
    pub fn matching(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.bindings
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect()
    }

    /// This set with `added` too.
    pub fn with(&self, added: impl IntoIterator<Item = AclBinding>) -> Self {
        let mut bindings = self.bindings.clone();
        bindings.extend(added);
        Self::new(bindings)
    }

    /// This set without `removed`.
    pub fn without(&self, removed: &BTreeSet<AclBinding>) -> Self {
        Self::new(self.bindings.difference(removed).cloned().collect())
    }

    /// The entries of every ACL covering `resource`: LITERAL of its name,
    /// LITERAL `*`, and PREFIXED of any prefix of its name. Allocates
    /// nothing: it runs for every request.
    pub fn covering<'s>(
        &'s self,
        resource: Resource<'s>,
    ) -> impl Iterator<Item = &'s AccessControlEntry> + 's {
        let index = self.by_type.get(&resource.resource_type);
        let name = resource.name;
        let literal = index.into_iter().flat_map(move |index| {
            let exact = index.literal.get(name);
            let wildcard = if name == WILDCARD_RESOURCE {
                None
            } else {
                index.literal.get(WILDCARD_RESOURCE)
            };
            exact.into_iter().chain(wildcard).flatten()
        });
        let prefixed = index
            .filter(|index| !index.prefixed.is_empty())
            .into_iter()
            .flat_map(move |index| {
                name.char_indices()
                    .map(|(at, c)| at + c.len_utf8())
                    .filter_map(move |end| index.prefixed.get(&name[..end]))
                    .flatten()
            });
        literal.chain(prefixed)
    }

    /// Every ACL on a resource of `resource_type`, for the checks that ask
    /// whether a caller may act on any resource of a type (KIP-679).
    pub fn of_type(
        &self,
        resource_type: ResourceType,
    ) -> impl Iterator<Item = (PatternType, &str, &AccessControlEntry)> {
        self.by_type
            .get(&resource_type)
            .into_iter()
            .flat_map(|index| {
                let literal = index.literal.iter().flat_map(|(name, entries)| {
                    entries
                        .iter()
                        .map(move |e| (PatternType::Literal, name.as_str(), e))
                });
                let prefixed = index.prefixed.iter().flat_map(|(name, entries)| {
                    entries
                        .iter()
                        .map(move |e| (PatternType::Prefixed, name.as_str(), e))
                });
                literal.chain(prefixed)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{Operation, Permission, ResourcePattern};
    use crate::auth::Principal;

    fn binding(
        resource_type: ResourceType,
        name: &str,
        pattern_type: PatternType,
        user: &str,
    ) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern::new(resource_type, name, pattern_type),
            entry: AccessControlEntry {
                principal: Principal::user(user),
                host: "*".into(),
                operation: Operation::Read,
                permission: Permission::Allow,
            },
        }
    }

    fn users(set: &AclSet, resource: Resource<'_>) -> Vec<String> {
        let mut found: Vec<String> = set
            .covering(resource)
            .map(|e| e.principal.name.clone())
            .collect();
        found.sort();
        found
    }

    #[test]
    fn covering_finds_the_literal_the_wildcard_and_every_prefix_and_nothing_else() {
        use PatternType::{Literal, Prefixed};
        use ResourceType::{Group, Topic};
        let set = AclSet::new(BTreeSet::from([
            binding(Topic, "orders-eu", Literal, "literal"),
            binding(Topic, "*", Literal, "wildcard"),
            binding(Topic, "o", Prefixed, "short-prefix"),
            binding(Topic, "orders-", Prefixed, "prefix"),
            binding(Topic, "orders-eu-1", Prefixed, "longer-prefix"),
            binding(Topic, "orders", Literal, "other-literal"),
            binding(Group, "orders-eu", Literal, "group"),
        ]));
        assert_eq!(
            users(&set, Resource::topic("orders-eu")),
            ["literal", "prefix", "short-prefix", "wildcard"]
        );
        assert_eq!(users(&set, Resource::group("orders-eu")), ["group"]);
        assert!(users(&set, Resource::cluster()).is_empty());
        // Multi-byte names are cut only at character boundaries.
        assert_eq!(users(&set, Resource::topic("ö")), ["wildcard"]);
    }

    #[test]
    fn with_and_without_make_new_sets_and_leave_the_old_one_as_it_was() {
        let a = binding(ResourceType::Topic, "a", PatternType::Literal, "u");
        let b = binding(ResourceType::Topic, "b", PatternType::Literal, "u");
        let one = AclSet::default().with([a.clone(), a.clone()]);
        let two = one.with([b.clone()]);
        assert_eq!((one.len(), two.len()), (1, 2));
        let back = two.without(&BTreeSet::from([a.clone()]));
        assert!(back.contains(&b) && !back.contains(&a));
        assert!(users(&back, Resource::topic("a")).is_empty());
        assert_eq!(two.matching(&AclBindingFilter::any()).len(), 2);
    }
}
