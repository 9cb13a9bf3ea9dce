//! Reading a partition's end offset from its files without opening the log:
//! for `status` while another process (an app in embedded mode, or a
//! broker) holds the data directory. Nothing is written or locked, so the
//! answer is a snapshot: the offset after the last whole batch of the newest
//! segment at the moment of reading.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::LogError;
use super::error::IoContext;
use strata_record::{BATCH_HEADER_BYTES, BatchHeader, RecordBatch};

/// The log end offset of `topic`/`partition` under `data_dir`; `None` if it
/// has no segment.
pub fn peek_log_end_offset(
    data_dir: &Path,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, LogError> {
    let dir = &super::log_manager::partition_dir(data_dir, topic, partition);
    let Some(&base) = segment_bases(dir)?.last() else {
        return Ok(None);
    };
    let mut end = base;
    walk_segment(dir, base, |header, _| {
        end = header.next_offset();
        Ok(true)
    })?;
    Ok(Some(end))
}

/// Visits every whole, checksum-verified batch of `topic`/`partition`
/// under `data_dir`, oldest first, reading the segment files without opening
/// the log (a snapshot, as for [`peek_log_end_offset`]). False when the
/// partition does not exist.
pub fn peek_batches(
    data_dir: &Path,
    topic: &str,
    partition: i32,
    mut visit: impl FnMut(RecordBatch<'_>) -> Result<(), LogError>,
) -> Result<bool, LogError> {
    let dir = &super::log_manager::partition_dir(data_dir, topic, partition);
    if !dir.exists() {
        return Ok(false);
    }
    let mut buffer = Vec::new();
    for base in segment_bases(dir)? {
        walk_segment(dir, base, |_, read| {
            read(&mut buffer)?;
            match RecordBatch::parse_and_verify(&buffer) {
                Ok(batch) => visit(batch).map(|()| true),
                // A damaged batch: nothing after it in the segment is read.
                Err(_) => Ok(false),
            }
        })?;
    }
    Ok(true)
}

/// The whole, checksum-verified batch of `topic`/`partition` under
/// `data_dir` that holds `offset`, handed to `visit` (read as
/// [`peek_batches`] reads, from the segment holding it only: the batch
/// headers before it are read, not their records). False when no batch
/// holds it (deleted, compacted away, at or past the end).
pub fn peek_batch_holding(
    data_dir: &Path,
    topic: &str,
    partition: i32,
    offset: i64,
    visit: impl FnOnce(RecordBatch<'_>),
) -> Result<bool, LogError> {
    let dir = &super::log_manager::partition_dir(data_dir, topic, partition);
    if !dir.exists() {
        return Ok(false);
    }
    let Some(&base) = segment_bases(dir)?.iter().rev().find(|&&b| b <= offset) else {
        return Ok(false);
    };
    let mut buffer = Vec::new();
    let mut found = false;
    walk_segment(dir, base, |header, read| {
        if header.next_offset() <= offset {
            return Ok(true);
        }
        if header.base_offset <= offset {
            read(&mut buffer)?;
            found = RecordBatch::parse_and_verify(&buffer).is_ok();
        }
        Ok(false)
    })?;
    if found && let Ok(batch) = RecordBatch::parse_and_verify(&buffer) {
        visit(batch);
    }
    Ok(found)
}

/// The log start offset of `topic`/`partition` as its files show it (the
/// oldest segment's base); `None` if it has no segment.
pub fn peek_log_start_offset(
    data_dir: &Path,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, LogError> {
    let dir = &super::log_manager::partition_dir(data_dir, topic, partition);
    Ok(segment_bases(dir)?.first().copied())
}

/// The newest record timestamp of the segment holding `offset` (what
/// time-based retention goes by), from its batch headers; `None` when no
/// segment holds it (at or past the end).
pub fn peek_segment_max_timestamp(
    data_dir: &Path,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<i64>, LogError> {
    let dir = &super::log_manager::partition_dir(data_dir, topic, partition);
    let Some(&base) = segment_bases(dir)?.iter().rev().find(|&&b| b <= offset) else {
        return Ok(None);
    };
    let (mut newest, mut end) = (None::<i64>, base);
    walk_segment(dir, base, |header, _| {
        newest = Some(newest.map_or(header.max_timestamp, |t| t.max(header.max_timestamp)));
        end = header.next_offset();
        Ok(true)
    })?;
    Ok(if offset < end { newest } else { None })
}

/// The base offsets of a partition directory's segments, ascending.
fn segment_bases(dir: &Path) -> Result<Vec<i64>, LogError> {
    let entries = std::fs::read_dir(dir).context(|| format!("listing {}", dir.display()))?;
    let mut bases = Vec::new();
    for entry in entries {
        let entry = entry.context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        if let Some(base) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<i64>().ok())
        {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Reads a batch into the buffer.
type ReadBatch<'a> = dyn FnMut(&mut Vec<u8>) -> Result<(), LogError> + 'a;

/// Reads a segment's batch headers in order up to the first that is torn
/// or invalid, or until `visit` (given each header and a way to read its
/// whole batch) says stop.
fn walk_segment(
    dir: &Path,
    base: i64,
    mut visit: impl FnMut(&BatchHeader, &mut ReadBatch<'_>) -> Result<bool, LogError>,
) -> Result<(), LogError> {
    let path = dir.join(super::file_name(base, "log"));
    let file = File::open(&path).context(|| format!("opening {}", path.display()))?;
    let size = file
        .metadata()
        .context(|| format!("reading the size of {}", path.display()))?
        .len();
    let mut position = 0u64;
    let mut header = [0u8; BATCH_HEADER_BYTES];
    while position + BATCH_HEADER_BYTES as u64 <= size {
        file.read_exact_at(&mut header, position)
            .context(|| format!("reading {} at {position}", path.display()))?;
        let Ok(parsed) = BatchHeader::parse(&header) else {
            break;
        };
        let batch_bytes = parsed.size_bytes() as u64;
        if parsed.check().is_err() || position + batch_bytes > size {
            break;
        }
        let at = position;
        let mut read = |buffer: &mut Vec<u8>| {
            buffer.resize(batch_bytes as usize, 0);
            file.read_exact_at(buffer, at)
                .context(|| format!("reading {} at {at}", path.display()))
        };
        if !visit(&parsed, &mut read)? {
            break;
        }
        position += batch_bytes;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LogConfig, LogManager};
    use strata_record::{BatchBuilder, NewRecord};

    #[test]
    fn the_end_offset_is_read_while_the_log_is_open_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogManager::open(dir.path(), LogConfig::default()).unwrap();
        let topic = log.create_topic("t", 1, Default::default()).unwrap();
        assert_eq!(peek_log_end_offset(dir.path(), "t", 0).unwrap(), Some(0));
        for _ in 0..3 {
            let mut builder = BatchBuilder::default();
            builder.push(NewRecord::new(None, b"a", 1)).unwrap();
            builder.push(NewRecord::new(None, b"b", 1)).unwrap();
            topic.partitions[0]
                .append(&builder.build().unwrap())
                .unwrap();
        }
        assert_eq!(peek_log_end_offset(dir.path(), "t", 0).unwrap(), Some(6));
        assert!(peek_log_end_offset(dir.path(), "missing", 0).is_err());
    }
}
