//! The `LogManager` as the broker sees it: topics created with partitions
//! and Kafka-named config overrides, listed, described, grown and deleted;
//! all of it, and the data appended, found again after a clean close or an
//! unclean drop; bad requests rejected before anything reaches the disk; one
//! process per data directory.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, ensure};
use strata::log::{LogConfig, LogError, LogManager, PARTITIONS_MAX};
use support::append_values;

fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|&(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn open(dir: &Path) -> LogManager {
    LogManager::open(dir, LogConfig::default()).expect("manager opens")
}

/// Every path under `dir`, relative to it: what "nothing was written" means.
fn tree(dir: &Path) -> BTreeSet<PathBuf> {
    let mut paths = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path.clone());
            }
            paths.insert(path.strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    paths
}

fn values(manager: &LogManager, topic: &str, partition: i32) -> Vec<String> {
    let log = manager.partition(topic, partition).unwrap();
    support::values(&support::read_all(&log, log.log_start_offset()))
}

fn names(manager: &LogManager) -> Vec<String> {
    manager
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}

#[test]
fn created_topics_are_listed_sorted_and_described() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(dir.path());
    let config = overrides(&[("retention.ms", "3600000"), ("segment.bytes", "2048")]);
    let orders = manager.create_topic("orders", 3, config.clone()).unwrap();
    manager.create_topic("audit", 1, BTreeMap::new()).unwrap();
    manager
        .create_topic("billing.v2_x-y", 2, BTreeMap::new())
        .unwrap();

    assert_eq!(names(&manager), ["audit", "billing.v2_x-y", "orders"]);
    let described = manager.topic("orders").unwrap();
    assert_eq!(described.id(), orders.id());
    assert_eq!(described.metadata.partitions, 3);
    assert_eq!(described.metadata.config, config);
    assert_eq!(described.config.retention_ms, 3_600_000);
    assert_eq!(described.config.segment_bytes, 2048);
    assert_eq!(
        described.config.get("retention.ms").as_deref(),
        Some("3600000")
    );
    assert_eq!(
        described.config.retention_bytes,
        LogConfig::default().retention_bytes
    );
    assert_ne!(described.id(), manager.topic("audit").unwrap().id());
    let partition_names: Vec<&str> = described.partitions.iter().map(|p| p.name()).collect();
    assert_eq!(partition_names, ["orders-0", "orders-1", "orders-2"]);
    for (p, partition) in described.partitions.iter().enumerate() {
        assert_eq!(partition.config(), described.config);
        assert_eq!(partition.dir(), dir.path().join(format!("orders-{p}")));
        assert!(partition.dir().is_dir());
    }
    assert!(dir.path().join("topics").join("orders.json").is_file());

    assert!(manager.topic("missing").is_none());
    assert!(matches!(
        manager.partition("missing", 0),
        Err(LogError::UnknownTopic(_))
    ));
    for partition in [3, -1] {
        assert!(matches!(
            manager.partition("orders", partition),
            Err(LogError::UnknownPartition { partition: p, .. }) if p == partition
        ));
    }
}

#[test]
fn topics_keep_their_ids_partitions_and_configs_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(dir.path());
    manager
        .create_topic(
            "events",
            4,
            overrides(&[("retention.bytes", "1048576"), ("cleanup.policy", "delete")]),
        )
        .unwrap();
    manager.create_topic("clicks", 1, BTreeMap::new()).unwrap();
    let before: Vec<_> = manager
        .topics()
        .iter()
        .map(|t| (t.metadata.clone(), t.config.clone()))
        .collect();
    manager.close().unwrap();

    let manager = open(dir.path());
    let after_close: Vec<_> = manager
        .topics()
        .iter()
        .map(|t| (t.metadata.clone(), t.config.clone()))
        .collect();
    assert_eq!(after_close, before);
    drop(manager);

    let manager = open(dir.path());
    let after_drop: Vec<_> = manager
        .topics()
        .iter()
        .map(|t| (t.metadata.clone(), t.config.clone()))
        .collect();
    assert_eq!(after_drop, before);
    assert_eq!(
        manager.topic("events").unwrap().config.retention_bytes,
        1_048_576
    );
}

