//! The secondary-index builder through the real runtime against a model:
//! a table's rows indexed by a field (cities that are byte prefixes of
//! each other, one with a zero byte, rows that move city, rows deleted by
//! tombstones, rows without a city), queried by field value, prefix and
//! range from a stream looked up in the index; and a stream indexed by
//! its values, each record its key's new row.

use crate::support;

use std::collections::BTreeMap;
use std::ops::RangeBounds;
use std::path::Path;

use proptest::prelude::*;
use strata::log::{LogConfig, LogManager};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata_operators::{Found, IndexQuery, Pipeline, Topic};
use support::Rec;

const USERS: Topic<String, String> = Topic::new("users");
const QUERIES: Topic<String, String> = Topic::new("queries");
const ANSWERS: Topic<String, String> = Topic::new("answers");

/// `=f` the keys of field f, `^p` of the fields starting with p, `a..b`
/// of the fields from a up to b (excluded).
fn parse(query: &str) -> IndexQuery {
    if let Some(field) = query.strip_prefix('=') {
        IndexQuery::field(field)
    } else if let Some(prefix) = query.strip_prefix('^') {
        IndexQuery::prefix(prefix)
    } else {
        let (from, to) = query.split_once("..").expect("a range");
        IndexQuery::range(from..to)
    }
}

fn render(found: &[(Vec<u8>, String)]) -> String {
    let entries: Vec<String> = found
        .iter()
        .map(|(field, key)| format!("{}={key}", String::from_utf8_lossy(field)))
        .collect();
    entries.join(",")
}

fn pipeline() -> Pipeline {
    let pipeline = Pipeline::new("index");
    let by_city = pipeline
        .table(USERS)
        .index_by("by-city", |_, city: &String| {
            (!city.is_empty()).then(|| city.clone())
        });
    pipeline
        .from(QUERIES)
        .lookup_index(&by_city, |_, query| parse(query))
        .map_values(|(query, found): Found<String, String>| format!("{query} {}", render(&found)))
        .to(ANSWERS);
    pipeline
}

/// What a query finds among `rows` (user → city), in (city, user) order.
fn model(rows: &BTreeMap<String, String>, query: &str) -> String {
    let mut entries: Vec<(Vec<u8>, String)> = rows
        .iter()
        .filter(|(_, city)| !city.is_empty())
        .map(|(user, city)| (city.as_bytes().to_vec(), user.clone()))
        .filter(|(city, _)| match parse(query) {
            IndexQuery::Field(f) => *city == f,
            IndexQuery::Prefix(p) => city.starts_with(&p),
            IndexQuery::Range(from, to) => (from, to).contains(city),
        })
        .collect();
    entries.sort();
    format!("{query} {}", render(&entries))
}

/// Appends `(key, value or tombstone)` to `users`, one partition.
fn append_rows(data: &Path, rows: &[(String, Option<String>)], ts: i64) {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    if log.topic("users").is_none() {
        log.create_topic("users", 1, BTreeMap::new()).unwrap();
    }
    let partition = log.partition("users", 0).unwrap();
    for (key, value) in rows {
        let mut builder = BatchBuilder::new(Compression::None);
        let record = NewRecord {
            key: Some(key.as_bytes()),
            value: value.as_deref().map(str::as_bytes),
            timestamp: ts,
            headers: &[],
        };
        builder.push(record).unwrap();
        partition.append(&builder.build().unwrap()).unwrap();
    }
    drop(partition);
    log.close().unwrap();
}

const NAMES: [&str; 5] = ["u0", "u1", "u10", "u2", "u3"];
const CITIES: [&str; 6] = ["Ber", "Berlin", "Bern", "Be\0rn", "Rome", ""];
const QUERY_SET: [&str; 9] = [
    "=Ber",
    "=Bern",
    "=Be\0rn",
    "^Be",
    "^Ber",
    "^",
    "Ber..Berm",
    "A..Z",
    "Bern..Rome",
];

fn rows() -> impl Strategy<Value = Vec<(usize, Option<usize>)>> {
    proptest::collection::vec(
        (0usize..5, proptest::option::weighted(0.75, 0usize..6)),
        0..10,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn index_queries_match_the_model(
        phases in proptest::collection::vec(
            (rows(), proptest::collection::vec(0usize..9, 0..6)),
            1..4,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let app = pipeline().app().unwrap();
        let ts = support::base_ms();
        append_rows(data, &[], ts);
        support::append(data, "queries", 1, 0, &[]);
        let (mut table, mut expected) = (BTreeMap::new(), Vec::new());
        for (rows, queries) in &phases {
            let rows: Vec<(String, Option<String>)> = rows
                .iter()
                .map(|(u, c)| (NAMES[*u].to_string(), c.map(|c| CITIES[c].to_string())))
                .collect();
            append_rows(data, &rows, ts);
            support::run(&app, data);
            for (user, city) in rows {
                match city {
                    Some(city) => table.insert(user, city),
                    None => table.remove(&user),
                };
            }
            let queries: Vec<Rec> = queries
                .iter()
                .map(|&q| Rec::text("q", QUERY_SET[q], ts))
                .collect();
            support::append(data, "queries", 1, 0, &queries);
            support::run(&app, data);
            expected.extend(queries.iter().map(|q| model(&table, &q.value_text())));
        }
        let got: Vec<String> = support::read(data, "answers")
            .into_iter()
            .flatten()
            .map(|r| r.value_text())
            .collect();
        prop_assert_eq!(got, expected);
    }
}

#[test]
fn a_stream_indexed_by_its_values_keeps_each_keys_latest_value() {
    const VISITS: Topic<String, String> = Topic::new("visits");
    let pipeline = Pipeline::new("latest");
    let by_page = pipeline
        .from(VISITS)
        .index_by("by-page", |_, page: &String| [page.clone()]);
    pipeline
        .from(QUERIES)
        .lookup_index(&by_page, |_, page| IndexQuery::field(page))
        .map_values(|(query, found): Found<String, String>| format!("{query} {}", render(&found)))
        .to(ANSWERS);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let base = support::base_ms();
    let visits = [
        Rec::text("u1", "/a", base),
        Rec::text("u2", "/a", base),
        Rec::text("u1", "/b", base),
    ];
    support::append(data, "visits", 1, 0, &visits);
    support::append(data, "queries", 1, 0, &[]);
    let app = pipeline.app().unwrap();
    support::run(&app, data);
    let queries = [Rec::text("q", "/a", base), Rec::text("q", "/b", base)];
    support::append(data, "queries", 1, 0, &queries);
    support::run(&app, data);
    let got: Vec<String> = support::read(data, "answers")
        .into_iter()
        .flatten()
        .map(|r| r.value_text())
        .collect();
    assert_eq!(got, ["/a /a=u2", "/b /b=u1"]);
}

#[test]
fn an_index_of_another_pipeline_is_refused() {
    let other = Pipeline::new("other");
    let index = other
        .table(USERS)
        .index_by("by-city", |_, c: &String| Some(c.clone()));
    let pipeline = Pipeline::new("index");
    pipeline
        .from(QUERIES)
        .lookup_index(&index, |_, q| IndexQuery::field(q))
        .map_values(|(q, _): Found<String, String>| q)
        .to(ANSWERS);
    let error = pipeline.app().err().expect("refused");
    assert!(
        error.to_string().contains("not built by this pipeline"),
        "{error}"
    );
}
