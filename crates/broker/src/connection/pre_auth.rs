//! Reading requests before a connection on a SASL listener has
//! authenticated: one at a time, from a budget of their own.
//!
//! Until its SASL exchange ends, a connection may send only ApiVersions,
//! SaslHandshake and SaslAuthenticate (or the bare tokens of a v0
//! handshake), and a client sends each after the answer to the one before.
//! Reading ahead serves no such client; it would only let anyone who can
//! connect make the broker hold several frames each, and, taken from the
//! request memory budget, hold the memory authenticated clients wait for.
//! So before authentication the reader:
//!
//! - takes *every* in-flight slot for each request: the next frame is read
//!   only once the previous one's response has been written, and whatever a
//!   client pipelines stays in the socket's buffers;
//! - refuses a size over [`SASL_FRAME_BYTES_MAX`] before allocating;
//! - reserves a frame over [`LOGIN_FRAME_BYTES_MAX`] from
//!   [`PRE_AUTH_MEMORY_BYTES_MAX`], never from `request_memory_bytes_max`,
//!   and a smaller one from nothing (counted all the same).
//!
//! Frames read before authentication therefore hold at most
//! `connections_max` × [`LOGIN_FRAME_BYTES_MAX`] +
//! [`PRE_AUTH_MEMORY_BYTES_MAX`] bytes at once across the broker (8 MiB +
//! 16 MiB at the default 1024 connections), whatever the clients send, and
//! none of the budget authenticated traffic uses.
//!
//! A SASL connection has the listener's login timeout to authenticate, from
//! its start: one that keeps asking for ApiVersions, or stops halfway
//! through its exchange, would otherwise hold its connection slot for as
//! long as the idle timeout allows. At the deadline the reader stops where
//! it is (a frame half read is dropped: the connection closes), except that
//! a request already read is answered first, and if that answer completed
//! the login the connection goes on: a client that logged in is never
//! closed for being slow about it.
//!
//! A connection counts as authenticated once the answer that completed its
//! exchange has been written: the handler sets the flag before passing the
//! answer on, and the reader looks at it only once every slot is free
//! again. From its next request on it reads ahead from the shared budget
//! like any other (re-authentication, KIP-368, changes nothing). A
//! connection on a listener without SASL starts authenticated, so none of
//! this applies to it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::AsyncRead;

use super::reader::Reader;
use super::reservation::Held;
use crate::auth::SASL_FRAME_BYTES_MAX;

/// Bytes of frames over [`LOGIN_FRAME_BYTES_MAX`] held at once for
/// connections that have not authenticated, across the broker: 32 frames
/// of the largest size. Small, since a login needs none of it; separate from
/// `request_memory_bytes_max`, so that unauthenticated clients taking all
/// of it delay only one another. When it is spent, a connection with such
/// a frame stops reading until another frame is answered or given up.
pub const PRE_AUTH_MEMORY_BYTES_MAX: usize = 16 << 20;

/// Frames up to this size read before authentication take nothing from
/// [`PRE_AUTH_MEMORY_BYTES_MAX`]. Each frame of a PLAIN or SCRAM login
/// (ApiVersions, SaslHandshake, the client's tokens) is a few hundred bytes,
/// so clients holding that whole budget with large frames cannot stop
/// anyone else from logging in; one frame per connection, these hold at
/// most `connections_max` × this.
pub const LOGIN_FRAME_BYTES_MAX: usize = 8 << 10;

// Any frame allowed before authentication fits in the budget, so waiting
// for it always ends.
const _: () = assert!(SASL_FRAME_BYTES_MAX <= PRE_AUTH_MEMORY_BYTES_MAX);
const _: () = assert!(LOGIN_FRAME_BYTES_MAX < SASL_FRAME_BYTES_MAX);

/// [`read_until_authenticated`] within `timeout` (the SASL listener's login
/// timeout; none on a listener without SASL); `None` when the connection
/// is to stop reading, the deadline passed without a login among them.
pub(super) async fn log_in<R: AsyncRead + Unpin>(
    reader: &mut Reader<'_, R>,
    authenticated: &AtomicBool,
    timeout: Option<Duration>,
) -> Option<()> {
    let Some(limit) = timeout else {
        return read_until_authenticated(reader, authenticated).await;
    };
    if let Ok(read) =
        tokio::time::timeout(limit, read_until_authenticated(reader, authenticated)).await
    {
        return read;
    }
    // The request being answered, if any, may be the one that completes
    // the login (PLAIN's key derivation, a busy blocking pool): its answer
    // is waited for, and no frame more is read meanwhile.
    let _answered = reader
        .slots(reader.ctx.config.in_flight_requests_max)
        .await?;
    if authenticated.load(Ordering::Acquire) {
        return Some(());
    }
    (reader.ctx.metrics.sasl_login_timeouts).fetch_add(1, Ordering::Relaxed);
    tracing::debug!(
        peer = ?reader.peer,
        "closing a connection that did not authenticate within {limit:?}"
    );
    None
}

