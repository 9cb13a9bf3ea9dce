//! Whether a caller may perform an operation on a resource: Kafka's rules
//! over the store's current ACLs, decided in memory.
//!
//! In order:
//! 1. A super user (`super_users` in strata.toml) is allowed everything.
//! 2. A DENY covering the resource, for the caller's principal (or
//!    `User:*`) and host (or `*`), of the operation or ALL, refuses it,
//!    whatever else allows it.
//! 3. An ALLOW likewise, of the operation, of ALL, or of one implying it
//!    (DESCRIBE by READ, WRITE, DELETE, ALTER; DESCRIBE_CONFIGS by
//!    ALTER_CONFIGS), allows it.
//! 4. Otherwise refused (Kafka's `allow.everyone.if.no.acl.found =
//!    false`), with one exception: on a listener that does not
//!    authenticate its clients (a local PLAINTEXT listener, whose callers
//!    are all `User:ANONYMOUS`) the caller is allowed while the broker
//!    holds no ACL at all, so a development broker serves as it always
//!    has. Once any ACL exists, such a caller gets only what ACLs allow
//!    (or what `super_users` gives it): a loopback listener beside a
//!    SASL_SSL one does not make every local process a super user. A
//!    broker set to `trust_unauthenticated_listeners` keeps the older rule:
//!    such callers are allowed whatever no DENY refuses.
//!
//! A resource is covered by a LITERAL ACL of its name, a LITERAL `*`, and a
//! PREFIXED ACL of any prefix of its name.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::acl_set::AclSet;
use super::store::AclStore;
use crate::auth::{Caller, Principal};
use strata_protocol::acl::Operation;
use strata_protocol::acl::PatternType;
use strata_protocol::acl::Permission;
use strata_protocol::acl::{Resource, ResourceType, WILDCARD_RESOURCE};

/// A resource name no ACL is expected to name: asking about it tells
/// whether the caller's principal is allowed an operation on a type
/// regardless of ACLs on named resources (a super user, or an unsecured
/// listener without a covering DENY), as Kafka asks about `hardcode`.
const UNNAMED_RESOURCE: &str = "hardcode";

/// The broker's authorization: its ACLs, its super users, and whether
/// callers on listeners that do not authenticate are trusted.
#[derive(Debug)]
pub struct Authorizer {
    store: AclStore,
    super_users: Vec<Principal>,
    trust_unauthenticated: bool,
    /// Checks of a request's operation the ACLs refused (a request refused,
    /// or a resource a listing left out), for the metrics.
    denied: AtomicU64,
}

impl Authorizer {
    /// Kafka's default: once any ACL exists, every caller gets only what
    /// ACLs allow.
    pub fn new(store: AclStore, super_users: Vec<Principal>) -> Self {
        Self {
            store,
            super_users,
            trust_unauthenticated: false,
            denied: AtomicU64::new(0),
        }
    }

    /// Callers on listeners that do not authenticate are allowed whatever
    /// no DENY refuses, even once ACLs exist (rule 4's exception, always).
    pub fn trusting_unauthenticated_listeners(mut self, trust: bool) -> Self {
        self.trust_unauthenticated = trust;
        self
    }

    /// The ACLs, to list and change.
    pub fn store(&self) -> &AclStore {
        &self.store
    }

    /// The ACLs now: a caller checking many resources in one request takes
    /// this once and asks [`Authorizer::allows`].
    pub fn snapshot(&self) -> Arc<AclSet> {
        self.store.snapshot()
    }

    /// Whether `caller` may perform `operation` on `resource`, under the
    /// ACLs now.
    pub fn authorize(&self, caller: &Caller, operation: Operation, resource: Resource<'_>) -> bool {
        self.allows(&self.store.snapshot(), caller, operation, resource)
    }

    /// Checks the ACLs refused so far (see [`Authorizer::allows`]).
    pub fn denied(&self) -> u64 {
        self.denied.load(Ordering::Relaxed)
    }

    /// Whether `caller` may perform `operation` on `resource` under `acls`;
    /// a refusal is counted (see [`Authorizer::denied`]).
    pub fn allows(
        &self,
        acls: &AclSet,
        caller: &Caller,
        operation: Operation,
        resource: Resource<'_>,
    ) -> bool {
        let allowed = self.permits(acls, caller, operation, resource);
        if !allowed {
            self.denied.fetch_add(1, Ordering::Relaxed);
        }
        allowed
    }

