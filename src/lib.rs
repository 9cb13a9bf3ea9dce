//! strata: a stream-processing runtime on a durable, Kafka-compatible log.
//!
//! - [`record`]: Kafka v2 record batches (pure, no I/O).
//! - [`log`]: the segment log on disk (synchronous, no network).

pub mod log;
pub mod record;
