//! What a connection's requests hold while they are read, handled and
//! answered: bytes of a broker-wide request memory budget, the
//! connection's in-flight slots, and the gauges that show them. Each
//! reservation ends when dropped, wherever the request is then.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::api::BrokerContext;
use crate::metrics::Metrics;

/// The broker-wide budgets request frames are reserved from, shared by
/// every connection.
pub(crate) struct RequestMemory {
    /// Frames of connections that have authenticated, or need not:
    /// `request_memory_bytes_max` bytes.
    pub(super) shared: Budget,
    /// The larger frames read before authentication:
    /// [`PRE_AUTH_MEMORY_BYTES_MAX`](super::PRE_AUTH_MEMORY_BYTES_MAX)
    /// bytes, apart from `shared` so that clients that never authenticate
    /// cannot hold what the others need.
    pub(super) pre_auth: Budget,
}

/// Bytes of request frames that may be held at once, and the metrics that
/// show them.
pub(super) struct Budget {
    pub(super) bytes: Semaphore,
    /// Gauge of the bytes held.
    pub(super) buffered: fn(&Metrics) -> &AtomicU64,
    /// Counter of the times a connection waited for the budget.
    pub(super) waits: fn(&Metrics) -> &AtomicU64,
}

impl RequestMemory {
    /// Budgets of `request_memory_bytes_max` bytes, and of
    /// `pre_auth_bytes_max` for frames read before authentication.
    pub(crate) fn new(request_memory_bytes_max: usize, pre_auth_bytes_max: usize) -> Self {
        Self {
            shared: Budget {
                bytes: Semaphore::new(request_memory_bytes_max),
                buffered: |m| &m.request_bytes_buffered,
                waits: |m| &m.request_memory_waits,
            },
            pre_auth: Budget {
                bytes: Semaphore::new(pre_auth_bytes_max),
                buffered: |m| &m.pre_auth_request_bytes_buffered,
                waits: |m| &m.pre_auth_memory_waits,
            },
        }
    }
}

/// A reservation (in-flight slots, or bytes of a request memory budget, or
/// nothing for the small frames of a login) counted in one of the broker's
/// gauges; both end on drop.
///
/// Borrowed from the connection, not shared: an `Arc` here would write a
/// reference count per request to a cache line every core's connections
/// write to (the broker's context, the request memory budget).
pub(super) struct Held<'c> {
    _permit: Option<SemaphorePermit<'c>>,
    _gauge: Gauge<'c>,
}

impl<'c> Held<'c> {
    pub(super) fn new(
        ctx: &'c BrokerContext,
        permit: Option<SemaphorePermit<'c>>,
        gauge: fn(&Metrics) -> &AtomicU64,
        amount: usize,
    ) -> Self {
        Self {
            _permit: permit,
            _gauge: Gauge::add(ctx, gauge, amount as u64),
        }
    }
}

/// An amount added to one of the broker's gauges until dropped.
pub(super) struct Gauge<'c> {
    gauge: &'c AtomicU64,
    amount: u64,
}

impl<'c> Gauge<'c> {
    pub(super) fn add(
        ctx: &'c BrokerContext,
        gauge: fn(&Metrics) -> &AtomicU64,
        amount: u64,
    ) -> Self {
        let gauge = gauge(&ctx.metrics);
        gauge.fetch_add(amount, Ordering::Relaxed);
        Self { gauge, amount }
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.gauge.fetch_sub(self.amount, Ordering::Relaxed);
    }
}
