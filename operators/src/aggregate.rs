//! The keyed aggregations: `count`, `reduce` and `aggregate`, each a store
//! of the latest aggregate per key and a stream of its updates (every
//! record emits its key's new aggregate).
//!
//! The aggregate is read and written through the task's run, which holds
//! one entry per key until the commit: a hot key updated a thousand times
//! in one commit is one RocksDB write, not a thousand (the runtime's
//! write cache). Everything is committed with the input offsets, so a
//! crash replays from the last commit and counts nothing twice.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_record::codec::Codec;
use strata_runtime::{App, Context, ProcessError, Store};

use crate::graph::{key_codec_or_default, make_op};
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};
use crate::stream::Stream;

/// The aggregate of a key given its last one (none yet) and a record.
pub(crate) type Fold<K, V, A> = dyn Fn(Option<A>, &K, &V) -> A + Send + Sync;

struct Aggregate<K, V, A> {
    store: Store<K, A>,
    fold: Arc<Fold<K, V, A>>,
    next: Next<K, A>,
}

impl<K, V, A> Operator<K, V> for Aggregate<K, V, A>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data,
    A: Data + Serialize + DeserializeOwned,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    #[inline]
    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let last = ctx.get(self.store, &item.key)?;
        let value = (self.fold)(last, &item.key, &item.value);
        ctx.put(self.store, &item.key, &value)?;
        let timestamp = item.timestamp;
        let key = item.key;
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

impl<K, V> Stream<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// The number of records per key so far, emitted at every record.
    pub fn count(&self) -> Stream<K, u64> {
        self.fold(
            "count",
            Arc::new(|n: Option<u64>, _: &K, _: &V| n.unwrap_or(0) + 1),
        )
    }

    /// Per key, `f(last, value)` of its records, the first record's value
    /// as it is; emitted at every record.
    pub fn reduce<F>(&self, f: F) -> Stream<K, V>
    where
        F: Fn(V, &V) -> V + Send + Sync + 'static,
    {
        let fold = move |last: Option<V>, _: &K, v: &V| match last {
            Some(last) => f(last, v),
            None => v.clone(),
        };
        self.fold("reduce", Arc::new(fold))
    }

    /// Per key, `f(aggregate, key, value)` of its records starting from
    /// `init()`; emitted at every record.
    pub fn aggregate<A, I, F>(&self, init: I, f: F) -> Stream<K, A>
    where
        A: Data + Serialize + DeserializeOwned,
        I: Fn() -> A + Send + Sync + 'static,
        F: Fn(A, &K, &V) -> A + Send + Sync + 'static,
    {
        let fold = move |last: Option<A>, k: &K, v: &V| f(last.unwrap_or_else(&init), k, v);
        self.fold("aggregate", Arc::new(fold))
    }

    fn fold<A>(&self, label: &'static str, fold: Arc<Fold<K, V, A>>) -> Stream<K, A>
    where
        A: Data + Serialize + DeserializeOwned,
    {
        let input = self.partitioned(label);
        let key_codec = key_codec_or_default(input.key_codec);
        let store_name = {
            let mut graph = input.pipeline.graph.borrow_mut();
            let next_node = graph.nodes.len();
            graph.store_name(next_node, label, self.store_name.as_deref())
        };
        let store = Store::<K, A>::named(store_name).codecs(key_codec, Codec::Postcard);
        let make = make_op::<K, V, K, A, _>(move |next| {
            let fold = Arc::clone(&fold);
            Box::new(Aggregate { store, fold, next })
        });
        let out = input.child::<K, A>(make, input.key_codec, true);
        let declare = Arc::new(move |app: App| app.store(store));
        let mut graph = out.pipeline.graph.borrow_mut();
        graph.declare(out.node, format!("store {store_name}"), declare);
        drop(graph);
        out
    }
}