#[test]
fn data_appended_before_a_clean_close_is_there_after_reopen_without_scanning() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(dir.path());
    manager.create_topic("orders", 2, BTreeMap::new()).unwrap();
    append_values(&manager, "orders", 0, &["a", "b"]);
    append_values(&manager, "orders", 1, &["c"]);
    append_values(&manager, "orders", 0, &["d"]);
    manager.close().unwrap();

    let manager = open(dir.path());
    assert_eq!(values(&manager, "orders", 0), ["a", "b", "d"]);
    assert_eq!(values(&manager, "orders", 1), ["c"]);
    for partition in &manager.topic("orders").unwrap().partitions {
        let report = partition.recovery_report();
        assert!(report.clean, "{}: {report:?}", partition.name());
        assert_eq!(
            report.segments_scanned,
            0,
            "{}: {report:?}",
            partition.name()
        );
        assert_eq!(partition.durable_offset(), partition.log_end_offset());
    }
}

#[test]
fn data_appended_before_an_unclean_drop_is_there_after_reopen_with_scanning() {
    let dir = tempfile::tempdir().unwrap();
    {
        let manager = open(dir.path());
        manager.create_topic("orders", 2, BTreeMap::new()).unwrap();
        append_values(&manager, "orders", 0, &["a", "b"]);
        append_values(&manager, "orders", 1, &["c"]);
        manager.close().unwrap();
    }
    {
        // Opened after a clean close, then dropped: the marker was consumed
        // by this open, so the next one must not trust the indexes.
        let manager = open(dir.path());
        append_values(&manager, "orders", 1, &["d", "e"]);
    }
    let manager = open(dir.path());
    assert_eq!(values(&manager, "orders", 0), ["a", "b"]);
    assert_eq!(values(&manager, "orders", 1), ["c", "d", "e"]);
    for partition in &manager.topic("orders").unwrap().partitions {
        let report = partition.recovery_report();
        assert!(!report.clean, "{}: {report:?}", partition.name());
        assert!(
            report.segments_scanned > 0,
            "{}: {report:?}",
            partition.name()
        );
        assert!(
            report.truncation.is_none() && report.corruption.is_none(),
            "{report:?}"
        );
    }
    append_values(&manager, "orders", 1, &["f"]);
    assert_eq!(values(&manager, "orders", 1), ["c", "d", "e", "f"]);
}

#[test]
fn invalid_topic_names_are_rejected_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(dir.path());
    let before = tree(dir.path());
    let too_long = "x".repeat(250);
    for name in [
        "",
        ".",
        "..",
        "a/b",
        "../escape",
        "has space",
        "tab\there",
        "ünïcode",
        "topics",
        &too_long,
    ] {
        let error = manager.create_topic(name, 1, BTreeMap::new()).err();
        assert!(
            matches!(&error, Some(LogError::InvalidTopicName { name: n, .. }) if n == name),
            "{name:?}: {error:?}"
        );
        if !name.is_empty() {
            let message = error.unwrap().to_string();
            assert!(message.contains(name), "'{message}' does not name {name:?}");
        }
    }
    assert_eq!(tree(dir.path()), before);
    assert!(manager.topics().is_empty());
}

