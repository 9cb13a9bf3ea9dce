//! One handler per Kafka API, and the dispatch that picks it.
//!
//! A request frame is: api key (i16), api version (i16), then the rest of
//! the request header and the body, both in the encoding that version
//! implies. Unknown API keys and unsupported versions close the connection,
//! except ApiVersions, which answers an unknown version in v0 with
//! UNSUPPORTED_VERSION so the client can retry with one it finds listed.
//!
//! Decoding ([`decode_request`]) is apart from handling: the whole request
//! is decoded before any handler runs, and the fuzz targets decode exactly
//! as the broker does without a log behind it.

mod acls;
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_configs;
mod api_versions;
#[cfg(test)]
mod authorization_tests;
mod config_resource;
mod context;
mod create_partitions;
mod create_topics;
mod delete_records;
mod delete_topics;
mod describe_cluster;
mod describe_configs;
mod describe_log_dirs;
mod end_txn;
mod fetch;
mod group_admin;
mod group_membership;
mod group_offsets;
mod init_producer_id;
mod list_offsets;
mod metadata;
mod produce;
mod scram_credentials;
mod txn_admin;
mod txn_offset_commit;

use std::future::Future;
use std::pin::Pin;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

pub use api_versions::{SUPPORTED_APIS, served_versions};
pub use context::BrokerContext;
pub(crate) use fetch::DataWait;

use super::BrokerError;
use super::auth::Caller;
use super::fetch_frame::{Part, fetch_response};
use super::group::{JoinOutcome, Pending, SyncOutcome};
use super::listener::Endpoint;
use produce::Produced;

/// A request frame decoded as the broker decodes it, before any handler
/// sees it.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per request, moved once from the decoder to its handler"
)]
pub enum DecodedRequest {
    /// A served API in a served version: its header and body.
    Request {
        key: ApiKey,
        header: RequestHeader,
        body: RequestKind,
    },
    /// ApiVersions in a version outside the served range: answered in v0
    /// with the list, so nothing past the correlation id is read.
    ApiVersionsTooNew { correlation_id: i32 },
}

/// Decodes a request frame (size prefix taken off): the API key and version
/// are checked first, then the header and the body are decoded in the
/// encoding that version implies. An API or version not served and bytes
/// that do not decode are errors, after which the connection closes.
/// Bytes left after the body are ignored, as Kafka does.
pub fn decode_request(mut frame: Bytes) -> Result<DecodedRequest, BrokerError> {
    if frame.len() < 4 {
        return Err(BrokerError::Malformed(format!(
            "a {}-byte request",
            frame.len()
        )));
    }
    let api = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = match served_api(&frame, api, version)? {
        Served::Yes(key) => key,
        Served::ApiVersionsTooNew => {
            return Ok(DecodedRequest::ApiVersionsTooNew {
                correlation_id: peek_correlation_id(&frame)?,
            });
        }
    };
    let header = RequestHeader::decode(&mut frame, key.request_header_version(version))
        .map_err(|e| BrokerError::Malformed(format!("request header: {e}")))?;
    let body = RequestKind::decode(key, &mut frame, version)
        .map_err(|e| BrokerError::Malformed(format!("request body: {e}")))?;
    Ok(DecodedRequest::Request { key, header, body })
}

