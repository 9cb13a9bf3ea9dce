//! All topics and partitions under one data directory.
//!
//! ```text
//! <data>/
//!   .lock                      flock held while a process owns the directory
//!   .clean-shutdown            present only between a clean close and the next open
//!   topics/<name>.json         {name, id (UUID), partitions, config overrides}
//!   producer-ids.json          the producer id allocator (see `producer_ids`)
//!   <topic>-<partition>/       one PartitionLog per partition
//! ```
//!
//! A topic exists once its metadata file is durably in `topics/` (written to
//! a temporary file, synced, renamed, directory synced); partition
//! directories are created before it, so a crash never leaves a topic whose
//! partitions are missing. Deletion removes the metadata file first, then
//! the directories; leftovers of an interrupted deletion are removed on open.
//!
//! Thread-safety: `LogManager` is `Sync`; the topic map is behind a lock and
//! partitions are shared as `Arc<PartitionLog>`.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::cleaner::{CleanOutcome, CleanerConfig, Throttle, clean_partition};
use super::files::list_dir;
use super::limits::PARTITIONS_MAX;
use super::storage::{Disk, OpenMode};
use super::{LogConfig, LogError, PartitionLog, ProducerIds, RetentionOutcome};
use strata_record::time::now_ms;

mod deletion;

/// Longest topic name Kafka allows.
const TOPIC_NAME_BYTES_MAX: usize = 249;
/// Largest topic metadata file read (names and a few config values).
const METADATA_BYTES_MAX: u64 = 1 << 20;
const CLEAN_SHUTDOWN_FILE: &str = ".clean-shutdown";
const LOCK_FILE: &str = ".lock";
const TOPICS_DIR: &str = "topics";

/// A topic's persisted identity and configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopicMetadata {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    /// Kafka-named overrides of the broker's defaults.
    pub config: BTreeMap<String, String>,
}

/// An open topic.
pub struct Topic {
    pub metadata: TopicMetadata,
    pub config: LogConfig,
    pub partitions: Vec<Arc<PartitionLog>>,
}

impl Topic {
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    pub fn id(&self) -> Uuid {
        self.metadata.id
    }

    /// Partition `index`, if the topic has it.
    pub fn partition(&self, index: i32) -> Option<Arc<PartitionLog>> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i).cloned())
    }
}

pub struct LogManager {
    disk: Disk,
    data_dir: PathBuf,
    defaults: LogConfig,
    topics: RwLock<HashMap<String, Arc<Topic>>>,
    producer_ids: ProducerIds,
    /// How long an idle idempotent producer is remembered (Kafka's
    /// `producer.id.expiration.ms`).
    producer_expiration_ms: std::sync::atomic::AtomicI64,
    _lock: Flock<File>,
}

impl LogManager {
    /// Opens the data directory, creating it if needed, and recovers every
    /// partition. Fails if another process holds the directory.
    pub fn open(data_dir: &Path, defaults: LogConfig) -> Result<Self, LogError> {
        Self::open_on(&Disk::os(), data_dir, defaults)
    }

    /// [`open`](Self::open) on the given storage.
    pub fn open_on(disk: &Disk, data_dir: &Path, defaults: LogConfig) -> Result<Self, LogError> {
        disk.create_dir_all(&data_dir.join(TOPICS_DIR))?;
        let marker = data_dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();
        let fresh = !data_dir.join(LOCK_FILE).exists();
        let lock_file = disk.open(&data_dir.join(LOCK_FILE), OpenMode::Create, "creating")?;
        let lock =
            Flock::lock(lock_file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
                LogError::io(
                    format!(
                        "locking {} (is another strata process using it?)",
                        data_dir.display()
                    ),
                    std::io::Error::from(errno),
                )
            })?;
        if !clean && !fresh {
            tracing::info!(data_dir = %data_dir.display(), "no clean-shutdown marker: recovering partitions");
        }
        let manager = Self {
            disk: disk.clone(),
            data_dir: data_dir.to_path_buf(),
            defaults,
            topics: RwLock::new(HashMap::new()),
            producer_ids: ProducerIds::open(disk, data_dir)?,
            producer_expiration_ms: std::sync::atomic::AtomicI64::new(
                super::PRODUCER_EXPIRATION_MS,
            ),
            _lock: lock,
        };
        manager.remove_deleted_leftovers()?;
        let mut topics = HashMap::new();
        for metadata in manager.read_all_metadata()? {
            let topic = manager.open_topic(metadata, clean)?;
            for partition in &topic.partitions {
                manager
                    .producer_ids
                    .ensure_above(partition.max_producer_id());
            }
            topics.insert(topic.name().to_string(), Arc::new(topic));
        }
        *manager.topics.write().unwrap_or_else(|p| p.into_inner()) = topics;
        // From here on a crash is unclean until the next close.
        disk.remove_if_exists(&marker)?;
        disk.sync_dir(data_dir)?;
        Ok(manager)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The storage the log writes through, for the broker state kept beside
    /// it in the data directory.
    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    pub fn defaults(&self) -> &LogConfig {
        &self.defaults
    }

