//! A batch that fails its checks while valid batches follow it cannot come
//! from a torn append: the disk corrupted it. Recovery must report it, serve
//! every offset below it, refuse every offset from it on (reads and appends),
//! and delete or shorten nothing, so an operator can still salvage the rest.

use crate::support;

use std::collections::BTreeMap;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use strata::log::{LogConfig, LogError, LogManager, PartitionLog};
use strata::record::BatchHeader;
use support::{Stored, append_and_decode, batch, read_all, segment_logs, small_config};

const NAME: &str = "ledger-0";
const BATCHES: usize = 80;
/// First byte of a batch covered by its CRC32C.
const CRC_COVERS_FROM: u64 = 21;

/// Where one batch lies on disk.
#[derive(Debug, Clone)]
struct BatchAt {
    log: PathBuf,
    position: u64,
    size: u64,
    base_offset: i64,
}

fn values(i: usize) -> Vec<String> {
    (0..1 + i % 3)
        .map(|j| format!("entry-{i}-{j}-{}", "=".repeat(i * 5 % 70)))
        .collect()
}

/// Appends `BATCHES` batches, flushing some, and drops the log without
/// closing it.
fn crash(dir: &Path, config: &LogConfig) -> Result<Vec<Stored>> {
    let log = PartitionLog::open(dir, NAME, config.clone(), true)?;
    let mut records = Vec::new();
    for i in 0..BATCHES {
        let values = values(i);
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let bytes = batch(&values, 70_000 + i as i64);
        records.extend(append_and_decode(&log, &bytes)?);
        if i % 5 == 4 {
            log.flush()?;
        }
    }
    drop(log);
    Ok(records)
}

/// Every batch of every segment, found by walking the `.log` files.
fn batches_on_disk(dir: &Path) -> Result<Vec<BatchAt>> {
    let mut all = Vec::new();
    for log in segment_logs(dir)? {
        let bytes = fs::read(&log)?;
        let mut position = 0;
        while position < bytes.len() {
            let header = BatchHeader::parse(&bytes[position..])?;
            all.push(BatchAt {
                log: log.clone(),
                position: position as u64,
                size: header.size_bytes() as u64,
                base_offset: header.base_offset,
            });
            position += header.size_bytes();
        }
    }
    Ok(all)
}

fn flip_byte(path: &Path, position: u64) -> Result<()> {
    let mut bytes = fs::read(path)?;
    let at = usize::try_from(position)?;
    bytes[at] ^= 0x40;
    fs::write(path, bytes)?;
    Ok(())
}

/// Every file of the directory with its bytes.
fn snapshot(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        files.insert(
            entry.file_name().to_string_lossy().into_owned(),
            fs::read(entry.path())?,
        );
    }
    Ok(files)
}

/// No file went missing or got shorter, and every `.log` file is byte for
/// byte what it was. (Index files are derived data and may be rebuilt.)
fn assert_nothing_deleted(
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
    what: &str,
) {
    for (name, bytes) in before {
        let now = after
            .get(name)
            .unwrap_or_else(|| panic!("{what}: {name} was deleted"));
        assert!(
            now.len() >= bytes.len(),
            "{what}: {name} shrank from {} to {} bytes",
            bytes.len(),
            now.len()
        );
        if name.ends_with(".log") {
            assert!(now == bytes, "{what}: {name} was modified");
        }
    }
}

fn assert_corrupt_error(result: Result<impl std::fmt::Debug, LogError>, bad: &BatchAt, what: &str) {
    match result {
        Err(LogError::Corrupt {
            offset,
            path,
            position,
            ..
        }) => {
            assert_eq!(offset, bad.base_offset, "{what}");
            assert_eq!(path, bad.log, "{what}");
            assert_eq!(position, bad.position, "{what}");
        }
        other => panic!("{what}: expected a corruption error, got {other:?}"),
    }
}

