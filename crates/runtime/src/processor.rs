//! What a user writes: a processor, called once per input record, in
//! offset order per partition, with a [`Record`] (typed key and value,
//! decoded with the processor's input codecs) and a [`Context`] (the
//! record's position, the processor's stores, `emit` to derived topics).
//!
//! Three forms, all given to [`App::processor`](super::App::processor)
//! (and a fourth for code that decodes records itself,
//! [`RawProcessor`](super::RawProcessor)):
//!
//! - **A function or closure** `fn(Record<K, V>, &mut Context) ->
//!   Result<(), ProcessError>`: the common case. The runtime clones it for
//!   every task (functions, and closures capturing `Copy` or `Clone`
//!   values, are `Clone` by themselves).
//! - **A [`Processor`]**, for a processor with fields or with `init` and
//!   `close`: given as a factory, `|| Sessions::new(fixed)`, called once per
//!   task (and again when a rebuilt state is swapped in).
//! - **An [`AsyncProcessor`]**, for a processor that awaits I/O per record
//!   (an external lookup): its `prepare` runs for up to `concurrency()`
//!   records at a time with no context, and its `apply` then runs with the
//!   context in input order; also given as a factory.
//!
//! Timers ([`Context::schedule`], in event time or processing time) call
//! back [`Processor::on_timer`] (or [`AsyncProcessor::on_timer`]); a
//! function processor gives its callback to the builder instead,
//! `.processor("p", f).on_timer(g)`. Either declares the processor's timer
//! store (`.timers()` for the traits); see `runtime::timer`.
//!
//! Use a function or a `Processor` whenever the processor does not await:
//! the task calls it directly, with nothing allocated per record. Use an
//! `AsyncProcessor` only for I/O; its `prepare` runs again for records
//! re-read after a crash, so it must only read (exactly-once covers what
//! `apply` writes and emits).
//!
//! A processor never sees commits, producer ids or RocksDB: everything it
//! writes through the context is buffered in the task's current run and
//! committed, with the input offset, in one write batch. A processor that
//! returns an error stops its task, the run in progress not committed,
//! unless its error policy diverts the record (see `on_error`).

use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use strata_record::codec::{Codec, Part};

use super::async_processor::{AsyncAdapter, AsyncProcessor};
use super::context::Context;
use super::erased::{ErasedProcessor, Factory, no_on_timer};
use super::position::Position;
use super::process_error::ProcessError;
use super::record::{RawRecord, Record};
use super::timer::Timer;

/// A processor with fields, or with `init` and `close`. One instance runs
/// per task (made by the factory given to the builder), so its fields are
/// per task; keep what must survive a restart in stores.
pub trait Processor<K, V>: Send + 'static {
    /// Called once when the task starts, before its first record, and on
    /// a fresh instance whenever the task goes back to its last commit (a
    /// rebuilt state swapped in, a record failed under a policy that
    /// diverts it): what the processor keeps in its fields must be read
    /// again from its stores there. Writes go into the first run.
    fn init(&mut self, _ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Ok(())
    }

    /// Called for every input record, in offset order per partition.
    fn process(&mut self, record: Record<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError>;

    /// Called once when the task stops cleanly; writes go into its last
    /// commit.
    fn close(&mut self, _ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Ok(())
    }

    /// Called when a timer the processor scheduled
    /// ([`Context::schedule`]) is due: an event-time timer right after the
    /// record that brought the stream time to it, a processing-time timer
    /// once the run's clock passed it (see [`Timer`]). The context's
    /// timestamp is the timer's time; its writes, emits and timers go into
    /// the run like a record's. The timer is gone once this returns Ok.
    /// The processor must declare `.timers()` on the builder.
    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Err(no_on_timer(&timer, ctx))
    }
}

/// What [`App::processor`](super::App::processor) takes: a function or
/// closure, or a factory of [`Processor`]s, of [`AsyncProcessor`]s or of
/// [`RawProcessor`](super::RawProcessor)s. `M` tells the four apart; it is
/// inferred.
pub trait IntoProcessor<K, V, M>: Send + Sync + 'static {
    #[doc(hidden)]
    fn into_factory(self) -> ProcessorFactory;
}

/// How the runtime makes a task's processor (opaque).
pub struct ProcessorFactory {
    pub(crate) make: Factory,
    /// A function or closure: it handles timers only with the builder's
    /// `.on_timer(f)`.
    pub(crate) function: bool,
}

/// [`IntoProcessor`] for functions and closures.
pub struct FnMarker<K, V>(PhantomData<fn(K, V)>);
/// [`IntoProcessor`] for factories of [`Processor`]s.
pub struct ProcessorMarker<P>(PhantomData<fn() -> P>);
/// [`IntoProcessor`] for factories of [`AsyncProcessor`]s.
pub struct AsyncMarker<P>(PhantomData<fn() -> P>);
/// [`IntoProcessor`] for factories of [`RawProcessor`](super::RawProcessor)s
/// (the impl is beside the trait, in `raw_processor`).
pub struct RawMarker<P>(pub(crate) PhantomData<fn() -> P>);

