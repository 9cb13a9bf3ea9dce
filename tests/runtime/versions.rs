//! Versions, checkpoints and rebuilds, in embedded mode through the same
//! subcommands an app binary gets (`App::execute`):
//!
//! - replay a fixed processor into a version of its own, `diff` it with the
//!   live one (exactly the keys the bug touched), `promote` it, roll back;
//!   a replay of the same code is no different; promote refuses while the
//!   live version runs;
//! - a checkpoint at offset N read back with `dump-state --at N` equals the
//!   state the run had at N, also after the run went on; one asked for
//!   while the app runs;
//! - a rebuild refuses when retention deleted the input's start, and
//!   starts from a checkpoint when asked;
//! - `status` warns about a task that will not catch up before retention
//!   deletes its unread input, and not about one that will;
//! - a rebuild under load (the live app serving the log and processing
//!   records produced through its Kafka port all along) is swapped in by
//!   the running app and ends with the state of a from-scratch run.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use strata::client::partitioner::partition_for_key;
use strata::log::{LogConfig, LogManager, now_ms};
use strata::record::Compression;
use strata::runtime::{
    App, CheckpointArgs, Command, CommitArgs, Context, GroupArgs, Location, LocationArgs, Outcome,
    Output, ProcessError, Processor, RebuildOptions, Record, RunOptions, Store, Versions,
};

const EVENTS: &str = "events";
const COUNTS: &str = "session-counts";
const PARTITIONS: i32 = 2;

const SEEN: Store<String, u8> = Store::new("seen");
const LAST: Store<String, String> = Store::new("last");
const SESSIONS: Store<String, u64> = Store::new("sessions");

/// Counts each user's sessions. Events are keyed by user, the value is
/// the session id. Version 1 has the bug: a session counts again whenever
/// it differs from the user's previous event's (a late event of an earlier
/// session counts that session twice). Both versions keep the same stores.
struct Sessions {
    fixed: bool,
    output: Output<String, String>,
}

impl Processor<String, String> for Sessions {
    fn process(
        &mut self,
        record: Record<String, String>,
        ctx: &mut Context,
    ) -> Result<(), ProcessError> {
        let (user, session) = (&record.key, &record.value);
        let seen_key = format!("{user}/{session}");
        let seen = ctx.get(SEEN, &seen_key)?.is_some();
        let last = ctx.get(LAST, user)?;
        let new_session = if self.fixed {
            !seen
        } else {
            last.as_deref() != Some(session.as_str())
        };
        ctx.put(SEEN, &seen_key, &1)?;
        ctx.put(LAST, user, session)?;
        if new_session {
            let count = ctx.get(SESSIONS, user)?.unwrap_or(0) + 1;
            ctx.put(SESSIONS, user, &count)?;
            ctx.emit(self.output, user, &count.to_string())?;
        }
        Ok(())
    }
}

/// Longest a test waits for an app to get somewhere.
const WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(60);

fn app(fixed: bool) -> App {
    app_named("sessions", fixed, COUNTS)
}

fn app_named(name: &str, fixed: bool, output: &str) -> App {
    let output = Output::named(output);
    App::new(name)
        .processor("count", move || Sessions { fixed, output })
        .input(EVENTS)
        .store(SEEN)
        .store(LAST)
        .store(SESSIONS)
        .output(output)
}

/// Appends (user, session) events, each to its user's partition.
fn append(data: &Path, events: &[(String, String)]) {
    append_to(data, PARTITIONS, events);
}

/// Appends to `events`, created with `partitions` partitions if missing.
fn append_to(data: &Path, partitions: i32, events: &[(String, String)]) {
    support::with_topic(data, EVENTS, partitions, &[], |topic| {
        let partitions = topic.partitions.len() as i32;
        for (partition, log) in (0..partitions).zip(&topic.partitions) {
            let records: Vec<_> = events
                .iter()
                .filter(|(user, _)| partition_for_key(user.as_bytes(), partitions) == partition)
                .map(|(user, session)| (Some(user.as_bytes()), session.as_bytes(), now_ms()))
                .collect();
            if !records.is_empty() {
                log.append(&support::batch_with(Compression::None, records))
                    .unwrap();
            }
        }
    });
}

