//! One client connection: requests read ahead, handled one at a time, in
//! order, and answered in order.
//!
//! Three stages run concurrently in the connection's task:
//!
//! - The **reader** takes an in-flight slot (at most
//!   `in_flight_requests_max` requests read and not yet answered), reads a
//!   size prefix, reserves that many bytes from the broker-wide request
//!   memory budget, and only then allocates the frame, reads it and queues
//!   it. Out of slots or out of budget, it stops reading the socket, so the
//!   client's sends back up (TCP backpressure); nothing fails. Until a
//!   connection on a SASL listener has authenticated, it reads one request
//!   at a time instead, from a budget of its own ([`pre_auth`]).
//! - The **handler** takes queued requests in order and runs each one's
//!   handler inline while the connection's are quick, else where blocking
//!   on disk I/O stalls no other connection (see [`run_handler`]; the
//!   connection's own reader and writer pause), then
//!   returns the frame's bytes to the budget. A request's effects are
//!   therefore applied strictly in the order sent (a producer's batches
//!   append in that order). Most responses are known when the handler
//!   ends; a JoinGroup's waits for the rebalance, and the handler waits
//!   with it. An acks=all produce's response waits for an fdatasync
//!   already under way: the handler passes it on pending and takes the
//!   next request, so a pipelining producer's next batch is appended while
//!   the previous one is synced.
//! - The **writer** takes the responses in order, waits for each pending
//!   one, writes it, and only then frees its slot.
//!
//! So a pipelining client has request k+1 read, and handled if k only
//! waits for its sync, without any reordering of effects or answers.
//!
//! Memory per connection is bounded: at most `in_flight_requests_max`
//! frames (each at most `request_bytes_max`, all connections together at
//! most `request_memory_bytes_max`) plus the responses of handled requests
//! not yet written (at most one per slot); before authentication, one
//! frame of at most [`SASL_FRAME_BYTES_MAX`](super::auth::SASL_FRAME_BYTES_MAX)
//! and none of `request_memory_bytes_max`. A response is written before
//! the next one, and a fetch response's records are file ranges sent with
//! sendfile, not copied into memory (but for a whole response of at most
//! [`COALESCED_RESPONSE_BYTES_MAX`](super::transport::COALESCED_RESPONSE_BYTES_MAX),
//! written in one piece), so a client that stops reading holds small
//! in-memory parts; once writing (or reading a frame's body)
//! makes no progress for `socket_stall_timeout` the connection closes and
//! returns what it held.
//!
//! The connection ends on EOF or an oversized frame (after answering the
//! requests read before it), on a request the broker cannot decode or does
//! not serve, after `connection_idle_timeout` (up to twice that, see
//! [`reader`]) with nothing in flight and nothing arriving, not logged in
//! by the login timeout ([`pre_auth`]), or
//! at shutdown: the requests handled are answered,
//! and requests read ahead but not begun are dropped unanswered (never
//! handled, so a producer's retry of them cannot duplicate anything).

mod handler_place;
mod handler_usage;
mod pre_auth;
mod read_loop;
mod reader;
mod reservation;
#[cfg(test)]
mod test_context;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncRead;
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc, watch};

use super::BrokerError;
use super::api::{self, BrokerContext, Reply};
use super::auth::{Caller, Principal, SaslSession, SaslSettings, Step};
use super::fetch_frame::Part;
use super::listener::Endpoint;
use super::transport::{ResponseWriter, TlsWriter};
use handler_place::{Pace, run_handler};
pub(crate) use handler_usage::worker_woke;
pub use pre_auth::{LOGIN_FRAME_BYTES_MAX, PRE_AUTH_MEMORY_BYTES_MAX};
use reader::{IdleClock, Reader};
pub(crate) use reservation::RequestMemory;
use reservation::{Gauge, Held};

/// What a connection knows of the listener it arrived on.
pub(crate) struct Link {
    /// What its clients are told to connect to (shared with each request's
    /// handler, not copied).
    pub endpoint: Arc<Endpoint>,
    /// The TLS acceptor of an SSL or SASL_SSL listener.
    pub tls: Option<Arc<super::auth::TlsReloader>>,
    /// The listener knows who its clients are (SASL, or required client
    /// certificates): see [`Caller::secured`].
    pub secured: bool,
    /// What a SASL listener accepts.
    pub sasl: Option<SaslSettings>,
}

