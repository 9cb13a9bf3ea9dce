//! What each task of a running instance is doing now: running, restoring
//! its state (how far), or keeping a standby copy (how far behind).
//!
//! Tasks write their line as they go; the runner publishes the board
//! three ways: `<state-dir>/tasks.json` once a second (for `status`, which
//! runs as another process), `/metrics` on `--metrics ADDR` (see
//! `metrics`), and a restore bar on a terminal. The file is replaced whole
//! (see `layout`) and stamped with the time it was written: `status` reads
//! it only while an instance holds the state directory's run lock and the
//! file is at most [`FRESH_FOR`] old (a killed instance's file says
//! nothing).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::layout;
use super::task_metrics::TaskMetrics;

/// Hot keys published per task.
const HOT_KEYS_PUBLISHED: usize = 10;

/// How long a board file is taken to say what its instance does now.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(10);

/// One task's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TaskView {
    /// Reading its changelogs into a fresh state before it processes:
    /// `done` of `total` changelog offsets, `records` put back so far.
    Restoring {
        done: i64,
        total: i64,
        records: u64,
    },
    Running,
    /// A warm copy of a task another instance runs: changelog offsets not
    /// yet in the copy, as of its last read.
    Standby {
        behind: i64,
    },
}

impl std::fmt::Display for TaskView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Restoring { done, total, .. } => {
                let percent = *done as f64 * 100.0 / (*total).max(1) as f64;
                write!(f, "restoring {percent:.0}% ({done}/{total})")
            }
            Self::Running => f.write_str("running"),
            Self::Standby { behind } => write!(f, "standby, {behind} behind"),
        }
    }
}

/// The board of one instance, shared by its tasks (cheap to clone).
#[derive(Clone, Default)]
pub(crate) struct TaskBoard {
    lines: Arc<Mutex<BTreeMap<String, TaskView>>>,
    /// Per copy of a task's state held here and not run (a standby's, or
    /// one a standby left), how far it read the task's changelogs, summed
    /// over stores: what the instance tells its group at every join.
    copies: Arc<Mutex<BTreeMap<String, i64>>>,
    /// Changelog records put back by this instance's restores, in all.
    restored: Arc<AtomicU64>,
    /// The time those restores took, summed over tasks (nanoseconds).
    restoring_nanos: Arc<AtomicU64>,
    /// Each running task's counters, for `/metrics`.
    metrics: Arc<Mutex<BTreeMap<String, Arc<TaskMetrics>>>>,
}

/// A task's place on the board: its line goes when this is dropped, however
/// the task ends.
pub(crate) struct BoardEntry {
    board: TaskBoard,
    task: String,
}

impl BoardEntry {
    pub fn set(&self, view: TaskView) {
        self.board.set(&self.task, view);
    }

    /// Shows `metrics` as the task's counters until the entry drops.
    pub fn count_with(&self, metrics: Arc<TaskMetrics>) {
        let mut all = self.board.metrics.lock().unwrap_or_else(|e| e.into_inner());
        all.insert(self.task.clone(), metrics);
    }
}

impl Drop for BoardEntry {
    fn drop(&mut self) {
        self.board.lines().remove(&self.task);
        let mut metrics = self.board.metrics.lock().unwrap_or_else(|e| e.into_inner());
        metrics.remove(&self.task);
    }
}

/// The file's contents.
#[derive(Serialize, Deserialize)]
struct BoardFile {
    written_ms: i64,
    tasks: BTreeMap<String, TaskView>,
    /// Per running task, the keys it read most (`status --keys`).
    #[serde(default)]
    hot_keys: BTreeMap<String, Vec<HotKeyLine>>,
}

/// One of a task's hottest keys, as `status --keys` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HotKeyLine {
    pub key: String,
    /// Records read with it (estimated from a sample), at most `error`
    /// over.
    pub records: u64,
    pub error: u64,
    /// When (ms) its counting began.
    pub since_ms: i64,
}

impl TaskBoard {
    /// A place for `task` (a standby copy and the task itself are not on
    /// one instance's board at once: the task starts once its copy has
    /// stopped).
    pub fn enter(&self, task: String, view: TaskView) -> BoardEntry {
        self.lines().insert(task.clone(), view);
        BoardEntry {
            board: self.clone(),
            task,
        }
    }

    /// Changes the line of a task on the board (one without a place is
    /// not put on it: its entry has gone).
    pub fn set(&self, task: &str, view: TaskView) {
        if let Some(line) = self.lines().get_mut(task) {
            *line = view;
        }
    }

    pub fn snapshot(&self) -> BTreeMap<String, TaskView> {
        self.lines().clone()
    }

    /// Notes how far the copy of `task` held here read its changelogs.
    pub fn set_copy(&self, task: &str, reached: i64) {
        let mut copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        copies.insert(task.to_string(), reached);
    }

