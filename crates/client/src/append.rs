//! Appending record batches that are already built and stamped with a
//! producer id, epoch and sequences (the runtime's outbox): one batch per
//! Produce request, acks=all, retried on retriable errors. A resend the
//! broker already holds (DUPLICATE_SEQUENCE_NUMBER, or a success pointing at
//! the original) counts as appended. A transactional batch goes with its
//! transactional id, inside a transaction the partition was added to.

use bytes::Bytes;
use kafka_protocol::messages::ProduceRequest;

use super::error::codes;
use super::produce_frame::{self, PartitionRecords};
use super::producer::PRODUCE_VERSION_MAX;
use super::{ClientError, Cluster};

/// How long the broker may take to make an append durable.
const APPEND_TIMEOUT_MS: i32 = 30_000;

/// Appends one stamped batch to `topic`/`partition` with acks=all (a
/// transactional batch with the `transactional_id` it belongs to).
pub async fn append_batch(
    cluster: &Cluster,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    batch: Bytes,
) -> Result<(), ClientError> {
    cluster
        .retry(&[topic], || {
            let batch = batch.clone();
            async move {
                let connection = cluster.leader(topic, partition).await?;
                let topics = [(
                    topic.to_string(),
                    vec![PartitionRecords {
                        partition,
                        records: batch,
                    }],
                )];
                let request =
                    produce_frame::as_request(transactional_id, -1, APPEND_TIMEOUT_MS, &topics);
                let response = connection
                    .send::<ProduceRequest>(&request, PRODUCE_VERSION_MAX)
                    .await?;
                let answer = response
                    .responses
                    .iter()
                    .filter(|t| t.name.0.as_str() == topic)
                    .flat_map(|t| &t.partition_responses)
                    .find(|p| p.index == partition)
                    .ok_or_else(|| {
                        ClientError::Protocol(format!("no answer for {topic}/{partition}"))
                    })?;
                match answer.error_code {
                    codes::NONE | codes::DUPLICATE_SEQUENCE_NUMBER => Ok(()),
                    code => {
                        let error = ClientError::kafka(code, Some(topic), Some(partition))
                            .with_message(answer.error_message.as_ref().map(|m| m.as_str()));
                        if error.is_retriable() {
                            cluster.invalidate(topic).await;
                        }
                        Err(error)
                    }
                }
            }
        })
        .await
}
