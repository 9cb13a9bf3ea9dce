//! [`ProcessorSpec`]: what the builder keeps of one processor (its
//! inputs, stores, outputs, the factory of its tasks' processors, and
//! what the checks at build time need), and what tasks and rebuilds read
//! of it.

use strata_record::codec::Codec;

use super::erased::Factory;
use super::input::{RecordTypes, TypedInput};
use super::on_error::OnError;
use super::spec::{OutputSpec, StoreSpec};

#[derive(Clone)]
pub(crate) struct ProcessorSpec {
    pub name: String,
    pub inputs: Vec<String>,
    pub key_codec: Codec,
    pub value_codec: Codec,
    pub stores: Vec<StoreSpec>,
    pub outputs: Vec<OutputSpec>,
    pub factory: Factory,
    /// Whether it declared timers: its stores hold its timer store.
    pub timers: bool,
    /// A function or closure, which handles timers only with `on_timer`.
    pub function: bool,
    /// Whether the builder gave it a timer callback (`.on_timer(f)`).
    pub on_timer: bool,
    /// The key and value types of the records the processor takes.
    pub records: RecordTypes,
    /// The inputs read through typed handles, with what their handles say.
    pub typed_inputs: Vec<(String, TypedInput)>,
    /// What its tasks do with a record it fails on.
    pub on_error: OnError,
}

impl ProcessorSpec {
    /// Its stores' names, in its order (a task's state opens them so).
    pub fn store_names(&self) -> Vec<&str> {
        self.stores.iter().map(|s| s.name.as_str()).collect()
    }
}
