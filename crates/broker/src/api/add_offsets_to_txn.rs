//! AddOffsetsToTxn: a consumer group's offsets will be committed with the
//! producer's transaction (the offsets themselves come in TxnOffsetCommit).
//! Needs WRITE on the transactional id (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (else
//! GROUP_AUTHORIZATION_FAILED), as in Kafka.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::txn::TxnProducer;

/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_SINCE_VERSION: i16 = 2;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &AddOffsetsToTxnRequest,
    version: i16,
    caller: &Caller,
) -> AddOffsetsToTxnResponse {
    let transactional_id = Resource::transactional_id(request.transactional_id.0.as_str());
    if !ctx
        .acls
        .authorize(caller, Operation::Write, transactional_id)
    {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ErrorCode::TransactionalIdAuthorizationFailed.code());
    }
    if !ctx.acls.authorize(
        caller,
        Operation::Read,
        Resource::group(request.group_id.0.as_str()),
    ) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ErrorCode::GroupAuthorizationFailed.code());
    }
    let producer = TxnProducer::of_request(
        request.transactional_id.0.as_str(),
        request.producer_id.0,
        request.producer_epoch,
        version,
        PRODUCER_FENCED_SINCE_VERSION,
    );
    let code = if producer.transactional_id.is_empty() {
        ErrorCode::InvalidRequest
    } else {
        ctx.transactions
            .add_offsets(&producer, request.group_id.0.as_str())
    };
    AddOffsetsToTxnResponse::default().with_error_code(code.code())
}
