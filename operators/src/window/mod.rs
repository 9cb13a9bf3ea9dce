//! Windowed aggregations over event time: [`Stream::window`] with
//! [`Tumbling`] or [`Hopping`] windows makes a [`WindowedStream`], whose
//! `count`, `reduce` and `aggregate` keep one aggregate per key and
//! window (see `aggregate` for the watermark, grace, late records and
//! closing).
//!
//! [`Stream::session`] with [`Sessions`] makes a [`SessionStream`]: per
//! key, runs of records closer than an inactivity gap (see `session`).
//! Emitting on update, its aggregations are streams of `Option`s, a
//! `None` retracting a session merged away or whose bounds moved (see
//! `session_spec`).
//!
//! `spec`: the fixed windows; `key`: the byte layouts of the window
//! stores; `aggregate`: the fixed windows' operator; `known`: the windows
//! it opened, known new without a read; `session_spec`: the
//! session windows and their emission modes; `session`: their operator.

mod aggregate;
pub(crate) mod key;
mod known;
mod session;
mod session_spec;
mod spec;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_record::codec::Codec;
use strata_runtime::{App, Store};

use crate::aggregate::Fold;
use crate::graph::{key_codec_or_default, make_op};
use crate::item::Data;
use crate::stream::Stream;
use strata_runtime::Topic;

use aggregate::{WindowAggregate, WindowStores};
use session::{Merge, SessionAggregate, SessionFns, SessionStores};
pub use session_spec::{OnClose, OnUpdate, SessionEmit, Sessions};
pub use spec::{Emit, Hopping, Tumbling, Windowed, Windows};

/// A stream grouped into windows, awaiting its aggregation.
pub struct WindowedStream<K, V> {
    stream: Stream<K, V>,
    windows: Windows,
    late: Option<Topic<K, V>>,
}

impl<K, V> Stream<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Groups the stream's records by key into `windows` of their
    /// timestamps.
    pub fn window(&self, windows: Windows) -> WindowedStream<K, V> {
        if let Err(error) = windows.check() {
            self.pipeline.graph.borrow_mut().fail(error);
        }
        WindowedStream {
            stream: self.clone(),
            windows,
            late: None,
        }
    }
}

impl<K, V> WindowedStream<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Writes late records (for windows all closed) to `topic` besides
    /// counting them.
    pub fn late_to(mut self, topic: Topic<K, V>) -> Self {
        self.late = Some(topic);
        self
    }

    /// The number of records per key and window.
    pub fn count(self) -> Stream<Windowed<K>, u64> {
        self.fold(
            "count",
            Arc::new(|n: Option<u64>, _: &K, _: &V| n.unwrap_or(0) + 1),
        )
    }

    /// Per key and window, `f(last, value)` of its records, the first
    /// record's value as it is.
    pub fn reduce<F>(self, f: F) -> Stream<Windowed<K>, V>
    where
        F: Fn(V, &V) -> V + Send + Sync + 'static,
    {
        let fold = move |last: Option<V>, _: &K, v: &V| match last {
            Some(last) => f(last, v),
            None => v.clone(),
        };
        self.fold("reduce", Arc::new(fold))
    }

    /// Per key and window, `f(aggregate, key, value)` of its records
    /// starting from `init()`.
    pub fn aggregate<A, I, F>(self, init: I, f: F) -> Stream<Windowed<K>, A>
    where
        A: Data + Serialize + DeserializeOwned,
        I: Fn() -> A + Send + Sync + 'static,
        F: Fn(A, &K, &V) -> A + Send + Sync + 'static,
    {
        let fold = move |last: Option<A>, k: &K, v: &V| f(last.unwrap_or_else(&init), k, v);
        self.fold("aggregate", Arc::new(fold))
    }

    fn fold<A>(self, label: &'static str, fold: Arc<Fold<K, V, A>>) -> Stream<Windowed<K>, A>
    where
        A: Data + Serialize + DeserializeOwned,
    {
        let label = match label {
            "count" => "window-count",
            "reduce" => "window-reduce",
            _ => "window-aggregate",
        };
        let input = self.stream.partitioned(label);
        let key_codec = key_codec_or_default(input.key_codec);
        let (windows, closing, time) = {
            let mut graph = input.pipeline.graph.borrow_mut();
            let node = graph.nodes.len();
            let name = graph.store_name(node, label, self.stream.store_name.as_deref());
            (
                name,
                graph.store_name(node, label, Some(&format!("{name}-closing"))),
                graph.store_name(node, label, Some(&format!("{name}-time"))),
            )
        };
        let stores = WindowStores {
            windows: Store::<Vec<u8>, A>::named(windows).codecs(Codec::Raw, Codec::Postcard),
            closing: Store::<Vec<u8>, ()>::named(closing).codecs(Codec::Raw, Codec::Postcard),
            time: Store::<String, i64>::named(time),
        };
        let spec = self.windows;
        let late = self.late;
        let make = make_op::<K, V, Windowed<K>, A, _>(move |next| {
            let fold = Arc::clone(&fold);
            Box::new(WindowAggregate::new(
                spec, key_codec, stores, fold, late, next,
            ))
        });
        // Windowed keys are encoded with postcard (in stores and topics
        // alike) and stay partitioned: the window adds to the key, it
        // does not move it.
        let out = input.child::<Windowed<K>, A>(make, Some(Codec::Postcard), true);
        let mut graph = out.pipeline.graph.borrow_mut();
        graph.declare(
            out.node,
            format!("store {windows}"),
            Arc::new(move |app: App| {
                let advance = Duration::from_millis(spec.advance_ms().unsigned_abs());
                app.store(stores.windows)
                    .window_keys::<K>(key_codec)
                    .windows_start_every(advance)
                    .store(stores.closing)
                    .store(stores.time)
            }),
        );
        if let Some(output) = late {
            graph.declare(
                out.node,
                format!("output {}", output.topic()),
                Arc::new(move |app: App| app.output(output)),
            );
        }
        drop(graph);
        out
    }
}

