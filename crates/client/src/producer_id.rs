//! InitProducerId: a producer id and epoch from the cluster, for an
//! idempotent producer (a fresh id from any broker) or for a transactional
//! id (from its transaction coordinator, fencing every older producer of
//! the id).

use kafka_protocol::messages::{InitProducerIdRequest, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::error::codes;
use super::{ClientError, Cluster};

const INIT_PRODUCER_ID_VERSION_MAX: i16 = 4;

/// A fresh idempotent producer id and epoch from the cluster.
pub async fn init_producer_id(cluster: &Cluster) -> Result<(i64, i16), ClientError> {
    init_producer_id_for(cluster, None, 60_000, None).await
}

/// The producer id and epoch of `transactional_id` (which fences any older
/// producer of it), from its transaction coordinator; or a fresh idempotent
/// one without a transactional id. With `current` (KIP-360), the same
/// producer asks for its next epoch.
pub(crate) async fn init_producer_id_for(
    cluster: &Cluster,
    transactional_id: Option<&str>,
    transaction_timeout_ms: i32,
    current: Option<(i64, i16)>,
) -> Result<(i64, i16), ClientError> {
    let (producer_id, epoch) = current.unwrap_or((-1, -1));
    cluster
        .retry(&[], || async {
            let connection = match transactional_id {
                Some(id) => {
                    crate::admin::coordinator_of(cluster, crate::admin::KEY_TYPE_TRANSACTION, id)
                        .await?
                }
                None => cluster.any_connection().await?,
            };
            let request = InitProducerIdRequest::default()
                .with_transactional_id(
                    transactional_id
                        .map(|id| TransactionalId(StrBytes::from_string(id.to_string()))),
                )
                .with_transaction_timeout_ms(transaction_timeout_ms)
                .with_producer_id(producer_id.into())
                .with_producer_epoch(epoch);
            let response = connection
                .send(&request, INIT_PRODUCER_ID_VERSION_MAX)
                .await?;
            if response.error_code != codes::NONE {
                return Err(ClientError::kafka(response.error_code, None, None));
            }
            Ok((response.producer_id.0, response.producer_epoch))
        })
        .await
}
