//! Produce: validate and append each partition's batches, then answer by
//! `acks`: 0 gets no response, 1 answers after the append, -1 (all) after
//! the appended offsets are fdatasynced (group commit, shared with every
//! concurrent producer of the partition; the partitions of one request
//! synced together). An acks=all response waits off the connection's
//! request path, so a producer's next request is appended while the sync
//! of the previous one runs.
//!
//! Batches of idempotent producers (producer id ≥ 0) are checked by the
//! partition's producer state as they are appended (see
//! `log::producer_state`): a resend of one of a producer's last five batches
//! is answered as a success with the original base offset and not appended
//! again (with acks=all, only once the original is on disk); a fenced epoch
//! gets INVALID_PRODUCER_EPOCH, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, an older
//! resend no longer remembered DUPLICATE_SEQUENCE_NUMBER. Producer ids come
//! from InitProducerId: a batch under an id this broker never handed out
//! gets UNKNOWN_PRODUCER_ID and is not appended. A transactional batch is
//! appended only to a partition its producer added to its Ongoing
//! transaction (AddPartitionsToTxn), at the transaction's epoch: otherwise
//! INVALID_TXN_STATE, or INVALID_PRODUCER_EPOCH for an older epoch.
//!
//! Authorization, as Kafka: a request whose first batch of any partition is
//! transactional needs WRITE on its transactional id, else every partition
//! answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs WRITE,
//! else its partitions answer TOPIC_AUTHORIZATION_FAILED (whether it exists
//! or not). Nothing refused is appended.

use std::sync::Arc;

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::BrokerContext;
use super::fetch::find_topic;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use strata_log::{LogError, PartitionLog, flush_together};
use strata_record::RecordBatch;

/// acks=-1: wait until the records are on disk.
const ACKS_ALL: i16 = -1;
/// acks=0: the producer expects no response at all.
const ACKS_NONE: i16 = 0;
/// acks=1: answer once appended.
const ACKS_LEADER: i16 = 1;

/// What a produce request comes to.
pub(super) enum Produced {
    /// acks=0: the producer expects no response.
    Silent,
    /// The response, due now (acks=1).
    Now(ProduceResponse),
    /// acks=all: the response, due once its partitions are durable.
    OnceDurable(Durability),
}

/// An acks=all response waiting for its partitions' fdatasync. The syncs
/// run on a blocking thread started as soon as the batches are appended, so
/// the connection can take its next request meanwhile (its responses still
/// go out in order). A partition whose sync failed answers with the error.
pub(super) struct Durability {
    response: ProduceResponse,
    /// (topic response, partition response) of each synced partition.
    places: Vec<(usize, usize)>,
    synced: tokio::task::JoinHandle<Vec<Result<i64, LogError>>>,
}

impl Durability {
    /// The response, once every partition's sync has ended. A sync thread
    /// that failed outright leaves its partitions unconfirmed: they answer
    /// KAFKA_STORAGE_ERROR (retriable; a retry of an idempotent batch is
    /// recognised).
    pub(super) async fn response(self) -> ProduceResponse {
        let Durability {
            mut response,
            places,
            synced,
        } = self;
        let results = synced.await.unwrap_or_else(|failed| {
            tracing::error!("an fdatasync thread failed: {failed}");
            places
                .iter()
                .map(|_| {
                    Err(LogError::io(
                        "syncing",
                        std::io::Error::other("the sync failed"),
                    ))
                })
                .collect()
        });
        mark_failed_syncs(&mut response.responses, &places, results);
        response
    }
}

/// Turns the answer of each partition whose sync failed into the error.
fn mark_failed_syncs(
    responses: &mut [TopicProduceResponse],
    places: &[(usize, usize)],
    results: Vec<Result<i64, LogError>>,
) {
    debug_assert_eq!(
        places.len(),
        results.len(),
        "one result per synced partition"
    );
    for (&(t, p), result) in places.iter().zip(results) {
        if let Err(error) = result {
            let partition = &mut responses[t].partition_responses[p];
            partition.error_code = ErrorCode::from(&error).code();
            partition.error_message = Some(error.to_string().into());
        }
    }
}

