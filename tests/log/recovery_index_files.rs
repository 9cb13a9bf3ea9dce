//! Index files are derived data: whatever happens to them, every read and
//! every timestamp lookup must return what the `.log` files hold. A damaged
//! index that the open-time check catches is named in the recovery report
//! and rebuilt; one that only a reader can catch is rebuilt by
//! `repair_indexes()`.
//!
//! Each case runs after a clean shutdown and after a crash (everything
//! flushed, the log dropped without `close()`), on a log of many small
//! segments so that sealed segments, which recovery trusts, are exercised.

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use strata::log::{PartitionLog, file_name};
use strata::record::Compression;
use support::{
    Rng, Stored, append_and_decode, batch_with, decode, read_all, segment_bases, small_config,
};

const NAME: &str = "clicks-0";
const BATCHES: usize = 120;
const BATCHES_MAX: usize = 200;
/// Four index intervals of `small_config()`.
const ACTIVE_BYTES_MIN: u64 = 1024;
const OFFSET_ENTRY_BYTES: usize = 8;
const TIME_ENTRY_BYTES: usize = 12;
/// A read limit smaller than most segments, so reads stop inside a segment
/// and consult the index for where to stop.
const SMALL_READ_BYTES: u64 = 300;

/// How the previous process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shutdown {
    Clean,
    Crash,
}

impl Shutdown {
    fn is_clean(self) -> bool {
        self == Self::Clean
    }
}

/// Which segment's index files get damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A sealed segment in the middle of the log.
    Sealed,
    /// The segment appends go to.
    Active,
}

/// Whether the open-time check must catch the damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caught {
    /// The segment must be named in `indexes_rebuilt`.
    OnOpen,
    /// The open-time check cannot see it; a reader must.
    ByReader,
}

/// Appends batches of records with jittered timestamps (not monotonic, so
/// timestamp lookups cannot just bisect), then shuts down as told.
fn build(dir: &Path, shutdown: Shutdown) -> Result<Vec<Stored>> {
    let log = PartitionLog::open(dir, NAME, small_config(), true)?;
    let mut rng = Rng(0x1dea);
    let mut records = Vec::new();
    for i in 0..BATCHES_MAX {
        // Past the planned batches, go on only until the active segment is
        // big enough to have index entries of its own.
        if i >= BATCHES && active_log_len(dir)? >= ACTIVE_BYTES_MIN {
            break;
        }
        let count = 1 + rng.below(4) as usize;
        let values: Vec<String> = (0..count)
            .map(|j| format!("click-{i}-{j}-{}", "p".repeat(rng.below(60) as usize)))
            .collect();
        let timestamps: Vec<i64> = (0..count)
            .map(|_| 50_000 + i as i64 * 20 + rng.below(61) as i64 - 30)
            .collect();
        let compression = if i % 9 == 4 {
            Compression::Lz4
        } else {
            Compression::None
        };
        let bytes = batch_with(
            compression,
            values
                .iter()
                .zip(&timestamps)
                .map(|(v, &ts)| (None, v.as_bytes(), ts)),
        );
        records.extend(append_and_decode(&log, &bytes)?);
    }
    match shutdown {
        Shutdown::Clean => log.close()?,
        Shutdown::Crash => {
            log.flush()?;
        }
    }
    drop(log);
    Ok(records)
}

fn active_log_len(dir: &Path) -> Result<u64> {
    let base = *segment_bases(dir)?.last().context("no segment")?;
    Ok(fs::metadata(dir.join(file_name(base, "log")))?.len())
}

/// The `.log`, `.index` and `.timeindex` paths of one segment.
struct SegmentFiles {
    log: PathBuf,
    index: PathBuf,
    time_index: PathBuf,
}

impl SegmentFiles {
    fn of(dir: &Path, base: i64) -> Self {
        Self {
            log: dir.join(file_name(base, "log")),
            index: dir.join(file_name(base, "index")),
            time_index: dir.join(file_name(base, "timeindex")),
        }
    }
}

fn pick(dir: &Path, target: Target) -> Result<(i64, SegmentFiles)> {
    let bases = segment_bases(dir)?;
    ensure!(bases.len() >= 4, "the log should span several segments");
    let base = match target {
        Target::Sealed => bases[bases.len() / 2],
        Target::Active => bases[bases.len() - 1],
    };
    let files = SegmentFiles::of(dir, base);
    Ok((base, files))
}

/// The first record at or after `timestamp`, by brute force.
fn first_at_or_after(records: &[Stored], timestamp: i64) -> Option<(i64, i64)> {
    records
        .iter()
        .find(|r| r.timestamp >= timestamp)
        .map(|r| (r.offset, r.timestamp))
}