    /// [`Authorizer::allows`] without counting a refusal: for the questions
    /// that are not a request's own check (a probe a request falls back
    /// from, such as a cluster-wide permission before a narrower one;
    /// which operations a caller could perform).
    pub fn permits(
        &self,
        acls: &AclSet,
        caller: &Caller,
        operation: Operation,
        resource: Resource<'_>,
    ) -> bool {
        debug_assert!(
            !matches!(operation, Operation::Any | Operation::All),
            "requests ask for one operation"
        );
        if self.super_users.contains(&caller.principal) {
            return true;
        }
        let mut allowed = false;
        for entry in acls.covering(resource) {
            if !entry.concerns(caller) {
                continue;
            }
            match entry.permission {
                Permission::Deny
                    if matches!(entry.operation, Operation::All)
                        || entry.operation == operation =>
                {
                    return false;
                }
                Permission::Allow if entry.operation.allows(operation) => allowed = true,
                _ => {}
            }
        }
        allowed || (!caller.secured && (self.trust_unauthenticated || acls.is_empty()))
    }

    /// Whether `caller` may perform `operation` on at least one resource of
    /// `resource_type` (see [`Authorizer::decides_any`]); a refusal is
    /// counted.
    pub fn allows_any(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let allowed = self.decides_any(caller, operation, resource_type);
        if !allowed {
            self.denied.fetch_add(1, Ordering::Relaxed);
        }
        allowed
    }

    /// Whether `caller` may perform `operation` on at least one resource of
    /// `resource_type` (KIP-679: an idempotent producer needs WRITE on some
    /// topic). Kafka's rules: allowed as on an unnamed resource; else a
    /// LITERAL `*` DENY refuses; else a LITERAL `*` ALLOW allows, as does
    /// any other ALLOW not shadowed by a DENY of the same literal name or of
    /// a prefix of its name. Implied operations do not count here.
    fn decides_any(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let acls = self.store.snapshot();
        let unnamed = Resource {
            resource_type,
            name: UNNAMED_RESOURCE,
        };
        if self.permits(&acls, caller, operation, unnamed) {
            return true;
        }
        let mut denied_literal = std::collections::HashSet::new();
        let mut denied_prefixes = std::collections::HashSet::new();
        let mut allowed = Vec::new();
        // An ALLOW on every name decides only once every DENY has been seen:
        // the ACLs come in no particular order.
        let mut every_name_allowed = false;
        for (pattern_type, name, entry) in acls.of_type(resource_type) {
            if !entry.concerns(caller)
                || !(entry.operation == operation || entry.operation == Operation::All)
            {
                continue;
            }
            match (entry.permission, pattern_type) {
                (Permission::Deny, PatternType::Literal) if name == WILDCARD_RESOURCE => {
                    return false;
                }
                (Permission::Deny, PatternType::Literal) => {
                    denied_literal.insert(name);
                }
                (Permission::Deny, _) => {
                    denied_prefixes.insert(name);
                }
                (Permission::Allow, PatternType::Literal) if name == WILDCARD_RESOURCE => {
                    every_name_allowed = true;
                }
                (Permission::Allow, _) => allowed.push((pattern_type, name)),
                (Permission::Any, _) => {}
            }
        }
        if every_name_allowed {
            return true;
        }
        allowed.into_iter().any(|(pattern_type, name)| {
            let shadowed_literally =
                pattern_type == PatternType::Literal && denied_literal.contains(name);
            let shadowed_by_prefix = name
                .char_indices()
                .map(|(at, c)| &name[..at + c.len_utf8()])
                .any(|prefix| denied_prefixes.contains(prefix));
            !shadowed_literally && !shadowed_by_prefix
        })
    }

    /// The operations Kafka defines on `resource`'s type that `caller` may
    /// perform on it, as the bit field DescribeGroups, Metadata and
    /// DescribeCluster answer (bit `code` set for each).
    pub fn authorized_operations(&self, caller: &Caller, resource: Resource<'_>) -> i32 {
        let acls = self.store.snapshot();
        Operation::supported_on(resource.resource_type)
            .iter()
            .filter(|op| self.permits(&acls, caller, **op, resource))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}

#[cfg(test)]
#[path = "authorizer_tests.rs"]
mod tests;
