//! The shape of an app: its processors, each with input topics, stores and
//! output topics, and the [`App`] builder that declares them.
//!
//! Declarations apply to the processor added last; stores and outputs
//! are typed handles declared once (see `handles`):
//!
//! ```no_run
//! # use strata_runtime::{App, Context, ProcessError, Record, Store, Topic};
//! const LINES: Topic<Vec<u8>, String> = Topic::new("lines");
//! const WORDS: Topic<String, ()> = Topic::new("words");
//! const COUNTS: Store<String, u64> = Store::new("counts");
//! const WORD_COUNTS: Topic<String, String> = Topic::new("word-counts");
//! # fn split(_: Record<Vec<u8>, String>, _: &mut Context) -> Result<(), ProcessError> { Ok(()) }
//! # fn count(_: Record<String, ()>, _: &mut Context) -> Result<(), ProcessError> { Ok(()) }
//! # fn build() -> App {
//! App::new("wordcount")
//!     .processor("split", split).input(LINES).output(WORDS)
//!     .processor("count", count).input(WORDS).store(COUNTS).output(WORD_COUNTS)
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use strata_record::codec::Codec;

use super::context::Context;
use super::erased::{ErasedProcessor, WithTimerFn};
use super::handles::{Store, Topic};
use super::input::{self, InputTopic, RecordTypes};
use super::on_error::{OnError, dead_letter_output, dead_letter_topic};
use super::process_error::ProcessError;
use super::processor::IntoProcessor;
use super::spec::{OutputSpec, StoreSpec};

