//! The reader's steps for one request frame: take in-flight slots, read
//! the size prefix (checked against a limit), reserve that many bytes from
//! a broker-wide budget, and only then allocate the frame, read it and
//! queue it. How many slots a request takes, which limit and which budget
//! apply is the caller's choice: the read-ahead loop of an authenticated
//! connection, or [`super::pre_auth`] before authentication.
//!
//! Each step waits without failing (out of slots or out of budget the
//! socket is simply not read, so the client's sends back up) and gives
//! `None` when the connection is to stop reading, having logged why. At
//! shutdown the connection stops polling its reader (`super::run`), so
//! no step waits for it.
//!
//! A connection is idle when nothing arrives and nothing is in flight for
//! `connection_idle_timeout`. One timer per connection tells, not one per
//! frame: each time it ends, the connection is idle if no frame was read
//! and no response written since it was last set, and nothing is in
//! flight; otherwise it is set again. So an idle connection closes
//! between one and two timeouts after its last activity. A timer per
//! frame, set and cancelled in the timer wheel each time, was 1% of a
//! one-record produce's CPU in `make bench-requests`.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncRead;
use tokio::sync::{Semaphore, SemaphorePermit, TryAcquireError, mpsc};
use tokio::time::{Instant, Sleep};

use super::Request;
use super::reservation::{Budget, Held, RequestMemory};
use crate::api::BrokerContext;
use crate::frame::{read_frame_body, read_frame_size};

/// The reader's share of one connection: the read half of its socket, and
/// what reading a request takes.
pub(super) struct Reader<'a, R> {
    pub(super) stream: R,
    pub(super) ctx: &'a Arc<BrokerContext>,
    pub(super) memory: &'a RequestMemory,
    /// The connection's `in_flight_requests_max` slots.
    pub(super) slots: &'a Semaphore,
    pub(super) queue: mpsc::Sender<Request<'a>>,
    /// The responses the writer has written.
    pub(super) answered: &'a AtomicU64,
    pub(super) peer: Option<SocketAddr>,
    pub(super) idle: IdleClock,
}

/// A connection's idle timer, and the activity seen when it was last set
/// (see the module doc).
pub(super) struct IdleClock {
    timer: Pin<Box<Sleep>>,
    frames_read: u64,
    seen: u64,
}

impl IdleClock {
    /// A clock that ends `timeout` from now unless the connection is busy.
    pub(super) fn new(timeout: Duration) -> Self {
        Self {
            timer: Box::pin(tokio::time::sleep_until(Self::deadline(timeout))),
            frames_read: 0,
            seen: 0,
        }
    }

    /// At the timer's end: whether the connection has been idle since the
    /// timer was set (no frame read, no answer of the `answered` written,
    /// nothing in flight); if not, the timer is set again, `timeout` from
    /// now.
    fn idle(&mut self, in_flight: bool, answered: u64, timeout: Duration) -> bool {
        let activity = self.frames_read + answered;
        if activity == self.seen && !in_flight {
            return true;
        }
        self.seen = activity;
        self.timer.as_mut().reset(Self::deadline(timeout));
        false
    }

    /// `timeout` from now; a timeout past what the clock holds is a
    /// century.
    fn deadline(timeout: Duration) -> Instant {
        let now = Instant::now();
        now.checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
    }
}

impl<'a, R: AsyncRead + Unpin> Reader<'a, R> {
    /// Takes `count` in-flight slots, waiting for earlier responses to be
    /// written. Always `Some`: an `Option`, as every step is, so that the
    /// steps chain with `?`.
    pub(super) async fn slots(&mut self, count: usize) -> Option<SemaphorePermit<'a>> {
        // The configuration keeps in_flight_requests_max far below u32::MAX.
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        let slots = self.slots.acquire_many(count).await;
        Some(slots.expect("the slots are never closed"))
    }

    /// Reads the next frame's size prefix, refusing one over `limit`; `None`
    /// also at a clean end of stream, or once the connection is idle (the
    /// `held` slots taken for this frame are not in flight).
    pub(super) async fn size(&mut self, limit: usize, held: usize) -> Option<usize> {
        let read = read_frame_size(&mut self.stream, limit);
        tokio::pin!(read);
        let size = loop {
            tokio::select! {
                biased;
                size = &mut read => break size,
                () = self.idle.timer.as_mut() => {
                    let config = &self.ctx.config;
                    // Idle only with nothing in flight: an earlier
                    // request may be a fetch waiting for data.
                    let in_flight =
                        self.slots.available_permits() + held < config.in_flight_requests_max;
                    let answered = self.answered.load(Ordering::Relaxed);
                    if self.idle.idle(in_flight, answered, config.connection_idle_timeout) {
                        tracing::debug!(peer = ?self.peer, "closing an idle connection");
                        return None;
                    }
                }
            }
        };
        self.idle.frames_read += 1;
        size.unwrap_or_else(|error| {
            tracing::debug!(peer = ?self.peer, "closing connection: {error}");
            None
        })
    }

    /// Reserves `size` bytes of `budget` before the frame is allocated,
    /// waiting while the budget is spent.
    pub(super) async fn reserve(&mut self, budget: &'a Budget, size: usize) -> Option<Held<'a>> {
        // Sizes are at most the frame limit, which is at most i32::MAX and
        // at most the whole budget: the reservation can always succeed.
        let bytes = u32::try_from(size).unwrap_or(u32::MAX);
        let permit = match budget.bytes.try_acquire_many(bytes) {
            Ok(permit) => permit,
            Err(TryAcquireError::NoPermits) => {
                (budget.waits)(&self.ctx.metrics).fetch_add(1, Ordering::Relaxed);
                budget.bytes.acquire_many(bytes).await.ok()?
            }
            Err(TryAcquireError::Closed) => return None,
        };
        Some(Held::new(self.ctx, Some(permit), budget.buffered, size))
    }

    /// Allocates a frame's `size` bytes and reads them.
    pub(super) async fn body(&mut self, size: usize) -> Option<Bytes> {
        let stall = self.ctx.config.socket_stall_timeout;
        match read_frame_body(&mut self.stream, size, stall).await {
            Ok(frame) => Some(frame.freeze()),
            Err(error) => {
                tracing::debug!(peer = ?self.peer, "closing connection: {error}");
                None
            }
        }
    }

    /// Queues a request for the handler, with the slots it holds until its
    /// response is written; `None` once the handler has stopped.
    pub(super) async fn queue(
        &self,
        frame: Bytes,
        memory: Held<'a>,
        slots: SemaphorePermit<'a>,
    ) -> Option<()> {
        let slot = Held::new(self.ctx, Some(slots), |m| &m.requests_in_flight, 1);
        let request = Request {
            frame,
            memory,
            slot,
        };
        self.queue.send(request).await.ok()
    }
}
