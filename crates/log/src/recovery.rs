//! Recovery: rebuilding a segment's in-memory state and indexes by walking
//! its batches, and telling a torn tail from corruption.
//!
//! Crash policy, argued case by case:
//! - A crash during an append leaves the `.log` file ending inside a batch, or
//!   (on file systems that extend before writing) in zeros or stale garbage,
//!   with nothing valid after it. Such a tail is cut to the last whole batch,
//!   with a warning giving the bytes cut and whether any of them lay below the
//!   recovery point, i.e. had been reported flushed.
//! - A batch that fails its checks with a CRC-valid batch somewhere after it
//!   is corruption. (A power loss can also leave such a hole in data that was
//!   never synced, since unsynced pages reach the disk in any order.) Either
//!   way the log cannot prove the bytes expendable, so nothing is deleted: the
//!   partition serves offsets below the bad batch and refuses everything from
//!   it on, and an operator decides.
//! - Index files are derived data: they are rebuilt here from the log and
//!   never trusted after an unclean shutdown.

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use strata_record::{BATCH_HEADER_BYTES, BatchHeader, RecordBatch};

use super::error::IoContext;
use super::files::list_dir;
use super::segment::{BatchInfo, COMPACTED_EXTENSION, Segment, file_name};
use super::storage::Disk;
use super::{LogConfig, LogError};

/// Bytes read at a time while searching for a valid batch after a bad one.
const SEARCH_WINDOW_BYTES: usize = 1 << 20;

/// How a walk over a segment ended.
#[derive(Debug)]
pub(crate) enum ScanEnd {
    /// Every byte of the file is whole, valid batches.
    Clean,
    /// Bytes from `position` on are not a valid batch, and nothing valid follows.
    Torn { position: u64, reason: String },
    /// Bytes at `position` are not a valid batch but a valid batch follows.
    Corrupt { position: u64, reason: String },
}

/// Walks every batch of the segment's `.log` file from the start, checking
/// headers, CRCs and offset order, and rebuilds the indexes as it goes.
/// Leaves the segment's size at the end of the last valid batch.
pub(crate) fn scan_segment(
    segment: &mut Segment,
    file_len: u64,
    index_interval_bytes: u64,
) -> Result<ScanEnd, LogError> {
    segment.reset_for_scan();
    segment.set_scanned_size(file_len);
    let mut position = 0u64;
    let mut buf = Vec::new();
    let end = loop {
        if position == file_len {
            break ScanEnd::Clean;
        }
        match check_batch_at(segment, position, file_len, segment.next_offset(), &mut buf)? {
            Ok(info) => {
                segment.reserve_index_entries(1)?;
                segment.note_batch(position, info, index_interval_bytes);
                position += info.size;
            }
            Err(reason) => {
                let after =
                    find_valid_batch(segment, position + 1, file_len, segment.next_offset())?;
                break match after {
                    Some(valid_at) => ScanEnd::Corrupt {
                        position,
                        reason: format!("{reason}; a valid batch follows at position {valid_at}"),
                    },
                    None => ScanEnd::Torn { position, reason },
                };
            }
        }
    };
    segment.set_scanned_size(position);
    Ok(end)
}

/// Walks every batch of a segment without changing anything, checking each
/// as recovery does (header, CRC, dense offsets). Returns the first bad
/// batch as (position, offset, reason).
pub(crate) fn verify_segment(segment: &Segment) -> Result<Option<(u64, i64, String)>, LogError> {
    let mut position = 0;
    let mut next_offset = segment.base_offset();
    let mut buf = Vec::new();
    while position < segment.size_bytes() {
        match check_batch_at(
            segment,
            position,
            segment.size_bytes(),
            next_offset,
            &mut buf,
        )? {
            Ok(info) => {
                position += info.size;
                next_offset = info.last_offset + 1;
            }
            Err(reason) => return Ok(Some((position, next_offset, reason))),
        }
    }
    Ok(None)
}

