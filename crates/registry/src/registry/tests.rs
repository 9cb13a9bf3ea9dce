//! The registry's rules against a log in a temporary directory.

use std::sync::Arc;

use proptest::prelude::*;
use strata_log::{LogConfig, LogManager};

use super::*;
use crate::schema::SchemaType;

struct Opened {
    _dir: tempfile::TempDir,
    log: Option<LogManager>,
    registry: Option<Registry>,
}

impl Opened {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        let registry = Registry::open(&log, Arc::default()).unwrap();
        Self {
            _dir: dir,
            log: Some(log),
            registry: Some(registry),
        }
    }

    fn registry(&self) -> &Registry {
        self.registry.as_ref().unwrap()
    }

    /// Closes the log and opens it and the registry again.
    fn reopen(&mut self) {
        self.registry = None;
        self.log.take().unwrap().close().unwrap();
        let log = LogManager::open(self._dir.path(), LogConfig::default()).unwrap();
        self.registry = Some(Registry::open(&log, Arc::default()).unwrap());
        self.log = Some(log);
    }
}

fn avro(text: &str) -> Schema {
    Schema {
        schema_type: SchemaType::Avro,
        text: text.into(),
        references: vec![],
    }
}

fn record(fields: &str) -> Schema {
    avro(&format!(
        r#"{{"type":"record","name":"User","fields":[{fields}]}}"#
    ))
}

const NAME: &str = r#"{"name":"name","type":"string"}"#;
const AGE_DEFAULT: &str = r#"{"name":"age","type":"int","default":0}"#;
const AGE: &str = r#"{"name":"age","type":"int"}"#;

#[test]
fn registering_the_same_schema_again_returns_its_id_without_a_new_version() {
    let opened = Opened::new();
    let r = opened.registry();
    let id = r.register("users-value", record(NAME)).unwrap();
    assert_eq!(r.register("users-value", record(NAME)).unwrap(), id);
    assert_eq!(r.versions("users-value", false).unwrap(), [1]);
}

#[test]
fn the_same_schema_under_another_subject_keeps_its_global_id() {
    let opened = Opened::new();
    let r = opened.registry();
    let id = r.register("a", record(NAME)).unwrap();
    assert_eq!(r.register("b", record(NAME)).unwrap(), id);
    let mut versions = r.versions_of_id(id, false).unwrap();
    versions.sort();
    assert_eq!(versions, [("a".to_string(), 1), ("b".to_string(), 1)]);
}

#[test]
fn backward_evolution_is_accepted_and_a_field_without_default_is_refused() {
    let opened = Opened::new();
    let r = opened.registry();
    r.register("s", record(NAME)).unwrap();
    let v2 = r
        .register("s", record(&format!("{NAME},{AGE_DEFAULT}")))
        .unwrap();
    assert_eq!(v2, 2);
    let error = r
        .register(
            "s",
            record(&format!(
                "{NAME},{AGE_DEFAULT},{}",
                AGE.replace("age", "height")
            )),
        )
        .unwrap_err();
    assert_eq!(error.code(), 409, "{error}");
    assert!(error.to_string().contains("height"), "{error}");
}

