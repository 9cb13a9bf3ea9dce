//! The transaction coordinator's state, durable in RocksDB: one key per
//! transactional id, its whole [`TxnMetadata`] as the value, replaced on
//! every change.
//!
//! ```text
//! key:   the transactional id (UTF-8)
//! value: u8 format (1), then postcard of TxnMetadata, fields in order:
//!        transactional_id string, producer_id i64, producer_epoch i16,
//!        timeout_ms i32, state (variant index: 0 Empty, 1 Ongoing,
//!        2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort),
//!        partitions seq of (topic string, partition i32), groups seq of
//!        string, pending_offsets seq of (group, topic, partition i32,
//!        offset i64, leader_epoch i32, metadata option string),
//!        start_ms i64, last_update_ms i64
//! ```
//! (postcard writes integers as varints, zigzag for signed, and lengths as
//! varints: a stable, documented encoding.)
//!
//! A write that decides something (a transaction begins, grows, or is to be
//! committed or aborted) is synced before it is answered. The Complete
//! write after the markers is not: if it is lost, the coordinator finds the
//! Prepare state on open and writes the markers again, which is harmless
//! (a marker for a transaction no longer open changes nothing). Because one
//! key holds everything, a later synced write of the same id also makes
//! every earlier one durable in order.

use std::path::Path;

use rocksdb::{DB, IteratorMode, Options, WriteOptions};

use super::state::TxnMetadata;

const FORMAT: u8 = 1;

#[derive(Debug, thiserror::Error)]
#[error("transaction state store: {0}")]
pub struct TxnStoreError(pub String);

impl From<rocksdb::Error> for TxnStoreError {
    fn from(error: rocksdb::Error) -> Self {
        Self(error.into_string())
    }
}

pub struct TxnStore {
    db: DB,
}

impl TxnStore {
    pub fn open(dir: &Path) -> Result<Self, TxnStoreError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_write_buffer_size(8 << 20);
        options.set_max_open_files(64);
        let db = DB::open(&options, dir)
            .map_err(|e| TxnStoreError(format!("opening {}: {}", dir.display(), e)))?;
        Ok(Self { db })
    }

    /// Every stored transactional id. An entry that does not decode is an
    /// error naming it: the coordinator cannot guess a transaction's state.
    pub fn load(&self) -> Result<Vec<TxnMetadata>, TxnStoreError> {
        let mut all = Vec::new();
        for item in self.db.iterator(IteratorMode::Start) {
            let (key, value) = item?;
            all.push(decode(&value).map_err(|reason| {
                TxnStoreError(format!(
                    "the state of transactional id {:?} does not decode ({reason}); \
                     delete the broker's transactions directory to forget every transaction",
                    String::from_utf8_lossy(&key)
                ))
            })?);
        }
        Ok(all)
    }

    /// Replaces the state of one transactional id; `sync` makes it durable
    /// before returning.
    pub fn put(&self, metadata: &TxnMetadata, sync: bool) -> Result<(), TxnStoreError> {
        let mut options = WriteOptions::default();
        options.set_sync(sync);
        self.db.put_opt(
            metadata.transactional_id.as_bytes(),
            encode(metadata),
            &options,
        )?;
        Ok(())
    }
}

fn encode(metadata: &TxnMetadata) -> Vec<u8> {
    let mut out = vec![FORMAT];
    out.extend(postcard::to_stdvec(metadata).expect("transaction metadata serializes"));
    out
}

fn decode(value: &[u8]) -> Result<TxnMetadata, String> {
    match value.split_first() {
        Some((&FORMAT, rest)) => postcard::from_bytes(rest).map_err(|e| e.to_string()),
        Some((format, _)) => Err(format!("unknown format {format}")),
        None => Err("empty value".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::state::{PendingOffset, TxnState};

    #[test]
    fn state_round_trips_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut metadata = TxnMetadata::new("tx-1", 7, 3, 60_000);
        metadata.state = TxnState::PrepareCommit;
        metadata.partitions.insert(("out".into(), 2));
        metadata.groups.insert("g".into());
        metadata.pending_offsets.push(PendingOffset {
            group: "g".into(),
            topic: "in".into(),
            partition: 0,
            offset: 42,
            leader_epoch: -1,
            metadata: None,
        });
        {
            let store = TxnStore::open(dir.path()).unwrap();
            store.put(&metadata, true).unwrap();
        }
        let store = TxnStore::open(dir.path()).unwrap();
        assert_eq!(store.load().unwrap(), [metadata]);
    }

    #[test]
    fn a_value_that_does_not_decode_is_named() {
        assert!(decode(&[9, 1, 2]).unwrap_err().contains("format 9"));
        assert!(decode(&[]).is_err());
        assert!(decode(&[FORMAT, 0xff]).is_err());
    }
}
