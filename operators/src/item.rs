//! [`Item`]: one record as it flows between the operators of a pipeline,
//! and [`Data`], what a key or value of a pipeline must be.

/// A record inside a pipeline: its key, its value and its timestamp (ms
/// since the Unix epoch; the input record's unless an operator sets
/// another, as a window's close does).
#[derive(Debug, Clone, PartialEq)]
pub struct Item<K, V> {
    pub key: K,
    pub value: V,
    pub timestamp: i64,
}

/// A key or value that can flow through a pipeline: owned (`'static`),
/// sendable to the task's thread, and cloneable (a stream read by two
/// operators hands each its own copy).
pub trait Data: Clone + Send + Sync + 'static {}

impl<T: Clone + Send + Sync + 'static> Data for T {}