/// Opens the damaged partition after a crash and checks it serves exactly the
/// records below the bad batch and refuses everything else.
fn check_corruption(
    dir: &Path,
    config: &LogConfig,
    records: &[Stored],
    bad: &BatchAt,
    what: &str,
) -> Result<()> {
    let log = PartitionLog::open(dir, NAME, config.clone(), false)?;
    let corruption = log
        .corruption()
        .with_context(|| format!("{what}: the corruption is not reported"))?;
    assert_eq!(corruption.offset, bad.base_offset, "{what}");
    assert_eq!(corruption.position, bad.position, "{what}");
    assert_eq!(corruption.segment, bad.log, "{what}");
    let report = log.recovery_report();
    assert_eq!(report.corruption.as_ref(), Some(&corruption), "{what}");
    assert!(
        report.truncation.is_none(),
        "{what}: corruption must not be cut as a torn tail: {report:?}"
    );

    let good = usize::try_from(bad.base_offset)?;
    assert_eq!(log.log_end_offset(), bad.base_offset, "{what}");
    assert_eq!(read_all(&log, 0), records[..good], "{what}");
    for offset in 0..bad.base_offset {
        let from: Vec<Stored> = read_all(&log, offset)
            .into_iter()
            .filter(|r| r.offset >= offset)
            .collect();
        assert_eq!(from, records[usize::try_from(offset)?..good], "{what}");
    }
    let last_offset = records.len() as i64 - 1;
    for offset in [bad.base_offset, bad.base_offset + 1, last_offset] {
        assert_corrupt_error(
            log.read(offset, u64::MAX),
            bad,
            &format!("{what}: read {offset}"),
        );
    }
    assert_corrupt_error(
        log.append(&batch(&["must-not-land"], 80_000)),
        bad,
        &format!("{what}: append"),
    );
    Ok(())
}

/// Whether the recovery point the crash left on disk is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecoveryPoint {
    AsWritten,
    /// Replaced by 0, as if no write of it had reached the disk before the
    /// crash. Sealed segments below the recovery point are trusted without a
    /// walk, so this is what makes recovery check them.
    Lost,
}

fn forget_recovery_point(dir: &Path) -> Result<()> {
    let mut raw = [0u8; 12];
    let crc = strata::record::crc32c(&raw[..8]);
    raw[8..].copy_from_slice(&crc.to_be_bytes());
    fs::write(dir.join("recovery-point"), raw)?;
    Ok(())
}

/// Index ranges into `batches` of each segment's batches, in order.
fn segments(batches: &[BatchAt]) -> Vec<Range<usize>> {
    let mut ranges: Vec<Range<usize>> = Vec::new();
    for (i, b) in batches.iter().enumerate() {
        match ranges.last_mut() {
            Some(last) if batches[last.start].log == b.log => last.end = i + 1,
            _ => ranges.push(i..i + 1),
        }
    }
    ranges
}

/// Bytes after the CRC field, all covered by it: header fields
/// (attributes, lastOffsetDelta, maxTimestamp, recordCount), the first
/// record, the middle and the last byte.
fn crc_covered(bad: &BatchAt) -> Vec<u64> {
    vec![CRC_COVERS_FROM, 23, 40, 57, 61, bad.size / 2, bad.size - 1]
}

/// Bytes of baseOffset, which the CRC does not cover (the log rewrites it).
/// The first two flips raise the offset, the last one lowers it.
fn base_offset_bytes(_: &BatchAt) -> Vec<u64> {
    vec![0, 6, 7]
}

/// For each byte that `flips` names in the batch that `victim` picks:
/// crashes, flips that byte, and checks the reopened partition twice (a
/// second crash must find the same and still delete nothing).
fn corrupt_and_check(
    config: &LogConfig,
    recovery_point: RecoveryPoint,
    victim: impl Fn(&[Range<usize>]) -> usize,
    flips: fn(&BatchAt) -> Vec<u64>,
    what: &str,
) -> Result<()> {
    let mut case = 0;
    loop {
        let dir = tempfile::tempdir()?;
        let records = crash(dir.path(), config)?;
        let batches = batches_on_disk(dir.path())?;
        let bad = batches[victim(&segments(&batches))].clone();
        ensure!(
            batches
                .last()
                .is_some_and(|last| last.base_offset > bad.base_offset),
            "{what}: valid batches must follow the bad one"
        );
        let Some(&flip) = flips(&bad).get(case) else {
            break;
        };
        case += 1;
        let what = format!("{what}, byte {flip} of the batch flipped");
        if recovery_point == RecoveryPoint::Lost {
            forget_recovery_point(dir.path())?;
        }
        flip_byte(&bad.log, bad.position + flip)?;
        let before = snapshot(dir.path())?;

        check_corruption(dir.path(), config, &records, &bad, &what)?;
        assert_nothing_deleted(&before, &snapshot(dir.path())?, &what);
        let again = format!("{what}, after a second crash");
        check_corruption(dir.path(), config, &records, &bad, &again)?;
        assert_nothing_deleted(&before, &snapshot(dir.path())?, &again);
    }
    Ok(())
}

#[test]
fn a_flipped_byte_in_a_middle_batch_is_corruption_and_nothing_is_deleted() -> Result<()> {
    corrupt_and_check(
        &LogConfig::default(),
        RecoveryPoint::AsWritten,
        |segments| segments[0].start + segments[0].len() / 2,
        crc_covered,
        "middle batch of the only segment",
    )
}

