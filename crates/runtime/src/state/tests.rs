//! Unit tests of `TaskState`: runs, commits, the outbox, read-only opening.

use super::*;
use strata_record::{NewRecord, RecordBatch};

fn open(dir: &Path) -> TaskState {
    let mut state = TaskState::open(dir, &["counts", "users"], false).unwrap();
    if state.producer().is_none() {
        state.set_producer(7, 0).unwrap();
    }
    state
}

fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

fn record(value: &[u8]) -> NewRecord<'_> {
    NewRecord::new(None, value, 100)
}

/// (outbox seq, partition, base sequence, record count) of each batch.
fn outbox_shape(state: &TaskState) -> Vec<(u64, i32, i32, i32)> {
    state
        .outbox()
        .unwrap()
        .iter()
        .map(|(seq, b)| {
            let header = *RecordBatch::parse(&b.batch).unwrap().header();
            (*seq, b.partition, header.base_sequence, header.record_count)
        })
        .collect()
}

/// A commit left in flight while the next run goes on: the next run
/// reads its values (points and scans) and emits after its sequences;
/// a discard of the next run keeps it; settled, it is on disk.
#[test]
fn a_commit_in_flight_is_seen_by_the_next_run_and_lands_whole() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut state = open(dir.path());
        state.put("counts", b"a", b"1").unwrap();
        state.put("counts", b"b", b"2").unwrap();
        state.emit("out", 0, record(b"x")).unwrap();
        assert_eq!(state.begin_commit(&[("in", 2)]).unwrap(), 1);
        assert_eq!(state.input_offset("in"), Some(2));
        // The next run, while the write may still be running.
        assert_eq!(state.get("counts", b"a").unwrap(), Some(b"1".to_vec()));
        state.put("counts", b"b", b"3").unwrap();
        state.delete("counts", b"a").unwrap();
        assert_eq!(
            state.scan_prefix("counts", b"").unwrap(),
            entries(&[("b", "3")])
        );
        state.emit("out", 0, record(b"y")).unwrap();
        state.discard();
        assert_eq!(
            state.scan_prefix("counts", b"").unwrap(),
            entries(&[("a", "1"), ("b", "2")])
        );
        state.emit("out", 0, record(b"z")).unwrap();
        state.begin_commit(&[("in", 3)]).unwrap();
        state.settle().unwrap();
        // Sequences go on from the commit in flight's: 0, then 1.
        assert_eq!(outbox_shape(&state), vec![(0, 0, 0, 1), (1, 0, 1, 1)]);
    }
    let state = open(dir.path());
    assert_eq!(state.input_offset("in"), Some(3));
    assert_eq!(
        state.entries("counts").unwrap(),
        entries(&[("a", "1"), ("b", "2")])
    );
    assert_eq!(state.next_sequence("out", 0).unwrap(), 2);
}

#[test]
fn a_run_reads_its_own_writes_and_commits_them_with_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    assert_eq!(state.input_offset("in"), None);
    state.put("counts", b"a", b"1").unwrap();
    state.put("counts", b"b", b"2").unwrap();
    assert_eq!(state.get("counts", b"a").unwrap(), Some(b"1".to_vec()));
    state.commit(&[("in", 10)]).unwrap();
    assert_eq!(
        state.committed("counts", b"a").unwrap(),
        Some(b"1".to_vec())
    );

    state.put("counts", b"a", b"5").unwrap();
    state.delete("counts", b"b").unwrap();
    state.put("counts", b"c", b"3").unwrap();
    assert_eq!(
        state.get("counts", b"b").unwrap(),
        None,
        "the delete is seen"
    );
    assert_eq!(
        state.range("counts", b"", None).unwrap(),
        entries(&[("a", "5"), ("c", "3")])
    );
    state.discard();
    assert_eq!(
        state.entries("counts").unwrap(),
        entries(&[("a", "1"), ("b", "2")]),
        "a dropped run leaves nothing"
    );
    assert_eq!(
        state.get("counts", b"a").unwrap(),
        Some(b"1".to_vec()),
        "nor in the cache"
    );
    state.discard();
    assert_eq!(state.input_offset("in"), Some(10));
    drop(state);

    let state = open(dir.path());
    assert_eq!(
        state.input_offsets(),
        BTreeMap::from([("in".to_string(), 10)])
    );
    assert_eq!(
        state.committed("counts", b"b").unwrap(),
        Some(b"2".to_vec())
    );
    assert_eq!(state.producer(), Some((7, 0)));
}

