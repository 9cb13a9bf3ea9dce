//! Step 3 of ending a committed transaction (see `coordinator`): the
//! offsets it carries, committed to their groups, one commit per group.

use std::collections::HashMap;

use strata_record::time::now_ms;

use super::state::TxnMetadata;
use crate::group::GroupCoordinator;
use crate::group::offsets::{CommittedOffset, PartitionOffset};

/// Step 3: the transaction's offsets, committed per group.
pub(super) fn commit_pending_offsets(
    metadata: &TxnMetadata,
    groups: &GroupCoordinator,
) -> Result<(), String> {
    let now = now_ms();
    let mut by_group: HashMap<&str, Vec<PartitionOffset>> = HashMap::new();
    for pending in &metadata.pending_offsets {
        by_group
            .entry(pending.group.as_str())
            .or_default()
            .push(PartitionOffset {
                topic: pending.topic.clone(),
                partition: pending.partition,
                committed: CommittedOffset {
                    offset: pending.offset,
                    leader_epoch: pending.leader_epoch,
                    metadata: pending.metadata.clone(),
                    commit_time_ms: now,
                },
            });
    }
    for (group, offsets) in by_group {
        groups.commit(group, &offsets).map_err(|e| e.to_string())?;
    }
    Ok(())
}