/// Events of 40 users, 3 sessions each in order; users divisible by 7
/// also get a late event of their first session after the others.
fn events(round: u32) -> (Vec<(String, String)>, BTreeSet<String>) {
    let mut events = Vec::new();
    let mut late = BTreeSet::new();
    for session in 0..3 {
        for user in 0..40 {
            let user = format!("user-{user:02}");
            events.push((user.clone(), format!("r{round}-s{session}")));
            events.push((user, format!("r{round}-s{session}")));
        }
    }
    for user in (0..40).filter(|u| u % 7 == 0) {
        let user = format!("user-{user:02}");
        events.push((user.clone(), format!("r{round}-s0")));
        late.insert(user);
    }
    (events, late)
}

fn location_args(data: &Path) -> LocationArgs {
    LocationArgs {
        data_dir: Some(data.to_path_buf()),
        ..LocationArgs::default()
    }
}

fn no_checkpoints() -> CheckpointArgs {
    CheckpointArgs::default()
}

fn run_until_end() -> Command {
    Command::Run {
        until_end: true,
        serve: None,
        metrics: None,
        query: None,
        console: None,
        http: Default::default(),
        commit: CommitArgs::default(),
        checkpoints: no_checkpoints(),
        group: GroupArgs::default(),
    }
}

fn replay(version: &str) -> Command {
    Command::Replay {
        metrics: None,
        console: None,
        version: version.to_string(),
        from: "earliest".to_string(),
        until_end: true,
        http: Default::default(),
        commit: CommitArgs::default(),
        checkpoints: no_checkpoints(),
        group: GroupArgs::default(),
    }
}

fn execute(app: &App, data: &Path, command: Command) -> Result<Outcome, String> {
    strata::runtime::cli::execute(app, &location_args(data), &command).map_err(|e| e.to_string())
}

fn dump(app: &App, data: &Path, version: &str) -> Vec<String> {
    let location = Location::embedded(data, app.name());
    let versions = Versions::load(location.state_dir()).unwrap();
    let (app, location) = app.as_version(&location, &versions.get(version).unwrap());
    strata::runtime::ops::dump_state(&app, &location, None).unwrap()
}

fn sessions_of(dump: &[String]) -> BTreeMap<String, String> {
    dump.iter()
        .filter_map(|line| line.strip_prefix("sessions\t"))
        .map(|rest| {
            let (user, count) = rest.split_once('\t').unwrap();
            (user.to_string(), count.to_string())
        })
        .collect()
}

fn diff(data: &Path, a: &str, b: &str) -> strata::runtime::DiffReport {
    let location = Location::embedded(data, "sessions");
    let versions = Versions::load(location.state_dir()).unwrap();
    let (a, b) = (versions.get(a).unwrap(), versions.get(b).unwrap());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(strata::runtime::ops::diff(
            &app(false),
            &location,
            &a,
            &b,
            100,
        ))
        .unwrap()
}

