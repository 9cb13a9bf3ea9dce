//! A crash in the middle of an append leaves the active segment ending inside
//! its last batch. Recovery must cut exactly that batch, keep every whole
//! batch before it, say how many bytes went and whether they had been
//! reported flushed, and leave a log that takes the next offset.
//!
//! The crash is a `PartitionLog` dropped without `close()`. Its directory is
//! kept as a snapshot; every cut works on a fresh copy of it, so each length
//! inside the last batch starts from the same bytes.

use crate::support;

use std::fs;
use std::ops::Range;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use strata::log::{LogConfig, PartitionLog};
use strata::record::{BATCH_HEADER_BYTES, BatchHeader, Compression};
use support::{Stored, append_and_decode, batch, batch_with, read_all, segment_logs, small_config};
use tempfile::TempDir;

const NAME: &str = "events-0";
/// Batches appended before the one that is torn.
const FILLER_BATCHES: usize = 40;
/// Bound on the batches appended while waiting for a segment roll.
const ROLL_WAIT_BATCHES: usize = 200;

/// A partition as a crash left it, before its tail is torn.
struct Crashed {
    snapshot: TempDir,
    config: LogConfig,
    /// Records of every batch before the last one.
    kept: Vec<Stored>,
    /// File name of the active segment, which holds the last batch.
    active_log: String,
    /// Where the last batch lies in that file; it ends the file.
    last_batch: Range<u64>,
    /// Offset of the first record of the last batch.
    last_batch_offset: i64,
    /// Offset after the last batch (the log end before the crash).
    end_offset: i64,
    /// Whether the last batch had been reported flushed.
    last_batch_flushed: bool,
}

/// Where the batch that gets torn sits in its segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LastBatch {
    /// After other batches of the active segment.
    SharesSegment,
    /// First and only batch of a segment that was just rolled.
    OpensSegment,
}

/// `config` with small index files, so that copying a crashed directory for
/// every cut stays cheap (an active segment's index files are sized ahead
/// of their entries),
/// and without time-based rolls, so the append after recovery lands right
/// behind the cut instead of in a fresh segment.
fn for_cutting(config: LogConfig) -> LogConfig {
    LogConfig {
        segment_index_bytes: 64 << 10,
        segment_ms: i64::MAX,
        ..config
    }
}

fn filler(i: usize) -> Vec<u8> {
    let values: Vec<String> = (0..1 + i % 4)
        .map(|j| format!("event-{i}-{j}-{}", "x".repeat((i * 7 + j * 13) % 90)))
        .collect();
    let timestamp = 1_000 + i as i64;
    if i % 5 == 2 {
        // Compressed, keyed batches, so recovery walks more than one shape.
        let keys: Vec<String> = (0..values.len()).map(|j| format!("key-{j}")).collect();
        batch_with(
            Compression::Gzip,
            keys.iter()
                .zip(&values)
                .map(|(k, v)| (Some(k.as_bytes()), v.as_bytes(), timestamp)),
        )
    } else {
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        batch(&values, timestamp)
    }
}

fn torn_batch() -> Vec<u8> {
    batch(
        &[
            "torn-first-record",
            "torn-second-record-with-more-bytes",
            "torn-third",
            "torn-fourth-and-last-record",
        ],
        5_000,
    )
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        fs::copy(entry.path(), to.join(entry.file_name()))
            .with_context(|| format!("copying {}", entry.path().display()))?;
    }
    Ok(())
}

fn truncate(path: &Path, len: u64) -> Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .set_len(len)?;
    Ok(())
}

