//! Requests pipelined on one connection: the broker reads ahead up to
//! `in_flight_requests_max`, handles requests strictly in the order sent
//! (produces append in that order) and answers in that order, an acks=all
//! answer only once its records are durable (and still written when a
//! later request closes the connection); a client that
//! sends fetches and never reads the answers stops the reading at the limit
//! and holds only the small in-memory part of the response being written.

use crate::support;

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchResponse, ProduceResponse,
};
use strata::broker::BrokerConfig;
use support::wire::{decode_response, fetch_request, frame, produce_request, read_response};
use support::{InProcessBroker, one_record};
use tokio::io::AsyncWriteExt;

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

    let log = broker.log.partition("ordered", 0).unwrap();
    for i in 0..PRODUCES {
        if acks(i) != 0 {
            let response = read_response(&mut stream).await.expect("a response");
            let produced: ProduceResponse = decode_response(response, ApiKey::Produce, 9, i);
            let partition = &produced.responses[0].partition_responses[0];
            assert_eq!(partition.error_code, 0);
            assert_eq!(partition.base_offset, i64::from(i), "appended in order");
            // An acks=all answer waits for its sync (answered while later
            // requests are handled), never less.
            if acks(i) == -1 {
                assert!(
                    log.durable_offset() > i64::from(i),
                    "acks=all answered for offset {i} before it was durable"
                );
            }
        }
        if i % 10 == 9 {
            let response = read_response(&mut stream).await.expect("a response");
            let versions: ApiVersionsResponse =
                decode_response(response, ApiKey::ApiVersions, 3, 1000 + i);
            assert_eq!(versions.error_code, 0);
        }
    }
    let values: Vec<String> = support::read_all(&log, 0)
        .into_iter()
        .map(|r| String::from_utf8(r.value.unwrap()).unwrap())
        .collect();
    let expected: Vec<String> = (0..PRODUCES).map(|i| i.to_string()).collect();
    assert_eq!(values, expected);
    broker.stop().await;
}

#[tokio::test]
async fn a_client_that_sends_fetches_and_never_reads_holds_bounded_memory() {
    const LIMIT: u64 = 3;
    const FETCHES: i32 = 50;
    let broker = InProcessBroker::start(BrokerConfig {
        in_flight_requests_max: LIMIT as usize,
        ..BrokerConfig::default()
    })
    .await;
    broker.fill("bulk", 32);
    // Fifty fetches of the whole 32 MiB partition, 1.6 GB of answers if the
    // broker buffered them; the client reads none of it. The first
    // response's write blocks once the socket buffers fill.
    let fetch = |i| {
        frame(
            ApiKey::Fetch,
            12,
            i,
            &fetch_request("bulk", &[0], 0, 64 << 20, 0),
        )
    };
    let frame_bytes = fetch(0).len() as u64;
    let burst: Vec<u8> = (0..FETCHES).flat_map(fetch).collect();
    let mut stream = broker.connect().await;
    stream.write_all(&burst).await.unwrap();

    let in_flight = broker
        .wait_for_metric("strata_requests_in_flight", |n| n >= LIMIT)
        .await;
    assert_eq!(in_flight, LIMIT, "read ahead no further than the limit");
    for _ in 0..20 {
        assert!(broker.metric("strata_requests_in_flight").await <= LIMIT);
        let requests = broker.metric("strata_request_bytes_buffered").await;
        assert!(
            requests <= LIMIT * frame_bytes,
            "{requests} request bytes held"
        );
        // The fetch's records are file ranges sent with sendfile: what the
        // stalled response holds in memory is its headers only.
        let responses = broker.metric("strata_response_bytes_buffered").await;
        assert!(responses < 64 << 10, "{responses} response bytes held");
    }

    // The first answer is whole and first.
    let response = read_response(&mut stream).await.expect("a response");
    let fetched: FetchResponse = decode_response(response, ApiKey::Fetch, 12, 0);
    let records = fetched.responses[0].partitions[0].records.as_ref().unwrap();
    assert!(records.len() > 30 << 20, "{} bytes fetched", records.len());

    // Hanging up returns everything the connection held.
    drop(stream);
    broker
        .wait_for_metric("strata_requests_in_flight", |n| n == 0)
        .await;
    assert_eq!(broker.metric("strata_request_bytes_buffered").await, 0);
    assert_eq!(broker.metric("strata_response_bytes_buffered").await, 0);
    broker.stop().await;
}

#[tokio::test]
async fn acks_all_answers_pending_their_sync_are_written_before_a_bad_request_closes() {
    let broker = InProcessBroker::start(BrokerConfig::default()).await;
    broker
        .log
        .create_topic("closing", 1, Default::default())
        .unwrap();
    const PRODUCES: i32 = 4;
    let mut burst = Vec::new();
    for i in 0..PRODUCES {
        let records = one_record(format!("{i}").as_bytes(), 1);
        burst.extend(frame(
            ApiKey::Produce,
            9,
            i,
            &produce_request(-1, "closing", 0, records),
        ));
    }
    // An API key no broker serves: the connection closes after it.
    let mut unserved = Vec::new();
    unserved.extend_from_slice(&i16::MAX.to_be_bytes());
    unserved.extend_from_slice(&0i16.to_be_bytes());
    unserved.extend_from_slice(&99i32.to_be_bytes());
    unserved.extend_from_slice(&(-1i16).to_be_bytes());
    burst.extend_from_slice(&(unserved.len() as i32).to_be_bytes());
    burst.extend(unserved);
    let mut stream = broker.connect().await;
    stream.write_all(&burst).await.unwrap();

    let log = broker.log.partition("closing", 0).unwrap();
    for i in 0..PRODUCES {
        let response = read_response(&mut stream)
            .await
            .unwrap_or_else(|| panic!("produce {i} unanswered before the close"));
        let produced: ProduceResponse = decode_response(response, ApiKey::Produce, 9, i);
        let partition = &produced.responses[0].partition_responses[0];
        assert_eq!(partition.error_code, 0);
        assert_eq!(partition.base_offset, i64::from(i));
        assert!(
            log.durable_offset() > i64::from(i),
            "answered before durable"
        );
    }
    assert!(
        read_response(&mut stream).await.is_none(),
        "the unserved request is not answered; the connection closes"
    );
    broker.stop().await;
}
