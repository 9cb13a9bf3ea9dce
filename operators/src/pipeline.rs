//! [`Pipeline`]: the fluent builder. Streams are read `from` topics
//! (`Pipeline::from` is written beside [`crate::Stream`], which it makes),
//! transformed, aggregated and written `to` topics; [`Pipeline::app`]
//! compiles the whole into an ordinary [`App`] of processors, one per
//! segment (see `graph`), which runs, rebuilds, replays, diffs and
//! promotes like a hand-written one.
//!
//! ```no_run
//! use strata_operators::{Pipeline, Topic};
//!
//! const LINES: Topic<Vec<u8>, String> = Topic::new("lines");
//! const WORDS: Topic<String, ()> = Topic::new("words");
//! const COUNTS: Topic<String, String> = Topic::new("word-counts");
//!
//! let pipeline = Pipeline::new("wordcount");
//! pipeline
//!     .from(LINES)
//!     .flat_map(|_, line| line.split_whitespace().map(|w| (w.to_string(), ())).collect::<Vec<_>>())
//!     .through(WORDS)
//!     .count()
//!     .map_values(|n| n.to_string())
//!     .to(COUNTS);
//! let app = pipeline.app().expect("a well-formed pipeline");
//! ```
//!
//! Names: each segment's processor is named `stage-<n>` in the order the
//! pipeline reads its first topic, and each store after its operator and
//! node number (`count-3`); both name directories of the app's state, so
//! an app that will change names them (`named`, `stored_as`) to keep its
//! state across the change.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use strata_record::codec::Codec;
use strata_runtime::App;

use crate::graph::{Frozen, FrozenNode, Graph};

/// A pipeline under construction: the app's name and the graph its
/// streams add to. Cheap to clone (the clones share the graph).
#[derive(Clone)]
pub struct Pipeline {
    pub(crate) name: Rc<str>,
    pub(crate) graph: Rc<RefCell<Graph>>,
}

/// A pipeline that cannot become an app, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineError(pub String);

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pipeline: {}", self.0)
    }
}

impl std::error::Error for PipelineError {}

impl Pipeline {
    /// A pipeline of the app `name` (the name of its state, its offsets
    /// and its internal topics).
    pub fn new(name: &str) -> Self {
        Self {
            name: Rc::from(name),
            graph: Rc::default(),
        }
    }

    /// The app: one processor per segment, each with its inputs, stores
    /// and outputs declared.
    pub fn app(&self) -> Result<App, PipelineError> {
        let mut graph = self.graph.borrow_mut();
        if let Some(error) = &graph.error {
            return Err(PipelineError(error.clone()));
        }
        if graph.nodes.is_empty() {
            return Err(PipelineError(format!(
                "app {:?} reads no topic (start a stream with Pipeline::from)",
                self.name
            )));
        }
        let mut app = App::new(&self.name);
        for (name, ids) in graph.segments() {
            let nodes = ids
                .iter()
                .map(|&id| {
                    let node = &graph.nodes[id];
                    FrozenNode {
                        id,
                        make: Arc::clone(&node.make),
                        share: node.share,
                        children: node.children.clone(),
                        parents: node.parents,
                        source: node.source,
                    }
                })
                .collect();
            let frozen = Arc::new(Frozen { nodes });
            let sources: Vec<usize> = (ids.iter().copied())
                .filter(|&id| graph.nodes[id].source.is_some())
                .collect();
            app = match &sources[..] {
                [only] if graph.nodes[*only].typed.is_some() => {
                    let typed = graph.nodes[*only].typed.as_ref().expect("checked");
                    typed(app, &name, frozen)
                }
                _ => app
                    .processor::<Vec<u8>, Vec<u8>, _>(&name, move || frozen.build())
                    .input_codecs(Codec::Raw, Codec::Raw),
            };
            let mut inputs = BTreeSet::new();
            for &id in &ids {
                if let Some(topic) = graph.nodes[id].source
                    && inputs.insert(topic)
                {
                    app = app.input(topic);
                }
            }
            let mut declared = BTreeSet::new();
            for &id in &ids {
                for (key, declare) in &graph.nodes[id].declares {
                    if declared.insert(key.clone()) {
                        app = declare(app);
                    }
                }
            }
        }
        Ok(app)
    }
}
