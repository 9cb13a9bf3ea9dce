//! Any bytes as the body of every request the broker serves: the first two
//! bytes pick an API from those ApiVersions advertises and a version in its
//! served range (an API key and version served are taken as they are, so a
//! captured request's key and version lead its body in the corpus), a
//! well-formed header for them is put in front of the rest, and the frame
//! is decoded as the broker decodes it.
//!
//! Beyond "no panic": a body that decodes is of the API asked for, with the
//! header's correlation id, and encoding it again does not panic.

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use strata::broker::api::{SUPPORTED_APIS, served_versions};
use strata::broker::fuzzing::{DecodedRequest, decode_request};

const CORRELATION_ID: i32 = 0x5eed;

pub fn check(data: &[u8]) {
    let [api, version, body @ ..] = data else {
        return;
    };
    let (key, version) = served_api(*api, *version);
    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION_ID)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")))
        .encode(&mut frame, key.request_header_version(version))
        .expect("a header encodes");
    frame.extend_from_slice(body);

    let Ok(decoded) = decode_request(frame.freeze()) else {
        return;
    };
    let DecodedRequest::Request {
        key: decoded_key,
        header,
        body,
    } = decoded
    else {
        panic!("a served version of {key:?} decoded as too new");
    };
    assert_eq!((decoded_key, header.correlation_id), (key, CORRELATION_ID));

    // What decodes encodes again (the protocol crate's round trip is not
    // exact for every version: the broker never re-encodes a request).
    let mut encoded = BytesMut::new();
    let _ = body.encode(&mut encoded, version);
}

/// The served API whose key is `api`, or else the `api`-th one; `version`
/// if served, or else the `version`-th served one.
fn served_api(api: u8, version: u8) -> (ApiKey, i16) {
    let key = SUPPORTED_APIS
        .iter()
        .copied()
        .find(|key| *key as i16 == i16::from(api))
        .unwrap_or(SUPPORTED_APIS[usize::from(api) % SUPPORTED_APIS.len()]);
    let range = served_versions(key);
    let version = i16::from(version);
    if (range.min..=range.max).contains(&version) {
        return (key, version);
    }
    let span = range.max - range.min + 1;
    (key, range.min + version % span)
}
