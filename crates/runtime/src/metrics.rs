//! What an app's `/metrics` shows (`run --metrics ADDR`): each task's
//! state, its restore's progress or its standby copy's lag (from the task
//! board), the records the instance processed, restores' records, and the
//! shared state memory (RocksDB's block cache and memtables against the
//! `--state-memory` budget). Written through strata-http's exposition, so
//! every family has its HELP and TYPE.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use strata_http::{Exposition, Families};

use super::board::{TaskBoard, TaskView};
use super::task::TaskProgress;

/// The exposition of an instance whose tasks are on `board` and count
/// what they do in `progress`.
pub(crate) fn exposition(board: TaskBoard, progress: Arc<TaskProgress>) -> Exposition {
    Exposition::new(move |families| {
        write(families, &board, progress.records.load(Ordering::Relaxed))
    })
}

fn write(families: &mut Families<'_>, board: &TaskBoard, records: u64) -> fmt::Result {
    let tasks = board.snapshot();
    families.gauges(
        "strata_task_state",
        "1 for each task of this instance, by state.",
        tasks.iter().map(|(task, view)| {
            let state = match view {
                TaskView::Restoring { .. } => "restoring",
                TaskView::Running => "running",
                TaskView::Standby { .. } => "standby",
            };
            ([("task", task.as_str()), ("state", state)], 1)
        }),
    )?;
    let restoring = || {
        tasks.iter().filter_map(|(task, view)| match view {
            TaskView::Restoring {
                done,
                total,
                records,
            } => Some((task, (total - done).max(0), *records)),
            _ => None,
        })
    };
    families.gauges(
        "strata_restore_offsets_remaining",
        "Changelog offsets a restoring task has still to read.",
        restoring().map(|(task, remaining, _)| ([("task", task.as_str())], remaining)),
    )?;
    families.gauges(
        "strata_restore_records",
        "Records a restoring task has put back so far.",
        restoring().map(|(task, _, records)| ([("task", task.as_str())], records)),
    )?;
    families.gauges(
        "strata_standby_lag_offsets",
        "Changelog offsets a standby copy has not read yet.",
        tasks.iter().filter_map(|(task, view)| match view {
            TaskView::Standby { behind } => Some(([("task", task.as_str())], *behind)),
            _ => None,
        }),
    )?;
    families.counter(
        "strata_records_processed_total",
        "Input records processed by this instance.",
        records,
    )?;
    let memory = super::state::memory::shared();
    families.gauge(
        "strata_state_memory_budget_bytes",
        "Memory every task state of this instance shares (--state-memory).",
        memory.budget(),
    )?;
    families.gauge(
        "strata_state_block_cache_bytes",
        "Bytes in the shared RocksDB block cache, memtables included.",
        memory.cache_usage(),
    )?;
    families.gauge(
        "strata_state_memtable_bytes",
        "Bytes of RocksDB memtables across every task state.",
        memory.memtable_usage(),
    )?;
    families.gauge(
        "strata_state_store_caches_bound_bytes",
        "The most the stores' write caches may hold, together.",
        memory.store_caches_bound(),
    )?;
    families.counter(
        "strata_restored_records_total",
        "Changelog records put back by this instance's restores.",
        board.restored_in_all(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_task_shows_its_state_and_a_restore_what_it_has_left() {
        let board = TaskBoard::default();
        let _running = board.enter("count/0".into(), TaskView::Running);
        let _restoring = board.enter(
            "count/1".into(),
            TaskView::Restoring {
                done: 4,
                total: 10,
                records: 4,
            },
        );
        let _standby = board.enter("count/2".into(), TaskView::Standby { behind: 3 });
        board.restored(5);
        let progress = TaskProgress::default();
        progress.records.store(7, Ordering::Relaxed);
        let text = exposition(board, Arc::new(progress)).render();
        for sample in [
            r#"strata_task_state{task="count/0",state="running"} 1"#,
            r#"strata_task_state{task="count/1",state="restoring"} 1"#,
            r#"strata_restore_offsets_remaining{task="count/1"} 6"#,
            r#"strata_restore_records{task="count/1"} 4"#,
            r#"strata_standby_lag_offsets{task="count/2"} 3"#,
            "strata_records_processed_total 7",
            "strata_restored_records_total 5",
        ] {
            assert!(text.contains(sample), "{sample} in:\n{text}");
        }
        let families = text.lines().filter(|l| l.starts_with("# TYPE")).count();
        let helps = text.lines().filter(|l| l.starts_with("# HELP")).count();
        assert_eq!(families, helps, "{text}");
    }
}