#[test]
fn replay_diff_promote_and_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let (first, late) = events(1);
    append(data, &first);
    let (buggy, fixed) = (app(false), app(true));
    execute(&buggy, data, run_until_end()).unwrap();
    let base_dump = dump(&buggy, data, "live");
    let base_sessions = sessions_of(&base_dump);
    assert_eq!(base_sessions.len(), 40);
    assert_eq!(
        base_sessions["user-07"], "4",
        "the bug counts the late session"
    );

    // The same code replayed is the same.
    execute(&buggy, data, replay("again")).unwrap();
    assert_eq!(
        execute(
            &buggy,
            data,
            Command::Diff {
                a: "live".into(),
                b: "again".into(),
                examples: 5
            }
        ),
        Ok(Outcome::Done)
    );
    assert!(!diff(data, "live", "again").differs());

    // The fix, replayed beside the live version, which stays as it was.
    execute(&fixed, data, replay("fix")).unwrap();
    assert_eq!(dump(&buggy, data, "live"), base_dump);
    let report = diff(data, "live", "fix");
    assert!(report.differs());
    let sessions = report
        .stores
        .iter()
        .find(|s| s.store == "sessions")
        .unwrap();
    assert_eq!(
        (sessions.only_a, sessions.only_b, sessions.different),
        (0, 0, late.len() as u64),
        "exactly the users with a late event: {:?}",
        sessions.examples
    );
    for user in &late {
        assert!(
            sessions.examples.iter().any(|e| e.contains(user.as_str())),
            "{user} in {:?}",
            sessions.examples
        );
    }
    for store in report.stores.iter().filter(|s| s.store != "sessions") {
        assert!(!store.differs(), "{store:?}");
    }
    let topic = &report.topics[0];
    assert_eq!(
        (topic.log_topic_a.as_str(), topic.log_topic_b.as_str()),
        (COUNTS, "session-counts.fix")
    );
    let differing: u64 = topic.partitions.iter().map(|p| p.differing).sum();
    assert_eq!(differing, late.len() as u64, "one extra count each");
    let only: (u64, u64) = topic
        .partitions
        .iter()
        .fold((0, 0), |(a, b), p| (a + p.only_a, b + p.only_b));
    assert_eq!(only, (late.len() as u64, 0));
    assert!(
        topic
            .partitions
            .iter()
            .any(|p| p.first_difference.is_some())
    );
    assert_eq!(
        execute(
            &fixed,
            data,
            Command::Diff {
                a: "live".into(),
                b: "fix".into(),
                examples: 5
            }
        ),
        Ok(Outcome::Differs)
    );

    // Promote refuses while the live version runs.
    let location = Location::embedded(data, "sessions");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let (buggy, location) = (buggy.clone(), location.clone());
        runtime.spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            strata::runtime::ops::run_until(&buggy, &location, RunOptions::default(), stopped).await
        })
    };
    wait_running(data);
    let refused = execute(
        &fixed,
        data,
        Command::Promote {
            version: "fix".into(),
        },
    )
    .unwrap_err();
    assert!(refused.contains("is running"), "{refused}");
    stop.send(()).unwrap();
    runtime.block_on(running).unwrap().unwrap();

    // Promoted: `run` goes on with the fix's state and topics.
    execute(
        &fixed,
        data,
        Command::Promote {
            version: "fix".into(),
        },
    )
    .unwrap();
    let (second, _) = events(2);
    append(data, &second);
    execute(&fixed, data, run_until_end()).unwrap();
    let live = sessions_of(&dump(&fixed, data, "live"));
    assert_eq!(live, sessions_of(&dump(&fixed, data, "fix")));
    assert!(live.values().all(|count| count == "6"), "{live:?}");
    assert_eq!(dump(&buggy, data, "base"), base_dump, "base kept as it was");

    // Rolled back: base is live again and catches up with the new events.
    execute(
        &buggy,
        data,
        Command::Promote {
            version: "base".into(),
        },
    )
    .unwrap();
    execute(&buggy, data, run_until_end()).unwrap();
    let rolled_back = sessions_of(&dump(&buggy, data, "live"));
    assert_eq!(rolled_back["user-07"], "8");
    assert_eq!(rolled_back["user-01"], "6");
    assert!(
        execute(
            &buggy,
            data,
            Command::Promote {
                version: "nope".into()
            }
        )
        .unwrap_err()
        .contains("no version")
    );
}

/// The checkpoints of task count/0 (the checkpoint tests use one partition).
fn checkpoint_dirs(data: &Path) -> Vec<PathBuf> {
    let dir = data.join("apps/sessions/checkpoints/count/0");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    found.retain(|p| {
        p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .parse::<i64>()
            .is_ok()
    });
    found.sort();
    found
}

