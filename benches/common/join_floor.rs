//! The stream–table join's durable floor: what a plain program pays to
//! join every record with its key's row and emit the result exactly once,
//! as the runtime's design does it, with nothing of the runtime in it.
//!
//! The table is read into a `HashMap` (as the in-memory floor reads it).
//! Each record of `events` is looked up and its output (its key, the row)
//! pushed into a record batch, sealed at the outbox's batch size. Every
//! `commit_records` records (and at the end) the sealed batches are
//! written with the loop's position in one synced RocksDB write batch (the
//! outbox committed with the input offset), then appended to the output
//! partition, which is then synced, and deleted from RocksDB by the next
//! write: the runtime's commit, then its shipping. Both run on a thread of
//! their own while the loop goes on (one commit in flight); the runtime
//! overlaps only the first, and ships on the task's thread.
//!
//! Records/s count the table's rows with the events, as the join's case
//! does (its app reads both).

use std::path::Path;
use std::time::Instant;

use strata::log::{LogConfig, LogManager, PartitionLog};
use strata::record::{BatchBuilder, Compression, NewRecord};

/// Records per output batch, as the runtime's outbox seals them.
const BATCH_RECORDS: usize = strata::runtime::state::OUTBOX_BATCH_RECORDS_MAX;

/// The outbox's batches and the position they were committed with.
struct Commit {
    batches: Vec<Vec<u8>>,
    position: u64,
}

/// Joins `expected` records of `events` in `data` with the rows of
/// `table` (`table_rows` of them), emitting to a new topic `out`, its
/// outbox kept in a RocksDB in `state`; records/s of the rows and events
/// read, the last commit and shipping included.
pub fn join_durable(
    data: &Path,
    state: &Path,
    (table, table_rows): (&str, u64),
    out: &str,
    expected: u64,
    commit_records: u64,
) -> anyhow::Result<f64> {
    let (db, sync) = super::durable::open_store(state)?;
    let log = LogManager::open(data, LogConfig::default())?;
    let output = log.create_topic(out, 1, Default::default())?.partitions[0].clone();
    let table = super::partitions_of(&log, table)?;
    let events = super::partitions_of(&log, "events")?;

    let started = Instant::now();
    let mut rows = std::collections::HashMap::<String, Vec<u8>>::new();
    let (read, _) = super::read_partitions_stamped(&table, |key, row, _| {
        rows.insert(key, row);
    })?;
    anyhow::ensure!(read == table_rows, "read {read} rows");
    let joined = std::thread::scope(|scope| {
        // A rendezvous: a commit is handed over once the one before landed.
        let (to_writer, commits) = std::sync::mpsc::sync_channel::<Commit>(0);
        let (db, sync, output) = (&db, &sync, &output);
        let writer = scope.spawn(move || write_and_ship(db, sync, output, commits));
        let mut builder = BatchBuilder::new(Compression::None);
        let mut sealed: Vec<Vec<u8>> = Vec::new();
        let (mut position, mut found, mut failed) = (0u64, 0u64, None);
        let commit = |builder: &mut BatchBuilder, sealed: &mut Vec<Vec<u8>>, position| {
            seal(builder, sealed)?;
            let batches = std::mem::take(sealed);
            (to_writer.send(Commit { batches, position }))
                .map_err(|_| anyhow::anyhow!("the writer thread stopped"))
        };
        let read = super::read_partitions_stamped(&events, |key, value, timestamp| {
            std::hint::black_box(&value);
            let row = rows.get(key.as_str()).map_or(&[][..], Vec::as_slice);
            found += u64::from(!row.is_empty());
            let pushed = builder.push(NewRecord::new(Some(key.as_bytes()), row, timestamp));
            if let Err(error) = pushed {
                failed.get_or_insert(error.into());
            }
            if builder.len() == BATCH_RECORDS
                && let Err(error) = seal(&mut builder, &mut sealed)
            {
                failed.get_or_insert(error);
            }
            position += 1;
            if position % commit_records == 0
                && let Err(error) = commit(&mut builder, &mut sealed, position)
            {
                failed.get_or_insert(error);
            }
        });
        let last = commit(&mut builder, &mut sealed, position);
        drop(to_writer);
        writer.join().expect("the writer thread panicked")?;
        last?;
        if let Some(error) = failed {
            return Err(error);
        }
        anyhow::ensure!(
            found == expected,
            "{found} of {expected} records found a row"
        );
        anyhow::Ok(read?.0)
    })?;
    let elapsed = started.elapsed();
    anyhow::ensure!(joined == expected, "joined {joined} records");
    let shipped = output.log_end_offset();
    anyhow::ensure!(shipped == expected as i64, "shipped {shipped} records");
    drop((output, table, events));
    log.close()?;
    Ok(super::rate(table_rows + expected, elapsed))
}

/// Seals `builder`'s batch into `sealed` (nothing if it is empty) and
/// opens the next.
fn seal(builder: &mut BatchBuilder, sealed: &mut Vec<Vec<u8>>) -> anyhow::Result<()> {
    let open = std::mem::replace(builder, BatchBuilder::new(Compression::None));
    if !open.is_empty() {
        sealed.push(open.build()?);
    }
    Ok(())
}

/// The writer thread: each commit's batches put with the position in one
/// synced write (the last commit's deleted in it), then appended to
/// `output` and synced.
fn write_and_ship(
    db: &rocksdb::DB,
    sync: &rocksdb::WriteOptions,
    output: &PartitionLog,
    commits: std::sync::mpsc::Receiver<Commit>,
) -> anyhow::Result<()> {
    let mut shipped = 0..0u64;
    let mut next = 0u64;
    for Commit { batches, position } in commits {
        let mut write = rocksdb::WriteBatch::default();
        for seq in shipped.clone() {
            write.delete(seq.to_be_bytes());
        }
        let first = next;
        for batch in &batches {
            write.put(next.to_be_bytes(), batch);
            next += 1;
        }
        write.put(b"\0position", position.to_le_bytes());
        db.write_opt(write, sync)?;
        for batch in &batches {
            output.append(batch)?;
        }
        output.flush()?;
        shipped = first..next;
    }
    Ok(())
}
