//! File systems that extend a file before writing its data can leave, after a
//! crash, a `.log` that ends in zeros or in stale bytes after its last whole
//! batch. No valid batch can follow such a tail (appends are sequential), so
//! recovery cuts it, keeps every batch before it and warns.

use crate::support;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use strata::log::{LogConfig, PartitionLog, Truncation};
use strata::record::{BATCH_HEADER_BYTES, set_base_offset};
use support::{Rng, Stored, append_and_decode, batch, read_all, segment_logs, small_config};
use tempfile::TempDir;

const NAME: &str = "sensor-0";
const BATCHES: usize = 40;
/// Where the CRC32C sits in a batch header.
const CRC_AT: usize = 17;

/// A crashed partition whose active segment is about to get a bad tail.
struct Crashed {
    dir: TempDir,
    config: LogConfig,
    records: Vec<Stored>,
    active_log: PathBuf,
    /// Length of the active segment's file: the end of its last whole batch.
    active_len: u64,
}

/// Appends batches, flushes all of them (so a cut of the tail loses nothing
/// that was reported flushed) and drops the log without closing it.
fn crash(config: LogConfig) -> Result<Crashed> {
    let dir = tempfile::tempdir()?;
    let log = PartitionLog::open(dir.path(), NAME, config.clone(), true)?;
    let mut records = Vec::new();
    for i in 0..BATCHES {
        let values: Vec<String> = (0..1 + i % 3)
            .map(|j| format!("reading-{i}-{j}:{}", "7".repeat(i * 3 % 50)))
            .collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let bytes = batch(&values, 10_000 + i as i64);
        records.extend(append_and_decode(&log, &bytes)?);
    }
    log.flush()?;
    drop(log);
    let active_log = segment_logs(dir.path())?.pop().context("no segment file")?;
    let active_len = fs::metadata(&active_log)?.len();
    ensure!(active_len > 0, "the active segment should hold batches");
    Ok(Crashed {
        dir,
        config,
        records,
        active_log,
        active_len,
    })
}

fn append_to_file(path: &Path, bytes: &[u8]) -> Result<()> {
    fs::OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(bytes)?;
    Ok(())
}

/// Puts `tail` after the last batch, reopens after the crash, and checks the
/// tail was cut with a warning and everything before it is intact.
fn check_tail_is_cut(config: LogConfig, tail: &[u8], what: &str) -> Result<()> {
    let crashed = crash(config)?;
    append_to_file(&crashed.active_log, tail)?;
    let log = PartitionLog::open(crashed.dir.path(), NAME, crashed.config.clone(), false)?;

    let report = log.recovery_report();
    assert!(report.corruption.is_none(), "{what}: {report:?}");
    let truncation: &Truncation = report
        .truncation
        .as_ref()
        .with_context(|| format!("{what}: the bad tail is not reported"))?;
    let end_offset = crashed.records.len() as i64;
    assert_eq!(truncation.segment, crashed.active_log, "{what}");
    assert_eq!(truncation.position, crashed.active_len, "{what}");
    assert_eq!(truncation.bytes_cut, tail.len() as u64, "{what}");
    assert_eq!(truncation.log_end_offset, end_offset, "{what}");
    assert!(!truncation.lost_flushed_data(), "{what}: {truncation}");
    let warning = truncation.to_string();
    assert!(
        warning.contains(&format!("{} bytes", tail.len())),
        "{what}: {warning}"
    );

    assert_eq!(
        fs::metadata(&crashed.active_log)?.len(),
        crashed.active_len,
        "{what}"
    );
    assert_eq!(log.log_end_offset(), end_offset, "{what}");
    assert_eq!(read_all(&log, 0), crashed.records, "{what}");

    let next = append_and_decode(&log, &batch(&["after-the-cut"], 20_000))?;
    assert_eq!(next[0].offset, end_offset, "{what}");
    let mut expected = crashed.records.clone();
    expected.extend(next);
    assert_eq!(read_all(&log, 0), expected, "{what}");
    Ok(())
}

/// A whole batch that would come next in the log, with its CRC broken: every
/// field a header check reads looks right.
fn batch_with_bad_crc(next_offset: i64) -> Vec<u8> {
    let mut bytes = batch(&["never-acknowledged", "stale-bytes"], 30_000);
    set_base_offset(&mut bytes, next_offset);
    bytes[CRC_AT] ^= 0x5a;
    bytes
}

#[test]
fn a_zero_filled_tail_is_cut_and_the_batches_before_it_kept() -> Result<()> {
    for len in [1, 11, 60, 61, 62, 4096, 65_536] {
        check_tail_is_cut(
            LogConfig::default(),
            &vec![0; len],
            &format!("{len} zero bytes"),
        )?;
    }
    Ok(())
}

#[test]
fn a_zero_filled_tail_after_sealed_segments_is_cut() -> Result<()> {
    check_tail_is_cut(small_config(), &[0; 4096], "4096 zero bytes")
}

#[test]
fn a_pseudo_random_garbage_tail_is_cut() -> Result<()> {
    for seed in 0..16 {
        let mut rng = Rng(seed);
        let len = 1 + (rng.next_u64() % 5000) as usize;
        let garbage = rng.bytes(len);
        check_tail_is_cut(
            LogConfig::default(),
            &garbage,
            &format!("{len} garbage bytes from seed {seed}"),
        )?;
    }
    Ok(())
}

#[test]
fn a_garbage_tail_after_sealed_segments_is_cut() -> Result<()> {
    let garbage = Rng(99).bytes(3000);
    check_tail_is_cut(small_config(), &garbage, "3000 garbage bytes from seed 99")
}

#[test]
fn a_tail_that_starts_like_a_batch_but_fails_its_crc_is_cut() -> Result<()> {
    let next_offset = crash(LogConfig::default())?.records.len() as i64;
    let whole = batch_with_bad_crc(next_offset);
    ensure!(whole[16] == 2, "the fake batch must carry magic byte 2");

    check_tail_is_cut(LogConfig::default(), &whole, "a whole batch with a bad CRC")?;

    let mut followed = whole.clone();
    followed.extend(Rng(7).bytes(2000));
    check_tail_is_cut(
        LogConfig::default(),
        &followed,
        "a batch with a bad CRC, then garbage",
    )?;

    let mut header_then_garbage = whole[..BATCH_HEADER_BYTES].to_vec();
    header_then_garbage.extend(Rng(8).bytes(whole.len() - BATCH_HEADER_BYTES));
    check_tail_is_cut(
        LogConfig::default(),
        &header_then_garbage,
        "a plausible header over garbage",
    )?;

    let mut runs_past_the_end = whole;
    runs_past_the_end.truncate(runs_past_the_end.len() - 10);
    check_tail_is_cut(
        LogConfig::default(),
        &runs_past_the_end,
        "a bad-CRC batch that also runs past the end of the file",
    )
}
