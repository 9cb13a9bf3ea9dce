//! ApiVersions: which APIs and versions this broker serves.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, InitProducerIdRequest, OffsetCommitRequest,
    OffsetFetchRequest,
};
use kafka_protocol::protocol::{Message, VersionRange};

use crate::ErrorCode;

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

/// The APIs this broker serves. ApiVersions advertises exactly these, each
/// over the full version range the protocol crate defines.
pub const SUPPORTED_APIS: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::Metadata,
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::DescribeConfigs,
    ApiKey::DescribeLogDirs,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::ListGroups,
    ApiKey::DescribeGroups,
    ApiKey::DeleteGroups,
    ApiKey::InitProducerId,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::TxnOffsetCommit,
    ApiKey::EndTxn,
    ApiKey::DescribeTransactions,
    ApiKey::ListTransactions,
    ApiKey::DescribeProducers,
    ApiKey::DescribeCluster,
    ApiKey::DeleteRecords,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
];

/// The versions of `key` served: the protocol crate's range, capped where
/// its API table lists a version past the request schema it can decode
/// (InitProducerId v6, OffsetCommit and OffsetFetch v10 in 0.18).
pub fn served_versions(key: ApiKey) -> VersionRange {
    let range = key.valid_versions();
    let decodable_max = match key {
        ApiKey::InitProducerId => InitProducerIdRequest::VERSIONS.max,
        ApiKey::OffsetCommit => OffsetCommitRequest::VERSIONS.max,
        ApiKey::OffsetFetch => OffsetFetchRequest::VERSIONS.max,
        _ => range.max,
    };
    VersionRange {
        min: range.min,
        max: range.max.min(decodable_max),
    }
}

/// The lowest Produce version advertised, below the lowest served (3).
///
/// librdkafka before 2.8 sends gzip, snappy and lz4 batches only to a broker
/// whose advertised Produce range overlaps v0, and otherwise silently sends
/// them uncompressed (librdkafka issue 4956). Kafka 4.0 removed Produce
/// v0–v2 but, for that reason, still advertises them (KAFKA-18659); so does
/// strata. A request in those versions is refused like any unsupported
/// version: the connection closes.
const PRODUCE_ADVERTISED_MIN: i16 = 0;

fn supported() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|key| {
            let range = served_versions(*key);
            let min = match key {
                ApiKey::Produce => PRODUCE_ADVERTISED_MIN,
                _ => range.min,
            };
            ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(min)
                .with_max_version(range.max)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn produce_is_advertised_from_v0_and_every_other_api_over_its_served_range() {
        for api in supported() {
            let key = ApiKey::try_from(api.api_key).unwrap();
            let range = served_versions(key);
            assert_eq!(api.max_version, range.max, "{key:?}");
            let min = if key == ApiKey::Produce { 0 } else { range.min };
            assert_eq!(api.min_version, min, "{key:?}");
        }
    }
}
