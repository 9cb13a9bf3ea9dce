//! Request decoding as the broker does it: served APIs and versions,
//! the ApiVersions fallback, and frames that do not decode.

use super::*;

/// A request frame (no size prefix): api key, version, correlation id 7,
/// then `client_id` as a nullable string and nothing else.
fn request(api: i16, version: i16, client_id: Option<&str>) -> Bytes {
    numbered_request(api, version, 7, client_id)
}

/// [`request`] with the correlation id `correlation` (for the
/// connection's tests too).
pub(crate) fn numbered_request(
    api: i16,
    version: i16,
    correlation: i32,
    client_id: Option<&str>,
) -> Bytes {
    let mut frame = Vec::new();
    frame.extend_from_slice(&api.to_be_bytes());
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&correlation.to_be_bytes());
    match client_id {
        Some(id) => {
            frame.extend_from_slice(&(id.len() as i16).to_be_bytes());
            frame.extend_from_slice(id.as_bytes());
        }
        None => frame.extend_from_slice(&(-1i16).to_be_bytes()),
    }
    Bytes::from(frame)
}

#[test]
fn an_unsupported_version_names_the_client_the_api_and_the_versions_served() {
    let frame = request(ApiKey::Metadata as i16, 99, Some("billing-app"));
    let error = served_api(&frame, 3, 99).unwrap_err();
    assert!(error.is_unserved_request());
    let message = error.to_string();
    for part in ["\"billing-app\"", "Metadata", "API key 3", "version 99"] {
        assert!(message.contains(part), "{message}");
    }
}

#[test]
fn an_unknown_api_key_names_the_client_and_the_key() {
    let frame = request(ApiKey::DescribeDelegationToken as i16, 3, Some("token-app"));
    let message = served_api(&frame, 41, 3).unwrap_err().to_string();
    for part in [
        "\"token-app\"",
        "API key 41",
        "DescribeDelegationToken",
        "version 3",
    ] {
        assert!(message.contains(part), "{message}");
    }
    let unknown = served_api(&request(9999, 0, None), 9999, 0).unwrap_err();
    assert!(unknown.to_string().contains("unknown"), "{unknown}");
    assert!(
        unknown.to_string().contains("(null client id)"),
        "{unknown}"
    );
}

#[test]
fn served_apis_pass_and_a_too_new_api_versions_is_answered_not_refused() {
    let metadata = request(ApiKey::Metadata as i16, 1, Some("c"));
    assert_eq!(
        served_api(&metadata, 3, 1).unwrap(),
        Served::Yes(ApiKey::Metadata)
    );
    let api_versions = request(ApiKey::ApiVersions as i16, 99, Some("c"));
    assert_eq!(
        served_api(&api_versions, 18, 99).unwrap(),
        Served::ApiVersionsTooNew
    );
}

#[test]
fn a_client_id_past_the_frame_is_said_to_be_truncated() {
    let mut frame = request(ApiKey::Metadata as i16, 99, Some("abc")).to_vec();
    frame.truncate(frame.len() - 1);
    assert_eq!(peek_client_id(&Bytes::from(frame)), "(truncated client id)");
    assert_eq!(
        peek_client_id(&Bytes::from_static(&[0, 3, 0, 1])),
        "(no client id)"
    );
}
