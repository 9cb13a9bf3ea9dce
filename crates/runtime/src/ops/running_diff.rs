//! The running diff a replay's console shows: the replay against the live
//! version (see `diff`), taken again and again while the replay runs, so a
//! person replaying after a bug fix sees where the new output departs from
//! the old one before the replay ends.
//!
//! A diff reads every entry of both versions' stores and every record of
//! their derived topics, so it is paced by its own cost: the next one
//! starts [`PAUSE_FACTOR`] times as long after the last ended as the last
//! took, and at least [`PAUSE_MIN`] after; diffing takes at most a tenth of
//! the time, whatever the app's size.
//!
//! While the replay is part way, the live version holds what the replay
//! has not reached yet: store keys only the live version has are counted
//! apart from those that differ, and a derived partition's records are
//! compared only as far as both versions reach.
//!
//! The figures are metrics of the console's `/metrics`, as every figure
//! the page shows (see [`RunningDiff::write`]). A diff holds both
//! versions' stores in memory while it compares them.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use strata_http::Families;

use crate::error::RuntimeError;
use crate::location::Location;
use crate::topology::App;
use crate::versions::{LIVE, Versions};

use super::diff::{DiffReport, PartitionDiff, diff};

/// The pause after a diff, in multiples of how long it took.
const PAUSE_FACTOR: u32 = 9;
/// The shortest pause between two diffs.
const PAUSE_MIN: Duration = Duration::from_secs(2);
/// How often a pause looks whether the diffing is to stop.
const STOP_CHECK_EVERY: Duration = Duration::from_millis(50);

/// The newest diff of a replay against the live version.
#[derive(Default)]
pub(crate) struct RunningDiff {
    newest: Mutex<Option<Taken>>,
}

struct Taken {
    report: DiffReport,
    /// When it was taken, in ms since the epoch.
    at_ms: i64,
    took: Duration,
}

