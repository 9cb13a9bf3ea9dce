//! The replay check: does the app, replayed from the start of its inputs,
//! give the answer the live run gave, however that run went (its commit
//! points, crashes and restarts, the batches its inputs came in)?
//!
//! The replay runs into a version of its own (`check-N`, as `strata replay
//! --version check-N --from earliest` would) through the same runtime.
//! Then:
//! - every store must hold the same entries (`strata diff`'s store part);
//! - every derived topic must hold, per partition and per key, the same
//!   values in the same order. Order across keys is not compared: a
//!   partition written by several tasks interleaves their appends as they
//!   come, in a live run and in a replay alike, and Kafka promises order
//!   per key, not across them.
//!
//! Processing-time timers are the exception a replay cannot meet: the
//! replay runs at the clock's time now, so its timers fire at once where
//! the live run's fired as the clock moved. An app whose output depends on
//! them is not expected to match.

use std::collections::BTreeMap;

use crate::ops::{Replay, RunOptions, diff};
use crate::versions::{LIVE, Versions};

use super::TestDriver;
use super::error::TestError;
use crate::topic_read::{ReadRecord, read_topic};

/// How many differing store entries a mismatch shows per store.
const EXAMPLES: usize = 5;

/// Per (partition, key), the values in order.
type PerKey = BTreeMap<(i32, Option<Vec<u8>>), Vec<Option<Vec<u8>>>>;

impl TestDriver {
    /// Runs the app up to date, replays it from the start of its inputs
    /// into a version of its own, and panics, saying what differs, unless
    /// the replay's stores and derived topics equal the live ones (see the
    /// module's documentation for what is compared).
    #[track_caller]
    pub fn assert_replay_matches(&mut self) {
        match self.replay_mismatch() {
            Ok(None) => {}
            Ok(Some(mismatch)) => panic!("the replay does not match the live run:\n{mismatch}"),
            Err(error) => panic!("the replay check could not run: {error}"),
        }
    }

    /// What [`assert_replay_matches`](Self::assert_replay_matches)
    /// checks: None when the replay matches, else what differs.
    pub fn replay_mismatch(&mut self) -> Result<Option<String>, TestError> {
        if self.down {
            return Err(TestError::Down);
        }
        self.settle()?;
        // A name no earlier check used (a kept directory has them).
        let known = Versions::load(self.location.state_dir())?.names();
        let name = (1..)
            .map(|n| format!("check-{n}"))
            .find(|name| !known.contains(name))
            .expect("some name is free");
        let replay = Replay::prepare(&self.app, &self.location, &name, "earliest")?;
        self.prepare_log(&replay.app)?;
        let options = RunOptions {
            until_end: true,
            clock: self.clock.clone().into(),
            ..RunOptions::default()
        };
        (self.runtime).block_on(replay.run_until(options, std::future::pending()))?;
        let versions = Versions::load(self.location.state_dir())?;
        let (live, replayed) = (versions.get(LIVE)?, versions.get(&name)?);
        let report = diff(&self.app, &self.location, &live, &replayed, EXAMPLES);
        let report = self.runtime.block_on(report)?;
        let mut found = Vec::new();
        for store in report.stores.iter().filter(|s| s.differs()) {
            found.push(format!(
                "store {}: {} entries only live, {} only in the replay, {} with other values; {}",
                store.store,
                store.only_a,
                store.only_b,
                store.different,
                store.examples.join("; ")
            ));
        }
        for topic in self.app.derived_topics() {
            let live = read_topic(self.data_dir(), &self.app.log_topic(&topic))?;
            let replayed_topic = format!("{topic}{}", replayed.topic_suffix);
            let replayed = read_topic(self.data_dir(), &replayed_topic)?;
            if let Some(difference) = compare(&per_key(live), &per_key(replayed)) {
                found.push(format!("topic {topic}: {difference}"));
            }
        }
        Ok((!found.is_empty()).then(|| found.join("\n")))
    }
}

fn per_key(records: Vec<ReadRecord>) -> PerKey {
    let mut keys = PerKey::new();
    for record in records {
        let values = keys.entry((record.partition, record.key)).or_default();
        values.push(record.value);
    }
    keys
}

/// The first (partition, key) whose values differ, and how many do.
fn compare(live: &PerKey, replayed: &PerKey) -> Option<String> {
    let all: std::collections::BTreeSet<_> = live.keys().chain(replayed.keys()).collect();
    let differing: Vec<_> = (all.into_iter())
        .filter(|at| live.get(*at) != replayed.get(*at))
        .collect();
    let (partition, key) = differing.first()?;
    let values = |side: &PerKey| {
        let values = side
            .get(&(*partition, key.clone()))
            .map_or(&[][..], Vec::as_slice);
        let shown: Vec<String> = values.iter().take(8).map(|v| shown(v.as_deref())).collect();
        format!("{} values [{}]", values.len(), shown.join(", "))
    };
    Some(format!(
        "{} keys differ; first, partition {partition} key {}: live {}, replayed {}",
        differing.len(),
        shown(key.as_deref()),
        values(live),
        values(replayed)
    ))
}

/// Bytes for a message: as text when they are UTF-8.
fn shown(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".to_string(),
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => format!("{text:?}"),
            Err(_) => format!("0x{}", strata_record::hex::hex(bytes)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: i32, key: &str, value: &str) -> ReadRecord {
        ReadRecord {
            partition,
            offset: 0,
            timestamp: 0,
            key: Some(key.into()),
            value: Some(value.into()),
            headers: Vec::new(),
        }
    }

    #[test]
    fn order_across_keys_is_not_compared_but_order_within_a_key_is() {
        let live = per_key(vec![
            record(0, "a", "1"),
            record(0, "b", "1"),
            record(0, "a", "2"),
        ]);
        let interleaved = per_key(vec![
            record(0, "b", "1"),
            record(0, "a", "1"),
            record(0, "a", "2"),
        ]);
        assert_eq!(compare(&live, &interleaved), None);
        let swapped = per_key(vec![
            record(0, "a", "2"),
            record(0, "b", "1"),
            record(0, "a", "1"),
        ]);
        let found = compare(&live, &swapped).expect("a key's order differs");
        assert!(found.contains("key \"a\""), "{found}");
    }

    #[test]
    fn a_key_in_another_partition_or_missing_differs() {
        let live = per_key(vec![record(0, "a", "1")]);
        assert!(compare(&live, &per_key(vec![record(1, "a", "1")])).is_some());
        assert!(compare(&live, &per_key(Vec::new())).is_some());
    }
}
