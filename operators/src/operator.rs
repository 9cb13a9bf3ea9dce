//! [`Operator`]: one step of a pipeline as a task runs it, and [`Next`],
//! the steps it hands its items to.
//!
//! A pipeline's steps are built once per task (by the processor factory
//! the runtime calls for every task), so an operator's fields are per
//! task; what must survive a restart lives in the task's stores, written
//! through the [`Context`] and committed with the input offsets.
//!
//! Items are pushed, depth first: an operator's `push` returns once every
//! step below it has taken what it emitted. Nothing is queued between
//! steps, so a pipeline holds no records of its own between commits.

use strata_runtime::{Context, ProcessError};

use crate::item::{Data, Item};

pub(crate) trait Operator<K, V>: Send {
    /// Called once when the task starts, before its first record.
    fn init(&mut self, _ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Ok(())
    }

    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError>;
}

/// A boxed operator taking `K` → `V` items.
pub(crate) type BoxOp<K, V> = Box<dyn Operator<K, V>>;

/// The steps an operator feeds: every one gets each item (the last one
/// the item itself, the others a clone).
pub(crate) struct Next<K, V> {
    steps: Vec<BoxOp<K, V>>,
}

impl<K: Data, V: Data> Next<K, V> {
    pub fn new(steps: Vec<BoxOp<K, V>>) -> Self {
        Self { steps }
    }

    #[inline]
    pub fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let Some((last, first)) = self.steps.split_last_mut() else {
            return Ok(());
        };
        for step in first {
            step.push(item.clone(), ctx)?;
        }
        last.push(item, ctx)
    }

    pub fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.steps.iter_mut().try_for_each(|step| step.init(ctx))
    }
}

impl<K: Data, V: Data> Operator<K, V> for Next<K, V> {
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Next::init(self, ctx)
    }

    #[inline]
    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        Next::push(self, item, ctx)
    }
}