    /// The producer id allocator.
    pub fn producer_ids(&self) -> &ProducerIds {
        &self.producer_ids
    }

    /// The newest epoch any partition holds for an idempotent producer.
    pub fn producer_epoch(&self, producer_id: i64) -> Option<i16> {
        self.topics()
            .iter()
            .flat_map(|topic| &topic.partitions)
            .filter_map(|partition| partition.producer_epoch(producer_id))
            .max()
    }

    fn open_topic(&self, metadata: TopicMetadata, clean: bool) -> Result<Topic, LogError> {
        let config = self.defaults.with_overrides(&metadata.config)?;
        let partitions = (0..metadata.partitions)
            .map(|p| {
                let name = format!("{}-{p}", metadata.name);
                PartitionLog::open_on(
                    &self.disk,
                    &self.data_dir.join(&name),
                    &name,
                    config.clone(),
                    clean,
                )
                .map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Topic {
            metadata,
            config,
            partitions,
        })
    }

    fn read_all_metadata(&self) -> Result<Vec<TopicMetadata>, LogError> {
        let dir = self.data_dir.join(TOPICS_DIR);
        let mut all = Vec::new();
        for path in list_dir(&dir)? {
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let metadata = read_metadata(&path)?;
            all.push(metadata);
        }
        Ok(all)
    }

    /// Creates a topic with `partitions` partitions and Kafka-named config
    /// overrides (validated before anything is written).
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: BTreeMap<String, String>,
    ) -> Result<Arc<Topic>, LogError> {
        validate_topic_name(name)?;
        if !(1..=PARTITIONS_MAX).contains(&partitions) {
            return Err(LogError::InvalidPartitionCount(partitions));
        }
        self.defaults.with_overrides(&overrides)?;
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        if topics.contains_key(name) {
            return Err(LogError::TopicExists(name.to_string()));
        }
        // A deletion of the same name that did not finish owns those
        // directories until it does.
        self.finish_deletions(Some(name))?;
        let metadata = TopicMetadata {
            name: name.to_string(),
            id: Uuid::new_v4(),
            partitions,
            config: overrides,
        };
        for p in 0..partitions {
            let dir = self.partition_dir(name, p);
            if dir.exists() {
                // A directory without metadata: a topic whose creation crashed
                // before it existed. It holds no acknowledged data.
                self.disk.remove_dir_all(&dir)?;
            }
        }
        let topic = Arc::new(self.open_topic(metadata.clone(), true)?);
        if let Err(error) = self
            .disk
            .sync_dir(&self.data_dir)
            .and_then(|()| self.write_metadata(&metadata))
        {
            // The topic never existed: take its empty directories back.
            drop(topic);
            self.remove_partition_dirs(&metadata)?;
            return Err(error);
        }
        topics.insert(name.to_string(), Arc::clone(&topic));
        tracing::info!(topic = name, partitions, id = %metadata.id, "created topic");
        Ok(topic)
    }

    /// Grows a topic to `total` partitions (Kafka's CreatePartitions).
    pub fn create_partitions(&self, name: &str, total: i32) -> Result<Arc<Topic>, LogError> {
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        let topic = topics
            .get(name)
            .ok_or_else(|| LogError::UnknownTopic(name.to_string()))?;
        if total <= topic.metadata.partitions || total > PARTITIONS_MAX {
            return Err(LogError::InvalidPartitionCount(total));
        }
        let mut metadata = topic.metadata.clone();
        let mut partitions = topic.partitions.clone();
        for p in metadata.partitions..total {
            let part_name = format!("{name}-{p}");
            let dir = self.partition_dir(name, p);
            if dir.exists() {
                // Left by a CreatePartitions that crashed before its metadata
                // was written: it holds no acknowledged data.
                self.disk.remove_dir_all(&dir)?;
            }
            partitions.push(Arc::new(PartitionLog::open_on(
                &self.disk,
                &dir,
                &part_name,
                topic.config.clone(),
                true,
            )?));
        }
        metadata.partitions = total;
        self.disk.sync_dir(&self.data_dir)?;
        self.write_metadata(&metadata)?;
        let grown = Arc::new(Topic {
            metadata,
            config: topic.config.clone(),
            partitions,
        });
        topics.insert(name.to_string(), Arc::clone(&grown));
        Ok(grown)
    }

