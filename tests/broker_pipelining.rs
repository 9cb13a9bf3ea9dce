//! Requests pipelined on one connection: the broker reads ahead up to
//! `in_flight_requests_max`, handles requests strictly in the order sent
//! (produces append in that order) and answers in that order; a client that
//! does not read its answers stops the reading at the limit, and holds only
//! the small in-memory part of the response being written.

mod support;

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchResponse, ProduceResponse,
};
use strata::broker::BrokerConfig;
use support::in_process::{
    InProcessBroker, decode_response, fetch_request, frame, one_record, produce_request,
    read_response,
};
use tokio::io::AsyncWriteExt;

/// Appends about `mebibytes` MiB of records to partition 0 of `topic`.
fn fill(broker: &InProcessBroker, topic: &str, mebibytes: usize) {
    broker
        .log
        .create_topic(topic, 1, Default::default())
        .unwrap();
    let log = broker.log.partition(topic, 0).unwrap();
    let value = vec![b'v'; 1000];
    for _ in 0..mebibytes {
        let mut builder = strata::record::BatchBuilder::default();
        for _ in 0..1000 {
            builder
                .push(strata::record::NewRecord::new(None, &value, 1))
                .unwrap();
        }
        log.append(&mut builder.build().unwrap()).unwrap();
    }
}

#[tokio::test]
async fn pipelined_requests_are_handled_and_answered_in_the_order_sent() {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic("ordered", 1, Default::default())
        .unwrap();
    const PRODUCES: i32 = 60;
    // Every acks setting, and an ApiVersions every tenth request, all sent
    // before reading anything.
    let acks = |i: i32| [-1i16, 1, 0][(i % 3) as usize];
    let mut burst = Vec::new();
    for i in 0..PRODUCES {
        let records = one_record(format!("{i}").as_bytes(), 1);
        burst.extend(frame(
            ApiKey::Produce,
            9,
            i,
            &produce_request(acks(i), "ordered", 0, records),
        ));
        if i % 10 == 9 {
            burst.extend(frame(
                ApiKey::ApiVersions,
                3,
                1000 + i,
                &ApiVersionsRequest::default(),
            ));
        }
    }
    let mut stream = broker.connect().await;
    stream.write_all(&burst).await.unwrap();

    for i in 0..PRODUCES {
        if acks(i) != 0 {
            let response = read_response(&mut stream).await.expect("a response");
            let produced: ProduceResponse = decode_response(response, ApiKey::Produce, 9, i);
            let partition = &produced.responses[0].partition_responses[0];
            assert_eq!(partition.error_code, 0);
            assert_eq!(partition.base_offset, i64::from(i), "appended in order");
        }
        if i % 10 == 9 {
            let response = read_response(&mut stream).await.expect("a response");
            let versions: ApiVersionsResponse =
                decode_response(response, ApiKey::ApiVersions, 3, 1000 + i);
            assert_eq!(versions.error_code, 0);
        }
    }
    let log = broker.log.partition("ordered", 0).unwrap();
    let values: Vec<String> = support::read_all(&log, 0)
        .into_iter()
        .map(|r| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    let expected: Vec<String> = (0..PRODUCES).map(|i| i.to_string()).collect();
    assert_eq!(values, expected);
    broker.stop().await;
}

#[tokio::test]
async fn a_client_that_does_not_read_stops_the_read_ahead_at_the_in_flight_limit() {
    const LIMIT: u64 = 3;
    let broker = InProcessBroker::start(BrokerConfig {
        in_flight_requests_max: LIMIT as usize,
        ..BrokerConfig::default()
    })
    .await;
    fill(&broker, "bulk", 32);
    // A 32 MiB fetch the client does not read yet: the broker's write blocks
    // once the socket buffers fill. Behind it, twenty small requests.
    let mut burst = frame(
        ApiKey::Fetch,
        12,
        0,
        &fetch_request("bulk", &[0], 0, 64 << 20, 0),
    );
    for i in 1..=20 {
        burst.extend(frame(
            ApiKey::ApiVersions,
            3,
            i,
            &ApiVersionsRequest::default(),
        ));
    }
    let mut stream = broker.connect().await;
    stream.write_all(&burst).await.unwrap();

    let in_flight = broker
        .wait_for_metric("strata_requests_in_flight", |n| n >= LIMIT)
        .await;
    assert_eq!(in_flight, LIMIT);
    for _ in 0..20 {
        assert!(broker.metric("strata_requests_in_flight").await <= LIMIT);
        // The fetch's records are file ranges sent with sendfile: what the
        // stalled response holds in memory is its headers only.
        let held = broker.metric("strata_response_bytes_buffered").await;
        assert!(held < 64 << 10, "{held} response bytes held in memory");
    }

    // Reading now: everything is answered, in order.
    let response = read_response(&mut stream).await.expect("a response");
    let fetched: FetchResponse = decode_response(response, ApiKey::Fetch, 12, 0);
    let records = fetched.responses[0].partitions[0].records.as_ref().unwrap();
    assert!(records.len() > 30 << 20, "{} bytes fetched", records.len());
    for i in 1..=20 {
        let response = read_response(&mut stream).await.expect("a response");
        let versions: ApiVersionsResponse = decode_response(response, ApiKey::ApiVersions, 3, i);
        assert_eq!(versions.error_code, 0);
    }
    broker
        .wait_for_metric("strata_requests_in_flight", |n| n == 0)
        .await;
    broker.stop().await;
}
