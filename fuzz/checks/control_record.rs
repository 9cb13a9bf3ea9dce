//! Any bytes as a control batch read back from a log: parsing it as a
//! transaction marker returns its error, or a marker whose own batch parses
//! back to the same marker.

use strata::record::{ControlRecord, RecordBatch};

pub fn check(data: &[u8]) {
    let Ok(batch) = RecordBatch::parse(data) else {
        return;
    };
    let Ok(marker) = ControlRecord::of(&batch) else {
        return;
    };
    let bytes = marker.batch(7, 1, 0);
    let again = RecordBatch::parse_and_verify(&bytes).expect("a marker batch parses");
    assert_eq!(ControlRecord::of(&again).expect("and is a marker"), marker);
}
