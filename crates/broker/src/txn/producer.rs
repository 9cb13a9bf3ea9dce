//! A transactional producer as a request names it: its transactional id,
//! producer id and epoch, and the error its API version answers an older
//! epoch with.

use crate::ErrorCode;

/// A producer as a request names it.
#[derive(Debug, Clone, Copy)]
pub struct TxnProducer<'a> {
    pub transactional_id: &'a str,
    pub producer_id: i64,
    pub epoch: i16,
    /// The error for an older epoch: PRODUCER_FENCED from the request
    /// version that knows it, INVALID_PRODUCER_EPOCH before.
    pub fenced: ErrorCode,
}

impl<'a> TxnProducer<'a> {
    /// The producer of a request of `version`, whose API answers
    /// PRODUCER_FENCED from `fenced_since` on (KIP-588).
    pub fn of_request(
        transactional_id: &'a str,
        producer_id: i64,
        epoch: i16,
        version: i16,
        fenced_since: i16,
    ) -> Self {
        Self {
            transactional_id,
            producer_id,
            epoch,
            fenced: if version >= fenced_since {
                ErrorCode::ProducerFenced
            } else {
                ErrorCode::InvalidProducerEpoch
            },
        }
    }
}
