//! ApiVersions: which APIs and versions this broker serves.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::SUPPORTED_APIS;
use crate::broker::ErrorCode;

pub(super) fn handle(_request: &ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ErrorCode::None.code())
        .with_api_keys(supported())
}

/// The v0 answer to a version this broker does not know: the error, and the
/// list, so the client can pick a version from it.
pub(super) fn unsupported_version() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ErrorCode::UnsupportedVersion.code())
        .with_api_keys(supported())
}

fn supported() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|key| {
            let range = key.valid_versions();
            ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(range.min)
                .with_max_version(range.max)
        })
        .collect()
}
