//! The one request the harness sends itself: ListOffsets, to learn a
//! partition's log start and end offsets without going through a client
//! under test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, ListOffsetsRequest, ListOffsetsResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

const VERSION: i16 = 1;
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

/// `(log start offset, log end offset)` of one partition.
pub fn offsets(addr: &str, topic: &str, partition: i32) -> (i64, i64) {
    (
        list_offset(addr, topic, partition, EARLIEST),
        list_offset(addr, topic, partition, LATEST),
    )
}

fn list_offset(addr: &str, topic: &str, partition: i32, timestamp: i64) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(partition)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let key = ApiKey::ListOffsets;
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(VERSION)
        .with_correlation_id(1)
        .encode(&mut body, key.request_header_version(VERSION))
        .expect("header encodes");
    request.encode(&mut body, VERSION).expect("request encodes");

    let mut stream = TcpStream::connect(addr).expect("connect to the broker");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout set");
    stream
        .write_all(&(body.len() as i32).to_be_bytes())
        .and_then(|()| stream.write_all(&body))
        .expect("request sent");
    let mut size = [0; 4];
    stream.read_exact(&mut size).expect("response size read");
    let mut frame = vec![0; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut frame).expect("response read");
    let mut frame = bytes::Bytes::from(frame);
    ResponseHeader::decode(&mut frame, key.response_header_version(VERSION))
        .expect("response header decodes");
    let response = ListOffsetsResponse::decode(&mut frame, VERSION).expect("response decodes");
    let answer = &response.topics[0].partitions[0];
    assert_eq!(
        answer.error_code, 0,
        "ListOffsets {topic}-{partition} at {timestamp}"
    );
    answer.offset
}

/// Waits until `topic`'s partition starts at `log_start` or later (retention
/// runs on the broker's interval).
pub fn wait_for_log_start(addr: &str, topic: &str, partition: i32, log_start: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (start, _) = offsets(addr, topic, partition);
        if start >= log_start {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "retention never moved {topic}-{partition}'s log start to {log_start} (it is {start})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