/// Checks the batch at `position`: `Ok(Err(reason))` if it is not a whole,
/// valid batch starting at `next_offset`.
fn check_batch_at(
    segment: &Segment,
    position: u64,
    file_len: u64,
    next_offset: i64,
    buf: &mut Vec<u8>,
) -> Result<Result<BatchInfo, String>, LogError> {
    let available = file_len - position;
    let header_len = BATCH_HEADER_BYTES.min(usize::try_from(available).unwrap_or(usize::MAX));
    buf.resize(header_len, 0);
    read_at(segment, buf, position)?;
    let header = match BatchHeader::parse(buf).and_then(|h| h.check().map(|()| h)) {
        Ok(header) => header,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let size = header.size_bytes() as u64;
    if size > available {
        return Ok(Err(format!(
            "batch of {size} bytes runs past the end of the file ({available} bytes left)"
        )));
    }
    // Offsets are dense: each batch starts where the previous one ended, or
    // later in a compacted segment. (baseOffset is outside the CRC, so this
    // is its only check.)
    if !segment.may_start_at(header.base_offset, next_offset) {
        return Ok(Err(format!(
            "batch starts at offset {} where {next_offset} was expected",
            header.base_offset
        )));
    }
    if header
        .base_offset
        .checked_add(i64::from(header.last_offset_delta) + 1)
        .is_none()
        || header.last_offset() - segment.base_offset() > i64::from(i32::MAX)
    {
        return Ok(Err(format!(
            "batch offsets {}..={} do not fit the segment based at {}",
            header.base_offset,
            header.last_offset(),
            segment.base_offset()
        )));
    }
    buf.resize(header.size_bytes(), 0);
    read_at(segment, buf, position)?;
    if let Err(e) = RecordBatch::parse_and_verify(buf) {
        return Ok(Err(e.to_string()));
    }
    Ok(Ok(BatchInfo::of(&header)))
}

/// The position of the first CRC-valid batch at or after `from` whose offsets
/// are at or above `next_offset`.
fn find_valid_batch(
    segment: &Segment,
    from: u64,
    file_len: u64,
    next_offset: i64,
) -> Result<Option<u64>, LogError> {
    let mut window = Vec::new();
    let mut batch = Vec::new();
    let mut start = from;
    while start + (BATCH_HEADER_BYTES as u64) <= file_len {
        let len = (file_len - start).min(SEARCH_WINDOW_BYTES as u64) as usize;
        window.resize(len, 0);
        read_at(segment, &mut window, start)?;
        let candidates = len.saturating_sub(BATCH_HEADER_BYTES) + 1;
        for i in 0..candidates {
            if window[i + 16] != 2 {
                continue;
            }
            let Ok(header) = BatchHeader::parse(&window[i..]) else {
                continue;
            };
            let position = start + i as u64;
            if header.check().is_err()
                || header.base_offset < next_offset
                || header.last_offset() - segment.base_offset() > i64::from(i32::MAX)
                || header.size_bytes() as u64 > file_len - position
            {
                continue;
            }
            if let Ok(Ok(_)) =
                check_batch_at(segment, position, file_len, header.base_offset, &mut batch)
            {
                return Ok(Some(position));
            }
        }
        start += candidates as u64;
    }
    Ok(None)
}

fn read_at(segment: &Segment, buf: &mut [u8], position: u64) -> Result<(), LogError> {
    segment
        .log_file()
        .read_exact_at(buf, position)
        .context(|| format!("reading {} at {position}", segment.log_path().display()))
}

/// The segments of a partition as recovery left them, oldest first, and what
/// it found.
pub(crate) struct LoadedSegments {
    pub segments: BTreeMap<i64, Segment>,
    pub report: RecoveryReport,
}

/// Opens every segment in `dir`. After a clean shutdown all are trusted (their
/// indexes checked); otherwise segments from the one holding
/// `recovery_point` on are walked batch by batch. Stops at corruption or at a
/// torn tail, so the last loaded segment is where the log now ends.
pub(crate) fn load_segments(
    disk: &Disk,
    dir: &Path,
    name: &str,
    config: &LogConfig,
    clean: bool,
    recovery_point: i64,
) -> Result<LoadedSegments, LogError> {
    let bases = list_segments(disk, dir)?;
    let mut report = RecoveryReport {
        clean,
        ..RecoveryReport::default()
    };
    let mut segments: BTreeMap<i64, Segment> = BTreeMap::new();
    for (i, &base) in bases.iter().enumerate() {
        let next_base = bases.get(i + 1).copied();
        let mut segment = Segment::open(disk, dir, base, config, next_base.is_none())?;
        if let Some(previous) = segments.values().last().map(Segment::next_offset)
            && previous != base
        {
            report.corruption = Some(Corruption {
                segment: segment.log_path(),
                position: 0,
                offset: previous,
                reason: format!(
                    "segment starts at offset {base} but the previous one ends at {previous}"
                ),
            });
            break;
        }
        let trusted = clean || next_base.is_some_and(|next| next <= recovery_point);
        let mut needs_scan = !trusted;
        if trusted && let Err(reason) = segment.load_trusted(config.index_interval_bytes)? {
            tracing::warn!(partition = name, segment = %segment.log_path().display(), %reason, "rebuilding index");
            report.indexes_rebuilt.push((segment.log_path(), reason));
            needs_scan = true;
        }
        if needs_scan {
            report.segments_scanned += 1;
            segment.unseal(config);
            let file_len = segment.size_bytes();
            match scan_segment(&mut segment, file_len, config.index_interval_bytes)? {
                ScanEnd::Clean => {}
                ScanEnd::Torn { position, reason } => {
                    match later_segments_hold_data(dir, &bases[i + 1..])? {
                        Some(later) => {
                            let reason =
                                format!("{reason}; later segment {} holds data", later.display());
                            report.corruption = Some(corruption_at(&segment, position, reason));
                        }
                        None => {
                            let truncation = cut_torn_tail(
                                &mut segment,
                                file_len,
                                position,
                                recovery_point,
                                reason,
                            )?;
                            if truncation.lost_flushed_data() {
                                tracing::error!(partition = name, "{truncation}");
                            } else {
                                tracing::warn!(partition = name, "{truncation}");
                            }
                            report.truncation = Some(truncation);
                            // Later segments are empty; the cut one is the end.
                            for &empty in &bases[i + 1..] {
                                Segment::open(disk, dir, empty, config, false)?.delete()?;
                            }
                            // The open syncs `dir` after recovery, so these
                            // deletions are durable before any append.
                        }
                    }
                }
                ScanEnd::Corrupt { position, reason } => {
                    report.corruption = Some(corruption_at(&segment, position, reason));
                }
            }
            let stops_here = report.corruption.is_some() || report.truncation.is_some();
            if next_base.is_some() && !stops_here {
                // Rebuilt indexes of a sealed segment are trimmed now.
                segment.seal()?;
            }
        }
        let stop = report.corruption.is_some() || report.truncation.is_some();
        segments.insert(base, segment);
        if stop {
            break;
        }
    }
    if let Some(corruption) = &report.corruption {
        tracing::error!(
            partition = name,
            "{corruption}; the partition will not serve or accept offsets from {}",
            corruption.offset
        );
    }
    Ok(LoadedSegments { segments, report })
}

fn corruption_at(segment: &Segment, position: u64, reason: String) -> Corruption {
    Corruption {
        segment: segment.log_path(),
        position,
        offset: segment.next_offset(),
        reason,
    }
}

fn cut_torn_tail(
    segment: &mut Segment,
    file_len: u64,
    position: u64,
    recovery_point: i64,
    reason: String,
) -> Result<Truncation, LogError> {
    segment.truncate_file(position)?;
    Ok(Truncation {
        segment: segment.log_path(),
        position,
        bytes_cut: file_len - position,
        log_end_offset: segment.next_offset(),
        recovery_point,
        reason,
    })
}

/// Base offsets of the `.log` files in `dir`, ascending. Index files without
/// a log are derived data and removed.
fn list_segments(disk: &Disk, dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut bases = Vec::new();
    let mut orphans = Vec::new();
    for path in list_dir(dir)? {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some((stem, extension)) = name.split_once('.') else {
            continue;
        };
        let Ok(base) = stem.parse::<i64>() else {
            continue;
        };
        if stem.len() != 20 {
            continue;
        }
        match extension {
            "log" => bases.push(base),
            "index" | "timeindex" => orphans.push((base, path.clone())),
            extension if extension == COMPACTED_EXTENSION => orphans.push((base, path.clone())),
            _ => {}
        }
    }
    bases.sort_unstable();
    for (base, path) in orphans {
        if bases.binary_search(&base).is_err() {
            disk.remove_if_exists(&path)?;
        }
    }
    Ok(bases)
}

fn later_segments_hold_data(dir: &Path, bases: &[i64]) -> Result<Option<PathBuf>, LogError> {
    for &base in bases {
        let path = dir.join(file_name(base, "log"));
        let len = std::fs::metadata(&path)
            .context(|| format!("reading {}", path.display()))?
            .len();
        if len > 0 {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// What opening one partition found and did, for logs and tests.
#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    /// Whether the partition was opened after a clean shutdown.
    pub clean: bool,
    /// Segments walked batch by batch.
    pub segments_scanned: usize,
    /// Segments whose index files were rebuilt (checks failed or missing).
    pub indexes_rebuilt: Vec<(PathBuf, String)>,
    /// A torn tail that was cut off.
    pub truncation: Option<Truncation>,
    /// Corruption that stops the partition from serving past it.
    pub corruption: Option<Corruption>,
    /// The producer state rebuilt from the batch headers left after recovery.
    pub producer_state: super::ProducerStateLoad,
}

/// A torn tail cut during recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    pub segment: PathBuf,
    pub position: u64,
    pub bytes_cut: u64,
    /// Offset the log now ends at.
    pub log_end_offset: i64,
    /// The recovery point: offsets below it had been reported flushed.
    pub recovery_point: i64,
    pub reason: String,
}

impl Truncation {
    /// Whether any cut byte had been reported flushed (acknowledged as
    /// durable). That means the disk lost data it had confirmed.
    pub fn lost_flushed_data(&self) -> bool {
        self.log_end_offset < self.recovery_point
    }
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cut {} bytes of torn tail from {} at position {} ({}); the log now ends at offset {}; ",
            self.bytes_cut,
            self.segment.display(),
            self.position,
            self.reason,
            self.log_end_offset
        )?;
        if self.lost_flushed_data() {
            write!(
                f,
                "offsets {}..{} HAD BEEN REPORTED FLUSHED and are lost",
                self.log_end_offset, self.recovery_point
            )
        } else {
            write!(f, "none of the cut bytes had been reported flushed")
        }
    }
}

/// A bad batch with valid data after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    pub segment: PathBuf,
    pub position: u64,
    /// First offset the partition cannot serve.
    pub offset: i64,
    pub reason: String,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "corrupt batch in {} at position {} (offset {}): {}",
            self.segment.display(),
            self.position,
            self.offset,
            self.reason
        )
    }
}
