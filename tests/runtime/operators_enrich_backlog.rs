//! The enrich example (a stream–table join) over a backlog: profiles with
//! several versions per user and page views interleaved with them in
//! time, both topics written whole before the first run, in batches of
//! several records. Each view must meet the profile current at its
//! timestamp (the latest profile stamped at or before it; none before the
//! user's first), whatever was fetched first: embedded, remote (through
//! `strata serve`, in transactions), after a `rebuild` (the same state) and
//! in a `replay` (the same topic; `diff` finds nothing).

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use strata::log::{LogConfig, LogManager, now_ms};
use support::{Rng, ServerProcess};

const PARTITIONS: i32 = 3;
const USERS: u64 = 30;
const VERSIONS: u64 = 4;
const VIEWS: u64 = 900;
const SPAN_MS: u64 = 3_600_000;

/// One page view: who, which page (unique), when.
struct View {
    user: String,
    page: String,
    at: i64,
}

/// Per user, the profile versions' (time, name), by time.
type Profiles = BTreeMap<String, Vec<(i64, String)>>;

struct Backlog {
    profiles: Profiles,
    views: Vec<View>,
}

impl Backlog {
    /// Profile versions and views at random times of the last hours (some
    /// views before their user's first profile, some at the very
    /// millisecond a profile changes), in time order.
    fn new(rng: &mut Rng) -> Self {
        let start = now_ms() - 2 * SPAN_MS as i64;
        let mut profiles = Profiles::new();
        for u in 0..USERS {
            let mut versions: Vec<i64> = (0..VERSIONS)
                .map(|_| start + rng.below(SPAN_MS) as i64)
                .collect();
            versions.sort_unstable();
            versions.dedup();
            let named = (versions.into_iter().enumerate())
                .map(|(v, at)| (at, format!("u{u}-v{v}")))
                .collect();
            profiles.insert(format!("u{u}"), named);
        }
        let mut views: Vec<View> = (0..VIEWS)
            .map(|n| {
                let user = format!("u{}", rng.below(USERS));
                let at = if n % 10 == 0 {
                    // At a profile change of the user: the change comes first.
                    let versions = &profiles[&user];
                    versions[rng.below(versions.len() as u64) as usize].0
                } else {
                    start + rng.below(SPAN_MS) as i64
                };
                let page = format!("/p{n}");
                View { user, page, at }
            })
            .collect();
        views.sort_by_key(|v| v.at);
        Self { profiles, views }
    }

    /// The name of the profile current at `view`'s time, if any.
    fn expected_name(&self, view: &View) -> Option<&str> {
        (self.profiles[&view.user].iter())
            .rev()
            .find(|(at, _)| *at <= view.at)
            .map(|(_, name)| name.as_str())
    }

    /// Writes both topics into the log at `data`, in batches of up to 16
    /// records, some compressed, as a producer keyed by user places them.
    fn write(&self, data: &Path, rng: &mut Rng) {
        let mut profiles: Vec<(String, String, i64)> = (self.profiles.iter())
            .flat_map(|(user, versions)| {
                versions.iter().map(move |(at, name)| {
                    let value = format!(r#"{{"name":"{name}","country":"UK"}}"#);
                    (user.clone(), value, *at)
                })
            })
            .collect();
        profiles.sort_by_key(|p| p.2);
        let views: Vec<(String, String, i64)> = (self.views.iter())
            .map(|v| (v.user.clone(), v.page.clone(), v.at))
            .collect();
        support::append_keyed_batches(data, "profiles", PARTITIONS, &profiles, 16, rng);
        support::append_keyed_batches(data, "page-views", PARTITIONS, &views, 16, rng);
    }
}

fn enrich(location: &[&str], args: &[&str]) -> Output {
    let output = Command::new(support::example::example("enrich"))
        .args(location)
        .args(args)
        .output()
        .expect("enrich runs");
    assert!(
        output.status.success(),
        "enrich {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `topic`'s records as a read_committed consumer sees them: page → name
/// (none for a view that met no profile).
fn enriched(data: &Path, topic: &str) -> BTreeMap<String, Option<String>> {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let mut pages = BTreeMap::new();
    for p in 0..PARTITIONS {
        for record in support::read_committed(&log.partition(topic, p).unwrap(), 0) {
            let value: serde_json::Value = serde_json::from_slice(&record.value.unwrap()).unwrap();
            let page = value["page"].as_str().unwrap().to_string();
            let name = value["name"].as_str().map(str::to_string);
            assert!(pages.insert(page, name).is_none(), "a view enriched twice");
        }
    }
    log.close().unwrap();
    pages
}

/// Checks every view met the profile current at its time.
fn assert_time_correct(backlog: &Backlog, got: &BTreeMap<String, Option<String>>, run: &str) {
    assert_eq!(got.len(), backlog.views.len(), "{run}: every view once");
    let wrong: Vec<String> = (backlog.views.iter())
        .filter(|v| got[&v.page].as_deref() != backlog.expected_name(v))
        .map(|v| {
            let expected = backlog.expected_name(v);
            format!(
                "{} of {} at {}: {:?}, not {expected:?}",
                v.page, v.user, v.at, got[&v.page]
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{run}: {} of {} views met another profile, e.g. {:?}",
        wrong.len(),
        got.len(),
        &wrong[..wrong.len().min(5)]
    );
}

fn dump_state(location: &[&str]) -> String {
    String::from_utf8(enrich(location, &["dump-state"]).stdout).unwrap()
}

#[test]
fn embedded_live_rebuilt_and_replayed_views_meet_the_profile_of_their_time() {
    let mut rng = Rng(support::rng::seed());
    let backlog = Backlog::new(&mut rng);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    backlog.write(data, &mut rng);
    let location = ["--data-dir", data.to_str().unwrap()];

    enrich(&location, &["run", "--until-end", "--fetch-bytes", "1024"]);
    assert_time_correct(&backlog, &enriched(data, "enriched-views"), "run");

    let state = dump_state(&location);
    assert!(state.contains("latest-views"), "{state}");
    enrich(&location, &["rebuild"]);
    assert_eq!(dump_state(&location), state, "the rebuilt state");

    enrich(&location, &["replay", "--version", "v2", "--until-end"]);
    assert_time_correct(&backlog, &enriched(data, "enriched-views.v2"), "replay");
    enrich(&location, &["diff", "live", "v2"]);
}

#[test]
fn remote_views_meet_the_profile_of_their_time() {
    let mut rng = Rng(support::rng::seed());
    let backlog = Backlog::new(&mut rng);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    backlog.write(&data, &mut rng);
    let state = dir.path().join("state");
    let server = ServerProcess::start(env!("CARGO_BIN_EXE_strata"), &data);
    let location = [
        "--bootstrap",
        server.addr.as_str(),
        "--state-dir",
        state.to_str().unwrap(),
    ];
    enrich(&location, &["run", "--until-end", "--fetch-bytes", "4096"]);
    enrich(&location, &["replay", "--version", "v2", "--until-end"]);
    drop(server);
    assert_time_correct(&backlog, &enriched(&data, "enriched-views"), "remote run");
    let replayed = enriched(&data, "enriched-views.v2");
    assert_time_correct(&backlog, &replayed, "remote replay");
}