/// Appends filler batches (flushing some), then the batch to tear, then drops
/// the log without closing it.
fn crash(config: LogConfig, last: LastBatch, flush_last: bool) -> Result<Crashed> {
    let snapshot = tempfile::tempdir()?;
    let log = PartitionLog::open(snapshot.path(), NAME, config.clone(), true)?;
    let mut kept = Vec::new();
    for i in 0..FILLER_BATCHES {
        kept.extend(append_and_decode(&log, &filler(i))?);
        // Flushes along the way put the recovery point inside the data.
        if i % 7 == 3 {
            log.flush()?;
        }
    }
    let (last_records, last_len) = match last {
        LastBatch::SharesSegment => {
            let bytes = torn_batch();
            let len = bytes.len() as u64;
            // More fillers until the torn batch fits behind them in the
            // active segment rather than rolling a new one.
            for i in FILLER_BATCHES..FILLER_BATCHES + ROLL_WAIT_BATCHES {
                let active = segment_logs(snapshot.path())?
                    .pop()
                    .context("no segment file")?;
                let active_len = fs::metadata(active)?.len();
                if active_len > 0 && active_len + len <= config.segment_bytes {
                    break;
                }
                kept.extend(append_and_decode(&log, &filler(i))?);
            }
            (append_and_decode(&log, &bytes)?, len)
        }
        LastBatch::OpensSegment => {
            let mut found = None;
            for i in FILLER_BATCHES..FILLER_BATCHES + ROLL_WAIT_BATCHES {
                let segments_before = log.segment_count();
                let bytes = filler(i);
                let len = bytes.len() as u64;
                let records = append_and_decode(&log, &bytes)?;
                if log.segment_count() > segments_before {
                    found = Some((records, len));
                    break;
                }
                kept.extend(records);
            }
            found.context("no segment rolled")?
        }
    };
    if flush_last {
        log.flush()?;
    }
    let end_offset = log.log_end_offset();
    drop(log);

    let active = segment_logs(snapshot.path())?
        .pop()
        .context("no segment file")?;
    let end = fs::metadata(&active)?.len();
    let last_batch = end - last_len..end;
    match last {
        LastBatch::SharesSegment => ensure!(
            last_batch.start > 0,
            "the last batch was meant to share its segment"
        ),
        LastBatch::OpensSegment => ensure!(
            last_batch.start == 0,
            "the last batch was meant to open its segment"
        ),
    }
    Ok(Crashed {
        config,
        kept,
        active_log: active
            .file_name()
            .context("segment file name")?
            .to_string_lossy()
            .into_owned(),
        last_batch,
        last_batch_offset: last_records[0].offset,
        end_offset,
        last_batch_flushed: flush_last,
        snapshot,
    })
}

/// Copies the crashed partition, cuts its active segment to `cut_len` bytes
/// and opens it after the crash.
fn reopen_cut(crashed: &Crashed, dir: &Path, cut_len: u64) -> Result<PartitionLog> {
    copy_dir(crashed.snapshot.path(), dir)?;
    truncate(&dir.join(&crashed.active_log), cut_len)?;
    Ok(PartitionLog::open(
        dir,
        NAME,
        crashed.config.clone(),
        false,
    )?)
}

/// Everything that must hold after a tail torn at `cut_len`.
fn check_torn_at(crashed: &Crashed, cut_len: u64) -> Result<()> {
    let at = format!("tail cut to {cut_len} bytes");
    let dir = tempfile::tempdir()?;
    let active_log = dir.path().join(&crashed.active_log);
    let log = reopen_cut(crashed, dir.path(), cut_len)?;

    let report = log.recovery_report();
    assert!(report.corruption.is_none(), "{at}: {report:?}");
    let truncation = report
        .truncation
        .as_ref()
        .with_context(|| format!("{at}: the torn tail is not reported"))?;
    assert_eq!(truncation.segment, active_log, "{at}");
    assert_eq!(truncation.position, crashed.last_batch.start, "{at}");
    assert_eq!(
        truncation.bytes_cut,
        cut_len - crashed.last_batch.start,
        "{at}"
    );
    assert_eq!(truncation.log_end_offset, crashed.last_batch_offset, "{at}");
    assert_eq!(
        truncation.lost_flushed_data(),
        crashed.last_batch_flushed,
        "{at}: {truncation}"
    );
    let text = truncation.to_string();
    assert!(
        text.contains(&truncation.bytes_cut.to_string()),
        "{at}: {text}"
    );
    if crashed.last_batch_flushed {
        let lost = format!("{}..{}", crashed.last_batch_offset, crashed.end_offset);
        assert!(
            text.contains("lost") && text.contains(&lost),
            "{at}: the warning must say offsets {lost} were lost: {text}"
        );
    } else {
        assert!(!text.contains("lost"), "{at}: {text}");
    }

    assert_eq!(
        fs::metadata(&active_log)?.len(),
        crashed.last_batch.start,
        "{at}: the file itself must be cut"
    );
    assert_eq!(log.log_end_offset(), crashed.last_batch_offset, "{at}");
    assert_eq!(log.durable_offset(), crashed.last_batch_offset, "{at}");
    assert_eq!(read_all(&log, 0), crashed.kept, "{at}");

    let next = batch(&["appended-after-recovery"], 9_000);
    let appended = append_and_decode(&log, &next)?;
    assert_eq!(appended[0].offset, crashed.last_batch_offset, "{at}");
    let mut expected = crashed.kept.clone();
    expected.extend(appended);
    assert_eq!(read_all(&log, 0), expected, "{at}");
    assert_eq!(
        fs::metadata(&active_log)?.len(),
        crashed.last_batch.start + next.len() as u64,
        "{at}: the append must land right behind the cut"
    );
    drop(log);

    // A second crash right away finds nothing more to cut.
    let log = PartitionLog::open(dir.path(), NAME, crashed.config.clone(), false)?;
    let report = log.recovery_report();
    assert!(
        report.truncation.is_none() && report.corruption.is_none(),
        "{at}: {report:?}"
    );
    assert_eq!(read_all(&log, 0), expected, "{at}");
    Ok(())
}

