//! Checkpoints of a task's committed state: RocksDB hard-links its files
//! into a directory built aside and renamed into place, so a checkpoint
//! directory is always whole (the names come from `layout`).

use std::path::Path;

use crate::layout::{self, CheckpointPaths};

use super::{StateError, TaskState};

impl TaskState {
    /// Takes a checkpoint of the committed state (RocksDB hard-links its
    /// files) as `<dir>/<offset, 20 digits>` (`offset`: the first input's),
    /// built aside and renamed into place, so a checkpoint directory is
    /// always whole; one already at that offset is replaced (another input
    /// may have moved since). Then removes the oldest beyond `keep`.
    pub fn checkpoint(&mut self, dir: &Path, offset: i64, keep: usize) -> Result<(), StateError> {
        self.settle()?;
        let io = |what: String, error: std::io::Error| {
            StateError::Io(format!("checkpoint: {what}"), error)
        };
        std::fs::create_dir_all(dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
        let CheckpointPaths {
            target,
            building,
            replaced,
        } = CheckpointPaths::new(dir, offset);
        if building.exists() {
            std::fs::remove_dir_all(&building)
                .map_err(|e| io(format!("removing {}", building.display()), e))?;
        }
        rocksdb::checkpoint::Checkpoint::new(&self.db)?.create_checkpoint(&building)?;
        // One already at this offset is renamed aside first and removed
        // last: some checkpoint at this offset exists at every moment.
        if target.exists() {
            if replaced.exists() {
                std::fs::remove_dir_all(&replaced)
                    .map_err(|e| io(format!("removing {}", replaced.display()), e))?;
            }
            std::fs::rename(&target, &replaced)
                .map_err(|e| io(format!("renaming {}", target.display()), e))?;
        }
        std::fs::rename(&building, &target)
            .map_err(|e| io(format!("renaming {}", building.display()), e))?;
        if replaced.exists() {
            std::fs::remove_dir_all(&replaced)
                .map_err(|e| io(format!("removing {}", replaced.display()), e))?;
        }
        let all =
            layout::checkpoints(dir).map_err(|e| io(format!("listing {}", dir.display()), e))?;
        for (_, old) in all.iter().take(all.len().saturating_sub(keep)) {
            std::fs::remove_dir_all(old)
                .map_err(|e| io(format!("removing {}", old.display()), e))?;
        }
        Ok(())
    }
}
