//! One client connection: requests read ahead, handled one at a time, in
//! order, and answered in order.
//!
//! Two halves run concurrently in the connection's task:
//!
//! - The **reader** takes an in-flight slot (at most
//!   `in_flight_requests_max` requests read and not yet answered), reads a
//!   size prefix, reserves that many bytes from the broker-wide request
//!   memory budget, and only then allocates the frame, reads it and queues
//!   it. Out of slots or out of budget, it stops reading the socket, so the
//!   client's sends back up (TCP backpressure); nothing fails.
//! - The **answerer** takes queued requests in order, runs each one's
//!   handler off the executor's threads (handlers block on disk I/O),
//!   returns the frame's bytes to the budget, writes the response, and only
//!   then frees the slot and takes the next request. A connection's
//!   requests are therefore handled strictly in the order sent (a
//!   producer's batches append in that order) and answered in that order.
//!
//! So a pipelining client has request k+1 read and ready while request k is
//! handled (say, waiting for an fdatasync), without any reordering.
//!
//! Memory per connection is bounded: at most `in_flight_requests_max`
//! frames (each at most `request_bytes_max`, all connections together at
//! most `request_memory_bytes_max`) plus the one response being written. A
//! response is written before the next one is produced, and a fetch
//! response's records are file ranges sent with sendfile, never copied into
//! memory, so a client that stops reading holds one response's small
//! in-memory parts; once writing (or reading a frame's body) makes no
//! progress for `socket_stall_timeout` the connection closes and returns
//! what it held.
//!
//! The connection ends on EOF or an oversized frame (after answering the
//! requests read before it), on a request the broker cannot decode or does
//! not serve, after `connection_idle_timeout` with nothing in flight and
//! nothing arriving, or at shutdown: the request in hand is answered, and
//! requests read ahead but not begun are dropped unanswered (never handled,
//! so a producer's retry of them cannot duplicate anything).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use nix::sys::sendfile::sendfile;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, TryAcquireError, mpsc, watch};

use super::api::{self, BrokerContext, Reply};
use super::fetch_frame::Part;
use super::frame::{read_frame_body, read_frame_size};
use super::metrics::Metrics;
use crate::log::FileSlice;

/// A request read and not yet answered.
struct Request {
    frame: Bytes,
    /// The frame's share of the request memory budget, returned as soon as
    /// the request is handled.
    memory: Held,
    /// The connection's in-flight slot, freed once the response is written.
    slot: Held,
}

/// A reservation (an in-flight slot, or bytes of the request memory budget)
/// counted in one of the broker's gauges; both end on drop.
struct Held {
    _permit: OwnedSemaphorePermit,
    _gauge: Gauge,
}

/// An amount added to one of the broker's gauges until dropped.
struct Gauge {
    ctx: Arc<BrokerContext>,
    gauge: fn(&Metrics) -> &AtomicU64,
    amount: u64,
}

impl Gauge {
    fn add(ctx: &Arc<BrokerContext>, gauge: fn(&Metrics) -> &AtomicU64, amount: u64) -> Self {
        gauge(&ctx.metrics).fetch_add(amount, Ordering::Relaxed);
        Self {
            ctx: Arc::clone(ctx),
            gauge,
            amount,
        }
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        (self.gauge)(&self.ctx.metrics).fetch_sub(self.amount, Ordering::Relaxed);
    }
}

pub(crate) async fn serve(
    mut stream: TcpStream,
    ctx: Arc<BrokerContext>,
    request_memory: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
) {
    let peer = stream.peer_addr().ok();
    let (reader, writer) = stream.split();
    // Never full: the reader's in-flight slots bound what it queues.
    let (queue, queued) = mpsc::channel(ctx.config.in_flight_requests_max);
    // The answerer's "a response went out", which restarts the idle clock.
    let answered = Notify::new();
    let reading = read_requests(
        reader,
        &ctx,
        &request_memory,
        queue,
        &answered,
        shutdown.clone(),
        peer,
    );
    let answering = answer_requests(writer, &ctx, queued, &answered, shutdown, peer);
    tokio::select! {
        () = answering => {}
        // A reader that stops (EOF, a bad frame, idleness, shutdown) closes
        // the queue; the answerer answers what is queued, then ends.
        () = async {
            reading.await;
            std::future::pending::<()>().await;
        } => {}
    }
}

