//! A crash while a producer is appending, simulated by copying the partition
//! directory from under a live appender, several times over.
//!
//! The copy takes the files in the order that makes it a state a real crash
//! could leave: the recovery point first (whatever it says was synced before
//! it was written, so it is all still there when the segments are copied),
//! then segments newest first (a segment is synced when it is rolled, so in
//! a real crash older segments are always at least as complete as newer
//! ones). Every copy, opened after the crash, must hold a dense prefix of
//! what was appended, keep everything reported durable before the copy
//! started, and accept new appends.

use crate::support;

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use anyhow::{Context, Result, bail, ensure};
use strata::log::{LogConfig, PartitionLog, file_name};
use strata::record::Compression;
use support::{Rng, Stored, batch, batch_with, read_all, segment_bases};

const NAME: &str = "stream-0";
/// Copies taken, each while the appender works through one budget.
const ROUNDS: usize = 16;
/// Batches the appender may append per round.
const BATCHES_PER_ROUND: usize = 150;
const RECORDS_PER_BATCH_MAX: u64 = 5;
const SEED: u64 = 0x0c0f_fee5;

/// Segments small enough to roll a few times per round, so copies race with
/// rolls too, yet few enough that every copy stays quick to open.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        index_interval_bytes: 512,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

/// The record the appender writes at `offset`: a pure function of the
/// offset, so any copy can be checked without knowing how far it got.
fn record_at(offset: i64) -> Stored {
    let pad = Rng(SEED ^ offset as u64).below(120) as usize;
    Stored {
        offset,
        timestamp: 2_000_000 + offset,
        key: (offset % 3 == 0).then(|| format!("key-{}", offset % 11).into_bytes()),
        value: Some(format!("record-{offset}-{}", "v".repeat(pad)).into_bytes()),
    }
}

fn batch_of(offsets: std::ops::Range<i64>, compression: Compression) -> Vec<u8> {
    let records: Vec<Stored> = offsets.map(record_at).collect();
    batch_with(
        compression,
        records.iter().map(|r| {
            (
                r.key.as_deref(),
                r.value.as_deref().unwrap_or_default(),
                r.timestamp,
            )
        }),
    )
}

/// Appends one budget of batches per permit until the permits stop,
/// flushing now and then and publishing every offset a flush reports
/// durable. A permit names how many batches into the budget to tell the
/// copier to start, so the copy races with the rest of the budget. Returns
/// the log end.
fn append_on_permits(
    log: &PartitionLog,
    permits: &Receiver<usize>,
    copy_now: &SyncSender<()>,
    durable: &AtomicI64,
) -> Result<i64> {
    let mut rng = Rng(SEED);
    let mut next = 0i64;
    while let Ok(copy_after) = permits.recv() {
        for appended in 0..BATCHES_PER_ROUND {
            if appended == copy_after {
                copy_now.send(()).context("the copier stopped early")?;
            }
            let count = 1 + rng.below(RECORDS_PER_BATCH_MAX) as i64;
            let compression = if rng.below(6) == 0 {
                Compression::Snappy
            } else {
                Compression::None
            };
            let bytes = batch_of(next..next + count, compression);
            let info = log.append(&bytes)?;
            ensure!(
                info.base_offset == next,
                "appended at {} where {next} was expected",
                info.base_offset
            );
            next += count;
            let reported = match rng.below(10) {
                0 => Some(log.flush()?),
                1 => Some(log.flush_to(next - rng.below(count as u64) as i64)?),
                _ => None,
            };
            if let Some(reported) = reported {
                durable.fetch_max(reported, Ordering::SeqCst);
            }
        }
    }
    Ok(next)
}

fn copy_if_present(from: &Path, to: &Path) -> Result<()> {
    match fs::copy(from, to) {
        Ok(_) => Ok(()),
        // A segment being created right now may not have its index files
        // yet; recovery makes them.
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("copying {}", from.display())),
    }
}

