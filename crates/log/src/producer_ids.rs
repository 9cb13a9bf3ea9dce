//! Producer ids: a durable allocator that never hands out the same id twice,
//! across restarts and crashes, and the durable mapping from transactional
//! ids to (producer id, epoch).
//!
//! ```text
//! <data>/producer-ids.json
//!   {"format": 1,
//!    "reserved_below": 3000,          ids below this may have been handed out
//!    "transactional": {"<id>": {"producer_id", "epoch", "last_epoch",
//!                               "previous_producer_id", "last_used_ms"}}}
//! ```
//!
//! Ids are handed out from blocks of [`PRODUCER_ID_BLOCK`]: before the first
//! id of a block is handed out, the file recording `reserved_below` past the
//! block is written to a temporary file, fsynced, renamed over the old one
//! and the directory fsynced. A crash therefore loses at most the rest of a
//! block, never reuses an id. On open, the next id is also above every
//! producer id found in the partitions' logs, in case the file was lost.
//! Every change to a transactional id's mapping is written the same way
//! before it is answered.
//!
//! Transactional ids stay mapped while used; when [`TRANSACTIONAL_IDS_MAX`]
//! are mapped, those unused for [`TRANSACTIONAL_ID_EXPIRATION_MS`] (Kafka's
//! `transactional.id.expiration.ms` default) make room, and beyond that new
//! ones are refused.
//!
//! Thread-safety: `ProducerIds` is `Sync`; one mutex serialises allocations
//! and mapping changes, including their file writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::LogError;
use super::storage::Disk;

/// Ids reserved by one durable write.
pub const PRODUCER_ID_BLOCK: i64 = 1000;
/// Most transactional ids mapped at once.
pub const TRANSACTIONAL_IDS_MAX: usize = 10_000;
/// Longest transactional id accepted.
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = 1024;
/// A transactional id unused this long may be forgotten to make room.
pub const TRANSACTIONAL_ID_EXPIRATION_MS: i64 = 7 * 24 * 3_600_000;
/// Idempotent epoch bumps remembered (in memory) to tell a retried bump
/// from a stale one.
const IDEMPOTENT_BUMPS_MAX: usize = 100_000;
/// Largest file read: the mapping at its limits, with room to spare.
const FILE_BYTES_MAX: u64 = 64 << 20;
const FILE_NAME: &str = "producer-ids.json";
const TMP_FILE_NAME: &str = "producer-ids.json.tmp";
const FORMAT: u32 = 1;

/// A producer's identity as InitProducerId hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdAndEpoch {
    pub producer_id: i64,
    pub epoch: i16,
}

