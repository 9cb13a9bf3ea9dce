//! The sender: one task per producer that takes the batches due, groups
//! them by partition leader into Produce requests (at most one batch per
//! partition each, so a partition's batches leave in order), and completes,
//! retries or fails each batch by its partition's answer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::ProduceRequest;

use super::accumulator::{ClosedBatch, Inner, close_open_batch};
use super::config::Acks;
use crate::ClientError;
use crate::error::codes;
use crate::produce_frame::{self, PartitionRecords};

/// Newest Produce version this client sends (topics by name).
pub(crate) const PRODUCE_VERSION_MAX: i16 = 9;

/// One partition's batch in a request.
struct Sending {
    topic: String,
    partition: i32,
    batch: ClosedBatch,
}

/// The sender loop: closes due batches and sends them, grouped by leader.
pub(super) async fn run_sender(inner: Arc<Inner>) {
    loop {
        let woken = inner.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let (ready, next_due, closing) = take_ready(&inner);
        if closing && ready.is_empty() {
            return;
        }
        let mut by_leader: HashMap<i32, Vec<Sending>> = HashMap::new();
        for mut sending in ready {
            if let Some(builder) = sending.batch.unbuilt.take() {
                match builder.into_batch() {
                    Ok(bytes) => sending.batch.bytes = Bytes::from(bytes),
                    Err(error) => {
                        let error = ClientError::Invalid(format!("batch: {error}"));
                        requeue_or_fail(&inner, sending, error);
                        continue;
                    }
                }
            }
            match inner
                .cluster
                .leader_node(&sending.topic, sending.partition)
                .await
            {
                Ok(node) if bind_to_leader(&inner, &sending, node) => {
                    by_leader.entry(node).or_default().push(sending);
                }
                Ok(_) => hold_back(&inner, sending),
                // A metadata answer without the topic (a broker that has
                // not heard of it yet, leaders moving) is retried like
                // any other lost leader, as Kafka's producer retries
                // UNKNOWN_TOPIC_OR_PARTITION; a topic that is gone fails
                // its batches once the retries are used up.
                Err(error @ ClientError::UnknownTopic(_)) => {
                    requeue_or_fail_as(&inner, sending, error, true);
                }
                Err(error) => requeue_or_fail(&inner, sending, error),
            }
        }
        for (node, batches) in by_leader {
            // A request holds at most one batch per partition: a
            // partition's second batch goes in the next request, written
            // after the first on the same connection.
            for round in rounds(batches) {
                let slots = inner.broker_slots(node);
                let permit = slots.acquire_owned().await.expect("never closed");
                submit_request(&inner, node, round, permit).await;
            }
        }
        match next_due {
            Some(due) => {
                tokio::select! {
                    () = &mut woken => {}
                    () = tokio::time::sleep_until(due.into()) => {}
                }
            }
            None => woken.await,
        }
    }
}

/// Closes batches that are full or have lingered long enough and takes the
/// first closed batch of every partition with nothing in flight. Returns
/// them, when the next open batch falls due, and whether the producer is
/// closing.
fn take_ready(inner: &Inner) -> (Vec<Sending>, Option<Instant>, bool) {
    let mut state = inner.lock();
    let now = Instant::now();
    let mut next_due: Option<Instant> = None;
    let mut ready = Vec::new();
    let closing = state.closing;
    for (topic, partition, queue) in state.partitions.iter_mut() {
        if let Some(open) = &queue.open {
            let due = open.started + inner.config.linger;
            let full = open.builder.uncompressed_size_bytes() >= inner.config.batch_bytes;
            if full || due <= now || closing {
                close_open_batch(inner, queue);
            } else {
                next_due = Some(next_due.map_or(due, |d| d.min(due)));
            }
        }
        if queue.closed.is_empty() {
            continue;
        }
        if let Some(at) = queue.retry_at
            && at > now
        {
            next_due = Some(next_due.map_or(at, |d| d.min(at)));
            continue;
        }
        queue.retry_at = None;
        // A retried batch goes alone: once nothing else of the partition is
        // in flight, and nothing follows it until it is answered. A batch
        // beside it could fail while it succeeds (or the other way round)
        // and land, retried, out of order. An idempotent producer's broker
        // refuses such a batch as out of order; this keeps the order
        // without relying on that, and without idempotence.
        if queue.in_flight.is_empty() {
            queue.resending = false;
            queue.held = false;
            queue.leader_in_flight = None;
        }
        let retrying = queue.closed.front().is_some_and(|b| b.attempts > 0);
        if (retrying || queue.resending || queue.held) && !queue.in_flight.is_empty() {
            continue;
        }
        queue.resending = retrying;
        let most = if retrying {
            1
        } else {
            inner.config.max_in_flight.max(1)
        };
        while queue.in_flight.len() < most
            && let Some(batch) = queue.closed.pop_front()
        {
            queue.in_flight.insert(batch.id);
            ready.push(Sending {
                topic: topic.clone(),
                partition,
                batch,
            });
        }
    }
    (ready, next_due, closing)
}