#[test]
fn scans_merge_pending_writes_over_committed_ones_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for key in ["u/1", "u/3", "u/5", "v/1"] {
        state.put("users", key.as_bytes(), b"old").unwrap();
    }
    state.commit(&[("in", 1)]).unwrap();
    state.put("users", b"u/2", b"new").unwrap();
    state.put("users", b"u/3", b"new").unwrap();
    state.delete("users", b"u/5").unwrap();
    state.put("users", b"w/1", b"new").unwrap();
    assert_eq!(
        state.scan_prefix("users", b"u/").unwrap(),
        entries(&[("u/1", "old"), ("u/2", "new"), ("u/3", "new")])
    );
    assert_eq!(
        state.range("users", b"u/2", Some(b"v/2")).unwrap(),
        entries(&[("u/2", "new"), ("u/3", "new"), ("v/1", "old")])
    );
    assert!(
        state.scan_prefix("counts", b"u/").unwrap().is_empty(),
        "stores are apart"
    );
    assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
    assert_eq!(prefix_end(&[0xff, 0xff]), None);
}

#[test]
fn emitted_records_become_batches_with_dense_outbox_and_producer_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for (i, partition) in [0, 1, 0].into_iter().enumerate() {
        state.emit("out", partition, record(&[i as u8])).unwrap();
    }
    assert_eq!(state.commit(&[("in", 3)]).unwrap(), 2);
    state.emit("out", 0, record(b"k")).unwrap();
    state.commit(&[("in", 4)]).unwrap();
    assert_eq!(
        outbox_shape(&state),
        [(0, 0, 0, 2), (1, 1, 0, 1), (2, 0, 2, 1)]
    );
    let (_, first) = &state.outbox().unwrap()[0];
    let batch = RecordBatch::parse_and_verify(&first.batch).unwrap();
    assert_eq!(batch.header().producer_id, 7);
    let records = batch.records(1 << 20).unwrap();
    let values: Vec<_> = records
        .iter()
        .map(|r| r.unwrap().value.unwrap().to_vec())
        .collect();
    assert_eq!(
        values,
        [vec![0u8], vec![2u8]],
        "emission order within a partition"
    );

    state.remove_shipped(1).unwrap();
    drop(state);
    let mut state = open(dir.path());
    assert_eq!(outbox_shape(&state), [(2, 0, 2, 1)]);
    assert_eq!(state.next_sequence("out", 0).unwrap(), 3);
    assert_eq!(state.next_sequence("out", 1).unwrap(), 1);
    // New batches continue after the last, shipped or not, also once
    // everything is shipped and removed.
    state.remove_shipped(2).unwrap();
    state.emit("out", 1, record(b"x")).unwrap();
    state.commit(&[("in", 5)]).unwrap();
    assert_eq!(outbox_shape(&state), [(3, 1, 1, 1)]);
}

#[test]
fn a_full_batch_is_sealed_and_the_next_continues_its_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for _ in 0..OUTBOX_BATCH_RECORDS_MAX + 10 {
        state.emit("out", 0, record(b"v")).unwrap();
    }
    state.commit(&[("in", 1)]).unwrap();
    let max = OUTBOX_BATCH_RECORDS_MAX as i32;
    assert_eq!(outbox_shape(&state), [(0, 0, 0, max), (1, 0, max, 10)]);
}

#[test]
fn the_outbox_is_full_before_a_partition_could_get_more_than_five_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let full_batches = |state: &mut TaskState, partition: i32, count: usize| {
        for _ in 0..count * OUTBOX_BATCH_RECORDS_MAX {
            state.emit("out", partition, record(b"v")).unwrap();
        }
    };
    full_batches(&mut state, 0, 2);
    full_batches(&mut state, 1, 2);
    assert!(!state.outbox_full(), "4 sealed, 2 per partition");
    full_batches(&mut state, 0, 2);
    assert!(state.outbox_full(), "4 sealed for partition 0");
    state.emit("out", 0, record(b"v")).unwrap();
    state.commit(&[("in", 1)]).unwrap();
    let for_partition_0 = outbox_shape(&state).iter().filter(|b| b.1 == 0).count();
    assert_eq!(for_partition_0, OUTBOX_BATCHES_PER_PARTITION_MAX);
    assert!(!state.outbox_full());
}

#[test]
fn an_empty_run_moves_only_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    assert_eq!(state.commit(&[("in", 4)]).unwrap(), 0);
    assert_eq!(state.input_offset("in"), Some(4));
    assert!(state.outbox().unwrap().is_empty());
    assert!(state.entries("counts").unwrap().is_empty());
}

