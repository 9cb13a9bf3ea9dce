//! A standby: a warm copy of another instance's task, kept by reading the
//! task's changelogs as they grow (see `restore`), so that when the task
//! comes here its restore reads only what the copy has not yet.
//!
//! The copy never runs the processor and has no lineage: when the task is
//! assigned here, its start finds a state without one that knows where it
//! stopped reading, reads the rest and takes the cluster's offsets (see
//! `resume`). A directory that held a live state of the task (it ran here
//! before) is cleared first: its entries are ahead of, or beside, the
//! changelog positions a copy needs.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::board::{TaskBoard, TaskView};
use crate::error::RuntimeError;
use crate::log_access::LogAccess;
use crate::state::TaskState;
use crate::topology::ProcessorSpec;

use super::restore::{ChangelogReader, remove_state};

pub(crate) struct StandbySetup {
    pub spec: ProcessorSpec,
    pub partition: i32,
    pub dir: PathBuf,
    /// Per store, its changelog topic.
    pub changelogs: Vec<Option<String>>,
    pub fetch_bytes: u32,
    pub log: LogAccess,
    pub stop: Arc<AtomicBool>,
    pub board: TaskBoard,
}

impl StandbySetup {
    pub fn name(&self) -> String {
        format!("{}/{}", self.spec.name, self.partition)
    }
}

/// Keeps the copy until told to stop.
pub(crate) async fn run(setup: StandbySetup) -> Result<(), RuntimeError> {
    let log = setup.log.with_thread_fetches().await?;
    let stores: Vec<String> = setup.spec.stores.iter().map(|s| s.name.clone()).collect();
    let names: Vec<&str> = stores.iter().map(String::as_str).collect();
    std::fs::create_dir_all(&setup.dir).map_err(RuntimeError::io(format!(
        "creating {}",
        setup.dir.display()
    )))?;
    let reader = ChangelogReader {
        log: &log,
        task: setup.name(),
        partition: setup.partition,
        fetch_bytes: setup.fetch_bytes,
        changelogs: &setup.changelogs,
        board: &setup.board,
    };
    let entry = setup
        .board
        .enter(setup.name(), TaskView::Standby { behind: 0 });
    // Per store, the changelog offsets the copy has not read yet.
    let mut behind = vec![0i64; stores.len()];
    let mut state = TaskState::open(&setup.dir, &names, false)?;
    if state.lineage().is_some() || !reader.resumable(&state, &stores).await? {
        drop(state);
        remove_state(&setup.dir)?;
        state = TaskState::open(&setup.dir, &names, false)?;
    }
    tracing::info!(task = %setup.name(), "keeping a standby copy");
    // Per store, the changelog offset the copy reached.
    let mut reached = vec![0i64; stores.len()];
    for (at, store) in stores.iter().enumerate() {
        reached[at] = state.restored_position(store)?.unwrap_or(0);
    }
    setup.board.set_copy(&setup.name(), reached.iter().sum());
    while !setup.stop.load(Ordering::Relaxed) {
        for (index, (store, changelog)) in stores.iter().zip(&setup.changelogs).enumerate() {
            let Some(changelog) = changelog else {
                continue;
            };
            let start = log.start_offset(changelog, setup.partition).await?;
            let next = state.restored_position(store)?.unwrap_or(start);
            if next < start {
                // Compacted or deleted past the copy: it starts over.
                drop(state);
                remove_state(&setup.dir)?;
                state = TaskState::open(&setup.dir, &names, false)?;
                reached.fill(0);
                break;
            }
            // Remote, the fetch waits on the broker when nothing is new.
            let mut restoring = state.restoring(store)?;
            let read = (reader.read_once(&mut restoring, store, changelog, next)).await?;
            restoring.flush()?;
            behind[index] = (read.end - read.reached).max(0);
            reached[index] = read.reached;
            setup.board.set_copy(&setup.name(), reached.iter().sum());
            entry.set(TaskView::Standby {
                behind: behind.iter().sum(),
            });
        }
    }
    Ok(())
}
