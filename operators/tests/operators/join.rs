//! Stream–table joins through the real runtime: a table materialized from
//! its topic (latest value per key, tombstones delete) joined with a
//! stream of the same keys, inner and left, against a model. The table's
//! updates are written and processed before the stream records that must
//! see them (here in an earlier run; `tests/runtime/operators_enrich_backlog.rs`
//! has both written at once, read in timestamp order); then rows change
//! and are deleted, and later records see that.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use strata::codec::Codec;
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{Location, OnError};
use strata_operators::{Pipeline, Topic};
use support::Rec;

const VIEWS: Topic<String, String> = Topic::new("views");
const USERS: Topic<String, String> = Topic::new("users");
const INNER: Topic<String, String> = Topic::new("inner");
const LEFT: Topic<String, String> = Topic::new("left");

fn pipeline() -> Pipeline {
    let pipeline = Pipeline::new("join");
    let users = pipeline.table(USERS);
    let views = pipeline.from(VIEWS);
    views
        .join(&users, |user, page, name| format!("{user} {name} {page}"))
        .to(INNER);
    views
        .left_join(&users, |user, page, name: Option<String>| {
            format!("{user} {} {page}", name.as_deref().unwrap_or("-"))
        })
        .to(LEFT);
    pipeline
}

/// Appends `(key, value or tombstone)` to `users`.
fn append_rows(data: &Path, partitions: i32, rows: &[(String, Option<String>)], ts: i64) {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    if log.topic("users").is_none() {
        log.create_topic("users", partitions, BTreeMap::new())
            .unwrap();
    }
    for (key, value) in rows {
        let partition = strata::client::partitioner::partition_for_key(key.as_bytes(), partitions);
        let mut builder = BatchBuilder::new(Compression::None);
        let record = NewRecord {
            key: Some(key.as_bytes()),
            value: value.as_deref().map(str::as_bytes),
            timestamp: ts,
            headers: &[],
        };
        builder.push(record).unwrap();
        let log_partition = log.partition("users", partition).unwrap();
        log_partition.append(&builder.build().unwrap()).unwrap();
    }
    log.close().unwrap();
}

fn append_views(data: &Path, partitions: i32, views: &[(String, String)], ts: i64) {
    for (user, page) in views {
        let partition = strata::client::partitioner::partition_for_key(user.as_bytes(), partitions);
        support::append(
            data,
            "views",
            partitions,
            partition,
            &[Rec::text(user, page, ts)],
        );
    }
}

const NAMES: [&str; 5] = ["u0", "u1", "u2", "u3", "u4"];

fn rows() -> impl Strategy<Value = Vec<(usize, Option<String>)>> {
    proptest::collection::vec(
        (
            0usize..5,
            proptest::option::weighted(0.7, "[A-Z][a-z]{1,4}"),
        ),
        0..12,
    )
}

