//! The segment log on disk: appends, group commit, recovery after crashes, power loss and full disks, retention, compaction, indexes, producer state, transactions.
//!
//! One test binary per area, each file a module: a change relinks a few
//! binaries, not one per file.

#[path = "../support/mod.rs"]
mod support;

mod compaction;
mod full_disk;
mod group_commit;
mod idempotent;
mod model;
mod power_loss;
mod recovery_copy_mid_append;
mod recovery_index_files;
mod recovery_mid_segment_corruption;
mod recovery_torn_tail;
mod recovery_zeroed_and_garbage_tail;
mod retention;
mod timestamp_lookup;
mod topics;
mod transactions;
mod verify;
