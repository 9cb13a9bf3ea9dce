//! The transaction coordinator: every transactional id of the broker, the
//! requests that drive its transactions, and the protocol that ends one.
//!
//! Ending a transaction (EndTxn, a timeout, or a new producer fencing the
//! old one):
//!
//! 1. The decision is stored, synced: state PrepareCommit or PrepareAbort.
//!    From here the outcome is fixed; the client may be answered success.
//!    Crash before 1: the transaction is still Ongoing on open, and its
//!    timeout aborts it (the client, unanswered, retries or is fenced).
//! 2. A marker is appended to every partition of the transaction and all
//!    are fdatasynced (`markers`). Crash here: step 2 is repeated on open
//!    for every partition; a marker where the transaction is no longer
//!    open changes nothing.
//! 3. On commit, the transaction's pending group offsets are committed
//!    (synced, in the group offset store). Crash here: repeated on open;
//!    committing the same offsets again changes nothing.
//! 4. The state becomes CompleteCommit or CompleteAbort, not synced: if it
//!    is lost, 2 and 3 are repeated on open.
//!
//! If step 2 or 3 fails (a partition turned read-only, a full disk), the
//! transaction stays in its Prepare state and [`TxnCoordinator::tick`]
//! tries again; the decision never changes.
//!
//! Concurrency: one mutex over the map of ids, held only to find, add or
//! index an entry, and one mutex per transactional id, held for a whole
//! request of that id (including the marker writes of an EndTxn): requests
//! of one producer are serialised, different producers run in parallel. The
//! map may be locked inside an entry's lock, never an entry inside the
//! map's.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::config::TxnConfig;
use super::crash_point;
use super::markers;
use super::offsets;
use super::producer::TxnProducer;
use super::state::{PendingOffset, TxnMetadata, TxnState};
use super::store::{TxnStore, TxnStoreError};
use crate::group::GroupCoordinator;
use crate::{AppendSignals, ErrorCode};
use strata_log::{LogError, LogManager, ProducerIdAndEpoch};
use strata_record::MarkerKind;
use strata_record::time::now_ms;

/// Why InitProducerId was refused.
#[derive(Debug)]
pub enum InitRefusal {
    /// The producer id allocator refused (fenced, exhausted, a bad id).
    Log(LogError),
    /// The previous producer's transaction is still being ended: retry.
    Busy,
}

pub(super) type Entry = Arc<Mutex<TxnMetadata>>;

#[derive(Default)]
struct Ids {
    by_id: HashMap<String, Entry>,
    /// The transactional id whose transaction a producer id writes.
    by_producer: HashMap<i64, String>,
}

/// Every transactional id of this broker.
pub struct TxnCoordinator {
    ids: Mutex<Ids>,
    store: TxnStore,
    pub(super) log: Arc<LogManager>,
    pub(super) appends: Arc<AppendSignals>,
    config: TxnConfig,
}

impl TxnCoordinator {
    /// Opens the state in `dir`. Call [`TxnCoordinator::recover`] before
    /// serving.
    pub fn open(
        dir: &Path,
        config: TxnConfig,
        log: Arc<LogManager>,
        appends: Arc<AppendSignals>,
    ) -> Result<Self, TxnStoreError> {
        let store = TxnStore::open(dir)?;
        let mut ids = Ids::default();
        for metadata in store.load()? {
            if !metadata.state.is_idle() {
                ids.by_producer
                    .insert(metadata.producer_id, metadata.transactional_id.clone());
            }
            ids.by_id.insert(
                metadata.transactional_id.clone(),
                Arc::new(Mutex::new(metadata)),
            );
        }
        Ok(Self {
            ids: Mutex::new(ids),
            store,
            log,
            appends,
            config,
        })
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    fn ids(&self) -> MutexGuard<'_, Ids> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(&self, transactional_id: &str) -> Option<Entry> {
        self.ids().by_id.get(transactional_id).cloned()
    }