/// A request read and not yet answered, holding what it took from its
/// connection (`'c`).
struct Request<'c> {
    frame: Bytes,
    /// The frame's share of a request memory budget, returned as soon as
    /// the request is handled.
    memory: Held<'c>,
    /// The connection's in-flight slot (before authentication, all of
    /// them), freed once the response is written.
    slot: Held<'c>,
}

/// Serves one accepted connection: the TLS handshake first on a TLS
/// listener, then requests until the connection ends.
pub(crate) async fn serve(
    mut stream: TcpStream,
    link: Arc<Link>,
    ctx: Arc<BrokerContext>,
    memory: Arc<RequestMemory>,
    shutdown: watch::Receiver<bool>,
) {
    let peer = stream.peer_addr().ok();
    let caller = |principal| Caller {
        principal,
        host: peer.map_or_else(String::new, |p| p.ip().to_string()),
        secured: link.secured,
    };
    let Some(tls) = &link.tls else {
        let (reader, writer) = stream.split();
        let caller = caller(Principal::anonymous());
        return run(reader, writer, &link, caller, ctx, &memory, shutdown, peer).await;
    };
    let (stream, principal) = match tls.accept(stream).await {
        Ok(accepted) => accepted,
        Err(reason) => {
            ctx.metrics
                .tls_handshake_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(?peer, "closing connection: {reason}");
            return;
        }
    };
    let (reader, writer) = tokio::io::split(stream);
    let writer = TlsWriter::new(writer);
    let caller = caller(principal);
    run(reader, writer, &link, caller, ctx, &memory, shutdown, peer).await;
}

#[expect(
    clippy::too_many_arguments,
    reason = "one connection's parts, passed once"
)]
async fn run<R: AsyncRead + Unpin, W: ResponseWriter>(
    reader: R,
    writer: W,
    link: &Link,
    caller: Caller,
    ctx: Arc<BrokerContext>,
    memory: &RequestMemory,
    shutdown: watch::Receiver<bool>,
    peer: Option<SocketAddr>,
) {
    // Declared before the queues: what requests borrow outlives them.
    let slots = Semaphore::new(ctx.config.in_flight_requests_max);
    // The responses written: activity, for the reader's idle clock.
    let answered = AtomicU64::new(0);
    // Never full: the reader's in-flight slots bound what it queues.
    let (queue, queued) = mpsc::channel(ctx.config.in_flight_requests_max);
    // Until a SASL connection authenticates, it reads one small frame at a
    // time.
    let authenticated = AtomicBool::new(link.sasl.is_none());
    let reader = Reader {
        stream: reader,
        ctx: &ctx,
        memory,
        slots: &slots,
        queue,
        answered: &answered,
        peer,
        idle: IdleClock::new(ctx.config.connection_idle_timeout),
    };
    let login_timeout = link.sasl.as_ref().map(|sasl| sasl.login_timeout);
    // At shutdown the reader is no longer polled, wherever it waits.
    let mut reader_shutdown = shutdown.clone();
    let reading = async {
        tokio::select! {
            biased;
            () = stopped(&mut reader_shutdown) => {}
            _ = read_loop::read_requests(reader, &authenticated, login_timeout) => {}
        }
    };
    let (outgoing, to_write) = mpsc::channel(ctx.config.in_flight_requests_max);
    let handling = handle_requests(
        &ctx,
        queued,
        outgoing,
        shutdown,
        peer,
        link,
        caller,
        &authenticated,
    );
    let writing = write_responses(writer, &ctx, to_write, &answered, peer);
    // The stages polled in the order a request goes through them, so that
    // a frame read is handled in the same poll of the connection's task,
    // and answered in it when its handler ran inline with its answer
    // ready. `select!` by default starts each poll at a random branch and
    // goes round in the declared order, which was writer, handler,
    // reader: two times in three, a request read waited for the task's
    // next poll to be handled, or its answer to be written. Measured with
    // `make bench-requests`' binary, seven alternating runs against that
    // order (medians of the broker's CPU per request): produce 17.6 →
    // 16.9 µs, fetch 18.8 → 17.5 µs.
    //
    // No stage starves the others: the reader stops at its in-flight
    // slots, which only the writer frees, so the handler empties the
    // queue and the writer runs after at most `in_flight_requests_max`
    // requests. The price: of the requests read in one poll, the first
    // answer is written once all of them were handled, where the writer
    // went first one poll in three before.
    tokio::select! {
        biased;
        // A reader that stops (EOF, a bad frame, idleness, shutdown) closes
        // the queue; the handler handles what is queued, then ends.
        () = async {
            reading.await;
            std::future::pending::<()>().await;
        } => {}
        // A handler that stops closes the outgoing channel; the writer
        // writes what is in it, then ends.
        () = async {
            handling.await;
            std::future::pending::<()>().await;
        } => {}
        () = writing => {}
    }
}