fn copy_as_a_crash_would_leave_it(from: &Path, to: &Path) -> Result<()> {
    copy_if_present(&from.join("recovery-point"), &to.join("recovery-point"))?;
    for base in segment_bases(from)?.into_iter().rev() {
        for extension in ["log", "index", "timeindex"] {
            let name = file_name(base, extension);
            copy_if_present(&from.join(&name), &to.join(&name))?;
        }
    }
    Ok(())
}

/// Opens a copy after its "crash" and checks it against what was appended.
fn check_copy(dir: &Path, durable_before_copy: i64, round: usize) -> Result<()> {
    let log = PartitionLog::open(dir, NAME, config(), false)?;
    let report = log.recovery_report();
    if let Some(corruption) = &report.corruption {
        bail!("round {round}: a copy taken mid-append must not be corrupt: {corruption}");
    }
    if let Some(truncation) = &report.truncation {
        ensure!(
            !truncation.lost_flushed_data(),
            "round {round}: {truncation}"
        );
    }
    let end = log.log_end_offset();
    ensure!(
        end >= durable_before_copy,
        "round {round}: the copy ends at {end} but {durable_before_copy} had been reported durable"
    );
    let records = read_all(&log, 0);
    ensure!(
        records.len() as i64 == end,
        "round {round}: {} records below log end {end}",
        records.len()
    );
    for (i, record) in records.iter().enumerate() {
        let expected = record_at(i as i64);
        ensure!(
            *record == expected,
            "round {round}: offset {i} holds {record:?}, expected {expected:?}"
        );
    }

    let info = log.append(&batch(&["after-the-crash"], 3_000_000))?;
    ensure!(
        info.base_offset == end,
        "round {round}: appended at {} after a log end of {end}",
        info.base_offset
    );
    let last = read_all(&log, end);
    ensure!(
        last.len() == 1 && last[0].value.as_deref() == Some(&b"after-the-crash"[..]),
        "round {round}: read back {last:?}"
    );
    Ok(())
}

#[test]
fn copies_taken_mid_append_recover_to_a_dense_prefix_that_keeps_every_flushed_offset() -> Result<()>
{
    let source = tempfile::tempdir()?;
    let log = PartitionLog::open(source.path(), NAME, config(), true)?;
    let durable = AtomicI64::new(0);
    let (permit, permits) = sync_channel::<usize>(0);
    let (copy_now, copy_signals) = sync_channel::<()>(1);

    let appended = std::thread::scope(|scope| -> Result<i64> {
        let (log, durable) = (&log, &durable);
        let appender = scope.spawn(move || append_on_permits(log, &permits, &copy_now, durable));
        let copies: Result<()> = (|| {
            let mut rng = Rng(!SEED);
            for round in 0..ROUNDS {
                let copy_after = rng.below(BATCHES_PER_ROUND as u64 / 2) as usize;
                permit
                    .send(copy_after)
                    .context("the appender stopped early")?;
                copy_signals.recv().context("the appender stopped early")?;
                let durable_before_copy = durable.load(Ordering::SeqCst);
                let copy = tempfile::tempdir()?;
                copy_as_a_crash_would_leave_it(source.path(), copy.path())?;
                check_copy(copy.path(), durable_before_copy, round)?;
            }
            Ok(())
        })();
        drop(permit);
        drop(copy_signals);
        let appended = appender
            .join()
            .map_err(|_| anyhow::anyhow!("the appender panicked"))??;
        copies?;
        Ok(appended)
    })?;

    ensure!(
        appended >= (ROUNDS * BATCHES_PER_ROUND) as i64,
        "only {appended} records appended"
    );
    assert_eq!(log.log_end_offset(), appended);
    let all = read_all(&log, 0);
    assert!(
        all.iter()
            .enumerate()
            .all(|(i, r)| *r == record_at(i as i64))
    );
    assert_eq!(all.len() as i64, appended);
    log.close()?;
    Ok(())
}