/// Waits until an app runs on `data` (it holds the app's run lock).
fn wait_running(data: &Path) {
    let lock = data.join("apps/sessions/.running");
    support::wait_until("the app to run", WAIT_MAX, || {
        std::fs::File::open(&lock).is_ok_and(|file| {
            nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock).is_err()
        })
    });
}

fn dump_at(data: &Path, at: i64) -> Result<Vec<String>, String> {
    let location = Location::embedded(data, "sessions");
    strata::runtime::ops::dump_state_at(&app(true), &location, None, Some(at))
        .map_err(|e| e.to_string())
}

/// Appends `count` events of a few users to a one-partition `events`, so
/// that an offset is a count of events.
fn append_one_partition(data: &Path, count: usize, round: u32) {
    let events: Vec<(String, String)> = (0..count)
        .map(|i| (format!("user-{}", i % 3), format!("r{round}-s{}", i / 30)))
        .collect();
    append_to(data, 1, &events);
}

#[test]
fn a_checkpoint_at_n_reads_back_as_the_state_at_n() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let fixed = app(true);
    append_one_partition(data, 1000, 1);
    execute(&fixed, data, run_until_end()).unwrap();
    let at_1000 = dump(&fixed, data, "live");
    assert_eq!(
        execute(&fixed, data, Command::Checkpoint { version: None }),
        Ok(Outcome::Done)
    );
    assert_eq!(checkpoint_dirs(data).len(), 1);

    append_one_partition(data, 500, 2);
    execute(&fixed, data, run_until_end()).unwrap();
    assert_ne!(dump(&fixed, data, "live"), at_1000);
    assert_eq!(dump_at(data, 1000).unwrap(), at_1000);
    assert_eq!(dump_at(data, 1499).unwrap(), at_1000, "nearest below");
    let none = dump_at(data, 999).unwrap_err();
    assert!(
        none.contains("no checkpoint at or below offset 999"),
        "{none}"
    );

    // The same state as a run stopped at 1000: a fresh app over a copy of
    // the first 1000 events.
    let other = tempfile::tempdir().unwrap();
    append_one_partition(other.path(), 1000, 1);
    execute(&fixed, other.path(), run_until_end()).unwrap();
    assert_eq!(dump(&fixed, other.path(), "live"), at_1000);

    // Asked for while the app runs: the running task takes it.
    let location = Location::embedded(data, "sessions");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let (fixed, location) = (fixed.clone(), location.clone());
        runtime.spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            strata::runtime::ops::run_until(&fixed, &location, RunOptions::default(), stopped).await
        })
    };
    wait_running(data);
    assert_eq!(
        execute(&fixed, data, Command::Checkpoint { version: None }),
        Ok(Outcome::Done)
    );
    stop.send(()).unwrap();
    runtime.block_on(running).unwrap().unwrap();
    let names: Vec<String> = checkpoint_dirs(data)
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&format!("{:020}", 1500)), "{names:?}");
    assert_eq!(dump_at(data, 1500).unwrap(), dump(&fixed, data, "live"));
}

#[test]
fn automatic_checkpoints_keep_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let fixed = app(true).commit_interval(strata::runtime::CommitInterval {
        records: 100,
        bytes: 1 << 20,
        interval: std::time::Duration::from_secs(60),
    });
    append_one_partition(data, 1000, 1);
    let command = Command::Run {
        until_end: true,
        serve: None,
        metrics: None,
        query: None,
        console: None,
        http: Default::default(),
        commit: CommitArgs::default(),
        checkpoints: CheckpointArgs {
            checkpoint_records: Some(200),
            checkpoint_secs: None,
            checkpoints_kept: Some(2),
        },
        group: GroupArgs::default(),
    };
    execute(&fixed, data, command).unwrap();
    let names: Vec<String> = checkpoint_dirs(data)
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .trim_start_matches('0')
                .to_string()
        })
        .collect();
    assert_eq!(names, ["800", "1000"]);
    assert_eq!(dump_at(data, 1000).unwrap(), dump(&fixed, data, "live"));
}

