//! Deleting a topic, crash-safe: its metadata renamed to
//! `topics/.<id>.deleting` (the commit point), then its partition
//! directories renamed aside and removed, then that file; an open after a
//! crash finishes what a deletion left.

use super::{LogManager, TOPICS_DIR, TopicMetadata, read_metadata};
use crate::LogError;
use crate::files::list_dir;

impl LogManager {
    /// Deletes a topic and all its data.
    pub fn delete_topic(&self, name: &str) -> Result<(), LogError> {
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        let topic = topics
            .remove(name)
            .ok_or_else(|| LogError::UnknownTopic(name.to_string()))?;
        // The commit point: once the metadata is renamed the topic is gone,
        // and an open after a crash finishes removing its directories.
        let metadata_path = self.metadata_path(name);
        let deleting = self
            .data_dir
            .join(TOPICS_DIR)
            .join(format!(".{}.deleting", topic.id().simple()));
        self.disk.rename(&metadata_path, &deleting)?;
        self.disk.sync_dir(&self.data_dir.join(TOPICS_DIR))?;
        self.remove_partition_dirs(&topic.metadata)?;
        self.disk.remove_file(&deleting)?;
        tracing::info!(topic = name, "deleted topic");
        Ok(())
    }

    /// Finishes deletions a crash interrupted: each `topics/.<id>.deleting`
    /// names a deleted topic whose partition directories may remain.
    pub(super) fn remove_deleted_leftovers(&self) -> Result<(), LogError> {
        self.finish_deletions(None)?;
        let topics_dir = self.data_dir.join(TOPICS_DIR);
        for path in list_dir(&topics_dir)? {
            if path.extension().is_some_and(|e| e == "tmp") {
                self.disk.remove_if_exists(&path)?;
            }
        }
        for path in list_dir(&self.data_dir)? {
            if path.is_dir() && path.extension().is_some_and(|e| e == "deleted") {
                self.disk.remove_dir_all(&path)?;
            }
        }
        Ok(())
    }

    /// Completes deletions recorded by `topics/.<id>.deleting` files (of the
    /// topic `only`, or of all): removes the deleted topic's directories,
    /// then the file. If a topic of that name exists again, its directories
    /// are its own and stay.
    pub(super) fn finish_deletions(&self, only: Option<&str>) -> Result<(), LogError> {
        let topics_dir = self.data_dir.join(TOPICS_DIR);
        for path in list_dir(&topics_dir)? {
            if path.extension().is_none_or(|e| e != "deleting") {
                continue;
            }
            let metadata = read_metadata(&path)?;
            if only.is_some_and(|name| name != metadata.name) {
                continue;
            }
            if self.metadata_path(&metadata.name).exists() {
                tracing::warn!(topic = %metadata.name, "a topic of a deleted topic's name exists; keeping its directories");
            } else {
                tracing::info!(topic = %metadata.name, "finishing a topic deletion");
                self.remove_partition_dirs(&metadata)?;
            }
            self.disk.remove_file(&path)?;
        }
        Ok(())
    }

    pub(super) fn remove_partition_dirs(&self, metadata: &TopicMetadata) -> Result<(), LogError> {
        for p in 0..metadata.partitions {
            let dir = self.partition_dir(&metadata.name, p);
            if !dir.exists() {
                continue;
            }
            // Renamed first so that a crash mid-removal leaves a name open
            // will not mistake for a live partition.
            let doomed = self
                .data_dir
                .join(format!("{}-{p}.deleted", metadata.id.simple()));
            self.disk.rename(&dir, &doomed)?;
            self.disk.remove_dir_all(&doomed)?;
        }
        self.disk.sync_dir(&self.data_dir)
    }
}
