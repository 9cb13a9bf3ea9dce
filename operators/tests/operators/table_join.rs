//! Table–table joins through the real runtime against a model: two
//! tables of the same keys over two partitions, rows written, rewritten
//! and deleted (tombstones, some of keys that have no row) on either side
//! in random phases, inner and left joins; per key, the joined table's
//! changes match the model's in order (a key's changes are ordered; keys
//! of different partitions are not). Then the joined table used as a
//! table (a stream joined with it), and tables whose keys are encoded
//! differently refused.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use strata::codec::Codec;
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata_operators::{Pipeline, Topic};
use support::Rec;

const NAMES: Topic<String, String> = Topic::new("names");
const EMAILS: Topic<String, String> = Topic::new("emails");
const INNER: Topic<String, String> = Topic::new("inner");
const LEFT: Topic<String, String> = Topic::new("left");
const DELETED: &str = "(deleted)";
const PARTITIONS: i32 = 2;

fn pipeline() -> Pipeline {
    let pipeline = Pipeline::new("tables");
    let names = pipeline.table(NAMES);
    let emails = pipeline.table(EMAILS);
    let shown = |row: Option<String>| row.unwrap_or_else(|| DELETED.into());
    names
        .join(&emails, |_, name, email| format!("{name} <{email}>"))
        .changes()
        .map_values(shown)
        .to(INNER);
    names
        .stored_as("names-with-emails")
        .left_join(&emails, |_, name, email| {
            format!("{name} <{}>", email.map_or("-", String::as_str))
        })
        .changes()
        .map_values(shown)
        .to(LEFT);
    pipeline
}

/// Appends `(key, value or tombstone)` to `topic`, each to its key's
/// partition.
fn append_rows(data: &Path, topic: &str, rows: &[(String, Option<String>)], ts: i64) {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    if log.topic(topic).is_none() {
        log.create_topic(topic, PARTITIONS, BTreeMap::new())
            .unwrap();
    }
    for (key, value) in rows {
        let p = strata::client::partitioner::partition_for_key(key.as_bytes(), PARTITIONS);
        let mut builder = BatchBuilder::new(Compression::None);
        let record = NewRecord {
            key: Some(key.as_bytes()),
            value: value.as_deref().map(str::as_bytes),
            timestamp: ts,
            headers: &[],
        };
        builder.push(record).unwrap();
        log.partition(topic, p)
            .unwrap()
            .append(&builder.build().unwrap())
            .unwrap();
    }
    log.close().unwrap();
}

type Rows = BTreeMap<String, String>;
type Changes = BTreeMap<String, Vec<String>>;

/// Applies one change to the model's tables and joined tables, recording
/// the joined tables' changes per key.
struct Model {
    names: Rows,
    emails: Rows,
    inner: Rows,
    left: Rows,
    inner_changes: Changes,
    left_changes: Changes,
}

impl Model {
    fn apply(&mut self, names_side: bool, key: &str, value: Option<&str>) {
        let table = if names_side {
            &mut self.names
        } else {
            &mut self.emails
        };
        match value {
            Some(v) => table.insert(key.into(), v.into()),
            None => table.remove(key),
        };
        let (name, email) = (self.names.get(key), self.emails.get(key));
        let inner = match (name, email) {
            (Some(n), Some(e)) => Some(format!("{n} <{e}>")),
            _ => None,
        };
        let left = name.map(|n| format!("{n} <{}>", email.map_or("-", String::as_str)));
        change(&mut self.inner, &mut self.inner_changes, key, inner);
        change(&mut self.left, &mut self.left_changes, key, left);
    }
}

fn change(rows: &mut Rows, changes: &mut Changes, key: &str, row: Option<String>) {
    let emitted = match row {
        Some(row) => {
            rows.insert(key.into(), row.clone());
            row
        }
        None if rows.remove(key).is_some() => DELETED.into(),
        None => return,
    };
    changes.entry(key.into()).or_default().push(emitted);
}

fn per_key(records: &[Rec]) -> Changes {
    let mut out = Changes::new();
    for r in records {
        out.entry(r.key_text()).or_default().push(r.value_text());
    }
    out
}

