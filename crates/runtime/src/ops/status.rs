//! `status`: per task and input, where the task is (its committed offset;
//! remote, as the cluster holds it, for every task and with the instance
//! running it),
//! where the input ends, what its outbox holds, how fast it goes, and the
//! catch-up check (will it reach its unread records before retention
//! deletes them?); remote, where the group placed it (owner, standby
//! copies); and what the instance running under the state directory does
//! with it now (its task board: running, restoring how far, standby how
//! far behind).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::board::{self, TaskView};
use crate::error::RuntimeError;
use crate::group;
use crate::layout::{self, task_dirs};
use crate::location::Location;
use crate::log_access::LogAccess;
use crate::progress::duration;
use crate::task::transaction::TxnNames;
use crate::topology::{App, ProcessorSpec};
use strata_client::Admin;

use super::dump_state::open_committed;

/// One row per task and input topic.
pub async fn status(app: &App, location: &Location) -> Result<Vec<StatusRow>, RuntimeError> {
    let remote = match location {
        remote @ Location::Remote { .. } => {
            let (access, cluster) =
                LogAccess::connect(remote.client_config().expect("a remote location")).await?;
            Some((access, Admin::new(cluster)))
        }
        Location::Embedded { .. } => None,
    };
    let mut retention: BTreeMap<String, i64> = BTreeMap::new();
    let mut rows = Vec::new();
    // Remote, every task of the app, wherever it runs: its offsets as the
    // cluster committed them, its owner as the app's group assigned it.
    let placements = match &remote {
        Some((_, admin)) => group::placements(admin, &app.versioned_name())
            .await
            .unwrap_or_default(),
        None => BTreeMap::new(),
    };
    // What the instance running under this state directory says its tasks
    // do now (nothing when none runs).
    let board = board::read_published(location.state_dir()).unwrap_or_default();
    for spec in &app.processors {
        let local = task_dirs(&layout::processor_dir(location.state_dir(), &spec.name))?;
        let tasks = tasks_of(app, spec, remote.as_ref().map(|r| &r.0), local).await?;
        let committed = match &remote {
            Some((_, admin)) => committed_of(app, spec, &tasks, admin).await?,
            None => BTreeMap::new(),
        };
        for (partition, dir) in tasks {
            let state = match &dir {
                Some(dir) => open_committed(dir)?,
                None => None,
            };
            let outbox_records = match &state {
                Some(state) => state.outbox()?.iter().map(|(_, b)| b.record_count()).sum(),
                None => 0,
            };
            let rate = match &state {
                Some(state) => state.rate()?,
                None => None,
            };
            for topic in &spec.inputs {
                let log_topic = app.log_topic(topic);
                let cluster = (committed.get(&(log_topic.clone(), partition)))
                    .map(|c| c.offset)
                    .filter(|o| *o >= 0);
                let offset = match &state {
                    Some(state) => cluster.or(state.input_offset(topic)),
                    None => cluster,
                };
                let next = offset.unwrap_or(0);
                let access = remote.as_ref().map(|r| &r.0);
                let (start, end, oldest_unread) =
                    extent(location, access, &log_topic, partition, next).await?;
                if !retention.contains_key(&log_topic) {
                    let ms =
                        topic_retention_ms(location, remote.as_ref().map(|r| &r.1), &log_topic)
                            .await;
                    retention.insert(log_topic.clone(), ms);
                }
                let retention_ms = retention[&log_topic];
                let expires_in_ms = match oldest_unread {
                    Some(newest) if retention_ms >= 0 => {
                        Some(newest.saturating_add(retention_ms) - strata_record::time::now_ms())
                    }
                    _ => None,
                };
                let task = format!("{}/{partition}", spec.name);
                let placement = placements.get(&task).cloned().unwrap_or_default();
                rows.push(StatusRow {
                    owner: placement.active,
                    standbys: placement.standbys,
                    here: board.get(&task).copied(),
                    task,
                    topic: log_topic,
                    partition,
                    offset,
                    end,
                    outbox_records,
                    rate,
                    expires_in_ms,
                    start,
                });
            }
        }
    }
    Ok(rows)
}

/// The tasks of processor `spec`, with their state directories here:
/// remote, every partition of its first input (a directory only where this
/// instance has one); embedded, those with a directory.
async fn tasks_of(
    app: &App,
    spec: &ProcessorSpec,
    remote: Option<&LogAccess>,
    local: Vec<(i32, PathBuf)>,
) -> Result<Vec<(i32, Option<PathBuf>)>, RuntimeError> {
    let Some(access) = remote else {
        return Ok(local.into_iter().map(|(p, d)| (p, Some(d))).collect());
    };
    let first = app.log_topic(&spec.inputs[0]);
    let count = access.partition_count(&first).await?.unwrap_or(0);
    let dir = |p: i32| local.iter().find(|(n, _)| *n == p).map(|(_, d)| d.clone());
    Ok((0..count).map(|p| (p, dir(p))).collect())
}

/// Remote: the offsets the cluster holds committed for the tasks' inputs.
async fn committed_of(
    app: &App,
    spec: &ProcessorSpec,
    tasks: &[(i32, Option<PathBuf>)],
    admin: &Admin,
) -> Result<BTreeMap<(String, i32), strata_client::Committed>, RuntimeError> {
    let partitions: Vec<(String, i32)> = (spec.inputs.iter())
        .flat_map(|t| tasks.iter().map(move |(p, _)| (app.log_topic(t), *p)))
        .collect();
    let group = TxnNames::of(&app.versioned_name(), &spec.name, 0).group;
    Ok(admin
        .committed_with_metadata(&group, &partitions, false)
        .await?)
}