/// Reads requests into `queue` until EOF, a bad frame, idleness or
/// shutdown, holding back while the connection's in-flight slots or the
/// request memory budget are used up.
async fn read_requests(
    mut stream: ReadHalf<'_>,
    ctx: &Arc<BrokerContext>,
    request_memory: &Arc<Semaphore>,
    queue: mpsc::Sender<Request>,
    answered: &Notify,
    mut shutdown: watch::Receiver<bool>,
    peer: Option<SocketAddr>,
) {
    let config = &ctx.config;
    let slots = Arc::new(Semaphore::new(config.in_flight_requests_max));
    loop {
        let slot = tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => return,
            slot = Arc::clone(&slots).acquire_owned() => slot.expect("the slots are never closed"),
        };
        let size = {
            let read = read_frame_size(&mut stream, config.request_bytes_max);
            tokio::pin!(read);
            loop {
                tokio::select! {
                    biased;
                    _ = shutdown.wait_for(|stop| *stop) => return,
                    size = &mut read => break size,
                    () = answered.notified() => {}
                    () = tokio::time::sleep(config.connection_idle_timeout) => {
                        // Idle only with nothing in flight: an earlier
                        // request may be a fetch waiting for data.
                        if slots.available_permits() + 1 == config.in_flight_requests_max {
                            tracing::debug!(?peer, "closing an idle connection");
                            return;
                        }
                    }
                }
            }
        };
        let size = match size {
            Ok(Some(size)) => size,
            Ok(None) => return,
            Err(error) => {
                tracing::debug!(?peer, "closing connection: {error}");
                return;
            }
        };
        // Sizes are at most request_bytes_max, which is at most i32::MAX
        // and at most the whole budget: the reservation can always succeed.
        let bytes = u32::try_from(size).unwrap_or(u32::MAX);
        let memory = match Arc::clone(request_memory).try_acquire_many_owned(bytes) {
            Ok(permit) => permit,
            Err(TryAcquireError::NoPermits) => {
                ctx.metrics
                    .request_memory_waits
                    .fetch_add(1, Ordering::Relaxed);
                tokio::select! {
                    biased;
                    _ = shutdown.wait_for(|stop| *stop) => return,
                    permit = Arc::clone(request_memory).acquire_many_owned(bytes) => match permit {
                        Ok(permit) => permit,
                        Err(_) => return,
                    },
                }
            }
            Err(TryAcquireError::Closed) => return,
        };
        let memory = Held {
            _permit: memory,
            _gauge: Gauge::add(ctx, |m| &m.request_bytes_buffered, size as u64),
        };
        let frame = tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => return,
            frame = read_frame_body(&mut stream, size, config.socket_stall_timeout) => frame,
        };
        let frame = match frame {
            Ok(frame) => frame.freeze(),
            Err(error) => {
                tracing::debug!(?peer, "closing connection: {error}");
                return;
            }
        };
        let request = Request {
            frame,
            memory,
            slot: Held {
                _permit: slot,
                _gauge: Gauge::add(ctx, |m| &m.requests_in_flight, 1),
            },
        };
        if queue.send(request).await.is_err() {
            return;
        }
    }
}

/// Handles queued requests one at a time and writes their responses, in
/// order, until the queue closes, a request closes the connection, a write
/// fails or stalls, or shutdown.
async fn answer_requests(
    mut stream: WriteHalf<'_>,
    ctx: &Arc<BrokerContext>,
    mut queue: mpsc::Receiver<Request>,
    answered: &Notify,
    mut shutdown: watch::Receiver<bool>,
    peer: Option<SocketAddr>,
) {
    loop {
        let request = tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => return,
            request = queue.recv() => match request {
                Some(request) => request,
                None => return,
            },
        };
        let Request {
            frame,
            memory,
            slot,
        } = request;
        let started = std::time::Instant::now();
        let api_key = i16::from_be_bytes([
            frame.first().copied().unwrap_or(0xff),
            frame.get(1).copied().unwrap_or(0xff),
        ]);
        let bytes_in = frame.len() as u64 + 4;
        let response = answer(ctx, frame, &mut shutdown, peer).await;
        // Handled: the frame (and every decoded view into it) is gone.
        drop(memory);
        let Some(response) = response else {
            return;
        };
        let bytes_out = response
            .as_ref()
            .map_or(0, |parts| parts.iter().map(Part::len).sum());
        ctx.metrics
            .observe(api_key, started.elapsed(), bytes_in, bytes_out);
        if let Some(parts) = response {
            let in_memory = parts
                .iter()
                .map(|part| match part {
                    Part::Bytes(bytes) => bytes.len() as u64,
                    Part::File(_) => 0,
                })
                .sum();
            let _buffered = Gauge::add(ctx, |m| &m.response_bytes_buffered, in_memory);
            let stall = ctx.config.socket_stall_timeout;
            if let Err(error) = write_parts(&mut stream, &parts, stall).await {
                tracing::debug!(?peer, "closing connection: writing a response: {error}");
                return;
            }
        }
        drop(slot);
        answered.notify_one();
    }
}

