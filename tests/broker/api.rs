//! The broker over a real socket: ApiVersions (including the v0
//! answer to an unknown version), Metadata (with auto-creation and real topic
//! ids), Produce with every acks setting, and the connection-closing answers
//! to bad frames.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use strata::broker::BrokerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support;

use support::wire::{call, exchange, fetch_request, frame, produce_request};
use support::{InProcessBroker, TIMESTAMP_MS, one_record};

#[tokio::test]
async fn api_versions_answers_every_version_and_lists_what_is_served() {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let range = ApiKey::ApiVersions.valid_versions();
    for version in range.min..=range.max {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_string("t".into()))
            .with_client_software_version(StrBytes::from_string("1".into()));
        let response: ApiVersionsResponse =
            call(&mut stream, ApiKey::ApiVersions, version, &request).await;
        assert_eq!(response.error_code, 0, "v{version}");
        let metadata = response
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::Metadata as i16)
            .expect("Metadata is listed");
        assert_eq!(metadata.max_version, ApiKey::Metadata.valid_versions().max);
    }
    broker.stop().await;
}

#[tokio::test]
async fn an_unknown_api_versions_version_gets_a_v0_unsupported_version_answer() {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    // A future version: the header is whatever the client thinks; the broker
    // must not try to parse it beyond the correlation id.
    let mut request = BytesMut::new();
    request.put_i16(ApiKey::ApiVersions as i16);
    request.put_i16(99);
    request.put_i32(7);
    request.put_slice(b"\x00\x04test\x00");
    let mut framed = (request.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&request);
    let mut response = exchange(&mut stream, &framed).await.expect("a response");
    let header = ResponseHeader::decode(&mut response, 0).unwrap();
    assert_eq!(header.correlation_id, 7);
    let body = ApiVersionsResponse::decode(&mut response, 0).unwrap();
    assert_eq!(body.error_code, 35);
    assert!(!body.api_keys.is_empty());
    broker.stop().await;
}

#[tokio::test]
async fn metadata_creates_topics_when_allowed_and_reports_unknown_ones_otherwise() {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic("existing", 3, Default::default())
        .unwrap();
    let id = broker.log.topic("existing").unwrap().id();
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let topic = |name: &str| {
        MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.into()))))
    };
    let range = ApiKey::Metadata.valid_versions();
    for version in range.min.max(4)..=range.max {
        let request = MetadataRequest::default()
            .with_topics(Some(vec![
                topic("existing"),
                topic(&format!("absent-{version}")),
            ]))
            .with_allow_auto_topic_creation(false);
        let response: MetadataResponse =
            call(&mut stream, ApiKey::Metadata, version, &request).await;
        assert_eq!(response.brokers.len(), 1);
        assert_eq!(response.brokers[0].port, i32::from(broker.addr.port()));
        assert_eq!(response.topics[0].error_code, 0);
        assert_eq!(response.topics[0].partitions.len(), 3);
        if version >= 10 {
            assert_eq!(response.topics[0].topic_id, id, "v{version}");
        }
        assert_eq!(response.topics[1].error_code, 3, "v{version}");
    }
    let request = MetadataRequest::default()
        .with_topics(Some(vec![topic("made-on-demand")]))
        .with_allow_auto_topic_creation(true);
    let response: MetadataResponse = call(&mut stream, ApiKey::Metadata, 9, &request).await;
    assert_eq!(response.topics[0].error_code, 0);
    assert!(broker.log.topic("made-on-demand").is_some());
    broker.stop().await;
}

