//! The one request the harness sends itself: ListOffsets, to learn a
//! partition's log start and end offsets without going through a client
//! under test.

use std::net::TcpStream;
use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};

use crate::support::wait_until;
use crate::support::wire::{call_blocking, topic_name};

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
                .with_name(topic_name(topic))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(partition)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let mut stream = TcpStream::connect(addr).expect("connect to the broker");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout set");
    let response: ListOffsetsResponse =
        call_blocking(&mut stream, ApiKey::ListOffsets, VERSION, &request)
            .expect("ListOffsets answered");
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
    let what = format!("retention to move {topic}-{partition}'s log start to {log_start}");
    wait_until(&what, Duration::from_secs(60), || {
        offsets(addr, topic, partition).0 >= log_start
    });
}
