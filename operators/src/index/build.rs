//! Building an index (`index_by` on a table or a stream) and asking it
//! from a pipeline (`lookup_index`).

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_runtime::{App, Context, ProcessError};

use crate::graph::{key_codec_or_default, make_op};
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};
use crate::pipeline::Pipeline;
use crate::stream::Stream;
use crate::table::Table;

use super::key::entry_key;
use super::{Index, IndexQuery};

/// The fields of a row, as the user's function gives them.
type FieldsOf<K, V> = dyn Fn(&K, &V) -> Vec<Vec<u8>> + Send + Sync;

struct IndexBuilder<K: 'static, V> {
    index: Index<K>,
    fields_of: Arc<FieldsOf<K, V>>,
    next: Next<K, Option<V>>,
}

impl<K, V> Operator<K, Option<V>> for IndexBuilder<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    fn push(
        &mut self,
        item: Item<K, Option<V>>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let mut new = match &item.value {
            Some(value) => (self.fields_of)(&item.key, value),
            None => Vec::new(),
        };
        new.sort();
        new.dedup();
        let old = ctx.get(self.index.fields, &item.key)?.unwrap_or_default();
        if old != new {
            let key = self.index.key_codec.encode(&item.key)?;
            for gone in old.iter().filter(|f| new.binary_search(f).is_err()) {
                ctx.delete(self.index.entries, &entry_key(gone, &key))?;
            }
            for added in new.iter().filter(|f| old.binary_search(f).is_err()) {
                ctx.put(self.index.entries, &entry_key(added, &key), &())?;
            }
            if new.is_empty() {
                ctx.delete(self.index.fields, &item.key)?;
            } else {
                ctx.put(self.index.fields, &item.key, &new)?;
            }
        }
        self.next.push(item, ctx)
    }
}

/// Adds the index builder below `changes` (a stream of rows, `None`
/// deleting one).
fn build<K, V>(
    changes: &Stream<K, Option<V>>,
    name: &str,
    fields_of: Arc<FieldsOf<K, V>>,
) -> Index<K>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    let label = "index";
    let input = changes.partitioned(label);
    let key_codec = key_codec_or_default(input.key_codec);
    {
        let mut graph = input.pipeline.graph.borrow_mut();
        let node = graph.nodes.len();
        graph.store_name(node, label, Some(name));
        graph.store_name(node, label, Some(&format!("{name}-fields")));
    }
    let mut index = Index::<K>::named(name, key_codec);
    let make = make_op::<K, Option<V>, K, Option<V>, _>(move |next| {
        let fields_of = Arc::clone(&fields_of);
        Box::new(IndexBuilder {
            index,
            fields_of,
            next,
        })
    });
    let out = input.child::<K, Option<V>>(make, input.key_codec, true);
    let declare = Arc::new(move |app: App| {
        app.store(index.entries)
            .index_keys::<K>(index.key_codec)
            .store(index.fields)
    });
    let mut graph = out.pipeline.graph.borrow_mut();
    graph.declare(out.node, format!("store {name}"), declare);
    index.built = Some((graph_id(&out.pipeline), out.node));
    index
}

fn graph_id(pipeline: &Pipeline) -> usize {
    std::rc::Rc::as_ptr(&pipeline.graph) as usize
}

/// What `fields` returns made into the fields' bytes.
fn fields_fn<K, V, I, F>(fields: F) -> Arc<FieldsOf<K, V>>
where
    F: Fn(&K, &V) -> I + Send + Sync + 'static,
    I: IntoIterator,
    I::Item: AsRef<[u8]>,
{
    Arc::new(move |k: &K, v: &V| {
        fields(k, v)
            .into_iter()
            .map(|f| f.as_ref().to_vec())
            .collect()
    })
}

impl<K, V> Table<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Indexes the table's keys by `fields(key, row)`: none, one
    /// (`Some(city)`, `[city]`) or several field values per row, each as
    /// bytes (strings as UTF-8; big-endian integers sort as numbers).
    /// The stores are `name` and `<name>-fields`; see the module doc.
    pub fn index_by<I, F>(&self, name: &str, fields: F) -> Index<K>
    where
        F: Fn(&K, &V) -> I + Send + Sync + 'static,
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        build(&self.changes(), name, fields_fn(fields))
    }
}

impl<K, V> Stream<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Indexes the stream's keys by `fields(key, value)`, each record the
    /// key's new row (as [`Table::index_by`]; a stream has no deletions).
    /// A stream whose keys changed is repartitioned first.
    pub fn index_by<I, F>(&self, name: &str, fields: F) -> Index<K>
    where
        F: Fn(&K, &V) -> I + Send + Sync + 'static,
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        build(&self.map_values(Some), name, fields_fn(fields))
    }
}

/// A looked-up record: its value and the index entries (field, key) its
/// query found.
pub type Found<V, K> = (V, Vec<(Vec<u8>, K)>);

struct IndexLookup<K2: 'static, F, K, V> {
    index: Index<K2>,
    query: Arc<F>,
    next: Next<K, Found<V, K2>>,
}

impl<K2, F, K, V> Operator<K, V> for IndexLookup<K2, F, K, V>
where
    K2: Data + Serialize + DeserializeOwned,
    F: Fn(&K, &V) -> IndexQuery + Send + Sync + 'static,
    K: Data,
    V: Data,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let query = (self.query)(&item.key, &item.value);
        let found = self.index.query(ctx, &query)?;
        let (key, timestamp) = (item.key, item.timestamp);
        let value = (item.value, found);
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
    /// Every record with the entries of `index` that `query(key, value)`
    /// asks for. The lookup runs in the index's task of the record's
    /// partition number, which indexes the rows of that partition of its
    /// input: the two topics must be co-partitioned (the runtime checks),
    /// and a record sees the rows of its own partition number only.
    pub fn lookup_index<K2, F>(&self, index: &Index<K2>, query: F) -> Stream<K, Found<V, K2>>
    where
        K2: Data + Serialize + DeserializeOwned,
        F: Fn(&K, &V) -> IndexQuery + Send + Sync + 'static,
    {
        let (index, query) = (*index, Arc::new(query));
        let make = make_op::<K, V, K, Found<V, K2>, _>(move |next| {
            let query = Arc::clone(&query);
            Box::new(IndexLookup { index, query, next })
        });
        let out = self.child::<K, Found<V, K2>>(make, self.key_codec, self.partitioned);
        let mut graph = self.pipeline.graph.borrow_mut();
        match index.built {
            Some((pipeline, node)) if pipeline == graph_id(&self.pipeline) => {
                // One segment with the builder, whose declaration of the
                // index's stores is this processor's.
                graph.unite(node, out.node);
            }
            _ => graph.fail(format!(
                "lookup_index: the index {:?} is not built by this pipeline (use the Index its index_by returned)",
                index.name()
            )),
        }
        drop(graph);
        out
    }
}