/// Handles one request frame; returns the response frame (size prefix
/// included), `None` when the request takes no response (Produce with
/// acks=0), or an error after which the connection closes. Blocks on disk
/// I/O: call it off the async executor's threads. `caller` is who sent
/// it: the principal the ACLs are checked against, and the peer's address,
/// as DescribeGroups reports it.
pub(crate) fn handle(
    ctx: &BrokerContext,
    frame: Bytes,
    final_pass: bool,
    caller: &Caller,
    endpoint: &Endpoint,
) -> Result<Reply, BrokerError> {
    let (key, header, body) = match decode_request(frame)? {
        DecodedRequest::Request { key, header, body } => (key, header, body),
        DecodedRequest::ApiVersionsTooNew { correlation_id } => {
            let key = ApiKey::ApiVersions;
            return respond(key, 0, correlation_id, &api_versions::unsupported_version())
                .map(|frame| Reply::Respond(vec![frame]));
        }
    };
    let version = header.request_api_version;
    let correlation_id = header.correlation_id;
    let response = match body {
        RequestKind::ApiVersions(request) => respond(
            key,
            version,
            correlation_id,
            &api_versions::handle(&request, version),
        )?,
        RequestKind::Metadata(request) => respond(
            key,
            version,
            correlation_id,
            &metadata::handle(ctx, &request, version, endpoint, caller),
        )?,
        RequestKind::Produce(request) => match produce::handle(ctx, &request, caller) {
            Produced::Silent => return Ok(Reply::Silent),
            Produced::Now(body) => respond(key, version, correlation_id, &body)?,
            Produced::OnceDurable(durability) => {
                return Ok(Reply::Pipelined(Box::pin(async move {
                    let body = durability.response().await;
                    respond(key, version, correlation_id, &body)
                })));
            }
        },
        RequestKind::Fetch(request) => {
            // Written by hand so the batches can be sent with sendfile.
            return Ok(match fetch::handle(ctx, &request, final_pass, caller) {
                Ok(topics) => Reply::Respond(fetch_response(version, correlation_id, &topics)),
                Err(wait) => Reply::WaitForData(wait),
            });
        }
        RequestKind::ListOffsets(request) => respond(
            key,
            version,
            correlation_id,
            &list_offsets::handle(ctx, &request, version, caller),
        )?,
        RequestKind::CreateTopics(request) => respond(
            key,
            version,
            correlation_id,
            &create_topics::handle(ctx, &request, version, caller),
        )?,
        RequestKind::DeleteTopics(request) => respond(
            key,
            version,
            correlation_id,
            &delete_topics::handle(ctx, &request, version, caller),
        )?,
        RequestKind::CreatePartitions(request) => respond(
            key,
            version,
            correlation_id,
            &create_partitions::handle(ctx, &request, caller),
        )?,
        RequestKind::DescribeConfigs(request) => respond(
            key,
            version,
            correlation_id,
            &describe_configs::handle(ctx, &request, version, caller),
        )?,
        RequestKind::DescribeLogDirs(request) => respond(
            key,
            version,
            correlation_id,
            &describe_log_dirs::handle(ctx, &request, version, caller),
        )?,
        RequestKind::InitProducerId(request) => respond(
            key,
            version,
            correlation_id,
            &init_producer_id::handle(ctx, &request, version, caller),
        )?,
        RequestKind::FindCoordinator(request) => respond(
            key,
            version,
            correlation_id,
            &group_membership::find_coordinator(ctx, &request, version, endpoint, caller),
        )?,
        RequestKind::JoinGroup(request) => {
            let client_id = header.client_id.as_ref().map_or("", |c| c.as_str());
            let joined = group_membership::join_group(ctx, &request, version, client_id, caller);
            return answer_when_ready(
                joined,
                JoinOutcome::unavailable,
                group_membership::join_response,
                (key, version, correlation_id),
            );
        }
        RequestKind::SyncGroup(request) => {
            return answer_when_ready(
                group_membership::sync_group(ctx, &request, caller),
                SyncOutcome::unavailable,
                group_membership::sync_response,
                (key, version, correlation_id),
            );
        }
        RequestKind::Heartbeat(request) => respond(
            key,
            version,
            correlation_id,
            &group_membership::heartbeat(ctx, &request, caller),
        )?,
        RequestKind::LeaveGroup(request) => respond(
            key,
            version,
            correlation_id,
            &group_membership::leave_group(ctx, &request, version, caller),
        )?,
        RequestKind::OffsetCommit(request) => respond(
            key,
            version,
            correlation_id,
            &group_offsets::offset_commit(ctx, &request, caller),
        )?,
        RequestKind::OffsetFetch(request) => respond(
            key,
            version,
            correlation_id,
            &group_offsets::offset_fetch(ctx, &request, version, caller),
        )?,
        RequestKind::ListGroups(request) => respond(
            key,
            version,
            correlation_id,
            &group_admin::list_groups(ctx, &request, version, caller),
        )?,
        RequestKind::DescribeGroups(request) => respond(
            key,
            version,
            correlation_id,
            &group_admin::describe_groups(ctx, &request, version, caller),
        )?,
        RequestKind::DeleteGroups(request) => respond(
            key,
            version,
            correlation_id,
            &group_admin::delete_groups(ctx, &request, caller),
        )?,
        RequestKind::AddPartitionsToTxn(request) => respond(
            key,
            version,
            correlation_id,
            &add_partitions_to_txn::handle(ctx, &request, version, caller),
        )?,
        RequestKind::AddOffsetsToTxn(request) => respond(
            key,
            version,
            correlation_id,
            &add_offsets_to_txn::handle(ctx, &request, version, caller),
        )?,
        RequestKind::TxnOffsetCommit(request) => respond(
            key,
            version,
            correlation_id,
            &txn_offset_commit::handle(ctx, &request, version, caller),
        )?,
        RequestKind::EndTxn(request) => respond(
            key,
            version,
            correlation_id,
            &end_txn::handle(ctx, &request, version, caller),
        )?,
        RequestKind::DescribeTransactions(request) => respond(
            key,
            version,
            correlation_id,
            &txn_admin::describe_transactions(ctx, &request, caller),
        )?,
        RequestKind::ListTransactions(request) => respond(
            key,
            version,
            correlation_id,
            &txn_admin::list_transactions(ctx, &request, caller),
        )?,
        RequestKind::DescribeProducers(request) => respond(
            key,
            version,
            correlation_id,
            &txn_admin::describe_producers(ctx, &request, caller),
        )?,
        RequestKind::DescribeCluster(request) => respond(
            key,
            version,
            correlation_id,
            &describe_cluster::handle(ctx, &request, endpoint, caller),
        )?,
        RequestKind::DeleteRecords(request) => respond(
            key,
            version,
            correlation_id,
            &delete_records::handle(ctx, &request, caller),
        )?,
        RequestKind::AlterConfigs(request) => respond(
            key,
            version,
            correlation_id,
            &alter_configs::alter_configs(ctx, &request, caller),
        )?,
        RequestKind::IncrementalAlterConfigs(request) => respond(
            key,
            version,
            correlation_id,
            &alter_configs::incremental_alter_configs(ctx, &request, caller),
        )?,
        RequestKind::DescribeAcls(request) => respond(
            key,
            version,
            correlation_id,
            &acls::describe_acls(ctx, &request, caller),
        )?,
        RequestKind::CreateAcls(request) => respond(
            key,
            version,
            correlation_id,
            &acls::create_acls(ctx, &request, caller),
        )?,
        RequestKind::DeleteAcls(request) => respond(
            key,
            version,
            correlation_id,
            &acls::delete_acls(ctx, &request, caller),
        )?,
        // A SASL listener's connection answers these itself, before any
        // request reaches the handlers; anywhere else they are out of place.
        RequestKind::SaslHandshake(_) => respond(
            key,
            version,
            correlation_id,
            &kafka_protocol::messages::SaslHandshakeResponse::default()
                .with_error_code(super::ErrorCode::IllegalSaslState.code()),
        )?,
        RequestKind::SaslAuthenticate(_) => respond(
            key,
            version,
            correlation_id,
            &kafka_protocol::messages::SaslAuthenticateResponse::default()
                .with_error_code(super::ErrorCode::IllegalSaslState.code())
                .with_error_message(Some(kafka_protocol::protocol::StrBytes::from_static_str(
                    "this listener does not use SASL",
                ))),
        )?,
        RequestKind::DescribeUserScramCredentials(request) => respond(
            key,
            version,
            correlation_id,
            &scram_credentials::describe(ctx, &request, caller),
        )?,
        RequestKind::AlterUserScramCredentials(request) => respond(
            key,
            version,
            correlation_id,
            &scram_credentials::alter(ctx, &request, caller),
        )?,
        // `decode_request` only decodes the APIs in SUPPORTED_APIS, and
        // each has its arm above.
        _ => {
            return Err(BrokerError::UnknownApi {
                api: header.request_api_key,
                name: api_name(header.request_api_key),
                version,
                client_id: header.client_id.map_or_else(String::new, |c| c.to_string()),
            });
        }
    };
    Ok(Reply::Respond(vec![response]))
}