#[tokio::test]
async fn bad_frames_close_the_connection_and_the_broker_keeps_serving() {
    let broker = InProcessBroker::start(BrokerConfig {
        request_bytes_max: 1024,
        ..BrokerConfig::default()
    })
    .await;
    for bad in [
        (1_000_000i32).to_be_bytes().to_vec(), // over the limit
        (-5i32).to_be_bytes().to_vec(),        // negative size
        [0, 0, 0, 8, 0x7f, 0x7f, 0, 0, 0, 0, 0, 1].to_vec(), // unknown API key
        [0, 0, 0, 8, 0, 3, 0x7f, 0, 0, 0, 0, 1].to_vec(), // Metadata v32512
        [0, 0, 0, 2, 0, 3].to_vec(),           // truncated header
    ] {
        let mut stream = TcpStream::connect(broker.addr).await.unwrap();
        assert!(exchange(&mut stream, &bad).await.is_none(), "{bad:?}");
    }
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let response: ApiVersionsResponse = call(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    assert_eq!(response.error_code, 0);
    broker.stop().await;
}

mod produce {
    use super::*;
    use kafka_protocol::messages::ProduceResponse;

    #[tokio::test]
    async fn produce_appends_with_every_acks_setting_and_refuses_bad_batches_whole() {
        let broker = InProcessBroker::start(BrokerConfig::default()).await;
        broker
            .log
            .create_topic("in", 2, Default::default())
            .unwrap();
        let log = broker.log.partition("in", 1).unwrap();
        let mut stream = TcpStream::connect(broker.addr).await.unwrap();
        let version = 9;

        let response: ProduceResponse = call(
            &mut stream,
            ApiKey::Produce,
            version,
            &produce_request(-1, "in", 1, one_record(b"all", TIMESTAMP_MS)),
        )
        .await;
        let partition = &response.responses[0].partition_responses[0];
        assert_eq!((partition.error_code, partition.base_offset), (0, 0));
        assert_eq!(log.durable_offset(), 1, "acks=all answers after the fsync");

        let response: ProduceResponse = call(
            &mut stream,
            ApiKey::Produce,
            version,
            &produce_request(1, "in", 1, one_record(b"one", TIMESTAMP_MS)),
        )
        .await;
        assert_eq!(response.responses[0].partition_responses[0].base_offset, 1);

        // acks=0: no response; the next request's answer comes next.
        stream
            .write_all(&frame(
                ApiKey::Produce,
                version,
                5,
                &produce_request(0, "in", 1, one_record(b"none", TIMESTAMP_MS)),
            ))
            .await
            .unwrap();
        let response: ApiVersionsResponse = call(
            &mut stream,
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default(),
        )
        .await;
        assert_eq!(response.error_code, 0);
        assert_eq!(log.log_end_offset(), 3);

        let mut corrupt = one_record(b"bad", TIMESTAMP_MS);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        let mut old_magic = one_record(b"old", TIMESTAMP_MS);
        old_magic[16] = 1;
        for (records, code) in [(corrupt, 2), (old_magic, 43)] {
            let response: ProduceResponse = call(
                &mut stream,
                ApiKey::Produce,
                version,
                &produce_request(1, "in", 1, records),
            )
            .await;
            assert_eq!(
                response.responses[0].partition_responses[0].error_code,
                code
            );
        }
        let response: ProduceResponse = call(
            &mut stream,
            ApiKey::Produce,
            version,
            &produce_request(1, "in", 7, one_record(b"x", TIMESTAMP_MS)),
        )
        .await;
        assert_eq!(response.responses[0].partition_responses[0].error_code, 3);
        let response: ProduceResponse = call(
            &mut stream,
            ApiKey::Produce,
            version,
            &produce_request(2, "in", 1, one_record(b"x", TIMESTAMP_MS)),
        )
        .await;
        assert_eq!(
            response.responses[0].partition_responses[0].error_code, 21,
            "acks=2"
        );
        assert_eq!(log.log_end_offset(), 3, "refused batches append nothing");

        let values: Vec<String> = {
            let bytes = log.read(0, u64::MAX).unwrap().read_to_vec().unwrap();
            let mut rest = &bytes[..];
            let mut out = Vec::new();
            while !rest.is_empty() {
                let batch = strata::record::RecordBatch::parse_and_verify(rest).unwrap();
                for record in batch.records(1 << 20).unwrap().iter() {
                    out.push(String::from_utf8(record.unwrap().value.unwrap().to_vec()).unwrap());
                }
                rest = &rest[batch.size_bytes()..];
            }
            out
        };
        assert_eq!(values, ["all", "one", "none"]);
        broker.stop().await;
    }
}

mod admin {
    use super::*;
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::{
        CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
        CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    };

    fn name(s: &str) -> TopicName {
        TopicName(StrBytes::from_string(s.into()))
    }

    fn creatable(topic: &str, partitions: i32, replication: i16) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)
            .with_configs(vec![
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string("retention.ms".into()))
                    .with_value(Some(StrBytes::from_string("60000".into()))),
            ])
    }

    #[tokio::test]
    async fn topics_are_created_grown_and_deleted_with_kafka_error_codes() {
        let broker = InProcessBroker::start(BrokerConfig::default()).await;
        let mut stream = TcpStream::connect(broker.addr).await.unwrap();
        let range = ApiKey::CreateTopics.valid_versions();
        for version in range.min..=range.max {
            let topic = format!("made-v{version}");
            let request = CreateTopicsRequest::default().with_topics(vec![
                creatable(&topic, 3, -1),
                creatable(&topic, 3, 1),
                creatable("bad name!", 1, 1),
                creatable(&format!("replicated-v{version}"), 1, 3),
            ]);
            let response: CreateTopicsResponse =
                call(&mut stream, ApiKey::CreateTopics, version, &request).await;
            let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
            assert_eq!(codes, [0, 36, 17, 38], "v{version}");
            let made = broker.log.topic(&topic).unwrap();
            assert_eq!(made.metadata.partitions, 3);
            assert_eq!(made.config.retention_ms, 60_000);
            if version >= 7 {
                assert_eq!(response.topics[0].topic_id, made.id());
            }
        }
        let validate = CreateTopicsRequest::default()
            .with_topics(vec![creatable("only-checked", 2, 1)])
            .with_validate_only(true);
        let response: CreateTopicsResponse =
            call(&mut stream, ApiKey::CreateTopics, 7, &validate).await;
        assert_eq!(response.topics[0].error_code, 0);
        assert!(broker.log.topic("only-checked").is_none());

        let grow = CreatePartitionsRequest::default().with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(name("made-v2"))
                .with_count(5),
            CreatePartitionsTopic::default()
                .with_name(name("made-v3"))
                .with_count(2),
            CreatePartitionsTopic::default()
                .with_name(name("absent"))
                .with_count(2),
        ]);
        let response: CreatePartitionsResponse =
            call(&mut stream, ApiKey::CreatePartitions, 3, &grow).await;
        let codes: Vec<i16> = response.results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, [0, 37, 3]);
        assert_eq!(broker.log.topic("made-v2").unwrap().metadata.partitions, 5);

        let by_name =
            DeleteTopicsRequest::default().with_topic_names(vec![name("made-v2"), name("absent")]);
        let response: DeleteTopicsResponse =
            call(&mut stream, ApiKey::DeleteTopics, 5, &by_name).await;
        let codes: Vec<i16> = response.responses.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, [0, 3]);
        assert!(broker.log.topic("made-v2").is_none());
        let id = broker.log.topic("made-v3").unwrap().id();
        let by_id = DeleteTopicsRequest::default()
            .with_topics(vec![DeleteTopicState::default().with_topic_id(id)]);
        let response: DeleteTopicsResponse =
            call(&mut stream, ApiKey::DeleteTopics, 6, &by_id).await;
        assert_eq!(response.responses[0].error_code, 0);
        assert!(broker.log.topic("made-v3").is_none());
        broker.stop().await;
    }
}

