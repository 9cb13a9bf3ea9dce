//! `verify` reads what an open trusts without reading: a flipped byte in a
//! sealed segment below the recovery point is found, and nothing changes.

use crate::support;

use std::fs;

use strata::log::PartitionLog;

#[test]
fn verify_finds_a_flipped_byte_in_a_segment_that_a_clean_open_trusts() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<String> = (0..300).map(|i| format!("value-{i:03}")).collect();
    {
        let log = PartitionLog::open(dir.path(), "t-0", support::small_config(), true).unwrap();
        for chunk in values.chunks(3) {
            let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
            log.append(&support::batch(&chunk, 7)).unwrap();
        }
        assert!(log.segment_count() >= 2, "needs a sealed segment");
        assert_eq!(log.verify().unwrap(), None);
        log.close().unwrap();
    }
    let first = support::segment_logs(dir.path()).unwrap()[0].clone();
    let mut bytes = fs::read(&first).unwrap();
    // Inside the second batch's records: CRC-covered, header intact.
    let first_batch_len = strata::record::RecordBatch::parse(&bytes)
        .unwrap()
        .size_bytes();
    let at = first_batch_len + 70;
    bytes[at] ^= 0x40;
    fs::write(&first, &bytes).unwrap();

    let log = PartitionLog::open(dir.path(), "t-0", support::small_config(), true).unwrap();
    assert!(
        log.corruption().is_none(),
        "a clean open does not read sealed segments"
    );
    let found = log.verify().unwrap().expect("verify reads every batch");
    assert_eq!(found.segment, first);
    assert_eq!(found.position, first_batch_len as u64);
    assert_eq!(found.offset, 3);
    assert!(found.reason.contains("CRC"), "{}", found.reason);
    assert_eq!(fs::read(&first).unwrap(), bytes, "verify changes nothing");
}
