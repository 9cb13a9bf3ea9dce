//! The graph a [`Pipeline`](crate::Pipeline) builds: nodes (sources,
//! operators, sinks), their edges, and the segments they fall into.
//!
//! A **segment** is what one runtime processor runs: the nodes connected
//! through ordinary edges, from the sources that read its input topics to
//! the sinks that write topics. A repartition (`through`, or a stateful
//! operator on re-keyed records) ends a segment with a sink and starts
//! another with a source of that topic, so each segment's inputs are
//! partitioned by the keys its state is kept under. Segments are kept as
//! a union-find over the nodes: `merge` and joins unite two.
//!
//! Types are erased here, but only while building: each node keeps a
//! `make` that, given the built operators of its children, builds its own
//! (each inside a `Box<dyn Any>` whose concrete type the node's creator
//! knew). A task builds its segment once, children first (a child is
//! always added after its parents, so has a larger id); per record,
//! nothing is downcast or boxed.
//!
//! A node read by several parents (after a `merge`) is built once and
//! shared between them behind a mutex, so its state (a window's
//! watermark) is one, whichever parent feeds it.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use strata_record::codec::Codec;
use strata_runtime::{App, Context, ProcessError, RawProcessor, RawRecord};

use crate::item::{Data, Item};
use crate::operator::{BoxOp, Next, Operator};

/// A built operator (a `BoxOp<K, V>`) or source (a `BoxSource`), its
/// types erased.
pub(crate) type AnyOp = Box<dyn Any + Send>;

/// Builds a node's operator from its children's.
pub(crate) type Make = Arc<dyn Fn(Vec<AnyOp>) -> AnyOp + Send + Sync>;

/// Declares what a node needs on the segment's processor (a store, an
/// output topic).
pub(crate) type Declare = Arc<dyn Fn(App) -> App + Send + Sync>;

/// A source as a task calls it: the record's key and value bytes as the
/// log holds them, borrowed from the fetched batch, decoded here with the
/// source topic's codecs.
pub(crate) trait Source: Send {
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError>;
    /// A record of the source's topic, its timestamp the context's.
    fn push(&mut self, record: RawRecord<'_>, ctx: &mut Context<'_>) -> Result<(), ProcessError>;