/// Whether no further epoch may be handed out for a producer id. Kafka
/// stops one short of `i16::MAX` (the last epoch is kept for the abort
/// marker a bump may need); strata keeps that, for clients that rely on it.
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct TransactionalEntry {
    producer_id: i64,
    epoch: i16,
    /// The epoch before the last bump (-1 if none): a request carrying it is
    /// a retry of that bump whose answer was lost.
    last_epoch: i16,
    /// The producer id before the last rotation to a new id (-1 if none).
    previous_producer_id: i64,
    last_used_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stored {
    format: u32,
    reserved_below: i64,
    transactional: BTreeMap<String, TransactionalEntry>,
}

/// An epoch bump handed to an idempotent producer.
#[derive(Debug, Clone, Copy)]
struct Bump {
    from_epoch: i16,
    to_epoch: i16,
}

struct State {
    stored: Stored,
    next_id: i64,
    bumps: BTreeMap<i64, Bump>,
}

/// The broker's producer id allocator and transactional id mapping.
pub struct ProducerIds {
    disk: Disk,
    dir: PathBuf,
    state: Mutex<State>,
}

impl ProducerIds {
    /// Reads the allocator's file in `dir` (none yet is a fresh allocator).
    pub(crate) fn open(disk: &Disk, dir: &Path) -> Result<Self, LogError> {
        disk.remove_if_exists(&dir.join(TMP_FILE_NAME))?;
        let path = dir.join(FILE_NAME);
        let stored = if path.exists() {
            read_stored(&path)?
        } else {
            Stored {
                format: FORMAT,
                reserved_below: 0,
                transactional: BTreeMap::new(),
            }
        };
        let next_id = stored.reserved_below;
        Ok(Self {
            disk: disk.clone(),
            dir: dir.to_path_buf(),
            state: Mutex::new(State {
                stored,
                next_id,
                bumps: BTreeMap::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes every id handed out from now on larger than `producer_id` (one
    /// found in a log).
    pub(crate) fn ensure_above(&self, producer_id: i64) {
        let mut state = self.lock();
        state.next_id = state.next_id.max(producer_id.saturating_add(1));
    }

    /// Whether `producer_id` was handed out (or found in a log): a batch
    /// under an id this broker never gave would take the state of an id
    /// it may give later.
    pub fn was_handed_out(&self, producer_id: i64) -> bool {
        producer_id < self.lock().next_id
    }

    /// A producer id never handed out before, at epoch 0.
    pub fn new_producer(&self) -> Result<ProducerIdAndEpoch, LogError> {
        let mut state = self.lock();
        let mut stored = state.stored.clone();
        let producer_id = self.allocate(&mut state, &mut stored)?;
        Ok(ProducerIdAndEpoch {
            producer_id,
            epoch: 0,
        })
    }

    /// KIP-360 for a producer without a transactional id: `current` asks for
    /// its next epoch. `log_epoch` is the newest epoch any partition holds
    /// for the id. The same id at the next epoch, unless `current` is stale
    /// (an older epoch than one handed out or written since); a new id at
    /// epoch 0 when the epochs are exhausted, the id was never handed out,
    /// or it belongs to a transactional id (whose epochs only
    /// [`ProducerIds::init_transactional`] hands out).
    pub fn bump_idempotent(
        &self,
        current: ProducerIdAndEpoch,
        log_epoch: Option<i16>,
    ) -> Result<ProducerIdAndEpoch, LogError> {
        let mut state = self.lock();
        let producer_id = current.producer_id;
        let transactional = state
            .stored
            .transactional
            .values()
            .any(|e| e.producer_id == producer_id || e.previous_producer_id == producer_id);
        if producer_id < 0
            || producer_id >= state.next_id
            || epoch_exhausted(current.epoch)
            || transactional
        {
            drop(state);
            return self.new_producer();
        }
        let bump = state.bumps.get(&producer_id).copied();
        if let Some(bump) = bump
            && bump.from_epoch == current.epoch
            && log_epoch.is_none_or(|e| e < bump.to_epoch)
        {
            // A retry of a bump whose answer was lost (the new epoch has not
            // been written anywhere yet).
            return Ok(ProducerIdAndEpoch {
                producer_id,
                epoch: bump.to_epoch,
            });
        }
        let known = bump.map(|b| b.to_epoch).max(log_epoch);
        if let Some(known) = known
            && current.epoch < known
        {
            return Err(LogError::ProducerFenced {
                producer: format!("producer id {producer_id}"),
                epoch: current.epoch,
                current_epoch: known,
            });
        }
        let epoch = current.epoch + 1;
        if state.bumps.len() >= IDEMPOTENT_BUMPS_MAX && !state.bumps.contains_key(&producer_id) {
            // The smallest ids were handed out first.
            state.bumps.pop_first();
        }
        state.bumps.insert(
            producer_id,
            Bump {
                from_epoch: current.epoch,
                to_epoch: epoch,
            },
        );
        Ok(ProducerIdAndEpoch { producer_id, epoch })
    }

    /// InitProducerId with a transactional id: its producer id at the next
    /// epoch (a new id at epoch 0 the first time, or when the epochs are
    /// exhausted), which fences any older instance. `expected` is what a
    /// v3+ request carries: it must be the mapping's current id and epoch
    /// (or the ones before its last change, which is a retry).
    pub fn init_transactional(
        &self,
        transactional_id: &str,
        expected: Option<ProducerIdAndEpoch>,
        now_ms: i64,
    ) -> Result<ProducerIdAndEpoch, LogError> {
        if transactional_id.len() > TRANSACTIONAL_ID_BYTES_MAX {
            return Err(LogError::InvalidTransactionalId {
                reason: format!(
                    "{} bytes is longer than the limit of {TRANSACTIONAL_ID_BYTES_MAX}",
                    transactional_id.len()
                ),
            });
        }
        let mut state = self.lock();
        let mut stored = state.stored.clone();
        let fenced = |entry: &TransactionalEntry, epoch: i16| LogError::ProducerFenced {
            producer: format!("transactional id '{transactional_id}'"),
            epoch,
            current_epoch: entry.epoch,
        };
        let entry = match stored.transactional.get(transactional_id).cloned() {
            None => {
                make_room(&mut stored, now_ms)?;
                TransactionalEntry {
                    producer_id: self.allocate(&mut state, &mut stored)?,
                    epoch: 0,
                    last_epoch: -1,
                    previous_producer_id: -1,
                    last_used_ms: now_ms,
                }
            }
            Some(entry) => match expected {
                Some(x) if x.producer_id == entry.producer_id && x.epoch == entry.epoch => {
                    self.bump_entry(&mut state, &mut stored, &entry, now_ms)?
                }
                Some(x) if x.producer_id == entry.producer_id && x.epoch == entry.last_epoch => {
                    TransactionalEntry {
                        last_used_ms: now_ms,
                        ..entry
                    }
                }
                Some(x)
                    if x.producer_id == entry.previous_producer_id
                        && x.epoch == entry.last_epoch =>
                {
                    TransactionalEntry {
                        last_used_ms: now_ms,
                        ..entry
                    }
                }
                Some(x) => return Err(fenced(&entry, x.epoch)),
                // A new producer (no expected identity) fences every older
                // one: nothing before it may pass for a retry of its bump,
                // so the last epoch is forgotten (as Kafka resets it).
                None => TransactionalEntry {
                    last_epoch: -1,
                    previous_producer_id: -1,
                    ..self.bump_entry(&mut state, &mut stored, &entry, now_ms)?
                },
            },
        };
        let answer = ProducerIdAndEpoch {
            producer_id: entry.producer_id,
            epoch: entry.epoch,
        };
        stored
            .transactional
            .insert(transactional_id.to_string(), entry);
        self.persist(&stored)?;
        state.stored = stored;
        Ok(answer)
    }

    fn bump_entry(
        &self,
        state: &mut State,
        stored: &mut Stored,
        entry: &TransactionalEntry,
        now_ms: i64,
    ) -> Result<TransactionalEntry, LogError> {
        Ok(if epoch_exhausted(entry.epoch) {
            TransactionalEntry {
                producer_id: self.allocate(state, stored)?,
                epoch: 0,
                last_epoch: entry.epoch,
                previous_producer_id: entry.producer_id,
                last_used_ms: now_ms,
            }
        } else {
            TransactionalEntry {
                epoch: entry.epoch + 1,
                last_epoch: entry.epoch,
                last_used_ms: now_ms,
                ..entry.clone()
            }
        })
    }

    /// Hands out the next id, first reserving a new block durably if the
    /// current one is used up. `stored` is the state to be written, and is
    /// written (and made current) here when a block is reserved.
    fn allocate(&self, state: &mut State, stored: &mut Stored) -> Result<i64, LogError> {
        if state.next_id >= stored.reserved_below {
            let reserved_below = state
                .next_id
                .checked_add(PRODUCER_ID_BLOCK)
                .ok_or(LogError::ProducerIdsExhausted)?;
            stored.reserved_below = reserved_below;
            let mut reserved = state.stored.clone();
            reserved.reserved_below = reserved_below;
            self.persist(&reserved)?;
            state.stored.reserved_below = reserved_below;
        }
        let id = state.next_id;
        state.next_id += 1;
        Ok(id)
    }

    /// Atomically replaces the file: temporary file, fsync, rename, fsync
    /// of the directory.
    fn persist(&self, stored: &Stored) -> Result<(), LogError> {
        let path = self.dir.join(FILE_NAME);
        let tmp = self.dir.join(TMP_FILE_NAME);
        let json = serde_json::to_vec(stored).expect("producer ids serialize");
        // A new file each time: after a failed fsync the old one's pages
        // are in an unknown state.
        self.disk.remove_if_exists(&tmp)?;
        self.disk.write_new(&tmp, &json)?;
        self.disk.rename(&tmp, &path)?;
        self.disk.sync_dir(&self.dir)
    }

    /// The producer id and epoch a transactional id is mapped to now.
    pub fn transactional(&self, transactional_id: &str) -> Option<ProducerIdAndEpoch> {
        self.lock()
            .stored
            .transactional
            .get(transactional_id)
            .map(|entry| ProducerIdAndEpoch {
                producer_id: entry.producer_id,
                epoch: entry.epoch,
            })
    }

    /// The transactional ids mapped now, for tests and tools.
    pub fn transactional_count(&self) -> usize {
        self.lock().stored.transactional.len()
    }
}

/// Makes room for one more transactional id, forgetting expired ones.
fn make_room(stored: &mut Stored, now_ms: i64) -> Result<(), LogError> {
    if stored.transactional.len() < TRANSACTIONAL_IDS_MAX {
        return Ok(());
    }
    stored
        .transactional
        .retain(|_, e| now_ms.saturating_sub(e.last_used_ms) < TRANSACTIONAL_ID_EXPIRATION_MS);
    if stored.transactional.len() < TRANSACTIONAL_IDS_MAX {
        return Ok(());
    }
    Err(LogError::TransactionalIdsFull {
        limit: TRANSACTIONAL_IDS_MAX,
    })
}

fn read_stored(path: &Path) -> Result<Stored, LogError> {
    let bad = |reason: String| LogError::BadMetadata {
        path: path.to_path_buf(),
        reason,
    };
    let stored: Stored = super::files::read_json(path, FILE_BYTES_MAX)?;
    if stored.format != FORMAT {
        return Err(bad(format!("unknown format {}", stored.format)));
    }
    if stored.reserved_below < 0 {
        return Err(bad(format!(
            "negative reserved_below {}",
            stored.reserved_below
        )));
    }
    if let Some((id, entry)) = stored
        .transactional
        .iter()
        .find(|(_, e)| e.producer_id < 0 || e.producer_id >= stored.reserved_below || e.epoch < 0)
    {
        return Err(bad(format!(
            "transactional id '{id}' maps to producer id {} epoch {}, outside what was handed out",
            entry.producer_id, entry.epoch
        )));
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(producer_id: i64, epoch: i16) -> ProducerIdAndEpoch {
        ProducerIdAndEpoch { producer_id, epoch }
    }

    #[test]
    fn ids_are_unique_across_reopens_and_stay_above_ids_in_logs() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(&Disk::os(), dir.path()).unwrap();
        let first: Vec<i64> = (0..3)
            .map(|_| ids.new_producer().unwrap().producer_id)
            .collect();
        assert_eq!(first, [0, 1, 2]);
        drop(ids);
        // As after a crash: the rest of the block is skipped, never reused.
        let ids = ProducerIds::open(&Disk::os(), dir.path()).unwrap();
        assert_eq!(ids.new_producer().unwrap(), pid(PRODUCER_ID_BLOCK, 0));
        drop(ids);
        let ids = ProducerIds::open(&Disk::os(), dir.path()).unwrap();
        ids.ensure_above(5 * PRODUCER_ID_BLOCK + 17);
        assert_eq!(
            ids.new_producer().unwrap().producer_id,
            5 * PRODUCER_ID_BLOCK + 18
        );
    }

    #[test]
    fn a_transactional_id_keeps_its_producer_id_and_bumps_its_epoch_durably() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(&Disk::os(), dir.path()).unwrap();
        let first = ids.init_transactional("task-1", None, 0).unwrap();
        assert_eq!(first.epoch, 0);
        let other = ids.init_transactional("task-2", None, 0).unwrap();
        assert_ne!(other.producer_id, first.producer_id);
        drop(ids);
        let ids = ProducerIds::open(&Disk::os(), dir.path()).unwrap();
        let again = ids.init_transactional("task-1", None, 0).unwrap();
        assert_eq!(again, pid(first.producer_id, 1));
        // v3+: the current id and epoch bump; a retry of that bump gets the
        // same answer; an older epoch is fenced.
        let bumped = ids.init_transactional("task-1", Some(again), 0).unwrap();
        assert_eq!(bumped, pid(first.producer_id, 2));
        assert_eq!(
            ids.init_transactional("task-1", Some(again), 0).unwrap(),
            bumped
        );
        let stale = ids
            .init_transactional("task-1", Some(first), 0)
            .unwrap_err();
        assert!(matches!(stale, LogError::ProducerFenced { .. }), "{stale}");
        assert!(ids.new_producer().unwrap().producer_id > other.producer_id);
    }

    #[test]
    fn an_exhausted_epoch_moves_a_transactional_id_to_a_new_producer_id() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(&Disk::os(), dir.path()).unwrap();
        let first = ids.init_transactional("t", None, 0).unwrap();
        ids.lock().stored.transactional.get_mut("t").unwrap().epoch = i16::MAX - 1;
        let last = pid(first.producer_id, i16::MAX - 1);
        // The producer bumping itself (KIP-360) is rotated to a new id ...
        let rotated = ids.init_transactional("t", Some(last), 0).unwrap();
        assert_ne!(rotated.producer_id, first.producer_id);
        assert_eq!(rotated.epoch, 0);
        // ... and a retry of that bump from the old id gets the new one.
        let retry = ids.init_transactional("t", Some(last), 0).unwrap();
        assert_eq!(retry, rotated);
        // A new producer (no identity) fences it: the old identities no
        // longer pass for a retry.
        let owner = ids.init_transactional("t", None, 0).unwrap();
        for stale in [last, rotated] {
            let error = ids.init_transactional("t", Some(stale), 0).unwrap_err();
            assert!(matches!(error, LogError::ProducerFenced { .. }), "{error}");
        }
        assert_eq!(
            ids.init_transactional("t", Some(owner), 0).unwrap().epoch,
            owner.epoch + 1
        );
    }

    #[test]
    fn idempotent_bumps_fence_stale_epochs_and_tolerate_a_retry() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(&Disk::os(), dir.path()).unwrap();
        let p = ids.new_producer().unwrap();
        let bumped = ids.bump_idempotent(p, Some(0)).unwrap();
        assert_eq!(bumped, pid(p.producer_id, 1));
        // Retry before epoch 1 was written anywhere: the same answer.
        assert_eq!(ids.bump_idempotent(p, Some(0)).unwrap(), bumped);
        // Once epoch 1 is in a log, epoch 0 is stale.
        let stale = ids.bump_idempotent(p, Some(1)).unwrap_err();
        assert!(
            matches!(
                stale,
                LogError::ProducerFenced {
                    current_epoch: 1,
                    ..
                }
            ),
            "{stale}"
        );
        assert_eq!(
            ids.bump_idempotent(bumped, Some(1)).unwrap(),
            pid(p.producer_id, 2)
        );
        // An id never handed out, or an exhausted epoch: a fresh id.
        let fresh = ids.bump_idempotent(pid(1 << 40, 3), None).unwrap();
        assert_eq!(fresh.epoch, 0);
        assert!(fresh.producer_id > p.producer_id && fresh.producer_id < 1 << 40);
        let rotated = ids
            .bump_idempotent(pid(p.producer_id, i16::MAX - 1), None)
            .unwrap();
        assert_eq!(rotated.epoch, 0);
        assert_ne!(rotated.producer_id, p.producer_id);
        // A transactional id's producer id gets its epochs from its mapping
        // only, or two producers could end up with the same id and epoch.
        let task = ids.init_transactional("task", None, 0).unwrap();
        let not_bumped = ids.bump_idempotent(task, Some(0)).unwrap();
        assert_ne!(not_bumped.producer_id, task.producer_id);
        assert_eq!(
            ids.init_transactional("task", None, 0).unwrap(),
            pid(task.producer_id, 1)
        );
    }

    #[test]
    fn a_damaged_file_is_refused_rather_than_risking_reused_ids() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"{\"format\":1,").unwrap();
        assert!(matches!(
            ProducerIds::open(&Disk::os(), dir.path()),
            Err(LogError::BadMetadata { .. })
        ));
    }
}
