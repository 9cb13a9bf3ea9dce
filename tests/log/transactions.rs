//! Transactions at the log: transactional batches and the markers that end
//! them, against a model. Whatever the interleaving of producers, commits,
//! aborts and reopens (clean or not), the last stable offset is the first
//! offset of the oldest open transaction (or the log end), a
//! `read_committed` reader that drops the aborted transactions the read
//! lists sees exactly the committed values below it, a `read_uncommitted`
//! reader sees every value, and a marker of a newer epoch fences the older;
//! a producer with a transaction open is never forgotten as idle.

use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;
use strata::log::{Isolation, LogConfig, LogError, LogManager, PartitionLog};
use strata::record::{
    BatchBuilder, Compression, ControlRecord, MarkerKind, NewRecord, RecordBatch,
};

const NAME: &str = "txn-0";
const PRODUCERS: i64 = 3;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// A batch of `values`: transactional when `producer` is given as (id,
/// epoch, first sequence).
fn batch(producer: Option<(i64, i16, i32)>, values: &[String]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    if let Some((id, epoch, sequence)) = producer {
        builder = builder.producer(id, epoch, sequence).transactional(true);
    }
    for value in values {
        builder
            .push(NewRecord::new(None, value.as_bytes(), 1_000))
            .unwrap();
    }
    builder.build().unwrap()
}

fn marker(kind: MarkerKind) -> ControlRecord {
    ControlRecord {
        kind,
        coordinator_epoch: 0,
    }
}

/// What a reader of `isolation` gets from the start: the values, with the
/// records of aborted transactions dropped as a Kafka consumer drops them
/// (the read's list says where each starts; its ABORT marker ends it).
fn read(log: &PartitionLog, isolation: Isolation) -> Vec<String> {
    read_from(log, log.log_start_offset(), isolation)
}

/// [`read`] from `from` on (records of earlier offsets in the first batch
/// dropped, as a consumer drops them).
fn read_from(log: &PartitionLog, from: i64, isolation: Isolation) -> Vec<String> {
    let read = log.read_isolated(from, u64::MAX, isolation).unwrap();
    let bytes = read.read_to_vec().unwrap();
    let mut aborted = read.aborted.clone();
    aborted.sort_by_key(|a| a.first_offset);
    let mut aborted = aborted.into_iter().peekable();
    let mut skipping: HashSet<i64> = HashSet::new();
    let mut values = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let batch = RecordBatch::parse_and_verify(rest).unwrap();
        rest = &rest[batch.size_bytes()..];
        let header = batch.header();
        while let Some(next) = aborted.peek() {
            if next.first_offset > header.last_offset() {
                break;
            }
            skipping.insert(next.producer_id);
            aborted.next();
        }
        if header.is_control() {
            let control = ControlRecord::of(&batch).unwrap();
            if control.kind == MarkerKind::Abort {
                skipping.remove(&header.producer_id);
            }
            continue;
        }
        if header.is_transactional() && skipping.contains(&header.producer_id) {
            continue;
        }
        for record in batch.records(1 << 20).unwrap().iter() {
            let record = record.unwrap();
            if record.offset >= from {
                values.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
            }
        }
    }
    values
}

#[derive(Debug, Clone)]
enum Op {
    /// A transactional batch of producer `p` with `n` records.
    Data {
        p: i64,
        n: usize,
    },
    /// A batch of `n` records outside any transaction.
    Plain {
        n: usize,
    },
    /// A marker for producer `p`.
    End {
        p: i64,
        commit: bool,
    },
    Reopen {
        clean: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PRODUCERS, 1..4usize).prop_map(|(p, n)| Op::Data { p, n }),
        2 => (1..3usize).prop_map(|n| Op::Plain { n }),
        3 => (0..PRODUCERS, any::<bool>()).prop_map(|(p, commit)| Op::End { p, commit }),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

/// What the log should hold.
#[derive(Default)]
struct Model {
    end: i64,
    /// Every value with its offset, and the producer of its transaction.
    values: Vec<(i64, Option<i64>, String)>,
    /// Open transactions: producer → first offset.
    open: HashMap<i64, i64>,
    /// Offsets of values whose transaction aborted.
    aborted: HashSet<i64>,
    sequences: HashMap<i64, i32>,
    counter: usize,
}

impl Model {
    fn last_stable(&self) -> i64 {
        self.open.values().copied().min().unwrap_or(self.end)
    }