mod describe_configs {
    use super::*;
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

    #[tokio::test]
    async fn topic_configs_are_described_with_overrides_marked() {
        let broker = InProcessBroker::start(BrokerConfig::default()).await;
        let overrides = [("retention.ms".to_string(), "1234".to_string())]
            .into_iter()
            .collect();
        broker.log.create_topic("described", 1, overrides).unwrap();
        let mut stream = TcpStream::connect(broker.addr).await.unwrap();
        let range = ApiKey::DescribeConfigs.valid_versions();
        for version in range.min..=range.max {
            let request = DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_string("described".into()))
                    .with_configuration_keys(None),
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_string("absent".into()))
                    .with_configuration_keys(None),
            ]);
            let response: DescribeConfigsResponse =
                call(&mut stream, ApiKey::DescribeConfigs, version, &request).await;
            let described = &response.results[0];
            assert_eq!(described.error_code, 0);
            let retention = described
                .configs
                .iter()
                .find(|c| c.name.as_str() == "retention.ms")
                .unwrap();
            assert_eq!(retention.value.as_ref().map(|v| v.as_str()), Some("1234"));
            assert_eq!(retention.config_source, 1, "a topic override, v{version}");
            let segment = described
                .configs
                .iter()
                .find(|c| c.name.as_str() == "segment.bytes")
                .unwrap();
            assert_eq!(segment.config_source, 5, "a default, v{version}");
            assert_eq!(response.results[1].error_code, 3);
        }
        broker.stop().await;
    }
}