#[test]
fn long_legal_topic_names_can_be_created_reopened_and_deleted() {
    // Kafka allows 249 characters so that `<name>-<partition>` still fits a
    // 255-byte file name; every file the manager derives from the name must
    // fit too.
    let failures: Vec<String> = [100, 212, 213, 246, 247, 249]
        .into_iter()
        .filter_map(|len| {
            let name = "x".repeat(len);
            round_trip(&name)
                .err()
                .map(|e| format!("{len} characters: {e:#}"))
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Creates, fills, reopens and deletes `name` in a fresh directory.
fn round_trip(name: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let manager = LogManager::open(dir.path(), LogConfig::default())?;
    manager
        .create_topic(name, 2, BTreeMap::new())
        .context("create")?;
    append_values(&manager, name, 1, &["long"]);
    manager.close()?;

    let manager = LogManager::open(dir.path(), LogConfig::default())?;
    ensure!(values(&manager, name, 1) == ["long"], "data lost on reopen");
    manager.delete_topic(name).context("delete")?;
    ensure!(manager.topics().is_empty(), "still listed after delete");
    let left: Vec<PathBuf> = tree(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(name))
        .collect();
    ensure!(left.is_empty(), "left behind after delete: {left:?}");
    drop(manager);
    ensure!(open(dir.path()).topics().is_empty(), "back after reopen");
    Ok(())
}

#[test]
fn invalid_configs_and_partition_counts_are_rejected_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(dir.path());
    let before = tree(dir.path());
    let bad_configs = [
        ("retention.ms", "soon"),
        ("retention.ms", "-5"),
        ("retention.bytes", "0"),
        ("segment.bytes", "12"),
        ("cleanup.policy", "shred"),
        ("min.cleanable.dirty.ratio", "2"),
        ("no.such.key", "1"),
    ];
    for (key, value) in bad_configs {
        // A valid override next to the bad one must not get the topic created.
        let config = overrides(&[("segment.ms", "60000"), (key, value)]);
        let error = manager.create_topic("orders", 2, config).err();
        assert!(
            matches!(&error, Some(LogError::InvalidConfig { key: k, value: v, .. }) if k == key && v == value),
            "{key}={value}: {error:?}"
        );
        let message = error.unwrap().to_string();
        assert!(
            message.contains(&format!("{key}={value}")),
            "'{message}' does not name {key}={value}"
        );
    }
    for partitions in [0, -1, PARTITIONS_MAX + 1] {
        let error = manager
            .create_topic("orders", partitions, BTreeMap::new())
            .err();
        assert!(
            matches!(error, Some(LogError::InvalidPartitionCount(n)) if n == partitions),
            "{partitions}: {error:?}"
        );
    }
    assert_eq!(tree(dir.path()), before);
    assert!(manager.topic("orders").is_none());
    drop(manager);
    assert!(open(dir.path()).topics().is_empty());
}

#[test]
fn creating_an_existing_topic_is_rejected_and_leaves_it_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(dir.path());
    let original = manager
        .create_topic("orders", 2, overrides(&[("retention.ms", "1000")]))
        .unwrap();
    append_values(&manager, "orders", 1, &["kept"]);

    let error = manager.create_topic("orders", 5, BTreeMap::new()).err();
    assert!(
        matches!(&error, Some(LogError::TopicExists(name)) if name == "orders"),
        "{error:?}"
    );

    let topic = manager.topic("orders").unwrap();
    assert_eq!(topic.metadata, original.metadata);
    assert_eq!(values(&manager, "orders", 1), ["kept"]);
    manager.close().unwrap();
    let manager = open(dir.path());
    assert_eq!(manager.topic("orders").unwrap().metadata, original.metadata);
    assert_eq!(values(&manager, "orders", 1), ["kept"]);
}

#[test]
fn deleting_a_topic_removes_its_directories_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(dir.path());
    let doomed = manager.create_topic("doomed", 3, BTreeMap::new()).unwrap();
    let old_id = doomed.id();
    drop(doomed);
    manager.create_topic("kept", 1, BTreeMap::new()).unwrap();
    append_values(&manager, "doomed", 2, &["gone"]);
    append_values(&manager, "kept", 0, &["stays"]);

    manager.delete_topic("doomed").unwrap();

    assert!(manager.topic("doomed").is_none());
    assert_eq!(names(&manager), ["kept"]);
    let left: Vec<PathBuf> = tree(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("doomed"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(matches!(
        manager.delete_topic("doomed"),
        Err(LogError::UnknownTopic(_))
    ));
    manager.close().unwrap();

    let manager = open(dir.path());
    assert_eq!(names(&manager), ["kept"]);
    assert_eq!(values(&manager, "kept", 0), ["stays"]);
    let reborn = manager.create_topic("doomed", 3, BTreeMap::new()).unwrap();
    assert_ne!(reborn.id(), old_id);
    assert!(reborn.partitions.iter().all(|p| p.log_end_offset() == 0));
}

/// The state `delete_topic` leaves if the process dies after renaming the
/// metadata file to `.<id>.deleting` (the point where the topic stops
/// existing) but before the partition directories are gone.
fn interrupted_deletion(dir: &Path, topic: &str, partitions: i32) {
    let manager = open(dir);
    let id = manager
        .create_topic(topic, partitions, BTreeMap::new())
        .unwrap()
        .id();
    for p in 0..partitions {
        append_values(&manager, topic, p, &["deleted data"]);
    }
    drop(manager);
    let topics = dir.join("topics");
    std::fs::rename(
        topics.join(format!("{topic}.json")),
        topics.join(format!(".{}.deleting", id.simple())),
    )
    .unwrap();
}

#[test]
fn an_interrupted_deletion_leaves_no_partition_directories_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    interrupted_deletion(dir.path(), "doomed", 2);

    let manager = open(dir.path());

    assert!(manager.topic("doomed").is_none());
    let left: Vec<PathBuf> = tree(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("doomed"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn partitions_added_to_a_recreated_topic_start_empty() {
    let dir = tempfile::tempdir().unwrap();
    interrupted_deletion(dir.path(), "doomed", 2);
    let manager = open(dir.path());

    manager.create_topic("doomed", 1, BTreeMap::new()).unwrap();
    let grown = manager.create_partitions("doomed", 2).unwrap();

    for partition in &grown.partitions {
        assert_eq!(
            partition.log_end_offset(),
            0,
            "{} holds the deleted topic's data",
            partition.name()
        );
    }
}

#[test]
fn a_second_manager_cannot_open_a_directory_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    first.create_topic("orders", 1, BTreeMap::new()).unwrap();
    append_values(&first, "orders", 0, &["a"]);
    let before = tree(dir.path());

    let Err(error) = LogManager::open(dir.path(), LogConfig::default()) else {
        panic!("a second manager opened a directory in use");
    };
    let message = error.to_string();
    assert!(
        message.contains(&dir.path().display().to_string()),
        "'{message}' does not name the directory"
    );
    assert_eq!(tree(dir.path()), before);
    // A refused open must not disturb the owner.
    append_values(&first, "orders", 0, &["b"]);
    assert_eq!(values(&first, "orders", 0), ["a", "b"]);

    first.close().unwrap();
    let second = open(dir.path());
    assert_eq!(values(&second, "orders", 0), ["a", "b"]);
    let Err(_) = LogManager::open(dir.path(), LogConfig::default()) else {
        panic!("a third manager opened a directory in use");
    };
    drop(second);
    assert_eq!(values(&open(dir.path()), "orders", 0), ["a", "b"]);
}

#[test]
fn create_partitions_grows_a_topic_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(dir.path());
    let original = manager
        .create_topic("orders", 2, overrides(&[("retention.ms", "5000")]))
        .unwrap();
    append_values(&manager, "orders", 1, &["old"]);

    let grown = manager.create_partitions("orders", 5).unwrap();

    assert_eq!(grown.id(), original.id());
    assert_eq!(grown.metadata.partitions, 5);
    assert_eq!(grown.partitions.len(), 5);
    assert_eq!(manager.topic("orders").unwrap().partitions.len(), 5);
    for partition in &grown.partitions {
        assert_eq!(
            partition.config().retention_ms,
            5000,
            "{}",
            partition.name()
        );
    }
    append_values(&manager, "orders", 4, &["new"]);
    assert_eq!(values(&manager, "orders", 1), ["old"]);
    for (total, expected) in [(5, 5), (3, 3), (PARTITIONS_MAX + 1, PARTITIONS_MAX + 1)] {
        assert!(
            matches!(manager.create_partitions("orders", total), Err(LogError::InvalidPartitionCount(n)) if n == expected),
            "{total}"
        );
    }
    assert!(matches!(
        manager.create_partitions("missing", 3),
        Err(LogError::UnknownTopic(_))
    ));
    drop(grown);
    drop(original);
    manager.close().unwrap();

    let manager = open(dir.path());
    let topic = manager.topic("orders").unwrap();
    assert_eq!(topic.metadata.partitions, 5);
    assert_eq!(topic.partitions.len(), 5);
    assert_eq!(values(&manager, "orders", 1), ["old"]);
    assert_eq!(values(&manager, "orders", 4), ["new"]);
    assert_eq!(values(&manager, "orders", 3), Vec::<String>::new());
}

#[test]
fn an_unfinished_deletion_never_removes_a_recreated_topics_data() {
    let dir = tempfile::tempdir().unwrap();
    interrupted_deletion(dir.path(), "reborn", 1);
    {
        let manager = open(dir.path());
        // The reopen finished the old deletion; simulate one that is still
        // pending while the name is taken again.
        let stale = manager.create_topic("reborn", 1, BTreeMap::new()).unwrap();
        let old_id = stale.id();
        drop(stale);
        manager.delete_topic("reborn").unwrap();
        let topics = dir.path().join("topics");
        std::fs::write(
            topics.join(format!(".{}.deleting", old_id.simple())),
            format!(r#"{{"name":"reborn","id":"{old_id}","partitions":1,"config":{{}}}}"#),
        )
        .unwrap();
        manager.create_topic("reborn", 1, BTreeMap::new()).unwrap();
        append_values(&manager, "reborn", 0, &["kept"]);
        manager.close().unwrap();
    }
    let manager = open(dir.path());
    assert_eq!(values(&manager, "reborn", 0), ["kept"]);
}