fn views() -> impl Strategy<Value = Vec<(usize, String)>> {
    proptest::collection::vec((0usize..5, "/[a-z]{1,3}"), 0..25)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn stream_table_joins_match_the_model(
        phases in proptest::collection::vec((rows(), views()), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let app = pipeline().app().unwrap();
        let ts = support::base_ms();
        let (mut table, mut inner, mut left) = (BTreeMap::new(), Vec::new(), Vec::new());
        // Both topics exist from the start, with the same partitions.
        append_rows(data, 3, &[], ts);
        support::append(data, "views", 3, 0, &[]);
        for (rows, views) in &phases {
            let rows: Vec<(String, Option<String>)> =
                rows.iter().map(|(u, v)| (NAMES[*u].to_string(), v.clone())).collect();
            append_rows(data, 3, &rows, ts);
            support::run(&app, data);
            for (user, value) in rows {
                match value {
                    Some(name) => table.insert(user, name),
                    None => table.remove(&user),
                };
            }
            let views: Vec<(String, String)> =
                views.iter().map(|(u, p)| (NAMES[*u].to_string(), p.clone())).collect();
            append_views(data, 3, &views, ts);
            support::run(&app, data);
            for (user, page) in views {
                let name = table.get(&user);
                if let Some(name) = name {
                    inner.push((user.clone(), format!("{user} {name} {page}")));
                }
                let shown = name.map(String::as_str).unwrap_or("-");
                left.push((user.clone(), format!("{user} {shown} {page}")));
            }
        }
        inner.sort();
        left.sort();
        let text = |topic| -> Vec<(String, String)> {
            support::read_sorted(data, topic).iter().map(|r| (r.key_text(), r.value_text())).collect()
        };
        prop_assert_eq!(text("inner"), inner);
        prop_assert_eq!(text("left"), left);
    }
}

#[test]
fn a_stream_re_keyed_before_a_join_is_repartitioned_by_the_tables_key_encoding() {
    const CLICKS: Topic<String, String> = Topic::new("clicks");
    let pipeline = Pipeline::new("rekeyed");
    let users = pipeline.table(USERS);
    pipeline
        .from(CLICKS)
        // clicks are keyed by page, valued by user: re-keyed by user.
        .map(|page: String, user: String| (user, page))
        .join(&users, |user, page, name| format!("{user} {name} {page}"))
        .to(INNER);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let ts = support::base_ms();
    append_rows(data, 3, &[("u1".into(), Some("Ada".into()))], ts);
    support::append(data, "clicks", 3, 0, &[]);
    let app = pipeline.app().unwrap();
    // The table first, then the clicks, so that every click finds its row.
    support::run(&app, data);
    support::append(data, "clicks", 3, 0, &[Rec::text("/a", "u1", ts)]);
    let more = [Rec::text("/b", "u1", ts), Rec::text("/c", "u9", ts)];
    support::append(data, "clicks", 3, 2, &more);
    support::run(&app, data);
    let got: Vec<String> = support::read_sorted(data, "inner")
        .iter()
        .map(Rec::value_text)
        .collect();
    // The clicks of u1, from two partitions of `clicks`, reached u1's
    // partition of `users`; u9 has no row.
    assert_eq!(got, ["u1 Ada /a", "u1 Ada /b"]);
    let internal = support::read(data, "rekeyed-join-2-raw-repartition");
    assert_eq!(internal.iter().map(Vec::len).sum::<usize>(), 3);
}

const ORDERS: Topic<String, u64> = Topic::new("orders").codecs(Codec::Raw, Codec::Json);
const PRICED: Topic<String, String> = Topic::new("priced");

/// A segment reading two topics (the orders keyed as the table is, so no
/// repartition splits them) decodes each record itself: a value that
/// does not decode is a `decode` failure, dead-lettered as the runtime's
/// own decoding would have it, and the records around it are joined.
#[test]
fn an_undecodable_record_of_a_join_is_dead_lettered_as_a_decode_failure() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let base = support::base_ms();
    let users = [Rec::text("u1", "Ann", base)];
    support::append(&data, "users", 1, 0, &users);
    let orders = [
        Rec::text("u1", "5", base + 1),
        Rec::text("u1", "not json", base + 2),
        Rec::text("u1", "7", base + 3),
    ];
    support::append(&data, "orders", 1, 0, &orders);
    let pipeline = Pipeline::new("pricing");
    let users = pipeline.table(USERS);
    (pipeline.from(ORDERS))
        .left_join(&users, |_, cents, name: Option<String>| {
            format!("{} {cents}", name.unwrap_or_default())
        })
        .to(PRICED);
    let app = pipeline.app().unwrap().on_error(OnError::dead_letter());
    support::run(&app, &data);
    let priced: Vec<String> = support::read(&data, "priced")[0]
        .iter()
        .map(Rec::value_text)
        .collect();
    assert_eq!(priced, ["Ann 5", "Ann 7"]);
    let location = Location::embedded(&data, app.name());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let letters = runtime
        .block_on(strata::runtime::ops::dead_letters(&app, &location, None))
        .unwrap();
    let letters: Vec<_> = letters.iter().flat_map(|d| &d.letters).collect();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].kind, "decode", "{}", letters[0].error);
    assert_eq!(letters[0].value.as_deref(), Some(&b"not json"[..]));
}

/// One topic read by two sources of one segment: each source gets every
/// record.
#[test]
fn a_topic_read_twice_in_one_segment_reaches_both_sources() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let base = support::base_ms();
    let views = [
        Rec::text("u1", "home", base),
        Rec::text("u2", "cart", base + 1),
    ];
    support::append(&data, "views", 1, 0, &views);
    let pipeline = Pipeline::new("twice");
    let shouted = pipeline.from(VIEWS).map_values(|page| page.to_uppercase());
    pipeline.from(VIEWS).merge(&shouted).to(LEFT);
    support::run(&pipeline.app().unwrap(), &data);
    let mut seen: Vec<(String, String)> = support::read(&data, "left")[0]
        .iter()
        .map(|r| (r.key_text(), r.value_text()))
        .collect();
    seen.sort();
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    assert_eq!(
        seen,
        [
            pair("u1", "HOME"),
            pair("u1", "home"),
            pair("u2", "CART"),
            pair("u2", "cart")
        ]
    );
}