    /// The source as its concrete type, for a segment that reads only it
    /// (see [`Typed`]).
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

pub(crate) type BoxSource = Box<dyn Source>;

/// Registers a segment whose only source is this node as a processor of
/// the source's own types and codecs: the runtime then decodes each
/// record into them itself, and its checks see the segment's input
/// types (a typed input, a topic written with other types or codecs).
pub(crate) type Typed = Arc<dyn Fn(App, &str, Arc<Frozen>) -> App + Send + Sync>;

/// How a node's built operator is shared among several parents.
pub(crate) type ShareFn = fn(AnyOp) -> Arc<dyn Share>;

pub(crate) trait Share: Send + Sync {
    /// A handle on the shared operator, as a `BoxOp` of its input types.
    fn fork(&self) -> AnyOp;
}

pub(crate) struct Node {
    pub make: Make,
    pub share: ShareFn,
    pub children: Vec<usize>,
    pub parents: usize,
    /// The topic a source reads.
    pub source: Option<&'static str>,
    /// A stream source's typed registration.
    pub typed: Option<Typed>,
    /// What the node declares, each under a key (declared once per
    /// segment: two sinks to one topic declare it once).
    pub declares: Vec<(String, Declare)>,
    /// Union-find parent of the node's segment.
    segment: usize,
}

#[derive(Default)]
pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    /// Names given with `named`, by segment root at the time.
    names: BTreeMap<usize, String>,
    /// Per re-keyed node and key codec, the source reading its internal
    /// repartition topic (every stateful operator on it reads that one).
    pub repartitions: BTreeMap<(usize, &'static str), usize>,
    /// Store names taken so far (each store belongs to one node).
    pub stores: Vec<String>,
    /// The first misuse, reported when the pipeline becomes an app.
    pub error: Option<String>,
}

impl Graph {
    /// Adds a node under `parents` (none for a source), in their segment.
    pub fn add(&mut self, parents: &[usize], make: Make, share: ShareFn) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node {
            make,
            share,
            children: Vec::new(),
            parents: parents.len(),
            source: None,
            typed: None,
            declares: Vec::new(),
            segment: id,
        });
        for &parent in parents {
            self.nodes[parent].children.push(id);
            self.unite(parent, id);
        }
        id
    }

    pub fn declare(&mut self, node: usize, key: String, declare: Declare) {
        self.nodes[node].declares.push((key, declare));
    }

    /// Builds `node` with `make` instead (a node is built only when the
    /// pipeline becomes an app), and declares `topic`, which the new
    /// builder writes to, as an output of its processor.
    pub fn rebuild_writing_to<K: 'static, V: 'static>(
        &mut self,
        node: usize,
        make: Make,
        topic: strata_runtime::Topic<K, V>,
    ) {
        self.nodes[node].make = make;
        let declare = Arc::new(move |app: App| app.output(topic));
        self.declare(node, format!("output {}", topic.name()), declare);
    }

    /// Names the segment `node` is in (the processor's name, which its
    /// state directory is named after: name it to keep it across changes).
    pub fn name(&mut self, node: usize, name: &str) {
        let root = self.root(node);
        if let Some(known) = self.names.get(&root)
            && known != name
        {
            self.fail(format!("one processor named both {known:?} and {name:?}"));
        }
        self.names.insert(root, name.to_string());
    }

    /// A store name for `node`: `wanted`, or else the node's label and
    /// number; refuses a name taken twice.
    pub fn store_name(&mut self, node: usize, label: &str, wanted: Option<&str>) -> &'static str {
        let name = match wanted {
            Some(name) => name.to_string(),
            None => format!("{label}-{node}"),
        };
        if self.stores.contains(&name) {
            self.fail(format!("two stores named {name:?}"));
        }
        self.stores.push(name.clone());
        strata_runtime::Store::<(), ()>::named(&name).name()
    }

    pub fn fail(&mut self, error: String) {
        self.error.get_or_insert(error);
    }

    fn root(&mut self, mut node: usize) -> usize {
        while self.nodes[node].segment != node {
            let up = self.nodes[node].segment;
            self.nodes[node].segment = self.nodes[up].segment;
            node = up;
        }
        node
    }

    /// Puts `a` and `b` in one segment, keeping a name given to either.
    pub fn unite(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        if ra == rb {
            return;
        }
        let (keep, gone) = (ra.min(rb), ra.max(rb));
        self.nodes[gone].segment = keep;
        if let Some(name) = self.names.remove(&gone) {
            match self.names.get(&keep) {
                Some(known) if *known != name => self.fail(format!(
                    "one processor named both {known:?} and {name:?} (their streams were merged or joined)"
                )),
                _ => {
                    self.names.insert(keep, name);
                }
            }
        }
    }

    /// The segments, in the order of their first node, each with its
    /// name (given, or `stage-<n>`) and its nodes in id order.
    pub fn segments(&mut self) -> Vec<(String, Vec<usize>)> {
        let mut by_root: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for id in 0..self.nodes.len() {
            let root = self.root(id);
            by_root.entry(root).or_default().push(id);
        }
        by_root
            .into_iter()
            .enumerate()
            .map(|(n, (root, nodes))| {
                let name = self
                    .names
                    .get(&root)
                    .cloned()
                    .unwrap_or_else(|| format!("stage-{n}"));
                (name, nodes)
            })
            .collect()
    }
}

/// The `make` of an operator node: `op` given the node's children.
pub(crate) fn make_op<Ki, Vi, Ko, Vo, F>(op: F) -> Make
where
    Ki: Data,
    Vi: Data,
    Ko: Data,
    Vo: Data,
    F: Fn(Next<Ko, Vo>) -> BoxOp<Ki, Vi> + Send + Sync + 'static,
{
    Arc::new(move |children: Vec<AnyOp>| {
        let steps = children.into_iter().map(downcast::<Ko, Vo>).collect();
        Box::new(op(Next::new(steps))) as AnyOp
    })
}

/// The `make` of a source node.
pub(crate) fn make_source<Ko, Vo, F>(source: F) -> Make
where
    Ko: Data,
    Vo: Data,
    F: Fn(Next<Ko, Vo>) -> BoxSource + Send + Sync + 'static,
{
    Arc::new(move |children: Vec<AnyOp>| {
        let steps = children.into_iter().map(downcast::<Ko, Vo>).collect();
        Box::new(source(Next::new(steps))) as AnyOp
    })
}