/// Where a partition starts and ends, and the newest timestamp of the
/// segment holding `next` (the oldest unread record's, at most).
async fn extent(
    location: &Location,
    remote: Option<&LogAccess>,
    log_topic: &str,
    partition: i32,
    next: i64,
) -> Result<(Option<i64>, Option<i64>, Option<i64>), RuntimeError> {
    if let Location::Embedded { data_dir, .. } = location {
        use strata_log::{peek_log_end_offset, peek_log_start_offset, peek_segment_max_timestamp};
        let start = peek_log_start_offset(data_dir, log_topic, partition);
        let end = peek_log_end_offset(data_dir, log_topic, partition);
        let oldest = peek_segment_max_timestamp(data_dir, log_topic, partition, next);
        return Ok((
            start.ok().flatten(),
            end.ok().flatten(),
            oldest.ok().flatten(),
        ));
    }
    let Some(access) = remote else {
        return Ok((None, None, None));
    };
    let start = access.start_offset(log_topic, partition).await?;
    let end = access.end_offset(log_topic, partition).await?;
    let oldest = match next >= start && next < end {
        true => first_batch_timestamp(access, log_topic, partition, next).await?,
        false => None,
    };
    Ok((Some(start), Some(end), oldest))
}

/// The newest timestamp of the first batch at `offset`: a lower bound of
/// the newest timestamp of the segment holding it.
async fn first_batch_timestamp(
    access: &LogAccess,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<i64>, RuntimeError> {
    let fetched = access.fetch(topic, partition, offset, 64 << 10).await?;
    Ok(strata_record::RecordBatch::parse(&fetched.records)
        .ok()
        .map(|b| b.header().max_timestamp))
}

/// A topic's `retention.ms` (-1: unlimited, and for a topic compacted
/// without deletion), the log's default where the topic does not set it or
/// it cannot be read. (`retention.bytes` is not looked at: deletion by size
/// is not foreseen.)
pub(crate) async fn topic_retention_ms(
    location: &Location,
    admin: Option<&Admin>,
    topic: &str,
) -> i64 {
    let config = match (location, admin) {
        (Location::Embedded { data_dir, .. }, _) => {
            strata_log::peek_topic_metadata(data_dir, topic)
                .map(|m| m.config)
                .ok()
        }
        (_, Some(admin)) => admin.topic_config(topic).await.ok(),
        _ => None,
    };
    // A compacted topic that does not also delete keeps every key's latest
    // record, however old: nothing expires by time.
    let compacted_only = (config.as_ref())
        .and_then(|c| c.get("cleanup.policy"))
        .is_some_and(|policy| policy.contains("compact") && !policy.contains("delete"));
    if compacted_only {
        return -1;
    }
    config
        .and_then(|c| c.get("retention.ms").and_then(|v| v.parse().ok()))
        .unwrap_or(strata_log::LogConfig::default().retention_ms)
}

/// A task's position in one input.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusRow {
    pub task: String,
    /// Remote: the instance the app's group assigned the task to (None:
    /// no instance runs it now).
    pub owner: Option<String>,
    /// Remote: the instances keeping standby copies of the task.
    pub standbys: Vec<String>,
    /// What the instance running under the state directory `status` was
    /// given does with the task now, if it has it: running, restoring (how
    /// far), or a standby copy (how far behind).
    pub here: Option<TaskView>,
    pub topic: String,
    pub partition: i32,
    /// The next offset to process (None before the first commit).
    pub offset: Option<i64>,
    pub end: Option<i64>,
    /// Records emitted and committed but not yet appended to the log.
    pub outbox_records: usize,
    /// Records/s the task processed while busy, as of its last commit.
    pub rate: Option<f64>,
    /// Milliseconds until retention may delete the segment holding the next
    /// record to process (its newest timestamp plus the topic's
    /// `retention.ms`; negative: already due); None when nothing is unread
    /// or retention is unlimited.
    pub expires_in_ms: Option<i64>,
    /// The input's log start offset: records below it are gone.
    pub start: Option<i64>,
}

impl StatusRow {
    pub fn lag(&self) -> Option<i64> {
        Some(self.end? - self.offset.unwrap_or(0)).map(|l| l.max(0))
    }

    /// Seconds to process the lag at the task's rate.
    pub fn eta_secs(&self) -> Option<f64> {
        let rate = self.rate.filter(|r| *r > 0.0)?;
        Some(self.lag()? as f64 / rate)
    }

    /// The catch-up check: a warning when the task will not reach its
    /// unread records before retention deletes them.
    pub fn warning(&self) -> Option<String> {
        let lag = self.lag().filter(|l| *l > 0)?;
        if let (Some(next), Some(start)) = (self.offset, self.start)
            && start > next
        {
            return Some(format!(
                "task {} reads {}/{} at offset {next}, but retention has deleted everything before offset {start}: {} records are gone unprocessed, and the task stops with an error when it gets there",
                self.task,
                self.topic,
                self.partition,
                start - next
            ));
        }
        let expires_in = self.expires_in_ms? as f64 / 1000.0;
        let input = format!("{}/{}", self.topic, self.partition);
        let expiry = if expires_in <= 0.0 {
            "is already due for deletion by retention".to_string()
        } else {
            format!("expires under retention in {}", duration(expires_in))
        };
        match self.eta_secs() {
            Some(eta) if eta > expires_in => Some(format!(
                "task {} will not catch up on {input} before its input expires: {lag} records behind at {:.0}/s takes {}, but the oldest unread segment {expiry}; records will be deleted unprocessed (raise the topic's retention.ms, or make the app faster)",
                self.task,
                self.rate.unwrap_or(0.0),
                duration(eta)
            )),
            None if expires_in <= 0.0 => Some(format!(
                "task {} is {lag} records behind on {input}, and the oldest unread segment {expiry}",
                self.task
            )),
            _ => None,
        }
    }
}
