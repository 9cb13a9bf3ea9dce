//! [`Stream`]: a stream of `K` → `V` items in a [`Pipeline`], and the
//! operators that make new streams of it. Each call adds a node to the
//! pipeline's graph; nothing runs until the app does.
//!
//! A stream knows two things of its keys: the codec they are encoded with
//! (the source topic's, until an operator makes new keys), and whether
//! its records are still partitioned by them. A stateful operator on a
//! stream that is not repartitions it first through an internal topic,
//! `<app>-<operator>-<node>-repartition`, so that every record of a key
//! reaches the one task that keeps the key's state.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_record::codec::Codec;

use strata_runtime::App;

use crate::graph::{Frozen, Typed, make_op, make_source, share};
use crate::item::Data;
use crate::operator::BoxOp;
use crate::pipeline::Pipeline;
use crate::source::{FromTopic, TypedSegment};
use crate::stateless::{Filter, FlatMap, Inspect, Map, To};
use strata_runtime::Topic;

impl Pipeline {
    /// A stream of the records of `topic`, decoded with its codecs; its
    /// records are taken to be partitioned by their keys (as a producer
    /// partitioning by key leaves them).
    pub fn from<K, V>(&self, topic: Topic<K, V>) -> Stream<K, V>
    where
        K: Data + DeserializeOwned,
        V: Data + DeserializeOwned,
    {
        let codecs = (topic.key_codec(), topic.value_codec());
        let make = make_source::<K, V, _>(move |next| Box::new(FromTopic::new(codecs, next)));
        let typed: Typed = Arc::new(move |app: App, name: &str, frozen: Arc<Frozen>| {
            app.processor::<K, V, _>(name, move || TypedSegment::<K, V>::new(frozen.build()))
                .input_codecs(codecs.0, codecs.1)
        });
        let node = {
            let mut graph = self.graph.borrow_mut();
            let node = graph.add(&[], make, share::<K, V>);
            graph.nodes[node].source = Some(topic.name());
            graph.nodes[node].typed = Some(typed);
            node
        };
        Stream::at(self.clone(), node, Some(topic.key_codec()), true)
    }
}

pub struct Stream<K, V> {
    pub(crate) pipeline: Pipeline,
    pub(crate) node: usize,
    /// The codec the keys are known to be encoded with.
    pub(crate) key_codec: Option<Codec>,
    /// Whether records are partitioned by their current keys.
    pub(crate) partitioned: bool,
    /// The name the next stateful operator gives its store.
    pub(crate) store_name: Option<String>,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for Stream<K, V> {
    fn clone(&self) -> Self {
        Self {
            pipeline: self.pipeline.clone(),
            node: self.node,
            key_codec: self.key_codec,
            partitioned: self.partitioned,
            store_name: self.store_name.clone(),
            types: PhantomData,
        }
    }
}

impl<K: Data, V: Data> Stream<K, V> {
    pub(crate) fn at(
        pipeline: Pipeline,
        node: usize,
        key_codec: Option<Codec>,
        partitioned: bool,
    ) -> Self {
        Self {
            pipeline,
            node,
            key_codec,
            partitioned,
            store_name: None,
            types: PhantomData,
        }
    }

    /// A new stream of `K2` → `V2` items below this one, made by `make`.
    pub(crate) fn child<K2: Data, V2: Data>(
        &self,
        make: crate::graph::Make,
        key_codec: Option<Codec>,
        partitioned: bool,
    ) -> Stream<K2, V2> {
        let node = {
            let mut graph = self.pipeline.graph.borrow_mut();
            // A node's share function takes its input: this stream's items.
            graph.add(&[self.node], make, share::<K, V>)
        };
        Stream::at(self.pipeline.clone(), node, key_codec, partitioned)
    }

    /// The records for which `keep` is true.
    pub fn filter<F>(&self, keep: F) -> Stream<K, V>
    where
        F: Fn(&K, &V) -> bool + Send + Sync + 'static,
    {
        let keep = Arc::new(keep);
        let make = make_op::<K, V, K, V, _>(move |next| {
            let keep = Arc::clone(&keep);
            Box::new(Filter { keep, next })
        });
        self.child(make, self.key_codec, self.partitioned)
    }

