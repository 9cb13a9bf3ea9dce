//! Fetch: whole batches from each requested partition, starting at the
//! batch that holds the fetch offset, waiting up to `max_wait_ms` for at
//! least `min_bytes`. The wait itself happens in the connection, without a
//! thread: a pass that may wait and comes up short subscribes to each
//! partition it reads and reads them again
//! ([`AppendSignals`](crate::AppendSignals)), so only an append to one of
//! those partitions (or the deadline, or shutdown) runs the fetch again,
//! and an append between the read and the wait is not lost. The first read
//! of a pass takes no subscription: a fetch that finds its data at once (a
//! consumer behind the log end) takes no append-signal lock, which every
//! connection shares. A consumer waiting at the end reads twice per pass
//! (before subscribing and after), the price of that.
//!
//! The answer holds file ranges, not bytes: the connection sends them with
//! `sendfile` (see `fetch_frame`). A read that already held its batches'
//! bytes (a small one, see `strata_log`'s `LogRead::held`) answers those.
//!
//! With `isolation_level` READ_COMMITTED (v4+) a partition is read only up
//! to its last stable offset, and the answer lists the aborted transactions
//! the batches may hold, so the consumer drops their records.
//!
//! Each topic needs READ: without it its partitions answer
//! TOPIC_AUTHORIZATION_FAILED (at once, as any error), whether it exists or
//! not, and nothing of it is read.

use std::time::Duration;

use kafka_protocol::messages::FetchRequest;

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::fetch_frame::{FetchedPartition, FetchedTopic, Part};
use strata_log::AppendWatch;
use strata_log::{Isolation, LogError, Topic};

/// `isolation_level` of a READ_COMMITTED reader.
const READ_COMMITTED: i8 = 1;

/// Upper bound on the record bytes of one response, whatever the client asks.
const RESPONSE_BYTES_MAX: u64 = 1 << 30;
/// Upper bound on `max_wait_ms`, whatever the client asks.
const WAIT_MS_MAX: u64 = 30_000;

/// How a fetch short of `min_bytes` waits: up to `wait` in all (counted
/// from its first pass), for an append to one of the partitions it reads.
pub(crate) struct DataWait {
    pub wait: Duration,
    pub appends: AppendWatch,
}

/// One pass over the requested partitions (read twice when short, see the
/// module doc). Returns `Err(wait)` when there is
/// less than `min_bytes` and the client allows waiting, unless `final_pass`
/// (the wait is over): the connection then waits for an append to one of
/// the partitions or the deadline, without holding a thread, and asks again.
pub(super) fn handle(
    ctx: &BrokerContext,
    request: &FetchRequest,
    final_pass: bool,
    caller: &Caller,
) -> Result<Vec<FetchedTopic>, DataWait> {
    let wait = Duration::from_millis(
        u64::try_from(request.max_wait_ms)
            .unwrap_or(0)
            .min(WAIT_MS_MAX),
    );
    let min_bytes = u64::try_from(request.min_bytes).unwrap_or(0);
    let may_wait = !wait.is_zero() && !final_pass && min_bytes > 0;
    let (topics, bytes) = read_once(ctx, request, caller, None);
    if !may_wait || answers_now(&topics, bytes, min_bytes) {
        return Ok(topics);
    }
    // Short of `min_bytes`: subscribe, then read again, so that an append
    // between the first read and the subscription is seen by the second.
    let mut appends = AppendWatch::default();
    let (topics, bytes) = read_once(ctx, request, caller, Some(&mut appends));
    if answers_now(&topics, bytes, min_bytes) {
        return Ok(topics);
    }
    Err(DataWait { wait, appends })
}

/// Whether a pass that read `bytes` is the answer: it reached `min_bytes`,
/// or a partition answered an error (answered at once, as Kafka does).
fn answers_now(topics: &[FetchedTopic], bytes: u64, min_bytes: u64) -> bool {
    bytes >= min_bytes
        || (topics.iter().flat_map(|t| &t.partitions))
            .any(|p| p.error_code != ErrorCode::None.code())
}