impl RunningDiff {
    /// Diffs version `replay` of `app` against the live version at `root`
    /// (the app's base location), again and again on a thread of its own
    /// until the [`StopDiffing`] returned is dropped (a diff in progress
    /// ends first; the process does not wait for it).
    pub(crate) fn start(app: &App, root: &Location, replay: &str) -> (Arc<Self>, StopDiffing) {
        let running = Arc::new(Self::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (app, root, replay) = (app.clone(), root.clone(), replay.to_string());
        let (into, stopped) = (Arc::clone(&running), Arc::clone(&stop));
        let spawned = std::thread::Builder::new()
            .name("strata-replay-diff".into())
            .spawn(move || keep_diffing(&app, &root, &replay, &into, &stopped));
        if let Err(error) = spawned {
            tracing::warn!("the replay's diff against the live version cannot start: {error}");
        }
        (running, StopDiffing(stop))
    }

    /// The newest diff's figures (nothing before the first is taken).
    pub(crate) fn write(&self, families: &mut Families<'_>) -> fmt::Result {
        let newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(taken) = newest.as_ref() else {
            return Ok(());
        };
        families.gauge(
            "strata_replay_diff_timestamp_seconds",
            "When the replay's newest diff against the live version was taken (seconds since the epoch).",
            taken.at_ms as f64 / 1e3,
        )?;
        families.gauge(
            "strata_replay_diff_duration_seconds",
            "How long the replay's newest diff against the live version took.",
            taken.took.as_secs_f64(),
        )?;
        let report = &taken.report;
        families.gauges(
            "strata_replay_diff_store_keys",
            "Store keys the replay and the live version differ by: with different values, only in the replay, only in the live version (the replay may not have reached them yet).",
            report.stores.iter().flat_map(|store| {
                [
                    ("different", store.different),
                    ("only_replay", store.only_b),
                    ("only_live", store.only_a),
                ]
                .map(|(kind, keys)| ([("store", store.store.clone()), ("kind", kind.into())], keys))
            }),
        )?;
        let partitions = || {
            report.topics.iter().flat_map(|topic| {
                (topic.partitions.iter()).map(|p| {
                    let labels = [
                        ("topic", topic.topic.clone()),
                        ("partition", p.partition.to_string()),
                    ];
                    (labels, p)
                })
            })
        };
        families.gauges(
            "strata_replay_diff_topic_records",
            "Records a derived topic's partition holds, in the replay and in the live version.",
            partitions().flat_map(|([topic, partition], p)| {
                [("replay", p.records_b), ("live", p.records_a)].map(|(side, records)| {
                    let labels = [topic.clone(), partition.clone(), ("side", side.into())];
                    (labels, records)
                })
            }),
        )?;
        families.gauges(
            "strata_replay_diff_topic_differing_records",
            "Records of a derived topic's partition that differ (key or value) at the same position, as far as both versions reach.",
            partitions().map(|(labels, p)| (labels, differing_so_far(p))),
        )?;
        families.gauges(
            "strata_replay_diff_first_difference_offset",
            "Where a derived topic's partition first differs, as far as both versions reach (absent while the same).",
            partitions().filter_map(|(labels, p)| {
                (differing_so_far(p) > 0).then_some((labels, p.first_difference?))
            }),
        )
    }

    fn keep(&self, taken: Taken) {
        *self.newest.lock().unwrap_or_else(PoisonError::into_inner) = Some(taken);
    }
}

/// The records at the same position that differ among those both
/// versions hold (the diff counts the longer one's tail as differing).
fn differing_so_far(p: &PartitionDiff) -> u64 {
    p.differing - p.records_a.abs_diff(p.records_b)
}

/// How long to wait after a diff that took `took`.
fn pause_after(took: Duration) -> Duration {
    (took * PAUSE_FACTOR).max(PAUSE_MIN)
}

/// Stops the running diff when dropped.
pub(crate) struct StopDiffing(Arc<AtomicBool>);

impl Drop for StopDiffing {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn keep_diffing(app: &App, root: &Location, replay: &str, into: &RunningDiff, stop: &AtomicBool) {
    // Remote, a diff fetches: on a runtime of the thread's own.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::warn!("the replay's diff against the live version cannot start: {error}");
            return;
        }
    };
    let mut failing = false;
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let taken = runtime.block_on(take(app, root, replay));
        let took = started.elapsed();
        match taken {
            Ok(report) => {
                failing = false;
                let at_ms = strata_record::time::now_ms();
                into.keep(Taken {
                    report,
                    at_ms,
                    took,
                });
            }
            // Once per spell of failures: a store compacting while it is
            // opened read-only may fail one diff and not the next.
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(
                    "the replay's diff against the live version failed (tried again): {error}"
                );
            }
            Err(error) => tracing::debug!("the replay's diff failed again: {error}"),
        }
        let until = Instant::now() + pause_after(took);
        while !stop.load(Ordering::Relaxed) && Instant::now() < until {
            std::thread::sleep(STOP_CHECK_EVERY);
        }
    }
}

/// One diff of `replay` against the live version, as they are now.
async fn take(app: &App, root: &Location, replay: &str) -> Result<DiffReport, RuntimeError> {
    let versions = Versions::load(root.state_dir())?;
    let (live, replay) = (versions.get(LIVE)?, versions.get(replay)?);
    diff(app, root, &live, &replay, 0).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(records_a: u64, records_b: u64, differing: u64) -> PartitionDiff {
        PartitionDiff {
            partition: 0,
            records_a,
            records_b,
            first_difference: None,
            differing,
            only_a: 0,
            only_b: 0,
        }
    }

    #[test]
    fn a_replay_part_way_differs_only_where_both_versions_reach() {
        // The live version's 100 records, the replay's first 40, 3 of
        // them different: the 60 not reached yet are no difference.
        assert_eq!(differing_so_far(&partition(100, 40, 63)), 3);
        assert_eq!(differing_so_far(&partition(100, 40, 60)), 0);
        // A replay past the live version's end.
        assert_eq!(differing_so_far(&partition(10, 12, 2)), 0);
        assert_eq!(differing_so_far(&partition(0, 0, 0)), 0);
    }

    #[test]
    fn diffing_takes_at_most_a_tenth_of_the_time() {
        assert_eq!(pause_after(Duration::from_millis(5)), PAUSE_MIN);
        let took = Duration::from_secs(10);
        let pause = pause_after(took);
        assert!(took.as_secs_f64() / (took + pause).as_secs_f64() <= 0.1);
    }
}
