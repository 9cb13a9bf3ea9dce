//! The shape of an app: its processors, each with input topics, stores and
//! output topics, and the [`App`] builder that declares them.
//!
//! Declarations apply to the processor added last:
//!
//! ```no_run
//! # use strata::runtime::{App, Processor};
//! # fn build<S, C>(split: S, count: C) -> App
//! # where S: Processor + Clone + Sync, C: Processor + Clone + Sync {
//! App::new("wordcount")
//!     .processor("split", split).input("lines").output("words")
//!     .processor("count", count).input("words").store::<String, u64>("counts").output("word-counts")
//! # }
//! ```

use std::any::TypeId;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::codec::Codec;

use super::context::Context;
use super::processor::{ProcessError, Processor, Record};

/// Renders an encoded store key or value for `dump-state`.
pub(crate) type Render = Arc<dyn Fn(&[u8]) -> String + Send + Sync>;

#[derive(Clone)]
pub(crate) struct StoreSpec {
    pub name: String,
    pub key_codec: Codec,
    pub value_codec: Codec,
    pub key_type: TypeId,
    pub value_type: TypeId,
    pub key_type_name: &'static str,
    pub value_type_name: &'static str,
    pub render_key: Render,
    pub render_value: Render,
}

#[derive(Debug, Clone)]
pub(crate) struct OutputSpec {
    pub topic: String,
    /// Partitions to create the topic with; by default the input's.
    pub partitions: Option<i32>,
    pub key_codec: Codec,
    pub value_codec: Codec,
}

/// A record's key and value as read from the log, before decoding; the
/// rest of the record is the context's position.
pub(crate) struct RawRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

type Step<'a> = Pin<Box<dyn Future<Output = Result<(), ProcessError>> + Send + 'a>>;

/// A processor with its record types erased: decodes raw records with the
/// input codecs and calls the typed processor.
pub(crate) trait ErasedProcessor: Send {
    fn init<'a>(&'a mut self, ctx: &'a mut Context<'_>) -> Step<'a>;
    fn process<'a>(&'a mut self, raw: RawRecord<'_>, ctx: &'a mut Context<'_>) -> Step<'a>;
    fn close<'a>(&'a mut self, ctx: &'a mut Context<'_>) -> Step<'a>;
}

struct Typed<P> {
    inner: P,
    key_codec: Codec,
    value_codec: Codec,
}

impl<P: Processor> ErasedProcessor for Typed<P> {
    fn init<'a>(&'a mut self, ctx: &'a mut Context<'_>) -> Step<'a> {
        self.inner.init(ctx)
    }

    fn process<'a>(&'a mut self, raw: RawRecord<'_>, ctx: &'a mut Context<'_>) -> Step<'a> {
        let position = ctx.position;
        let decoded = (|| {
            Ok::<_, ProcessError>(Record {
                key: self.key_codec.decode(raw.key.unwrap_or_default())?,
                value: self.value_codec.decode(raw.value.unwrap_or_default())?,
                key_is_null: raw.key.is_none(),
                value_is_null: raw.value.is_none(),
                topic: Arc::clone(&position.topic),
                partition: position.partition,
                offset: position.offset,
                timestamp: position.timestamp,
                headers: position.headers.clone(),
            })
        })();
        match decoded {
            Ok(record) => self.inner.process(record, ctx),
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }

    fn close<'a>(&'a mut self, ctx: &'a mut Context<'_>) -> Step<'a> {
        self.inner.close(ctx)
    }
}

/// Makes a task's processor, decoding with the given key and value codecs.
pub(crate) type Factory = Arc<dyn Fn(Codec, Codec) -> Box<dyn ErasedProcessor> + Send + Sync>;

#[derive(Clone)]
pub(crate) struct ProcessorSpec {
    pub name: String,
    pub inputs: Vec<String>,
    pub key_codec: Codec,
    pub value_codec: Codec,
    pub stores: Vec<StoreSpec>,
    pub outputs: Vec<OutputSpec>,
    pub factory: Factory,
}

/// When a task commits its run: whichever limit is reached first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitInterval {
    pub records: u64,
    pub bytes: u64,
    pub interval: Duration,
}

impl Default for CommitInterval {
    fn default() -> Self {
        Self {
            records: 100_000,
            bytes: 16 << 20,
            interval: Duration::from_millis(100),
        }
    }
}

/// When a task takes a checkpoint of its state on its own (after a
/// commit): every `records` records or `interval`, whichever comes first;
/// neither set, only when asked (`checkpoint`). The newest `keep` stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointPolicy {
    pub records: Option<u64>,
    pub interval: Option<Duration>,
    pub keep: usize,
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        Self {
            records: None,
            interval: None,
            keep: 3,
        }
    }
}

