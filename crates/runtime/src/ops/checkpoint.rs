//! `checkpoint`: a checkpoint of every stateful task's committed state,
//! taken directly when the app is not running (holding its run lock), or
//! asked of the running tasks through the version's request file (a fresh
//! token each task answers once its checkpoint is taken).

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::error::RuntimeError;
use crate::layout::{self, LayoutError, checkpoints, lock_running, task_dirs};
use crate::location::Location;
use crate::state::TaskState;
use crate::topology::App;

/// How long `checkpoint` waits for the running tasks to answer.
const ANSWER_MAX: Duration = Duration::from_secs(60);
/// How often it looks for their answers.
const ANSWER_CHECK_EVERY: Duration = Duration::from_millis(20);

/// A checkpoint a task took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCheckpoint {
    /// `<processor>/<partition>`.
    pub task: String,
    /// The task's first input offset the checkpoint is at.
    pub offset: i64,
}

/// Checkpoints every task with stores: directly when the app is not
/// running, else by asking the running tasks (and waiting for them).
pub async fn checkpoint(
    app: &App,
    location: &Location,
) -> Result<Vec<TaskCheckpoint>, RuntimeError> {
    let root = location.state_dir();
    let tasks: Vec<(String, i32, PathBuf)> = app
        .processors
        .iter()
        .filter(|p| !p.stores.is_empty())
        .flat_map(|p| {
            let dirs = task_dirs(&layout::processor_dir(root, &p.name)).unwrap_or_default();
            dirs.into_iter()
                .map(move |(partition, dir)| (p.name.clone(), partition, dir))
        })
        .collect();
    if tasks.is_empty() {
        return Err(RuntimeError::Config(
            "no task with state has run yet: nothing to checkpoint (run the app first)".into(),
        ));
    }
    let mut taken = Vec::new();
    let lock = match lock_running(root) {
        Ok(lock) => Some(lock),
        // Held: the app runs (or a rebuild holds it for its swap).
        Err(LayoutError::Locked { .. }) => None,
        Err(error) => return Err(error.into()),
    };
    if lock.is_some() {
        for (processor, partition, dir) in &tasks {
            let spec = app
                .processors
                .iter()
                .find(|p| &p.name == processor)
                .expect("listed from the processors");
            let stores: Vec<&str> = spec.stores.iter().map(|s| s.name.as_str()).collect();
            let mut state = TaskState::open(dir, &stores, true)?;
            let Some(offset) = state.input_offset(&spec.inputs[0]) else {
                continue;
            };
            let target = layout::checkpoint_dir(root, processor, *partition);
            state.checkpoint(&target, offset, app.config.checkpoints.keep.max(1))?;
            taken.push(TaskCheckpoint {
                task: format!("{processor}/{partition}"),
                offset,
            });
        }
        return Ok(taken);
    }
    // Running: write a fresh token to the request file; each task
    // answers with it once its checkpoint is taken.
    let token = format!("{:?}", SystemTime::now());
    let request = layout::checkpoint_request(root);
    let folder = layout::checkpoints_root(root);
    std::fs::create_dir_all(&folder)
        .map_err(RuntimeError::io(format!("creating {}", folder.display())))?;
    std::fs::write(&request, &token)
        .map_err(RuntimeError::io(format!("writing {}", request.display())))?;
    let deadline = Instant::now() + ANSWER_MAX;
    for (processor, partition, _) in &tasks {
        let dir = layout::checkpoint_dir(root, processor, *partition);
        let answer = layout::checkpoint_answer(&dir);
        while std::fs::read_to_string(&answer).ok().as_deref() != Some(token.as_str()) {
            if Instant::now() > deadline {
                return Err(RuntimeError::NoAnswer {
                    task: format!("{processor}/{partition}"),
                    what: "take its checkpoint".into(),
                    secs: ANSWER_MAX.as_secs(),
                });
            }
            tokio::time::sleep(ANSWER_CHECK_EVERY).await;
        }
        let newest = checkpoints(&dir)
            .map_err(RuntimeError::io(format!("listing {}", dir.display())))?
            .last()
            .map(|(offset, _)| *offset);
        if let Some(offset) = newest {
            taken.push(TaskCheckpoint {
                task: format!("{processor}/{partition}"),
                offset,
            });
        }
    }
    Ok(taken)
}
