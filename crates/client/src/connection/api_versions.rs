//! Reading an ApiVersions answer, in the layout of the version asked or,
//! for UNSUPPORTED_VERSION, in v0's (KIP-511).

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::Decodable;

use super::{API_VERSION_ENTRY_BYTES, UNSUPPORTED_VERSION};
use crate::ClientError;

/// What an ApiVersions answer says.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum VersionsAnswer {
    /// API key → (min, max) version the broker speaks.
    Versions(HashMap<i16, (i16, i16)>),
    /// The version asked is unknown to the broker: ask again in this one.
    RetryAt(i16),
}

/// Reads the answer to an ApiVersions request sent in `version`.
///
/// An UNSUPPORTED_VERSION answer is laid out as v0 whatever was asked
/// (KIP-511: the broker cannot know the layout of a version it does not
/// know), listing at least the ApiVersions range it speaks:
///
/// ```text
/// error_code i16 | count i32 | count × (api_key i16, min i16, max i16) | …
/// ```
///
/// The newest listed version below the one refused is asked next. An
/// answer not in that layout (librdkafka's mock writes the count of a
/// flexible request as one byte) or listing no usable version is asked
/// again in v0, which every broker answers.
pub(super) fn read_api_versions(
    mut body: Bytes,
    version: i16,
) -> Result<VersionsAnswer, ClientError> {
    if body.len() < 2 {
        return Err(ClientError::Protocol(format!(
            "an ApiVersions answer of {} bytes",
            body.len()
        )));
    }
    let code = i16::from_be_bytes([body[0], body[1]]);
    if code == UNSUPPORTED_VERSION {
        if version == 0 {
            return Err(ClientError::kafka(code, None, None));
        }
        let offered = read_v0_ranges(&body)
            .and_then(|ranges| ranges.get(&(ApiKey::ApiVersions as i16)).copied())
            .map(|(_, max)| max)
            .filter(|max| (0..version).contains(max));
        return Ok(VersionsAnswer::RetryAt(offered.unwrap_or(0)));
    }
    // Bytes after the answer are ignored, as for any response.
    let response = ApiVersionsResponse::decode(&mut body, version)
        .map_err(|e| ClientError::Protocol(format!("ApiVersions answer: {e}")))?;
    if response.error_code != 0 {
        return Err(ClientError::kafka(response.error_code, None, None));
    }
    Ok(VersionsAnswer::Versions(
        response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect(),
    ))
}

/// The api key ranges of an ApiVersions answer in the v0 layout (anything
/// after them, as v1's throttle time, is ignored); `None` when the body is
/// not in that layout.
pub(super) fn read_v0_ranges(body: &[u8]) -> Option<HashMap<i16, (i16, i16)>> {
    let count = body.get(2..6)?;
    let count = usize::try_from(i32::from_be_bytes(count.try_into().ok()?)).ok()?;
    let end = count.checked_mul(API_VERSION_ENTRY_BYTES)?.checked_add(6)?;
    let entries = body.get(6..end)?;
    let i16_at = |entry: &[u8], at: usize| i16::from_be_bytes([entry[at], entry[at + 1]]);
    Some(
        entries
            .chunks_exact(API_VERSION_ENTRY_BYTES)
            .map(|entry| (i16_at(entry, 0), (i16_at(entry, 2), i16_at(entry, 4))))
            .collect(),
    )
}
