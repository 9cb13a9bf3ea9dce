//! Any bytes as a committed group offset read back from the offset store:
//! the decoder returns its error, or a value that encodes (in the format
//! drawn in `strata::broker::group::offsets`) to bytes that decode to the
//! same value.

use strata::broker::group::offsets::{CommittedOffset, decode};

fn encode(committed: &CommittedOffset) -> Vec<u8> {
    let mut value = vec![1u8];
    value.extend_from_slice(&committed.offset.to_be_bytes());
    value.extend_from_slice(&committed.leader_epoch.to_be_bytes());
    value.extend_from_slice(&committed.commit_time_ms.to_be_bytes());
    match &committed.metadata {
        Some(text) => {
            let len = i32::try_from(text.len()).expect("metadata from a fuzz input is small");
            value.extend_from_slice(&len.to_be_bytes());
            value.extend_from_slice(text.as_bytes());
        }
        None => value.extend_from_slice(&(-1i32).to_be_bytes()),
    }
    value
}

pub fn check(data: &[u8]) {
    let Ok(committed) = decode(data) else {
        return;
    };
    let again = decode(&encode(&committed)).expect("a re-encoded value decodes");
    assert_eq!(again, committed);
}
