//! The authorizer's rules, by example and as a property against a plain
//! reading of the rules (`naive`).

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::acl::{AccessControlEntry, AclBinding, ResourcePattern};
use strata_log::storage::Disk;

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    host: &str,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern::new(resource_type, name, pattern_type),
        entry: AccessControlEntry {
            principal: Principal::parse(principal).unwrap(),
            host: host.into(),
            operation,
            permission,
        },
    }
}

fn topic_acl(
    name: &str,
    principal: &str,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    acl(
        ResourceType::Topic,
        name,
        PatternType::Literal,
        principal,
        "*",
        operation,
        permission,
    )
}

fn caller(principal: &str, secured: bool) -> Caller {
    Caller {
        principal: Principal::parse(principal).unwrap(),
        host: "10.0.0.1".into(),
        secured,
    }
}

/// An authorizer over `acls` (in a directory kept for its life).
fn authorizer(acls: Vec<AclBinding>, super_users: &[&str]) -> (Authorizer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = AclStore::open(&Disk::os(), dir.path()).unwrap();
    if !acls.is_empty() {
        store.create(acls).unwrap();
    }
    let supers = super_users
        .iter()
        .map(|p| Principal::parse(p).unwrap())
        .collect();
    (Authorizer::new(store, supers), dir)
}

/// The same, trusting callers on listeners that do not authenticate.
fn trusting(acls: Vec<AclBinding>, super_users: &[&str]) -> (Authorizer, tempfile::TempDir) {
    let (authorizer, dir) = authorizer(acls, super_users);
    (authorizer.trusting_unauthenticated_listeners(true), dir)
}

#[test]
fn without_acls_a_secured_caller_is_refused_and_an_unsecured_one_allowed() {
    let (authorizer, _dir) = authorizer(vec![], &[]);
    let orders = Resource::topic("orders");
    assert!(!authorizer.authorize(&caller("User:alice", true), Operation::Read, orders));
    assert!(authorizer.authorize(&caller("User:ANONYMOUS", false), Operation::Read, orders));
}

#[test]
fn a_deny_wins_over_any_allow_and_binds_unsecured_callers_too() {
    use Operation::{All, Read, Write};
    use Permission::{Allow, Deny};
    let (authorizer, _dir) = authorizer(
        vec![
            topic_acl("orders", "User:alice", All, Allow),
            topic_acl("*", "User:*", Read, Allow),
            topic_acl("orders", "User:alice", Write, Deny),
            topic_acl("orders", "User:ANONYMOUS", Read, Deny),
        ],
        &[],
    );
    let alice = caller("User:alice", true);
    let orders = Resource::topic("orders");
    assert!(authorizer.authorize(&alice, Read, orders));
    assert!(!authorizer.authorize(&alice, Write, orders));
    assert!(!authorizer.authorize(&alice, Write, Resource::topic("payments")));
    assert!(authorizer.authorize(&caller("User:bob", true), Read, Resource::topic("payments")));
    let anonymous = caller("User:ANONYMOUS", false);
    assert!(!authorizer.authorize(&anonymous, Read, orders));
    let (trusting, _dir) = trusting(vec![topic_acl("orders", "User:ANONYMOUS", Read, Deny)], &[]);
    assert!(!trusting.authorize(&anonymous, Read, orders));
    assert!(trusting.authorize(&anonymous, Write, orders));
}

#[test]
fn once_any_acl_exists_an_unauthenticated_caller_gets_only_what_acls_allow() {
    use Operation::{Read, Write};
    let anonymous = caller("User:ANONYMOUS", false);
    let orders = Resource::topic("orders");
    let (authorizer, _dir) = authorizer(
        vec![topic_acl(
            "orders",
            "User:ANONYMOUS",
            Read,
            Permission::Allow,
        )],
        &[],
    );
    assert!(authorizer.authorize(&anonymous, Read, orders));
    assert!(!authorizer.authorize(&anonymous, Write, orders));
    assert!(!authorizer.authorize(&anonymous, Operation::Alter, Resource::cluster()));
    assert!(!authorizer.allows_any(&anonymous, Write, ResourceType::Topic));
    // Made a super user, the loopback listener's callers are admins.
    let (admin, _dir) = authorizer_with(&["User:ANONYMOUS"]);
    assert!(admin.authorize(&anonymous, Operation::Alter, Resource::cluster()));
    // Trusted, its callers are allowed what no DENY refuses.
    let (trusting, _dir) = trusting(
        vec![topic_acl(
            "orders",
            "User:ANONYMOUS",
            Read,
            Permission::Allow,
        )],
        &[],
    );
    assert!(trusting.authorize(&anonymous, Write, orders));
}

/// An authorizer holding one ACL (on another principal) and
/// `super_users`.
fn authorizer_with(super_users: &[&str]) -> (Authorizer, tempfile::TempDir) {
    authorizer(
        vec![topic_acl(
            "t",
            "User:alice",
            Operation::Read,
            Permission::Allow,
        )],
        super_users,
    )
}

