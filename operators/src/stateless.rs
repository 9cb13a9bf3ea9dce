//! The stateless operators: each a function of one item, keeping nothing.
//! `filter`, `map`, `map_values`, `flat_map`, `key_by` and `inspect` (see
//! [`Stream`](crate::Stream)); `to`, the sink that emits to a topic, and
//! `to_upserts`, the one that writes a table's changes (a `None` as a
//! tombstone).

use std::sync::Arc;

use serde::Serialize;
use strata_runtime::{Context, EmitOptions, Output, ProcessError};

use crate::item::{Data, Item};
use crate::operator::{Next, Operator};

pub(crate) type Shared<F> = Arc<F>;

pub(crate) struct Filter<F, K, V> {
    pub keep: Shared<F>,
    pub next: Next<K, V>,
}

impl<F, K: Data, V: Data> Operator<K, V> for Filter<F, K, V>
where
    F: Fn(&K, &V) -> bool + Send + Sync + 'static,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    #[inline]
    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        if (self.keep)(&item.key, &item.value) {
            self.next.push(item, ctx)?;
        }
        Ok(())
    }
}

/// `map`, `map_values` and `key_by` alike: one item in, one out.
pub(crate) struct Map<F, K2, V2> {
    pub f: Shared<F>,
    pub next: Next<K2, V2>,
}

impl<F, K: Data, V: Data, K2: Data, V2: Data> Operator<K, V> for Map<F, K2, V2>
where
    F: Fn(K, V) -> (K2, V2) + Send + Sync + 'static,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    #[inline]
    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let (key, value) = (self.f)(item.key, item.value);
        let timestamp = item.timestamp;
        self.next.push(
            Item {
                key,
                value,
                timestamp,
            },
            ctx,
        )
    }
}

pub(crate) struct FlatMap<F, K2, V2> {
    pub f: Shared<F>,
    pub next: Next<K2, V2>,
}

impl<F, I, K: Data, V: Data, K2: Data, V2: Data> Operator<K, V> for FlatMap<F, K2, V2>
where
    F: Fn(K, V) -> I + Send + Sync + 'static,
    I: IntoIterator<Item = (K2, V2)>,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    #[inline]
    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let timestamp = item.timestamp;
        for (key, value) in (self.f)(item.key, item.value) {
            let item = Item {
                key,
                value,
                timestamp,
            };
            self.next.push(item, ctx)?;
        }
        Ok(())
    }
}

pub(crate) struct Inspect<F, K, V> {
    pub f: Shared<F>,
    pub next: Next<K, V>,
}

impl<F, K: Data, V: Data> Operator<K, V> for Inspect<F, K, V>
where
    F: Fn(&K, &V) + Send + Sync + 'static,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    #[inline]
    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        (self.f)(&item.key, &item.value);
        self.next.push(item, ctx)
    }
}

/// The sink of `to` and `through`: every item emitted to the topic,
/// partitioned by its encoded key, with the item's timestamp.
pub(crate) struct To<K, V> {
    pub output: Output<K, V>,
}

impl<K, V> Operator<K, V> for To<K, V>
where
    K: Data + Serialize,
    V: Data + Serialize,
{
    #[inline]
    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let options = EmitOptions::default().timestamp(item.timestamp);
        ctx.emit_with(self.output, &item.key, &item.value, options)
    }
}

/// The sink of `to_upserts`: a `Some` emitted as the key's value, a `None`
/// as a tombstone (no value), with the item's timestamp.
pub(crate) struct ToUpserts<K, V> {
    pub output: Output<K, V>,
}

impl<K, V> Operator<K, Option<V>> for ToUpserts<K, V>
where
    K: Data + Serialize,
    V: Data + Serialize,
{
    #[inline]
    fn push(
        &mut self,
        item: Item<K, Option<V>>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let options = EmitOptions::default().timestamp(item.timestamp);
        match &item.value {
            Some(value) => ctx.emit_with(self.output, &item.key, value, options),
            None => ctx.emit_tombstone(self.output, &item.key, options),
        }
    }
}