    /// A new key and value for every record (a new key, so the stream is
    /// repartitioned before a stateful operator).
    pub fn map<K2: Data, V2: Data, F>(&self, f: F) -> Stream<K2, V2>
    where
        F: Fn(K, V) -> (K2, V2) + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let make = make_op::<K, V, K2, V2, _>(move |next| {
            let f = Arc::clone(&f);
            Box::new(Map { f, next })
        });
        self.child(make, None, false)
    }

    /// A new value for every record, the key kept (no repartition).
    pub fn map_values<V2: Data, F>(&self, f: F) -> Stream<K, V2>
    where
        F: Fn(V) -> V2 + Send + Sync + 'static,
    {
        let f = Arc::new(move |k: K, v: V| (k, f(v)));
        let make = make_op::<K, V, K, V2, _>(move |next| {
            let f = Arc::clone(&f);
            Box::new(Map { f, next })
        });
        self.child(make, self.key_codec, self.partitioned)
    }

    /// Zero or more records for every record.
    pub fn flat_map<K2: Data, V2: Data, I, F>(&self, f: F) -> Stream<K2, V2>
    where
        F: Fn(K, V) -> I + Send + Sync + 'static,
        I: IntoIterator<Item = (K2, V2)>,
    {
        let f = Arc::new(f);
        let make = make_op::<K, V, K2, V2, _>(move |next| {
            let f = Arc::clone(&f);
            Box::new(FlatMap { f, next })
        });
        self.child(make, None, false)
    }

    /// Re-keys every record by `key` (Kafka Streams' `selectKey`); the
    /// stream is repartitioned before a stateful operator.
    pub fn key_by<K2: Data, F>(&self, key: F) -> Stream<K2, V>
    where
        F: Fn(&K, &V) -> K2 + Send + Sync + 'static,
    {
        let f = Arc::new(move |k: K, v: V| (key(&k, &v), v));
        let make = make_op::<K, V, K2, V, _>(move |next| {
            let f = Arc::clone(&f);
            Box::new(Map { f, next })
        });
        self.child(make, None, false)
    }

    /// [`Stream::key_by`] under Kafka Streams' name.
    pub fn select_key<K2: Data, F>(&self, key: F) -> Stream<K2, V>
    where
        F: Fn(&K, &V) -> K2 + Send + Sync + 'static,
    {
        self.key_by(key)
    }

    /// Calls `f` on every record and passes it on unchanged. `f` runs
    /// again for records re-read after a crash: use it to look, not to
    /// write anywhere.
    pub fn inspect<F>(&self, f: F) -> Stream<K, V>
    where
        F: Fn(&K, &V) + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let make = make_op::<K, V, K, V, _>(move |next| {
            let f = Arc::clone(&f);
            Box::new(Inspect { f, next })
        });
        self.child(make, self.key_codec, self.partitioned)
    }

    /// Two streams: the records for which `matches` is true, and the rest.
    pub fn branch<F>(&self, matches: F) -> (Stream<K, V>, Stream<K, V>)
    where
        F: Fn(&K, &V) -> bool + Send + Sync + 'static,
    {
        let matches = Arc::new(matches);
        let other = Arc::clone(&matches);
        (
            self.filter(move |k, v| matches(k, v)),
            self.filter(move |k, v| !other(k, v)),
        )
    }

    /// The records of both streams, in the order the task reads them: of
    /// their topics' records, in timestamp order across the topics (see
    /// `App::max_task_idle` for live quiet inputs). Both become one
    /// processor: their input topics must be co-partitioned (the runtime
    /// checks, naming the topics).
    pub fn merge(&self, other: &Stream<K, V>) -> Stream<K, V> {
        let make = make_op::<K, V, K, V, _>(|next| Box::new(next) as BoxOp<K, V>);
        let node = {
            let mut graph = self.pipeline.graph.borrow_mut();
            graph.add(&[self.node, other.node], make, share::<K, V>)
        };
        let key_codec = if self.key_codec == other.key_codec {
            self.key_codec
        } else {
            None
        };
        let partitioned = self.partitioned && other.partitioned && key_codec.is_some();
        Stream::at(self.pipeline.clone(), node, key_codec, partitioned)
    }

    /// Names the processor that runs this part of the pipeline (by
    /// default `stage-<n>`): the name of its state directory.
    pub fn named(&self, name: &str) -> Self {
        self.pipeline.graph.borrow_mut().name(self.node, name);
        self.clone()
    }

    /// Names the store of the next stateful operator (by default the
    /// operator and its node number, as `count-3`).
    pub fn stored_as(&self, store: &str) -> Self {
        let mut named = self.clone();
        named.store_name = Some(store.to_string());
        named
    }
}

