//! The enrich example (a stream–table join written with
//! `strata-operators`) as a real process on an embedded log: profiles
//! loaded first, then page views enriched with them; a deleted profile
//! (a tombstone) and a user without one give views without a name.

use crate::support;

use std::path::Path;
use std::process::Command;

use strata::log::now_ms;

const PARTITIONS: i32 = 3;

/// Appends keyed records (a `None` value is a tombstone) to `topic`.
fn append(data: &Path, topic: &str, records: &[(&str, Option<&str>)]) {
    let now = now_ms();
    let records: Vec<_> = records.iter().map(|(k, v)| (*k, *v, now)).collect();
    support::append_keyed(data, topic, PARTITIONS, &records);
}

fn run_until_end(data: &Path) {
    let output = Command::new(support::example::example("enrich"))
        .args(["--data-dir", data.to_str().unwrap(), "run", "--until-end"])
        .output()
        .expect("enrich runs");
    assert!(
        output.status.success(),
        "enrich failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn page_views_are_enriched_with_the_latest_profile_of_their_user() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let ada = r#"{"name":"Ada","country":"UK"}"#;
    let grace = r#"{"name":"Grace","country":"US"}"#;
    let bob = r#"{"name":"Bob","country":"FR"}"#;
    append(
        &data,
        "profiles",
        &[("u1", Some(ada)), ("u2", Some(grace)), ("u3", Some(bob))],
    );
    append(&data, "profiles", &[("u3", None)]);
    append(&data, "page-views", &[]);
    run_until_end(&data);
    append(
        &data,
        "page-views",
        &[
            ("u1", Some("/home")),
            ("u2", Some("/pricing")),
            ("u3", Some("/a")),
            ("u4", Some("/b")),
        ],
    );
    run_until_end(&data);

    let got = support::read_text_sorted(&data, "enriched-views");
    let view = |page: &str, name: &str, country: &str| {
        format!(r#"{{"page":"{page}","name":{name},"country":{country}}}"#)
    };
    assert_eq!(
        got,
        [
            ("u1".into(), view("/home", r#""Ada""#, r#""UK""#)),
            ("u2".into(), view("/pricing", r#""Grace""#, r#""US""#)),
            ("u3".into(), view("/a", "null", "null")),
            ("u4".into(), view("/b", "null", "null")),
        ]
    );

    // The latest view of a user, asked of the app's store.
    let query = Command::new(support::example::example("enrich"))
        .args([
            "--data-dir",
            data.to_str().unwrap(),
            "query",
            "latest-views",
            "u1",
        ])
        .output()
        .expect("enrich query runs");
    assert!(
        query.status.success(),
        "{}",
        String::from_utf8_lossy(&query.stderr)
    );
    assert_eq!(
        String::from_utf8(query.stdout).unwrap(),
        format!(
            "u1\t{}\n",
            r#"{"country":"UK","name":"Ada","page":"/home"}"#
        )
    );
}