/// A handled request on its way out.
struct Outgoing<'c> {
    response: Response,
    api_key: i16,
    bytes_in: u64,
    started: std::time::Instant,
    /// The frame's share of the request memory budget, kept while the
    /// response waits (it may hold views into the frame, such as topic
    /// names).
    memory: Option<Held<'c>>,
    /// The request's in-flight slot, freed once the response is written.
    slot: Held<'c>,
}

enum Response {
    /// The parts to write, or none (a produce with acks=0), and the moment
    /// they were known.
    Ready(Option<Vec<Part>>, std::time::Instant),
    /// The response frame and the moment it was known, once the work it
    /// waits for ends (a task of its own, so that moment is not the
    /// writer's).
    Pending(tokio::task::JoinHandle<(Result<Part, BrokerError>, std::time::Instant)>),
}

/// Handles queued requests one at a time, in order, passing each response
/// to the writer, until the queue closes, a request closes the connection,
/// the writer stops, or shutdown.
#[expect(
    clippy::too_many_arguments,
    reason = "the handler's share of one connection's parts, passed once"
)]
async fn handle_requests<'c>(
    ctx: &Arc<BrokerContext>,
    mut queue: mpsc::Receiver<Request<'c>>,
    outgoing: mpsc::Sender<Outgoing<'c>>,
    mut shutdown: watch::Receiver<bool>,
    peer: Option<SocketAddr>,
    link: &Link,
    caller: Caller,
    authenticated: &AtomicBool,
) {
    let mut caller = Arc::new(caller);
    let mut sasl = link.sasl.clone().map(SaslSession::new);
    let mut pace = Pace::default();
    // One wait for shutdown, polled in turn by every wait below: made once,
    // it is registered once, not for each request.
    let stopping = stopped(&mut shutdown);
    tokio::pin!(stopping);
    loop {
        let request = tokio::select! {
            biased;
            () = &mut stopping => return,
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
        let api_key = api_key_of(&frame);
        let bytes_in = frame.len() as u64 + 4;
        let passes = sasl
            .as_ref()
            .is_none_or(|session| session.passes(&frame, started));
        if !passes && let Some(session) = sasl.take() {
            let (step_ctx, step_frame) = (Arc::clone(ctx), frame.clone());
            let stepped = tokio::task::spawn_blocking(move || {
                let mut session = session;
                let step = session.step(
                    &step_frame,
                    &step_ctx.credentials,
                    std::time::Instant::now(),
                );
                (session, step)
            })
            .await;
            let Ok((session, step)) = stepped else {
                tracing::error!(?peer, "closing connection: the SASL step failed");
                return;
            };
            let answer = match step {
                Step::Pass => None,
                Step::Answer(part) => Some(part),
                Step::Authenticated(part) => {
                    let principal = session
                        .principal()
                        .cloned()
                        .unwrap_or_else(Principal::anonymous);
                    ctx.metrics
                        .sasl_authentications
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(?peer, %principal, "authenticated");
                    caller = Arc::new(Caller {
                        principal,
                        ..Caller::clone(&caller)
                    });
                    authenticated.store(true, Ordering::Release);
                    Some(part)
                }
                Step::Fail(answer, reason) => {
                    ctx.metrics
                        .sasl_authentication_failures
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::info!(?peer, "SASL authentication failed: {reason}");
                    let delay = link
                        .sasl
                        .as_ref()
                        .map_or(Duration::ZERO, |s| s.failed_login_delay);
                    tokio::select! {
                        biased;
                        () = &mut stopping => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                    if let Some(part) = answer {
                        let _ = outgoing
                            .send(Outgoing {
                                response: Response::Ready(Some(vec![part]), now()),
                                api_key,
                                bytes_in,
                                started,
                                memory: None,
                                slot,
                            })
                            .await;
                    }
                    return;
                }
                Step::Close(reason) => {
                    tracing::debug!(?peer, "closing connection: {reason}");
                    return;
                }
            };
            sasl = Some(session);
            if let Some(part) = answer {
                let next = Outgoing {
                    response: Response::Ready(Some(vec![part]), now()),
                    api_key,
                    bytes_in,
                    started,
                    memory: None,
                    slot,
                };
                if outgoing.send(next).await.is_err() {
                    return;
                }
                continue;
            }
        }
        // A request that waited for a SASL step first starts its handler now.
        let handler_started = if passes { started } else { now() };
        let handled = handle_one(
            ctx,
            frame,
            handler_started,
            stopping.as_mut(),
            peer,
            link,
            &caller,
            &mut pace,
        )
        .await;
        let Some(response) = handled else {
            return;
        };
        // A response already known holds nothing of the frame.
        let memory = matches!(response, Response::Pending(_)).then_some(memory);
        let next = Outgoing {
            response,
            api_key,
            bytes_in,
            started,
            memory,
            slot,
        };
        if outgoing.send(next).await.is_err() {
            return;
        }
    }
}

/// Writes the responses in order, waiting for each pending one, until the
/// handler stops, or a write fails or stalls.
async fn write_responses<W: ResponseWriter>(
    mut stream: W,
    ctx: &Arc<BrokerContext>,
    mut to_write: mpsc::Receiver<Outgoing<'_>>,
    answered: &AtomicU64,
    peer: Option<SocketAddr>,
) {
    while let Some(next) = to_write.recv().await {
        let (response, ready) = match next.response {
            Response::Ready(parts, ready) => (parts, ready),
            Response::Pending(task) => match task.await {
                Ok((Ok(part), ready)) => (Some(vec![part]), ready),
                Ok((Err(error), _)) => {
                    tracing::error!(?peer, "closing connection: {error}");
                    return;
                }
                Err(failed) => {
                    tracing::error!(
                        ?peer,
                        "closing connection: a response task failed: {failed}"
                    );
                    return;
                }
            },
        };
        drop(next.memory);
        let bytes_out = response
            .as_ref()
            .map_or(0, |parts| parts.iter().map(Part::len).sum());
        ctx.metrics.observe(
            next.api_key,
            ready.saturating_duration_since(next.started),
            next.bytes_in,
            bytes_out,
        );
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
            if let Err(error) = stream.write_parts(&parts, stall).await {
                tracing::debug!(?peer, "closing connection: writing a response: {error}");
                return;
            }
        }
        drop(next.slot);
        answered.fetch_add(1, Ordering::Relaxed);
    }
}

/// The API key a request frame starts with (-1 for a frame too short to
/// hold one, which no handler accepts).
fn api_key_of(frame: &[u8]) -> i16 {
    match frame {
        [high, low, ..] => i16::from_be_bytes([*high, *low]),
        _ => -1,
    }
}

/// Runs the request's handler where it may block on disk I/O (a segment
/// roll syncs a file, a read may miss the page cache), waiting between
/// passes when a fetch asks to wait for data; the request was taken at
/// `started`. `None` closes the connection.
///
/// Where the handler runs is [`run_handler`]'s choice.
#[expect(
    clippy::too_many_arguments,
    reason = "one request's parts and its connection's, passed once"
)]
async fn handle_one(
    ctx: &Arc<BrokerContext>,
    frame: Bytes,
    started: std::time::Instant,
    mut stopping: std::pin::Pin<&mut impl Future<Output = ()>>,
    peer: Option<SocketAddr>,
    link: &Link,
    caller: &Arc<Caller>,
    pace: &mut Pace,
) -> Option<Response> {
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let final_pass = deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
        // A pass after a wait for data starts when it runs.
        let pass_started = match deadline {
            None => started,
            Some(_) => now(),
        };
        let (handler_ctx, handler_frame) = (Arc::clone(ctx), frame.clone());
        let (caller, endpoint) = (Arc::clone(caller), Arc::clone(&link.endpoint));
        let handle =
            move || api::handle(&handler_ctx, handler_frame, final_pass, &caller, &endpoint);
        let (handled, ended) = run_handler(pace, api_key_of(&frame), pass_started, handle).await;
        match handled {
            Ok(Ok(Reply::Respond(parts))) => return Some(Response::Ready(Some(parts), ended)),
            Ok(Ok(Reply::Silent)) => return Some(Response::Ready(None, ended)),
            Ok(Ok(Reply::Pipelined(response))) => {
                return Some(Response::Pending(tokio::spawn(async move {
                    (response.await, now())
                })));
            }
            Ok(Ok(Reply::Later(response))) => {
                return tokio::select! {
                    framed = response => match framed {
                        Ok(part) => Some(Response::Ready(Some(vec![part]), now())),
                        Err(error) => {
                            tracing::debug!(?peer, "closing connection: {error}");
                            None
                        }
                    },
                    () = stopping.as_mut() => None,
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
                    () = stopping.as_mut() => return None,
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

/// Once the broker is shutting down (or its shutdown signal is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

fn now() -> std::time::Instant {
    std::time::Instant::now()
}
