//! Where a consumer reads each assigned partition from: the group's
//! committed offset, else the reset policy (earliest, latest, or an error);
//! and where it goes on when a read falls off the log.

use std::collections::BTreeMap;

use super::{Consumer, OffsetReset, TopicPartition};
use crate::admin::committed_offsets;
use crate::fetcher::{list_offset, list_offsets};
use crate::{ClientError, EARLIEST, LATEST};

impl Consumer {
    /// Positions for partitions that have none: the committed offset, or
    /// the reset policy.
    pub(super) async fn resolve_positions(&mut self) -> Result<(), ClientError> {
        let unknown: Vec<TopicPartition> = self
            .positions
            .iter()
            .filter(|(_, at)| at.is_none())
            .map(|(tp, _)| tp.clone())
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let committed = match &self.config.group_id {
            Some(group) => committed_offsets(&self.cluster, group, Some(&unknown)).await?,
            None => BTreeMap::new(),
        };
        let (known, uncommitted): (Vec<_>, Vec<_>) = unknown
            .into_iter()
            .partition(|tp| committed.get(tp).is_some_and(|o| *o >= 0));
        for tp in known {
            let offset = committed[&tp];
            self.positions.insert(tp, Some(offset));
        }
        if uncommitted.is_empty() {
            return Ok(());
        }
        let which = match self.config.offset_reset {
            OffsetReset::Earliest => EARLIEST,
            OffsetReset::Latest => LATEST,
            OffsetReset::None => {
                let (topic, partition) = &uncommitted[0];
                return Err(ClientError::Invalid(format!(
                    "{topic}/{partition} has no committed offset and the reset policy is none"
                )));
            }
        };
        let reset = list_offsets(&self.cluster, &uncommitted, which).await?;
        for tp in uncommitted {
            let offset = reset.get(&tp).copied().flatten().unwrap_or(0);
            self.positions.insert(tp, Some(offset));
        }
        Ok(())
    }

    /// Where a read that fell off the log (OFFSET_OUT_OF_RANGE at
    /// `offset`) goes on, by the reset policy.
    pub(super) async fn reset_offset(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<i64, ClientError> {
        match self.config.offset_reset {
            OffsetReset::Earliest => self.offset_at(topic, partition, EARLIEST).await,
            OffsetReset::Latest => self.offset_at(topic, partition, LATEST).await,
            OffsetReset::None => Err(ClientError::OffsetOutOfRange {
                topic: topic.to_string(),
                partition,
                offset,
            }),
        }
    }

    /// The offset `which` (EARLIEST or LATEST) of a partition, 0 if it has none.
    pub(super) async fn offset_at(
        &self,
        topic: &str,
        partition: i32,
        which: i64,
    ) -> Result<i64, ClientError> {
        Ok(list_offset(&self.cluster, topic, partition, which)
            .await?
            .unwrap_or(0))
    }
}