/// Tunables of every task of an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskConfig {
    pub commit: CommitInterval,
    /// Bytes asked for per fetch.
    pub fetch_bytes: u32,
    /// fsync the state's WAL at every commit, and the embedded log's derived
    /// partitions before their outbox entries are dropped.
    pub sync: bool,
    pub checkpoints: CheckpointPolicy,
}

impl Default for TaskConfig {
    fn default() -> Self {
        Self {
            commit: CommitInterval::default(),
            fetch_bytes: 4 << 20,
            sync: true,
            checkpoints: CheckpointPolicy::default(),
        }
    }
}

/// An app: a pipeline of processors over topics of one log.
#[derive(Clone)]
pub struct App {
    pub(crate) name: String,
    pub(crate) processors: Vec<ProcessorSpec>,
    pub(crate) config: TaskConfig,
    /// The first misuse of the builder, reported when the app runs.
    pub(crate) error: Option<String>,
    /// Appended to the name of every derived topic in the log: a replayed
    /// version's topics (`word-counts.v2`) are apart from the live ones.
    pub(crate) topic_suffix: String,
}

impl App {
    pub fn new(name: &str) -> Self {
        let mut app = Self {
            name: name.to_string(),
            processors: Vec::new(),
            config: TaskConfig::default(),
            error: None,
            topic_suffix: String::new(),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            app.fail(format!(
                "app name {name:?}: use letters, digits, '.', '_' and '-'"
            ));
        }
        app
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds a processor; `processor` is cloned for every input partition.
    /// Its input keys and values are decoded with the raw codec (strings and
    /// bytes) unless [`App::input_codecs`] says otherwise.
    pub fn processor<P: Processor + Clone + Sync>(mut self, name: &str, processor: P) -> Self {
        if self.processors.iter().any(|p| p.name == name) {
            self.fail(format!("two processors named {name:?}"));
        }
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            self.fail(format!("processor name {name:?}"));
        }
        if RESERVED_DIRS.contains(&name) {
            self.fail(format!(
                "processor name {name:?} is reserved (the app's state directory holds {RESERVED_DIRS:?})"
            ));
        }
        self.processors.push(ProcessorSpec {
            name: name.to_string(),
            inputs: Vec::new(),
            key_codec: Codec::Raw,
            value_codec: Codec::Raw,
            stores: Vec::new(),
            outputs: Vec::new(),
            factory: factory(processor),
        });
        self
    }

    /// An input topic of the last processor. Several inputs must have the
    /// same number of partitions: partition i of each goes to task i.
    pub fn input(mut self, topic: &str) -> Self {
        if let Some(p) = self.last("input") {
            p.inputs.push(topic.to_string());
        }
        self
    }

    /// The codecs that decode the last processor's input keys and values.
    pub fn input_codecs(mut self, key: Codec, value: Codec) -> Self {
        if let Some(p) = self.last("input_codecs") {
            p.key_codec = key;
            p.value_codec = value;
        }
        self
    }

    /// A state store of the last processor: keys encoded with the raw codec
    /// (so byte order is string order), values with postcard.
    pub fn store<K, V>(self, name: &str) -> Self
    where
        K: Serialize + DeserializeOwned + 'static,
        V: Serialize + DeserializeOwned + 'static,
    {
        self.store_with::<K, V>(name, Codec::Raw, Codec::Postcard)
    }

    /// A state store with explicit key and value codecs.
    pub fn store_with<K, V>(mut self, name: &str, key_codec: Codec, value_codec: Codec) -> Self
    where
        K: Serialize + DeserializeOwned + 'static,
        V: Serialize + DeserializeOwned + 'static,
    {
        if self
            .processors
            .iter()
            .flat_map(|p| &p.stores)
            .any(|s| s.name == name)
        {
            self.fail(format!("two stores named {name:?}"));
        }
        if let Some(p) = self.last("store") {
            p.stores.push(StoreSpec {
                name: name.to_string(),
                key_codec,
                value_codec,
                key_type: TypeId::of::<K>(),
                value_type: TypeId::of::<V>(),
                key_type_name: std::any::type_name::<K>(),
                value_type_name: std::any::type_name::<V>(),
                render_key: render::<K>(key_codec),
                render_value: render::<V>(value_codec),
            });
        }
        self
    }

    /// An output (derived) topic of the last processor, created if missing
    /// with as many partitions as its input; keys and values encoded with
    /// the raw codec.
    pub fn output(self, topic: &str) -> Self {
        self.output_with(topic, None, Codec::Raw, Codec::Raw)
    }

