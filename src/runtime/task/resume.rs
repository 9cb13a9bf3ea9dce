//! Where a remote task resumes (docs/design.md §5, "restart"): once its
//! transactional id is fenced for every older instance, the input offsets
//! the cluster committed last name the state they belong to (lineage and
//! commit number, in their metadata), and the local state is one of:
//!
//! | the cluster's mark | local state | what it means | the task |
//! |---|---|---|---|
//! | none | any | nothing was committed through a transaction yet | goes on from the local state, shipping its outbox |
//! | (L, n) | (L, n) | the last commit's transaction committed | drops the outbox (it is in the log) |
//! | (L, n) | (L, n + 1) | the last commit's transaction did not | ships the outbox and offsets again |
//! | (L, n) | anything else, or no state | the local state is stale, or gone | restores from the changelogs |
//!
//! A restore starts from an empty state directory, reads each store's
//! changelog partition from its start to its end (`read_committed`: only
//! what committed transactions wrote, which is exactly the committed
//! state), and ends with the cluster's input offsets and a new lineage in
//! one synced write. A restore cut short leaves a state without a lineage,
//! which the next start restores again.

use std::time::Instant;

use crate::client::AbortedFilter;
use crate::record::RecordBatch;
use crate::runtime::error::RuntimeError;
use crate::runtime::log_access::Remote;
use crate::runtime::state::TaskState;

use super::TaskSetup;
use super::transaction::{CommitMark, TaskTxn};

/// What the task found at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resumed {
    /// The local state is the committed one (or nothing was committed
    /// through a transaction yet); its outbox, if any, is to be shipped.
    Local,
    /// The local state is the committed one and its outbox is in the log:
    /// the outbox was dropped.
    Shipped(CommitMark),
    /// The state was restored from the changelogs.
    Restored(CommitMark),
}

/// Checks the local state against the cluster's committed mark, and
/// restores it when it is not the committed one. Returns the state to run
/// with (the same, or the restored one) and what was found.
pub(crate) async fn resume(
    setup: &TaskSetup,
    state: TaskState,
    txn: &TaskTxn,
    remote: &Remote,
) -> Result<(TaskState, Resumed), RuntimeError> {
    let partitions: Vec<(String, i32)> = setup
        .log_topics
        .iter()
        .map(|t| (t.clone(), setup.partition))
        .collect();
    let committed = remote
        .admin
        .committed_with_metadata(&txn.names().group, &partitions, true)
        .await?;
    let mut offsets = Vec::new();
    let mut mark = None;
    for (at, topic) in setup.spec.inputs.iter().enumerate() {
        let Some(found) = committed.get(&partitions[at]) else {
            continue;
        };
        if found.offset >= 0 {
            offsets.push((topic.as_str(), found.offset));
            mark = mark.or(CommitMark::parse(&found.metadata));
        }
    }
    let Some(mark) = mark else {
        return Ok((state, Resumed::Local));
    };
    let local = state
        .lineage()
        .map(|lineage| (lineage, state.commit_number()));
    if local == Some((mark.lineage, mark.commit)) {
        if let Some((last, _)) = state.outbox()?.last() {
            state.remove_shipped(*last)?;
        }
        return Ok((state, Resumed::Shipped(mark)));
    }
    if local == Some((mark.lineage, mark.commit + 1)) {
        return Ok((state, Resumed::Local));
    }
    tracing::info!(
        task = %setup.name(),
        "the local state is not the one last committed (cluster: commit {} of lineage {:016x}; local: {}): restoring it from the changelogs",
        mark.commit,
        mark.lineage,
        match local {
            Some((lineage, commit)) => format!("commit {commit} of lineage {lineage:016x}"),
            None => "none".to_string(),
        }
    );
    let stores: Vec<String> = setup.spec.stores.iter().map(|s| s.name.clone()).collect();
    let store_names: Vec<&str> = stores.iter().map(String::as_str).collect();
    drop(state);
    remove_state(&setup.dir)?;
    let mut state = TaskState::open(&setup.dir, &store_names, setup.config.sync)?;
    for (store, changelog) in stores.iter().zip(&setup.changelogs) {
        let Some(changelog) = changelog else {
            continue;
        };
        restore_store(setup, &mut state, store, changelog).await?;
    }
    let lineage = state.finish_restore(&offsets, mark.commit, txn.identity())?;
    Ok((
        state,
        Resumed::Restored(CommitMark {
            lineage,
            commit: mark.commit,
        }),
    ))
}

/// Reads `store`'s changelog partition from its start to its end into the
/// (empty) store.
async fn restore_store(
    setup: &TaskSetup,
    state: &mut TaskState,
    store: &str,
    changelog: &str,
) -> Result<(), RuntimeError> {
    let partition = setup.partition;
    let failed = |reason: String| RuntimeError::Restore {
        task: setup.name(),
        store: store.to_string(),
        topic: changelog.to_string(),
        partition,
        reason,
    };
    let started = Instant::now();
    let mut next = setup.log.start_offset(changelog, partition).await?;
    let end = setup.log.end_offset(changelog, partition).await?;
    let mut restoring = state.restoring(store)?;
    let mut records = 0u64;
    while next < end {
        let fetched = setup
            .log
            .fetch(changelog, partition, next, setup.config.fetch_bytes)
            .await?;
        let mut filter = AbortedFilter::new(fetched.aborted);
        let mut rest: &[u8] = &fetched.records;
        let before = next;
        while !rest.is_empty() {
            let batch = match RecordBatch::parse_and_verify(rest) {
                Ok(batch) => batch,
                // A fetch may end inside a batch; the next starts there.
                Err(_) if next > before => break,
                Err(error) => return Err(failed(format!("offset {next}: {error}"))),
            };
            rest = &rest[batch.size_bytes()..];
            let header = *batch.header();
            if filter.visible(&batch) {
                let batch_records = batch
                    .records(super::DECOMPRESSED_BYTES_MAX)
                    .map_err(|e| failed(format!("offset {}: {e}", header.base_offset)))?;
                for record in batch_records.iter() {
                    let record = record
                        .map_err(|e| failed(format!("offset {}: {e}", header.base_offset)))?;
                    if record.offset < next {
                        continue;
                    }
                    let Some(key) = record.key else {
                        return Err(failed(format!(
                            "offset {}: a record without a key",
                            record.offset
                        )));
                    };
                    restoring.put(key, record.value)?;
                    records += 1;
                }
            }
            next = next.max(header.next_offset());
        }
        if next == before {
            return Err(failed(format!(
                "no progress at offset {next} (the partition ends at {end})"
            )));
        }
    }
    restoring.flush()?;
    tracing::info!(
        task = %setup.name(),
        "restored {store} from {changelog}/{partition}: {records} records to offset {end} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Removes a task's state directory (a stale copy about to be restored).
fn remove_state(dir: &std::path::Path) -> Result<(), RuntimeError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(RuntimeError::Io {
                context: format!("removing the stale state {}", dir.display()),
                error,
            });
        }
    }
    std::fs::create_dir_all(dir).map_err(RuntimeError::io(format!("creating {}", dir.display())))
}
