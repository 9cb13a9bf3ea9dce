//! Avro records through the runtime beside a plain loop decoding the same
//! records with the same crate, in one run (`make bench-schema`).
//!
//! The input: 1 million orders (a long, a 12-character customer, a
//! double, a null note: 24 bytes of Avro after the wire format's 5-byte
//! header), keyed by customer, in uncompressed batches of 1,000, in a
//! topic of one partition, written through a registry held in the process
//! (`MemoryRegistry`: the bench measures decoding, not HTTP; the codecs
//! ask a registry once per schema id either way).
//!
//! - `plain loop`: the runtime benchmarks' fetch-and-decode loop (4 MiB
//!   fetches, every batch verified, key and value taken as owned bytes),
//!   no Avro: the floor of reading the records at all.
//! - `plain Avro loop`: the plain loop also decoding each value into the
//!   `Order` struct with apache-avro, its reader built once for the
//!   schema, as a hand-written consumer would.
//! - `runtime, pass-through`: an app reading the topic with
//!   `Codec::avro(ORDER)` into `Record<String, Order>`, its processor
//!   doing nothing, the offset committed: what an app pays to get typed
//!   Avro records.
//!
//! Each case runs `ROUNDS` times after a warm-up read; the best round is
//! reported with its ratio to the plain Avro loop's best.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

mod common;

use serde::{Deserialize, Serialize};
use strata::log::{LogConfig, LogManager};
use strata::record::codec::{Codec, Part};
use strata::record::{BatchBuilder, Compression, NewRecord};
use strata::runtime::{App, Context, Location, ProcessError, Record, Topic};

const RECORDS: u64 = 1_000_000;
const ROUNDS: usize = 3;

const ORDER: &str = r#"{"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": null}]}"#;

const ORDERS: Topic<String, Order> = Topic::new("orders").codecs(Codec::Utf8, Codec::avro(ORDER));

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
    amount: f64,
    note: Option<String>,
}

fn pass_through(record: Record<String, Order>, _ctx: &mut Context) -> Result<(), ProcessError> {
    std::hint::black_box(&record);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let registry = Arc::new(strata_schema::registry::MemoryRegistry::new());
    strata_schema::install(registry, strata_schema::SubjectStrategy::TopicName);
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let bytes = write_orders(&data)?;
    println!(
        "input: {RECORDS} Avro orders ({:.0} MiB of batches), 1 partition",
        bytes as f64 / (1 << 20) as f64
    );
    let schema = apache_avro::Schema::parse_str(ORDER)?;
    common::read_loop(&data, "orders", RECORDS, |_, _| {})?; // warm-up
    let runtime = tokio::runtime::Runtime::new()?;
    let (mut plain, mut avro, mut app) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        plain.push(common::plain_loop_over(&data, "orders", RECORDS)?);
        avro.push(plain_avro_loop(&data, &schema)?);
        let name = format!("avro-{round}");
        let app_under_test = App::new(&name)
            .processor("pass", pass_through)
            .input(ORDERS);
        let location = Location::embedded(&data, &name);
        app.push(runtime.block_on(common::run_to_end(&app_under_test, &location, RECORDS))?);
    }
    let floor = common::best(&avro);
    common::print_rows([
        (("plain loop (no Avro)".to_string(), plain), floor),
        (("plain Avro loop".to_string(), avro), floor),
        (("runtime, pass-through".to_string(), app), floor),
    ]);
    Ok(())
}

/// Records/s of the plain loop decoding every value as an `Order` with a
/// reader built once.
fn plain_avro_loop(data: &Path, schema: &apache_avro::Schema) -> anyhow::Result<f64> {
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(schema)
        .human_readable(false)
        .build()?;
    let mut failed = None;
    let rate = common::read_loop(data, "orders", RECORDS, |_, value| {
        match reader.read_deser::<Order>(&mut &value[strata_schema::wire::HEADER_LEN..]) {
            Ok(order) => {
                std::hint::black_box(order);
            }
            Err(error) => failed = Some(error),
        }
    })?;
    match failed {
        Some(error) => Err(error.into()),
        None => Ok(rate),
    }
}

/// Writes the orders through the registry codec; returns their size in
/// bytes.
fn write_orders(data: &Path) -> anyhow::Result<u64> {
    let log = LogManager::open(data, LogConfig::default())?;
    let topic = log.create_topic("orders", 1, BTreeMap::new())?;
    let partition = &topic.partitions[0];
    let codec = Codec::avro(ORDER);
    let now = strata::log::now_ms();
    let mut batch = BatchBuilder::new(Compression::None);
    let mut value = Vec::new();
    for id in 0..RECORDS {
        let customer = format!("customer-{:03}", id % 1000);
        let order = Order {
            id: id as i64,
            customer: customer.clone(),
            amount: (id % 10_000) as f64 / 100.0,
            note: None,
        };
        codec.encode_record_into("orders", Part::Value, &order, &mut value)?;
        batch.push(NewRecord::new(Some(customer.as_bytes()), &value, now))?;
        if batch.len() == 1_000 {
            let full = std::mem::replace(&mut batch, BatchBuilder::new(Compression::None));
            partition.append(&full.build()?)?;
        }
    }
    if !batch.is_empty() {
        partition.append(&batch.build()?)?;
    }
    partition.flush()?;
    let size = partition.size_bytes();
    drop(topic);
    log.close()?;
    Ok(size)
}