const KEYS: [&str; 5] = ["a", "ab", "b", "c", "d"];

fn phase() -> impl Strategy<Value = (bool, Vec<(usize, Option<u8>)>)> {
    let rows =
        proptest::collection::vec((0usize..5, proptest::option::weighted(0.7, 0u8..4)), 1..10);
    (any::<bool>(), rows)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn joined_tables_change_as_the_model_does(phases in proptest::collection::vec(phase(), 1..6)) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let app = pipeline().app().unwrap();
        let ts = support::base_ms();
        append_rows(data, "names", &[], ts);
        append_rows(data, "emails", &[], ts);
        let mut model = Model {
            names: Rows::new(),
            emails: Rows::new(),
            inner: Rows::new(),
            left: Rows::new(),
            inner_changes: Changes::new(),
            left_changes: Changes::new(),
        };
        for (names_side, rows) in &phases {
            let (topic, prefix) = if *names_side { ("names", "N") } else { ("emails", "e") };
            let rows: Vec<(String, Option<String>)> = rows
                .iter()
                .map(|(k, v)| (KEYS[*k].to_string(), v.map(|v| format!("{prefix}{v}"))))
                .collect();
            append_rows(data, topic, &rows, ts);
            support::run(&app, data);
            for (key, value) in &rows {
                model.apply(*names_side, key, value.as_deref());
            }
        }
        let in_order = |topic| -> Vec<Rec> { support::read(data, topic).into_iter().flatten().collect() };
        prop_assert_eq!(per_key(&in_order("inner")), model.inner_changes);
        prop_assert_eq!(per_key(&in_order("left")), model.left_changes);
    }
}

#[test]
fn a_joined_table_is_a_table_a_stream_can_join() {
    const ORDERS: Topic<String, String> = Topic::new("orders");
    const SHIPPED: Topic<String, String> = Topic::new("shipped");
    let pipeline = Pipeline::new("shipping");
    let contacts = pipeline
        .table(NAMES)
        .join(&pipeline.table(EMAILS), |_, name, email| {
            format!("{name} <{email}>")
        });
    pipeline
        .from(ORDERS)
        .join(&contacts, |_, order, contact| {
            format!("{order} to {contact}")
        })
        .to(SHIPPED);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let ts = support::base_ms();
    append_rows(
        data,
        "names",
        &[
            ("u1".into(), Some("Ada".into())),
            ("u2".into(), Some("Bo".into())),
        ],
        ts,
    );
    append_rows(data, "emails", &[("u1".into(), Some("ada@x".into()))], ts);
    support::append(data, "orders", PARTITIONS, 0, &[]);
    let app = pipeline.app().unwrap();
    support::run(&app, data);
    for user in ["u1", "u2"] {
        let p = strata::client::partitioner::partition_for_key(user.as_bytes(), PARTITIONS);
        support::append(
            data,
            "orders",
            PARTITIONS,
            p,
            &[Rec::text(user, "book", ts)],
        );
    }
    support::run(&app, data);
    let got: Vec<String> = support::read_sorted(data, "shipped")
        .iter()
        .map(Rec::value_text)
        .collect();
    // u2 has no email, so no contact.
    assert_eq!(got, ["book to Ada <ada@x>"]);
}

#[test]
fn tables_whose_keys_are_encoded_differently_are_refused_naming_them() {
    const POSTCARD_EMAILS: Topic<String, String> =
        Topic::new("emails-pc").codecs(Codec::Postcard, Codec::Raw);
    let pipeline = Pipeline::new("mismatch");
    pipeline
        .table(NAMES)
        .join(&pipeline.table(POSTCARD_EMAILS), |_, n, e| {
            format!("{n}{e}")
        })
        .changes()
        .map_values(|row| row.unwrap_or_default())
        .to(INNER);
    let error = pipeline.app().err().expect("refused");
    let message = error.to_string();
    assert!(
        message.contains("names-table") && message.contains("emails-pc-table"),
        "{message}"
    );
    assert!(
        message.contains("encode their keys differently"),
        "{message}"
    );
}
