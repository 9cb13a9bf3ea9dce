//! Any bytes as a consumer's assignment, as a member receives it in
//! SyncGroup from the group leader: the decoder returns a protocol error, or
//! partitions that encode (format version 0) to bytes that decode to the
//! same partitions.

use strata::client::{ClientError, decode_assignment, encode_assignment};

pub fn check(data: &[u8]) {
    match decode_assignment(data) {
        Ok(partitions) => {
            let again =
                decode_assignment(&encode_assignment(&partitions).expect("decoded values encode"))
                    .expect("re-encoded partitions decode");
            assert_eq!(again, partitions);
        }
        Err(error) => assert!(matches!(error, ClientError::Protocol(_)), "{error}"),
    }
}