#[test]
fn super_users_are_allowed_whatever_the_acls_say() {
    let (authorizer, _dir) = authorizer(
        vec![topic_acl("*", "User:*", Operation::All, Permission::Deny)],
        &["User:admin"],
    );
    let admin = caller("User:admin", true);
    assert!(authorizer.authorize(&admin, Operation::Delete, Resource::topic("orders")));
    assert!(authorizer.authorize(&admin, Operation::Alter, Resource::cluster()));
    assert!(!authorizer.authorize(
        &caller("User:alice", false),
        Operation::Read,
        Resource::topic("t")
    ));
}

#[test]
fn implied_operations_are_allowed_but_never_implied_by_a_deny() {
    use Operation::{AlterConfigs, Describe, DescribeConfigs, Read};
    use Permission::{Allow, Deny};
    let (authorizer, _dir) = authorizer(
        vec![
            topic_acl("t", "User:alice", Read, Allow),
            topic_acl("t", "User:alice", AlterConfigs, Allow),
            topic_acl("u", "User:alice", Read, Deny),
        ],
        &[],
    );
    let alice = caller("User:alice", true);
    assert!(authorizer.authorize(&alice, Describe, Resource::topic("t")));
    assert!(authorizer.authorize(&alice, DescribeConfigs, Resource::topic("t")));
    assert!(!authorizer.authorize(&alice, Operation::Write, Resource::topic("t")));
    // A DENY of READ leaves DESCRIBE to the default: refused once ACLs
    // exist, allowed to a trusted listener's caller.
    let unsecured_alice = caller("User:alice", false);
    assert!(!authorizer.authorize(&unsecured_alice, Describe, Resource::topic("u")));
    let trusting = authorizer.trusting_unauthenticated_listeners(true);
    assert!(trusting.authorize(&unsecured_alice, Describe, Resource::topic("u")));
}

#[test]
fn hosts_and_prefixes_narrow_what_an_acl_covers() {
    let (authorizer, _dir) = authorizer(
        vec![acl(
            ResourceType::Group,
            "app-",
            PatternType::Prefixed,
            "User:alice",
            "10.0.0.1",
            Operation::Read,
            Permission::Allow,
        )],
        &[],
    );
    let mut alice = caller("User:alice", true);
    assert!(authorizer.authorize(&alice, Operation::Read, Resource::group("app-1")));
    assert!(!authorizer.authorize(&alice, Operation::Read, Resource::group("other")));
    alice.host = "10.0.0.2".into();
    assert!(!authorizer.authorize(&alice, Operation::Read, Resource::group("app-1")));
}

#[test]
fn write_on_any_topic_follows_kafkas_rules_for_idempotent_producers() {
    use Operation::Write;
    use Permission::{Allow, Deny};
    let alice = caller("User:alice", true);
    let check = |acls: Vec<AclBinding>| {
        let (authorizer, _dir) = authorizer(acls, &[]);
        authorizer.allows_any(&alice, Write, ResourceType::Topic)
    };
    assert!(!check(vec![]));
    assert!(check(vec![topic_acl("orders", "User:alice", Write, Allow)]));
    assert!(check(vec![topic_acl("*", "User:*", Write, Allow)]));
    // READ does not count, nor an ALLOW shadowed by a DENY.
    assert!(!check(vec![topic_acl(
        "orders",
        "User:alice",
        Operation::Read,
        Allow
    )]));
    assert!(!check(vec![
        topic_acl("orders", "User:alice", Write, Allow),
        topic_acl("orders", "User:alice", Write, Deny),
    ]));
    assert!(!check(vec![
        topic_acl("orders", "User:alice", Write, Allow),
        acl(
            ResourceType::Topic,
            "ord",
            PatternType::Prefixed,
            "User:*",
            "*",
            Write,
            Deny
        ),
    ]));
    assert!(!check(vec![
        topic_acl("orders", "User:alice", Write, Allow),
        topic_acl("*", "User:alice", Write, Deny),
    ]));
    assert!(check(vec![
        topic_acl("orders", "User:alice", Write, Allow),
        topic_acl("payments", "User:alice", Write, Deny),
    ]));
    // A DENY on every topic wins over an ALLOW on every topic, whichever
    // of the two the set yields first (it orders them by principal).
    for (allowed, denied) in [("User:alice", "User:*"), ("User:*", "User:alice")] {
        assert!(!check(vec![
            topic_acl("*", allowed, Write, Allow),
            topic_acl("*", denied, Write, Deny),
        ]));
    }
    let (unsecured, _dir) = authorizer(vec![], &[]);
    assert!(unsecured.allows_any(&caller("User:ANONYMOUS", false), Write, ResourceType::Topic));
}

