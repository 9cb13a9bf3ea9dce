//! InitProducerId: the producer id and epoch an idempotent producer stamps
//! on its batches, from the log's durable allocator (`log::ProducerIds`).
//!
//! - No transactional id, no producer id: a new id at epoch 0.
//! - No transactional id, the producer's current id and epoch (v3+, KIP-360:
//!   a producer resetting its sequences after an error): the same id at the
//!   next epoch, or INVALID_PRODUCER_EPOCH if that epoch is stale.
//! - A transactional id: its id at the next epoch, which fences older
//!   instances (PRODUCER_FENCED from v4 on, INVALID_PRODUCER_EPOCH before).
//!   A transaction the previous producer left open is aborted first, its
//!   markers written at the new epoch (see `txn::coordinator`).
//!
//! A producer id without an epoch, or the reverse, is INVALID_REQUEST, as is
//! an empty transactional id (Kafka's answers). With a transactional id, a
//! transaction timeout outside 1 ms to `transaction.max.timeout.ms` is
//! INVALID_TRANSACTION_TIMEOUT; without one it is not used.
//!
//! Authorization, as Kafka: a transactional id needs WRITE on it, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED; an idempotent producer needs
//! IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679), else
//! CLUSTER_AUTHORIZATION_FAILED. Nothing is handed out to a refused caller.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource, ResourceType};
use crate::auth::Caller;
use crate::txn::InitRefusal;
use strata_log::{LogError, ProducerIdAndEpoch};

/// The first version that has PRODUCER_FENCED.
const PRODUCER_FENCED_SINCE_VERSION: i16 = 4;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &InitProducerIdRequest,
    version: i16,
    caller: &Caller,
) -> InitProducerIdResponse {
    let allowed = match &request.transactional_id {
        Some(id) => ctx
            .acls
            .authorize(
                caller,
                Operation::Write,
                Resource::transactional_id(id.0.as_str()),
            )
            .then_some(())
            .ok_or(ErrorCode::TransactionalIdAuthorizationFailed),
        // IDEMPOTENT_WRITE on the cluster, else WRITE on some topic: the
        // first is a probe, refused without counting.
        None => (ctx.acls.permits(
            &ctx.acls.snapshot(),
            caller,
            Operation::IdempotentWrite,
            Resource::cluster(),
        ) || ctx
            .acls
            .allows_any(caller, Operation::Write, ResourceType::Topic))
        .then_some(())
        .ok_or(ErrorCode::ClusterAuthorizationFailed),
    };
    match allowed.and_then(|()| init(ctx, request, version)) {
        Ok(granted) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(granted.producer_id))
            .with_producer_epoch(granted.epoch),
        Err(code) => InitProducerIdResponse::default()
            .with_error_code(code.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}

fn init(
    ctx: &BrokerContext,
    request: &InitProducerIdRequest,
    version: i16,
) -> Result<ProducerIdAndEpoch, ErrorCode> {
    let current = match (request.producer_id.0, request.producer_epoch) {
        (-1, -1) => None,
        (producer_id, epoch) if producer_id >= 0 && epoch >= 0 => {
            Some(ProducerIdAndEpoch { producer_id, epoch })
        }
        _ => return Err(ErrorCode::InvalidRequest),
    };
    let ids = ctx.log.producer_ids();
    let transactional_id = request.transactional_id.as_ref().map(|id| id.0.as_str());
    let result = match transactional_id {
        None => match current {
            None => ids.new_producer(),
            Some(current) => {
                ids.bump_idempotent(current, ctx.log.producer_epoch(current.producer_id))
            }
        },
        Some("") => return Err(ErrorCode::InvalidRequest),
        Some(id) => {
            let timeout = request.transaction_timeout_ms;
            if timeout < 1 || timeout > ctx.transactions.config().max_timeout_ms {
                return Err(ErrorCode::InvalidTransactionTimeout);
            }
            match ctx
                .transactions
                .init_producer(id, current, timeout, &ctx.groups)
            {
                Ok(granted) => Ok(granted),
                // The previous producer's transaction is still ending.
                Err(InitRefusal::Busy) => return Err(ErrorCode::ConcurrentTransactions),
                Err(InitRefusal::Log(error)) => Err(error),
            }
        }
    };
    result.map_err(|error| {
        tracing::debug!(
            ?transactional_id,
            ?current,
            "InitProducerId refused: {error}"
        );
        match error {
            LogError::ProducerFenced { .. }
                if transactional_id.is_some() && version >= PRODUCER_FENCED_SINCE_VERSION =>
            {
                ErrorCode::ProducerFenced
            }
            // The allocator's file could not be written; nothing was handed
            // out, and a retry writes a new file.
            LogError::Io { .. } => ErrorCode::CoordinatorNotAvailable,
            other => ErrorCode::from(&other),
        }
    })
}