#[tokio::test]
async fn the_broker_enforces_retention_on_its_interval() {
    let broker = InProcessBroker::start(BrokerConfig {
        retention_check_interval: std::time::Duration::from_millis(20),
        ..BrokerConfig::default()
    })
    .await;
    let overrides = [("retention.ms".to_string(), "1000".to_string())]
        .into_iter()
        .collect();
    broker.log.create_topic("short", 1, overrides).unwrap();
    let log = broker.log.partition("short", 0).unwrap();
    // Records from 2023: long past a one-second retention.
    let mut builder = strata::record::BatchBuilder::default();
    builder
        .push(strata::record::NewRecord::new(
            None,
            b"old",
            1_700_000_000_000,
        ))
        .unwrap();
    log.append(&builder.build().unwrap()).unwrap();
    support::wait_for(
        "retention to run",
        std::time::Duration::from_secs(20),
        || log.log_start_offset() != 0,
    )
    .await;
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (1, 1));
    broker.stop().await;
}

mod fetch_wait {
    use super::*;
    use kafka_protocol::messages::{FetchResponse, ProduceResponse};

    fn fetch(offset: i64, max_wait_ms: i32) -> kafka_protocol::messages::FetchRequest {
        fetch_request("waited", &[0], offset, 1 << 20, max_wait_ms)
    }

    #[tokio::test]
    async fn a_waiting_fetch_returns_when_a_record_arrives_and_an_idle_one_when_time_is_up() {
        let broker = InProcessBroker::start(BrokerConfig::default()).await;
        broker
            .log
            .create_topic("waited", 1, Default::default())
            .unwrap();
        let mut consumer = TcpStream::connect(broker.addr).await.unwrap();

        // Nothing to read and a short wait: an empty answer.
        let response: FetchResponse = call(&mut consumer, ApiKey::Fetch, 12, &fetch(0, 50)).await;
        let partition = &response.responses[0].partitions[0];
        assert_eq!(partition.error_code, 0);
        assert!(partition.records.as_ref().is_none_or(|r| r.is_empty()));

        // A long wait, cut short by a produce on another connection.
        let addr = broker.addr;
        let producer = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let mut stream = TcpStream::connect(addr).await.unwrap();
            let request = produce_request(1, "waited", 0, one_record(b"arrived", 1));
            let _: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &request).await;
        });
        let response: FetchResponse =
            call(&mut consumer, ApiKey::Fetch, 12, &fetch(0, 30_000)).await;
        producer.await.unwrap();
        let records = response.responses[0].partitions[0].records.clone().unwrap();
        let batch = strata::record::RecordBatch::parse_and_verify(&records).unwrap();
        let values: Vec<Vec<u8>> = batch
            .records(1 << 20)
            .unwrap()
            .iter()
            .map(|r| r.unwrap().value.unwrap().to_vec())
            .collect();
        assert_eq!(values, [b"arrived".to_vec()]);
        broker.stop().await;
    }
}