/// Appends `batches` batches of 10 events two hours old to partition 0 of
/// `events` (made with 1 KiB segments if missing).
fn append_two_hours_old(data: &Path, batches: usize) {
    let config = [("segment.bytes", "1024")];
    support::with_topic(data, EVENTS, PARTITIONS, &config, |topic| {
        let user = (0..100)
            .map(|u| format!("user-{u:02}"))
            .find(|u| partition_for_key(u.as_bytes(), PARTITIONS) == 0)
            .unwrap();
        let two_hours_ago = now_ms() - 2 * 3_600_000;
        for batch in 0..batches {
            let sessions: Vec<String> = (0..10).map(|i| format!("s{batch}-{i}")).collect();
            let records = sessions
                .iter()
                .map(|s| (Some(user.as_bytes()), s.as_bytes(), two_hours_ago));
            topic.partitions[0]
                .append(&support::batch_with(Compression::None, records))
                .unwrap();
        }
    });
}

/// Gives partition 0 of `events` a one-hour retention and applies it;
/// returns the partition's new log start.
fn expire_after_an_hour(data: &Path) -> i64 {
    let log = LogManager::open(data, LogConfig::default()).unwrap();
    let partition = log.partition(EVENTS, 0).unwrap();
    partition.set_config(LogConfig {
        retention_ms: 3_600_000,
        ..partition.config()
    });
    log.enforce_retention();
    let start = partition.log_start_offset();
    drop(partition);
    log.close().unwrap();
    start
}

#[test]
fn a_rebuild_refuses_a_deleted_start_unless_a_checkpoint_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let fixed = app(true);
    // Small segments of records two hours old; a one-hour retention once
    // the app has processed them deletes all but the newest segment.
    append_two_hours_old(data, 20);
    execute(&fixed, data, run_until_end()).unwrap();
    execute(&fixed, data, Command::Checkpoint { version: None }).unwrap();
    assert!(expire_after_an_hour(data) > 0);
    let rebuild = |from_checkpoint| Command::Rebuild {
        store: None,
        from_checkpoint,
        version: None,
        fetch_bytes: None,
        metrics: None,
        console: None,
        http: Default::default(),
    };
    let refused = execute(&fixed, data, rebuild(false)).unwrap_err();
    assert!(refused.contains("retention deleted"), "{refused}");
    assert!(refused.contains("--from-checkpoint"), "{refused}");
    let before = dump(&fixed, data, "live");
    // Damage the live state after the checkpoint: the rebuild from the
    // checkpoint must replace it.
    {
        let dir = data.join("apps/sessions/count/0");
        let stores = ["seen", "last", "sessions"];
        let mut state = strata::runtime::TaskState::open(&dir, &stores, true).unwrap();
        let offsets = state.input_offsets();
        let offsets: Vec<(&str, i64)> = offsets.iter().map(|(t, o)| (t.as_str(), *o)).collect();
        state.put("sessions", b"zzz-damaged", &[7]).unwrap();
        state.commit(&offsets).unwrap();
    }
    assert_ne!(dump(&fixed, data, "live"), before);
    execute(&fixed, data, rebuild(true)).unwrap();
    assert_eq!(dump(&fixed, data, "live"), before);
}

