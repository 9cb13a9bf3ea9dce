//! One handler per Kafka API, and the dispatch that picks it.
//!
//! A request frame is: api key (i16), api version (i16), then the rest of
//! the request header and the body, both in the encoding that version
//! implies. Unknown API keys and unsupported versions close the connection,
//! except ApiVersions, which answers an unknown version in v0 with
//! UNSUPPORTED_VERSION so the client can retry with one it finds listed.

mod api_versions;
mod metadata;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::{BrokerConfig, BrokerError};
use crate::log::LogManager;

/// What every handler can reach.
pub struct BrokerContext {
    pub log: Arc<LogManager>,
    pub config: BrokerConfig,
    /// The port clients are told to use (the bound one, if 0 was asked for).
    pub advertised_port: i32,
}

/// The APIs this broker serves. ApiVersions advertises exactly these, each
/// over the full version range the protocol crate defines.
pub const SUPPORTED_APIS: &[ApiKey] = &[ApiKey::ApiVersions, ApiKey::Metadata];

/// Handles one request frame; returns the response frame (size prefix
/// included), or an error after which the connection closes.
pub(crate) fn handle(ctx: &BrokerContext, mut frame: Bytes) -> Result<BytesMut, BrokerError> {
    if frame.len() < 4 {
        return Err(BrokerError::Malformed(format!(
            "a {}-byte request",
            frame.len()
        )));
    }
    let api = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(api)
        .ok()
        .filter(|key| SUPPORTED_APIS.contains(key))
        .ok_or(BrokerError::UnknownApi(api))?;
    let range = key.valid_versions();
    if !(range.min..=range.max).contains(&version) {
        if key == ApiKey::ApiVersions {
            let correlation_id = peek_correlation_id(&frame)?;
            return respond(key, 0, correlation_id, &api_versions::unsupported_version());
        }
        return Err(BrokerError::UnsupportedVersion { api, version });
    }
    let header = RequestHeader::decode(&mut frame, key.request_header_version(version))
        .map_err(|e| BrokerError::Malformed(format!("request header: {e}")))?;
    let correlation_id = header.correlation_id;
    match key {
        ApiKey::ApiVersions => {
            let request = decode(&mut frame, version)?;
            respond(
                key,
                version,
                correlation_id,
                &api_versions::handle(&request, version),
            )
        }
        ApiKey::Metadata => {
            let request = decode(&mut frame, version)?;
            respond(
                key,
                version,
                correlation_id,
                &metadata::handle(ctx, &request, version),
            )
        }
        _ => Err(BrokerError::UnknownApi(api)),
    }
}

/// The correlation id sits right after api key and version in every header.
fn peek_correlation_id(frame: &Bytes) -> Result<i32, BrokerError> {
    frame
        .get(4..8)
        .map(|raw| i32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]))
        .ok_or_else(|| {
            BrokerError::Malformed("request header ends before the correlation id".into())
        })
}

fn decode<T: Decodable>(body: &mut Bytes, version: i16) -> Result<T, BrokerError> {
    T::decode(body, version).map_err(|e| BrokerError::Malformed(format!("request body: {e}")))
}

/// Frames a response: size, response header (in the version the API's
/// version calls for), body.
fn respond<T: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<BytesMut, BrokerError> {
    let mut out = BytesMut::with_capacity(256);
    out.extend_from_slice(&[0; 4]);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let encoded = header
        .encode(&mut out, key.response_header_version(version))
        .and_then(|()| body.encode(&mut out, version));
    encoded.map_err(|e| BrokerError::Malformed(format!("encoding a response: {e}")))?;
    let size = i32::try_from(out.len() - 4)
        .map_err(|_| BrokerError::Malformed("response larger than 2 GiB".into()))?;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out)
}