#[tokio::test]
async fn metrics_report_requests_and_partition_offsets() {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic("measured", 1, Default::default())
        .unwrap();
    broker
        .log
        .partition("measured", 0)
        .unwrap()
        .append(&one_record(b"x", 1))
        .unwrap();
    let mut stream = broker.connect().await;
    let _: ApiVersionsResponse = call(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;

    let text = broker.scrape().await;
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(
        text.contains("strata_requests_total{api=\"ApiVersions\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("strata_log_end_offset{topic=\"measured\",partition=\"0\"} 1"),
        "{text}"
    );
    broker.stop().await;
}

/// A broker that closes connections idle for `timeout`.
async fn idle_after(timeout: std::time::Duration) -> InProcessBroker {
    InProcessBroker::start(BrokerConfig {
        connection_idle_timeout: timeout,
        ..BrokerConfig::default()
    })
    .await
}

/// Waits (20 s at most, else fails saying `expected`) for the broker to
/// close `stream`: the end of stream, nothing before it.
async fn closed_by_the_broker(stream: &mut TcpStream, expected: &str) {
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), stream.read(&mut buf))
        .await
        .expect(expected);
    assert_eq!(read.unwrap(), 0);
}

/// Activity keeps a connection open only for a while: once requests stop,
/// it is closed.
#[tokio::test]
async fn a_connection_gone_quiet_after_its_requests_is_closed() {
    let broker = idle_after(std::time::Duration::from_millis(100)).await;
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let request = frame(ApiKey::ApiVersions, 3, 7, &ApiVersionsRequest::default());
    for _ in 0..3 {
        assert!(exchange(&mut stream, &request).await.is_some());
    }
    closed_by_the_broker(&mut stream, "the broker closes the connection gone quiet").await;
    broker.stop().await;
}

#[tokio::test]
async fn idle_connections_are_closed() {
    let broker = idle_after(std::time::Duration::from_millis(100)).await;
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    closed_by_the_broker(&mut stream, "the broker closes the idle connection").await;
    broker.stop().await;
}

/// A connection the idle timer finds busy each time it ends (a request
/// read, an answer written) stays open however long it lives.
#[tokio::test]
async fn a_connection_with_requests_within_each_idle_timeout_stays_open() {
    const IDLE: std::time::Duration = std::time::Duration::from_millis(1000);
    let broker = idle_after(IDLE).await;
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let request = frame(ApiKey::ApiVersions, 3, 7, &ApiVersionsRequest::default());
    // Three timeouts long, a request every quarter timeout.
    for round in 0..12 {
        tokio::time::sleep(IDLE / 4).await;
        let answer = exchange(&mut stream, &request).await;
        assert!(answer.is_some(), "closed before request {round}");
    }
    broker.stop().await;
}

/// A fetch waiting for data past the idle timeout is in flight: its
/// connection is not idle, and goes on reading requests after the answer.
#[tokio::test]
async fn a_fetch_waiting_past_the_idle_timeout_keeps_its_connection() {
    const IDLE: std::time::Duration = std::time::Duration::from_millis(300);
    let broker = idle_after(IDLE).await;
    broker
        .log
        .create_topic("quiet", 1, Default::default())
        .unwrap();
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let wait_ms = i32::try_from((IDLE * 3).as_millis()).unwrap();
    let request = fetch_request("quiet", &[0], 0, 1 << 20, wait_ms);
    let started = std::time::Instant::now();
    let answer = exchange(&mut stream, &frame(ApiKey::Fetch, 12, 1, &request)).await;
    assert!(answer.is_some(), "closed while the fetch waited");
    assert!(
        started.elapsed() >= IDLE * 3,
        "answered before its wait ended"
    );
    // Still reading: the wait was not idleness.
    let versions = frame(ApiKey::ApiVersions, 3, 2, &ApiVersionsRequest::default());
    assert!(exchange(&mut stream, &versions).await.is_some());
    broker.stop().await;
}