    fn entry_or_new(&self, transactional_id: &str, producer: ProducerIdAndEpoch) -> Entry {
        let mut ids = self.ids();
        Arc::clone(
            ids.by_id
                .entry(transactional_id.to_string())
                .or_insert_with(|| {
                    Arc::new(Mutex::new(TxnMetadata::new(
                        transactional_id,
                        producer.producer_id,
                        producer.epoch,
                        self.config.max_timeout_ms,
                    )))
                }),
        )
    }

    pub(super) fn entries(&self) -> Vec<Entry> {
        self.ids().by_id.values().cloned().collect()
    }

    /// InitProducerId with a transactional id: aborts the transaction the
    /// previous producer left open (its markers carry the new epoch, which
    /// fences it in every partition it wrote to), and hands out the id's
    /// producer id at its next epoch. Holds the id's entry throughout, so no
    /// request of the previous producer interleaves with the fencing. A
    /// decision of the previous producer whose markers cannot be written
    /// yet is [`InitRefusal::Busy`] (retriable), with nothing changed.
    pub fn init_producer(
        &self,
        transactional_id: &str,
        expected: Option<ProducerIdAndEpoch>,
        timeout_ms: i32,
        groups: &GroupCoordinator,
    ) -> Result<ProducerIdAndEpoch, InitRefusal> {
        let none = ProducerIdAndEpoch {
            producer_id: -1,
            epoch: -1,
        };
        let entry = self.entry_or_new(transactional_id, none);
        let mut metadata = lock(&entry);
        if metadata.state.is_preparing() {
            self.complete(&mut metadata, groups);
            if metadata.state.is_preparing() {
                return Err(InitRefusal::Busy);
            }
        }
        let granted = self
            .log
            .producer_ids()
            .init_transactional(transactional_id, expected, now_ms())
            .map_err(InitRefusal::Log)?;
        if metadata.state == TxnState::Ongoing {
            // The markers fence the old producer: same id, newer epoch (a
            // rotation to a new id leaves the old id's epoch as it was).
            let epoch = if granted.producer_id == metadata.producer_id {
                granted.epoch
            } else {
                metadata.producer_epoch
            };
            tracing::info!(
                transactional_id,
                producer_id = metadata.producer_id,
                epoch,
                "a new producer fences the previous one: aborting its open transaction"
            );
            metadata.producer_epoch = epoch;
            if let Err(error) = self.decide(&mut metadata, TxnState::PrepareAbort) {
                tracing::error!(transactional_id, "{error}");
                return Err(InitRefusal::Busy);
            }
            self.complete(&mut metadata, groups);
            if metadata.state.is_preparing() {
                // Decided and fenced; the markers follow from `tick`.
                return Err(InitRefusal::Busy);
            }
        }
        metadata.timeout_ms = timeout_ms;
        metadata.producer_id = granted.producer_id;
        metadata.producer_epoch = granted.epoch;
        if let Err(error) = self.store.put(&metadata, false) {
            tracing::warn!(transactional_id, "storing the transaction timeout: {error}");
        }
        Ok(granted)
    }

    /// Checks that `producer` owns its transactional id now: the id is
    /// mapped, to this producer id, at this epoch. Called with the id's
    /// entry locked, as InitProducerId changes the mapping with it locked.
    fn check_producer(&self, producer: &TxnProducer<'_>) -> Result<(), ErrorCode> {
        let Some(current) = self
            .log
            .producer_ids()
            .transactional(producer.transactional_id)
        else {
            return Err(ErrorCode::InvalidProducerIdMapping);
        };
        if current.producer_id != producer.producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if producer.epoch < current.epoch {
            return Err(producer.fenced);
        }
        if producer.epoch > current.epoch {
            return Err(ErrorCode::InvalidProducerEpoch);
        }
        Ok(())
    }