#[test]
fn authorized_operations_list_the_allowed_ones_among_the_types_operations() {
    let (authorizer, _dir) = authorizer(
        vec![topic_acl(
            "t",
            "User:alice",
            Operation::Read,
            Permission::Allow,
        )],
        &[],
    );
    let bits = authorizer.authorized_operations(&caller("User:alice", true), Resource::topic("t"));
    assert_eq!(
        bits,
        1 << Operation::Read.code() | 1 << Operation::Describe.code()
    );
    let stranger = caller("User:x", false);
    assert_eq!(
        authorizer.authorized_operations(&stranger, Resource::group("g")),
        0
    );
    let trusting = authorizer.trusting_unauthenticated_listeners(true);
    let unsecured = trusting.authorized_operations(&stranger, Resource::group("g"));
    let all_group_ops = Operation::supported_on(ResourceType::Group)
        .iter()
        .fold(0, |bits, op| bits | 1 << op.code());
    assert_eq!(unsecured, all_group_ops);
}

/// The rules as the documentation states them, over a plain list.
fn naive(
    acls: &[AclBinding],
    super_users: &[Principal],
    trust_unauthenticated: bool,
    caller: &Caller,
    operation: Operation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    if super_users.contains(&caller.principal) {
        return true;
    }
    let applies = |b: &AclBinding| {
        let resource = b.pattern.resource_type == resource_type
            && match b.pattern.pattern_type {
                PatternType::Literal => b.pattern.name == name || b.pattern.name == "*",
                _ => name.starts_with(&b.pattern.name),
            };
        let principal =
            b.entry.principal == caller.principal || b.entry.principal.to_string() == "User:*";
        let host = b.entry.host == "*" || b.entry.host == caller.host;
        resource && principal && host
    };
    let implies = |granted: Operation| {
        granted == Operation::All
            || granted == operation
            || (operation == Operation::Describe
                && [
                    Operation::Read,
                    Operation::Write,
                    Operation::Delete,
                    Operation::Alter,
                ]
                .contains(&granted))
            || (operation == Operation::DescribeConfigs && granted == Operation::AlterConfigs)
    };
    let denied = acls.iter().any(|b| {
        applies(b)
            && b.entry.permission == Permission::Deny
            && (b.entry.operation == Operation::All || b.entry.operation == operation)
    });
    if denied {
        return false;
    }
    let allowed = acls.iter().any(|b| {
        applies(b) && b.entry.permission == Permission::Allow && implies(b.entry.operation)
    });
    allowed || (!caller.secured && (trust_unauthenticated || acls.is_empty()))
}

const NAMES: [&str; 6] = ["a", "ab", "abc", "b", "*", "é"];
const PRINCIPALS: [&str; 4] = ["User:alice", "User:bob", "User:*", "Group:alice"];
const HOSTS: [&str; 3] = ["*", "10.0.0.1", "10.0.0.2"];

fn concrete_operation() -> impl Strategy<Value = Operation> {
    (3i8..=14).prop_map(|code| Operation::from_code(code).unwrap())
}

fn any_acl() -> impl Strategy<Value = AclBinding> {
    (
        prop::sample::select(vec![ResourceType::Topic, ResourceType::Group]),
        prop::sample::select(NAMES.to_vec()),
        prop::sample::select(vec![PatternType::Literal, PatternType::Prefixed]),
        prop::sample::select(PRINCIPALS.to_vec()),
        prop::sample::select(HOSTS.to_vec()),
        prop_oneof![Just(Operation::All), concrete_operation()],
        prop::sample::select(vec![Permission::Allow, Permission::Deny]),
    )
        .prop_map(|(t, name, p, principal, host, op, permission)| {
            acl(t, name, p, principal, host, op, permission)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_authorizer_decides_as_the_rules_say(
        acls in prop::collection::vec(any_acl(), 0..12),
        supers in prop::collection::vec(prop::sample::select(vec!["User:alice", "User:carol"]), 0..2),
        trust in any::<bool>(),
        questions in prop::collection::vec((
            prop::sample::select(vec!["User:alice", "User:bob", "User:carol"]),
            prop::sample::select(vec!["10.0.0.1", "10.0.0.2"]),
            any::<bool>(),
            concrete_operation(),
            prop::sample::select(vec![ResourceType::Topic, ResourceType::Group]),
            prop::sample::select(vec!["a", "ab", "abc", "b", "c", "é", "éa"]),
        ), 1..40),
    ) {
        let (authorizer, _dir) = authorizer(acls.clone(), &supers);
        let authorizer = authorizer.trusting_unauthenticated_listeners(trust);
        let super_users: Vec<Principal> = supers.iter().map(|p| Principal::parse(p).unwrap()).collect();
        let distinct: BTreeSet<AclBinding> = acls.iter().cloned().collect();
        prop_assert_eq!(authorizer.snapshot().len(), distinct.len());
        for (principal, host, secured, operation, resource_type, name) in questions {
            let caller = Caller {
                principal: Principal::parse(principal).unwrap(),
                host: host.to_string(),
                secured,
            };
            let resource = Resource { resource_type, name };
            prop_assert_eq!(
                authorizer.authorize(&caller, operation, resource),
                naive(&acls, &super_users, trust, &caller, operation, resource_type, name),
                "{:?} {} {:?}", caller, operation, resource
            );
        }
    }
}
