//! Any bytes as a consumer's subscription, as a group leader receives it in
//! JoinGroup from another member: the decoder returns a protocol error, or
//! topics that encode (format version 0) to bytes that decode to the same
//! topics.

#![no_main]

use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::{Encodable, StrBytes};
use libfuzzer_sys::fuzz_target;
use strata::client::{ClientError, decode_subscription};

fn encode(topics: &[String]) -> Vec<u8> {
    let subscription = ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| StrBytes::from_string(t.clone()))
            .collect(),
    );
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    subscription
        .encode(&mut buf, 0)
        .expect("subscription encodes");
    buf.to_vec()
}

fuzz_target!(|data: &[u8]| {
    match decode_subscription(data) {
        Ok(topics) => {
            let again = decode_subscription(&encode(&topics)).expect("re-encoded topics decode");
            assert_eq!(again, topics);
        }
        Err(error) => assert!(matches!(error, ClientError::Protocol(_)), "{error}"),
    }
});