/// What the connection does with a request.
pub(crate) enum Reply {
    /// Write this response frame.
    Respond(Vec<Part>),
    /// The request takes no response (Produce with acks=0).
    Silent,
    /// A fetch found too little data: wait for an append to a partition it
    /// reads, or its deadline, then ask again.
    WaitForData(DataWait),
    /// The answer depends on other clients (a JoinGroup waits for the
    /// rebalance, a SyncGroup for the leader's assignment): the response
    /// frame once it is known. The connection waits for it before it takes
    /// its next request.
    Later(ResponseFuture),
    /// The request is done but its answer waits for work already under way
    /// (acks=all's fdatasync): the response frame once it is. The
    /// connection takes its next requests meanwhile and still answers in
    /// order.
    Pipelined(ResponseFuture),
}

/// A response frame that is not known yet.
pub(crate) type ResponseFuture = Pin<Box<dyn Future<Output = Result<Part, BrokerError>> + Send>>;

/// Frames a group coordinator answer now, or once its channel completes.
/// A channel dropped unanswered (the broker is stopping) answers with
/// `gone()`, a retriable error.
fn answer_when_ready<T, R>(
    pending: Pending<T>,
    gone: fn() -> T,
    build: impl FnOnce(T, i16) -> R + Send + 'static,
    (key, version, correlation_id): (ApiKey, i16, i32),
) -> Result<Reply, BrokerError>
where
    T: Send + 'static,
    R: Encodable,
{
    match pending {
        Pending::Now(outcome) => {
            let frame = respond(key, version, correlation_id, &build(outcome, version))?;
            Ok(Reply::Respond(vec![frame]))
        }
        Pending::Later(receiver) => Ok(Reply::Later(Box::pin(async move {
            let outcome = receiver.await.unwrap_or_else(|_| gone());
            respond(key, version, correlation_id, &build(outcome, version))
        }))),
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

/// Whether a request's API and version are served.
#[derive(Debug, PartialEq, Eq)]
enum Served {
    Yes(ApiKey),
    /// ApiVersions at a version outside the served range: answered in v0
    /// with the list, so the client can pick a version from it.
    ApiVersionsTooNew,
}

/// Checks the API key and version of `frame` before anything else of it is
/// decoded. An API this broker does not serve, or a version outside its
/// range (but for ApiVersions), is an error naming the client, the API and
/// the version, for the warning the connection logs as it closes.
fn served_api(frame: &Bytes, api: i16, version: i16) -> Result<Served, BrokerError> {
    let Some(key) = ApiKey::try_from(api)
        .ok()
        .filter(|key| SUPPORTED_APIS.contains(key))
    else {
        return Err(unknown_api(frame, api, version));
    };
    let range = api_versions::served_versions(key);
    if (range.min..=range.max).contains(&version) {
        return Ok(Served::Yes(key));
    }
    if key == ApiKey::ApiVersions {
        return Ok(Served::ApiVersionsTooNew);
    }
    Err(BrokerError::UnsupportedVersion {
        api,
        name: api_name(api),
        version,
        min: range.min,
        max: range.max,
        client_id: peek_client_id(frame),
    })
}

/// Longest client id quoted in a log line; longer ones are cut.
const LOGGED_CLIENT_ID_CHARS_MAX: usize = 128;

/// The client id of a request, read without decoding the header: every
/// request header from v1 on starts api key (2), api version (2),
/// correlation id (4), then the client id as a non-compact nullable string
/// (i16 length, -1 for null), even in the flexible v2 header. For log lines
/// only, so anything unreadable is said as such rather than an error.
fn peek_client_id(frame: &Bytes) -> String {
    let Some(length) = frame
        .get(8..10)
        .map(|raw| i16::from_be_bytes([raw[0], raw[1]]))
    else {
        return "(no client id)".into();
    };
    let Ok(length) = usize::try_from(length) else {
        return "(null client id)".into();
    };
    match frame.get(10..10 + length) {
        Some(raw) => String::from_utf8_lossy(raw)
            .chars()
            .take(LOGGED_CLIENT_ID_CHARS_MAX)
            .collect(),
        None => "(truncated client id)".into(),
    }
}

/// The protocol's name of an API key (`Produce`, `AddPartitionsToTxn`), or
/// `unknown` for a key the protocol does not define.
fn api_name(api: i16) -> String {
    ApiKey::try_from(api).map_or_else(|()| "unknown".into(), |key| format!("{key:?}"))
}

fn unknown_api(frame: &Bytes, api: i16, version: i16) -> BrokerError {
    BrokerError::UnknownApi {
        api,
        name: api_name(api),
        version,
        client_id: peek_client_id(frame),
    }
}

/// Frames a response: size, response header (in the version the API's
/// version calls for), body.
pub(crate) fn respond<T: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<Part, BrokerError> {
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
    Ok(Part::Bytes(out.to_vec()))
}

#[cfg(test)]
pub(crate) mod tests;
