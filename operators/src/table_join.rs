//! Table–table joins: [`Table::join`] (inner) and [`Table::left_join`]
//! make a [`Table`] whose row for a key is `f(key, a, b)` of the two
//! tables' rows, kept up to date as either side changes.
//!
//! Per change of either side (a row written, or deleted by a tombstone),
//! the key's joined row is computed anew from the changed row and the
//! other table's row as it is then: both tables' stores are written
//! before their changes reach the join, and both run in one task, which
//! applies their changes in the order it reads them. A joined row that
//! exists is written to the join's store and emitted as `Some(row)`; one
//! that stops existing (a side deleted; for an inner join, either side)
//! is deleted and emitted as `None`, once. A change that leaves no row
//! where there was none emits nothing.
//!
//! The two tables run in one processor, so their topics must be
//! co-partitioned (the runtime refuses different partition counts,
//! naming the topics), and their keys must be encoded alike (a key's rows
//! must reach the same partition number of both topics): tables whose
//! key codecs differ are refused when the pipeline becomes an app.
//!
//! The joined table's store is `table-join-<node>`, or the name given
//! with [`Table::stored_as`] on the left table; its keys are encoded with
//! the tables' key codec, its rows with postcard. The result is a table
//! like another: its `changes()`, a stream joined with it, an index of it
//! or another join.

use std::rc::Rc;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_record::codec::Codec;
use strata_runtime::{App, Context, ProcessError, Store};

use crate::graph::{make_op, share};
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};
use crate::stream_join::Side;
use crate::table::Table;

/// The joined row of a key given its rows, or none.
type RowJoiner<K, A, B, R> = dyn Fn(&K, Option<&A>, Option<&B>) -> Option<R> + Send + Sync;

struct TableJoin<K: 'static, A: 'static, B: 'static, R: 'static> {
    left: Store<K, A>,
    right: Store<K, B>,
    joined: Store<K, R>,
    f: Arc<RowJoiner<K, A, B, R>>,
    next: Next<K, Option<R>>,
}

impl<K, A, B, R> Operator<K, Side<Option<A>, Option<B>>> for TableJoin<K, A, B, R>
where
    K: Data + Serialize + DeserializeOwned,
    A: Data + Serialize + DeserializeOwned,
    B: Data + Serialize + DeserializeOwned,
    R: Data + Serialize + DeserializeOwned,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    fn push(
        &mut self,
        item: Item<K, Side<Option<A>, Option<B>>>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let key = item.key;
        let (a, b) = match item.value {
            Side::Left(a) => (a, ctx.get(self.right, &key)?),
            Side::Right(b) => (ctx.get(self.left, &key)?, b),
        };
        let value = match (self.f)(&key, a.as_ref(), b.as_ref()) {
            Some(row) => {
                ctx.put(self.joined, &key, &row)?;
                Some(row)
            }
            None if ctx.get(self.joined, &key)?.is_some() => {
                ctx.delete(self.joined, &key)?;
                None
            }
            None => return Ok(()),
        };
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

impl<K, V> Table<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Names the store of the next table joined from this one (by
    /// default `table-join-<node>`).
    pub fn stored_as(&self, store: &str) -> Self {
        let mut named = self.clone();
        named.store_name = Some(store.to_string());
        named
    }

    /// The table of the keys with a row in both tables, each row
    /// `f(key, row, other_row)`; see the `table_join` module doc.
    pub fn join<V2, R, F>(&self, other: &Table<K, V2>, f: F) -> Table<K, R>
    where
        V2: Data + Serialize + DeserializeOwned,
        R: Data + Serialize + DeserializeOwned,
        F: Fn(&K, &V, &V2) -> R + Send + Sync + 'static,
    {
        let f = move |k: &K, a: Option<&V>, b: Option<&V2>| Some(f(k, a?, b?));
        self.join_rows(other, Arc::new(f))
    }

    /// The table of the keys with a row in this table, each row `f(key,
    /// row, other_row)` with the other table's row if it has one.
    pub fn left_join<V2, R, F>(&self, other: &Table<K, V2>, f: F) -> Table<K, R>
    where
        V2: Data + Serialize + DeserializeOwned,
        R: Data + Serialize + DeserializeOwned,
        F: Fn(&K, &V, Option<&V2>) -> R + Send + Sync + 'static,
    {
        let f = move |k: &K, a: Option<&V>, b: Option<&V2>| Some(f(k, a?, b));
        self.join_rows(other, Arc::new(f))
    }

    fn join_rows<V2, R>(&self, other: &Table<K, V2>, f: Arc<RowJoiner<K, V, V2, R>>) -> Table<K, R>
    where
        V2: Data + Serialize + DeserializeOwned,
        R: Data + Serialize + DeserializeOwned,
    {
        let label = "table-join";
        let failed = if !Rc::ptr_eq(&self.pipeline.graph, &other.pipeline.graph) {
            Some(format!(
                "table join: the tables {:?} and {:?} belong to different pipelines",
                self.store.name(),
                other.store.name()
            ))
        } else if self.key_codec != other.key_codec {
            Some(format!(
                "table join: the tables {:?} ({} keys) and {:?} ({} keys) encode their keys differently, so a key's rows are in different partitions of their topics; read both with one key codec",
                self.store.name(),
                self.key_codec.name(),
                other.store.name(),
                other.key_codec.name()
            ))
        } else {
            None
        };
        let left = self
            .changes()
            .map_values(Side::<Option<V>, Option<V2>>::Left);
        let right = other
            .changes()
            .map_values(Side::<Option<V>, Option<V2>>::Right);
        let mut graph = self.pipeline.graph.borrow_mut();
        if let Some(error) = failed {
            graph.fail(error);
        }
        let node = graph.nodes.len();
        let name = graph.store_name(node, label, self.store_name.as_deref());
        let joined = Store::<K, R>::named(name).codecs(self.key_codec, Codec::Postcard);
        let (left_store, right_store) = (self.store, other.store);
        let make = make_op::<K, Side<Option<V>, Option<V2>>, K, Option<R>, _>(move |next| {
            Box::new(TableJoin {
                left: left_store,
                right: right_store,
                joined,
                f: Arc::clone(&f),
                next,
            })
        });
        // Both parents' segments become one: the two tables' processor.
        let parents = if Rc::ptr_eq(&self.pipeline.graph, &other.pipeline.graph) {
            vec![left.node, right.node]
        } else {
            vec![left.node]
        };
        let node = graph.add(&parents, make, share::<K, Side<Option<V>, Option<V2>>>);
        graph.declare(
            node,
            format!("store {name}"),
            Arc::new(move |app: App| app.store(joined)),
        );
        drop(graph);
        Table {
            pipeline: self.pipeline.clone(),
            node,
            key_codec: self.key_codec,
            store: joined,
            store_name: None,
        }
    }
}
