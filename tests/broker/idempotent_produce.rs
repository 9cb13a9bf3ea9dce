//! Idempotent producers over a real socket: InitProducerId in every version
//! (new ids, KIP-360 epoch bumps, transactional ids and fencing), and
//! Produce answering a resend with the original offset, a gap with
//! OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch with INVALID_PRODUCER_EPOCH, a
//! forgotten resend with DUPLICATE_SEQUENCE_NUMBER and a transactional batch
//! without a transactional id with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

use crate::support;

use std::sync::Arc;

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, InitProducerIdResponse, ProduceResponse,
};
use strata::broker::BrokerConfig;
use strata::log::PartitionLog;
use strata::record::{BatchBuilder, Compression, NewRecord};
use support::wire::{call, init_producer_id_request, produce_answer, produce_request};
use support::{InProcessBroker, producer_batch};
use tokio::net::TcpStream;

const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const TOPIC: &str = "idem";
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_REQUEST: i16 = 42;
const PRODUCER_FENCED: i16 = 90;

/// A broker in this process holding `TOPIC` with two partitions.
async fn start() -> InProcessBroker {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic(TOPIC, 2, Default::default())
        .unwrap();
    broker
}

fn partition(broker: &InProcessBroker, partition: i32) -> Arc<PartitionLog> {
    broker.log.partition(TOPIC, partition).unwrap()
}

/// (error code, producer id, epoch)
async fn init(
    stream: &mut TcpStream,
    version: i16,
    transactional_id: Option<&str>,
    current: Option<(i64, i16)>,
) -> (i16, i64, i16) {
    let request = init_producer_id_request(transactional_id, current);
    let response: InitProducerIdResponse =
        call(stream, ApiKey::InitProducerId, version, &request).await;
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

fn batch(producer_id: i64, epoch: i16, first_sequence: i32, values: &[&str]) -> Vec<u8> {
    producer_batch(
        Compression::Lz4,
        (producer_id, epoch),
        first_sequence,
        values,
    )
}

/// (error code, base offset)
async fn produce(
    stream: &mut TcpStream,
    version: i16,
    acks: i16,
    partition: i32,
    records: Vec<u8>,
) -> (i16, i64) {
    let request = produce_request(acks, TOPIC, partition, records);
    let response: ProduceResponse = call(stream, ApiKey::Produce, version, &request).await;
    produce_answer(&response)
}

#[tokio::test]
async fn api_versions_lists_init_producer_id_up_to_the_version_it_decodes() {
    let broker = start().await;
    let mut stream = broker.connect().await;
    let response: ApiVersionsResponse = call(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    let listed = response
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::InitProducerId as i16)
        .expect("InitProducerId is listed");
    assert_eq!((listed.min_version, listed.max_version), (0, 5));
    for served in [
        ApiKey::AddPartitionsToTxn,
        ApiKey::AddOffsetsToTxn,
        ApiKey::EndTxn,
        ApiKey::TxnOffsetCommit,
    ] {
        assert!(
            response.api_keys.iter().any(|k| k.api_key == served as i16),
            "{served:?} must be advertised"
        );
    }
    // Brokers write markers themselves: the inter-broker API is not served.
    assert!(
        !response
            .api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::WriteTxnMarkers as i16)
    );
}

#[tokio::test]
async fn init_producer_id_hands_out_distinct_ids_in_every_version() {
    let broker = start().await;
    let mut stream = broker.connect().await;
    let mut seen = Vec::new();
    for version in 0..=5 {
        let (error, id, epoch) = init(&mut stream, version, None, None).await;
        assert_eq!((error, epoch), (0, 0), "v{version}");
        assert!(!seen.contains(&id), "v{version} reused {id}");
        seen.push(id);
    }
    // Half of a producer id and epoch, and an empty transactional id, are
    // refused as Kafka refuses them.
    let (error, id, epoch) = init(&mut stream, 3, None, Some((seen[0], -1))).await;
    assert_eq!((error, id, epoch), (INVALID_REQUEST, -1, -1));
    let (error, ..) = init(&mut stream, 2, Some(""), None).await;
    assert_eq!(error, INVALID_REQUEST);
}

#[tokio::test]
async fn a_v3_epoch_bump_keeps_the_id_and_fences_the_old_epoch() {
    let broker = start().await;
    let mut stream = broker.connect().await;
    let (_, id, _) = init(&mut stream, 3, None, None).await;
    assert_eq!(
        produce(&mut stream, 9, -1, 0, batch(id, 0, 0, &["a"])).await,
        (0, 0)
    );
    assert_eq!(init(&mut stream, 3, None, Some((id, 0))).await, (0, id, 1));
    // The new epoch starts its sequences at 0 and fences epoch 0.
    assert_eq!(
        produce(&mut stream, 9, -1, 0, batch(id, 1, 1, &["b"]))
            .await
            .0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        produce(&mut stream, 9, -1, 0, batch(id, 1, 0, &["b"])).await,
        (0, 1)
    );
    assert_eq!(
        produce(&mut stream, 9, -1, 0, batch(id, 0, 1, &["c"]))
            .await
            .0,
        INVALID_PRODUCER_EPOCH
    );
    // Epoch 1 is now in the log: a bump request from epoch 0 is stale.
    assert_eq!(
        init(&mut stream, 4, None, Some((id, 0))).await,
        (INVALID_PRODUCER_EPOCH, -1, -1)
    );
    assert_eq!(init(&mut stream, 5, None, Some((id, 1))).await, (0, id, 2));
    assert_eq!(partition(&broker, 0).log_end_offset(), 2);
}

