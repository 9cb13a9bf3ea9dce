//! strata: a stream-processing runtime on a durable, Kafka-compatible log.
//!
//! This crate is the `strata` command and the face of the workspace: each
//! layer is a crate of its own, re-exported here under its old name, each
//! depending only on those below it.
//!
//! - [`record`] (`strata-record`): Kafka v2 record batches (pure, no I/O);
//!   with it [`codec`], serde codecs for processors' keys and values, and
//!   [`time`], the wall clock and RFC 3339 date-times.
//! - [`log`] (`strata-log`): the segment log on disk (synchronous, no
//!   network).
//! - [`sasl`], [`security`] (`strata-protocol`): what broker and client
//!   share: the SASL mechanisms, security protocols and TLS files, the ACL
//!   model.
//! - [`broker`] (`strata-broker`): the Kafka wire protocol over the log
//!   (tokio).
//! - [`client`] (`strata-client`): a Kafka-protocol client (producer,
//!   fetcher, consumer, admin) for strata and Kafka clusters; [`cli`]: the
//!   commands on it.
//! - [`registry`] (`strata-registry`): a schema registry speaking
//!   Confluent's REST API, its schemas in the log's `_schemas` topic
//!   (`strata serve --schema-registry`).
//! - [`runtime`] (`strata-runtime`): the processor runtime: `Processor`s,
//!   `App` pipelines, exactly-once RocksDB state and derived streams, on the
//!   embedded log or any Kafka-protocol cluster; rebuilds, replays into
//!   versions, diffs, promotion, checkpoints. It builds without the broker;
//!   through this crate it can also serve its embedded log (`--serve`).
//!
//! ```
//! use strata::log::{LogConfig, LogManager};
//! use strata::record::{BatchBuilder, Compression, NewRecord, RecordBatch};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let log = LogManager::open(dir.path(), LogConfig::default())?;
//! let topic = log.create_topic("clicks", 3, Default::default())?;
//! let partition = &topic.partitions[0];
//!
//! let mut builder = BatchBuilder::new(Compression::Zstd);
//! builder.push(NewRecord::new(Some(b"user-1"), b"/pricing", 1_700_000_000_000))?;
//! let appended = partition.append(&builder.build()?)?; // assigns offsets
//! partition.flush_to(appended.last_offset + 1)?; // group-committed fdatasync
//!
//! let read = partition.read(0, 1 << 20)?; // whole batches, as file ranges
//! let bytes = read.read_to_vec()?;
//! let batch = RecordBatch::parse_and_verify(&bytes)?;
//! let records = batch.records(1 << 20)?; // decompressed, bounded
//! let record = records.iter().next().unwrap()?;
//! assert_eq!(record.value, Some(&b"/pricing"[..]));
//! assert_eq!(partition.offset_for_timestamp(1_700_000_000_000)?, Some((0, 1_700_000_000_000)));
//! log.close()?; // clean shutdown: the next open skips recovery
//! # Ok(())
//! # }
//! ```

pub mod cli;

pub use strata_broker as broker;
pub use strata_client as client;
pub use strata_log as log;
pub use strata_protocol::{sasl, security};
pub use strata_record as record;
pub use strata_record::{codec, hex, time};
pub use strata_registry as registry;
pub use strata_runtime as runtime;
pub use strata_runtime::testing;

/// Runs an app from the standard command line, as its `fn main` would
/// (see [`main!`], which also installs what `--serve` needs).
pub use strata_runtime::run_cli as run;

/// An app binary's `fn main`, as [`strata_runtime::main!`] writes it, with
/// the broker's allocator installed: `run --serve` answers the Kafka
/// protocol, and a request claiming an absurd length must not abort the
/// app (see [`broker::HugeReservingAllocator`]).
///
/// ```no_run
/// use strata::runtime::{App, Context, ProcessError, Record, Topic};
///
/// const LINES: Topic<Vec<u8>, String> = Topic::new("lines");
///
/// fn print(line: Record<Vec<u8>, String>, _: &mut Context) -> Result<(), ProcessError> {
///     println!("{}", line.value);
///     Ok(())
/// }
///
/// strata::main!(App::new("printer").processor("print", print).input(LINES));
/// ```
#[macro_export]
macro_rules! main {
    ($($app:tt)*) => {
        #[global_allocator]
        static ALLOCATOR: $crate::broker::HugeReservingAllocator =
            $crate::broker::HugeReservingAllocator;

        $crate::runtime::main!($($app)*);
    };
}