    /// Forgets the copy of `task` (it runs here now, or its state went).
    pub fn forget_copy(&self, task: &str) {
        let mut copies = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        copies.remove(task);
    }

    /// Every copy held here and how far it read.
    pub fn copies(&self) -> BTreeMap<String, i64> {
        self.copies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Counts `records` put back by a restore that took `took`.
    pub fn restored(&self, records: u64, took: Duration) {
        self.restored.fetch_add(records, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.restoring_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Restores in progress: changelog offsets done and in all, summed.
    pub fn restoring(&self) -> Option<(u64, u64)> {
        let lines = self.lines();
        let mut sum = None;
        for view in lines.values() {
            if let TaskView::Restoring { done, total, .. } = view {
                let (d, t) = sum.get_or_insert((0u64, 0u64));
                *d += (*done).max(0) as u64;
                *t += (*total).max(0) as u64;
            }
        }
        sum
    }

    /// Writes the board to `<state_dir>/tasks.json`.
    pub fn publish(&self, state_dir: &Path) -> Result<(), layout::LayoutError> {
        let hot_keys = (self.task_metrics().iter())
            .map(|(task, metrics)| {
                let lines = (metrics.hot_keys(HOT_KEYS_PUBLISHED).into_iter())
                    .map(|hot| HotKeyLine {
                        key: String::from_utf8_lossy(&hot.key).into_owned(),
                        records: hot.count,
                        error: hot.error,
                        since_ms: hot.since_ms,
                    })
                    .collect();
                (task.clone(), lines)
            })
            .collect();
        let file = BoardFile {
            written_ms: strata_record::time::now_ms(),
            tasks: self.snapshot(),
            hot_keys,
        };
        let json = serde_json::to_string(&file).expect("the board serializes");
        layout::write_whole(&layout::task_board_file(state_dir), &json)
    }

    /// The running tasks' counters.
    pub fn task_metrics(&self) -> BTreeMap<String, Arc<TaskMetrics>> {
        (self.metrics.lock().unwrap_or_else(|e| e.into_inner())).clone()
    }

    /// Changelog records put back by this instance's restores, in all.
    pub fn restored_in_all(&self) -> u64 {
        self.restored.load(Ordering::Relaxed)
    }

    /// The time this instance's restores took, summed over tasks.
    pub fn restoring_in_all(&self) -> Duration {
        Duration::from_nanos(self.restoring_nanos.load(Ordering::Relaxed))
    }

    fn lines(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, TaskView>> {
        // A task that panicked while holding the lock left a whole map.
        self.lines.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The hottest keys of each task the instance running in `state_dir`
/// runs, as it last published them (None when none runs there).
pub(crate) fn read_published_hot_keys(
    state_dir: &Path,
) -> Option<BTreeMap<String, Vec<HotKeyLine>>> {
    read_file(state_dir).map(|file| file.hot_keys)
}

/// The board a running instance last wrote in `state_dir`, if one runs
/// there now (it holds the run lock) and the board is fresh.
pub(crate) fn read_published(state_dir: &Path) -> Option<BTreeMap<String, TaskView>> {
    read_file(state_dir).map(|file| file.tasks)
}

fn read_file(state_dir: &Path) -> Option<BoardFile> {
    if !layout::is_locked(&layout::running_lock(state_dir)) {
        return None;
    }
    let text = std::fs::read_to_string(layout::task_board_file(state_dir)).ok()?;
    let file: BoardFile = serde_json::from_str(&text).ok()?;
    let age_ms = strata_record::time::now_ms() - file.written_ms;
    (age_ms <= FRESH_FOR.as_millis() as i64).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_leaves_the_board_when_its_entry_drops_and_the_file_says_what_was_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let board = TaskBoard::default();
        let running = board.enter("count/0".into(), TaskView::Running);
        let restoring = board.enter(
            "count/1".into(),
            TaskView::Restoring {
                done: 0,
                total: 10,
                records: 0,
            },
        );
        restoring.set(TaskView::Restoring {
            done: 4,
            total: 10,
            records: 4,
        });
        assert_eq!(board.restoring(), Some((4, 10)));
        board.publish(dir.path()).unwrap();
        assert_eq!(
            read_published(dir.path()),
            None,
            "no instance holds the run lock"
        );
        let _running = layout::lock_running(dir.path()).unwrap();
        let published = read_published(dir.path()).unwrap();
        assert_eq!(published, board.snapshot());
        assert_eq!(published["count/1"].to_string(), "restoring 40% (4/10)");
        drop(restoring);
        assert_eq!(board.restoring(), None);
        drop(running);
        assert!(board.snapshot().is_empty());
    }
}