#[test]
fn level_none_accepts_anything_valid() {
    let opened = Opened::new();
    let r = opened.registry();
    r.register("s", record(NAME)).unwrap();
    r.set_level(Some("s"), Some(CompatibilityLevel::None))
        .unwrap();
    r.register("s", avro(r#""string""#)).unwrap();
    assert_eq!(r.register("s", avro("{")).unwrap_err().code(), 42201);
}

#[test]
fn a_subject_level_is_not_configured_until_set() {
    let opened = Opened::new();
    let r = opened.registry();
    assert_eq!(r.subject_level("s", false).unwrap_err().code(), 40408);
    assert_eq!(
        r.subject_level("s", true).unwrap(),
        CompatibilityLevel::Backward
    );
    r.set_level(None, Some(CompatibilityLevel::Full)).unwrap();
    assert_eq!(
        r.subject_level("s", true).unwrap(),
        CompatibilityLevel::Full
    );
}

#[test]
fn a_permanent_delete_needs_a_soft_delete_first() {
    let opened = Opened::new();
    let r = opened.registry();
    r.register("s", record(NAME)).unwrap();
    assert_eq!(r.delete_subject("s", true).unwrap_err().code(), 40405);
    assert_eq!(
        r.delete_version("s", VersionSpec::Number(1), true)
            .unwrap_err()
            .code(),
        40407
    );
    assert_eq!(r.delete_subject("s", false).unwrap(), [1]);
    assert_eq!(r.delete_subject("s", false).unwrap_err().code(), 40404);
    assert_eq!(r.versions("s", false).unwrap_err().code(), 40401);
    assert_eq!(r.versions("s", true).unwrap(), [1]);
    assert_eq!(r.subjects(false), Vec::<String>::new());
    assert_eq!(r.subjects(true), ["s"]);
    assert_eq!(r.delete_subject("s", true).unwrap(), [1]);
    assert_eq!(r.delete_subject("s", false).unwrap_err().code(), 40401);
}

#[test]
fn a_soft_deleted_version_is_hidden_and_refused_a_second_soft_delete() {
    let opened = Opened::new();
    let r = opened.registry();
    r.register("s", record(NAME)).unwrap();
    r.register("s", record(&format!("{NAME},{AGE_DEFAULT}")))
        .unwrap();
    assert_eq!(
        r.delete_version("s", VersionSpec::Number(2), false)
            .unwrap(),
        2
    );
    assert_eq!(
        r.version("s", VersionSpec::Latest, false).unwrap().version,
        1
    );
    assert_eq!(
        r.version("s", VersionSpec::Number(2), false)
            .unwrap_err()
            .code(),
        40402
    );
    assert_eq!(
        r.version("s", VersionSpec::Number(2), true)
            .unwrap()
            .version,
        2
    );
    let again = r
        .delete_version("s", VersionSpec::Number(2), false)
        .unwrap_err();
    assert_eq!(again.code(), 40406);
    assert_eq!(
        r.delete_version("s", VersionSpec::Number(2), true).unwrap(),
        2
    );
    assert_eq!(
        r.version("s", VersionSpec::Number(2), true)
            .unwrap_err()
            .code(),
        40402
    );
}

#[test]
fn lookup_finds_the_version_holding_a_schema() {
    let opened = Opened::new();
    let r = opened.registry();
    r.register("s", record(NAME)).unwrap();
    let found = r.lookup("s", &record(NAME), false).unwrap();
    assert_eq!((found.version, found.id), (1, 1));
    assert_eq!(
        r.lookup("s", &avro(r#""int""#), false).unwrap_err().code(),
        40403
    );
    assert_eq!(
        r.lookup("t", &record(NAME), false).unwrap_err().code(),
        40401
    );
}

#[test]
fn versions_are_refused_unless_positive_or_latest() {
    assert_eq!(
        "latest".parse::<VersionSpec>().unwrap(),
        VersionSpec::Latest
    );
    assert_eq!("-1".parse::<VersionSpec>().unwrap(), VersionSpec::Latest);
    assert_eq!("3".parse::<VersionSpec>().unwrap(), VersionSpec::Number(3));
    for bad in ["0", "-2", "x", ""] {
        assert_eq!(bad.parse::<VersionSpec>().unwrap_err().code(), 42202);
    }
}

#[test]
fn schemas_levels_and_ids_survive_a_reopen() {
    let mut opened = Opened::new();
    let r = opened.registry();
    r.register("a", record(NAME)).unwrap();
    r.register("b", avro(r#""string""#)).unwrap();
    r.set_level(Some("a"), Some(CompatibilityLevel::FullTransitive))
        .unwrap();
    r.delete_subject("b", false).unwrap();
    r.delete_subject("b", true).unwrap();
    opened.reopen();
    let r = opened.registry();
    assert_eq!(r.schema(1).unwrap(), record(NAME));
    assert_eq!(
        r.subject_level("a", false).unwrap(),
        CompatibilityLevel::FullTransitive
    );
    assert_eq!(r.schema(2).unwrap_err().code(), 40403);
    // Id 2 was given once and deleted: never again.
    assert_eq!(r.register("c", avro(r#""int""#)).unwrap(), 3);
}

#[test]
fn a_reference_resolves_to_its_registered_version() {
    let opened = Opened::new();
    let r = opened.registry();
    let address =
        avro(r#"{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}"#);
    r.register("address", address).unwrap();
    let mut user =
        avro(r#"{"type":"record","name":"User","fields":[{"name":"home","type":"Address"}]}"#);
    assert_eq!(r.register("user", user.clone()).unwrap_err().code(), 42201);
    user.references = vec![crate::schema::SchemaReference {
        name: "Address".into(),
        subject: "address".into(),
        version: 1,
    }];
    let id = r.register("user", user).unwrap();
    assert_eq!(
        r.referenced_by("address", VersionSpec::Latest).unwrap(),
        [id]
    );
    // A referenced version stays while something refers to it (42206),
    // whether the subject or the version is deleted.
    assert_eq!(
        r.delete_subject("address", false).unwrap_err().code(),
        42206
    );
    let version_one = VersionSpec::Number(1);
    assert_eq!(
        r.delete_version("address", version_one, false)
            .unwrap_err()
            .code(),
        42206
    );
    r.delete_subject("user", false).unwrap();
    r.delete_subject("address", false).unwrap();
}

#[test]
fn a_referenced_types_own_change_is_checked_like_an_inline_one() {
    let opened = Opened::new();
    let r = opened.registry();
    let address = |fields: &str| {
        avro(&format!(
            r#"{{"type":"record","name":"Address","namespace":"shop","fields":[{fields}]}}"#
        ))
    };
    r.register("address", address(r#"{"name":"city","type":"string"}"#))
        .unwrap();
    // Version 2 adds a field without a default: fine on its own subject
    // under NONE, but a reader of it cannot read version 1's data.
    r.set_level(Some("address"), Some(CompatibilityLevel::None))
        .unwrap();
    let zip = r#"{"name":"city","type":"string"},{"name":"zip","type":"string"}"#;
    r.register("address", address(zip)).unwrap();
    let user = |version: i32| {
        let mut user = avro(
            r#"{"type":"record","name":"User","namespace":"shop","fields":[{"name":"home","type":"shop.Address"}]}"#,
        );
        user.references = vec![crate::schema::SchemaReference {
            name: "shop.Address".into(),
            subject: "address".into(),
            version,
        }];
        user
    };
    r.register("user", user(1)).unwrap();
    let refused = r.register("user", user(2)).unwrap_err();
    assert_eq!(refused.code(), 409, "{refused}");
    assert!(refused.to_string().contains("zip"), "{refused}");
}

/// An operation of the id property.
#[derive(Debug, Clone)]
enum Op {
    Register(u8, u8),
    SoftDelete(u8),
    HardDelete(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..3, 0u8..6).prop_map(|(s, n)| Op::Register(s, n)),
        (0u8..3).prop_map(Op::SoftDelete),
        (0u8..3).prop_map(Op::HardDelete),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn ids_are_never_given_to_a_different_schema(ops in proptest::collection::vec(op(), 1..24)) {
        let mut opened = Opened::new();
        // Every id ever answered, and the schema it was answered for.
        let mut given: std::collections::HashMap<i32, String> = Default::default();
        for (i, op) in ops.iter().enumerate() {
            if i == ops.len() / 2 {
                opened.reopen();
            }
            let r = opened.registry();
            r.set_level(None, Some(CompatibilityLevel::None)).unwrap();
            match op {
                Op::Register(s, n) => {
                    let text = format!(r#"{{"type":"enum","name":"E","symbols":["S{n}"]}}"#);
                    let id = r.register(&format!("s{s}"), avro(&text)).unwrap();
                    let before = given.insert(id, text.clone());
                    prop_assert!(before.is_none_or(|t| t == text), "id {id} given twice");
                }
                Op::SoftDelete(s) => drop(r.delete_subject(&format!("s{s}"), false)),
                Op::HardDelete(s) => drop(r.delete_subject(&format!("s{s}"), true)),
            }
        }
    }
}
