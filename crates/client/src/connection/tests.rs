//! ApiVersions negotiation against brokers that answer in older layouts.

use super::api_versions::read_v0_ranges;
use super::*;
use kafka_protocol::messages::ApiVersionsResponse;

/// An ApiVersions body in the v0 layout.
fn v0_body(code: i16, ranges: &[(i16, i16, i16)]) -> Bytes {
    let mut body = Vec::new();
    body.extend_from_slice(&code.to_be_bytes());
    body.extend_from_slice(&(ranges.len() as i32).to_be_bytes());
    for (key, min, max) in ranges {
        for field in [key, min, max] {
            body.extend_from_slice(&field.to_be_bytes());
        }
    }
    Bytes::from(body)
}

/// A successful answer in `version`, listing `ranges`.
fn answer(version: i16, ranges: &[(i16, i16, i16)]) -> Bytes {
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    let response = ApiVersionsResponse::default().with_api_keys(
        ranges
            .iter()
            .map(|(key, min, max)| {
                ApiVersion::default()
                    .with_api_key(*key)
                    .with_min_version(*min)
                    .with_max_version(*max)
            })
            .collect(),
    );
    let mut body = BytesMut::new();
    response.encode(&mut body, version).unwrap();
    body.freeze()
}

const API_VERSIONS: i16 = ApiKey::ApiVersions as i16;
const METADATA: i16 = ApiKey::Metadata as i16;

#[test]
fn an_unsupported_version_answer_in_the_v0_layout_names_the_version_to_ask() {
    let body = v0_body(UNSUPPORTED_VERSION, &[(API_VERSIONS, 0, 2)]);
    assert_eq!(
        read_api_versions(body, 3).unwrap(),
        VersionsAnswer::RetryAt(2)
    );
}

#[test]
fn an_unsupported_version_answer_out_of_the_v0_layout_falls_back_to_v0() {
    // librdkafka's mock: a one-byte count, then the one entry and a
    // throttle time.
    let body = Bytes::from_static(&[0, 35, 1, 0, 18, 0, 0, 0, 2, 0, 0, 0, 0]);
    assert_eq!(
        read_api_versions(body, 3).unwrap(),
        VersionsAnswer::RetryAt(0)
    );
}

#[test]
fn an_offered_version_not_below_the_refused_one_falls_back_to_v0() {
    let body = v0_body(UNSUPPORTED_VERSION, &[(API_VERSIONS, 0, 3)]);
    assert_eq!(
        read_api_versions(body, 3).unwrap(),
        VersionsAnswer::RetryAt(0)
    );
    let listing_none = v0_body(UNSUPPORTED_VERSION, &[(METADATA, 0, 12)]);
    assert_eq!(
        read_api_versions(listing_none, 3).unwrap(),
        VersionsAnswer::RetryAt(0)
    );
}

#[test]
fn unsupported_v0_is_an_error() {
    let body = v0_body(UNSUPPORTED_VERSION, &[]);
    let error = read_api_versions(body, 0).unwrap_err();
    assert_eq!(error.code(), Some(UNSUPPORTED_VERSION));
}

#[test]
fn a_v0_layout_with_a_count_past_the_body_is_not_read() {
    let mut body = v0_body(UNSUPPORTED_VERSION, &[(API_VERSIONS, 0, 2)]).to_vec();
    body[2..6].copy_from_slice(&i32::MAX.to_be_bytes());
    assert_eq!(read_v0_ranges(&body), None);
    body[2..6].copy_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(read_v0_ranges(&body), None);
}

#[test]
fn a_supported_answer_lists_the_ranges() {
    let body = answer(3, &[(API_VERSIONS, 0, 3), (METADATA, 1, 12)]);
    let VersionsAnswer::Versions(versions) = read_api_versions(body, 3).unwrap() else {
        panic!("a retry asked for a supported version");
    };
    assert_eq!(versions[&METADATA], (1, 12));
}

/// Reads one request frame: (api version, correlation id).
async fn read_request(stream: &mut TcpStream) -> (i16, i32) {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await.unwrap();
    let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut frame).await.unwrap();
    assert_eq!(i16::from_be_bytes([frame[0], frame[1]]), API_VERSIONS);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    (version, correlation)
}

/// Writes a response: size, correlation id (ApiVersions answers have a
/// v0 header whatever the version), body.
async fn write_response(stream: &mut TcpStream, correlation: i32, body: &[u8]) {
    let mut frame = Vec::new();
    frame.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    frame.extend_from_slice(&correlation.to_be_bytes());
    frame.extend_from_slice(body);
    stream.write_all(&frame).await.unwrap();
}

#[tokio::test]
async fn connect_asks_again_in_the_version_an_older_broker_offers() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let broker = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut asked = Vec::new();
        loop {
            let (version, correlation) = read_request(&mut stream).await;
            asked.push(version);
            if version > 2 {
                // A broker whose newest ApiVersions is v2, as Kafka
                // answers a version it does not know.
                let body = v0_body(UNSUPPORTED_VERSION, &[(API_VERSIONS, 0, 2)]);
                write_response(&mut stream, correlation, &body).await;
                continue;
            }
            let body = answer(version, &[(API_VERSIONS, 0, 2), (METADATA, 0, 9)]);
            write_response(&mut stream, correlation, &body).await;
            return asked;
        }
    });
    let connection = Connection::connect(&addr, "test", Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(broker.await.unwrap(), vec![API_VERSIONS_FIRST, 2]);
    let metadata = connection
        .version::<kafka_protocol::messages::MetadataRequest>(12)
        .unwrap();
    assert_eq!(metadata, 9);
}
