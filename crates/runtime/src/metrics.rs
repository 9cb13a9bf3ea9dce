//! What an app's `/metrics` shows (`run --metrics ADDR`): each task's
//! state, its restore's progress or its standby copy's lag (from the task
//! board), the records the instance processed, restores' records, the
//! shared state memory (RocksDB's block cache and memtables against the
//! `--state-memory` budget), and each running task's counters (see
//! `task_metrics`: records and bytes in and out, lag in records and in
//! time with a catch-up estimate, processing and commit time, end-to-end
//! latency, timers, transactions, its state's size and compaction).
//! Written through strata-http's exposition, so every family has its HELP
//! and TYPE.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use strata_http::{Exposition, Families};

use super::board::{TaskBoard, TaskView};
use super::task::TaskProgress;
use super::task_metrics::TaskMetrics;

/// Hot keys shown per task.
pub(crate) const HOT_KEYS_SHOWN: usize = 5;
/// Characters of a key a label shows.
const KEY_LABEL_CHARS_MAX: usize = 64;

/// A key as a label value: its text (bytes that are not UTF-8 replaced),
/// cut to [`KEY_LABEL_CHARS_MAX`] characters.
pub(crate) fn key_label(key: &[u8]) -> String {
    String::from_utf8_lossy(key)
        .chars()
        .take(KEY_LABEL_CHARS_MAX)
        .collect()
}

/// Each input topic's `retention.ms` (-1: unlimited), by its name in the
/// log.
pub(crate) type Retention = Arc<BTreeMap<String, i64>>;

/// The exposition of an instance whose tasks are on `board` and count
/// what they do in `progress`, reading inputs kept for `retention`; `also`
/// writes the families of what else the instance runs (a replay's
/// running diff).
pub(crate) fn exposition(
    board: TaskBoard,
    progress: Arc<TaskProgress>,
    retention: Retention,
    also: impl Fn(&mut Families<'_>) -> fmt::Result + Send + Sync + 'static,
) -> Exposition {
    Exposition::new(move |families| {
        write(families, &board, &progress, &retention)?;
        also(families)
    })
}

fn write(
    families: &mut Families<'_>,
    board: &TaskBoard,
    progress: &TaskProgress,
    retention: &BTreeMap<String, i64>,
) -> fmt::Result {
    let records = progress.records.load(Ordering::Relaxed);
    families.gauge(
        "strata_job_records_target",
        "Records the job's tasks have to process to reach their targets (a run to the inputs' end, a rebuild); 0 while no task knows its targets.",
        progress.total.load(Ordering::Relaxed),
    )?;
    families.gauge(
        "strata_job_records_done",
        "Records processed towards strata_job_records_target.",
        progress.done.load(Ordering::Relaxed),
    )?;
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
    )?;
    let tasks = board.task_metrics();
    write_tasks(families, &tasks)?;
    write_retention(families, &tasks, retention)
}

/// The retention warning, the question whether a task will read its
/// input before retention deletes it: per input, how long until the next
/// unread records may be deleted (their segment's newest timestamp is at
/// least the newest processed, so at the earliest that plus `retention.ms`),
/// and per task, 1 when its catch-up estimate is longer than that.
fn write_retention(
    families: &mut Families<'_>,
    tasks: &BTreeMap<String, Arc<TaskMetrics>>,
    retention: &BTreeMap<String, i64>,
) -> fmt::Result {
    let now = strata_record::time::now_ms();
    // Per task: its labels, and each input's seconds left.
    let expiring: Vec<_> = (tasks.iter())
        .map(|(task, m)| {
            let inputs: Vec<_> = (m.inputs.iter())
                .filter_map(|input| {
                    let ms = *retention.get(&input.topic)?;
                    let last = input.last_timestamp.load(Ordering::Relaxed);
                    (ms >= 0 && last >= 0 && input.lag() > 0)
                        .then(|| (input, (last.saturating_add(ms) - now) as f64 / 1e3))
                })
                .collect();
            (task, m, inputs)
        })
        .collect();
    families.gauges(
        "strata_task_retention_expiry_seconds",
        "While records are left: seconds until retention may delete a task's next unread records, at the earliest (negative: due).",
        expiring.iter().flat_map(|(task, m, inputs)| {
            inputs.iter().map(move |(input, seconds)| {
                let labels = [
                    ("task", task.to_string()),
                    ("processor", m.processor.clone()),
                    ("topic", input.topic.clone()),
                    ("partition", m.partition.to_string()),
                ];
                (labels, *seconds)
            })
        }),
    )?;
    families.gauges(
        "strata_task_retention_at_risk",
        "1 when a task will not catch up before retention may delete its unread records (its catch-up estimate is longer), else 0.",
        expiring.iter().map(|(task, m, inputs)| {
            let catch_up = m.catch_up_seconds();
            let soonest = inputs.iter().map(|(_, s)| *s).reduce(f64::min);
            let at_risk = matches!((catch_up, soonest), (Some(c), Some(s)) if c > s);
            let labels = [("task", task.to_string()), ("processor", m.processor.clone())];
            (labels, u64::from(at_risk))
        }),
    )
}

