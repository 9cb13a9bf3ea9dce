//! What the coordinator does without a request: at open, finishing the
//! decisions a crash interrupted and aborting hanging transactions; on a
//! timer, aborting transactions past their timeout and writing markers
//! that could not be written before (the protocol is in `coordinator`).

use std::collections::BTreeSet;

use super::coordinator::{TxnCoordinator, lock};
use super::markers;
use super::state::TxnState;
use crate::group::GroupCoordinator;
use strata_record::MarkerKind;
use strata_record::time::now_ms;

impl TxnCoordinator {
    /// Finishes what a crash interrupted: transactions in a Prepare state
    /// get their markers (and offsets) again; a transaction open in a
    /// partition that no Ongoing transaction of the coordinator accounts for
    /// (a hanging transaction) is aborted there.
    pub fn recover(&self, groups: &GroupCoordinator) {
        for entry in self.entries() {
            let mut metadata = lock(&entry);
            if metadata.state.is_preparing() {
                tracing::info!(
                    transactional_id = metadata.transactional_id,
                    state = metadata.state.name(),
                    "finishing a transaction interrupted by a restart"
                );
                self.complete(&mut metadata, groups);
            }
        }
        self.abort_hanging();
    }

    /// Aborts transactions left open in partitions that no transaction of
    /// the coordinator in progress (Ongoing, or a decision whose markers are
    /// still to be written) names.
    fn abort_hanging(&self) {
        let mut accounted: BTreeSet<(i64, String, i32)> = BTreeSet::new();
        for entry in self.entries() {
            let metadata = lock(&entry);
            if !metadata.state.is_idle() {
                for (topic, partition) in &metadata.partitions {
                    accounted.insert((metadata.producer_id, topic.clone(), *partition));
                }
            }
        }
        for topic in self.log.topics() {
            for (index, partition) in topic.partitions.iter().enumerate() {
                let index = i32::try_from(index).expect("partition counts fit i32");
                for open in partition.open_transactions() {
                    let key = (open.producer_id, topic.name().to_string(), index);
                    if accounted.contains(&key) {
                        continue;
                    }
                    tracing::warn!(
                        partition = partition.name(),
                        producer_id = open.producer_id,
                        first_offset = open.first_offset,
                        "aborting a transaction no coordinator state accounts for"
                    );
                    let target = [(topic.name().to_string(), index)];
                    if let Err(error) = markers::write(
                        &self.log,
                        &self.appends,
                        &target,
                        open.producer_id,
                        open.producer_epoch,
                        MarkerKind::Abort,
                    ) {
                        tracing::error!(
                            partition = partition.name(),
                            "could not abort a hanging transaction: {error}"
                        );
                    }
                }
            }
        }
    }

    /// Aborts transactions past their timeout (bumping the producer's epoch
    /// first, so the producer that let it expire is fenced), and finishes
    /// decisions whose markers could not be written before.
    pub fn tick(&self, groups: &GroupCoordinator) {
        let now = now_ms();
        for entry in self.entries() {
            let mut metadata = lock(&entry);
            if metadata.state.is_preparing() {
                self.complete(&mut metadata, groups);
                continue;
            }
            if !metadata.expired(now) {
                continue;
            }
            let id = metadata.transactional_id.clone();
            let bumped = match self.log.producer_ids().init_transactional(&id, None, now) {
                Ok(bumped) if bumped.producer_id == metadata.producer_id => bumped.epoch,
                Ok(_) => metadata.producer_epoch,
                Err(error) => {
                    tracing::error!(
                        transactional_id = id,
                        "fencing a timed-out producer: {error}"
                    );
                    continue;
                }
            };
            tracing::info!(
                transactional_id = id,
                timeout_ms = metadata.timeout_ms,
                "aborting a transaction past its timeout"
            );
            metadata.producer_epoch = bumped;
            if let Err(error) = self.decide(&mut metadata, TxnState::PrepareAbort) {
                tracing::error!(transactional_id = id, "{error}");
                continue;
            }
            self.complete(&mut metadata, groups);
        }
    }
}
