//! Where a remote task resumes (docs/design.md §5, "restart"): once its
//! transactional id is fenced for every older instance, the positions the
//! cluster committed last (its positions log's, mirrored in its group's
//! offsets: see `positions`) name the state they belong to (lineage and
//! commit number), and the local state is one of:
//!
//! | the cluster's mark | local state | what it means | the task |
//! |---|---|---|---|
//! | none | any | nothing was committed through a transaction yet | goes on from the local state, shipping its outbox |
//! | (L, n) | (L, n) | the last commit's transaction committed | drops the outbox (it is in the log) |
//! | (L, n) | (L, n + 1) | the last commit's transaction did not | ships the outbox and offsets again |
//! | (L, n) | anything else, or no state | the local state is stale, or gone | restores from the changelogs |
//!
//! A restore reads each store's changelog partition to its end
//! (`read_committed`: only what committed transactions wrote, which is
//! exactly the committed state), and ends with the cluster's input offsets
//! and a new lineage in one synced write. It starts from an empty state
//! directory, or, for a state without a lineage that knows where it
//! stopped reading (a restore cut short, or a standby copy kept warm by
//! another instance's assignment), from there (see `restore`).

use crate::error::RuntimeError;
use crate::log_access::Remote;
use crate::state::TaskState;

use super::TaskSetup;
use super::positions;
use super::restore::{ChangelogReader, remove_state};
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
    let Some(committed) = positions::committed(setup, &txn.names().group, remote).await? else {
        return Ok((state, Resumed::Local));
    };
    let mark = committed.mark;
    let offsets: Vec<(&str, i64)> = (committed.offsets.iter())
        .map(|(topic, next)| (topic.as_str(), *next))
        .collect();
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
    let reader = ChangelogReader::of(setup);
    // A restore cut short, or a standby copy, goes on where it stopped;
    // any other state is replaced whole.
    let state = match reader.resumable(&state, &stores).await? {
        true => state,
        false => {
            drop(state);
            remove_state(&setup.dir)?;
            TaskState::open(&setup.dir, &store_names, setup.config.sync)?
        }
    };
    let mut state = state;
    for (store, changelog) in stores.iter().zip(&setup.changelogs) {
        let Some(changelog) = changelog else {
            continue;
        };
        reader.restore(&mut state, store, changelog).await?;
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
