//! Committed consumer-group offsets, durable in RocksDB.
//!
//! One key per (group, topic, partition), written with a synced write batch
//! per OffsetCommit request: a commit that was answered survives a crash.
//!
//! ```text
//! key:   u16 group length, group, u16 topic length, topic, i32 partition (big-endian)
//! value: u8 format (1), i64 offset, i32 leader epoch, i64 commit time (ms),
//!        i32 metadata length (-1: null), metadata
//! ```
//!
//! The length-prefixed key keeps one group's offsets contiguous (a prefix
//! scan), whatever bytes group and topic names hold.

use std::path::Path;

use rocksdb::{DB, Direction, IteratorMode, Options, WriteBatch, WriteOptions};

/// Value format written by this version.
const FORMAT: u8 = 1;

/// One committed offset and what the client stored with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_time_ms: i64,
}

/// A committed offset with the partition it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffset {
    pub topic: String,
    pub partition: i32,
    pub committed: CommittedOffset,
}

#[derive(Debug, thiserror::Error)]
#[error("group offset store: {0}")]
pub struct OffsetStoreError(String);

impl From<rocksdb::Error> for OffsetStoreError {
    fn from(error: rocksdb::Error) -> Self {
        Self(error.into_string())
    }
}

pub struct OffsetStore {
    db: DB,
}

impl OffsetStore {
    pub fn open(dir: &Path) -> Result<Self, OffsetStoreError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        // Offsets are small; keep the footprint of this database modest.
        options.set_write_buffer_size(8 << 20);
        options.set_max_open_files(64);
        let db = DB::open(&options, dir)
            .map_err(|e| OffsetStoreError(format!("opening {}: {}", dir.display(), e)))?;
        Ok(Self { db })
    }

    /// Stores every offset of one commit request atomically, synced to disk.
    pub fn commit(&self, group: &str, offsets: &[PartitionOffset]) -> Result<(), OffsetStoreError> {
        let mut batch = WriteBatch::default();
        for entry in offsets {
            batch.put(
                key(group, &entry.topic, entry.partition),
                encode(&entry.committed),
            );
        }
        let mut options = WriteOptions::default();
        options.set_sync(true);
        self.db.write_opt(batch, &options)?;
        Ok(())
    }

    pub fn get(
        &self,
        group: &str,
        topic: &str,
        partition: i32,
    ) -> Result<Option<CommittedOffset>, OffsetStoreError> {
        match self.db.get(key(group, topic, partition))? {
            Some(value) => decode(&value).map(Some),
            None => Ok(None),
        }
    }

    /// Every offset committed for `group`, ordered by topic then partition.
    pub fn group(&self, group: &str) -> Result<Vec<PartitionOffset>, OffsetStoreError> {
        let prefix = group_prefix(group);
        let mut found = Vec::new();
        let iter = self
            .db
            .iterator(IteratorMode::From(&prefix, Direction::Forward));
        for item in iter {
            let (key, value) = item?;
            if !key.starts_with(&prefix) {
                break;
            }
            let (_, topic, partition) = split_key(&key)?;
            found.push(PartitionOffset {
                topic,
                partition,
                committed: decode(&value)?,
            });
        }
        Ok(found)
    }

    /// Every (group, offset) pair in the store, ordered by group.
    pub fn all(&self) -> Result<Vec<(String, PartitionOffset)>, OffsetStoreError> {
        let mut found = Vec::new();
        for item in self.db.iterator(IteratorMode::Start) {
            let (key, value) = item?;
            let (group, topic, partition) = split_key(&key)?;
            found.push((
                group,
                PartitionOffset {
                    topic,
                    partition,
                    committed: decode(&value)?,
                },
            ));
        }
        Ok(found)
    }

    /// Removes every offset `group` committed.
    pub fn forget_group(&self, group: &str) -> Result<(), OffsetStoreError> {
        // Keys are the group's length-prefixed name, then the rest: every
        // key of the group lies in [prefix, prefix with its last byte + 1).
        let start = group_prefix(group);
        let mut end = start.clone();
        // The prefix ends in a byte of UTF-8 text (never 0xff) or, for an
        // empty name, in the zero length.
        *end.last_mut().expect("a prefix holds the name's length") += 1;
        let mut batch = WriteBatch::default();
        batch.delete_range(start, end);
        let mut options = WriteOptions::default();
        options.set_sync(true);
        self.db.write_opt(batch, &options)?;
        Ok(())
    }

    /// Removes the offsets of `group` for `partitions` (they expired).
    pub fn forget(
        &self,
        group: &str,
        partitions: &[(String, i32)],
    ) -> Result<(), OffsetStoreError> {
        let mut batch = WriteBatch::default();
        for (topic, partition) in partitions {
            batch.delete(key(group, topic, *partition));
        }
        let mut options = WriteOptions::default();
        options.set_sync(true);
        self.db.write_opt(batch, &options)?;
        Ok(())
    }

    /// Removes every group's offsets for `topic` (the topic was deleted).
    pub fn forget_topic(&self, topic: &str) -> Result<(), OffsetStoreError> {
        let mut batch = WriteBatch::default();
        for item in self.db.iterator(IteratorMode::Start) {
            let (key, _) = item?;
            let (_, key_topic, _) = split_key(&key)?;
            if key_topic == topic {
                batch.delete(key);
            }
        }
        if !batch.is_empty() {
            let mut options = WriteOptions::default();
            options.set_sync(true);
            self.db.write_opt(batch, &options)?;
        }
        Ok(())
    }
}