#[test]
fn the_input_offset_never_moves_back_and_names_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    state.commit(&[("in", 7)]).unwrap();
    state.put("counts", b"x", b"1").unwrap();
    assert!(matches!(
        state.commit(&[("in", 6)]),
        Err(StateError::OffsetBackwards {
            current: 7,
            next: 6,
            ..
        })
    ));
    state.discard();
    assert_eq!(
        state.committed("counts", b"x").unwrap(),
        None,
        "nothing written"
    );
    assert!(matches!(
        state.put("nope", b"k", b"v"),
        Err(StateError::UnknownStore(..))
    ));
    drop(state);
    assert!(matches!(
        TaskState::open(dir.path(), &["meta"], false),
        Err(StateError::ReservedName(_))
    ));
}

#[test]
fn read_only_opening_sees_the_stores_while_the_writer_holds_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    state.put("users", b"u", b"1").unwrap();
    state.emit("out", 0, record(b"v")).unwrap();
    state.commit(&[("in", 1)]).unwrap();
    let reader = TaskState::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.stores(), ["counts", "users"]);
    assert_eq!(reader.entries("users").unwrap(), entries(&[("u", "1")]));
    assert_eq!(reader.outbox().unwrap().len(), 1);
    assert_eq!(reader.input_offset("in"), Some(1));
}

/// The (key, value) records of the outbox batches bound for `topic`.
fn outbox_records(state: &TaskState, topic: &str) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut records = Vec::new();
    for (_, batch) in state.outbox().unwrap() {
        if batch.topic != topic {
            continue;
        }
        let parsed = RecordBatch::parse_and_verify(&batch.batch).unwrap();
        for record in parsed.records(1 << 20).unwrap().iter() {
            let record = record.unwrap();
            records.push((
                record.key.unwrap().to_vec(),
                record.value.map(<[u8]>::to_vec),
            ));
        }
    }
    records.sort();
    records
}

#[test]
fn a_commit_emits_each_written_key_once_to_its_stores_changelog() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    state.set_changelogs(vec![Some(("app-counts-changelog".into(), 2)), None]);
    state.put("counts", b"a", b"1").unwrap();
    state.put("counts", b"a", b"2").unwrap();
    state.put("counts", b"b", b"1").unwrap();
    state.put("users", b"u", b"x").unwrap();
    state.commit(&[("in", 3)]).unwrap();
    assert_eq!(
        outbox_records(&state, "app-counts-changelog"),
        vec![
            (b"a".to_vec(), Some(b"2".to_vec())),
            (b"b".to_vec(), Some(b"1".to_vec()))
        ],
        "the last value of each key, nothing of the store without a changelog"
    );
    assert!(
        state
            .outbox()
            .unwrap()
            .iter()
            .all(|(_, b)| b.partition == 2)
    );
    let (last, _) = *state.outbox().unwrap().last().unwrap();
    state.remove_shipped(last).unwrap();
    state.delete("counts", b"a").unwrap();
    state.commit(&[("in", 4)]).unwrap();
    assert_eq!(
        outbox_records(&state, "app-counts-changelog"),
        vec![(b"a".to_vec(), None)],
        "a delete is a tombstone"
    );
    assert_eq!(state.commit_number(), 2, "one number per commit");
}

