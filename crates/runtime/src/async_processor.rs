//! [`AsyncProcessor`]: a processor that awaits I/O for its records (an
//! enrichment from an external service), with exactly-once kept.
//!
//! Each record goes through two steps:
//!
//! 1. `prepare(&record)`: async, with no context (it cannot touch state or
//!    emit). The task runs it for the records of a batch, up to
//!    `concurrency()` at a time, and waits for all of them.
//! 2. `apply(record, prepared, ctx)`: sync, with the context, for each
//!    record in input order, as a [`Processor`](super::Processor)'s
//!    `process` runs.
//!
//! So order is kept (per key and overall) and everything that changes
//! state or emits happens in `apply`, inside the task's run, committed
//! with the input offsets as for any processor. `prepare` runs again for
//! records re-read after a crash or a failed run: it must only read.

use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use serde::de::DeserializeOwned;

use strata_record::codec::{Codec, Part};

use super::context::Context;
use super::erased::{ErasedProcessor, Prepare};
use super::position::Position;
use super::process_error::ProcessError;
use super::record::{RawRecord, Record};
use super::timer::Timer;

/// How many `prepare` calls run at a time unless the processor says.
pub const CONCURRENCY_DEFAULT: usize = 16;

/// A processor that awaits I/O per record; see the module docs.
pub trait AsyncProcessor<K, V>: Send + Sync + 'static {
    /// What `prepare` found for a record (the lookup's answer).
    type Prepared: Send + 'static;

    /// How many `prepare` calls may run at a time.
    fn concurrency(&self) -> usize {
        CONCURRENCY_DEFAULT
    }

    /// As [`Processor::init`](super::Processor::init).
    fn init(&mut self, _ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Ok(())
    }

    /// The I/O for one record, concurrently with other records' and with
    /// no context. Runs again for a record re-read after a crash.
    fn prepare(
        &self,
        record: &Record<K, V>,
    ) -> impl Future<Output = Result<Self::Prepared, ProcessError>> + Send;

    /// The record with what `prepare` found, in input order, with the
    /// context: its writes and emits are committed exactly once.
    fn apply(
        &mut self,
        record: Record<K, V>,
        prepared: Self::Prepared,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError>;

    /// As [`Processor::close`](super::Processor::close).
    fn close(&mut self, _ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Ok(())
    }

    /// As [`Processor::on_timer`](super::Processor::on_timer): sync, with
    /// the context, between records' `apply` calls.
    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Err(super::erased::no_on_timer(&timer, ctx))
    }
}

/// An [`AsyncProcessor`] as the task calls it: `prepare` over a batch's
/// records, then `process` takes them one by one in the same order.
pub(crate) struct AsyncAdapter<P: AsyncProcessor<K, V>, K, V> {
    inner: P,
    codecs: (Codec, Codec),
    /// Per input topic, its open batch's records with their prepared
    /// values (or why not), by offset, in order: a task with several
    /// inputs takes turns between their batches.
    ready: Vec<TopicQueue<K, V, P::Prepared>>,
    types: PhantomData<fn(K, V)>,
}

impl<P: AsyncProcessor<K, V>, K, V> AsyncAdapter<P, K, V> {
    pub fn new(inner: P, codecs: (Codec, Codec)) -> Self {
        Self {
            inner,
            codecs,
            ready: Vec::new(),
            types: PhantomData,
        }
    }

    /// The records prepared for input `topic`.
    fn ready_for(&mut self, topic: &str) -> Option<&mut ReadyQueue<K, V, P::Prepared>> {
        (self.ready.iter_mut())
            .find(|(t, _)| &**t == topic)
            .map(|(_, ready)| ready)
    }
}