/// Each task's counters (see `task_metrics`), labelled by task and
/// processor (and input or output topic where they are per topic).
fn write_tasks(
    families: &mut Families<'_>,
    tasks: &BTreeMap<String, Arc<TaskMetrics>>,
) -> fmt::Result {
    let now = strata_record::time::now_ms();
    let per_task = |task: &str, metrics: &TaskMetrics| {
        [
            ("task", task.to_string()),
            ("processor", metrics.processor.clone()),
        ]
    };
    // Each input's labels, and the input.
    let inputs = || {
        tasks.iter().flat_map(move |(task, metrics)| {
            (metrics.inputs.iter()).map(move |input| {
                let [task, processor] = per_task(task, metrics);
                let topic = ("topic", input.topic.clone());
                let partition = ("partition", metrics.partition.to_string());
                ([task, processor, topic, partition], input)
            })
        })
    };
    let outputs = || {
        tasks.iter().flat_map(|(task, metrics)| {
            (metrics.outputs.iter()).map(move |output| {
                let [task, processor] = per_task(task, metrics);
                ([task, processor, ("topic", output.topic.clone())], output)
            })
        })
    };
    let load = |value: &AtomicU64| value.load(Ordering::Relaxed);
    families.counters(
        "strata_task_records_consumed_total",
        "Input records processed, per task and input partition.",
        inputs().map(|(labels, input)| (labels, load(&input.records))),
    )?;
    families.counters(
        "strata_task_bytes_consumed_total",
        "Input bytes fetched, per task and input partition.",
        inputs().map(|(labels, input)| (labels, load(&input.bytes))),
    )?;
    families.gauges(
        "strata_task_records_lag",
        "Records between a task's position and its input partition's end, as its last fetch saw it.",
        inputs().map(|(labels, input)| (labels, input.lag())),
    )?;
    families.gauges(
        "strata_task_lag_seconds",
        "How far behind in time a task is on an input: now less the newest timestamp it processed, while records are left (0 once caught up).",
        inputs().filter_map(|(labels, input)| Some((labels, input.lag_ms(now)? as f64 / 1e3))),
    )?;
    families.gauges(
        "strata_task_catch_up_seconds",
        "Time a task needs to reach its inputs' ends at its rate while busy (absent before a rate is measured).",
        tasks.iter().filter_map(|(task, metrics)| {
            Some((per_task(task, metrics), metrics.catch_up_seconds()?))
        }),
    )?;
    families.counters(
        "strata_task_records_produced_total",
        "Derived records appended, per task and output topic.",
        outputs().map(|(labels, output)| (labels, load(&output.records))),
    )?;
    families.counters(
        "strata_task_bytes_produced_total",
        "Derived record batch bytes appended, per task and output topic.",
        outputs().map(|(labels, output)| (labels, load(&output.bytes))),
    )?;
    families.counters(
        "strata_task_process_seconds_total",
        "Time spent processing records (divided by records consumed: the latency per record).",
        tasks
            .iter()
            .map(|(task, m)| (per_task(task, m), load(&m.process_nanos) as f64 / 1e9)),
    )?;
    families.counters(
        "strata_task_commits_total",
        "Commits of a task's state with its input offsets.",
        tasks
            .iter()
            .map(|(task, m)| (per_task(task, m), load(&m.commits))),
    )?;
    families.histograms(
        "strata_task_commit_latency_seconds",
        "Time a task spends in a commit (the one before settled and shipped first).",
        tasks
            .iter()
            .map(|(task, m)| (per_task(task, m), m.commit_latency.sample())),
    )?;
    families.histograms(
        "strata_task_end_to_end_latency_seconds",
        "A derived record's age as it is appended: now less its batch's newest timestamp.",
        tasks
            .iter()
            .map(|(task, m)| (per_task(task, m), m.end_to_end.sample())),
    )?;
    families.counters(
        "strata_task_timers_fired_total",
        "Timers a task's processor was called for.",
        tasks
            .iter()
            .map(|(task, m)| (per_task(task, m), load(&m.timers_fired))),
    )?;
    families.counters(
        "strata_task_dropped_records_total",
        "Records a task's processor dropped, by the reason it gave (late: past its window's grace, say).",
        tasks.iter().flat_map(|(task, m)| {
            let [task, processor] = per_task(task, m);
            (m.dropped_counts().into_iter()).map(move |(reason, n)| {
                let reason = ("reason", reason.to_string());
                ([task.clone(), processor.clone(), reason], n)
            })
        }),
    )?;
    families.counters(
        "strata_task_failed_records_total",
        "Records a task's processor failed on, by kind (decode, process) and what its error policy did (skipped, dead_letter).",
        tasks.iter().flat_map(|(task, m)| {
            let [task, processor] = per_task(task, m);
            (m.failed_counts().into_iter()).map(move |(kind, action, n)| {
                let labels = [("kind", kind.to_string()), ("action", action.to_string())];
                ([task.clone(), processor.clone(), labels[0].clone(), labels[1].clone()], n)
            })
        }),
    )?;
    families.counters(
        "strata_task_transactions_total",
        "Remote: transactions a task ended, by outcome (committed, or aborted and shipped again).",
        tasks.iter().flat_map(|(task, m)| {
            let [task, processor] = per_task(task, m);
            [
                ("committed", load(&m.transactions_committed)),
                ("aborted", load(&m.transactions_aborted)),
            ]
            .map(|(outcome, n)| {
                (
                    [
                        task.clone(),
                        processor.clone(),
                        ("outcome", outcome.to_string()),
                    ],
                    n,
                )
            })
        }),
    )?;
    families.gauges(
        "strata_task_state_bytes",
        "Bytes of a task's state on disk (RocksDB's SST files), as of its last commit.",
        tasks
            .iter()
            .map(|(task, m)| (per_task(task, m), load(&m.state_bytes))),
    )?;
    families.gauges(
        "strata_task_state_pending_compaction_bytes",
        "Bytes RocksDB estimates it has to compact in a task's state, as of its last commit.",
        tasks
            .iter()
            .map(|(task, m)| (per_task(task, m), load(&m.pending_compaction_bytes))),
    )?;
    families.gauges(
        "strata_task_hot_key_records",
        "Records read of each of a task's hottest keys (its top 5), estimated from one record in 16.",
        tasks.iter().flat_map(|(task, m)| {
            let [task, processor] = per_task(task, m);
            (m.hot_keys(HOT_KEYS_SHOWN).into_iter()).map(move |hot| {
                let key = ("key", key_label(&hot.key));
                ([task.clone(), processor.clone(), key], hot.count)
            })
        }),
    )?;
    families.gauges(
        "strata_task_hot_written_key_records",
        "Writes of each of a task's hottest keys per store (its top 5), estimated from one put in 16.",
        tasks.iter().flat_map(|(task, m)| {
            let [task, processor] = per_task(task, m);
            let stores = m.hot_written(HOT_KEYS_SHOWN).into_iter();
            stores
                .flat_map(|(store, keys)| keys.into_iter().map(move |hot| (store.to_string(), hot)))
                .map(move |(store, hot)| {
                    let (store, key) = (("store", store), ("key", key_label(&hot.key)));
                    ([task.clone(), processor.clone(), store, key], hot.count)
                })
        }),
    )?;
    families.gauges(
        "strata_task_state_writes_stopped",
        "1 while RocksDB stops a task's writes (compaction far behind), as of its last commit.",
        tasks.iter().map(|(task, m)| {
            (
                per_task(task, m),
                u64::from(m.writes_stopped.load(Ordering::Relaxed)),
            )
        }),
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
        board.restored(5, std::time::Duration::from_millis(3));
        let progress = TaskProgress::default();
        progress.records.store(7, Ordering::Relaxed);
        let text = exposition(
            board.clone(),
            Arc::new(progress),
            Retention::default(),
            |_| Ok(()),
        )
        .render();
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
        let metrics = Arc::new(TaskMetrics::new(
            ("count", 7),
            [("words".to_string(), 0)],
            &["counts".into()],
        ));
        metrics.fetched(0, 900, 10);
        metrics.processed(0, 4, 2_000_000, 4, strata_record::time::now_ms() - 5_000);
        metrics.set_rate(2.0);
        let now = strata_record::time::now_ms();
        metrics.shipped("counts", 4, 300, now, now);
        metrics.dropped("late");
        metrics.dropped("late");
        let entry = board.enter("count/7".into(), TaskView::Running);
        entry.count_with(metrics);
        let retention: Retention = Arc::new([("words".to_string(), 4_000)].into());
        let text = exposition(
            board.clone(),
            Arc::new(TaskProgress::default()),
            retention,
            |_| Ok(()),
        )
        .render();
        let input = r#"{task="count/7",processor="count",topic="words",partition="7"}"#;
        for sample in [
            format!("strata_task_records_consumed_total{input} 4"),
            format!("strata_task_bytes_consumed_total{input} 900"),
            format!("strata_task_records_lag{input} 6"),
            r#"strata_task_catch_up_seconds{task="count/7",processor="count"} 3"#.to_string(),
            r#"strata_task_records_produced_total{task="count/7",processor="count",topic="counts"} 4"#.to_string(),
            r#"strata_task_process_seconds_total{task="count/7",processor="count"} 0.002"#.to_string(),
            r#"strata_task_end_to_end_latency_seconds_count{task="count/7",processor="count"} 1"#.to_string(),
            r#"strata_task_dropped_records_total{task="count/7",processor="count",reason="late"} 2"#.to_string(),
            // Processed up to 5 s ago, kept 4 s, 3 s of catching up left:
            // due already, and at risk.
            r#"strata_task_retention_at_risk{task="count/7",processor="count"} 1"#.to_string(),
        ] {
            assert!(text.contains(&sample), "{sample} in:\n{text}");
        }
        let lag_seconds = (text.lines())
            .find_map(|l| l.strip_prefix(&format!("strata_task_lag_seconds{input} ")))
            .map(|v| v.parse::<f64>().unwrap());
        assert!(lag_seconds.is_some_and(|s| s >= 5.0), "{text}");
        let expiry = (text.lines())
            .find_map(|l| l.strip_prefix(&format!("strata_task_retention_expiry_seconds{input} ")))
            .map(|v| v.parse::<f64>().unwrap());
        assert!(expiry.is_some_and(|s| s <= -1.0), "{text}");
        drop(entry);
        let text = exposition(
            board,
            Arc::new(TaskProgress::default()),
            Retention::default(),
            |_| Ok(()),
        )
        .render();
        assert!(
            !text.contains("count/7"),
            "a task gone takes its counters: {text}"
        );
        let families = text.lines().filter(|l| l.starts_with("# TYPE")).count();
        let helps = text.lines().filter(|l| l.starts_with("# HELP")).count();
        assert_eq!(families, helps, "{text}");
    }
}