    /// An output topic with an explicit partition count (used when it is
    /// created) and codecs.
    pub fn output_with(
        mut self,
        topic: &str,
        partitions: Option<i32>,
        key_codec: Codec,
        value_codec: Codec,
    ) -> Self {
        if let Some(p) = self.last("output") {
            p.outputs.push(OutputSpec {
                topic: topic.to_string(),
                partitions,
                key_codec,
                value_codec,
            });
        }
        self
    }

    pub fn commit_interval(mut self, commit: CommitInterval) -> Self {
        self.config.commit = commit;
        self
    }

    pub fn fetch_bytes(mut self, bytes: u32) -> Self {
        self.config.fetch_bytes = bytes.max(1024);
        self
    }

    /// Whether commits fsync (default true). Without, a process crash still
    /// loses nothing; a machine crash may roll the state back to an earlier
    /// commit, which is consistent and replays from there.
    pub fn sync_commits(mut self, sync: bool) -> Self {
        self.config.sync = sync;
        self
    }

    /// Checkpoints taken by the tasks on their own; see [`CheckpointPolicy`].
    pub fn checkpoints(mut self, policy: CheckpointPolicy) -> Self {
        self.config.checkpoints = policy;
        self
    }

    pub fn config(&self) -> TaskConfig {
        self.config
    }

    /// Whether a processor of the app writes `topic`.
    pub(crate) fn is_derived(&self, topic: &str) -> bool {
        self.processors
            .iter()
            .any(|p| p.outputs.iter().any(|o| o.topic == topic))
    }

    /// The name in the log of a topic as the processors name it: derived
    /// topics carry the version's suffix.
    pub(crate) fn log_topic(&self, topic: &str) -> String {
        if self.is_derived(topic) {
            format!("{topic}{}", self.topic_suffix)
        } else {
            topic.to_string()
        }
    }

    /// Every derived topic's name in the log.
    pub(crate) fn derived_log_topics(&self) -> Vec<String> {
        let topics = self.derived_topics();
        topics.iter().map(|t| self.log_topic(t)).collect()
    }

    /// Every derived topic, as the processors name it.
    pub(crate) fn derived_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self
            .processors
            .iter()
            .flat_map(|p| p.outputs.iter().map(|o| o.topic.clone()))
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    fn last(&mut self, what: &str) -> Option<&mut ProcessorSpec> {
        if self.processors.is_empty() {
            self.fail(format!("{what} declared before any processor"));
        }
        self.processors.last_mut()
    }

    fn fail(&mut self, error: String) {
        self.error.get_or_insert(error);
    }

    /// Checks the declarations: every processor has an input, no topic is
    /// both an input and an output of one processor.
    pub(crate) fn check(&self) -> Result<(), String> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        if self.processors.is_empty() {
            return Err(format!("app {:?} has no processor", self.name));
        }
        for p in &self.processors {
            if p.inputs.is_empty() {
                return Err(format!("processor {:?} has no input topic", p.name));
            }
            if let Some(o) = p.outputs.iter().find(|o| p.inputs.contains(&o.topic)) {
                return Err(format!(
                    "processor {:?} reads and writes {:?}",
                    p.name, o.topic
                ));
            }
        }
        Ok(())
    }

    /// Input topics no processor of the app writes.
    pub(crate) fn external_inputs(&self) -> Vec<String> {
        let mut topics: Vec<String> = self
            .processors
            .iter()
            .flat_map(|p| &p.inputs)
            .filter(|t| {
                !self
                    .processors
                    .iter()
                    .any(|q| q.outputs.iter().any(|o| &o.topic == *t))
            })
            .cloned()
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }
}

/// Directories of an app's state directory that are not processors'.
pub(crate) const RESERVED_DIRS: [&str; 3] = ["versions", "checkpoints", "rebuild"];

fn factory<P: Processor + Clone + Sync>(processor: P) -> Factory {
    Arc::new(move |key_codec, value_codec| {
        Box::new(Typed {
            inner: processor.clone(),
            key_codec,
            value_codec,
        })
    })
}

/// Decodes with `codec` as `T` and writes the value readably: strings as
/// they are, anything else as compact JSON; bytes that do not decode as hex.
fn render<T: Serialize + DeserializeOwned + 'static>(codec: Codec) -> Render {
    Arc::new(move |bytes: &[u8]| match codec.decode::<T>(bytes) {
        Ok(value) => match serde_json::to_value(&value) {
            Ok(serde_json::Value::String(text)) => text,
            Ok(other) => other.to_string(),
            Err(_) => hex(bytes),
        },
        Err(_) => hex(bytes),
    })
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::from("0x");
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}
