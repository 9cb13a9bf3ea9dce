//! The reader's steps for one request frame: take in-flight slots, read
//! the size prefix (checked against a limit), reserve that many bytes from
//! a broker-wide budget, and only then allocate the frame, read it and
//! queue it. How many slots a request takes, which limit and which budget
//! apply is the caller's choice: the read-ahead loop of an authenticated
//! connection, or [`super::pre_auth`] before authentication.
//!
//! Each step waits without failing (out of slots or out of budget the
//! socket is simply not read, so the client's sends back up) and gives
//! `None` when the connection is to stop reading, having logged why.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tokio::io::AsyncRead;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, TryAcquireError, mpsc, watch};

use super::{Budget, Held, Request, RequestMemory};
use crate::api::BrokerContext;
use crate::frame::{read_frame_body, read_frame_size};

/// The reader's share of one connection: the read half of its socket, and
/// what reading a request takes.
pub(super) struct Reader<'a, R> {
    pub(super) stream: R,
    pub(super) ctx: &'a Arc<BrokerContext>,
    pub(super) memory: &'a RequestMemory,
    /// The connection's `in_flight_requests_max` slots.
    pub(super) slots: Arc<Semaphore>,
    pub(super) queue: mpsc::Sender<Request>,
    /// The writer's "a response went out", which restarts the idle clock.
    pub(super) answered: &'a Notify,
    pub(super) shutdown: watch::Receiver<bool>,
    pub(super) peer: Option<SocketAddr>,
}

impl<R: AsyncRead + Unpin> Reader<'_, R> {
    /// Takes `count` in-flight slots, waiting for earlier responses to be
    /// written.
    pub(super) async fn slots(&mut self, count: usize) -> Option<OwnedSemaphorePermit> {
        // The configuration keeps in_flight_requests_max far below u32::MAX.
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        tokio::select! {
            biased;
            _ = self.shutdown.wait_for(|stop| *stop) => None,
            slots = Arc::clone(&self.slots).acquire_many_owned(count) => {
                Some(slots.expect("the slots are never closed"))
            }
        }
    }

    /// Reads the next frame's size prefix, refusing one over `limit`; `None`
    /// also at a clean end of stream. The connection is idle when nothing
    /// arrives for `connection_idle_timeout` with no request in flight (the
    /// `held` slots taken for this one aside).
    pub(super) async fn size(&mut self, limit: usize, held: usize) -> Option<usize> {
        let config = &self.ctx.config;
        let read = read_frame_size(&mut self.stream, limit);
        tokio::pin!(read);
        let size = loop {
            tokio::select! {
                biased;
                _ = self.shutdown.wait_for(|stop| *stop) => return None,
                size = &mut read => break size,
                () = self.answered.notified() => {}
                () = tokio::time::sleep(config.connection_idle_timeout) => {
                    // Idle only with nothing in flight: an earlier
                    // request may be a fetch waiting for data.
                    if self.slots.available_permits() + held == config.in_flight_requests_max {
                        tracing::debug!(peer = ?self.peer, "closing an idle connection");
                        return None;
                    }
                }
            }
        };
        size.unwrap_or_else(|error| {
            tracing::debug!(peer = ?self.peer, "closing connection: {error}");
            None
        })
    }

    /// Reserves `size` bytes of `budget` before the frame is allocated,
    /// waiting while the budget is spent.
    pub(super) async fn reserve(&mut self, budget: &Budget, size: usize) -> Option<Held> {
        // Sizes are at most the frame limit, which is at most i32::MAX and
        // at most the whole budget: the reservation can always succeed.
        let bytes = u32::try_from(size).unwrap_or(u32::MAX);
        let permit = match Arc::clone(&budget.bytes).try_acquire_many_owned(bytes) {
            Ok(permit) => permit,
            Err(TryAcquireError::NoPermits) => {
                (budget.waits)(&self.ctx.metrics).fetch_add(1, Ordering::Relaxed);
                tokio::select! {
                    biased;
                    _ = self.shutdown.wait_for(|stop| *stop) => return None,
                    permit = Arc::clone(&budget.bytes).acquire_many_owned(bytes) => permit.ok()?,
                }
            }
            Err(TryAcquireError::Closed) => return None,
        };
        Some(Held::new(self.ctx, Some(permit), budget.buffered, size))
    }

    /// Allocates a frame's `size` bytes and reads them.
    pub(super) async fn body(&mut self, size: usize) -> Option<Bytes> {
        let stall = self.ctx.config.socket_stall_timeout;
        let frame = tokio::select! {
            biased;
            _ = self.shutdown.wait_for(|stop| *stop) => return None,
            frame = read_frame_body(&mut self.stream, size, stall) => frame,
        };
        match frame {
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
        memory: Held,
        slots: OwnedSemaphorePermit,
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