    /// The entry of a producer's transactional id, created if the id is
    /// mapped (InitProducerId ran) but has none yet; `None` for an id never
    /// initialised.
    fn entry_of(&self, producer: &TxnProducer<'_>) -> Option<Entry> {
        self.log
            .producer_ids()
            .transactional(producer.transactional_id)?;
        Some(self.entry_or_new(
            producer.transactional_id,
            ProducerIdAndEpoch {
                producer_id: producer.producer_id,
                epoch: producer.epoch,
            },
        ))
    }

    /// Begins the producer's transaction if none is in progress (its entry
    /// locked and its producer checked). A transaction whose decision is
    /// still being carried out answers CONCURRENT_TRANSACTIONS (retriable).
    fn begin(
        &self,
        producer: &TxnProducer<'_>,
        metadata: &mut TxnMetadata,
    ) -> Result<(), ErrorCode> {
        if metadata.state.is_preparing() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        if metadata.state.is_idle() {
            metadata.producer_id = producer.producer_id;
            metadata.producer_epoch = producer.epoch;
            metadata.begin_if_idle(now_ms());
            self.ids()
                .by_producer
                .insert(producer.producer_id, producer.transactional_id.to_string());
        }
        Ok(())
    }

    /// AddPartitionsToTxn: the partitions join the producer's transaction
    /// (which begins if none is in progress). With `verify_only`, nothing
    /// changes: each partition is answered whether it is in the
    /// transaction. Every partition gets the same answer unless some are
    /// unknown, which get UNKNOWN_TOPIC_OR_PARTITION and the rest
    /// OPERATION_NOT_ATTEMPTED.
    pub fn add_partitions(
        &self,
        producer: &TxnProducer<'_>,
        partitions: &[(String, i32)],
        verify_only: bool,
    ) -> Vec<ErrorCode> {
        let all = |code: ErrorCode| vec![code; partitions.len()];
        let known: Vec<bool> = partitions
            .iter()
            .map(|(topic, index)| {
                self.log
                    .topic(topic)
                    .is_some_and(|t| t.partition(*index).is_some())
            })
            .collect();
        if known.contains(&false) {
            return known
                .iter()
                .map(|&k| {
                    if k {
                        ErrorCode::OperationNotAttempted
                    } else {
                        ErrorCode::UnknownTopicOrPartition
                    }
                })
                .collect();
        }
        let Some(entry) = self.entry_of(producer) else {
            return all(ErrorCode::InvalidProducerIdMapping);
        };
        let mut metadata = lock(&entry);
        if let Err(code) = self.check_producer(producer) {
            return all(code);
        }
        if verify_only {
            return partitions
                .iter()
                .map(|p| {
                    if metadata.state == TxnState::Ongoing && metadata.partitions.contains(p) {
                        ErrorCode::None
                    } else {
                        ErrorCode::InvalidTxnState
                    }
                })
                .collect();
        }
        if let Err(code) = self.begin(producer, &mut metadata) {
            return all(code);
        }
        let before = metadata.partitions.len();
        metadata.partitions.extend(partitions.iter().cloned());
        if metadata.partitions.len() != before || metadata.last_update_ms < metadata.start_ms {
            metadata.last_update_ms = now_ms();
            if let Err(error) = self.store.put(&metadata, true) {
                tracing::error!(transactional_id = producer.transactional_id, "{error}");
                return all(ErrorCode::CoordinatorNotAvailable);
            }
        }
        all(ErrorCode::None)
    }

    /// AddOffsetsToTxn: the group's offsets will be committed with the
    /// transaction.
    pub fn add_offsets(&self, producer: &TxnProducer<'_>, group: &str) -> ErrorCode {
        if group.is_empty() {
            return ErrorCode::InvalidGroupId;
        }
        let Some(entry) = self.entry_of(producer) else {
            return ErrorCode::InvalidProducerIdMapping;
        };
        let mut metadata = lock(&entry);
        if let Err(code) = self.check_producer(producer) {
            return code;
        }
        if let Err(code) = self.begin(producer, &mut metadata) {
            return code;
        }
        if metadata.groups.insert(group.to_string()) || metadata.last_update_ms < metadata.start_ms
        {
            metadata.last_update_ms = now_ms();
            if let Err(error) = self.store.put(&metadata, true) {
                tracing::error!(transactional_id = producer.transactional_id, "{error}");
                return ErrorCode::CoordinatorNotAvailable;
            }
        }
        ErrorCode::None
    }