#[tokio::test]
async fn shutdown_does_not_wait_for_a_client_that_stopped_reading() {
    let broker = InProcessBroker::start(BrokerConfig {
        shutdown_grace: std::time::Duration::from_millis(200),
        ..BrokerConfig::default()
    })
    .await;
    broker
        .log
        .create_topic("bulk", 1, Default::default())
        .unwrap();
    let log = broker.log.partition("bulk", 0).unwrap();
    let value = vec![b'v'; 1000];
    for _ in 0..32 {
        let mut builder = strata::record::BatchBuilder::default();
        for _ in 0..900 {
            builder
                .push(strata::record::NewRecord::new(None, &value, 1))
                .unwrap();
        }
        log.append(&builder.build().unwrap()).unwrap();
    }
    // A 64 MiB fetch of ~29 MB that the client never reads: the broker's
    // write blocks once the socket buffers fill.
    let request = fetch_request("bulk", &[0], 0, 64 << 20, 0);
    let mut stalled = TcpStream::connect(broker.addr).await.unwrap();
    stalled
        .write_all(&frame(ApiKey::Fetch, 12, 1, &request))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    tokio::time::timeout(std::time::Duration::from_secs(20), broker.stop())
        .await
        .expect("shutdown finishes despite the stalled client");
    drop(stalled);
}

#[tokio::test]
async fn fetch_max_bytes_bounds_the_response_except_for_the_first_batch() {
    use kafka_protocol::messages::FetchResponse;
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic("sized", 2, Default::default())
        .unwrap();
    let value = vec![b'v'; 900];
    let mut batch_bytes = 0;
    for p in 0..2 {
        let log = broker.log.partition("sized", p).unwrap();
        for _ in 0..3 {
            let mut builder = strata::record::BatchBuilder::default();
            builder
                .push(strata::record::NewRecord::new(None, &value, 1))
                .unwrap();
            let batch = builder.build().unwrap();
            batch_bytes = batch.len();
            log.append(&batch).unwrap();
        }
    }
    let request = |max_bytes: i32| fetch_request("sized", &[0, 1], 0, max_bytes, 0);
    let sizes = |response: &FetchResponse| -> Vec<usize> {
        response.responses[0]
            .partitions
            .iter()
            .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
            .collect()
    };
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let one_and_a_half = (batch_bytes * 3 / 2) as i32;
    let response: FetchResponse =
        call(&mut stream, ApiKey::Fetch, 12, &request(one_and_a_half)).await;
    assert_eq!(
        sizes(&response),
        [batch_bytes, 0],
        "the second partition's batch would not fit"
    );
    let response: FetchResponse = call(&mut stream, ApiKey::Fetch, 12, &request(10)).await;
    assert_eq!(
        sizes(&response),
        [batch_bytes, 0],
        "the first batch is always sent"
    );
    let response: FetchResponse = call(&mut stream, ApiKey::Fetch, 12, &request(1 << 20)).await;
    assert_eq!(sizes(&response), [3 * batch_bytes, 3 * batch_bytes]);
    broker.stop().await;
}

#[tokio::test]
async fn fetching_by_an_unknown_topic_id_reports_unknown_topic_id() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse};
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic("known", 1, Default::default())
        .unwrap();
    let known = broker.log.topic("known").unwrap().id();
    let request = |id| {
        FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic_id(id)
                    .with_partitions(vec![
                        FetchPartition::default().with_partition_max_bytes(1024),
                    ]),
            ])
    };
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let response: FetchResponse = call(
        &mut stream,
        ApiKey::Fetch,
        13,
        &request(uuid::Uuid::from_u128(42)),
    )
    .await;
    assert_eq!(response.responses[0].partitions[0].error_code, 100);
    let response: FetchResponse = call(&mut stream, ApiKey::Fetch, 13, &request(known)).await;
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    assert_eq!(response.responses[0].topic_id, known);
    broker.stop().await;
}