    /// Changes a topic's Kafka-named config overrides (Kafka's
    /// AlterConfigs and IncrementalAlterConfigs): each key set to a value,
    /// or removed (back to the broker default) with `None`. Every change is
    /// validated before anything is written; the new overrides are persisted
    /// with the topic's metadata, then applied to every partition at once
    /// (the next append, roll or retention pass uses them). With `replace`,
    /// overrides not named are removed too (AlterConfigs' semantics).
    pub fn alter_topic_config(
        &self,
        name: &str,
        changes: &BTreeMap<String, Option<String>>,
        replace: bool,
    ) -> Result<Arc<Topic>, LogError> {
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        let topic = topics
            .get(name)
            .ok_or_else(|| LogError::UnknownTopic(name.to_string()))?;
        let mut overrides = if replace {
            BTreeMap::new()
        } else {
            topic.metadata.config.clone()
        };
        for (key, value) in changes {
            match value {
                Some(value) => {
                    overrides.insert(key.clone(), value.clone());
                }
                None => {
                    if !super::CONFIG_KEYS.contains(&key.as_str()) {
                        return Err(LogError::InvalidConfig {
                            key: key.clone(),
                            value: String::new(),
                            reason: "unknown topic config".into(),
                        });
                    }
                    overrides.remove(key);
                }
            }
        }
        let config = self.defaults.with_overrides(&overrides)?;
        let metadata = TopicMetadata {
            config: overrides,
            ..topic.metadata.clone()
        };
        self.write_metadata(&metadata)?;
        for partition in &topic.partitions {
            partition.set_config(config.clone());
        }
        let altered = Arc::new(Topic {
            metadata,
            config,
            partitions: topic.partitions.clone(),
        });
        topics.insert(name.to_string(), Arc::clone(&altered));
        tracing::info!(topic = name, "topic config changed");
        Ok(altered)
    }

    /// One pass of log compaction: every partition of every compacted topic
    /// that is due is cleaned (see `cleaner`), one after another, within
    /// the I/O budget of `config`. A partition whose clean fails is logged
    /// and left as it was; the others go on.
    pub fn clean_compacted(&self, config: &CleanerConfig) -> Vec<(String, CleanOutcome)> {
        let mut throttle = Throttle::new(config.io_bytes_per_second);
        let mut outcomes = Vec::new();
        for topic in self.topics() {
            if !topic.config.cleanup.compact {
                continue;
            }
            for partition in &topic.partitions {
                match clean_partition(partition, now_ms(), config, &mut throttle) {
                    Ok(Some(outcome)) => outcomes.push((partition.name().to_string(), outcome)),
                    Ok(None) => {}
                    Err(error) => {
                        tracing::error!(partition = partition.name(), "cleaning failed: {error}");
                    }
                }
            }
        }
        outcomes
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// All topics, sorted by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        let mut all: Vec<_> = self
            .topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.name().cmp(b.name()));
        all
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Result<Arc<PartitionLog>, LogError> {
        let found = self
            .topic(topic)
            .ok_or_else(|| LogError::UnknownTopic(topic.to_string()))?;
        found
            .partition(partition)
            .ok_or_else(|| LogError::UnknownPartition {
                topic: topic.to_string(),
                partition,
            })
    }