    fn committed_below_last_stable(&self) -> Vec<String> {
        self.committed_from(0)
    }

    fn committed_from(&self, from: i64) -> Vec<String> {
        let stable = self.last_stable();
        self.values
            .iter()
            .filter(|(offset, _, _)| {
                (from..stable).contains(offset) && !self.aborted.contains(offset)
            })
            .map(|(_, _, v)| v.clone())
            .collect()
    }

    fn everything(&self) -> Vec<String> {
        self.values.iter().map(|(_, _, v)| v.clone()).collect()
    }

    fn fresh_values(&mut self, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                self.counter += 1;
                format!("v{}", self.counter)
            })
            .collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_log_matches_the_model_through_commits_aborts_and_reopens(ops in prop::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = PartitionLog::open(dir.path(), NAME, config(), true).unwrap();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Data { p, n } => {
                    let values = model.fresh_values(n);
                    let sequence = *model.sequences.get(&p).unwrap_or(&0);
                    let info = log.append(&batch(Some((p, 0, sequence)), &values)).unwrap();
                    prop_assert_eq!(info.base_offset, model.end);
                    model.sequences.insert(p, sequence + n as i32);
                    model.open.entry(p).or_insert(model.end);
                    for value in values {
                        model.values.push((model.end, Some(p), value));
                        model.end += 1;
                    }
                }
                Op::Plain { n } => {
                    let values = model.fresh_values(n);
                    log.append(&batch(None, &values)).unwrap();
                    for value in values {
                        model.values.push((model.end, None, value));
                        model.end += 1;
                    }
                }
                Op::End { p, commit } => {
                    let kind = if commit { MarkerKind::Commit } else { MarkerKind::Abort };
                    let info = log.append_marker(p, 0, marker(kind)).unwrap();
                    prop_assert_eq!(info.base_offset, model.end);
                    if let Some(first) = model.open.remove(&p)
                        && !commit
                    {
                        for (offset, producer, _) in &model.values {
                            if *offset >= first && *producer == Some(p) {
                                model.aborted.insert(*offset);
                            }
                        }
                    }
                    model.end += 1;
                }
                Op::Reopen { clean } => {
                    if clean {
                        log.close().unwrap();
                    }
                    drop(log);
                    log = PartitionLog::open(dir.path(), NAME, config(), clean).unwrap();
                }
            }
            prop_assert_eq!(log.log_end_offset(), model.end);
            prop_assert_eq!(log.last_stable_offset(), model.last_stable());
            prop_assert_eq!(read(&log, Isolation::ReadCommitted), model.committed_below_last_stable());
            prop_assert_eq!(read(&log, Isolation::ReadUncommitted), model.everything());
        }
        // A reader may start anywhere, a marker included.
        for from in 0..model.last_stable() {
            prop_assert_eq!(read_from(&log, from, Isolation::ReadCommitted), model.committed_from(from), "from {}", from);
        }
        let open: BTreeMap<i64, i64> = log
            .open_transactions()
            .iter()
            .map(|t| (t.producer_id, t.first_offset))
            .collect();
        let expected: BTreeMap<i64, i64> = model.open.iter().map(|(p, f)| (*p, *f)).collect();
        prop_assert_eq!(open, expected);
    }
}

#[test]
fn a_marker_of_a_newer_epoch_fences_the_older_and_restarts_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), NAME, config(), true).unwrap();
    let one = |v: &str| vec![v.to_string()];
    log.append(&batch(Some((5, 0, 0)), &one("a"))).unwrap();
    log.append(&batch(Some((5, 0, 1)), &one("b"))).unwrap();
    // The coordinator fenced epoch 0: its transaction is aborted at epoch 1.
    log.append_marker(5, 1, marker(MarkerKind::Abort)).unwrap();
    let fenced = log.append(&batch(Some((5, 0, 2)), &one("zombie")));
    assert!(
        matches!(fenced, Err(LogError::InvalidProducerEpoch { .. })),
        "{fenced:?}"
    );
    let gap = log.append(&batch(Some((5, 1, 3)), &one("gap")));
    assert!(
        matches!(gap, Err(LogError::OutOfOrderSequence { .. })),
        "{gap:?}"
    );
    log.append(&batch(Some((5, 1, 0)), &one("c"))).unwrap();
    // A marker of the fenced epoch is refused too.
    assert!(matches!(
        log.append_marker(5, 0, marker(MarkerKind::Commit)),
        Err(LogError::InvalidProducerEpoch { .. })
    ));
    log.append_marker(5, 1, marker(MarkerKind::Commit)).unwrap();
    assert_eq!(read(&log, Isolation::ReadCommitted), ["c"]);
    assert_eq!(read(&log, Isolation::ReadUncommitted), ["a", "b", "c"]);
    // The same after an unclean reopen, which rebuilds it all from the log.
    drop(log);
    let log = PartitionLog::open(dir.path(), NAME, config(), false).unwrap();
    assert!(matches!(
        log.append(&batch(Some((5, 0, 9)), &one("zombie"))),
        Err(LogError::InvalidProducerEpoch { .. })
    ));
    assert_eq!(read(&log, Isolation::ReadCommitted), ["c"]);
    assert_eq!(log.producer_state_load().markers, 2);
}