/// Every offset read with and without a byte limit, and every timestamp
/// looked up, must give exactly what was appended.
fn assert_serves_exactly(log: &PartitionLog, expected: &[Stored], what: &str) -> Result<()> {
    assert_eq!(log.log_end_offset(), expected.len() as i64, "{what}");
    assert_eq!(read_all(log, 0), expected, "{what}");
    for (k, _) in expected.iter().enumerate() {
        let offset = k as i64;
        let from: Vec<Stored> = read_all(log, offset)
            .into_iter()
            .filter(|r| r.offset >= offset)
            .collect();
        assert_eq!(from, expected[k..], "{what}: read from offset {offset}");

        let limited = decode(&log.read(offset, SMALL_READ_BYTES)?.read_to_vec()?);
        let first = limited
            .first()
            .with_context(|| format!("{what}: a limited read at {offset} returned nothing"))?
            .offset;
        let last = limited.last().map_or(first, |r| r.offset);
        assert!(
            first <= offset && offset <= last,
            "{what}: a limited read at {offset} returned offsets {first}..={last}"
        );
        let start = usize::try_from(first)?;
        assert_eq!(
            limited,
            expected[start..start + limited.len()],
            "{what}: limited read from offset {offset}"
        );
    }
    let mut timestamps: Vec<i64> = expected.iter().map(|r| r.timestamp).collect();
    timestamps.sort_unstable();
    timestamps.dedup();
    let lowest = timestamps[0];
    let highest = timestamps[timestamps.len() - 1];
    let probes = timestamps
        .iter()
        .flat_map(|&ts| [ts - 1, ts, ts + 1])
        .chain([lowest - 1_000, highest + 1_000]);
    for timestamp in probes {
        assert_eq!(
            log.offset_for_timestamp(timestamp)?,
            first_at_or_after(expected, timestamp),
            "{what}: offset_for_timestamp({timestamp})"
        );
    }
    Ok(())
}

fn entry_count(path: &Path, entry_bytes: usize) -> Result<usize> {
    Ok(usize::try_from(fs::metadata(path)?.len())? / entry_bytes)
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn write_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

/// Damages the target segment's index files in place, then checks: the open
/// succeeds without truncating or refusing anything, the report names the
/// segment when the open-time check must catch the damage, every read is
/// exact, and after a clean restart the index files are back to what they
/// were before the damage.
fn check_damage(
    target: Target,
    caught: Caught,
    what: &str,
    damage: impl Fn(&SegmentFiles) -> Result<()>,
) -> Result<()> {
    for shutdown in [Shutdown::Clean, Shutdown::Crash] {
        let what = format!("{what}, {target:?} segment, after a {shutdown:?}");
        let dir = tempfile::tempdir()?;
        let expected = build(dir.path(), shutdown)?;
        let (_, files) = pick(dir.path(), target)?;
        let original_index = fs::read(&files.index)?;
        let original_time_index = fs::read(&files.time_index)?;
        ensure!(
            entry_count(&files.index, OFFSET_ENTRY_BYTES)? >= 3,
            "{what}: the segment should have several index entries"
        );
        damage(&files)?;

        let log = PartitionLog::open(dir.path(), NAME, small_config(), shutdown.is_clean())?;
        let report = log.recovery_report().clone();
        assert!(
            report.truncation.is_none() && report.corruption.is_none(),
            "{what}: {report:?}"
        );
        // After a crash the active segment is walked whatever its indexes
        // hold, so only a trusted segment's check can name it.
        let trusted = target == Target::Sealed || shutdown.is_clean();
        if caught == Caught::OnOpen && trusted {
            assert!(
                report
                    .indexes_rebuilt
                    .iter()
                    .any(|(path, _)| *path == files.log),
                "{what}: {} is not named in {:?}",
                files.log.display(),
                report.indexes_rebuilt
            );
        }
        if caught == Caught::ByReader {
            assert_eq!(
                log.repair_indexes()?,
                0,
                "{what}: no reader has found the damage yet"
            );
        }
        assert_serves_exactly(&log, &expected, &what)?;
        if caught == Caught::ByReader {
            assert_eq!(log.repair_indexes()?, 1, "{what}: repaired segments");
            assert_serves_exactly(&log, &expected, &what)?;
            assert_eq!(log.repair_indexes()?, 0, "{what}: nothing left to repair");
        }
        log.close()?;
        drop(log);

        let log = PartitionLog::open(dir.path(), NAME, small_config(), true)?;
        assert!(
            log.recovery_report().indexes_rebuilt.is_empty(),
            "{what}: after a restart: {:?}",
            log.recovery_report().indexes_rebuilt
        );
        assert_eq!(read_all(&log, 0), expected, "{what}: after a restart");
        log.close()?;
        drop(log);
        // An active segment's index files may be sized for appends while
        // the log is open, and were when the process crashed, so only
        // cleanly sealed files can be compared byte for byte.
        if target == Target::Sealed || shutdown.is_clean() {
            assert!(
                fs::read(&files.index)? == original_index,
                "{what}: the offset index was not rebuilt as it was"
            );
            assert!(
                fs::read(&files.time_index)? == original_time_index,
                "{what}: the time index was not rebuilt as it was"
            );
        }
    }
    Ok(())
}

fn garbage_over(path: &Path, seed: u64) -> Result<()> {
    let len = usize::try_from(fs::metadata(path)?.len())?;
    fs::write(path, Rng(seed).bytes(len))?;
    Ok(())
}

fn cut(path: &Path, bytes: u64) -> Result<()> {
    let len = fs::metadata(path)?.len();
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .set_len(len - bytes)?;
    Ok(())
}

#[test]
fn deleted_index_files_are_rebuilt_and_every_read_stays_exact() -> Result<()> {
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "both indexes deleted",
        |files| {
            fs::remove_file(&files.index)?;
            fs::remove_file(&files.time_index)?;
            Ok(())
        },
    )
}