#[test]
fn a_restored_state_holds_the_changelog_records_in_log_order_and_the_given_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let lineage = {
        let mut state = TaskState::open(dir.path(), &["counts"], false).unwrap();
        assert_eq!(state.lineage(), None, "no lineage before the restore ends");
        let mut restoring = state.restoring("counts").unwrap();
        restoring.put(b"a", Some(b"1")).unwrap();
        restoring.put(b"b", Some(b"1")).unwrap();
        restoring.put(b"a", Some(b"2")).unwrap();
        restoring.put(b"b", None).unwrap();
        restoring.flush().unwrap();
        let lineage = state.finish_restore(&[("in", 40)], 17, (9, 3)).unwrap();
        assert_eq!(state.lineage(), Some(lineage));
        lineage
    };
    let mut state = TaskState::open(dir.path(), &["counts"], false).unwrap();
    assert_eq!(state.get("counts", b"a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(state.get("counts", b"b").unwrap(), None);
    assert_eq!(state.input_offset("in"), Some(40));
    assert_eq!(state.commit_number(), 17);
    assert_eq!(state.lineage(), Some(lineage));
    assert_eq!(state.producer(), Some((9, 3)));
}

#[test]
fn a_restore_position_lands_with_its_entries_and_goes_when_the_restore_ends() {
    let dir = tempfile::tempdir().unwrap();
    {
        let state = TaskState::open(dir.path(), &["counts"], false).unwrap();
        assert_eq!(state.restored_position("counts").unwrap(), None);
        let mut restoring = state.restoring("counts").unwrap();
        restoring.put(b"a", Some(b"1")).unwrap();
        restoring.reached(8, 1_000);
        restoring.flush().unwrap();
        restoring.put(b"b", Some(b"1")).unwrap();
        // Not flushed: neither the entry nor the position lands.
    }
    let mut state = TaskState::open(dir.path(), &["counts"], false).unwrap();
    assert_eq!(state.restored_position("counts").unwrap(), Some(8));
    assert_eq!(state.get("counts", b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(state.get("counts", b"b").unwrap(), None);
    state.finish_restore(&[("in", 3)], 2, (9, 3)).unwrap();
    assert_eq!(
        state.restored_position("counts").unwrap(),
        None,
        "a live state's changelog position would lie"
    );
}

#[test]
fn a_restore_position_keeps_how_recent_what_lies_past_it_is_and_when_the_copy_began() {
    let dir = tempfile::tempdir().unwrap();
    let before = strata_record::time::now_ms();
    {
        let state = TaskState::open(dir.path(), &["counts"], false).unwrap();
        let mut restoring = state.restoring("counts").unwrap();
        restoring.put(b"a", Some(b"1")).unwrap();
        restoring.reached(8, 5_000);
        restoring.reached(9, 4_000);
        restoring.flush().unwrap();
    }
    let state = TaskState::open(dir.path(), &["counts"], false).unwrap();
    let restored = state.restored("counts").unwrap().unwrap();
    assert_eq!((restored.next, restored.unread_after_ms), (9, 5_000));
    assert!(restored.began_ms >= before);
    // Read on later: the copy still began then.
    let mut restoring = state.restoring("counts").unwrap();
    restoring.reached(12, 7_000);
    restoring.flush().unwrap();
    let later = state.restored("counts").unwrap().unwrap();
    assert_eq!((later.next, later.unread_after_ms), (12, 7_000));
    assert_eq!(later.began_ms, restored.began_ms);
    // Tombstones past it are kept a retention past the later of the two.
    let began = later.began_ms;
    assert_eq!(later.tombstones_kept_until(100), began.max(7_000) + 100);
}

#[test]
fn a_restore_position_written_before_its_times_reads_back_as_of_unknown_age() {
    let dir = tempfile::tempdir().unwrap();
    let state = TaskState::open(dir.path(), &["counts"], false).unwrap();
    let meta = state.cf(super::META).unwrap();
    let key = super::meta::topic_key(super::meta::RESTORED_PREFIX, "counts");
    state.db.put_cf(meta, key, 8i64.to_be_bytes()).unwrap();
    let restored = state.restored("counts").unwrap().unwrap();
    assert_eq!(restored.next, 8);
    assert_eq!(
        restored.tombstones_kept_until(86_400_000),
        i64::MIN + 86_400_000
    );
}

#[test]
fn a_standby_idle_at_the_end_writes_its_position_again_only_when_its_time_moved_a_step() {
    let dir = tempfile::tempdir().unwrap();
    let state = TaskState::open(dir.path(), &["counts"], false).unwrap();
    let mut restoring = state.restoring("counts").unwrap();
    restoring.reached(8, 10_000);
    restoring.flush().unwrap();
    restoring.reached(8, 10_500);
    restoring.flush().unwrap();
    assert_eq!(
        state.restored("counts").unwrap().unwrap().unread_after_ms,
        10_000
    );
    restoring.reached(8, 11_000);
    restoring.flush().unwrap();
    assert_eq!(
        state.restored("counts").unwrap().unwrap().unread_after_ms,
        11_000
    );
}

#[test]
fn a_long_restore_written_as_table_files_leaves_what_the_log_applied_in_order_does() {
    // Runs long enough to be written as table files, over keys that come
    // back in later runs (a value replaced, a key deleted, deleted and
    // put again), and a short run after them (a write batch).
    let dir = tempfile::tempdir().unwrap();
    let mut applied: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = Default::default();
    let value = vec![7u8; 200];
    {
        let state = TaskState::open(dir.path(), &["counts"], false).unwrap();
        let mut restoring = state.restoring("counts").unwrap();
        let mut offset = 0i64;
        for (run, keys) in [(0u32, 20_000u32), (1, 20_000), (2, 50)] {
            for i in 0..keys {
                let key = format!("k{:06}", (i * 7 + run * 3) % 15_000).into_bytes();
                offset += 1;
                if (i + run) % 5 == 0 {
                    restoring.put(&key, None).unwrap();
                    applied.remove(&key);
                } else {
                    let mut v = value.clone();
                    v.extend_from_slice(&offset.to_be_bytes());
                    restoring.put(&key, Some(&v)).unwrap();
                    applied.insert(key, v);
                }
            }
            restoring.reached(offset, 1_000);
            restoring.flush().unwrap();
        }
        assert_eq!(state.restored_position("counts").unwrap(), Some(offset));
    }
    assert!(
        !crate::layout::restore_table(dir.path(), "counts").exists(),
        "the table file moved into the database"
    );
    let mut state = TaskState::open(dir.path(), &["counts"], false).unwrap();
    let restored = state.scan_prefix("counts", b"").unwrap();
    assert_eq!(restored, applied.into_iter().collect::<Vec<_>>());
}

#[test]
fn a_lineage_is_drawn_once_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path()).ensure_lineage().unwrap();
    let mut state = open(dir.path());
    assert_eq!(state.lineage(), Some(first));
    assert_eq!(state.ensure_lineage().unwrap(), first);
}

#[test]
fn the_write_cache_writes_a_key_once_per_commit_and_without_it_every_write() {
    for (cache, written) in [(true, 2), (false, 5)] {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        state.set_write_cache(cache);
        for n in 0..4u8 {
            state.put("counts", b"hot", &[n]).unwrap();
        }
        state.delete("users", b"gone").unwrap();
        state.commit(&[("in", 1)]).unwrap();
        assert_eq!(state.store_writes(), written, "cache {cache}");
        // Either way the last write of a key is what is committed.
        assert_eq!(state.committed("counts", b"hot").unwrap(), Some(vec![3]));
        state.put("users", b"gone", b"back").unwrap();
        state.discard();
        state.commit(&[("in", 2)]).unwrap();
        assert_eq!(
            state.store_writes(),
            written,
            "a discarded run writes nothing"
        );
        assert_eq!(state.committed("users", b"gone").unwrap(), None);
    }
}

/// Shipping many commits leaves the outbox as cheap to read as the first
/// time: the reads start above every shipped batch, so they step over none
/// of their deletes (a regression: range deletes from 0, one per commit,
/// made every commit slower than the one before).
#[test]
fn reading_the_outbox_steps_over_no_shipped_batch() {
    use rocksdb::perf::{PerfContext, PerfMetric, PerfStatsLevel, set_perf_stats};
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for offset in 1..=500 {
        state.emit("out", 0, record(b"v")).unwrap();
        state.commit(&[("in", offset)]).unwrap();
        let (last, _) = *state.outbox().unwrap().last().unwrap();
        state.remove_shipped(last).unwrap();
    }
    state.emit("out", 0, record(b"w")).unwrap();
    state.commit(&[("in", 501)]).unwrap();
    set_perf_stats(PerfStatsLevel::EnableCount);
    let mut perf = PerfContext::default();
    perf.reset();
    assert_eq!(outbox_shape(&state), [(500, 0, 500, 1)]);
    assert!(!state.outbox_is_empty().unwrap());
    let skipped = perf.metric(PerfMetric::InternalDeleteSkippedCount);
    set_perf_stats(PerfStatsLevel::Disable);
    assert_eq!(skipped, 0, "outbox reads stepped over shipped batches");
}

/// A rebuilt state that takes over the live one's outbox ships every
/// batch of it, whatever it had shipped of its own before.
#[test]
fn adopted_outbox_batches_are_all_read_whatever_the_adopters_floor() {
    let (live_dir, rebuilt_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut live = open(live_dir.path());
    live.emit("out", 0, record(b"a")).unwrap();
    live.emit("out", 1, record(b"b")).unwrap();
    live.commit(&[("in", 1)]).unwrap();
    let mut rebuilt = open(rebuilt_dir.path());
    for offset in 1..=5 {
        rebuilt.emit("out", 0, record(b"r")).unwrap();
        rebuilt.commit(&[("in", offset)]).unwrap();
        let (last, _) = *rebuilt.outbox().unwrap().last().unwrap();
        rebuilt.remove_shipped(last).unwrap();
    }
    rebuilt.adopt_bookkeeping(&live).unwrap();
    assert_eq!(outbox_shape(&rebuilt), outbox_shape(&live));
    assert_eq!(outbox_shape(&rebuilt).len(), 2);
}