#[test]
fn a_read_committed_read_at_or_past_the_last_stable_offset_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), NAME, config(), true).unwrap();
    log.append(&batch(None, &["plain".to_string()])).unwrap();
    log.append(&batch(Some((1, 0, 0)), &["open".to_string()]))
        .unwrap();
    log.append(&batch(None, &["after".to_string()])).unwrap();
    assert_eq!(log.last_stable_offset(), 1);
    for offset in 1..=3 {
        let read = log
            .read_isolated(offset, u64::MAX, Isolation::ReadCommitted)
            .unwrap();
        assert!(read.slices.is_empty(), "offset {offset}");
        assert_eq!(read.last_stable_offset, 1);
    }
    let read = log
        .read_isolated(0, u64::MAX, Isolation::ReadCommitted)
        .unwrap();
    assert_eq!(read.slices.len(), 1);
}

/// Kafka never forgets a producer while it has a transaction open in the
/// partition (`producer.id.expiration.ms` counts only between
/// transactions): a batch resent late in a long transaction, or after the
/// broker restarted, is still recognised. Forgotten, the producer would be
/// unknown, the resend appended with any sequence, and its transaction
/// would commit the batch twice.
#[test]
fn a_producer_with_a_transaction_open_is_not_forgotten_and_its_resend_is_not_stored_twice() {
    const EXPIRATION_MS: i64 = 500;
    let much_later = strata::log::now_ms() + 3_600_000;
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), NAME, config(), true).unwrap();
    let first = batch(Some((5, 2, 40)), &["a".to_string(), "b".to_string()]);
    log.append(&first).unwrap();
    assert_eq!(log.expire_producers(much_later, EXPIRATION_MS), 0);
    assert!(log.append(&first).unwrap().duplicate);
    // The same once the partition is reopened (the broker killed): the
    // open transaction is rebuilt from the log, and keeps its producer.
    drop(log);
    let log = PartitionLog::open(dir.path(), NAME, config(), false).unwrap();
    assert_eq!(log.expire_producers(much_later, EXPIRATION_MS), 0);
    assert!(log.append(&first).unwrap().duplicate);
    log.append_marker(5, 2, marker(MarkerKind::Commit)).unwrap();
    assert_eq!(read(&log, Isolation::ReadCommitted), ["a", "b"]);
    // Between transactions it idles like any producer, and is forgotten.
    assert_eq!(log.expire_producers(much_later, EXPIRATION_MS), 1);
    assert_eq!(log.producer_epoch(5), None);
}

/// The broker's periodic pass (`LogManager::enforce_retention`, which also
/// forgets idle producers) keeps the producer of an open transaction and
/// forgets an idle one beside it.
#[test]
fn the_periodic_pass_forgets_an_idle_producer_but_not_one_in_a_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogManager::open(dir.path(), config()).unwrap();
    log.create_topic("txn", 1, BTreeMap::new()).unwrap();
    log.set_producer_expiration_ms(1);
    let partition = log.partition("txn", 0).unwrap();
    partition
        .append(&batch(Some((5, 0, 0)), &["open".to_string()]))
        .unwrap();
    let mut idempotent = BatchBuilder::new(Compression::None).producer(6, 0, 0);
    idempotent
        .push(NewRecord::new(None, b"idle", 1_000))
        .unwrap();
    partition.append(&idempotent.build().unwrap()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    log.enforce_retention();
    assert_eq!(partition.producer_epoch(5), Some(0), "in a transaction");
    assert_eq!(partition.producer_epoch(6), None, "idle, no transaction");
}
