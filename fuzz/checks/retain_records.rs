//! Any bytes as a batch the cleaner rewrites, keeping the records a mask
//! (from the input's first byte) picks: the rewrite is refused with an
//! error, or it parses and verifies, keeps the batch's base offset and
//! last offset, and holds exactly the picked records at their offsets.

use strata::record::{RecordBatch, retain_records};

const DECOMPRESSED_MAX: usize = 1 << 20;

pub fn check(data: &[u8]) {
    let Some((&mask, bytes)) = data.split_first() else {
        return;
    };
    let Ok(batch) = RecordBatch::parse(bytes) else {
        return;
    };
    let Ok(records) = batch.records(DECOMPRESSED_MAX) else {
        return;
    };
    let Ok(all) = records.iter().collect::<Result<Vec<_>, _>>() else {
        return;
    };
    let picked = |index: usize| mask & (1 << (index % 8)) != 0;
    let wanted: Vec<i64> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| picked(*i))
        .map(|(_, r)| r.offset)
        .collect();
    let mut index = 0;
    let Ok(rewritten) = retain_records(&batch, DECOMPRESSED_MAX, |_| {
        index += 1;
        picked(index - 1)
    }) else {
        return;
    };
    let Some(rewritten) = rewritten else {
        assert_eq!(wanted.len(), all.len());
        return;
    };
    let again = RecordBatch::parse_and_verify(&rewritten).expect("a rewritten batch verifies");
    assert_eq!(again.header().base_offset, batch.header().base_offset);
    assert_eq!(again.header().last_offset(), batch.header().last_offset());
    let kept: Vec<i64> = again
        .records(DECOMPRESSED_MAX)
        .expect("its records decode")
        .iter()
        .map(|r| r.expect("each record decodes").offset)
        .collect();
    assert_eq!(kept, wanted);
}
