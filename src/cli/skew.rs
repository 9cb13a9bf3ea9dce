//! `strata topics skew TOPIC`: which keys a topic's records carry most,
//! how many, and since when, and how its partitions share the records,
//! over a time range, read from the log itself (a fetch of every record
//! since `--since`, keys counted by the Space-Saving sketch of
//! strata-record's `heavy_hitters`, in bounded memory).
//!
//! It answers the question every log-based system has to: what key
//! determines ordering, and can it become hot? A key far above its share,
//! or a partition far above the mean, is where one consumer falls behind
//! while the others idle.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use strata_record::heavy_hitters::{HeavyHitters, HotKey};

use super::not_authorized::Needs;
use super::output::{Align, table_lines};
use super::{BrokerArgs, Format, print_json};
use crate::broker::acl::Operation;
use crate::client::{Cluster, EARLIEST, FetchOptions, Fetcher, LATEST};
use crate::record::RecordBatch;

/// Keys counted at once: the report's guarantees hold for keys above
/// 1/`KEYS_COUNTED` of the records read.
const KEYS_COUNTED: usize = 1024;
/// Bytes asked of the broker per fetch.
const FETCH_BYTES: i32 = 4 << 20;
/// Bytes a compressed batch may inflate to.
const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;

#[derive(Debug, Args)]
pub struct SkewArgs {
    pub topic: String,
    /// Where to start: `earliest`, a span back from now (`15m`, `1h`,
    /// `2d`), or a UTC time (`2026-12-05T12:00:00Z`).
    #[arg(long, default_value = "1h")]
    pub since: String,
    /// Keys to show.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Stop after reading this many records (the report says so).
    #[arg(long, default_value_t = 10_000_000)]
    pub records_max: u64,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// What the topic's partitions and keys carried.
struct Skew {
    /// Records read per partition.
    partitions: Vec<u64>,
    keys: HeavyHitters,
    /// Records read, in all.
    read: u64,
    /// Whether `--records-max` stopped the reading early.
    cut: bool,
}

pub async fn run(broker: &BrokerArgs, args: SkewArgs) -> anyhow::Result<()> {
    let since = since_ms(&args.since)?;
    let cluster = broker.connect().await?;
    let needs = Needs::new(&cluster.config().security, Operation::Read, &args.topic);
    let skew = read(cluster, &args, since)
        .await
        .map_err(|error| needs.explain(error))?;
    print(&args, &skew);
    Ok(())
}

/// `--since` as a fetch start: [`EARLIEST`], or ms since the epoch.
fn since_ms(since: &str) -> anyhow::Result<i64> {
    if since == "earliest" {
        return Ok(EARLIEST);
    }
    if let Some(span) = strata_record::time::parse_duration(since) {
        let back = i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
        return Ok(strata_record::time::now_ms().saturating_sub(back));
    }
    strata_record::time::parse_rfc3339(since).ok_or_else(|| {
        anyhow::anyhow!(
            "--since {since:?}: give earliest, a span back from now (15m, 1h, 2d) or a UTC time (2026-12-05T12:00:00Z)"
        )
    })
}

/// Every record of the topic from `since` to its end as it is now.
async fn read(cluster: Arc<Cluster>, args: &SkewArgs, since: i64) -> anyhow::Result<Skew> {
    let count = cluster.partition_count(&args.topic).await?;
    let fetcher = Fetcher::new(
        cluster,
        FetchOptions {
            max_wait: Duration::ZERO,
            ..FetchOptions::default()
        },
    );
    let mut skew = Skew {
        partitions: vec![0; count],
        keys: HeavyHitters::new(KEYS_COUNTED),
        read: 0,
        cut: false,
    };
    for partition in 0..count {
        let p = i32::try_from(partition)?;
        let end = (fetcher.list_offset(&args.topic, p, LATEST).await?).unwrap_or(0);
        let Some(mut offset) = fetcher.list_offset(&args.topic, p, since).await? else {
            continue;
        };
        while offset < end && !skew.cut {
            let fetched = fetcher.fetch(&args.topic, p, offset, FETCH_BYTES).await?;
            let before = offset;
            for batch in fetched.batches() {
                let batch = batch?;
                offset = offset.max(batch.header().next_offset());
                skew.count(partition, &batch, (fetched.offset, end), args.records_max)?;
            }
            if offset == before {
                break;
            }
        }
    }
    Ok(skew)
}

impl Skew {
    /// Counts the records of `batch` (of `partition`) at offsets in
    /// `from..end`, until `records_max` have been read in all.
    fn count(
        &mut self,
        partition: usize,
        batch: &RecordBatch<'_>,
        (from, end): (i64, i64),
        records_max: u64,
    ) -> anyhow::Result<()> {
        if batch.header().is_control() || self.cut {
            return Ok(());
        }
        for record in batch.records(DECOMPRESSED_BYTES_MAX)?.iter() {
            let record = record?;
            if !(from..end).contains(&record.offset) {
                continue;
            }
            if self.read >= records_max {
                self.cut = true;
                return Ok(());
            }
            // A record without a key has no key to be hot.
            if let Some(key) = record.key {
                self.keys.offer(key, 1, record.timestamp);
            }
            self.partitions[partition] += 1;
            self.read += 1;
        }
        Ok(())
    }
}

fn print(args: &SkewArgs, skew: &Skew) {
    let total: u64 = skew.partitions.iter().sum();
    let mean = total as f64 / skew.partitions.len().max(1) as f64;
    let share = |n: u64| n as f64 * 100.0 / total.max(1) as f64;
    let top = skew.keys.top(args.top);
    let key_text = |hot: &HotKey| match std::str::from_utf8(&hot.key) {
        Ok(text) => text.to_string(),
        Err(_) => format!("0x{}", strata_record::hex::hex(&hot.key)),
    };
    match args.format {
        Format::Json => print_json(&json!({
            "topic": args.topic,
            "records": total,
            "cut": skew.cut,
            "partitions": (skew.partitions.iter().enumerate()).map(|(p, n)| json!({
                "partition": p,
                "records": n,
                "vs_mean": *n as f64 / mean.max(f64::MIN_POSITIVE),
            })).collect::<Vec<_>>(),
            "keys": top.iter().map(|hot| json!({
                "key": key_text(hot),
                "records": hot.count,
                "error": hot.error,
                "share": share(hot.count) / 100.0,
                "since": strata_record::time::format_rfc3339(hot.since_ms),
            })).collect::<Vec<_>>(),
        })),
        Format::Text => {
            let rows: Vec<Vec<String>> = (skew.partitions.iter().enumerate())
                .map(|(p, n)| {
                    let vs_mean = *n as f64 / mean.max(f64::MIN_POSITIVE);
                    vec![
                        p.to_string(),
                        n.to_string(),
                        format!("{:.1}%", share(*n)),
                        format!("{vs_mean:.2}x"),
                    ]
                })
                .collect();
            let header = [
                ("PARTITION", Align::Right),
                ("RECORDS", Align::Right),
                ("SHARE", Align::Right),
                ("VS MEAN", Align::Right),
            ];
            table_lines(&header, &rows)
                .iter()
                .for_each(|l| println!("{l}"));
            println!();
            let rows: Vec<Vec<String>> = (top.iter())
                .map(|hot| {
                    vec![
                        key_text(hot),
                        hot.count.to_string(),
                        format!("{:.1}%", share(hot.count)),
                        format!("±{}", hot.error),
                        strata_record::time::format_rfc3339(hot.since_ms),
                    ]
                })
                .collect();
            let header = [
                ("KEY", Align::Left),
                ("RECORDS", Align::Right),
                ("SHARE", Align::Right),
                ("ERROR", Align::Right),
                ("SINCE", Align::Left),
            ];
            table_lines(&header, &rows)
                .iter()
                .for_each(|l| println!("{l}"));
            if skew.cut {
                println!(
                    "(stopped after {} records, --records-max; the counts are of those)",
                    args.records_max
                );
            }
        }
    }
}