#[test]
fn a_rebuild_under_load_is_swapped_in_by_the_running_app() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use strata::client::{ClientConfig, Cluster, Producer, ProducerConfig, ProducerRecord};

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    append(&data, &events(1).0);
    // The live state goes wrong first: the buggy build over the first
    // events. The fixed build then runs on, keeping those wrong counts.
    execute(&app(false), &data, run_until_end()).unwrap();
    let wrong = sessions_of(&dump(&app(false), &data, "live"));
    assert_eq!(wrong["user-07"], "4", "counted twice");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let location = Location::embedded(&data, "sessions");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let live = {
        let location = location.clone();
        // Port 0: the system picks one, the app says which.
        let options = RunOptions {
            serve: Some("127.0.0.1:0".parse().unwrap()),
            ..RunOptions::default()
        };
        runtime.spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            strata::runtime::ops::run_until(&app(true), &location, options, stopped).await
        })
    };
    let mut addr = None;
    support::wait_until("the app to serve", WAIT_MAX, || {
        addr = location.serving_addr();
        addr.is_some()
    });
    let addr = addr.unwrap();
    assert_ne!(addr.port(), 0);
    // Load: rounds of events through the Kafka port until told to stop.
    let (producing, rounds) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU64::new(0)));
    let producer = {
        let (producing, rounds) = (Arc::clone(&producing), Arc::clone(&rounds));
        runtime.spawn(async move {
            let cluster = loop {
                match Cluster::connect(ClientConfig::new(&addr.to_string())).await {
                    Ok(cluster) => break cluster,
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
                }
            };
            let producer = Producer::new(cluster, ProducerConfig::default())
                .await
                .unwrap();
            let mut round = 2;
            while producing.load(Ordering::Relaxed) {
                for (user, session) in events(round).0 {
                    let record =
                        ProducerRecord::new(EVENTS, Some(user.as_bytes()), session.as_bytes());
                    let delivered = producer.send(record).await.unwrap();
                    drop(delivered);
                }
                producer.flush().await;
                rounds.fetch_add(1, Ordering::Relaxed);
                round += 1;
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            }
            producer.close().await;
        })
    };
    support::wait_until("3 rounds of load", WAIT_MAX, || {
        rounds.load(Ordering::Relaxed) >= 3
    });
    let remote = Location::remote(&addr.to_string(), location.state_dir());
    let before = rounds.load(Ordering::Relaxed);
    let summary = runtime
        .block_on(strata::runtime::ops::rebuild(
            &app(true),
            &remote,
            RebuildOptions::default(),
        ))
        .unwrap();
    assert!(
        rounds.load(Ordering::Relaxed) > before,
        "no load during the rebuild"
    );
    assert_eq!((summary.tasks, summary.handed_over), (2, 2));
    // More load after the swap, into the rebuilt state.
    let swapped = rounds.load(Ordering::Relaxed);
    support::wait_until("load after the swap", WAIT_MAX, || {
        rounds.load(Ordering::Relaxed) > swapped
    });
    producing.store(false, Ordering::Relaxed);
    runtime.block_on(producer).unwrap();
    // The live app finishes the load, then stops.
    support::wait_until("the live app to finish the load", WAIT_MAX, || {
        let rows = runtime
            .block_on(strata::runtime::ops::status(&app(true), &location))
            .unwrap();
        rows.iter()
            .all(|r| r.lag() == Some(0) && r.outbox_records == 0)
    });
    stop.send(()).unwrap();
    runtime.block_on(live).unwrap().unwrap();
    assert_eq!(location.serving_addr(), None, "stopped, it serves no more");
    let live_dump = dump(&app(true), &data, "live");

    // The fixed build from scratch, as another app over the same input.
    let scratch = app_named("scratch", true, "scratch-counts");
    execute(&scratch, &data, run_until_end()).unwrap();
    let scratch_dump = dump(&scratch, &data, "live");
    assert!(scratch_dump.len() > 200);
    assert!(
        live_dump == scratch_dump,
        "the rebuilt live state differs from a from-scratch run"
    );
    let leftovers = std::fs::read_dir(location.state_dir().join("rebuild/count"))
        .unwrap()
        .count();
    assert_eq!(leftovers, 0);
}

const N: Store<String, u64> = Store::new("n");

/// Counts records, slowly (2 ms each).
fn slow(_record: Record<Vec<u8>, Vec<u8>>, ctx: &mut Context) -> Result<(), ProcessError> {
    std::thread::sleep(std::time::Duration::from_millis(2));
    let count = ctx.get(N, "records")?.unwrap_or(0) + 1;
    ctx.put(N, "records", &count)
}