    /// TxnOffsetCommit: offsets held with the transaction, committed to the
    /// group only if it commits. The group must have been added with
    /// AddOffsetsToTxn.
    pub fn commit_offsets(
        &self,
        producer: &TxnProducer<'_>,
        group: &str,
        offsets: &[PendingOffset],
    ) -> ErrorCode {
        let Some(entry) = self.entry(producer.transactional_id) else {
            return ErrorCode::InvalidProducerIdMapping;
        };
        let mut metadata = lock(&entry);
        if let Err(code) = self.check_producer(producer) {
            return code;
        }
        if metadata.state.is_preparing() {
            return ErrorCode::ConcurrentTransactions;
        }
        if metadata.state != TxnState::Ongoing || !metadata.groups.contains(group) {
            return ErrorCode::InvalidTxnState;
        }
        for offset in offsets {
            metadata.pending_offsets.retain(|p| {
                (&p.group, &p.topic, p.partition)
                    != (&offset.group, &offset.topic, offset.partition)
            });
            metadata.pending_offsets.push(offset.clone());
        }
        metadata.last_update_ms = now_ms();
        match self.store.put(&metadata, true) {
            Ok(()) => ErrorCode::None,
            Err(error) => {
                tracing::error!(transactional_id = producer.transactional_id, "{error}");
                ErrorCode::CoordinatorNotAvailable
            }
        }
    }