#[test]
fn a_deleted_time_index_is_rebuilt() -> Result<()> {
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "time index deleted",
        |files| Ok(fs::remove_file(&files.time_index)?),
    )
}

#[test]
fn a_deleted_offset_index_is_rebuilt() -> Result<()> {
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "offset index deleted",
        |files| Ok(fs::remove_file(&files.index)?),
    )
}

#[test]
fn a_time_index_with_a_partial_entry_is_rebuilt() -> Result<()> {
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "time index cut to a partial entry",
        |files| cut(&files.time_index, 5),
    )
}

#[test]
fn an_offset_index_with_a_partial_entry_is_rebuilt() -> Result<()> {
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "offset index cut to a partial entry",
        |files| cut(&files.index, 3),
    )
}

#[test]
fn garbage_in_either_index_file_is_rebuilt() -> Result<()> {
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "garbage offset index",
        |files| garbage_over(&files.index, 11),
    )?;
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "garbage time index",
        |files| garbage_over(&files.time_index, 12),
    )
}

#[test]
fn garbage_in_the_active_segment_indexes_is_rebuilt() -> Result<()> {
    check_damage(Target::Active, Caught::OnOpen, "garbage indexes", |files| {
        garbage_over(&files.index, 21)?;
        garbage_over(&files.time_index, 22)
    })
}

#[test]
fn index_entries_pointing_past_the_log_are_rebuilt() -> Result<()> {
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "offset index entry past the end of the log",
        |files| {
            let mut index = fs::read(&files.index)?;
            let log_len = u32::try_from(fs::metadata(&files.log)?.len())?;
            let last = index.len() - OFFSET_ENTRY_BYTES;
            write_u32(&mut index, last + 4, log_len + 64);
            Ok(fs::write(&files.index, index)?)
        },
    )?;
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "time index entry past the last offset",
        |files| {
            let mut index = fs::read(&files.time_index)?;
            let last = index.len() - TIME_ENTRY_BYTES;
            let relative = read_u32(&index, last + 8);
            write_u32(&mut index, last + 8, relative + 10_000);
            Ok(fs::write(&files.time_index, index)?)
        },
    )
}

/// Moves offset index entry `i` one byte into the batch it points at; the
/// entry still increases in both fields, so it is structurally valid.
fn shift_offset_entry_into_its_batch(files: &SegmentFiles, i: usize) -> Result<()> {
    let mut index = fs::read(&files.index)?;
    let at = i * OFFSET_ENTRY_BYTES + 4;
    let position = read_u32(&index, at);
    write_u32(&mut index, at, position + 1);
    Ok(fs::write(&files.index, index)?)
}

#[test]
fn a_last_offset_index_entry_inside_a_batch_is_caught_on_open() -> Result<()> {
    check_damage(
        Target::Sealed,
        Caught::OnOpen,
        "last offset index entry inside a batch",
        |files| {
            let last = entry_count(&files.index, OFFSET_ENTRY_BYTES)? - 1;
            shift_offset_entry_into_its_batch(files, last)
        },
    )
}

#[test]
fn an_offset_index_entry_inside_a_batch_is_caught_by_a_reader_and_repaired() -> Result<()> {
    check_damage(
        Target::Sealed,
        Caught::ByReader,
        "first offset index entry inside a batch",
        |files| shift_offset_entry_into_its_batch(files, 0),
    )
}

#[test]
fn repair_leaves_a_sound_log_alone() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let expected = build(dir.path(), Shutdown::Clean)?;
    let log = PartitionLog::open(dir.path(), NAME, small_config(), true)?;
    assert_serves_exactly(&log, &expected, "sound log")?;
    assert_eq!(log.repair_indexes()?, 0);
    Ok(())
}

#[test]
fn a_time_index_that_lost_its_last_entry_still_answers_timestamp_lookups() -> Result<()> {
    for shutdown in [Shutdown::Clean, Shutdown::Crash] {
        let what = format!("time index without its last entry, after a {shutdown:?}");
        let dir = tempfile::tempdir()?;
        let expected = build(dir.path(), shutdown)?;
        let (_, files) = pick(dir.path(), Target::Sealed)?;
        ensure!(
            entry_count(&files.time_index, TIME_ENTRY_BYTES)? >= 2,
            "{what}: the segment should have several time index entries"
        );
        // Whole entries only: what is left is structurally valid, it just
        // no longer records the segment's largest timestamp.
        cut(&files.time_index, TIME_ENTRY_BYTES as u64)?;
        let log = PartitionLog::open(dir.path(), NAME, small_config(), shutdown.is_clean())?;
        assert_serves_exactly(&log, &expected, &what)?;
    }
    Ok(())
}
