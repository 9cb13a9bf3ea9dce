//! [`Table`]: a topic read as a table, the latest value per key kept in
//! a store of the task (a null value, a tombstone, deletes the key), and
//! the lookups that join a stream with it.
//!
//! A table and the streams joined with it run in one processor over
//! their topics, which must be co-partitioned (the runtime refuses them
//! otherwise, naming the topics): partition i of the stream meets
//! partition i of the table, so a key's records find its row. The task
//! reads its inputs in timestamp order across them (docs/design.md,
//! "Order across inputs"), so a record of a backlog joins the row current
//! at its timestamp: the latest table record stamped at or before it (a
//! table declared before the stream wins a tie); a stream record older
//! than its key's first row finds none. Live, a table update arriving
//! after the stream has moved past its time is applied when it comes
//! (see `App::max_task_idle`).

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_record::codec::{Codec, Part};
use strata_runtime::{App, Context, ProcessError, RawRecord, Store};

use crate::graph::{Source, make_op, make_source, share};
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};
use crate::pipeline::Pipeline;
use crate::source::decode_part;
use crate::stream::Stream;
use strata_runtime::Topic;

/// A table materialized from a topic, or joined from two tables (see
/// `table_join`); see the module doc.
pub struct Table<K, V> {
    pub(crate) pipeline: Pipeline,
    pub(crate) node: usize,
    /// The codec of the keys (the topic's, for a table read from one).
    pub(crate) key_codec: Codec,
    pub(crate) store: Store<K, V>,
    /// The name of the store of the next table joined from this one.
    pub(crate) store_name: Option<String>,
}

impl<K, V> Clone for Table<K, V> {
    fn clone(&self) -> Self {
        Self {
            pipeline: self.pipeline.clone(),
            node: self.node,
            key_codec: self.key_codec,
            store: self.store,
            store_name: self.store_name.clone(),
        }
    }
}

struct TableSource<K, V: 'static> {
    codecs: (Codec, Codec),
    store: Store<K, V>,
    next: Next<K, Option<V>>,
}

impl<K, V> Source for TableSource<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }

    fn push(&mut self, record: RawRecord<'_>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let key: K = decode_part(self.codecs.0, record.key, Part::Key)?;
        // A null value, a tombstone, deletes the key.
        let value = match record.value {
            None => {
                ctx.delete(self.store, &key)?;
                None
            }
            Some(bytes) => {
                let value: V = decode_part(self.codecs.1, Some(bytes), Part::Value)?;
                ctx.put(self.store, &key, &value)?;
                Some(value)
            }
        };
        let timestamp = ctx.timestamp();
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

impl Pipeline {
    /// `topic` as a table: its latest value per key, in a store named
    /// `<topic>-table`; a null value deletes the key.
    pub fn table<K, V>(&self, topic: Topic<K, V>) -> Table<K, V>
    where
        K: Data + Serialize + DeserializeOwned,
        V: Data + Serialize + DeserializeOwned,
    {
        let codecs = (topic.key_codec(), topic.value_codec());
        let mut graph = self.graph.borrow_mut();
        let node = graph.nodes.len();
        let name = graph.store_name(node, "table", Some(&format!("{}-table", topic.name())));
        let store = Store::<K, V>::named(name).codecs(topic.key_codec(), Codec::Postcard);
        let make = make_source::<K, Option<V>, _>(move |next| {
            Box::new(TableSource {
                codecs,
                store,
                next,
            })
        });
        let node = graph.add(&[], make, share::<K, Option<V>>);
        graph.nodes[node].source = Some(topic.name());
        graph.declare(
            node,
            format!("store {name}"),
            Arc::new(move |app: App| app.store(store)),
        );
        drop(graph);
        Table {
            pipeline: self.clone(),
            node,
            key_codec: topic.key_codec(),
            store,
            store_name: None,
        }
    }
}

impl<K, V> Table<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// The table's changes: per record of its topic, the key and its new
    /// value (`None` for a deletion).
    pub fn changes(&self) -> Stream<K, Option<V>> {
        Stream::at(self.pipeline.clone(), self.node, Some(self.key_codec), true)
    }

    /// The store that holds the table's rows.
    pub fn store(&self) -> Store<K, V> {
        self.store
    }
}

struct Lookup<K, V, T: 'static, R, F> {
    store: Store<K, T>,
    f: Arc<F>,
    inner: bool,
    next: Next<K, R>,
    types: std::marker::PhantomData<fn(V)>,
}

impl<K, V, T, R, F> Operator<K, V> for Lookup<K, V, T, R, F>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data,
    T: Data + Serialize + DeserializeOwned,
    R: Data,
    F: Fn(&K, V, Option<T>) -> R + Send + Sync + 'static,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    #[inline]
    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let row = ctx.get(self.store, &item.key)?;
        if self.inner && row.is_none() {
            return Ok(());
        }
        let value = (self.f)(&item.key, item.value, row);
        let (key, timestamp) = (item.key, item.timestamp);
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
    /// Every record whose key has a row in `table`, joined with it by
    /// `f(key, value, row)` (an inner join; records without a row are
    /// dropped).
    pub fn join<T, R, F>(&self, table: &Table<K, T>, f: F) -> Stream<K, R>
    where
        T: Data + Serialize + DeserializeOwned,
        R: Data,
        F: Fn(&K, V, T) -> R + Send + Sync + 'static,
    {
        let f = move |k: &K, v: V, row: Option<T>| f(k, v, row.expect("an inner join has a row"));
        self.lookup(table, true, f)
    }

    /// Every record, joined by `f(key, value, row)` with its key's row in
    /// `table` if there is one (a left join).
    pub fn left_join<T, R, F>(&self, table: &Table<K, T>, f: F) -> Stream<K, R>
    where
        T: Data + Serialize + DeserializeOwned,
        R: Data,
        F: Fn(&K, V, Option<T>) -> R + Send + Sync + 'static,
    {
        self.lookup(table, false, f)
    }

    fn lookup<T, R, F>(&self, table: &Table<K, T>, inner: bool, f: F) -> Stream<K, R>
    where
        T: Data + Serialize + DeserializeOwned,
        R: Data,
        F: Fn(&K, V, Option<T>) -> R + Send + Sync + 'static,
    {
        let input = self.partitioned_as("join", Some(table.key_codec));
        let (store, f) = (table.store, Arc::new(f));
        let make = make_op::<K, V, K, R, _>(move |next| {
            Box::new(Lookup {
                store,
                f: Arc::clone(&f),
                inner,
                next,
                types: std::marker::PhantomData,
            })
        });
        let out = input.child::<K, R>(make, input.key_codec, true);
        let mut graph = self.pipeline.graph.borrow_mut();
        graph.unite(table.node, out.node);
        graph.declare(
            out.node,
            format!("store {}", store.name()),
            Arc::new(move |app: App| app.store(store)),
        );
        drop(graph);
        out
    }
}
