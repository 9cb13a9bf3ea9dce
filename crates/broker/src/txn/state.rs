//! What the coordinator knows of one transactional id: the producer that
//! owns it, the transaction in progress, and where that transaction is in
//! its life.
//!
//! ```text
//!            AddPartitionsToTxn / AddOffsetsToTxn
//!   Empty ──────────────────────────────────────────▶ Ongoing ◀──┐ more partitions,
//!     ▲                                                │  │  └──┘ offsets
//!     │                              EndTxn(commit)    │  │ EndTxn(abort), timeout,
//!     │                                 ┌──────────────┘  │ a new producer (fencing)
//!     │                                 ▼                 ▼
//!     │                          PrepareCommit      PrepareAbort     (durable: the
//!     │                                 │                 │           decision)
//!     │                 markers written, offsets applied  │ markers written
//!     │                                 ▼                 ▼
//!     └─────── next transaction ─ CompleteCommit    CompleteAbort
//! ```
//!
//! A Complete state begins the next transaction as Empty does. A Prepare
//! state is never left without writing every marker: after a crash the
//! coordinator finishes it when it opens.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Kafka's transaction states (their names are on the wire, in
/// DescribeTransactions and ListTransactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    pub const ALL: [TxnState; 6] = [
        Self::Empty,
        Self::Ongoing,
        Self::PrepareCommit,
        Self::PrepareAbort,
        Self::CompleteCommit,
        Self::CompleteAbort,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
        }
    }

    /// Whether a decision is being carried out (markers being written).
    pub fn is_preparing(self) -> bool {
        matches!(self, Self::PrepareCommit | Self::PrepareAbort)
    }

    /// Whether no transaction is in progress: the next operation begins one.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            Self::Empty | Self::CompleteCommit | Self::CompleteAbort
        )
    }
}

/// An offset a transaction commits for a consumer group, applied to the
/// group's committed offsets only when the transaction commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// One transactional id's state, as stored (see `store`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMetadata {
    pub transactional_id: String,
    /// The producer id and epoch of the transaction in progress (or of the
    /// last one): the markers carry them.
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions the transaction wrote to (or may have).
    pub partitions: BTreeSet<(String, i32)>,
    /// Consumer groups whose offsets the transaction commits.
    pub groups: BTreeSet<String>,
    pub pending_offsets: Vec<PendingOffset>,
    /// When the transaction began (broker time, ms); -1 when idle.
    pub start_ms: i64,
    pub last_update_ms: i64,
}

impl TxnMetadata {
    pub fn new(transactional_id: &str, producer_id: i64, epoch: i16, timeout_ms: i32) -> Self {
        Self {
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch: epoch,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            pending_offsets: Vec::new(),
            start_ms: -1,
            last_update_ms: -1,
        }
    }

    /// Starts a transaction if none is in progress.
    pub fn begin_if_idle(&mut self, now_ms: i64) {
        if self.state.is_idle() {
            self.state = TxnState::Ongoing;
            self.partitions.clear();
            self.groups.clear();
            self.pending_offsets.clear();
            self.start_ms = now_ms;
        }
    }

    /// Whether the transaction in progress has outlived its timeout.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing
            && self.start_ms >= 0
            && now_ms.saturating_sub(self.start_ms) > i64::from(self.timeout_ms)
    }
}