/// Appends the request's batches, partition by partition, and says when
/// its response is due (see [`Produced`]).
pub(super) fn handle(ctx: &BrokerContext, request: &ProduceRequest, caller: &Caller) -> Produced {
    let acls = ctx.acls.snapshot();
    if has_transactional_records(request) {
        let allowed = request.transactional_id.as_ref().is_some_and(|id| {
            ctx.acls.allows(
                &acls,
                caller,
                Operation::Write,
                Resource::transactional_id(id.0.as_str()),
            )
        });
        if !allowed {
            return refused_whole(request, ErrorCode::TransactionalIdAuthorizationFailed);
        }
    }
    let mut responses = Vec::with_capacity(request.topic_data.len());
    // (topic response, partition response, log, offset to make durable)
    let mut to_sync: Vec<(usize, usize, Arc<PartitionLog>, i64)> = Vec::new();
    for (t, data) in request.topic_data.iter().enumerate() {
        let topic = find_topic(ctx, data.name.0.as_str(), data.topic_id);
        // By id, the topic's name once the id is known (an unknown id is
        // answered as unknown below).
        let name = topic.as_ref().map_or(data.name.0.as_str(), |t| t.name());
        let writable = (topic.is_none() && data.name.0.is_empty())
            || ctx
                .acls
                .allows(&acls, caller, Operation::Write, Resource::topic(name));
        let mut partitions = Vec::with_capacity(data.partition_data.len());
        for (p, partition) in data.partition_data.iter().enumerate() {
            let mut response = PartitionProduceResponse::default()
                .with_index(partition.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            let log = topic.as_ref().and_then(|t| t.partition(partition.index));
            if !matches!(request.acks, ACKS_ALL | ACKS_NONE | ACKS_LEADER) {
                partitions.push(response.with_error_code(ErrorCode::InvalidRequiredAcks.code()));
                continue;
            }
            if !writable {
                partitions
                    .push(response.with_error_code(ErrorCode::TopicAuthorizationFailed.code()));
                continue;
            }
            let Some(log) = log else {
                partitions.push(response.with_error_code(
                    ErrorCode::unknown_topic(topic.is_none() && data.name.0.is_empty()).code(),
                ));
                continue;
            };
            let records = partition.records.as_deref().unwrap_or_default();
            // Only a batch whose header checks out names a producer: the
            // same bytes of a legacy message set are its value.
            if let Ok(batch) = RecordBatch::parse(records)
                && batch.header().producer_id >= 0
                && !ctx
                    .log
                    .producer_ids()
                    .was_handed_out(batch.header().producer_id)
            {
                partitions.push(response.with_error_code(ErrorCode::UnknownProducerId.code()));
                continue;
            }
            // Written straight from the request frame; no copy. A
            // transactional batch is appended with its transaction's
            // coordinator entry held (see `TxnCoordinator::produce_checked`).
            let appended = match transactional_producer(records) {
                Ok(None) => log.append(records),
                Ok(Some((producer_id, epoch))) => match ctx.transactions.produce_checked(
                    producer_id,
                    epoch,
                    data.name.0.as_str(),
                    partition.index,
                    || log.append(records),
                ) {
                    Ok(appended) => appended,
                    Err(code) => {
                        partitions.push(response.with_error_code(code.code()));
                        continue;
                    }
                },
                Err(code) => {
                    partitions.push(response.with_error_code(code.code()));
                    continue;
                }
            };
            match appended {
                Ok(appended) => {
                    if appended.duplicate {
                        tracing::debug!(
                            partition = log.name(),
                            base_offset = appended.base_offset,
                            last_offset = appended.last_offset,
                            "resent batches answered with their original offsets"
                        );
                    } else if let Some(topic) = &topic {
                        // Readable now: wake the fetches waiting on this
                        // partition (a resend adds nothing to read).
                        let end = appended.last_offset + 1;
                        ctx.appends.appended(topic.id(), partition.index, end);
                    }
                    // A duplicate's original may not be durable yet either.
                    if request.acks == ACKS_ALL {
                        to_sync.push((t, p, Arc::clone(&log), appended.last_offset + 1));
                    }
                    response = response
                        .with_base_offset(appended.base_offset)
                        .with_log_start_offset(appended.log_start_offset);
                }
                Err(error) => {
                    tracing::debug!(partition = log.name(), "produce refused: {error}");
                    response = response
                        .with_error_code(ErrorCode::from(&error).code())
                        .with_error_message(Some(error.to_string().into()));
                }
            }
            partitions.push(response);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(data.name.clone())
                .with_topic_id(data.topic_id)
                .with_partition_responses(partitions),
        );
    }
    if request.acks == ACKS_NONE {
        return Produced::Silent;
    }
    let mut response = ProduceResponse::default().with_responses(responses);
    if to_sync.is_empty() {
        return Produced::Now(response);
    }
    let places = to_sync.iter().map(|(t, p, _, _)| (*t, *p)).collect();
    let sync = move || {
        let targets: Vec<_> = to_sync
            .iter()
            .map(|(_, _, log, end)| (&**log, *end))
            .collect();
        flush_together(&targets)
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => Produced::OnceDurable(Durability {
            response,
            places,
            synced: runtime.spawn_blocking(sync),
        }),
        // Called outside the broker's runtime: sync here.
        Err(_) => {
            mark_failed_syncs(&mut response.responses, &places, sync());
            Produced::Now(response)
        }
    }
}

/// Whether the first batch of any partition is transactional (what Kafka
/// checks before authorizing the transactional id).
fn has_transactional_records(request: &ProduceRequest) -> bool {
    request
        .topic_data
        .iter()
        .flat_map(|topic| &topic.partition_data)
        .any(|partition| {
            RecordBatch::parse(partition.records.as_deref().unwrap_or_default())
                .is_ok_and(|batch| batch.header().is_transactional())
        })
}

/// Every partition of `request` answered `code`, nothing appended.
fn refused_whole(request: &ProduceRequest, code: ErrorCode) -> Produced {
    if request.acks == ACKS_NONE {
        return Produced::Silent;
    }
    let responses = request
        .topic_data
        .iter()
        .map(|data| {
            TopicProduceResponse::default()
                .with_name(data.name.clone())
                .with_topic_id(data.topic_id)
                .with_partition_responses(
                    data.partition_data
                        .iter()
                        .map(|partition| {
                            PartitionProduceResponse::default()
                                .with_index(partition.index)
                                .with_error_code(code.code())
                                .with_base_offset(-1)
                                .with_log_append_time_ms(-1)
                                .with_log_start_offset(-1)
                        })
                        .collect(),
                )
        })
        .collect();
    Produced::Now(ProduceResponse::default().with_responses(responses))
}

/// The producer (id, epoch) of the transactional batches among `records`,
/// `None` if there are none. Batches of several producers, or transactional
/// and other batches mixed, are INVALID_TXN_STATE (a producer sends one
/// batch per partition per request). Bytes that do not parse as a batch
/// (header fields checked, the whole batch present: not a legacy message
/// set, nor a length shorter than a header) are left to the log's
/// validation, which says what is wrong with them.
fn transactional_producer(records: &[u8]) -> Result<Option<(i64, i16)>, ErrorCode> {
    let mut found: Option<(i64, i16)> = None;
    let mut plain = false;
    let mut rest = records;
    while let Ok(batch) = RecordBatch::parse(rest) {
        let header = batch.header();
        if header.is_transactional() {
            let producer = (header.producer_id, header.producer_epoch);
            if found.is_some_and(|f| f != producer) {
                return Err(ErrorCode::InvalidTxnState);
            }
            found = Some(producer);
        } else {
            plain = true;
        }
        match rest.get(header.size_bytes()..) {
            Some(next) if !next.is_empty() => rest = next,
            _ => break,
        }
    }
    if found.is_some() && plain {
        return Err(ErrorCode::InvalidTxnState);
    }
    Ok(found)
}