fn check_every_cut_inside_the_last_batch(crashed: &Crashed) -> Result<()> {
    // Cuts must land in the header as well as in the records.
    ensure!(crashed.last_batch.end - crashed.last_batch.start > BATCH_HEADER_BYTES as u64);
    for cut_len in crashed.last_batch.start + 1..crashed.last_batch.end {
        check_torn_at(crashed, cut_len)?;
    }
    Ok(())
}

#[test]
fn a_tail_torn_at_any_byte_of_the_last_batch_is_cut_to_the_whole_batches_before_it() -> Result<()> {
    let config = for_cutting(LogConfig::default());
    let crashed = crash(config, LastBatch::SharesSegment, false)?;
    check_every_cut_inside_the_last_batch(&crashed)
}

#[test]
fn a_torn_tail_of_a_multi_segment_log_leaves_the_sealed_segments_alone() -> Result<()> {
    let crashed = crash(for_cutting(small_config()), LastBatch::SharesSegment, false)?;
    let logs_before = segment_logs(crashed.snapshot.path())?;
    ensure!(
        logs_before.len() > 2,
        "the log should span several segments"
    );
    check_every_cut_inside_the_last_batch(&crashed)?;

    let dir = tempfile::tempdir()?;
    let log = reopen_cut(&crashed, dir.path(), crashed.last_batch.start + 1)?;
    assert_eq!(log.segment_count(), logs_before.len());
    for sealed in &logs_before[..logs_before.len() - 1] {
        let name = sealed.file_name().context("segment file name")?;
        assert_eq!(fs::read(sealed)?, fs::read(dir.path().join(name))?);
    }
    Ok(())
}

#[test]
fn a_torn_batch_alone_in_a_fresh_segment_leaves_that_segment_empty() -> Result<()> {
    let crashed = crash(for_cutting(small_config()), LastBatch::OpensSegment, false)?;
    check_every_cut_inside_the_last_batch(&crashed)
}

#[test]
fn a_torn_batch_that_had_been_flushed_is_reported_as_lost_flushed_data() -> Result<()> {
    for last in [LastBatch::SharesSegment, LastBatch::OpensSegment] {
        let crashed = crash(for_cutting(small_config()), last, true)?;
        check_every_cut_inside_the_last_batch(&crashed).with_context(|| format!("{last:?}"))?;
    }
    Ok(())
}

#[test]
fn a_tail_cut_exactly_at_a_batch_boundary_needs_no_truncation() -> Result<()> {
    let crashed = crash(for_cutting(small_config()), LastBatch::SharesSegment, false)?;
    let dir = tempfile::tempdir()?;
    let log = reopen_cut(&crashed, dir.path(), crashed.last_batch.start)?;
    let report = log.recovery_report();
    assert!(
        report.truncation.is_none() && report.corruption.is_none(),
        "{report:?}"
    );
    assert_eq!(log.log_end_offset(), crashed.last_batch_offset);
    assert_eq!(read_all(&log, 0), crashed.kept);
    let info = log.append(&batch(&["next"], 9_000))?;
    assert_eq!(info.base_offset, crashed.last_batch_offset);
    Ok(())
}