impl<P, K, V> ErasedProcessor for AsyncAdapter<P, K, V>
where
    P: AsyncProcessor<K, V>,
    K: DeserializeOwned + Send + Sync + 'static,
    V: DeserializeOwned + Send + Sync + 'static,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.inner.init(ctx)
    }

    fn process(&mut self, _raw: RawRecord<'_>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let offset = ctx.offset();
        let ready = self.ready_for(ctx.topic()).and_then(VecDeque::pop_front);
        let (prepared_offset, entry) = ready.ok_or_else(|| {
            ProcessError::msg(format!("offset {offset} reached apply without its prepare"))
        })?;
        if prepared_offset != offset {
            return Err(ProcessError::msg(format!(
                "offset {offset} reached apply, but the next prepared record is at {prepared_offset}"
            )));
        }
        let (record, prepared) = entry?;
        self.inner.apply(record, prepared, ctx)
    }

    fn close(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.inner.close(ctx)
    }

    fn pass_over(&mut self, topic: &str, offset: i64) {
        if let Some(ready) = self.ready_for(topic) {
            while ready.front().is_some_and(|(at, _)| *at <= offset) {
                ready.pop_front();
            }
        }
    }

    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.inner.on_timer(timer, ctx)
    }

    fn prepares(&self) -> bool {
        true
    }

    fn prepare<'a>(
        &'a mut self,
        records: &[strata_record::Record<'_>],
        position: &Position,
        offsets: std::ops::Range<i64>,
    ) -> Option<Prepare<'a>> {
        if self.ready_for(&position.topic).is_none() {
            (self.ready).push((Arc::clone(&position.topic), VecDeque::new()));
        }
        let ready = self.ready_for(&position.topic).expect("added above");
        ready.clear();
        let decoded: Vec<Decoded<K, V>> = records
            .iter()
            .filter(|r| offsets.contains(&r.offset))
            .map(|r| (r.offset, decode(self.codecs, r, position.partition)))
            .collect();
        if decoded.is_empty() {
            return None;
        }
        let topic = &position.topic;
        let at = (self.ready.iter()).position(|(t, _)| t == topic);
        let ready = &mut self.ready[at.expect("added above")].1;
        let inner = &self.inner;
        Some(Box::pin(async move {
            // Made before the first await, each boxed: the lookups of one
            // batch, not a future per record on the sync path.
            let lookups: Vec<Lookup<'_, P::Prepared>> = decoded
                .iter()
                .map(|(_, record)| -> Lookup<'_, P::Prepared> {
                    match record {
                        Ok(record) => Box::pin(async move { Some(inner.prepare(record).await) }),
                        Err(_) => Box::pin(std::future::ready(None)),
                    }
                })
                .collect();
            let prepared = in_order(lookups, inner.concurrency().max(1)).await;
            for ((offset, record), prepared) in decoded.into_iter().zip(prepared) {
                let entry = match (record, prepared) {
                    (Ok(record), Some(Ok(prepared))) => Ok((record, prepared)),
                    (Ok(_), Some(Err(error))) | (Err(error), _) => Err(error),
                    (Ok(_), None) => unreachable!("a decoded record is prepared"),
                };
                ready.push_back((offset, entry));
            }
        }))
    }
}

/// A record at its offset with its prepared value, or why not.
type Ready<K, V, T> = (i64, Result<(Record<K, V>, T), ProcessError>);
/// One input's open batch's records, ready, in order.
type ReadyQueue<K, V, T> = VecDeque<Ready<K, V, T>>;
/// An input topic and its queue.
type TopicQueue<K, V, T> = (Arc<str>, ReadyQueue<K, V, T>);
/// A record at its offset, decoded or why not.
type Decoded<K, V> = (i64, Result<Record<K, V>, ProcessError>);
/// A future in flight and, once done, its output.
type Slot<F> = (Pin<Box<F>>, Option<<F as Future>::Output>);

/// One record's `prepare`; None for a record that did not decode.
type Lookup<'a, T> = Pin<Box<dyn Future<Output = Option<Result<T, ProcessError>>> + Send + 'a>>;

/// A record of a fetched batch decoded with the input's codecs.
fn decode<K, V>(
    (key_codec, value_codec): (Codec, Codec),
    record: &strata_record::Record<'_>,
    partition: i32,
) -> Result<Record<K, V>, ProcessError>
where
    K: DeserializeOwned + 'static,
    V: DeserializeOwned + 'static,
{
    let undecodable = |part| move |error| ProcessError::undecodable(part, error);
    Ok(Record {
        key: (key_codec.decode(record.key.unwrap_or_default())).map_err(undecodable(Part::Key))?,
        value: (value_codec.decode(record.value.unwrap_or_default()))
            .map_err(undecodable(Part::Value))?,
        key_is_null: record.key.is_none(),
        value_is_null: record.value.is_none(),
        partition,
        offset: record.offset,
        timestamp: record.timestamp,
        headers: record
            .headers()
            .map(|h| {
                let key = String::from_utf8_lossy(h.key).into_owned();
                (key, h.value.map(<[u8]>::to_vec))
            })
            .collect(),
    })
}

/// Runs `futures` with at most `limit` in flight at a time and returns
/// their outputs in the order given.
async fn in_order<F: Future>(futures: impl IntoIterator<Item = F>, limit: usize) -> Vec<F::Output> {
    let mut waiting = futures.into_iter();
    let mut window: VecDeque<Slot<F>> = VecDeque::with_capacity(limit);
    let mut outputs = Vec::new();
    std::future::poll_fn(|cx| {
        loop {
            while window.len() < limit {
                match waiting.next() {
                    Some(future) => window.push_back((Box::pin(future), None)),
                    None => break,
                }
            }
            if window.is_empty() {
                return Poll::Ready(());
            }
            for (future, output) in window.iter_mut() {
                if output.is_none()
                    && let Poll::Ready(done) = future.as_mut().poll(cx)
                {
                    *output = Some(done);
                }
            }
            let before = outputs.len();
            while window.front().is_some_and(|(_, output)| output.is_some()) {
                let (_, output) = window.pop_front().expect("just looked");
                outputs.push(output.expect("just looked"));
            }
            if outputs.len() == before {
                return Poll::Pending;
            }
        }
    })
    .await;
    outputs
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn in_order_keeps_the_order_given_and_the_limit() {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let futures = (0..20u64).map(|n| {
            let (running, most) = (Arc::clone(&running), Arc::clone(&most));
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Later futures finish first.
                tokio::time::sleep(Duration::from_millis(20 - n)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                n
            }
        });
        let outputs = in_order(futures, 4).await;
        assert_eq!(outputs, (0..20).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 4);
    }
}