fn downcast<K: Data, V: Data>(op: AnyOp) -> BoxOp<K, V> {
    *op.downcast::<BoxOp<K, V>>()
        .expect("a child takes the items its parent emits (the builder's types)")
}

/// The [`ShareFn`] of a node taking `K` → `V` items.
pub(crate) fn share<K: Data, V: Data>(op: AnyOp) -> Arc<dyn Share> {
    Arc::new(Shared(Arc::new(Mutex::new(downcast::<K, V>(op)))))
}

struct Shared<K, V>(Arc<Mutex<BoxOp<K, V>>>);

struct Fork<K, V>(Arc<Mutex<BoxOp<K, V>>>);

impl<K: Data, V: Data> Share for Shared<K, V> {
    fn fork(&self) -> AnyOp {
        let fork: BoxOp<K, V> = Box::new(Fork(Arc::clone(&self.0)));
        Box::new(fork)
    }
}

impl<K: Data, V: Data> Operator<K, V> for Fork<K, V> {
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        // Every parent forwards init; a shared operator's init is
        // idempotent (it reads what its stores hold).
        lock(&self.0).init(ctx)
    }

    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        lock(&self.0).push(item, ctx)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a task runs of one segment: its sources, by the topic each reads.
pub(crate) struct SegmentProcessor {
    sources: Vec<(&'static str, BoxSource)>,
}

impl SegmentProcessor {
    /// The segment's only source.
    pub fn into_only_source(mut self) -> BoxSource {
        assert_eq!(self.sources.len(), 1, "a typed segment has one source");
        self.sources.pop().expect("one source").1
    }
}

/// The nodes of one segment, frozen when the pipeline became an app; the
/// factory every task of the segment's processor calls.
pub(crate) struct Frozen {
    pub nodes: Vec<FrozenNode>,
}

pub(crate) struct FrozenNode {
    pub id: usize,
    pub make: Make,
    pub share: ShareFn,
    pub children: Vec<usize>,
    pub parents: usize,
    pub source: Option<&'static str>,
}

impl Frozen {
    /// Builds the segment for one task, children first.
    pub fn build(&self) -> SegmentProcessor {
        enum Built {
            Single(AnyOp),
            Shared(Arc<dyn Share>),
        }
        let mut built: BTreeMap<usize, Built> = BTreeMap::new();
        let mut sources = Vec::new();
        for node in self.nodes.iter().rev() {
            let children = node
                .children
                .iter()
                .map(|child| match built.remove(child) {
                    Some(Built::Single(op)) => op,
                    Some(Built::Shared(shared)) => {
                        let fork = shared.fork();
                        built.insert(*child, Built::Shared(shared));
                        fork
                    }
                    None => unreachable!("node {child} is built before its parent"),
                })
                .collect();
            let op = (node.make)(children);
            if let Some(topic) = node.source {
                let source = *op
                    .downcast::<BoxSource>()
                    .expect("a source node builds a source");
                sources.push((topic, source));
            } else if node.parents > 1 {
                built.insert(node.id, Built::Shared((node.share)(op)));
            } else {
                built.insert(node.id, Built::Single(op));
            }
        }
        sources.reverse();
        SegmentProcessor { sources }
    }
}

/// The segment's sources read the record's bytes where the task fetched
/// them: each decodes the key and value with its topic's codecs, with no
/// copy in between (see `strata_runtime::RawProcessor`).
impl RawProcessor for SegmentProcessor {
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.sources.iter_mut().try_for_each(|(_, s)| s.init(ctx))
    }

    #[inline]
    fn process(
        &mut self,
        record: RawRecord<'_>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        for (topic, source) in &mut self.sources {
            if *topic == ctx.topic() {
                source.push(record, ctx)?;
            }
        }
        Ok(())
    }
}

/// The key codec a stream's keys are known to be encoded with, if any
/// (after a re-key, none: internal topics and stores then use postcard).
/// A schema-registry codec writes a topic's records under its subject and
/// stores have none: its keys are kept in postcard too.
pub(crate) fn key_codec_or_default(known: Option<Codec>) -> Codec {
    known
        .filter(|codec| !matches!(codec, Codec::Registry(_)))
        .unwrap_or(Codec::Postcard)
}
