//! Stream–stream joins within a window of event time:
//! [`Stream::join_window`] (inner), [`Stream::left_join_window`] and
//! [`Stream::outer_join_window`], over [`JoinWindows`] (`windows`: which
//! records join, relative to the left record, and when each side's
//! records expire).
//!
//! Both sides' records are buffered per task, each in its side's store,
//! and a record of one side joins every live buffered record of the
//! other side with the same key in its window, as it arrives (so each
//! pair is joined once, by whichever of the two came second). Per record,
//! in this order:
//!
//! 1. The task's watermark moves up to the record's timestamp (one
//!    watermark for both sides: they run in one task).
//! 2. A left record at `t` is **live** while the watermark is at most
//!    `t + after + grace`, a right record while it is at most `t + before
//!    + grace`; one that arrives already expired is **late**: counted
//!    (`late` in the time store and the dropped records in `/metrics`),
//!    dropped, and written to its side's late
//!    topic if the join was given one ([`WindowJoined::late_left_to`],
//!    [`WindowJoined::late_right_to`]).
//! 3. The record is joined, `f(key, left, right)` with timestamp
//!    `max(t₁, t₂)`, with each live buffered record of the other side in
//!    its window, in the order of their timestamps (then arrival), and is
//!    buffered itself.
//! 4. Expired records are deleted (see `expiry`). A left join emits
//!    `f(key, left, None)` for each left record that expired without
//!    joining (an outer join also for right records), with the record's
//!    own timestamp: once, and only when no partner can come any more.
//!    Such results come at the first scan after the expiry (scans run
//!    at fixed steps of the watermark, see `expiry`), so a run of the
//!    same records gives them at the same places, restarts included.
//!
//! Both sides run in one processor, so their input topics must be
//! co-partitioned: the runtime refuses inputs with different partition
//! counts, naming the processor and the topics. Keys reach the stores
//! encoded with one codec (the left side's when it is partitioned by its
//! keys, else the right's, else postcard); a side keyed otherwise, or
//! re-keyed, goes through an internal repartition topic first.
//!
//! Stores (`join-window-<node>` by default, or `stored_as` on the left
//! side): `<name>-left` and `<name>-right` (the buffered records by
//! buffer key, each with whether it joined), `<name>-expiring` (the
//! expiry list, its entry keys the side byte, 0 left or 1 right, then the
//! buffer key) and `<name>-time` (`watermark`, `late`, `seq`).
//!
//! ```text
//! buffer key  [key length u32 BE][key: the join's key codec][t u64 BE: t ^ i64::MIN][seq u64 BE]
//! ```
//!
//! `seq` numbers the task's buffered records (two records of a key may
//! share a timestamp); it is kept in the time store, so a replay numbers
//! them as the first run did. A key's records are a byte range ordered by
//! time: the key length makes no key's range overlap another's.

mod joined;
mod key;
mod operator;
mod windows;

use std::rc::Rc;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_record::codec::Codec;
use strata_runtime::{App, Store};

use crate::expiry::ExpiryStores;
use crate::graph::{Graph, Make, make_op, share};
use crate::item::Data;
use crate::stream::Stream;

pub use joined::WindowJoined;
use operator::{JoinSpec, JoinStores, Joiner, Kind, LateOutputs, WindowJoin};
pub use windows::JoinWindows;

/// A record of either side, as the join's one operator takes them.
#[derive(Clone)]
pub(crate) enum Side<L, R> {
    Left(L),
    Right(R),
}