    /// Forgets idle producers after `ms` instead of
    /// [`PRODUCER_EXPIRATION_MS`](super::PRODUCER_EXPIRATION_MS), from the
    /// next retention pass on.
    pub fn set_producer_expiration_ms(&self, ms: i64) {
        self.producer_expiration_ms
            .store(ms.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Runs retention on every partition; returns what each deleted.
    /// Also forgets idle idempotent producers. Failures are logged per
    /// partition.
    pub fn enforce_retention(&self) -> Vec<(String, RetentionOutcome)> {
        let now = now_ms();
        let mut outcomes = Vec::new();
        for topic in self.topics() {
            for partition in &topic.partitions {
                let expiration_ms = self
                    .producer_expiration_ms
                    .load(std::sync::atomic::Ordering::Relaxed);
                let expired = partition.expire_producers(now, expiration_ms);
                if expired > 0 {
                    tracing::debug!(
                        partition = partition.name(),
                        expired,
                        "forgot idle producers"
                    );
                }
                // One failing partition must not stop retention elsewhere.
                match partition.enforce_retention(now) {
                    Ok(outcome) if outcome.segments_deleted > 0 => {
                        outcomes.push((partition.name().to_string(), outcome));
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::error!(partition = partition.name(), "retention failed: {error}");
                    }
                }
            }
        }
        outcomes
    }

    /// Applies the `flush.ms` policy to every partition. Failures are logged
    /// (and turn their partition read-only).
    pub fn flush_due(&self) {
        let now = now_ms();
        for topic in self.topics() {
            for partition in &topic.partitions {
                // A read-only partition cannot flush; the others still must.
                if partition.read_only_reason().is_none()
                    && let Err(error) = partition.flush_if_due(now)
                {
                    tracing::error!(partition = partition.name(), "flush failed: {error}");
                }
            }
        }
    }

    /// Clean shutdown: flushes every partition, seals indexes, and writes the
    /// marker that lets the next open skip recovery. Partitions that are
    /// read-only or corrupt are closed without the marker, so they are
    /// checked again next time.
    pub fn close(self) -> Result<(), LogError> {
        let mut all_clean = true;
        for topic in self.topics() {
            for partition in &topic.partitions {
                partition.close()?;
                all_clean &=
                    partition.read_only_reason().is_none() && partition.corruption().is_none();
            }
        }
        if all_clean {
            let marker = self.data_dir.join(CLEAN_SHUTDOWN_FILE);
            let file = self.disk.open(&marker, OpenMode::Truncate, "writing")?;
            self.disk.sync(&file, &marker)?;
            self.disk.sync_dir(&self.data_dir)?;
        }
        Ok(())
    }

    fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        partition_dir(&self.data_dir, topic, partition)
    }

    fn metadata_path(&self, topic: &str) -> PathBuf {
        self.data_dir.join(TOPICS_DIR).join(format!("{topic}.json"))
    }

    fn write_metadata(&self, metadata: &TopicMetadata) -> Result<(), LogError> {
        let path = self.metadata_path(&metadata.name);
        // A fixed-length name: the topic name may already be as long as a
        // file name can be.
        let tmp = self
            .data_dir
            .join(TOPICS_DIR)
            .join(format!(".{}.tmp", metadata.id.simple()));
        let json = serde_json::to_vec_pretty(metadata).expect("topic metadata serializes");
        self.disk.replace_durably(&path, &tmp, &json)
    }
}

/// A topic's metadata read from its file, without opening the log (for
/// `status` while another process holds the data directory).
pub fn peek_topic_metadata(data_dir: &Path, topic: &str) -> Result<TopicMetadata, LogError> {
    read_metadata(&data_dir.join(TOPICS_DIR).join(format!("{topic}.json")))
}

fn read_metadata(path: &Path) -> Result<TopicMetadata, LogError> {
    let bad = |reason: String| LogError::BadMetadata {
        path: path.to_path_buf(),
        reason,
    };
    let metadata: TopicMetadata = super::files::read_json(path, METADATA_BYTES_MAX)?;
    validate_topic_name(&metadata.name)?;
    if !(1..=PARTITIONS_MAX).contains(&metadata.partitions) {
        return Err(bad(format!(
            "partition count {} is out of range",
            metadata.partitions
        )));
    }
    Ok(metadata)
}

/// Kafka's rules: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), LogError> {
    let invalid = |reason: &str| LogError::InvalidTopicName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(invalid("empty"));
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return Err(invalid("longer than 249 characters"));
    }
    if name == "." || name == ".." {
        return Err(invalid("'.' and '..' are reserved"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(invalid(
            "only ASCII letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    if name == TOPICS_DIR {
        return Err(invalid("reserved"));
    }
    Ok(())
}

/// Where partition `partition` of `topic` lives under `data_dir`.
pub(crate) fn partition_dir(data_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    data_dir.join(format!("{topic}-{partition}"))
}
