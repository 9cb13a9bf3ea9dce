//! EndTxn: commits or aborts a producer's transaction. Answered once the
//! markers are written (see `txn::coordinator` for the protocol), so a
//! `read_committed` consumer that fetches after the answer sees the
//! outcome. Needs WRITE on the transactional id, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED and the transaction stays as it is.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use super::BrokerContext;
use crate::ErrorCode;
use crate::acl::{Operation, Resource};
use crate::auth::Caller;
use crate::txn::TxnProducer;

/// The first version that answers PRODUCER_FENCED (KIP-588).
const PRODUCER_FENCED_SINCE_VERSION: i16 = 2;

pub(super) fn handle(
    ctx: &BrokerContext,
    request: &EndTxnRequest,
    version: i16,
    caller: &Caller,
) -> EndTxnResponse {
    let producer = TxnProducer::of_request(
        request.transactional_id.0.as_str(),
        request.producer_id.0,
        request.producer_epoch,
        version,
        PRODUCER_FENCED_SINCE_VERSION,
    );
    let transactional_id = Resource::transactional_id(producer.transactional_id);
    let code = if !ctx
        .acls
        .authorize(caller, Operation::Write, transactional_id)
    {
        ErrorCode::TransactionalIdAuthorizationFailed
    } else if producer.transactional_id.is_empty() {
        ErrorCode::InvalidRequest
    } else {
        ctx.transactions
            .end(&producer, request.committed, &ctx.groups)
    };
    // v5 reports the producer's id and epoch after the transaction; this
    // coordinator does not bump the epoch per transaction, so they are the
    // ones the producer sent.
    EndTxnResponse::default()
        .with_error_code(code.code())
        .with_producer_id(ProducerId(request.producer_id.0))
        .with_producer_epoch(request.producer_epoch)
}
