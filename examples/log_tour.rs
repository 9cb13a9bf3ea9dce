//! A tour of the segment log: create a topic, append batches, read them back
//! by offset and by timestamp, restart, and recover from a torn write.
//!
//! Run with `make demo` or `cargo run --example log_tour [DATA_DIR]`.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Context;
use strata::log::{LogConfig, LogManager, PartitionLog};
use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};

const PAGES: [&str; 4] = ["/home", "/docs", "/pricing", "/blog"];

fn main() -> anyhow::Result<()> {
    let data_dir = match std::env::args().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("strata-tour-{}", std::process::id())),
    };
    let _ = std::fs::remove_dir_all(&data_dir);
    println!("data directory: {}", data_dir.display());

    // Small segments so the tour rolls a few.
    let defaults = LogConfig {
        segment_bytes: 16 * 1024,
        ..LogConfig::default()
    };
    let manager = LogManager::open(&data_dir, defaults.clone())?;
    let topic = manager.create_topic(
        "clicks",
        2,
        BTreeMap::from([("retention.ms".into(), "604800000".into())]),
    )?;
    println!("created topic clicks, id {}", topic.id());

    // 20 batches of 100 click events per partition, every other one zstd-compressed.
    let base_ts = 1_700_000_000_000;
    for (p, partition) in topic.partitions.iter().enumerate() {
        for b in 0..20 {
            let codec = if b % 2 == 0 {
                Compression::None
            } else {
                Compression::Zstd
            };
            let mut builder = BatchBuilder::new(codec);
            for i in 0..100 {
                let n = b * 100 + i;
                let user = format!("user-{}", n % 7);
                let page = PAGES[n % PAGES.len()];
                builder.push(NewRecord::new(
                    Some(user.as_bytes()),
                    page.as_bytes(),
                    base_ts + n as i64 * 1000,
                ))?;
            }
            partition.append(&builder.build()?)?;
        }
        let durable = partition.flush()?;
        println!(
            "partition {p}: offsets {}..{} in {} segments, {} bytes, durable up to {durable}",
            partition.log_start_offset(),
            partition.log_end_offset(),
            partition.segment_count(),
            partition.size_bytes()
        );
    }

    let p0 = manager.partition("clicks", 0)?;
    println!("\nfirst 3 records from offset 1234:");
    print_records(&p0, 1234, 3)?;
    let (offset, ts) = p0
        .offset_for_timestamp(base_ts + 1_500_500)?
        .context("a record at that time exists")?;
    println!("first record at or after t+1500.5s: offset {offset} (timestamp {ts})");

    manager.close()?;
    println!("\nclosed cleanly; reopening");
    let manager = LogManager::open(&data_dir, defaults.clone())?;
    let p0 = manager.partition("clicks", 0)?;
    println!(
        "reopened: log end {}, segments scanned during recovery: {}",
        p0.log_end_offset(),
        p0.recovery_report().segments_scanned
    );

    // A crash in the middle of a write: half a batch at the end of the file.
    let torn_at = {
        let mut builder = BatchBuilder::new(Compression::None);
        builder.push(NewRecord::new(None, b"never acknowledged", base_ts))?;
        let batch = builder.build()?;
        let segment = std::fs::read_dir(p0.dir())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|e| e == "log"))
            .max()
            .context("a segment exists")?;
        let mut file = std::fs::OpenOptions::new().append(true).open(&segment)?;
        file.write_all(&batch[..batch.len() / 2])?;
        batch.len() / 2
    };
    drop(p0);
    drop(manager); // no close(): the next open recovers
    println!("\nsimulated a crash with {torn_at} bytes of a torn batch at the end");
    let manager = LogManager::open(&data_dir, defaults)?;
    let p0 = manager.partition("clicks", 0)?;
    let report = p0.recovery_report();
    match &report.truncation {
        Some(truncation) => println!("recovery: {truncation}"),
        None => println!("recovery: nothing to cut"),
    }
    println!(
        "log end after recovery: {} (nothing acknowledged was lost)",
        p0.log_end_offset()
    );
    manager.close()?;
    std::fs::remove_dir_all(&data_dir)?;
    Ok(())
}

fn print_records(log: &PartitionLog, from: i64, count: usize) -> anyhow::Result<()> {
    let bytes = log.read(from, 64 * 1024)?.read_to_vec()?;
    let mut rest = &bytes[..];
    let mut printed = 0;
    while !rest.is_empty() && printed < count {
        let batch = RecordBatch::parse_and_verify(rest)?;
        for record in batch.records(1 << 20)?.iter() {
            let record = record?;
            if record.offset >= from && printed < count {
                println!(
                    "  offset {} ts {} key {} value {}",
                    record.offset,
                    record.timestamp,
                    String::from_utf8_lossy(record.key.unwrap_or_default()),
                    String::from_utf8_lossy(record.value.unwrap_or_default())
                );
                printed += 1;
            }
        }
        rest = &rest[batch.size_bytes()..];
    }
    Ok(())
}
