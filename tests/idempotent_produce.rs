//! Idempotent producers over a real socket: InitProducerId in every version
//! (new ids, KIP-360 epoch bumps, transactional ids and fencing), and
//! Produce answering a resend with the original offset, a gap with
//! OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch with INVALID_PRODUCER_EPOCH, a
//! forgotten resend with DUPLICATE_SEQUENCE_NUMBER and a transactional batch
//! with INVALID_TXN_STATE.

mod support;

use std::net::TcpStream;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, InitProducerIdRequest, InitProducerIdResponse,
    ProduceRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use strata::broker::{Broker, BrokerConfig};
use strata::log::{LogConfig, LogManager, PartitionLog};
use strata::record::{BatchBuilder, Compression, NewRecord};
use support::call;

const TOPIC: &str = "idem";
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const INVALID_REQUEST: i16 = 42;
const PRODUCER_FENCED: i16 = 90;

/// A broker in this process, on its own runtime, stopped on drop.
struct Running {
    addr: std::net::SocketAddr,
    log: Arc<LogManager>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(LogManager::open(dir.path(), LogConfig::default()).unwrap());
    log.create_topic(TOPIC, 2, Default::default()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..BrokerConfig::default()
    };
    let broker = runtime
        .block_on(Broker::bind(config, Arc::clone(&log)))
        .unwrap();
    let addr = broker.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        runtime
            .block_on(broker.serve(async {
                let _ = stopped.await;
            }))
            .unwrap();
    });
    Running {
        addr,
        log,
        stop: Some(stop),
        thread: Some(thread),
        _dir: dir,
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.thread.take().unwrap().join();
    }
}

impl Running {
    fn connect(&self) -> TcpStream {
        TcpStream::connect(self.addr).unwrap()
    }

    fn partition(&self, partition: i32) -> Arc<PartitionLog> {
        self.log.partition(TOPIC, partition).unwrap()
    }
}

fn init_request(
    transactional_id: Option<&str>,
    current: Option<(i64, i16)>,
) -> InitProducerIdRequest {
    let (producer_id, epoch) = current.unwrap_or((-1, -1));
    InitProducerIdRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.into()))),
        )
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
}

/// (error code, producer id, epoch)
fn init(
    stream: &mut TcpStream,
    version: i16,
    transactional_id: Option<&str>,
    current: Option<(i64, i16)>,
) -> (i16, i64, i16) {
    let response: InitProducerIdResponse = call(
        stream,
        ApiKey::InitProducerId,
        version,
        &init_request(transactional_id, current),
    )
    .unwrap();
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

fn batch(producer_id: i64, epoch: i16, first_sequence: i32, values: &[&str]) -> Vec<u8> {
    let mut builder =
        BatchBuilder::new(Compression::Lz4).producer(producer_id, epoch, first_sequence);
    for value in values {
        builder
            .push(NewRecord::new(None, value.as_bytes(), 1_700_000_000_000))
            .unwrap();
    }
    builder.build().unwrap()
}

/// (error code, base offset)
fn produce(
    stream: &mut TcpStream,
    version: i16,
    acks: i16,
    partition: i32,
    records: Vec<u8>,
) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(records))),
                ]),
        ]);
    let response: ProduceResponse = call(stream, ApiKey::Produce, version, &request).unwrap();
    let answer = &response.responses[0].partition_responses[0];
    (answer.error_code, answer.base_offset)
}

#[test]
fn api_versions_lists_init_producer_id_up_to_the_version_it_decodes() {
    let broker = start();
    let mut stream = broker.connect();
    let response: ApiVersionsResponse = call(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .unwrap();
    let listed = response
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::InitProducerId as i16)
        .expect("InitProducerId is listed");
    assert_eq!((listed.min_version, listed.max_version), (0, 5));
    for unserved in [
        ApiKey::AddPartitionsToTxn,
        ApiKey::EndTxn,
        ApiKey::TxnOffsetCommit,
    ] {
        assert!(
            !response
                .api_keys
                .iter()
                .any(|k| k.api_key == unserved as i16),
            "{unserved:?} must not be advertised"
        );
    }
}

#[test]
fn init_producer_id_hands_out_distinct_ids_in_every_version() {
    let broker = start();
    let mut stream = broker.connect();
    let mut seen = Vec::new();
    for version in 0..=5 {
        let (error, id, epoch) = init(&mut stream, version, None, None);
        assert_eq!((error, epoch), (0, 0), "v{version}");
        assert!(!seen.contains(&id), "v{version} reused {id}");
        seen.push(id);
    }
    // Half of a producer id and epoch, and an empty transactional id, are
    // refused as Kafka refuses them.
    let (error, id, epoch) = init(&mut stream, 3, None, Some((seen[0], -1)));
    assert_eq!((error, id, epoch), (INVALID_REQUEST, -1, -1));
    let (error, ..) = init(&mut stream, 2, Some(""), None);
    assert_eq!(error, INVALID_REQUEST);
}

