//! Failover between instances of a remote app and the copies of task state
//! they keep (`--standbys`), against `strata serve` as real processes.
//!
//! The app is `examples/latest.rs`: per key of `changes`, its last value in
//! the store `latest`; an empty value deletes the key, so the changelog
//! holds tombstones, which the cleaner drops `delete.retention.ms` after
//! cleaning them once.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use support::ServerProcess;
use support::process::{Log, spawn_logged, strata};

/// The session timeout instances ask for: a killed one's tasks move this
/// long after it died.
const SESSION_TIMEOUT_MS: &str = "1500";
/// The changelog of the app's one store.
const CHANGELOG: &str = "latest-latest-changelog";

fn latest() -> PathBuf {
    support::example::example("latest")
}

/// A broker whose cleaner looks for work every 100 ms.
fn broker(dir: &Path) -> ServerProcess {
    support::server_process::start_configured(
        dir,
        "cleaner_check_interval_ms = 100\ngroup_initial_rebalance_delay_ms = 0\n\
         group_min_session_timeout_ms = 500\n",
    )
}

/// Appends `key=value` lines to `changes`.
fn produce(addr: &str, lines: &[String]) {
    support::process::produce_keyed(addr, "changes", lines);
}

fn puts(keys: std::ops::Range<u32>, value: &str) -> Vec<String> {
    keys.map(|k| format!("k{k:04}={value}")).collect()
}

fn deletes(keys: std::ops::Range<u32>) -> Vec<String> {
    keys.map(|k| format!("k{k:04}=")).collect()
}

/// An instance of the app, running, with its log collected.
struct Instance {
    child: Child,
    log: Log,
    location: [String; 4],
}

impl Instance {
    fn start(addr: &str, state: &Path, args: &[&str]) -> Self {
        let location = [
            "--bootstrap".to_string(),
            addr.to_string(),
            "--state-dir".to_string(),
            state.to_str().unwrap().to_string(),
        ];
        let (child, log) = spawn_logged(
            Command::new(latest())
                .env("STRATA_SESSION_TIMEOUT_MS", SESSION_TIMEOUT_MS)
                .args(&location)
                .args(["run", "--commit-ms", "100"])
                .args(args),
        );
        Self {
            child,
            log,
            location,
        }
    }

    fn said(&self, text: &str) -> bool {
        self.log.lock().unwrap().contains(text)
    }

    /// `status`'s rows for this instance's state directory.
    fn status(&self) -> String {
        app(&self.location, &["status"])
    }