#[test]
fn flushed_batches_lost_exactly_at_a_batch_boundary_are_reported_as_lost() -> Result<()> {
    let crashed = crash(for_cutting(small_config()), LastBatch::SharesSegment, true)?;
    let dir = tempfile::tempdir()?;
    let log = reopen_cut(&crashed, dir.path(), crashed.last_batch.start)?;
    assert_eq!(log.log_end_offset(), crashed.last_batch_offset);
    assert_eq!(read_all(&log, 0), crashed.kept);
    let lost = format!("{}..{}", crashed.last_batch_offset, crashed.end_offset);
    let report = log.recovery_report();
    // Nothing is torn, but the disk lost a batch it had confirmed as synced:
    // the report is the only place an operator can learn that.
    let truncation = report.truncation.as_ref().with_context(|| {
        format!("offsets {lost} had been reported flushed and are gone, but the report is silent: {report:?}")
    })?;
    assert!(truncation.lost_flushed_data(), "{truncation}");
    assert_eq!(truncation.log_end_offset, crashed.last_batch_offset);
    assert_eq!(truncation.recovery_point, crashed.end_offset);
    assert!(truncation.to_string().contains(&lost), "{truncation}");
    Ok(())
}

/// The position and first offset of the last batch in a `.log` file.
fn last_batch_in(path: &Path) -> Result<(Range<u64>, i64)> {
    let bytes = fs::read(path)?;
    let mut position = 0;
    let mut last = None;
    while position < bytes.len() {
        let header = BatchHeader::parse(&bytes[position..])?;
        let end = position + header.size_bytes();
        last = Some((position as u64..end as u64, header.base_offset));
        position = end;
    }
    last.context("the segment holds no batch")
}

#[test]
fn a_torn_sealed_segment_before_an_empty_newer_one_is_cut_and_the_empty_one_removed() -> Result<()>
{
    // A roll syncs the segment it seals, so only a disk that loses synced
    // writes can leave it torn; the newer segment has nothing yet.
    let crashed = crash(for_cutting(small_config()), LastBatch::OpensSegment, false)?;
    let dir = tempfile::tempdir()?;
    copy_dir(crashed.snapshot.path(), dir.path())?;
    let logs = segment_logs(dir.path())?;
    let (newest, sealed) = (&logs[logs.len() - 1], &logs[logs.len() - 2]);
    truncate(newest, 0)?;
    let (last_batch, last_batch_offset) = last_batch_in(sealed)?;
    let cut_len = last_batch.start + (last_batch.end - last_batch.start) / 2;
    truncate(sealed, cut_len)?;

    let log = PartitionLog::open(dir.path(), NAME, crashed.config.clone(), false)?;
    let report = log.recovery_report();
    assert!(report.corruption.is_none(), "{report:?}");
    let truncation = report
        .truncation
        .as_ref()
        .with_context(|| format!("the torn segment is not reported: {report:?}"))?;
    assert_eq!(&truncation.segment, sealed);
    assert_eq!(truncation.position, last_batch.start);
    assert_eq!(truncation.bytes_cut, cut_len - last_batch.start);
    assert_eq!(truncation.log_end_offset, last_batch_offset);
    assert!(
        truncation.lost_flushed_data(),
        "the roll had synced the torn batch: {truncation}"
    );
    assert_eq!(fs::metadata(sealed)?.len(), last_batch.start);
    assert!(!newest.exists(), "the empty newer segment must be removed");
    assert_eq!(log.segment_count(), logs.len() - 1);
    assert_eq!(log.log_end_offset(), last_batch_offset);
    let kept: Vec<Stored> = crashed
        .kept
        .iter()
        .filter(|r| r.offset < last_batch_offset)
        .cloned()
        .collect();
    assert_eq!(read_all(&log, 0), kept);

    let info = log.append(&batch(&["after-recovery"], 9_000))?;
    assert_eq!(info.base_offset, last_batch_offset);
    Ok(())
}