#[test]
fn a_v3_epoch_bump_keeps_the_id_and_fences_the_old_epoch() {
    let broker = start();
    let mut stream = broker.connect();
    let (_, id, _) = init(&mut stream, 3, None, None);
    assert_eq!(
        produce(&mut stream, 9, -1, 0, batch(id, 0, 0, &["a"])),
        (0, 0)
    );
    assert_eq!(init(&mut stream, 3, None, Some((id, 0))), (0, id, 1));
    // The new epoch starts its sequences at 0 and fences epoch 0.
    assert_eq!(
        produce(&mut stream, 9, -1, 0, batch(id, 1, 1, &["b"])).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        produce(&mut stream, 9, -1, 0, batch(id, 1, 0, &["b"])),
        (0, 1)
    );
    assert_eq!(
        produce(&mut stream, 9, -1, 0, batch(id, 0, 1, &["c"])).0,
        INVALID_PRODUCER_EPOCH
    );
    // Epoch 1 is now in the log: a bump request from epoch 0 is stale.
    assert_eq!(
        init(&mut stream, 4, None, Some((id, 0))),
        (INVALID_PRODUCER_EPOCH, -1, -1)
    );
    assert_eq!(init(&mut stream, 5, None, Some((id, 1))), (0, id, 2));
    assert_eq!(broker.partition(0).log_end_offset(), 2);
}

#[test]
fn a_transactional_id_keeps_its_producer_id_and_fences_older_instances() {
    let broker = start();
    let mut stream = broker.connect();
    let (error, id, epoch) = init(&mut stream, 0, Some("task-7"), None);
    assert_eq!((error, epoch), (0, 0));
    for (version, expected_epoch) in [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)] {
        assert_eq!(
            init(&mut stream, version, Some("task-7"), None),
            (0, id, expected_epoch)
        );
    }
    let (_, other, _) = init(&mut stream, 5, Some("task-8"), None);
    assert_ne!(other, id);
    // v3+ with the current epoch bumps; with an older one it is fenced.
    assert_eq!(
        init(&mut stream, 5, Some("task-7"), Some((id, 5))),
        (0, id, 6)
    );
    assert_eq!(
        init(&mut stream, 5, Some("task-7"), Some((id, 2))),
        (PRODUCER_FENCED, -1, -1)
    );
    assert_eq!(
        init(&mut stream, 3, Some("task-7"), Some((id, 2))),
        (INVALID_PRODUCER_EPOCH, -1, -1),
        "before v4 there is no PRODUCER_FENCED"
    );
    // Its batches are idempotent, not transactional; a transactional one is
    // refused.
    assert_eq!(
        produce(&mut stream, 9, 1, 1, batch(id, 6, 0, &["x"])),
        (0, 0)
    );
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(id, 6, 1)
        .transactional(true);
    builder
        .push(NewRecord::new(None, b"in a transaction", 1))
        .unwrap();
    assert_eq!(
        produce(&mut stream, 9, 1, 1, builder.build().unwrap()).0,
        INVALID_TXN_STATE
    );
    assert_eq!(broker.partition(1).log_end_offset(), 1);
}

#[test]
fn a_resend_gets_the_original_offset_with_every_acks_and_is_stored_once() {
    let broker = start();
    let mut stream = broker.connect();
    let (_, id, epoch) = init(&mut stream, 4, None, None);
    let log = broker.partition(0);
    let mut offset = 0;
    for (i, acks) in [-1i16, 1, -1, 1, -1, 1].into_iter().enumerate() {
        let values = [format!("record-{i}-a"), format!("record-{i}-b")];
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let records = batch(id, epoch, i as i32 * 2, &values);
        for version in [3, 9, 12] {
            let answer = produce(&mut stream, version, acks, 0, records.clone());
            assert_eq!(answer, (0, offset), "batch {i}, v{version}, acks={acks}");
        }
        offset += 2;
    }
    assert_eq!(log.log_end_offset(), 12, "each batch is stored once");
    // The last batch went with acks=1: a resend with acks=all is answered
    // only once the original is on disk.
    assert_eq!(log.durable_offset(), 10);
    let last = batch(id, epoch, 10, &["record-5-a", "record-5-b"]);
    assert_eq!(produce(&mut stream, 9, -1, 0, last), (0, 10));
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
        .0,
        DUPLICATE_SEQUENCE_NUMBER
    );
    // A gap.
    assert_eq!(
        produce(&mut stream, 9, 1, 0, batch(id, epoch, 13, &["gap"])).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    // The same sequences in another partition are that partition's own.
    assert_eq!(
        produce(&mut stream, 9, 1, 1, batch(id, epoch, 0, &["other"])),
        (0, 0)
    );
    assert_eq!(log.log_end_offset(), 12);
    let values: Vec<String> = support::read_all(&log, 0)
        .into_iter()
        .map(|r| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    assert_eq!(values.len(), 12);
    assert_eq!(values[10], "record-5-a");
}

#[test]
fn a_producer_id_the_broker_never_handed_out_is_refused() {
    const UNKNOWN_PRODUCER_ID: i16 = 59;
    let broker = start();
    let mut stream = broker.connect();
    let (_, id, epoch) = init(&mut stream, 4, None, None);
    // An id above every id handed out would take the state of the next
    // producer to ask for one.
    assert_eq!(
        produce(&mut stream, 9, 1, 0, batch(id + 1, 0, 0, &["made up"])).0,
        UNKNOWN_PRODUCER_ID
    );
    assert_eq!(broker.partition(0).log_end_offset(), 0, "nothing appended");
    assert_eq!(
        produce(&mut stream, 9, 1, 0, batch(id, epoch, 0, &["given"])),
        (0, 0)
    );
    let (_, next, _) = init(&mut stream, 4, None, None);
    assert_eq!(next, id + 1, "the refused id is still the next to hand out");
}
