//! The runtime a broker is best served on: tokio's multi-thread runtime,
//! as `Runtime::new` builds it, whose workers note how often they have
//! given the CPU up each time they wake.
//!
//! A connection's data-path handlers run inline on the worker while they
//! are quick, and one that waited on the disk sends its connection off
//! the executor for a while (`connection/handler_place.rs`). Telling a
//! wait from a preemption takes the thread's count of voluntary context
//! switches before and after the handler (`connection/handler_usage.rs`).
//! Read for every request, that is a system call each (2% of a
//! one-record produce's CPU in `make bench-requests`); noted as a worker
//! wakes (and every 64 handlers), it is read about once per ten
//! requests, and again only for a handler that ran past the quick limit.
//!
//! A broker served on another runtime works the same, asking the kernel
//! for every request.

/// A multi-thread runtime with every driver enabled, whose workers note
/// their voluntary context switches as they wake.
pub fn serving_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_unpark(crate::connection::worker_woke)
        .build()
}
