//! ListOffsets over the wire: by timestamp, and every special timestamp the
//! protocol versions served define — LATEST (-1), EARLIEST (-2),
//! MAX_TIMESTAMP (-3, v7+: the record with the largest timestamp, found
//! inside its compressed batch), EARLIEST_LOCAL (-4, v8+), LATEST_TIERED
//! (-5, v9+) — and UNSUPPORTED_VERSION for a special timestamp asked in an
//! older version or one no version served defines.

use crate::support;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use strata::broker::BrokerConfig;
use strata::record::Compression;
use support::InProcessBroker;
use support::wire::{call, topic_name};
use tokio::net::TcpStream;

/// (error code, offset, timestamp) for one partition and timestamp.
async fn list(
    stream: &mut TcpStream,
    version: i16,
    topic: &str,
    timestamp: i64,
) -> (i16, i64, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let response: ListOffsetsResponse = call(stream, ApiKey::ListOffsets, version, &request).await;
    let partition = &response.topics[0].partitions[0];
    (partition.error_code, partition.offset, partition.timestamp)
}

#[tokio::test]
async fn every_special_timestamp_is_answered_from_the_version_that_defines_it() {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic("times", 1, Default::default())
        .unwrap();
    broker
        .log
        .create_topic("empty", 1, Default::default())
        .unwrap();
    let log = broker.log.partition("times", 0).unwrap();
    // Offsets 0-2, 3-5 (max 90 at offset 4, mid-batch), 6-8 (ties 90 at
    // offset 7: the lower offset wins), 9.
    let batches: [(Compression, &[i64]); 4] = [
        (Compression::None, &[10, 20, 30]),
        (Compression::Zstd, &[40, 90, 50]),
        (Compression::Gzip, &[60, 90, 70]),
        (Compression::Lz4, &[80]),
    ];
    for (compression, timestamps) in batches {
        let batch = support::batch_with(
            compression,
            timestamps.iter().map(|&ts| (None, &b"value"[..], ts)),
        );
        log.append(&batch).unwrap();
    }
    let mut stream = broker.connect().await;
    let range = ApiKey::ListOffsets.valid_versions();
    assert_eq!(
        (range.min, range.max),
        (1, 10),
        "the versions this test covers"
    );
    for version in range.min..=range.max {
        let unsupported = (35, -1, -1);
        let at = |v: i16, answer: (i16, i64, i64)| if version >= v { answer } else { unsupported };
        assert_eq!(list(&mut stream, version, "times", -1).await, (0, 10, -1));
        assert_eq!(list(&mut stream, version, "times", -2).await, (0, 0, -1));
        assert_eq!(
            list(&mut stream, version, "times", -3).await,
            at(7, (0, 4, 90)),
            "v{version}"
        );
        assert_eq!(
            list(&mut stream, version, "empty", -3).await,
            at(7, (0, -1, -1)),
            "v{version}"
        );
        assert_eq!(
            list(&mut stream, version, "times", -4).await,
            at(8, (0, 0, -1)),
            "v{version}"
        );
        assert_eq!(
            list(&mut stream, version, "times", -5).await,
            at(9, (0, -1, -1)),
            "v{version}"
        );
        // EARLIEST_PENDING_UPLOAD needs v11; nothing defines -7.
        assert_eq!(list(&mut stream, version, "times", -6).await, unsupported);
        assert_eq!(list(&mut stream, version, "times", -7).await, unsupported);
        // By timestamp: the first record at or after it, exact.
        assert_eq!(list(&mut stream, version, "times", 45).await, (0, 4, 90));
        assert_eq!(list(&mut stream, version, "times", 75).await, (0, 4, 90));
        assert_eq!(list(&mut stream, version, "times", 91).await, (0, -1, -1));
    }
    broker.stop().await;
}