/// Whether `sending` may go to `node` now. A partition's batches in flight
/// all go to one broker: when its leader changed under batches still in
/// flight to the old one, a later batch must not reach the new leader
/// before an earlier one fails at the old (and is retried behind it).
fn bind_to_leader(inner: &Inner, sending: &Sending, node: i32) -> bool {
    let mut state = inner.lock();
    let Some(queue) = state.partitions.get_mut(&sending.topic, sending.partition) else {
        return true;
    };
    // `sending` itself is counted in flight.
    let others_in_flight = queue.in_flight.len() > 1;
    let moved = queue.leader_in_flight.is_some_and(|n| n != node);
    // An earlier batch failed since this one was taken: it goes first.
    let earlier_waiting = queue
        .closed
        .front()
        .is_some_and(|b| b.id < sending.batch.id);
    if queue.held || earlier_waiting || (others_in_flight && moved) {
        return false;
    }
    queue.leader_in_flight = Some(node);
    true
}

/// Puts a batch that was not sent back in its place (no attempt counted)
/// and holds its partition until the batches in flight are answered.
fn hold_back(inner: &Inner, sending: Sending) {
    let mut state = inner.lock();
    let queue = state
        .partitions
        .get_or_insert(&sending.topic, sending.partition);
    queue.in_flight.remove(&sending.batch.id);
    queue.held = true;
    let at = queue
        .closed
        .iter()
        .position(|b| b.id > sending.batch.id)
        .unwrap_or(queue.closed.len());
    queue.closed.insert(at, sending.batch);
    drop(state);
    inner.wake.notify_one();
}

/// Puts a batch back at the front of its partition (same bytes, same
/// sequence) for a retry, or fails it for good.
fn requeue_or_fail(inner: &Inner, sending: Sending, error: ClientError) {
    let retriable = error.is_retriable();
    requeue_or_fail_as(inner, sending, error, retriable);
}

/// [`requeue_or_fail`] with the decision whether `error` may be retried
/// made by the caller.
fn requeue_or_fail_as(inner: &Inner, mut sending: Sending, error: ClientError, retriable: bool) {
    let retries = inner.cluster.config().retries;
    if error.is_retriable() {
        // The leader may have moved or gone: ask for it again.
        inner.cluster.forget(&sending.topic);
    }
    if retriable && sending.batch.attempts < retries {
        tracing::debug!(topic = %sending.topic, partition = sending.partition, "will retry: {error}");
        sending.batch.attempts += 1;
        let backoff =
            inner.cluster.config().retry_backoff * 2u32.pow(sending.batch.attempts.min(4));
        let mut state = inner.lock();
        let queue = state
            .partitions
            .get_or_insert(&sending.topic, sending.partition);
        queue.in_flight.remove(&sending.batch.id);
        let retry_at = Instant::now() + backoff.min(Duration::from_secs(1));
        queue.retry_at = Some(queue.retry_at.map_or(retry_at, |at| at.max(retry_at)));
        // Back ahead of every later batch of the partition.
        let at = queue
            .closed
            .iter()
            .position(|b| b.id > sending.batch.id)
            .unwrap_or(queue.closed.len());
        queue.closed.insert(at, sending.batch);
        drop(state);
        // The sender learns of the retry's due time on its next pass: a
        // requeue from inside its own pass would otherwise leave it asleep
        // until something else wakes it (a flush could wait forever).
        inner.wake.notify_one();
        return;
    }
    settle(inner, sending, Err(error));
}

/// Whether an earlier batch of the partition than `sending` is still
/// unanswered (in flight or waiting for a retry).
fn earlier_outstanding(inner: &Inner, sending: &Sending) -> bool {
    let mut state = inner.lock();
    let Some(queue) = state.partitions.get_mut(&sending.topic, sending.partition) else {
        return false;
    };
    let id = sending.batch.id;
    queue.in_flight.first().is_some_and(|first| *first < id)
        || queue.closed.front().is_some_and(|b| b.id < id)
}

fn complete(inner: &Inner, sending: Sending, base_offset: i64) {
    settle(inner, sending, Ok(base_offset));
}

/// Ends a batch for good: its records learn the outcome and free their
/// place in flight and in the buffer.
fn settle(inner: &Inner, sending: Sending, outcome: Result<i64, ClientError>) {
    let (count, buffered) = (sending.batch.records, sending.batch.buffered);
    if let Err(error) = &outcome {
        // The transaction lost a batch: it can only be aborted now.
        inner.note_failure(format!("{}/{}: {error}", sending.topic, sending.partition));
    }
    sending.batch.completion.finish(outcome);
    {
        let mut state = inner.lock();
        if let Some(queue) = state.partitions.get_mut(&sending.topic, sending.partition) {
            queue.in_flight.remove(&sending.batch.id);
        }
    }
    inner.finish(count, buffered);
}

