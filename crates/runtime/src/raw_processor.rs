//! [`RawProcessor`]: a processor of records' bytes as the log holds them,
//! for code that decodes them itself (a pipeline whose task reads several
//! topics, each with its own codecs).
//!
//! A [`Processor`](super::Processor) of `Vec<u8>` keys and values gets
//! each record's key and value copied into two vectors of its own, and
//! drops them after the call. A raw processor gets them borrowed from the
//! fetched batch, for the length of the call. Measured under callgrind on
//! the operators bench's join (a pipeline reading `events` and its table's
//! topic in one task), the two copies, their allocations and frees cost
//! about 430 of the task's 5,260 instructions per record.
//!
//! Everything else is a processor's: `init`, `close`, timers, the context,
//! error policies. It is given to [`App::processor`](super::App::processor)
//! as a factory, like a `Processor`; its input codecs are not used to
//! decode anything (they still tell which stores key their entries as the
//! input does, which the task asks the CPU for ahead of their records).

use std::sync::Arc;

use super::context::Context;
use super::erased::{ErasedProcessor, no_on_timer};
use super::process_error::ProcessError;
use super::processor::{IntoProcessor, ProcessorFactory, RawMarker};
use super::record::RawRecord;
use super::timer::Timer;

/// A processor of records' bytes; see the module doc. One instance runs
/// per task, made by the factory given to the builder.
pub trait RawProcessor: Send + 'static {
    /// Called once when the task starts, before its first record.
    fn init(&mut self, _ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Ok(())
    }

    /// Called for every input record, in offset order per partition; its
    /// timestamp, offset and headers are the context's.
    fn process(&mut self, record: RawRecord<'_>, ctx: &mut Context<'_>)
    -> Result<(), ProcessError>;

    /// Called once when the task stops cleanly; writes go into its last
    /// commit.
    fn close(&mut self, _ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Ok(())
    }

    /// Called when a timer the processor scheduled is due, as
    /// [`Processor::on_timer`](super::Processor::on_timer) is.
    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Err(no_on_timer(&timer, ctx))
    }
}

impl<P, F> IntoProcessor<Vec<u8>, Vec<u8>, RawMarker<P>> for F
where
    P: RawProcessor,
    F: Fn() -> P + Send + Sync + 'static,
{
    fn into_factory(self) -> ProcessorFactory {
        ProcessorFactory {
            make: Arc::new(move |_, _| Box::new(Raw(self()))),
            function: false,
        }
    }
}

/// A raw processor as the task calls it: the record handed on as it is.
struct Raw<P>(P);

impl<P: RawProcessor> ErasedProcessor for Raw<P> {
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.0.init(ctx)
    }

    #[inline]
    fn process(&mut self, raw: RawRecord<'_>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.0.process(raw, ctx)
    }

    fn close(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.0.close(ctx)
    }

    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.0.on_timer(timer, ctx)
    }
}
