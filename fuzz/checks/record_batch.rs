//! Any bytes through the record batch decoder: header parsing, the CRC check,
//! record iteration and validation, and every codec's decompressor.
//!
//! Beyond "no panic", the decoders must agree with each other: a batch that
//! validates yields exactly `recordCount` well-formed records, and
//! `parse_and_verify` accepts exactly what `parse` plus `verify_crc` accept.

use strata::record::{BatchHeader, Compression, RecordBatch};

/// Limit handed to the decompressors; large enough for any input the fuzzer
/// produces to expand into, small enough that a bomb is caught quickly.
const DECOMPRESSED_BYTES_MAX: usize = 1 << 20;
const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

pub fn check(data: &[u8]) {
    for codec in CODECS {
        if let Ok(out) = codec.decompress(data, DECOMPRESSED_BYTES_MAX) {
            assert!(out.len() <= DECOMPRESSED_BYTES_MAX);
        }
    }
    if let (Ok((base_offset, size)), Ok(header)) =
        (BatchHeader::peek_size(data), BatchHeader::parse(data))
    {
        assert_eq!(
            (base_offset, size),
            (header.base_offset, header.size_bytes())
        );
    }
    let Ok(batch) = RecordBatch::parse(data) else {
        assert!(RecordBatch::parse_and_verify(data).is_err());
        return;
    };
    assert!(batch.size_bytes() <= data.len());
    assert_eq!(
        batch.verify_crc().is_ok(),
        RecordBatch::parse_and_verify(data).is_ok()
    );

    let mut well_formed = 0usize;
    let mut failed = false;
    if let Ok(records) = batch.records(DECOMPRESSED_BYTES_MAX) {
        // Keys read alone agree with the records read whole, as long as
        // those read.
        let mut keys = records.cursor();
        for record in records.iter() {
            match record {
                Ok(record) => {
                    well_formed += 1;
                    assert_eq!(record.headers().count(), record.header_count());
                    assert_eq!(keys.next_key(records.section()), Some(record.key));
                }
                Err(_) => failed = true,
            }
        }
        while keys.next_key(records.section()).is_some() {}
    }
    if batch.validate_records(DECOMPRESSED_BYTES_MAX).is_ok() {
        assert!(!failed);
        let declared = usize::try_from(batch.header().record_count).expect("validated count");
        assert_eq!(well_formed, declared);
    }
}