fn group_prefix(group: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + group.len());
    push_name(&mut key, group);
    key
}

fn key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut key = group_prefix(group);
    push_name(&mut key, topic);
    key.extend_from_slice(&partition.to_be_bytes());
    key
}

/// Names longer than u16::MAX are refused by the handlers before they get
/// here (Kafka strings are at most i16::MAX bytes), so the cast holds.
fn push_name(key: &mut Vec<u8>, name: &str) {
    let len = u16::try_from(name.len()).unwrap_or(u16::MAX);
    key.extend_from_slice(&len.to_be_bytes());
    key.extend_from_slice(&name.as_bytes()[..usize::from(len)]);
}

fn split_key(key: &[u8]) -> Result<(String, String, i32), OffsetStoreError> {
    let bad = || OffsetStoreError(format!("malformed key of {} bytes", key.len()));
    let (group, rest) = take_name(key).ok_or_else(bad)?;
    let (topic, rest) = take_name(rest).ok_or_else(bad)?;
    let partition = rest.try_into().map(i32::from_be_bytes).map_err(|_| bad())?;
    Ok((group, topic, partition))
}

fn take_name(bytes: &[u8]) -> Option<(String, &[u8])> {
    let len = usize::from(u16::from_be_bytes(bytes.get(..2)?.try_into().ok()?));
    let name = bytes.get(2..2 + len)?;
    Some((
        String::from_utf8(name.to_vec()).ok()?,
        bytes.get(2 + len..)?,
    ))
}

fn encode(committed: &CommittedOffset) -> Vec<u8> {
    let metadata = committed.metadata.as_deref();
    let mut value = Vec::with_capacity(25 + metadata.map_or(0, str::len));
    value.push(FORMAT);
    value.extend_from_slice(&committed.offset.to_be_bytes());
    value.extend_from_slice(&committed.leader_epoch.to_be_bytes());
    value.extend_from_slice(&committed.commit_time_ms.to_be_bytes());
    match metadata {
        Some(text) => {
            let len = i32::try_from(text.len()).unwrap_or(i32::MAX);
            value.extend_from_slice(&len.to_be_bytes());
            value.extend_from_slice(text.as_bytes());
        }
        None => value.extend_from_slice(&(-1i32).to_be_bytes()),
    }
    value
}

#[doc(hidden)]
pub fn decode(value: &[u8]) -> Result<CommittedOffset, OffsetStoreError> {
    let bad = |what: &str| OffsetStoreError(format!("malformed offset value: {what}"));
    if value.first() != Some(&FORMAT) {
        return Err(bad("unknown format"));
    }
    let field = |at: usize, len: usize| value.get(at..at + len).ok_or_else(|| bad("truncated"));
    let offset = i64::from_be_bytes(field(1, 8)?.try_into().map_err(|_| bad("offset"))?);
    let leader_epoch = i32::from_be_bytes(field(9, 4)?.try_into().map_err(|_| bad("epoch"))?);
    let commit_time_ms = i64::from_be_bytes(field(13, 8)?.try_into().map_err(|_| bad("time"))?);
    let len = i32::from_be_bytes(field(21, 4)?.try_into().map_err(|_| bad("length"))?);
    let metadata = match usize::try_from(len) {
        Ok(len) => Some(
            String::from_utf8(field(25, len)?.to_vec()).map_err(|_| bad("metadata not UTF-8"))?,
        ),
        Err(_) => None,
    };
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_time_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(offset: i64, metadata: Option<&str>) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: 3,
            metadata: metadata.map(str::to_string),
            commit_time_ms: 1_700_000_000_000,
        }
    }

    fn at(topic: &str, partition: i32, offset: i64, metadata: Option<&str>) -> PartitionOffset {
        PartitionOffset {
            topic: topic.to_string(),
            partition,
            committed: committed(offset, metadata),
        }
    }

    #[test]
    fn commits_survive_reopen_and_groups_stay_apart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = OffsetStore::open(dir.path()).unwrap();
            store
                .commit("g", &[at("t", 0, 5, Some("m")), at("t", 1, 7, None)])
                .unwrap();
            // A group whose name is a prefix of another's stays separate.
            store.commit("g2", &[at("t", 0, 99, Some(""))]).unwrap();
            store.commit("g", &[at("t", 0, 6, Some("later"))]).unwrap();
        }
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(
            store.get("g", "t", 0).unwrap(),
            Some(committed(6, Some("later")))
        );
        assert_eq!(store.get("g", "t", 1).unwrap(), Some(committed(7, None)));
        assert_eq!(store.get("g", "u", 0).unwrap(), None);
        assert_eq!(
            store.group("g").unwrap(),
            vec![at("t", 0, 6, Some("later")), at("t", 1, 7, None)]
        );
        assert_eq!(store.group("g2").unwrap(), vec![at("t", 0, 99, Some(""))]);
        assert_eq!(store.all().unwrap().len(), 3);

        store.forget_topic("t").unwrap();
        assert!(store.all().unwrap().is_empty());
    }

    #[test]
    fn decode_refuses_damaged_values() {
        let good = encode(&committed(1, Some("abc")));
        assert!(decode(&good).is_ok());
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut unknown = good.clone();
        unknown[0] = 9;
        assert!(decode(&unknown).is_err());
    }
}
