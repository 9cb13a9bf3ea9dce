//! A processor with its record types erased, as a task calls it: raw
//! records in, the typed processor called directly (no future per record).
//! The adapters are beside their traits (`processor`, `async_processor`,
//! `raw_processor`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use strata_record::codec::Codec;

use super::context::Context;
use super::position::Position;
use super::process_error::ProcessError;
use super::record::RawRecord;
use super::state::TaskState;
use super::timer::Timer;

/// Work a processor does over the records of a batch before the task
/// applies them one by one (an async processor's lookups).
pub(crate) type Prepare<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// What a run asks of the task before each of its records but the first,
/// given the record's place in the run: the store entries of records
/// ahead (see [`ErasedProcessor::process_run`]).
pub(crate) type Ahead<'a> = dyn FnMut(usize, &TaskState) + 'a;

/// A processor with its record types erased: takes raw records, decodes
/// them with the input codecs (a raw processor's adapter does not), and
/// calls the processor, directly.
pub(crate) trait ErasedProcessor: Send {
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError>;

    fn process(&mut self, raw: RawRecord<'_>, ctx: &mut Context<'_>) -> Result<(), ProcessError>;

    /// Runs the processor on `records` in turn, the context's position
    /// moved to each; stops at the first it fails on. The task hands
    /// over a run when nothing can be due between its records (see
    /// `Task::run_room`): one call through the task's `dyn` processor
    /// and one context per run, not per record; this loop, made for each
    /// adapter, calls its `process` directly (the typed adapter's, with
    /// the decoding and the processor's call inlined into it). Under
    /// callgrind, the runtime bench's pass-through (`Record<String,
    /// Vec<u8>>`, 500,000 records) ran 1,179 instructions per record on
    /// the task's thread a record at a time and 1,066 in runs, against
    /// the plain loop's 865.
    ///
    /// `ahead`, if the task prefetches store entries, is called before
    /// each record but the first (which the task asked ahead for before
    /// the run) with the record's place in the run: the task asks for the
    /// entries of the record `PREFETCH_AHEAD` past that place in the batch
    /// (see `task::prefetch`).
    fn process_run(
        &mut self,
        records: &[strata_record::Record<'_>],
        ctx: &mut Context<'_>,
        ahead: Option<&mut Ahead<'_>>,
    ) -> Result<(), Halted> {
        let Some(ahead) = ahead else {
            for (at, record) in records.iter().enumerate() {
                ctx.position.enter(record);
                (self.process(RawRecord::of(record), ctx)).map_err(|error| Halted { at, error })?;
            }
            return Ok(());
        };
        for (at, record) in records.iter().enumerate() {
            if at > 0 {
                ahead(at, ctx.state);
            }
            ctx.position.enter(record);
            (self.process(RawRecord::of(record), ctx)).map_err(|error| Halted { at, error })?;
        }
        Ok(())
    }

    fn close(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError>;

    /// A timer of the processor's is due (see `runtime::timer`).
    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError>;

    /// The task passes over the record at `offset` of input `topic`
    /// without calling the processor (diverted by its error policy): an
    /// async processor drops what it prepared for it.
    fn pass_over(&mut self, _topic: &str, _offset: i64) {}

    /// Whether [`ErasedProcessor::prepare`] has work to do (an async
    /// processor): a task with several inputs only decodes a batch ahead
    /// for a processor that asks.
    fn prepares(&self) -> bool {
        false
    }

    /// Before the task processes `records` of one batch (those at offsets
    /// in `from..until`, in order): the work to await first, if the
    /// processor has any (an async processor's `prepare`); None for the
    /// others, which cost nothing here.
    fn prepare<'a>(
        &'a mut self,
        _records: &[strata_record::Record<'_>],
        _position: &Position,
        _offsets: std::ops::Range<i64>,
    ) -> Option<Prepare<'a>> {
        None
    }
}

/// Where a run stopped: the processor failed on its record `at` (the ones
/// before it were processed).
pub(crate) struct Halted {
    pub at: usize,
    pub error: ProcessError,
}

/// Makes a task's processor, decoding with the given key and value codecs.
pub(crate) type Factory = Arc<dyn Fn(Codec, Codec) -> Box<dyn ErasedProcessor> + Send + Sync>;

/// Why a processor that does not handle timers cannot take one that is
/// due: what its default `on_timer` returns.
pub(crate) fn no_on_timer(timer: &Timer, ctx: &Context<'_>) -> ProcessError {
    ProcessError::msg(format!(
        "processor {:?} has a timer due ({timer}) but does not handle timers: implement on_timer (a function processor takes .on_timer(f) after .processor(..))",
        ctx.processor()
    ))
}

/// What a function processor's `.on_timer(f)` gives the builder.
pub(crate) type TimerFn =
    Arc<dyn Fn(Timer, &mut Context<'_>) -> Result<(), ProcessError> + Send + Sync>;

/// A processor whose timers go to a function of their own (the builder's
/// `.on_timer(f)`), everything else to the processor.
pub(crate) struct WithTimerFn {
    pub inner: Box<dyn ErasedProcessor>,
    pub on_timer: TimerFn,
}

impl ErasedProcessor for WithTimerFn {
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.inner.init(ctx)
    }

    #[inline]
    fn process(&mut self, raw: RawRecord<'_>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.inner.process(raw, ctx)
    }

    fn process_run(
        &mut self,
        records: &[strata_record::Record<'_>],
        ctx: &mut Context<'_>,
        ahead: Option<&mut Ahead<'_>>,
    ) -> Result<(), Halted> {
        self.inner.process_run(records, ctx, ahead)
    }

    fn close(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.inner.close(ctx)
    }

    fn on_timer(&mut self, timer: Timer, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        (self.on_timer)(timer, ctx)
    }

    fn pass_over(&mut self, topic: &str, offset: i64) {
        self.inner.pass_over(topic, offset)
    }

    fn prepares(&self) -> bool {
        self.inner.prepares()
    }

    fn prepare<'a>(
        &'a mut self,
        records: &[strata_record::Record<'_>],
        position: &Position,
        offsets: std::ops::Range<i64>,
    ) -> Option<Prepare<'a>> {
        self.inner.prepare(records, position, offsets)
    }
}
