//! Counting per key (or per key and tumbling window) made durable by
//! hand, as a plain program keeping its counts in RocksDB would: the
//! references that show what durability costs without a runtime, and with
//! its writes overlapped, the floor of the runtime's stateful targets.
//!
//! Every `commit_records` records (and at the end) the counts changed
//! since are put, and the windows closed since deleted, with the loop's
//! position (records read), in one synced write batch, to a RocksDB set
//! as the runtime sets its stores (values updated in place in the
//! memtable). No outbox: a closed window's count is handed to
//! [`std::hint::black_box`] where the runtime would emit it.
//!
//! Counting nothing, the loop is the pass-through's floor: a plain loop
//! whose writes hold its position alone. Over the partitions of a topic
//! side by side, a thread (and a RocksDB) each, it is the floor of what a
//! second task gains.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata::log::{LogConfig, LogManager, PartitionLog};

/// The key each write puts the loop's position under.
const POSITION_KEY: &[u8] = b"\0position";

/// How the loop writes its counts.
#[derive(Clone, Copy, PartialEq)]
pub enum Writes {
    /// On the counting thread, which waits for each write.
    Inline,
    /// On a thread of their own: counting goes on while a write lands,
    /// and waits only when the next write is due before the last one
    /// landed (one write in flight, as the runtime pipelines one commit).
    Overlapped,
}

/// What is counted: each key for all time, or each key per tumbling
/// window of this many milliseconds, a window closed (its count emitted,
/// its entry deleted) once a record stamped at or past its end is read.
#[derive(Clone, Copy)]
pub enum Counting {
    PerKey,
    PerWindow {
        millis: i64,
    },
    /// Nothing counted: each write holds the position alone, as a
    /// pass-through's commit holds its input offset.
    Nothing,
}

/// A count, and whether it changed since the last write.
struct Counted {
    count: u64,
    changed: bool,
}

/// Open windows by start (one, at 0, when counting per key), then key.
type Windows = BTreeMap<i64, HashMap<String, Counted>>;

/// Counts `expected` records of `events` in `data` as [`Counting`] says,
/// keeping the counts in a RocksDB in `state`; records/s, the last write
/// included.
pub fn count_loop(
    data: &Path,
    state: &Path,
    expected: u64,
    commit_records: u64,
    counting: Counting,
    writes: Writes,
) -> anyhow::Result<f64> {
    over_topic(data, "events", expected, |partitions| {
        count_over(partitions, state, commit_records, counting, writes, None)
    })
}

/// [`count_loop`] per key, its writes overlapped, over each partition of
/// `topic` at once: a thread and a RocksDB (in `state`) each, as the
/// runtime runs a task per partition. Records/s of them all, timed from
/// a common start (each RocksDB opened before it) to the last one's end.
pub fn count_side_by_side(
    data: &Path,
    topic: &str,
    state: &Path,
    expected: u64,
    commit_records: u64,
) -> anyhow::Result<f64> {
    over_topic(data, topic, expected, |partitions| {
        let ready = std::sync::Barrier::new(partitions.len());
        std::thread::scope(|scope| {
            let counters: Vec<_> = (partitions.iter().enumerate())
                .map(|(at, partition)| {
                    let (state, ready) = (state.join(format!("partition-{at}")), &ready);
                    scope.spawn(move || {
                        let partitions = std::slice::from_ref(partition);
                        let (counting, writes) = (Counting::PerKey, Writes::Overlapped);
                        count_over(
                            partitions,
                            &state,
                            commit_records,
                            counting,
                            writes,
                            Some(ready),
                        )
                    })
                })
                .collect();
            // Each counter's clock starts as the barrier lets them all go.
            let mut total = (0, Duration::ZERO);
            for counter in counters {
                let (records, elapsed) = counter.join().expect("a counter panicked")?;
                total = (total.0 + records, total.1.max(elapsed));
            }
            anyhow::Ok(total)
        })
    })
}

/// Opens the log in `data` and runs `count` over the partitions of
/// `topic`, which must count `expected` records; records/s.
fn over_topic(
    data: &Path,
    topic: &str,
    expected: u64,
    count: impl FnOnce(&[Arc<PartitionLog>]) -> anyhow::Result<(u64, Duration)>,
) -> anyhow::Result<f64> {
    let log = LogManager::open(data, LogConfig::default())?;
    let partitions = super::partitions_of(&log, topic)?;
    let counted = count(&partitions);
    drop(partitions);
    log.close()?;
    let (records, elapsed) = counted?;
    anyhow::ensure!(records == expected, "counted {records} records");
    Ok(super::rate(records, elapsed))
}