#[tokio::test]
async fn a_transactional_id_keeps_its_producer_id_and_fences_older_instances() {
    let broker = start().await;
    let mut stream = broker.connect().await;
    let (error, id, epoch) = init(&mut stream, 0, Some("task-7"), None).await;
    assert_eq!((error, epoch), (0, 0));
    for (version, expected_epoch) in [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)] {
        assert_eq!(
            init(&mut stream, version, Some("task-7"), None).await,
            (0, id, expected_epoch)
        );
    }
    let (_, other, _) = init(&mut stream, 5, Some("task-8"), None).await;
    assert_ne!(other, id);
    // v3+ with the current epoch bumps; with an older one it is fenced.
    assert_eq!(
        init(&mut stream, 5, Some("task-7"), Some((id, 5))).await,
        (0, id, 6)
    );
    assert_eq!(
        init(&mut stream, 5, Some("task-7"), Some((id, 2))).await,
        (PRODUCER_FENCED, -1, -1)
    );
    assert_eq!(
        init(&mut stream, 3, Some("task-7"), Some((id, 2))).await,
        (INVALID_PRODUCER_EPOCH, -1, -1),
        "before v4 there is no PRODUCER_FENCED"
    );
    // Its batches are idempotent, not transactional; a transactional one in
    // a request naming no transactional id is refused, as Kafka refuses it,
    // before the producer's state is looked at.
    assert_eq!(
        produce(&mut stream, 9, 1, 1, batch(id, 6, 0, &["x"])).await,
        (0, 0)
    );
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(id, 6, 1)
        .transactional(true);
    builder
        .push(NewRecord::new(None, b"in a transaction", 1))
        .unwrap();
    assert_eq!(
        produce(&mut stream, 9, 1, 1, builder.build().unwrap())
            .await
            .0,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(partition(&broker, 1).log_end_offset(), 1);
}

#[tokio::test]
async fn a_resend_gets_the_original_offset_with_every_acks_and_is_stored_once() {
    let broker = start().await;
    let mut stream = broker.connect().await;
    let (_, id, epoch) = init(&mut stream, 4, None, None).await;
    let log = partition(&broker, 0);
    let mut offset = 0;
    for (i, acks) in [-1i16, 1, -1, 1, -1, 1].into_iter().enumerate() {
        let values = [format!("record-{i}-a"), format!("record-{i}-b")];
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let records = batch(id, epoch, i as i32 * 2, &values);
        for version in [3, 9, 12] {
            let answer = produce(&mut stream, version, acks, 0, records.clone()).await;
            assert_eq!(answer, (0, offset), "batch {i}, v{version}, acks={acks}");
        }
        offset += 2;
    }
    assert_eq!(log.log_end_offset(), 12, "each batch is stored once");
    // The last batch went with acks=1: a resend with acks=all is answered
    // only once the original is on disk.
    assert_eq!(log.durable_offset(), 10);
    let last = batch(id, epoch, 10, &["record-5-a", "record-5-b"]);
    assert_eq!(produce(&mut stream, 9, -1, 0, last).await, (0, 10));
    assert_eq!(log.durable_offset(), 12);
    // The first batch is older than the five remembered.
    assert_eq!(
        produce(
            &mut stream,
            9,
            1,
            0,
            batch(id, epoch, 0, &["record-0-a", "record-0-b"])
        )
        .await
        .0,
        DUPLICATE_SEQUENCE_NUMBER
    );
    // A gap.
    assert_eq!(
        produce(&mut stream, 9, 1, 0, batch(id, epoch, 13, &["gap"]))
            .await
            .0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    // The same sequences in another partition are that partition's own.
    assert_eq!(
        produce(&mut stream, 9, 1, 1, batch(id, epoch, 0, &["other"])).await,
        (0, 0)
    );
    assert_eq!(log.log_end_offset(), 12);
    let values = support::values(&support::read_all(&log, 0));
    assert_eq!(values.len(), 12);
    assert_eq!(values[10], "record-5-a");
}

#[tokio::test]
async fn a_producer_id_the_broker_never_handed_out_is_refused() {
    const UNKNOWN_PRODUCER_ID: i16 = 59;
    let broker = start().await;
    let mut stream = broker.connect().await;
    let (_, id, epoch) = init(&mut stream, 4, None, None).await;
    // An id above every id handed out would take the state of the next
    // producer to ask for one.
    assert_eq!(
        produce(&mut stream, 9, 1, 0, batch(id + 1, 0, 0, &["made up"]))
            .await
            .0,
        UNKNOWN_PRODUCER_ID
    );
    assert_eq!(
        partition(&broker, 0).log_end_offset(),
        0,
        "nothing appended"
    );
    assert_eq!(
        produce(&mut stream, 9, 1, 0, batch(id, epoch, 0, &["given"])).await,
        (0, 0)
    );
    let (_, next, _) = init(&mut stream, 4, None, None).await;
    assert_eq!(next, id + 1, "the refused id is still the next to hand out");
}
