//! How long a remote task may go without its cluster.
//!
//! A task that could not reach the cluster (or found no leader or
//! coordinator) for as long as its client retried ends, and starts again
//! from its last commit once the group gives it out again. That waits out
//! a broker restarting or a network cut. But a cluster that answers the
//! group and never the task (a transaction coordinator that cannot be
//! placed, a partition whose leader never comes back) would have it start
//! and fail forever; so, as Kafka Streams does with `task.timeout.ms`, a
//! task that keeps failing so for [`TASK_WAIT_MAX`] fails the run.
//!
//! Failures are one stretch while each comes within
//! [`STRETCH_GAP_MAX`] of the one before: a task that ran a while between
//! two (an outage last week, another today) starts a new stretch.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::group::TaskId;

/// How long a task may keep failing for want of the cluster (Kafka
/// Streams' `task.timeout.ms` default).
pub(super) const TASK_WAIT_MAX: Duration = Duration::from_secs(300);

/// Failures further apart than this are separate outages.
const STRETCH_GAP_MAX: Duration = Duration::from_secs(60);

/// Per task, the first and the latest failure of its current stretch.
#[derive(Default)]
pub(super) struct Outages {
    stretches: BTreeMap<TaskId, (Instant, Instant)>,
}

impl Outages {
    /// Records that `task` failed for want of the cluster at `now`; how
    /// long its stretch of such failures has lasted.
    pub(super) fn failed(&mut self, task: &TaskId, now: Instant) -> Duration {
        let stretch = self.stretches.entry(task.clone()).or_insert((now, now));
        if now.duration_since(stretch.1) > STRETCH_GAP_MAX {
            stretch.0 = now;
        }
        stretch.1 = now;
        now.duration_since(stretch.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_close_together_are_one_stretch_and_a_gap_starts_another() {
        let mut outages = Outages::default();
        let (split, count) = (TaskId::new("split", 0), TaskId::new("count", 0));
        let start = Instant::now();
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(outages.failed(&split, at(0)), Duration::ZERO);
        assert_eq!(outages.failed(&split, at(50)), Duration::from_secs(50));
        assert_eq!(outages.failed(&split, at(100)), Duration::from_secs(100));
        // Another task's stretch is its own.
        assert_eq!(outages.failed(&count, at(100)), Duration::ZERO);
        // Ran two minutes between: a new outage.
        assert_eq!(outages.failed(&split, at(220)), Duration::ZERO);
        for secs in (230..=560).step_by(10) {
            outages.failed(&split, at(secs));
        }
        assert!(outages.failed(&split, at(570)) > TASK_WAIT_MAX);
    }
}