impl<K: Data, V: Data> Stream<K, V> {
    /// Adds a sink built by `make` under this stream, writing to `topic`
    /// (declared as an output of the stream's processor).
    fn sink<K2: 'static, V2: 'static>(&self, topic: Topic<K2, V2>, make: crate::graph::Make) {
        let mut graph = self.pipeline.graph.borrow_mut();
        let node = graph.add(&[self.node], make, share::<K, V>);
        let declare = Arc::new(move |app: strata_runtime::App| app.output(topic));
        graph.declare(node, format!("output {}", topic.name()), declare);
    }
}

impl<K, V> Stream<K, Option<V>>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Writes a stream of a table's changes to `topic` as Kafka keeps a
    /// table: `Some(v)` as the key's value, `None` (a deleted row, a
    /// session window retracted) as a tombstone, a record with no value,
    /// which deletes the key from a compacted topic and from a table read
    /// from it (`Pipeline::table`). Partitioned by key, like `to`.
    pub fn to_upserts(&self, topic: Topic<K, V>) {
        let make = make_op::<K, Option<V>, K, Option<V>, _>(
            move |_: crate::operator::Next<K, Option<V>>| {
                Box::new(crate::stateless::ToUpserts { output: topic })
            },
        );
        self.sink(topic, make);
    }
}

impl<K, V> Stream<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Writes every record to `topic` (created if missing, with as many
    /// partitions as the processor's inputs), partitioned by key.
    pub fn to(&self, topic: Topic<K, V>) {
        let make = make_op::<K, V, K, V, _>(move |_: crate::operator::Next<K, V>| {
            Box::new(To { output: topic })
        });
        self.sink(topic, make);
    }

    /// Writes every record to `topic` and reads them back from it, in a
    /// processor of their own: partitioned by their keys, with the
    /// topic's codecs.
    pub fn through(&self, topic: Topic<K, V>) -> Stream<K, V> {
        self.to(topic);
        let mut through = self.pipeline.from(topic);
        through.store_name = self.store_name.clone();
        through
    }

    /// This stream as it must be for a stateful operator: itself when
    /// partitioned by its keys, else repartitioned through an internal
    /// topic named after `label`.
    pub(crate) fn partitioned(&self, label: &str) -> Stream<K, V> {
        self.partitioned_as(label, None)
    }

    /// The same, with keys also encoded (and so partitioned) with `codec`
    /// when one is given: a join looks its keys up in a table keyed by
    /// that codec's bytes.
    pub(crate) fn partitioned_as(&self, label: &str, codec: Option<Codec>) -> Stream<K, V> {
        let key_codec = codec.unwrap_or(crate::graph::key_codec_or_default(self.key_codec));
        if self.partitioned && self.key_codec == Some(key_codec) {
            return self.clone();
        }
        let cached = (self.node, key_codec.name());
        let known = self
            .pipeline
            .graph
            .borrow()
            .repartitions
            .get(&cached)
            .copied();
        let mut through = match known {
            // Another stateful operator already repartitioned this stream:
            // read the same internal topic.
            Some(source) => Stream::at(self.pipeline.clone(), source, Some(key_codec), true),
            None => {
                let name = match codec {
                    None => format!("{}-{label}-{}-repartition", self.pipeline.name, self.node),
                    Some(c) => format!(
                        "{}-{label}-{}-{}-repartition",
                        self.pipeline.name,
                        self.node,
                        c.name()
                    ),
                };
                let topic = Topic::<K, V>::named(&name).codecs(key_codec, Codec::Postcard);
                let through = self.through(topic);
                let mut graph = self.pipeline.graph.borrow_mut();
                graph.repartitions.insert(cached, through.node);
                drop(graph);
                through
            }
        };
        through.store_name = self.store_name.clone();
        through
    }
}