    /// Stops it with SIGTERM and waits.
    fn stop(mut self) -> String {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap();
        self.log.lock().unwrap().clone()
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs an app subcommand at `location` to completion; its stdout.
fn app(location: &[String], args: &[&str]) -> String {
    let output = Command::new(latest())
        .args(location)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "latest {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The store's entries (`dump-state`): key → value.
fn entries(location: &[String]) -> BTreeMap<String, String> {
    (app(location, &["dump-state"]).lines())
        .filter_map(|line| {
            let mut columns = line.split('\t');
            let (_store, key, value) = (columns.next()?, columns.next()?, columns.next()?);
            Some((key.trim_matches('"').to_string(), value.to_string()))
        })
        .collect()
}

/// Whether the task processed every input record and shipped every commit.
fn caught_up(instance: &Instance) -> bool {
    let status = instance.status();
    let rows: Vec<Vec<&str>> = (status.lines().skip(1))
        .filter(|l| l.starts_with("latest/"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    !rows.is_empty()
        && rows
            .iter()
            .all(|c| c.len() >= 6 && c[4] == "0" && c[5] == "0")
}

/// The changelog's records as `(key, value)`, a tombstone's value None.
fn changelog(addr: &str) -> Vec<(String, Option<String>)> {
    let consumed = strata(&[
        "consume",
        CHANGELOG,
        "--end",
        "--format",
        "json",
        "--bootstrap",
        addr,
    ]);
    (consumed.lines())
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
            (
                text(&record["key"]).unwrap_or_default(),
                text(&record["value"]),
            )
        })
        .collect()
}

/// A loopback address no one listens on now.
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `GET /metrics` from an instance's `--metrics` address: each sample's
/// line without its value, and the value.
fn metrics(addr: &str) -> BTreeMap<String, f64> {
    let (_, answer) = support::http::get(addr, "/metrics");
    (answer.lines())
        .filter(|l| l.starts_with("strata_"))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

const FAILOVER_PARTITIONS: u32 = 3;
const FAILOVER_KEYS: u32 = 3_000;

/// Three instances keeping one standby copy of each task: once the copies
/// are caught up, the owner of a task is killed, and each of its tasks
/// goes to the instance keeping its copy, whose restore reads (close to)
/// nothing of the changelog.
#[test]
fn a_killed_instances_task_goes_to_the_holder_of_its_warm_copy() {
    let (failover, restored) = failover(1);
    eprintln!(
        "failover to the warm copies: every task running {} ms after the kill, {restored} changelog records restored",
        failover.as_millis()
    );
    assert!(
        restored < f64::from(FAILOVER_KEYS / FAILOVER_PARTITIONS) / 10.0,
        "{restored} records restored, though warm copies were kept"
    );
}

/// The same without standbys: the new owner restores the task's whole
/// changelog (the figure the warm copy saves).
#[test]
fn without_a_copy_a_killed_instances_task_restores_its_whole_changelog() {
    let (failover, restored) = failover(0);
    eprintln!(
        "failover without copies: every task running {} ms after the kill, {restored} changelog records restored",
        failover.as_millis()
    );
    assert!(
        restored >= f64::from(FAILOVER_KEYS / FAILOVER_PARTITIONS) / 2.0,
        "{restored} records restored"
    );
}

/// Three instances with `standbys` copies of each task, all caught up;
/// one that runs a task killed. How long until the survivors run every task
/// caught up, and how many changelog records they restored meanwhile. With
/// copies, each moved task must have gone to the holder of its copy.
fn failover(standbys: usize) -> (Duration, f64) {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let addr = broker.addr.clone();
    let partitions = FAILOVER_PARTITIONS.to_string();
    strata(&[
        "topics",
        "create",
        "changes",
        "--partitions",
        &partitions,
        "--bootstrap",
        &addr,
    ]);
    produce(&addr, &puts(0..FAILOVER_KEYS, "first"));
    let copies = standbys.to_string();
    let mut instances: Vec<(Instance, String)> = ["a", "b", "c"]
        .iter()
        .map(|name| {
            let metrics = free_address();
            let args = ["--standbys", &copies, "--metrics", &metrics];
            (
                Instance::start(&addr, &dir.path().join(name), &args),
                metrics,
            )
        })
        .collect();
    let tasks = FAILOVER_PARTITIONS as usize;
    let lines = |instance: &Instance, ending: &str| -> Vec<String> {
        (instance.status().lines())
            .filter(|l| l.ends_with(ending))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    let runs = |instance: &Instance| lines(instance, "running");
    let keeps = |instance: &Instance| lines(instance, "standby, 0 behind");
    support::wait_until(
        "every task runs, every copy caught up",
        Duration::from_secs(120),
        || {
            let running: usize = instances.iter().map(|(i, _)| runs(i).len()).sum();
            let kept: usize = instances.iter().map(|(i, _)| keeps(i).len()).sum();
            running == tasks
                && kept == tasks * standbys
                && instances.iter().all(|(i, _)| caught_up(i))
        },
    );
    // The victim runs a task (the group may leave one instance with only
    // copies); the others keep its tasks' copies.
    let at = (instances.iter()).position(|(i, _)| !runs(i).is_empty());
    let (victim, _) = instances.remove(at.unwrap_or(0));
    let moved = runs(&victim);
    assert!(!moved.is_empty(), "a runs a task");
    let holders: BTreeMap<String, usize> = (moved.iter())
        .filter_map(|task| {
            let at = (instances.iter()).position(|(i, _)| keeps(i).contains(task))?;
            Some((task.clone(), at))
        })
        .collect();
    let restored_before: Vec<f64> = (instances.iter())
        .map(|(_, m)| metrics(m)["strata_restored_records_total"])
        .collect();
    let killed = std::time::Instant::now();
    victim.kill();
    support::wait_until(
        "the survivors run every task",
        Duration::from_secs(120),
        || {
            let running: usize = instances.iter().map(|(i, _)| runs(i).len()).sum();
            running == tasks && instances.iter().all(|(i, _)| caught_up(i))
        },
    );
    let failover = killed.elapsed();
    for (task, holder) in &holders {
        assert!(
            runs(&instances[*holder].0).contains(task),
            "{task} did not go to the holder of its copy"
        );
    }
    let restored = (instances.iter().zip(&restored_before))
        .map(|((_, m), before)| metrics(m)["strata_restored_records_total"] - before)
        .sum();
    for (instance, _) in instances {
        instance.kill();
    }
    (failover, restored)
}

/// A standby copy that stopped reading, then missed deletes whose
/// tombstones the cleaner dropped (`delete.retention.ms=0`), is not
/// trusted when it starts again: it restores from scratch, and once it
/// takes the task over the deleted keys are gone from its state.
#[test]
fn a_copy_that_missed_cleaned_tombstones_restores_from_scratch_and_keeps_no_deleted_key() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let addr = broker.addr.clone();
    let bootstrap = ["--bootstrap", addr.as_str()];
    strata(
        &[
            &["topics", "create", "changes", "--partitions", "1"][..],
            &bootstrap,
        ]
        .concat(),
    );
    // Small segments, so the records after the deletes close the
    // tombstones' segments and the cleaner gets to them at once.
    let configs = [
        "cleanup.policy=compact",
        "delete.retention.ms=0",
        "segment.bytes=4096",
        "min.cleanable.dirty.ratio=0.01",
    ];
    let mut create = vec!["topics", "create", CHANGELOG, "--partitions", "1"];
    for config in &configs {
        create.extend(["--config", config]);
    }
    strata(&[&create[..], &bootstrap].concat());
    produce(&addr, &puts(0..300, "first"));

    let standbys = ["--standbys", "1"];
    let (state_a, state_b) = (dir.path().join("a"), dir.path().join("b"));
    let a = Instance::start(&addr, &state_a, &standbys);
    support::wait_until("a runs the task", Duration::from_secs(60), || caught_up(&a));
    let b = Instance::start(&addr, &state_b, &standbys);
    support::wait_until("b's copy is caught up", Duration::from_secs(60), || {
        b.said("keeping a standby copy") && b.status().contains("standby, 0 behind")
    });
    b.stop();

    // While b is away: half the keys deleted, and enough after them that
    // the cleaner drops the deleted values, then the tombstones.
    produce(&addr, &deletes(0..150));
    produce(&addr, &puts(300..1_500, "second"));
    support::wait_until("a processes it all", Duration::from_secs(60), || {
        caught_up(&a)
    });
    // A tombstone goes at the clean after the one that first saw it: more
    // writes make the partition dirty again.
    support::wait_until(
        "the tombstones are cleaned away",
        Duration::from_secs(60),
        || {
            produce(&addr, &puts(300..400, "again"));
            changelog(&addr).iter().all(|(key, value)| {
                let number: u32 = key.trim_start_matches('k').parse().unwrap_or(u32::MAX);
                value.is_some() && number >= 150
            })
        },
    );
    support::wait_until("a processes that too", Duration::from_secs(60), || {
        caught_up(&a)
    });

    let b = Instance::start(&addr, &state_b, &standbys);
    support::wait_until(
        "b's copy is caught up again",
        Duration::from_secs(60),
        || b.status().contains("standby, 0 behind"),
    );
    assert!(
        b.said("restoring from scratch"),
        "b trusted its stale copy:\n{}",
        b.log.lock().unwrap()
    );
    a.kill();
    support::wait_until("b takes the task over", Duration::from_secs(60), || {
        b.said("restored latest") && caught_up(&b)
    });
    let location = b.location.clone();
    b.stop();
    let held = entries(&location);
    let deleted: Vec<&String> = (held.keys())
        .filter(|k| k.trim_start_matches('k').parse::<u32>().unwrap() < 150)
        .collect();
    assert!(deleted.is_empty(), "deleted keys came back: {deleted:?}");
    assert_eq!(held.len(), 1_350, "every key put and not deleted");
}
