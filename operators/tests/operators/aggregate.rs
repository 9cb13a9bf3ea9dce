//! Keyed aggregations through the real runtime: records re-keyed from
//! three partitions go through the internal repartition topic to the task
//! that keeps their key; per key, `count` emits 1, 2, …, N in order, and
//! `reduce` and `aggregate` end at the model's values, across a stop and
//! a restart.

use crate::support;

use std::collections::BTreeMap;

use proptest::prelude::*;
use strata_operators::{Pipeline, Topic};
use support::Rec;

const VISITS: Topic<String, String> = Topic::new("visits");
const PAGE_COUNTS: Topic<String, String> = Topic::new("page-counts");
const LONGEST: Topic<String, String> = Topic::new("longest-user");
const TOTAL: Topic<String, String> = Topic::new("total-length");

/// Visits are keyed by user, valued by page; the aggregations are per page.
fn pipeline() -> Pipeline {
    let pipeline = Pipeline::new("pages");
    let by_page = pipeline
        .from(VISITS)
        .map(|user: String, page: String| (page, user));
    by_page
        .stored_as("page-counts")
        .count()
        .map_values(|n| n.to_string())
        .to(PAGE_COUNTS);
    by_page
        .reduce(|a: String, b: &String| if b.len() > a.len() { b.clone() } else { a })
        .to(LONGEST);
    by_page
        .aggregate(|| 0u64, |sum, _page, user: &String| sum + user.len() as u64)
        .map_values(|n| n.to_string())
        .to(TOTAL);
    pipeline
}

fn visits() -> impl Strategy<Value = Vec<Vec<(usize, usize)>>> {
    let partition = proptest::collection::vec((0usize..6, 0usize..5), 0..80);
    proptest::collection::vec(partition, 3)
}

const USERS: [&str; 6] = ["al", "bea", "cy", "dmitri", "eve", "flo"];
const PAGES: [&str; 5] = ["/", "/a", "/b", "/a/b", "/c"];

/// The latest value per key, and the values per key in order.
fn per_key(records: &[Rec]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in records {
        out.entry(r.key_text()).or_default().push(r.value_text());
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn keyed_aggregations_match_the_model(input in visits(), split in any::<prop::sample::Index>()) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let app = pipeline().app().unwrap();
        let base = support::base_ms();
        let records: Vec<Vec<Rec>> = input
            .iter()
            .map(|p| p.iter().map(|&(u, g)| Rec::text(USERS[u], PAGES[g], base)).collect())
            .collect();
        let at = split.index(81);
        for (p, rs) in records.iter().enumerate() {
            support::append(data, "visits", 3, p as i32, &rs[..at.min(rs.len())]);
        }
        support::run(&app, data);
        for (p, rs) in records.iter().enumerate() {
            support::append(data, "visits", 3, p as i32, &rs[at.min(rs.len())..]);
        }
        support::run(&app, data);

        let mut count: BTreeMap<String, u64> = BTreeMap::new();
        let mut longest: BTreeMap<String, usize> = BTreeMap::new();
        let mut total: BTreeMap<String, u64> = BTreeMap::new();
        for r in records.iter().flatten() {
            let (user, page) = (r.key_text(), r.value_text());
            *count.entry(page.clone()).or_default() += 1;
            let l = longest.entry(page.clone()).or_default();
            *l = (*l).max(user.len());
            *total.entry(page).or_default() += user.len() as u64;
        }

        let counts = per_key(&support::read_sorted(data, "page-counts"));
        prop_assert_eq!(counts.keys().collect::<Vec<_>>(), count.keys().collect::<Vec<_>>());
        // Each page's counts, in the order written: 1, 2, …, N.
        for partition in support::read(data, "page-counts") {
            for (page, values) in per_key(&partition) {
                let expected: Vec<String> = (1..=count[&page]).map(|n| n.to_string()).collect();
                prop_assert_eq!(values, expected, "page {}", page);
            }
        }
        for partition in support::read(data, "longest-user") {
            for (page, values) in per_key(&partition) {
                prop_assert_eq!(values.len() as u64, count[&page]);
                prop_assert_eq!(values.last().unwrap().len(), longest[&page]);
            }
        }
        for partition in support::read(data, "total-length") {
            for (page, values) in per_key(&partition) {
                prop_assert_eq!(values.last().unwrap(), &total[&page].to_string());
            }
        }
    }
}

#[test]
fn a_re_keyed_aggregation_reads_an_internal_repartition_topic() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let base = support::base_ms();
    support::append(data, "visits", 3, 0, &[Rec::text("al", "/a", base)]);
    support::append(data, "visits", 3, 2, &[Rec::text("bea", "/a", base)]);
    support::run(&pipeline().app().unwrap(), data);
    let topic = support::read(data, "pages-count-1-repartition");
    assert_eq!(
        topic.len(),
        3,
        "the internal topic has the input's partitions"
    );
    let all: Vec<Rec> = topic.into_iter().flatten().collect();
    assert_eq!(all.len(), 2);
    assert_eq!(
        support::read_sorted(data, "page-counts"),
        [Rec::text("/a", "1", base), Rec::text("/a", "2", base)]
    );
}

#[test]
fn two_stores_of_one_name_are_refused() {
    let pipeline = Pipeline::new("twice");
    let visits = pipeline.from(VISITS);
    visits
        .clone()
        .stored_as("n")
        .count()
        .map_values(|n| n.to_string())
        .to(PAGE_COUNTS);
    visits
        .stored_as("n")
        .count()
        .map_values(|n| n.to_string())
        .to(TOTAL);
    let error = pipeline.app().err().expect("refused");
    assert!(
        error.to_string().contains("two stores named \"n\""),
        "{error}"
    );
}