    /// EndTxn: commits or aborts the producer's transaction (the protocol
    /// of the module doc). A retry of an EndTxn already carried out is
    /// answered success; ending a transaction that was never begun, or the
    /// other way than it ended, is INVALID_TXN_STATE.
    pub fn end(
        &self,
        producer: &TxnProducer<'_>,
        commit: bool,
        groups: &GroupCoordinator,
    ) -> ErrorCode {
        let Some(entry) = self.entry(producer.transactional_id) else {
            return ErrorCode::InvalidProducerIdMapping;
        };
        let mut metadata = lock(&entry);
        if let Err(code) = self.check_producer(producer) {
            return code;
        }
        match (metadata.state, commit) {
            (TxnState::Ongoing, _) => {}
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                return ErrorCode::None;
            }
            (TxnState::PrepareCommit | TxnState::PrepareAbort, _) => {
                return ErrorCode::ConcurrentTransactions;
            }
            _ => return ErrorCode::InvalidTxnState,
        }
        if metadata.producer_id != producer.producer_id || metadata.producer_epoch != producer.epoch
        {
            return ErrorCode::InvalidProducerEpoch;
        }
        let decision = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if let Err(error) = self.decide(&mut metadata, decision) {
            tracing::error!(transactional_id = producer.transactional_id, "{error}");
            return ErrorCode::CoordinatorNotAvailable;
        }
        self.complete(&mut metadata, groups);
        ErrorCode::None
    }

    /// Step 1: stores the decision, synced; on failure the state is as
    /// before.
    pub(super) fn decide(
        &self,
        metadata: &mut TxnMetadata,
        decision: TxnState,
    ) -> Result<(), TxnStoreError> {
        debug_assert_eq!(metadata.state, TxnState::Ongoing);
        metadata.state = decision;
        metadata.last_update_ms = now_ms();
        if let Err(error) = self.store.put(metadata, true) {
            metadata.state = TxnState::Ongoing;
            return Err(error);
        }
        Ok(())
    }

    /// Steps 2 to 4 for a transaction in a Prepare state. On a failure the
    /// state stays as it is, for [`TxnCoordinator::tick`] to try again.
    pub(super) fn complete(&self, metadata: &mut TxnMetadata, groups: &GroupCoordinator) {
        let (kind, done) = match metadata.state {
            TxnState::PrepareCommit => (MarkerKind::Commit, TxnState::CompleteCommit),
            TxnState::PrepareAbort => (MarkerKind::Abort, TxnState::CompleteAbort),
            other => {
                debug_assert!(false, "complete() in state {}", other.name());
                return;
            }
        };
        crash_point::reach(crash_point::TXN_PREPARED);
        let partitions: Vec<(String, i32)> = metadata.partitions.iter().cloned().collect();
        if let Err(error) = markers::write(
            &self.log,
            &self.appends,
            &partitions,
            metadata.producer_id,
            metadata.producer_epoch,
            kind,
        ) {
            tracing::error!(
                transactional_id = metadata.transactional_id,
                marker = kind.name(),
                "writing transaction markers failed; will try again: {error}"
            );
            return;
        }
        crash_point::reach(crash_point::TXN_MARKED);
        if kind == MarkerKind::Commit
            && let Err(error) = offsets::commit_pending_offsets(metadata, groups)
        {
            tracing::error!(
                transactional_id = metadata.transactional_id,
                "committing the transaction's offsets failed; will try again: {error}"
            );
            return;
        }
        metadata.state = done;
        metadata.partitions.clear();
        metadata.groups.clear();
        metadata.pending_offsets.clear();
        metadata.start_ms = -1;
        metadata.last_update_ms = now_ms();
        if let Err(error) = self.store.put(metadata, false) {
            // Harmless: on open the Prepare state is finished again.
            tracing::warn!(transactional_id = metadata.transactional_id, "{error}");
        }
        self.ids().by_producer.remove(&metadata.producer_id);
    }

    /// Runs `append` if `producer_id` at `epoch` may write a transactional
    /// batch to `topic`/`partition` (its transaction is Ongoing and holds
    /// the partition), with the transaction's entry locked: no EndTxn or
    /// timeout can write its markers between the check and the append, so
    /// a late batch never reopens a transaction that has ended.
    pub fn produce_checked<T>(
        &self,
        producer_id: i64,
        epoch: i16,
        topic: &str,
        partition: i32,
        append: impl FnOnce() -> T,
    ) -> Result<T, ErrorCode> {
        let id = self.ids().by_producer.get(&producer_id).cloned();
        let entry = id.and_then(|id| self.entry(&id));
        let Some(entry) = entry else {
            return Err(ErrorCode::InvalidTxnState);
        };
        let metadata = lock(&entry);
        if metadata.producer_id != producer_id {
            return Err(ErrorCode::InvalidTxnState);
        }
        if epoch < metadata.producer_epoch {
            return Err(ErrorCode::InvalidProducerEpoch);
        }
        let member = metadata
            .partitions
            .contains(&(topic.to_string(), partition));
        if metadata.state != TxnState::Ongoing || epoch != metadata.producer_epoch || !member {
            return Err(ErrorCode::InvalidTxnState);
        }
        Ok(append())
    }

    /// Whether a transaction in progress holds an offset for this group
    /// partition (OffsetFetch with `require_stable` answers
    /// UNSTABLE_OFFSET_COMMIT).
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.entries().iter().any(|entry| {
            let metadata = lock(entry);
            !metadata.state.is_idle()
                && metadata
                    .pending_offsets
                    .iter()
                    .any(|p| p.group == group && p.topic == topic && p.partition == partition)
        })
    }

    /// The state of one transactional id.
    pub fn describe(&self, transactional_id: &str) -> Option<TxnMetadata> {
        self.entry(transactional_id)
            .map(|entry| lock(&entry).clone())
    }

    /// The state of every transactional id.
    pub fn list(&self) -> Vec<TxnMetadata> {
        let mut all: Vec<TxnMetadata> = self
            .entries()
            .iter()
            .map(|entry| lock(entry).clone())
            .collect();
        all.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        all
    }
}

pub(super) fn lock(entry: &Entry) -> MutexGuard<'_, TxnMetadata> {
    entry.lock().unwrap_or_else(|p| p.into_inner())
}
