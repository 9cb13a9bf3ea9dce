//! The transaction coordinator: Kafka's transactions, so that a producer's
//! writes to several partitions, and the consumer offsets it commits with
//! them, become visible to `read_committed` readers all at once or never.
//!
//! A transactional producer gets its producer id and epoch from
//! InitProducerId (which fences any older producer of the same
//! transactional id), names each partition before writing to it
//! (AddPartitionsToTxn) and each consumer group whose offsets it commits
//! (AddOffsetsToTxn, then TxnOffsetCommit), and ends with EndTxn. The
//! coordinator then has the log write a COMMIT or ABORT marker in every
//! partition of the transaction; the log keeps, per partition, the open
//! transactions (the last stable offset stops before the oldest) and the
//! aborted ones (`log::transaction_index`).
//!
//! The state of each transactional id is durable ([`store`]); the protocol
//! that ends a transaction, with its crash windows, is in [`coordinator`].

mod config;
mod coordinator;
mod crash_point;
mod markers;
mod offsets;
mod producer;
mod state;
mod store;
mod upkeep;

pub use config::TxnConfig;
pub use coordinator::{InitRefusal, TxnCoordinator};
pub use producer::TxnProducer;
pub use state::{PendingOffset, TxnMetadata, TxnState};
pub use store::TxnStoreError;