#[test]
fn a_flipped_byte_in_a_middle_batch_of_a_sealed_segment_is_corruption() -> Result<()> {
    corrupt_and_check(
        &small_config(),
        RecoveryPoint::Lost,
        |segments| segments[1].start + segments[1].len() / 2,
        crc_covered,
        "middle batch of a sealed segment",
    )
}

#[test]
fn a_bad_last_batch_of_a_sealed_segment_is_corruption_when_later_segments_hold_data() -> Result<()>
{
    corrupt_and_check(
        &small_config(),
        RecoveryPoint::Lost,
        |segments| segments[1].end - 1,
        crc_covered,
        "last batch of a sealed segment",
    )
}

#[test]
fn a_flipped_base_offset_in_a_middle_batch_is_corruption_not_a_torn_tail() -> Result<()> {
    corrupt_and_check(
        &LogConfig::default(),
        RecoveryPoint::AsWritten,
        |segments| segments[0].start + segments[0].len() / 2,
        base_offset_bytes,
        "middle batch of the only segment",
    )
}

#[test]
fn a_corrupt_partition_does_not_stop_other_partitions_and_topics() -> Result<()> {
    // The records carry timestamps from 1970: keep them through retention.
    let defaults = LogConfig {
        retention_ms: -1,
        ..LogConfig::default()
    };
    let data = tempfile::tempdir()?;
    let mut expected: BTreeMap<(String, i32), Vec<Stored>> = BTreeMap::new();
    {
        let manager = LogManager::open(data.path(), defaults.clone())?;
        manager.create_topic("orders", 3, BTreeMap::new())?;
        manager.create_topic("payments", 1, BTreeMap::new())?;
        for (topic, partitions) in [("orders", 3), ("payments", 1)] {
            for partition in 0..partitions {
                let log = manager.partition(topic, partition)?;
                let mut records = Vec::new();
                for i in 0..BATCHES {
                    let value = format!("{topic}-{partition}-{i}");
                    let bytes = batch(&[&value, "second"], 90_000 + i as i64);
                    records.extend(append_and_decode(&log, &bytes)?);
                }
                log.flush()?;
                expected.insert((topic.to_string(), partition), records);
            }
        }
        // Dropped without close(): no clean-shutdown marker.
    }

    let damaged = data.path().join("orders-1");
    let batches = batches_on_disk(&damaged)?;
    let bad = batches[batches.len() / 2].clone();
    flip_byte(&bad.log, bad.position + bad.size / 2)?;
    let log_bytes = fs::read(&bad.log)?;

    for round in ["after the crash", "after a close with a corrupt partition"] {
        let manager = LogManager::open(data.path(), defaults.clone())?;
        // Broker-wide passes must step over the corrupt partition.
        manager.flush_due();
        assert!(manager.enforce_retention().is_empty(), "{round}");
        let orders_1 = manager.partition("orders", 1)?;
        let corruption = orders_1
            .corruption()
            .with_context(|| format!("{round}: orders-1 is not reported corrupt"))?;
        assert_eq!(corruption.offset, bad.base_offset, "{round}");
        let good = usize::try_from(bad.base_offset)?;
        assert_eq!(
            read_all(&orders_1, 0),
            expected[&("orders".into(), 1)][..good],
            "{round}"
        );
        assert_corrupt_error(orders_1.read(bad.base_offset, u64::MAX), &bad, round);
        assert_corrupt_error(orders_1.append(&batch(&["no"], 1)), &bad, round);

        for ((topic, partition), records) in expected.iter_mut() {
            if (topic.as_str(), *partition) == ("orders", 1) {
                continue;
            }
            let log = manager.partition(topic, *partition)?;
            assert!(log.corruption().is_none(), "{round}: {topic}-{partition}");
            assert_eq!(read_all(&log, 0), *records, "{round}: {topic}-{partition}");
            let bytes = batch(&[&format!("{round} {topic}-{partition}")], 95_000);
            let appended = append_and_decode(&log, &bytes)?;
            assert_eq!(appended[0].offset, records.len() as i64, "{round}");
            log.flush()?;
            records.extend(appended);
        }
        manager.close()?;
        assert!(
            !data.path().join(".clean-shutdown").exists(),
            "{round}: a corrupt partition must be checked again on the next open"
        );
        assert!(
            fs::read(&bad.log)? == log_bytes,
            "{round}: the damaged segment was modified"
        );
    }
    Ok(())
}