/// Splits a leader's batches into requests with at most one batch per
/// partition, keeping each partition's batches in order.
fn rounds(batches: Vec<Sending>) -> Vec<Vec<Sending>> {
    let mut rounds: Vec<Vec<Sending>> = Vec::new();
    let mut taken: HashMap<(String, i32), usize> = HashMap::new();
    for sending in batches {
        let round = taken
            .entry((sending.topic.clone(), sending.partition))
            .or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(sending);
        *round += 1;
    }
    rounds
}

/// Writes one Produce request to the leader now (so requests leave in the
/// order they are submitted) and handles its response in a task of its own.
async fn submit_request(
    inner: &Arc<Inner>,
    node: i32,
    batches: Vec<Sending>,
    permit: tokio::sync::OwnedSemaphorePermit,
) {
    let mut topics: Vec<(String, Vec<PartitionRecords>)> = Vec::new();
    for sending in &batches {
        let records = PartitionRecords {
            partition: sending.partition,
            records: sending.batch.bytes.clone(),
        };
        match topics.iter_mut().find(|(name, _)| *name == sending.topic) {
            Some((_, partitions)) => partitions.push(records),
            None => topics.push((sending.topic.clone(), vec![records])),
        }
    }
    let fail_all = |batches: Vec<Sending>, error: ClientError| {
        for sending in batches {
            requeue_or_fail(inner, sending, error.duplicate());
        }
        inner.wake.notify_one();
    };
    let connection = match inner.cluster.connection(node).await {
        Ok(connection) => connection,
        Err(error) => return fail_all(batches, error),
    };
    let version = match connection.version::<ProduceRequest>(PRODUCE_VERSION_MAX) {
        Ok(version) => version,
        Err(error) => return fail_all(batches, error),
    };
    let answered = inner.config.acks != Acks::None;
    let acks = inner.config.acks.wire();
    let timeout_ms = i32::try_from(inner.config.request_timeout.as_millis()).unwrap_or(i32::MAX);
    let submitted = if produce_frame::VERSIONS.contains(&version) {
        // The batches go to the socket as they are, not copied into a frame.
        connection
            .submit_framed::<ProduceRequest>(version, answered, |correlation_id, client_id| {
                produce_frame::frame(
                    version,
                    correlation_id,
                    client_id,
                    inner.config.transactional_id.as_deref(),
                    acks,
                    timeout_ms,
                    &topics,
                )
            })
            .await
    } else {
        let request = produce_frame::as_request(
            inner.config.transactional_id.as_deref(),
            acks,
            timeout_ms,
            &topics,
        );
        if answered {
            connection.submit(&request, version).await.map(Some)
        } else {
            connection
                .send_no_response(&request, PRODUCE_VERSION_MAX)
                .await
                .map(|()| None)
        }
    };
    let pending = match submitted {
        Err(error) => return fail_all(batches, error),
        Ok(None) => {
            // acks=0: written is all there is.
            for sending in batches {
                complete(inner, sending, -1);
            }
            inner.wake.notify_one();
            return;
        }
        Ok(Some(pending)) => pending,
    };
    let inner = Arc::clone(inner);
    tokio::spawn(async move {
        let response = pending.response().await;
        drop(permit);
        handle_response(&inner, batches, response);
        inner.wake.notify_one();
    });
}

/// Completes, retries or fails each batch of a Produce request by its
/// partition's answer.
fn handle_response(
    inner: &Inner,
    batches: Vec<Sending>,
    response: Result<kafka_protocol::messages::ProduceResponse, ClientError>,
) {
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            for sending in batches {
                requeue_or_fail(inner, sending, error.duplicate());
            }
            return;
        }
    };
    for sending in batches {
        let answer = response
            .responses
            .iter()
            .filter(|t| t.name.0.as_str() == sending.topic)
            .flat_map(|t| &t.partition_responses)
            .find(|p| p.index == sending.partition);
        let Some(answer) = answer else {
            let error = ClientError::Protocol(format!(
                "no answer for {}/{}",
                sending.topic, sending.partition
            ));
            requeue_or_fail(inner, sending, error);
            continue;
        };
        match answer.error_code {
            codes::NONE => complete(inner, sending, answer.base_offset),
            // Already written by an earlier attempt whose answer was lost.
            codes::DUPLICATE_SEQUENCE_NUMBER => complete(inner, sending, -1),
            // Ahead of an earlier batch that is being retried: retry too,
            // behind it.
            codes::OUT_OF_ORDER_SEQUENCE_NUMBER if earlier_outstanding(inner, &sending) => {
                let error = ClientError::kafka(
                    codes::OUT_OF_ORDER_SEQUENCE_NUMBER,
                    Some(&sending.topic),
                    Some(sending.partition),
                );
                requeue_or_fail_as(inner, sending, error, true);
            }
            code => {
                let error = ClientError::kafka(code, Some(&sending.topic), Some(sending.partition))
                    .with_message(answer.error_message.as_ref().map(|m| m.as_str()));
                requeue_or_fail(inner, sending, error);
            }
        }
    }
}