pub(crate) use super::processor_spec::ProcessorSpec;
pub use super::task_config::{CheckpointPolicy, CommitInterval, TaskConfig};
use super::timer::{Timer, timer_store_name};

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

    /// Adds a processor: a function or closure `fn(Record<K, V>, &mut
    /// Context) -> Result<(), ProcessError>` (cloned for every task), or a
    /// factory `|| MyProcessor { .. }` of a [`Processor`](super::Processor)
    /// or an [`AsyncProcessor`](super::AsyncProcessor) (called for every
    /// task). Its input keys and values are decoded as `K` and `V` with the
    /// raw codec (strings and bytes) unless [`App::input_codecs`] says
    /// otherwise. A factory of a [`RawProcessor`](super::RawProcessor)
    /// gets them undecoded (its `K` and `V` are `Vec<u8>`).
    pub fn processor<K: 'static, V: 'static, M>(
        mut self,
        name: &str,
        processor: impl IntoProcessor<K, V, M>,
    ) -> Self {
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
        let factory = processor.into_factory();
        self.processors.push(ProcessorSpec {
            name: name.to_string(),
            inputs: Vec::new(),
            key_codec: Codec::Raw,
            value_codec: Codec::Raw,
            stores: Vec::new(),
            outputs: Vec::new(),
            factory: factory.make,
            timers: false,
            function: factory.function,
            on_timer: false,
            records: RecordTypes::of::<K, V>(),
            typed_inputs: Vec::new(),
            on_error: OnError::Fail,
        });
        self
    }

    /// Declares timers for the last processor (a [`Processor`], an
    /// [`AsyncProcessor`] or a [`RawProcessor`] with `on_timer`): its timer store,
    /// `<processor>.timers`, committed with its other stores and with a
    /// changelog when they have one (see `runtime::timer`). A function
    /// processor declares them with [`App::on_timer`] instead.
    ///
    /// [`Processor`]: super::Processor
    /// [`AsyncProcessor`]: super::AsyncProcessor
    /// [`RawProcessor`]: super::RawProcessor
    pub fn timers(mut self) -> Self {
        let taken: Vec<String> = (self.processors.iter())
            .flat_map(|p| p.stores.iter().map(|s| s.name.clone()))
            .collect();
        if let Some(p) = self.last("timers") {
            if p.timers {
                return self;
            }
            let name = timer_store_name(&p.name);
            if taken.contains(&name) {
                let error = format!(
                    "a store named {name:?} is in the way of processor {:?}'s timers: rename the store",
                    p.name
                );
                self.fail(error);
                return self;
            }
            p.timers = true;
            p.stores.push(StoreSpec::timers(name));
        }
        self
    }

    /// The timer callback of the last processor, a function or closure
    /// (which cannot implement [`Processor::on_timer`]): called for each of
    /// its timers that is due, as `on_timer` would be. Declares its timers
    /// (as [`App::timers`]).
    ///
    /// [`Processor::on_timer`]: super::Processor::on_timer
    pub fn on_timer<F>(mut self, on_timer: F) -> Self
    where
        F: Fn(Timer, &mut Context<'_>) -> Result<(), ProcessError> + Send + Sync + 'static,
    {
        let on_timer: super::erased::TimerFn = Arc::new(on_timer);
        if let Some(p) = self.last("on_timer") {
            let make = Arc::clone(&p.factory);
            p.factory = Arc::new(move |key_codec, value_codec| -> Box<dyn ErasedProcessor> {
                Box::new(WithTimerFn {
                    inner: make(key_codec, value_codec),
                    on_timer: Arc::clone(&on_timer),
                })
            });
            p.on_timer = true;
        }
        self.timers()
    }

    /// An input topic of the last processor. Several inputs must have the
    /// same number of partitions: partition i of each goes to task i.
    ///
    /// A topic's typed handle ([`Topic`]) gives its codecs to the processor
    /// and is checked against the processor's record types and against the
    /// processors that write the topic (see `input`); a name alone is
    /// decoded as the processor's other inputs are (by its typed inputs'
    /// codecs, or else [`App::input_codecs`]).
    pub fn input(mut self, topic: impl Into<InputTopic>) -> Self {
        let InputTopic { name, typed } = topic.into();
        let Some(p) = self.last("input") else {
            return self;
        };
        p.inputs.push(name.clone());
        let Some(typed) = typed else {
            return self;
        };
        let codecs = (p.typed_inputs.first()).map(|(_, t)| (t.key_codec, t.value_codec));
        let refused = input::refusal(&p.name, p.records, codecs, &name, &typed);
        p.key_codec = typed.key_codec;
        p.value_codec = typed.value_codec;
        p.typed_inputs.push((name, typed));
        if let Some(refused) = refused {
            self.fail(refused);
        }
        self
    }

    /// The codecs that decode the last processor's input keys and values.
    /// A processor with typed inputs takes their codecs: other codecs here
    /// are refused, since one decoder reads all its inputs.
    pub fn input_codecs(mut self, key: Codec, value: Codec) -> Self {
        if let Some(p) = self.last("input_codecs") {
            p.key_codec = key;
            p.value_codec = value;
        }
        self
    }

    /// A state store of the last processor, with the types and codecs of
    /// its handle.
    pub fn store<K, V>(mut self, store: Store<K, V>) -> Self
    where
        K: Serialize + DeserializeOwned + 'static,
        V: Serialize + DeserializeOwned + 'static,
    {
        let name = store.name();
        if self
            .processors
            .iter()
            .flat_map(|p| &p.stores)
            .any(|s| s.name == name)
        {
            self.fail(format!("two stores named {name:?}"));
        }
        if let Some(p) = self.last("store") {
            p.stores.push(StoreSpec::of(store));
        }
        self
    }

    /// An output (derived) topic of the last processor, with the codecs of
    /// its handle; created if missing, with the handle's partitions or as
    /// many as the processor's input.
    pub fn output<K: 'static, V: 'static>(mut self, output: Topic<K, V>) -> Self {
        if let Some(p) = self.last("output") {
            p.outputs.push(OutputSpec::of(output));
        }
        self
    }

    /// The last output declared carries provenance: each record the
    /// processor emits to it has headers naming the app, version,
    /// processor and input record it came from (see `provenance`;
    /// `<app> explain` walks them back).
    pub fn provenance(mut self) -> Self {
        let app = self.name.clone();
        let output = self.last("provenance").and_then(|p| {
            // Not the dead-letter topic `on_error` declares: its letters
            // carry where they came from already.
            let letters = dead_letter_topic(&app, &p.name, &p.on_error);
            (p.outputs.iter_mut().rev()).find(|o| Some(&o.topic) != letters.as_ref())
        });
        match output {
            Some(output) => output.provenance = true,
            None => self.fail("provenance declared before any output".into()),
        }
        self
    }

    /// What the last processor's tasks do with a record it fails on (see
    /// [`OnError`]); by default they stop.
    pub fn on_error(mut self, policy: OnError) -> Self {
        let app = self.name.clone();
        if let Some(p) = self.last("on_error") {
            // A dead-letter topic declared before is replaced.
            if let Some(old) = dead_letter_topic(&app, &p.name, &p.on_error) {
                p.outputs.retain(|o| o.topic != old);
            }
            if let Some(topic) = dead_letter_topic(&app, &p.name, &policy) {
                p.outputs.push(dead_letter_output(topic));
            }
            p.on_error = policy;
        }
        self
    }

    /// Whether a task merges repeated writes of one key within a commit
    /// into one database write (the default). Off, every put and delete
    /// is written as made: only for measuring what the cache saves a hot
    /// key (`make bench-operators`); state and outputs are the same.
    pub fn write_cache(mut self, on: bool) -> Self {
        self.config.write_cache = on;
        self
    }

    /// Whether each batch a task processes is counted for `/metrics`
    /// (records, processing time, lag, end-to-end latency, hot keys; on by
    /// default). Off, those families stand still while the task's state,
    /// commits and restores are still shown: only for measuring what the
    /// counting costs (`make bench-runtime`), as Kafka Streams'
    /// `metrics.recording.level` trades detail for speed.
    pub fn task_metrics(mut self, on: bool) -> Self {
        self.config.metrics = on;
        self
    }

    pub fn commit_interval(mut self, commit: CommitInterval) -> Self {
        self.config.commit = commit;
        self
    }

    /// How long a task with several inputs (a join, a merge) waits for an
    /// input that is caught up with its log and has nothing buffered,
    /// before it goes on with the records of the others (Kafka Streams'
    /// `max.task.idle.ms`; default 0).
    ///
    /// A task always processes its inputs' records in timestamp order,
    /// and never passes by an input whose partition holds records it has
    /// not fetched yet, nor (in `run --until-end`, a rebuild or a replay
    /// to the end) one that has records before its end. What this trades
    /// is live only: with 0, a record arriving late on a quiet input may
    /// find the other inputs already past its time; waiting longer lets it
    /// take its place in timestamp order, at the cost of that much latency
    /// whenever an input is quiet.
    pub fn max_task_idle(mut self, idle: Duration) -> Self {
        self.config.max_task_idle = idle;
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

    /// Embedded: whether stores also write changelog topics (see
    /// [`TaskConfig::changelogs`]).
    pub fn changelogs(mut self, on: bool) -> Self {
        self.config.changelogs = on;
        self
    }

    pub fn config(&self) -> TaskConfig {
        self.config
    }

    /// The app's name with its version's suffix: what its transactional
    /// ids, offset groups and changelog topics are named after.
    pub(crate) fn versioned_name(&self) -> String {
        format!("{}{}", self.name, self.topic_suffix)
    }

    /// The changelog topic of `store`: `<app>-<store>-changelog`.
    pub(crate) fn changelog_topic(&self, store: &str) -> String {
        format!("{}-{store}-changelog", self.versioned_name())
    }

    /// The positions log of `processor`'s tasks (remote):
    /// `<app>-<processor>-positions`.
    pub(crate) fn positions_topic(&self, processor: &str) -> String {
        format!("{}-{processor}-positions", self.versioned_name())
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

    pub(crate) fn last(&mut self, what: &str) -> Option<&mut ProcessorSpec> {
        if self.processors.is_empty() {
            self.fail(format!("{what} declared before any processor"));
        }
        self.processors.last_mut()
    }

    /// The names of every store the app declares, for an error naming them.
    pub(crate) fn declared_stores(&self) -> String {
        (self.processors.iter())
            .flat_map(|p| &p.stores)
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(crate) fn fail(&mut self, error: String) {
        self.error.get_or_insert(error);
    }

    /// Checks the declarations: every processor has an input, reads each
    /// once, and no topic is both an input and an output of one processor.
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
            if p.timers && p.function && !p.on_timer {
                return Err(format!(
                    "processor {:?} is a function and declares timers, which nothing would handle: give it .on_timer(f) instead of .timers()",
                    p.name
                ));
            }
            let twice = (p.inputs.iter().enumerate())
                .find_map(|(at, topic)| p.inputs[..at].contains(topic).then_some(topic));
            if let Some(topic) = twice {
                return Err(format!(
                    "processor {:?} reads {topic:?} twice: declare each input once",
                    p.name
                ));
            }
            let registry = |c: Codec| matches!(c, Codec::Registry(_));
            let store =
                (p.stores.iter()).find(|s| registry(s.key_codec) || registry(s.value_codec));
            if let Some(store) = store {
                return Err(format!(
                    "store {:?} of processor {:?} uses a schema-registry codec, which is for topics: give stores postcard, json, raw or utf8",
                    store.name, p.name
                ));
            }
            if let Some(o) = p.outputs.iter().find(|o| p.inputs.contains(&o.topic)) {
                return Err(format!(
                    "processor {:?} reads and writes {:?}",
                    p.name, o.topic
                ));
            }
        }
        for (topic, codec) in self.registry_codecs() {
            if let Codec::Registry(format) = codec
                && let Err(error) = strata_schema::check_declared(&format)
            {
                return Err(format!("topic {topic:?}: {error}"));
            }
        }
        for p in &self.processors {
            if let Some(error) =
                input::overridden(&p.name, &p.typed_inputs, (p.key_codec, p.value_codec))
            {
                return Err(error);
            }
        }
        for reader in &self.processors {
            for (topic, typed) in &reader.typed_inputs {
                for writer in &self.processors {
                    for output in writer.outputs.iter().filter(|o| &o.topic == topic) {
                        if let Some(error) =
                            input::disagreement(&reader.name, topic, typed, &writer.name, output)
                        {
                            return Err(error);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A topic the app reads or writes with a registry codec, named with
    /// its codec, if there is one.
    pub(crate) fn registry_codec(&self) -> Option<String> {
        let (topic, codec) = self.registry_codecs().next()?;
        Some(format!(
            "{topic:?} is read or written with the {} codec",
            codec.name()
        ))
    }

    /// Every topic read or written with a registry codec, with the codec.
    fn registry_codecs(&self) -> impl Iterator<Item = (&String, Codec)> {
        self.processors.iter().flat_map(|p| {
            let inputs = (p.inputs.iter()).map(|t| (t, [p.key_codec, p.value_codec]));
            let outputs = (p.outputs.iter()).map(|o| (&o.topic, [o.key_codec, o.value_codec]));
            inputs.chain(outputs).flat_map(|(topic, codecs)| {
                let registry = codecs
                    .into_iter()
                    .filter(|c| matches!(c, Codec::Registry(_)));
                registry.map(move |codec| (topic, codec))
            })
        })
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
