//! Any bytes as a consumer's subscription, as a group leader receives it in
//! JoinGroup from another member: the decoder returns a protocol error, or
//! topics that encode (format version 0) to bytes that decode to the same
//! topics.

use strata::client::{ClientError, decode_subscription, encode_subscription};

pub fn check(data: &[u8]) {
    match decode_subscription(data) {
        Ok(topics) => {
            let again =
                decode_subscription(&encode_subscription(&topics).expect("decoded values encode"))
                    .expect("re-encoded topics decode");
            assert_eq!(again, topics);
        }
        Err(error) => assert!(matches!(error, ClientError::Protocol(_)), "{error}"),
    }
}
