//! Any bytes as a consumer's assignment, as a member receives it in
//! SyncGroup from the group leader: the decoder returns a protocol error, or
//! partitions that encode (format version 0) to bytes that decode to the
//! same partitions.

#![no_main]

use std::collections::BTreeMap;

use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{ConsumerProtocolAssignment, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use libfuzzer_sys::fuzz_target;
use strata::client::{ClientError, TopicPartition, decode_assignment};

fn encode(partitions: &[TopicPartition]) -> Vec<u8> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
        by_topic
            .into_iter()
            .map(|(topic, partitions)| {
                AssignedTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(partitions)
            })
            .collect(),
    );
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    assignment.encode(&mut buf, 0).expect("assignment encodes");
    buf.to_vec()
}

fuzz_target!(|data: &[u8]| {
    match decode_assignment(data) {
        Ok(partitions) => {
            let again =
                decode_assignment(&encode(&partitions)).expect("re-encoded partitions decode");
            assert_eq!(again, partitions);
        }
        Err(error) => assert!(matches!(error, ClientError::Protocol(_)), "{error}"),
    }
});