/// Appends `count` records a minute old to `topic` (made with `config`).
fn append_old(data: &Path, topic: &str, config: &[(&str, &str)], count: usize) {
    support::with_topic(data, topic, 1, config, |topic| {
        let minute_ago = now_ms() - 60_000;
        for chunk in (0..count).collect::<Vec<_>>().chunks(1000) {
            let values = vec!["x"; chunk.len()];
            topic.partitions[0]
                .append(&support::batch(&values, minute_ago))
                .unwrap();
        }
    });
}

#[test]
fn status_warns_when_a_task_will_not_catch_up_before_its_input_expires() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let slow =
        |name: &str, topic: &str| App::new(name).processor("slow", slow).input(topic).store(N);
    // Two minutes of retention for records a minute old: a minute left.
    let short = [("retention.ms", "120000")];
    append_old(data, "short", &short, 300);
    append_old(data, "long", &[], 300);
    let run = Command::Run {
        until_end: true,
        serve: None,
        metrics: None,
        query: None,
        console: None,
        http: Default::default(),
        commit: CommitArgs {
            commit_records: Some(50),
            ..CommitArgs::default()
        },
        checkpoints: no_checkpoints(),
        group: GroupArgs::default(),
    };
    for (app, topic, config) in [
        (slow("short-app", "short"), "short", &short[..]),
        (slow("long-app", "long"), "long", &[][..]),
    ] {
        execute(&app, data, run.clone()).unwrap();
        // 100,000 records behind at about 500/s: over three minutes.
        append_old(data, topic, config, 100_000);
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let status = |app: &App| {
        let location = Location::embedded(data, app.name());
        runtime
            .block_on(strata::runtime::ops::status(app, &location))
            .unwrap()
    };
    let rows = status(&slow("short-app", "short"));
    let row = &rows[0];
    assert_eq!(row.lag(), Some(100_000));
    let rate = row.rate.expect("a rate was recorded");
    assert!(rate > 50.0 && rate < 600.0, "{rate}/s");
    let expires = row.expires_in_ms.unwrap();
    assert!(expires > 30_000 && expires <= 60_000, "{expires} ms");
    let warning = row.warning().expect("a warning");
    assert!(warning.contains("will not catch up"), "{warning}");
    assert!(warning.contains("short/0"), "{warning}");

    let rows = status(&slow("long-app", "long"));
    assert_eq!(rows[0].lag(), Some(100_000));
    assert!(rows[0].expires_in_ms.unwrap() > 6 * 86_400_000);
    assert_eq!(rows[0].warning(), None);
    execute(
        &slow("short-app", "short"),
        data,
        Command::Status {
            version: None,
            keys: false,
        },
    )
    .unwrap();
}

#[test]
fn status_says_when_unread_input_was_deleted_and_a_stale_rebuild_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let fixed = app(true);
    append_two_hours_old(data, 1);
    execute(&fixed, data, run_until_end()).unwrap();

    // A rebuild that died long ago left `.ready` behind: the app pays it no
    // attention and clears it.
    let rebuild = data.join("apps/sessions/rebuild/count");
    std::fs::create_dir_all(rebuild.join("0")).unwrap();
    std::fs::write(rebuild.join("0.ready"), "4000000000").unwrap();
    std::fs::write(rebuild.join("0.hold"), "{}").unwrap();
    append_two_hours_old(data, 2);
    execute(&fixed, data, run_until_end()).unwrap();
    assert!(!rebuild.join("0.ready").exists());
    assert!(!rebuild.join("0.hold").exists());

    // Unread records deleted by retention.
    append_two_hours_old(data, 20);
    expire_after_an_hour(data);
    let location = Location::embedded(data, "sessions");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rows = runtime
        .block_on(strata::runtime::ops::status(&fixed, &location))
        .unwrap();
    let row = rows.iter().find(|r| r.partition == 0).unwrap();
    assert_eq!(row.offset, Some(30));
    assert!(row.start.unwrap() > 30, "{row:?}");
    let warning = row.warning().expect("a warning");
    assert!(
        warning.contains("deleted everything before offset"),
        "{warning}"
    );
}
