//! The broker-wide request memory budget and the stall timeout: when the
//! request bytes held reach `request_memory_bytes_max`, connections stop
//! reading until earlier requests are answered (nothing fails, nothing is
//! reordered); a client that stops reading its responses is disconnected
//! after `socket_stall_timeout` and everything it held is returned.

use crate::support;

use std::time::Duration;

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchResponse, ProduceResponse,
};
use strata::broker::BrokerConfig;
use support::wire::{call, decode_response, fetch_request, frame, produce_request, read_response};
use support::{InProcessBroker, one_record};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn a_spent_request_memory_budget_pauses_reading_instead_of_failing() {
    const BUDGET: u64 = 160 << 10;
    let broker = InProcessBroker::start(BrokerConfig {
        request_bytes_max: 64 << 10,
        request_memory_bytes_max: BUDGET as usize,
        ..BrokerConfig::default()
    })
    .await;
    broker.fill("bulk", 32);
    broker
        .log
        .create_topic("produced", 1, Default::default())
        .unwrap();
    // A fetch whose 32 MiB answer the client leaves unread, so the
    // connection's answerer is stuck writing; behind it four produces of
    // about 60 KB each: two fit in the budget, the third waits for it.
    let mut burst = frame(
        ApiKey::Fetch,
        12,
        0,
        &fetch_request("bulk", &[0], 0, 64 << 20, 0),
    );
    let value = vec![b'p'; 60_000];
    for i in 1..=4 {
        let request = produce_request(1, "produced", 0, one_record(&value, i64::from(i)));
        burst.extend(frame(ApiKey::Produce, 9, i, &request));
    }
    let mut stream = broker.connect().await;
    stream.write_all(&burst).await.unwrap();

    broker
        .wait_for_metric("strata_request_memory_waits_total", |n| n >= 1)
        .await;
    let held = broker.metric("strata_request_bytes_buffered").await;
    assert!(
        (2 * 60_000..=BUDGET).contains(&held),
        "{held} request bytes held"
    );

    // Another connection's request waits its turn in the budget too, and
    // is answered once memory is returned.
    let addr = broker.addr;
    let other = tokio::spawn(async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let response: ApiVersionsResponse = call(
            &mut stream,
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default(),
        )
        .await;
        response.error_code
    });

    // Reading now: the fetch, then the produces, in order.
    let response = read_response(&mut stream).await.expect("a response");
    let fetched: FetchResponse = decode_response(response, ApiKey::Fetch, 12, 0);
    assert_eq!(fetched.responses[0].partitions[0].error_code, 0);
    for i in 1..=4 {
        let response = read_response(&mut stream).await.expect("a response");
        let produced: ProduceResponse = decode_response(response, ApiKey::Produce, 9, i);
        let partition = &produced.responses[0].partition_responses[0];
        assert_eq!(partition.error_code, 0);
        assert_eq!(partition.base_offset, i64::from(i - 1));
    }
    assert_eq!(other.await.unwrap(), 0);
    broker
        .wait_for_metric("strata_request_bytes_buffered", |n| n == 0)
        .await;
    broker.stop().await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_disconnected_and_what_it_held_returned() {
    let broker = InProcessBroker::start(BrokerConfig {
        socket_stall_timeout: Duration::from_millis(300),
        ..BrokerConfig::default()
    })
    .await;
    broker.fill("bulk", 32);
    let mut burst = frame(
        ApiKey::Fetch,
        12,
        0,
        &fetch_request("bulk", &[0], 0, 64 << 20, 0),
    );
    for i in 1..=3 {
        burst.extend(frame(
            ApiKey::ApiVersions,
            3,
            i,
            &ApiVersionsRequest::default(),
        ));
    }
    let mut stream = broker.connect().await;
    stream.write_all(&burst).await.unwrap();

    // The fetch was handled (its bytes counted) and is being written...
    broker
        .wait_for_metric("strata_bytes_out_total", |n| n > 30 << 20)
        .await;
    // ...until the stall timeout closes the connection.
    broker
        .wait_for_metric("strata_requests_in_flight", |n| n == 0)
        .await;
    assert_eq!(broker.metric("strata_request_bytes_buffered").await, 0);
    assert_eq!(broker.metric("strata_response_bytes_buffered").await, 0);

    // The client gets part of the response, then the end of the stream.
    let mut received = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => received += n,
        }
    }
    assert!(received < 30 << 20, "{received} bytes arrived");

    // The broker serves on.
    let mut fresh = broker.connect().await;
    let response: ApiVersionsResponse = call(
        &mut fresh,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    assert_eq!(response.error_code, 0);
    broker.stop().await;
}