/// Runs the request's handler off the executor's threads (handlers block on
/// disk I/O), waiting between passes when a fetch asks to wait for data.
/// `None` closes the connection; `Some(None)` means no response is due.
async fn answer(
    ctx: &Arc<BrokerContext>,
    frame: Bytes,
    shutdown: &mut watch::Receiver<bool>,
    peer: Option<SocketAddr>,
) -> Option<Option<Vec<Part>>> {
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let final_pass = deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
        let (handler_ctx, handler_frame) = (Arc::clone(ctx), frame.clone());
        let client_host = peer.map_or_else(String::new, |p| p.ip().to_string());
        let handled = tokio::task::spawn_blocking(move || {
            api::handle(&handler_ctx, handler_frame, final_pass, &client_host)
        })
        .await;
        match handled {
            Ok(Ok(Reply::Respond(parts))) => return Some(Some(parts)),
            Ok(Ok(Reply::Silent)) => return Some(None),
            Ok(Ok(Reply::Later(response))) => {
                return tokio::select! {
                    framed = response => match framed {
                        Ok(part) => Some(Some(vec![part])),
                        Err(error) => {
                            tracing::debug!(?peer, "closing connection: {error}");
                            None
                        }
                    },
                    _ = shutdown.wait_for(|stop| *stop) => None,
                };
            }
            Ok(Ok(Reply::WaitForData(mut wait))) => {
                // The handler subscribed to its partitions before reading
                // them, so an append since then completes `appended` at once.
                let until =
                    *deadline.get_or_insert_with(|| tokio::time::Instant::now() + wait.wait);
                let _waiting = Gauge::add(ctx, |m| &m.fetches_waiting, 1);
                tokio::select! {
                    () = wait.appends.appended() => {
                        ctx.metrics.fetch_wakeups.fetch_add(1, Ordering::Relaxed);
                    }
                    () = tokio::time::sleep_until(until) => {}
                    _ = shutdown.wait_for(|stop| *stop) => return None,
                }
            }
            Ok(Err(error)) if error.is_unserved_request() => {
                tracing::warn!(?peer, "closing connection: {error}");
                return None;
            }
            Ok(Err(error)) => {
                tracing::debug!(?peer, "closing connection: {error}");
                return None;
            }
            Err(failed) => {
                tracing::error!(?peer, "a request handler failed: {failed}");
                return None;
            }
        }
    }
}

/// Writes a response: in-memory parts with `write`, file ranges with
/// `sendfile` (the kernel copies from the page cache to the socket). Fails
/// when the socket takes nothing for `stall`.
async fn write_parts(
    stream: &mut WriteHalf<'_>,
    parts: &[Part],
    stall: Duration,
) -> std::io::Result<()> {
    for part in parts {
        match part {
            Part::Bytes(bytes) => write_bytes(stream, bytes, stall).await?,
            Part::File(slice) => send_file(stream.as_ref(), slice, stall).await?,
        }
    }
    Ok(())
}

fn stalled(stall: Duration) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("the client read nothing for {stall:?}"),
    )
}

async fn write_bytes(
    stream: &mut WriteHalf<'_>,
    mut bytes: &[u8],
    stall: Duration,
) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let written = tokio::time::timeout(stall, stream.write(bytes))
            .await
            .map_err(|_| stalled(stall))??;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[written..];
    }
    Ok(())
}

async fn send_file(stream: &TcpStream, slice: &FileSlice, stall: Duration) -> std::io::Result<()> {
    let mut offset = i64::try_from(slice.position).map_err(std::io::Error::other)?;
    let mut remaining = usize::try_from(slice.len).map_err(std::io::Error::other)?;
    while remaining > 0 {
        tokio::time::timeout(stall, stream.writable())
            .await
            .map_err(|_| stalled(stall))??;
        let sent = stream.try_io(Interest::WRITABLE, || {
            sendfile(stream, &*slice.file, Some(&mut offset), remaining)
                .map_err(std::io::Error::from)
        });
        match sent {
            // The file ended early: retention cannot shrink an open file, so
            // this is a bug or outside interference; the frame is now short.
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "segment file ended before the fetched range",
                ));
            }
            Ok(n) => remaining -= n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
