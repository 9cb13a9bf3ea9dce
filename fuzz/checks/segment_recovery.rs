//! Any bytes as the only segment of a partition that did not shut down
//! cleanly: recovery must open it (or refuse with an error), and whatever the
//! log then serves must be whole, CRC-valid batches in offset order, ending
//! at the log end offset.

use strata::log::{LogConfig, PartitionLog, file_name};
use strata::record::RecordBatch;

/// Small, so that a short input already spans several index entries.
const INDEX_INTERVAL_BYTES: u64 = 64;
const READ_BYTES_MAX: u64 = 64 << 10;

pub fn check(data: &[u8]) {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join(file_name(0, "log")), data).expect("segment written");
    let config = LogConfig {
        index_interval_bytes: INDEX_INTERVAL_BYTES,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    };
    let Ok(log) = PartitionLog::open(dir.path(), "fuzz-0", config, false) else {
        return;
    };
    let end = log.log_end_offset();
    assert!(log.log_start_offset() <= end);
    assert!(log.size_bytes() <= data.len() as u64);

    let mut offset = log.log_start_offset();
    let mut previous_base = None;
    while offset < end {
        // A read at or past a corrupt batch is refused; that ends the walk.
        let Ok(read) = log.read(offset, READ_BYTES_MAX) else {
            assert!(
                log.corruption().is_some(),
                "read at {offset} failed without corruption"
            );
            break;
        };
        let bytes = read.read_to_vec().expect("slices read back");
        assert!(
            !bytes.is_empty(),
            "no progress at offset {offset} before the end {end}"
        );
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let batch = RecordBatch::parse_and_verify(rest).expect("served batches are valid");
            let header = batch.header();
            assert!(
                header.last_offset() >= offset,
                "a batch wholly before {offset}"
            );
            assert!(
                previous_base < Some(header.base_offset),
                "offsets go backwards"
            );
            previous_base = Some(header.base_offset);
            offset = header.next_offset();
            rest = &rest[batch.size_bytes()..];
        }
    }
    assert!(offset >= end || log.corruption().is_some());
}
