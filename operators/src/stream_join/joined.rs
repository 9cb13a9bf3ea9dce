//! [`WindowJoined`]: what a stream–stream join returns, the stream of its
//! results (it dereferences to a [`Stream`], so `.to(topic)`, `.map(..)`
//! and the rest apply to it), and where each side's late records go.
//!
//! A late topic may be given after the join's results are already used:
//! the join's node is only built when the pipeline becomes an app, so
//! giving one replaces the node's builder with one that writes there.

use std::ops::Deref;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::item::Data;
use crate::stream::Stream;
use strata_runtime::Topic;

use super::make_join;
use super::operator::{JoinSpec, JoinStores};

/// A join as built: what its operator is made of.
type Built<K, L, R, O> = (JoinSpec<K, L, R, O>, JoinStores<L, R>);

/// The results of a stream–stream join, as a stream of `K` → `O`, with
/// the join's sides `L` (this stream's values) and `R` (the other's).
pub struct WindowJoined<K, L: 'static, R: 'static, O> {
    stream: Stream<K, O>,
    /// The join as built, to build again with a late topic; none for a
    /// join refused (the pipeline fails to become an app).
    join: Option<Built<K, L, R, O>>,
}

impl<K, L, R, O> WindowJoined<K, L, R, O>
where
    K: Data + Serialize + DeserializeOwned,
    L: Data + Serialize + DeserializeOwned,
    R: Data + Serialize + DeserializeOwned,
    O: Data,
{
    pub(super) fn new(
        stream: Stream<K, O>,
        spec: JoinSpec<K, L, R, O>,
        stores: JoinStores<L, R>,
    ) -> Self {
        Self {
            stream,
            join: Some((spec, stores)),
        }
    }

    pub(super) fn refused(stream: Stream<K, O>) -> Self {
        Self { stream, join: None }
    }

    /// Writes the left side's late records (this stream's, arrived after
    /// `t + after + grace`) to `topic` besides counting them.
    pub fn late_left_to(mut self, topic: Topic<K, L>) -> Self {
        if let Some((spec, _)) = &mut self.join {
            spec.late.left = Some(topic);
            self.rebuild(topic);
        }
        self
    }

    /// Writes the right side's late records (the other stream's, arrived
    /// after `t + before + grace`) to `topic` besides counting them.
    pub fn late_right_to(mut self, topic: Topic<K, R>) -> Self {
        if let Some((spec, _)) = &mut self.join {
            spec.late.right = Some(topic);
            self.rebuild(topic);
        }
        self
    }

    /// The stream of the join's results.
    pub fn stream(&self) -> Stream<K, O> {
        self.stream.clone()
    }

    /// Builds the join's node anew from its spec, which now writes to the
    /// late topic `topic`.
    fn rebuild<V: 'static>(&self, topic: Topic<K, V>) {
        let Some((spec, stores)) = &self.join else {
            return;
        };
        let mut graph = self.stream.pipeline.graph.borrow_mut();
        let make = make_join(spec.clone(), *stores);
        graph.rebuild_writing_to(self.stream.node, make, topic);
    }
}

impl<K, L, R, O> Deref for WindowJoined<K, L, R, O> {
    type Target = Stream<K, O>;

    fn deref(&self) -> &Stream<K, O> {
        &self.stream
    }
}

impl<K, L, R, O> From<WindowJoined<K, L, R, O>> for Stream<K, O> {
    fn from(joined: WindowJoined<K, L, R, O>) -> Self {
        joined.stream
    }
}