/// A stream grouped into sessions per key, awaiting its aggregation;
/// `E` is when the aggregation emits, and so what its stream carries
/// (see [`SessionEmit`]).
pub struct SessionStream<K, V, E = OnUpdate> {
    stream: Stream<K, V>,
    sessions: Sessions<E>,
    late: Option<Topic<K, V>>,
}

impl<K, V> Stream<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Groups the stream's records by key into sessions of activity.
    pub fn session<E: SessionEmit>(&self, sessions: Sessions<E>) -> SessionStream<K, V, E> {
        if let Err(error) = sessions.check() {
            self.pipeline.graph.borrow_mut().fail(error);
        }
        SessionStream {
            stream: self.clone(),
            sessions,
            late: None,
        }
    }
}

impl<K, V, E> SessionStream<K, V, E>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
    E: SessionEmit,
{
    /// Writes late records (that open a session already closed and join
    /// none) to `topic` besides counting them.
    pub fn late_to(mut self, topic: Topic<K, V>) -> Self {
        self.late = Some(topic);
        self
    }

    /// The number of records per key and session.
    pub fn count(self) -> Stream<Windowed<K>, E::Value<u64>> {
        let fold = Arc::new(|n: Option<u64>, _: &K, _: &V| n.unwrap_or(0) + 1);
        self.fold(fold, Arc::new(|_: &K, a: u64, b: u64| a + b))
    }

    /// Per key and session, `f(last, value)` of its records; two sessions
    /// a record joins are merged with `f` too.
    pub fn reduce<F>(self, f: F) -> Stream<Windowed<K>, E::Value<V>>
    where
        F: Fn(V, &V) -> V + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let merge_with = Arc::clone(&f);
        let fold = move |last: Option<V>, _: &K, v: &V| match last {
            Some(last) => f(last, v),
            None => v.clone(),
        };
        let merge = move |_: &K, a: V, b: V| merge_with(a, &b);
        self.fold(Arc::new(fold), Arc::new(merge))
    }

    /// Per key and session, `f(aggregate, key, value)` from `init()`; two
    /// sessions a record joins are merged with `merge(key, a, b)`.
    pub fn aggregate<A, I, F, M>(self, init: I, f: F, merge: M) -> Stream<Windowed<K>, E::Value<A>>
    where
        A: Data + Serialize + DeserializeOwned,
        I: Fn() -> A + Send + Sync + 'static,
        F: Fn(A, &K, &V) -> A + Send + Sync + 'static,
        M: Fn(&K, A, A) -> A + Send + Sync + 'static,
    {
        let fold = move |last: Option<A>, k: &K, v: &V| f(last.unwrap_or_else(&init), k, v);
        self.fold(Arc::new(fold), Arc::new(merge))
    }

    fn fold<A>(
        self,
        fold: Arc<Fold<K, V, A>>,
        merge: Arc<Merge<K, A>>,
    ) -> Stream<Windowed<K>, E::Value<A>>
    where
        A: Data + Serialize + DeserializeOwned,
    {
        let label = "session";
        let input = self.stream.partitioned(label);
        let key_codec = key_codec_or_default(input.key_codec);
        let (sessions, closing, time) = {
            let mut graph = input.pipeline.graph.borrow_mut();
            let node = graph.nodes.len();
            let name = graph.store_name(node, label, self.stream.store_name.as_deref());
            (
                name,
                graph.store_name(node, label, Some(&format!("{name}-closing"))),
                graph.store_name(node, label, Some(&format!("{name}-time"))),
            )
        };
        let stores = SessionStores {
            sessions: Store::named(sessions).codecs(Codec::Raw, Codec::Postcard),
            closing: Store::<Vec<u8>, ()>::named(closing).codecs(Codec::Raw, Codec::Postcard),
            time: Store::<String, i64>::named(time),
        };
        let spec = self.sessions;
        let late = self.late;
        let make = make_op::<K, V, Windowed<K>, E::Value<A>, _>(move |next| {
            let fns = SessionFns {
                fold: Arc::clone(&fold),
                merge: Arc::clone(&merge),
                late,
            };
            Box::new(SessionAggregate::new(spec, key_codec, stores, fns, next))
        });
        let out = input.child::<Windowed<K>, E::Value<A>>(make, Some(Codec::Postcard), true);
        let mut graph = out.pipeline.graph.borrow_mut();
        graph.declare(
            out.node,
            format!("store {sessions}"),
            Arc::new(move |app: App| {
                app.store(stores.sessions)
                    .window_keys::<K>(key_codec)
                    .store(stores.closing)
                    .store(stores.time)
            }),
        );
        if let Some(output) = late {
            graph.declare(
                out.node,
                format!("output {}", output.topic()),
                Arc::new(move |app: App| app.output(output)),
            );
        }
        drop(graph);
        out
    }
}
