//! Requests framed by hand, so any field can lie.

use super::*;

/// A Produce request frame at `version`.
pub(crate) fn produce(version: i16, request: kafka_protocol::messages::ProduceRequest) -> Vec<u8> {
    frame(ApiKey::Produce, version, CORRELATION_ID, &request)
}

/// A request (no size prefix): the header `key` and `version` take, then
/// `body` as given.
pub(crate) fn raw_request(key: ApiKey, version: i16, body: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION_ID)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)))
        .encode(&mut out, key.request_header_version(version))
        .unwrap();
    out.extend_from_slice(body);
    out.to_vec()
}

/// A request (no size prefix) with a v1 header for any key and version.
pub(crate) fn raw_request_unchecked(api: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&api.to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    out.extend_from_slice(&(CLIENT_ID.len() as i16).to_be_bytes());
    out.extend_from_slice(CLIENT_ID.as_bytes());
    out.extend_from_slice(body);
    out
}

/// `body` behind its size prefix.
pub(crate) fn sized(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// A framed request without its size prefix.
pub(crate) fn without_size(framed: Vec<u8>) -> Vec<u8> {
    framed[4..].to_vec()
}

pub(crate) fn create_topics_request(name: &str, partitions: i32) -> CreateTopicsRequest {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(support::wire::topic_name(name))
                .with_num_partitions(partitions)
                .with_replication_factor(1),
        ])
}