/// One pass over the requested partitions; returns the answers and the
/// record bytes in them. With `appends`, subscribes to each partition
/// before reading it.
fn read_once(
    ctx: &BrokerContext,
    request: &FetchRequest,
    caller: &Caller,
    mut appends: Option<&mut AppendWatch>,
) -> (Vec<FetchedTopic>, u64) {
    let acls = ctx.acls.snapshot();
    // Also keeps the response's size within its i32 length field.
    let mut budget = u64::try_from(request.max_bytes)
        .unwrap_or(0)
        .min(RESPONSE_BYTES_MAX);
    let mut total = 0u64;
    let isolation = if request.isolation_level == READ_COMMITTED {
        Isolation::ReadCommitted
    } else {
        Isolation::ReadUncommitted
    };
    let mut topics = Vec::with_capacity(request.topics.len());
    for requested in &request.topics {
        let topic = find_topic(ctx, requested.topic.0.as_str(), requested.topic_id);
        let by_id = topic.is_none() && requested.topic.0.is_empty();
        let name = topic
            .as_ref()
            .map_or(requested.topic.0.as_str(), |t| t.name());
        let readable = by_id
            || ctx
                .acls
                .allows(&acls, caller, Operation::Read, Resource::topic(name));
        let mut partitions = Vec::with_capacity(requested.partitions.len());
        for partition in &requested.partitions {
            let log = topic
                .as_ref()
                .filter(|_| readable)
                .and_then(|t| t.partition(partition.partition));
            let mut answer = FetchedPartition {
                index: partition.partition,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                ..FetchedPartition::default()
            };
            let Some(log) = log else {
                answer.error_code = if readable {
                    ErrorCode::unknown_topic(by_id).code()
                } else {
                    ErrorCode::TopicAuthorizationFailed.code()
                };
                partitions.push(answer);
                continue;
            };
            if let (Some(appends), Some(topic)) = (appends.as_deref_mut(), &topic) {
                appends.push(ctx.appends.subscribe(topic.id(), partition.partition));
            }
            answer.high_watermark = log.log_end_offset();
            answer.last_stable_offset = log.last_stable_offset();
            answer.log_start_offset = log.log_start_offset();
            let partition_max = u64::try_from(partition.partition_max_bytes).unwrap_or(0);
            let limit = partition_max.min(budget);
            // Only the first partition with data may exceed its limits (by
            // its first batch), so a consumer always makes progress.
            let first = total == 0;
            if limit > 0 || first {
                match log.read_isolated(partition.fetch_offset, limit.max(1), isolation) {
                    Ok(read) => {
                        // Offsets taken with the read, under the same lock.
                        answer.high_watermark = read.log_end_offset;
                        answer.last_stable_offset = read.last_stable_offset;
                        answer.log_start_offset = read.log_start_offset;
                        let bytes = read.size_bytes();
                        if first || bytes <= limit {
                            total += bytes;
                            budget = budget.saturating_sub(bytes);
                            answer.records = match read.held {
                                Some(bytes) => vec![Part::Bytes(bytes)],
                                None => read.slices.into_iter().map(Part::File).collect(),
                            };
                            answer.aborted = (isolation == Isolation::ReadCommitted).then(|| {
                                read.aborted
                                    .iter()
                                    .map(|a| (a.producer_id, a.first_offset))
                                    .collect()
                            });
                        }
                    }
                    Err(error) => {
                        if !matches!(error, LogError::OffsetOutOfRange { .. }) {
                            tracing::warn!(partition = log.name(), "fetch failed: {error}");
                        }
                        answer.error_code = ErrorCode::from(&error).code();
                    }
                }
            }
            partitions.push(answer);
        }
        topics.push(FetchedTopic {
            name: requested.topic.0.as_str().to_string(),
            id: topic.as_ref().map_or(requested.topic_id, |t| t.id()),
            partitions,
        });
    }
    (topics, total)
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
