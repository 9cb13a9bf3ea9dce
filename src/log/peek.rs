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
use crate::record::{BATCH_HEADER_BYTES, BatchHeader};

/// The log end offset of `topic`/`partition` under `data_dir`; `None` if it
/// has no segment.
pub fn peek_log_end_offset(
    data_dir: &Path,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, LogError> {
    let dir = &super::log_manager::partition_dir(data_dir, topic, partition);
    let mut newest: Option<i64> = None;
    let entries = std::fs::read_dir(dir).context(|| format!("listing {}", dir.display()))?;
    for entry in entries {
        let entry = entry.context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let Some(base) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<i64>().ok())
        else {
            continue;
        };
        newest = Some(newest.map_or(base, |b| b.max(base)));
    }
    let Some(base) = newest else {
        return Ok(None);
    };
    let path = dir.join(super::file_name(base, "log"));
    let file = File::open(&path).context(|| format!("opening {}", path.display()))?;
    let size = file
        .metadata()
        .context(|| format!("reading the size of {}", path.display()))?
        .len();
    let mut end = base;
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
        end = parsed.next_offset();
        position += batch_bytes;
    }
    Ok(Some(end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{LogConfig, LogManager};
    use crate::record::{BatchBuilder, NewRecord};

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