/// Counts the records of `partitions` in turn as [`Counting`] says, keeping
/// the counts in a RocksDB in `state`; returns the records read and the
/// time taken, the last write included. With `ready`, the clock starts
/// once the RocksDB is open and every counter sharing the barrier is.
fn count_over(
    partitions: &[Arc<PartitionLog>],
    state: &Path,
    commit_records: u64,
    counting: Counting,
    writes: Writes,
    ready: Option<&std::sync::Barrier>,
) -> anyhow::Result<(u64, Duration)> {
    let opened = open_store(state);
    // Waited for even when the open failed, or the others would wait on.
    if let Some(ready) = ready {
        ready.wait();
    }
    let (db, sync) = opened?;
    // The records read: the position each write holds.
    let position = std::cell::Cell::new(0u64);
    let stored = |start: i64, key: &str| -> Vec<u8> {
        let mut bytes = key.as_bytes().to_vec();
        if let Counting::PerWindow { .. } = counting {
            bytes.extend_from_slice(&start.to_be_bytes());
        }
        bytes
    };
    let batch_of =
        |windows: &mut Windows, changed: &mut Vec<(i64, String)>, closed: &mut Vec<Vec<u8>>| {
            let mut batch = rocksdb::WriteBatch::default();
            for (start, key) in changed.drain(..) {
                // A window closed since its change is among the deletes.
                if let Some(counted) = windows.get_mut(&start).and_then(|w| w.get_mut(&key)) {
                    counted.changed = false;
                    batch.put(stored(start, &key), counted.count.to_le_bytes());
                }
            }
            for key in closed.drain(..) {
                batch.delete(key);
            }
            batch.put(POSITION_KEY, position.get().to_le_bytes());
            batch
        };
    std::thread::scope(|scope| {
        // A rendezvous: a batch is handed over only once the writer has
        // finished the one before.
        let (to_writer, batches) = std::sync::mpsc::sync_channel::<rocksdb::WriteBatch>(0);
        let writer = (writes == Writes::Overlapped).then(|| {
            let (db, sync) = (&db, &sync);
            scope.spawn(move || -> Result<(), rocksdb::Error> {
                for batch in batches {
                    db.write_opt(batch, sync)?;
                }
                Ok(())
            })
        });
        let write = |batch: rocksdb::WriteBatch| -> anyhow::Result<()> {
            match writes {
                Writes::Inline => Ok(db.write_opt(batch, &sync)?),
                Writes::Overlapped => to_writer
                    .send(batch)
                    .map_err(|_| anyhow::anyhow!("the writer thread stopped")),
            }
        };
        let mut windows = Windows::new();
        let mut changed: Vec<(i64, String)> = Vec::new();
        let mut closed: Vec<Vec<u8>> = Vec::new();
        let (mut since, mut failed) = (0, None);
        let read = super::read_partitions_stamped(partitions, |key, value, timestamp| {
            std::hint::black_box(&value);
            position.set(position.get() + 1);
            let start = match counting {
                Counting::Nothing => None,
                Counting::PerKey => Some(0),
                Counting::PerWindow { millis } => {
                    // Every window ending at or before this record closes.
                    while let Some(entry) = windows.first_entry()
                        && *entry.key() + millis <= timestamp
                    {
                        let (start, counts) = entry.remove_entry();
                        for (key, counted) in counts {
                            std::hint::black_box(counted.count);
                            closed.push(stored(start, &key));
                        }
                    }
                    Some(timestamp - timestamp.rem_euclid(millis))
                }
            };
            match start {
                None => {
                    std::hint::black_box(&key);
                }
                Some(start) => count(windows.entry(start).or_default(), &mut changed, start, key),
            }
            since += 1;
            if since == commit_records {
                since = 0;
                if let Err(error) = write(batch_of(&mut windows, &mut changed, &mut closed)) {
                    failed.get_or_insert(error);
                }
            }
        });
        // The last write, landed, is part of the work; the read loop's
        // time ends before it.
        let last = Instant::now();
        let written = write(batch_of(&mut windows, &mut changed, &mut closed));
        drop(to_writer);
        // A writer that failed says why; the handover only that it stopped.
        if let Some(writer) = writer {
            writer.join().expect("the writer thread panicked")?;
        }
        written?;
        let (records, reading) = read?;
        let elapsed = reading + last.elapsed();
        if let Some(error) = failed {
            return Err(error);
        }
        let open: usize = windows.values().map(HashMap::len).sum();
        let counts = !matches!(counting, Counting::Nothing);
        anyhow::ensure!(open > 0 || !counts, "no window open at the end");
        Ok((records, elapsed))
    })
}

/// Opens a RocksDB in `state` set as the runtime sets its stores (a
/// memtable entry updated in place holds one version per key, however
/// many commits rewrite it), with the options of a synced write.
pub fn open_store(state: &Path) -> Result<(rocksdb::DB, rocksdb::WriteOptions), rocksdb::Error> {
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    options.set_allow_concurrent_memtable_write(false);
    options.set_inplace_update_support(true);
    let db = rocksdb::DB::open(&options, state)?;
    let mut sync = rocksdb::WriteOptions::default();
    sync.set_sync(true);
    Ok((db, sync))
}

/// Counts `key` in the window `counts` (starting at `start`), noting in
/// `changed` a count that changed since the last write.
fn count(
    counts: &mut HashMap<String, Counted>,
    changed: &mut Vec<(i64, String)>,
    start: i64,
    key: String,
) {
    match counts.get_mut(key.as_str()) {
        Some(counted) => {
            counted.count += 1;
            if !std::mem::replace(&mut counted.changed, true) {
                changed.push((start, key));
            }
        }
        None => {
            changed.push((start, key.clone()));
            let counted = Counted {
                count: 1,
                changed: true,
            };
            counts.insert(key, counted);
        }
    }
}