impl<K, V, F> IntoProcessor<K, V, FnMarker<K, V>> for F
where
    K: DeserializeOwned + Send + 'static,
    V: DeserializeOwned + Send + 'static,
    F: FnMut(Record<K, V>, &mut Context<'_>) -> Result<(), ProcessError>
        + Clone
        + Send
        + Sync
        + 'static,
{
    fn into_factory(self) -> ProcessorFactory {
        ProcessorFactory {
            make: Arc::new(move |key_codec, value_codec| {
                Box::new(Typed {
                    inner: FnProcessor(self.clone()),
                    codecs: (key_codec, value_codec),
                    types: PhantomData,
                })
            }),
            function: true,
        }
    }
}

impl<K, V, P, F> IntoProcessor<K, V, ProcessorMarker<P>> for F
where
    K: DeserializeOwned + Send + 'static,
    V: DeserializeOwned + Send + 'static,
    P: Processor<K, V>,
    F: Fn() -> P + Send + Sync + 'static,
{
    fn into_factory(self) -> ProcessorFactory {
        ProcessorFactory {
            make: Arc::new(move |key_codec, value_codec| {
                Box::new(Typed {
                    inner: self(),
                    codecs: (key_codec, value_codec),
                    types: PhantomData,
                })
            }),
            function: false,
        }
    }
}

impl<K, V, P, F> IntoProcessor<K, V, AsyncMarker<P>> for F
where
    K: DeserializeOwned + Send + Sync + 'static,
    V: DeserializeOwned + Send + Sync + 'static,
    P: AsyncProcessor<K, V>,
    F: Fn() -> P + Send + Sync + 'static,
{
    fn into_factory(self) -> ProcessorFactory {
        ProcessorFactory {
            make: Arc::new(move |key_codec, value_codec| {
                Box::new(AsyncAdapter::new(self(), (key_codec, value_codec)))
            }),
            function: false,
        }
    }
}

/// A function or closure as a [`Processor`].
struct FnProcessor<F>(F);

impl<K, V, F> Processor<K, V> for FnProcessor<F>
where
    F: FnMut(Record<K, V>, &mut Context<'_>) -> Result<(), ProcessError> + Send + 'static,
{
    #[inline(always)]
    fn process(&mut self, record: Record<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        (self.0)(record, ctx)
    }
}

struct Typed<P, K, V> {
    inner: P,
    codecs: (Codec, Codec),
    types: PhantomData<fn(K, V)>,
}

impl<P, K, V> ErasedProcessor for Typed<P, K, V>
where
    P: Processor<K, V>,
    K: DeserializeOwned + Send + 'static,
    V: DeserializeOwned + Send + 'static,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.inner.init(ctx)
    }

    #[inline]
    fn process(&mut self, raw: RawRecord<'_>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let record = decode(&self.codecs, raw, ctx.position)?;
        self.inner.process(record, ctx)
    }

    fn close(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.inner.close(ctx)
    }

    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.inner.on_timer(timer, ctx)
    }
}

/// A raw record at `position` decoded with the input's codecs.
///
/// Called for every record: the errors are made out of line, and a record
/// without headers (most) gets an empty vector without a call to clone
/// the position's.
#[inline(always)]
pub(crate) fn decode<K, V>(
    (key_codec, value_codec): &(Codec, Codec),
    raw: RawRecord<'_>,
    position: &Position,
) -> Result<Record<K, V>, ProcessError>
where
    K: DeserializeOwned + 'static,
    V: DeserializeOwned + 'static,
{
    let key = match key_codec.decode(raw.key.unwrap_or_default()) {
        Ok(key) => key,
        Err(error) => return Err(undecodable(Part::Key, error)),
    };
    let value = match value_codec.decode(raw.value.unwrap_or_default()) {
        Ok(value) => value,
        Err(error) => return Err(undecodable(Part::Value, error)),
    };
    let headers = match position.headers.is_empty() {
        true => Vec::new(),
        false => position.headers.clone(),
    };
    Ok(Record {
        key,
        value,
        key_is_null: raw.key.is_none(),
        value_is_null: raw.value.is_none(),
        partition: position.partition,
        offset: position.offset,
        timestamp: position.timestamp,
        headers,
    })
}

/// Why a record's key or value did not decode, out of line.
#[cold]
#[inline(never)]
fn undecodable(part: Part, error: strata_record::codec::CodecError) -> ProcessError {
    ProcessError::undecodable(part, error)
}
