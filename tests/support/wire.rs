//! Speaking the Kafka protocol to a broker by hand: framing a request,
//! reading the response, decoding it in the version asked for, over a
//! tokio socket or a blocking one; and the requests the tests send most.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a produce waits for acks=all before the broker answers.
const PRODUCE_TIMEOUT_MS: i32 = 10_000;

/// A size-prefixed request frame with client id "test".
pub fn frame<T: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &T) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .expect("header encodes");
    body.encode(&mut buf, version).expect("request encodes");
    let mut out = (buf.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

/// Sends `request` and reads one response frame (without its size);
/// `None` when the broker closed the connection.
pub async fn exchange(stream: &mut TcpStream, request: &[u8]) -> Option<Bytes> {
    stream.write_all(request).await.unwrap();
    read_response(stream).await
}

pub async fn read_response(stream: &mut TcpStream) -> Option<Bytes> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await.ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).await.ok()?;
    Some(Bytes::from(body))
}

/// Decodes a response frame, checking the correlation id and that nothing
/// is left over.
pub fn decode_response<Resp: Decodable>(
    mut response: Bytes,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Resp {
    let header = ResponseHeader::decode(&mut response, key.response_header_version(version))
        .expect("response header decodes");
    assert_eq!(header.correlation_id, correlation_id);
    let decoded = Resp::decode(&mut response, version).expect("response decodes");
    assert_eq!(response.remaining(), 0, "the whole response is consumed");
    decoded
}

fn correlation_id(version: i16) -> i32 {
    1000 + i32::from(version)
}

/// One request, one decoded response.
pub async fn call<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Resp {
    let correlation_id = correlation_id(version);
    let response = exchange(stream, &frame(key, version, correlation_id, request))
        .await
        .expect("a response");
    decode_response(response, key, version, correlation_id)
}

/// Like [`call`] over a blocking socket, for tests that run the broker as a
/// process and talk to it from threads. Returns the I/O error if the
/// connection fails (a killed broker).
pub fn call_blocking<Req: Encodable, Resp: Decodable>(
    stream: &mut std::net::TcpStream,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> std::io::Result<Resp> {
    use std::io::{Read, Write};

    let correlation_id = correlation_id(version);
    stream.write_all(&frame(key, version, correlation_id, request))?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body)?;
    Ok(decode_response(
        Bytes::from(body),
        key,
        version,
        correlation_id,
    ))
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.into()))
}

/// A produce of `records` to one partition.
pub fn produce_request(
    acks: i16,
    topic: &str,
    partition: i32,
    records: Vec<u8>,
) -> kafka_protocol::messages::ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    kafka_protocol::messages::ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(PRODUCE_TIMEOUT_MS)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(records))),
                ]),
        ])
}

/// (error code, base offset) of the one partition a produce went to.
pub fn produce_answer(response: &kafka_protocol::messages::ProduceResponse) -> (i16, i64) {
    let answer = &response.responses[0].partition_responses[0];
    (answer.error_code, answer.base_offset)
}

/// A fetch of `partitions` of `topic` from `offset`, by name, min_bytes 1.
pub fn fetch_request(
    topic: &str,
    partitions: &[i32],
    offset: i64,
    max_bytes: i32,
    max_wait_ms: i32,
) -> kafka_protocol::messages::FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    kafka_protocol::messages::FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(max_bytes)
                        })
                        .collect(),
                ),
        ])
}

/// Produces `records` to one partition (acks=1, v9) and returns the
/// broker's (error code, base offset).
pub async fn produce(
    stream: &mut TcpStream,
    topic: &str,
    partition: i32,
    records: Vec<u8>,
) -> (i16, i64) {
    let request = produce_request(1, topic, partition, records);
    let response = call(
        stream,
        kafka_protocol::messages::ApiKey::Produce,
        9,
        &request,
    )
    .await;
    produce_answer(&response)
}

/// An InitProducerId for a new producer, or (with `current`) to bump the
/// epoch of an existing one; with a transactional id when one is given.
pub fn init_producer_id_request(
    transactional_id: Option<&str>,
    current: Option<(i64, i16)>,
) -> kafka_protocol::messages::InitProducerIdRequest {
    use kafka_protocol::messages::{InitProducerIdRequest, ProducerId, TransactionalId};
    let (producer_id, epoch) = current.unwrap_or((-1, -1));
    InitProducerIdRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.into()))),
        )
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
}
