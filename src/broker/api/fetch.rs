//! Fetch: whole batches from each requested partition, starting at the
//! batch that holds the fetch offset, waiting up to `max_wait_ms` for at
//! least `min_bytes`.
//!
//! Not yet zero-copy: the batch bytes are copied from the segment files into
//! the encoded response. The sendfile path, with hand-written framing, comes
//! next; the response is already built from the log's file slices.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::BrokerContext;
use crate::broker::ErrorCode;
use crate::log::{LogError, Topic};

/// How often a long-polling fetch looks for new data.
const POLL_INTERVAL: Duration = Duration::from_millis(5);
/// Fetch v5 added the partition's log start offset to the response.
const LOG_START_OFFSET_VERSION: i16 = 5;
/// Upper bound on `max_wait_ms`, whatever the client asks.
const WAIT_MS_MAX: u64 = 30_000;

pub(super) fn handle(ctx: &BrokerContext, request: &FetchRequest, version: i16) -> FetchResponse {
    let wait = Duration::from_millis(
        u64::try_from(request.max_wait_ms)
            .unwrap_or(0)
            .min(WAIT_MS_MAX),
    );
    let deadline = Instant::now() + wait;
    let min_bytes = u64::try_from(request.min_bytes).unwrap_or(0);
    loop {
        let (response, bytes) = read_once(ctx, request, version);
        if bytes >= min_bytes.max(1) || Instant::now() >= deadline {
            return response;
        }
        std::thread::sleep(POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now())));
    }
}

/// One pass over the requested partitions; returns the response and the
/// record bytes in it.
fn read_once(ctx: &BrokerContext, request: &FetchRequest, version: i16) -> (FetchResponse, u64) {
    let mut budget = u64::try_from(request.max_bytes).unwrap_or(0);
    let mut total = 0u64;
    let mut topics = Vec::with_capacity(request.topics.len());
    for requested in &request.topics {
        let topic = find_topic(ctx, requested.topic.0.as_str(), requested.topic_id);
        let mut partitions = Vec::with_capacity(requested.partitions.len());
        for partition in &requested.partitions {
            let log = topic.as_ref().and_then(|t| {
                usize::try_from(partition.partition)
                    .ok()
                    .and_then(|i| t.partitions.get(i).cloned())
            });
            let mut data = PartitionData::default()
                .with_partition_index(partition.partition)
                .with_high_watermark(-1);
            let Some(log) = log else {
                partitions.push(data.with_error_code(ErrorCode::UnknownTopicOrPartition.code()));
                continue;
            };
            let end = log.log_end_offset();
            data = data.with_high_watermark(end).with_last_stable_offset(end);
            if version >= LOG_START_OFFSET_VERSION {
                data = data.with_log_start_offset(log.log_start_offset());
            }
            let partition_max = u64::try_from(partition.partition_max_bytes).unwrap_or(0);
            // Past the response budget only the first partition with data
            // still gets a batch, so a consumer always makes progress.
            let limit = if total == 0 {
                partition_max.max(1)
            } else {
                partition_max.min(budget)
            };
            if limit == 0 {
                partitions.push(data.with_records(Some(Bytes::new())));
                continue;
            }
            match log
                .read(partition.fetch_offset, limit)
                .and_then(|read| read.read_to_vec())
            {
                Ok(bytes) => {
                    total += bytes.len() as u64;
                    budget = budget.saturating_sub(bytes.len() as u64);
                    partitions.push(data.with_records(Some(Bytes::from(bytes))));
                }
                Err(error) => {
                    if !matches!(error, LogError::OffsetOutOfRange { .. }) {
                        tracing::warn!(partition = log.name(), "fetch failed: {error}");
                    }
                    partitions.push(data.with_error_code(ErrorCode::from(&error).code()));
                }
            }
        }
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(requested.topic.clone())
                .with_topic_id(requested.topic_id)
                .with_partitions(partitions),
        );
    }
    (FetchResponse::default().with_responses(topics), total)
}

/// By name (up to v12) or by id (v13 on).
pub(super) fn find_topic(
    ctx: &BrokerContext,
    name: &str,
    id: uuid::Uuid,
) -> Option<std::sync::Arc<Topic>> {
    if !name.is_empty() {
        return ctx.log.topic(name);
    }
    ctx.log.topics().into_iter().find(|topic| topic.id() == id)
}