impl<K, V> Stream<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Every pair of records, one of this stream (left, at `t`) and one
    /// of `other` (right) with the same key and a timestamp in `t −
    /// before ..= t + after` of `windows`, joined by `f(key, left, right)`
    /// (an inner join); see the module doc. The result also takes each
    /// side's late topic ([`WindowJoined::late_left_to`]).
    pub fn join_window<V2, O, F>(
        &self,
        other: &Stream<K, V2>,
        windows: JoinWindows,
        f: F,
    ) -> WindowJoined<K, V, V2, O>
    where
        V2: Data + Serialize + DeserializeOwned,
        O: Data,
        F: Fn(&K, &V, &V2) -> O + Send + Sync + 'static,
    {
        let f = move |k: &K, l: Option<&V>, r: Option<&V2>| match (l, r) {
            (Some(l), Some(r)) => f(k, l, r),
            _ => unreachable!("an inner join emits pairs only"),
        };
        let kind = Kind {
            unjoined_left: false,
            unjoined_right: false,
        };
        self.window_join(other, windows, kind, Arc::new(f))
    }

    /// As [`Stream::join_window`], and besides, every record of this
    /// stream that joined none by the time it expired, as `f(key, left,
    /// None)`.
    pub fn left_join_window<V2, O, F>(
        &self,
        other: &Stream<K, V2>,
        windows: JoinWindows,
        f: F,
    ) -> WindowJoined<K, V, V2, O>
    where
        V2: Data + Serialize + DeserializeOwned,
        O: Data,
        F: Fn(&K, &V, Option<&V2>) -> O + Send + Sync + 'static,
    {
        let f = move |k: &K, l: Option<&V>, r: Option<&V2>| {
            f(k, l.expect("a left join's results have a left side"), r)
        };
        let kind = Kind {
            unjoined_left: true,
            unjoined_right: false,
        };
        self.window_join(other, windows, kind, Arc::new(f))
    }

    /// As [`Stream::left_join_window`], for the records of both sides.
    pub fn outer_join_window<V2, O, F>(
        &self,
        other: &Stream<K, V2>,
        windows: JoinWindows,
        f: F,
    ) -> WindowJoined<K, V, V2, O>
    where
        V2: Data + Serialize + DeserializeOwned,
        O: Data,
        F: Fn(&K, Option<&V>, Option<&V2>) -> O + Send + Sync + 'static,
    {
        let kind = Kind {
            unjoined_left: true,
            unjoined_right: true,
        };
        self.window_join(other, windows, kind, Arc::new(f))
    }

    fn window_join<V2, O>(
        &self,
        other: &Stream<K, V2>,
        windows: JoinWindows,
        kind: Kind,
        f: Arc<Joiner<K, V, V2, O>>,
    ) -> WindowJoined<K, V, V2, O>
    where
        V2: Data + Serialize + DeserializeOwned,
        O: Data,
    {
        let label = "join-window";
        if !Rc::ptr_eq(&self.pipeline.graph, &other.pipeline.graph) {
            self.pipeline.graph.borrow_mut().fail(format!(
                "join_window: the two streams belong to different pipelines ({:?} and {:?})",
                self.pipeline.name, other.pipeline.name
            ));
            let stream = Stream::at(self.pipeline.clone(), self.node, self.key_codec, false);
            return WindowJoined::refused(stream);
        }
        // One key encoding for both sides: the first side partitioned by
        // its keys keeps its own.
        let codec = if self.partitioned && self.key_codec.is_some() {
            self.key_codec
        } else if other.partitioned {
            other.key_codec
        } else {
            None
        };
        let codec = codec.unwrap_or(Codec::Postcard);
        let left = self
            .partitioned_as(label, Some(codec))
            .map_values(Side::<V, V2>::Left);
        let right = other
            .partitioned_as(label, Some(codec))
            .map_values(Side::<V, V2>::Right);
        let mut graph = self.pipeline.graph.borrow_mut();
        let node = graph.nodes.len();
        let base = match &self.store_name {
            Some(name) => name.clone(),
            None => format!("{label}-{node}"),
        };
        let stores = join_stores::<V, V2>(&mut graph, node, label, &base);
        let spec = JoinSpec {
            windows,
            kind,
            key_codec: codec,
            f,
            late: LateOutputs {
                left: None,
                right: None,
            },
        };
        let make = make_join(spec.clone(), stores);
        let node = graph.add(&[left.node, right.node], make, share::<K, Side<V, V2>>);
        graph.declare(
            node,
            format!("store {base}-left"),
            Arc::new(move |app: App| {
                app.store(stores.left)
                    .store(stores.right)
                    .store(stores.clock.list)
                    .store(stores.clock.time)
            }),
        );
        drop(graph);
        let stream = Stream::at(self.pipeline.clone(), node, Some(codec), true);
        WindowJoined::new(stream, spec, stores)
    }
}

/// The stores of the join at `node`, named after `base`.
fn join_stores<L, R>(graph: &mut Graph, node: usize, label: &str, base: &str) -> JoinStores<L, R>
where
    L: Data + Serialize + DeserializeOwned,
    R: Data + Serialize + DeserializeOwned,
{
    let mut name = |suffix: &str| graph.store_name(node, label, Some(&format!("{base}-{suffix}")));
    JoinStores {
        left: Store::named(name("left")).codecs(Codec::Raw, Codec::Postcard),
        right: Store::named(name("right")).codecs(Codec::Raw, Codec::Postcard),
        clock: ExpiryStores {
            list: Store::named(name("expiring")).codecs(Codec::Raw, Codec::Postcard),
            time: Store::named(name("time")),
        },
    }
}

/// The `make` of a join's node: its operator, built for each task.
fn make_join<K, L, R, O>(spec: JoinSpec<K, L, R, O>, stores: JoinStores<L, R>) -> Make
where
    K: Data + Serialize + DeserializeOwned,
    L: Data + Serialize + DeserializeOwned,
    R: Data + Serialize + DeserializeOwned,
    O: Data,
{
    make_op::<K, Side<L, R>, K, O, _>(move |next| {
        Box::new(WindowJoin::new(spec.clone(), stores, next))
    })
}