/// Reads requests one at a time until the connection has authenticated
/// (`Some`; at once for a connection that need not), or is to stop reading
/// (`None`).
pub(super) async fn read_until_authenticated<R: AsyncRead + Unpin>(
    reader: &mut Reader<'_, R>,
    authenticated: &AtomicBool,
) -> Option<()> {
    let every_slot = reader.ctx.config.in_flight_requests_max;
    let limit = SASL_FRAME_BYTES_MAX.min(reader.ctx.config.request_bytes_max);
    loop {
        // Every slot free: the previous request has been answered, and the
        // flag set if that answer authenticated the connection.
        let slots = reader.slots(every_slot).await?;
        if authenticated.load(Ordering::Acquire) {
            return Some(());
        }
        let size = reader.size(limit, every_slot).await?;
        let memory = reserve(reader, size).await?;
        let frame = reader.body(size).await?;
        reader.queue(frame, memory, slots).await?;
    }
}

/// Reserves a frame read before authentication: from the pre-auth budget,
/// or from nothing if it is as small as a login's.
async fn reserve<'a, R: AsyncRead + Unpin>(
    reader: &mut Reader<'a, R>,
    size: usize,
) -> Option<Held<'a>> {
    let budget = &reader.memory.pre_auth;
    if size <= LOGIN_FRAME_BYTES_MAX {
        return Some(Held::new(reader.ctx, None, budget.buffered, size));
    }
    reader.reserve(budget, size).await
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;
    use std::task::Poll;

    use tokio::io::{AsyncWriteExt, DuplexStream};
    use tokio::sync::{Semaphore, mpsc};

    use super::*;
    use crate::Metrics;
    use crate::api::BrokerContext;
    use crate::connection::reader::IdleClock;
    use crate::connection::test_context::{context, step};
    use crate::connection::{Request, RequestMemory};

    /// One of the broker's gauges or counters.
    type Gauge = fn(&Metrics) -> &AtomicU64;

    /// What one connection's reader borrows.
    struct Connection {
        ctx: Arc<BrokerContext>,
        memory: RequestMemory,
        answered: AtomicU64,
        authenticated: AtomicBool,
        slots: Semaphore,
        _dir: tempfile::TempDir,
    }

    impl Connection {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let ctx = context(&dir);
            let memory = RequestMemory::new(
                ctx.config.request_memory_bytes_max,
                PRE_AUTH_MEMORY_BYTES_MAX,
            );
            let slots = Semaphore::new(ctx.config.in_flight_requests_max);
            Self {
                ctx,
                memory,
                answered: AtomicU64::new(0),
                authenticated: AtomicBool::new(false),
                slots,
                _dir: dir,
            }
        }

        /// A reader of `stream`, and the queue it fills.
        fn reader(
            &self,
            stream: DuplexStream,
        ) -> (Reader<'_, DuplexStream>, mpsc::Receiver<Request<'_>>) {
            let (queue, queued) = mpsc::channel(self.ctx.config.in_flight_requests_max);
            let reader = Reader {
                stream,
                ctx: &self.ctx,
                memory: &self.memory,
                slots: &self.slots,
                queue,
                answered: &self.answered,
                peer: None,
                idle: IdleClock::new(self.ctx.config.connection_idle_timeout),
            };
            (reader, queued)
        }

        fn gauge(&self, gauge: Gauge) -> u64 {
            gauge(&self.ctx.metrics).load(Ordering::Relaxed)
        }
    }

    /// A frame of `size` bytes after its size prefix.
    fn frame(size: usize) -> Vec<u8> {
        let mut frame = i32::try_from(size).unwrap().to_be_bytes().to_vec();
        frame.resize(4 + size, 0);
        frame
    }

    #[tokio::test]
    async fn frames_are_read_one_at_a_time_from_the_pre_auth_budget_until_authenticated() {
        let connection = Connection::new();
        let (mut client, server) = tokio::io::duplex(4 << 20);
        for _ in 0..3 {
            client
                .write_all(&frame(SASL_FRAME_BYTES_MAX))
                .await
                .unwrap();
        }
        let (mut reader, mut queued) = connection.reader(server);
        let mut reading = pin!(read_until_authenticated(
            &mut reader,
            &connection.authenticated
        ));

        assert!(step(reading.as_mut()).await.is_pending());
        let first = queued.try_recv().expect("the first frame is read");
        assert!(step(reading.as_mut()).await.is_pending());
        assert!(
            queued.try_recv().is_err(),
            "a second frame was read before the first was answered"
        );
        let pre_auth: Gauge = |m| &m.pre_auth_request_bytes_buffered;
        assert_eq!(connection.gauge(pre_auth), SASL_FRAME_BYTES_MAX as u64);
        assert_eq!(connection.gauge(|m| &m.request_bytes_buffered), 0);

        // Answered: the next frame is read.
        drop(first);
        assert!(step(reading.as_mut()).await.is_pending());
        let second = queued.try_recv().expect("the second frame is read");
        // The answer to the second authenticates: reading ahead may begin.
        connection.authenticated.store(true, Ordering::Release);
        drop(second);
        assert_eq!(step(reading.as_mut()).await, Poll::Ready(Some(())));
        assert!(queued.try_recv().is_err(), "the third frame is left");
        assert_eq!(connection.gauge(pre_auth), 0);
    }

    #[tokio::test]
    async fn a_login_is_read_while_large_frames_hold_the_whole_pre_auth_budget() {
        let connection = Connection::new();
        let spent = (connection.memory.pre_auth.bytes)
            .try_acquire_many(PRE_AUTH_MEMORY_BYTES_MAX as u32)
            .unwrap();
        let (mut client, server) = tokio::io::duplex(4 << 20);
        client
            .write_all(&frame(LOGIN_FRAME_BYTES_MAX))
            .await
            .unwrap();
        client
            .write_all(&frame(LOGIN_FRAME_BYTES_MAX + 1))
            .await
            .unwrap();
        let (mut reader, mut queued) = connection.reader(server);
        let mut reading = pin!(read_until_authenticated(
            &mut reader,
            &connection.authenticated
        ));

        assert!(step(reading.as_mut()).await.is_pending());
        let login = queued.try_recv().expect("a login-sized frame is read");
        drop(login);
        // A larger one waits for the budget.
        assert!(step(reading.as_mut()).await.is_pending());
        assert!(queued.try_recv().is_err());
        let waits: Gauge = |m| &m.pre_auth_memory_waits;
        assert_eq!(connection.gauge(waits), 1);
        drop(spent);
        assert!(step(reading.as_mut()).await.is_pending());
        let large = queued.try_recv().expect("read once the budget has room");
        assert_eq!(large.frame.len(), LOGIN_FRAME_BYTES_MAX + 1);
        assert_eq!(connection.gauge(|m| &m.request_memory_waits), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_login_answered_after_the_deadline_keeps_the_connection() {
        let connection = Connection::new();
        let (mut client, server) = tokio::io::duplex(64 << 10);
        client.write_all(&frame(100)).await.unwrap();
        let (mut reader, mut queued) = connection.reader(server);
        let limit = Some(Duration::from_secs(1));
        let mut reading = pin!(log_in(&mut reader, &connection.authenticated, limit));

        assert!(step(reading.as_mut()).await.is_pending());
        let login = queued.try_recv().expect("the login frame is read");
        // The deadline passes while its answer is being made.
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(step(reading.as_mut()).await.is_pending());
        connection.authenticated.store(true, Ordering::Release);
        drop(login);
        assert_eq!(step(reading.as_mut()).await, Poll::Ready(Some(())));
        assert_eq!(connection.gauge(|m| &m.sasl_login_timeouts), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn no_login_by_the_deadline_stops_the_reader_mid_frame() {
        let connection = Connection::new();
        let (mut client, server) = tokio::io::duplex(64 << 10);
        // Answered, not a login; then half a frame, and nothing more.
        client.write_all(&frame(100)).await.unwrap();
        client.write_all(&frame(100)[..50]).await.unwrap();
        let (mut reader, mut queued) = connection.reader(server);
        let limit = Some(Duration::from_secs(1));
        let mut reading = pin!(log_in(&mut reader, &connection.authenticated, limit));

        assert!(step(reading.as_mut()).await.is_pending());
        drop(queued.try_recv().expect("the first frame is read"));
        assert!(step(reading.as_mut()).await.is_pending());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(step(reading.as_mut()).await, Poll::Ready(None));
        assert!(queued.try_recv().is_err(), "the half frame was queued");
        assert_eq!(connection.gauge(|m| &m.sasl_login_timeouts), 1);
    }

    #[tokio::test]
    async fn a_frame_over_the_pre_auth_limit_stops_the_reader_before_any_reservation() {
        let connection = Connection::new();
        let (mut client, server) = tokio::io::duplex(64);
        let size = i32::try_from(SASL_FRAME_BYTES_MAX + 1).unwrap();
        client.write_all(&size.to_be_bytes()).await.unwrap();
        let (mut reader, _queued) = connection.reader(server);
        let reading = read_until_authenticated(&mut reader, &connection.authenticated);
        assert_eq!(reading.await, None);
        let pre_auth: Gauge = |m| &m.pre_auth_request_bytes_buffered;
        assert_eq!(connection.gauge(pre_auth), 0);
    }
}
