//! Serving an axum router on a TCP listener, each connection through
//! hyper's HTTP/1 under limits a client cannot talk its way around:
//!
//! - a request's head must arrive within [`Limits::header_timeout`] (a
//!   client that opens a connection and sends nothing, or a byte a
//!   minute, is closed), and be at most [`Limits::head_bytes_max`] long
//!   (a longer one is answered 431 without being read further);
//! - at most [`Limits::connections_max`] connections are open at once; one
//!   more is closed as it is accepted, before anything is read;
//! - a connection lives at most [`Limits::connection_life`]: then it
//!   finishes the request in hand and closes (a scraper reconnects).
//!
//! With [`Access`]'s TLS, each connection's handshake must also finish
//! within the head's time; then each request passes `login` (a loopback
//! `Host` on a loopback listener, and the authentication `Access` asks
//! for) before any route sees it.
//!
//! Nothing here reads a request body: routes that take one (the schema
//! registry's) bound it themselves (axum's `DefaultBodyLimit`), within
//! the connection's life.

use std::sync::Arc;
use std::time::Duration;

use axum::middleware;
use axum::{Extension, Router};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::access::Access;
use crate::login::{Logins, Peer, loopback_host_only, require_authentication};

/// How long to wait after a failed accept (out of file descriptors, say)
/// before accepting again, so a persistent failure does not spin a core.
pub const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// How long a connection past its life is given to finish the request in
/// hand.
const CLOSING_GRACE: Duration = Duration::from_secs(5);

/// What one listener allows its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once.
    pub connections_max: usize,
    /// Time to send a request's head.
    pub header_timeout: Duration,
    /// Bytes of a request's head.
    pub head_bytes_max: usize,
    /// Time a connection is kept, requests and idle waits together.
    pub connection_life: Duration,
}

impl Default for Limits {
    /// A scraper or a browser tab or two: 64 connections, 10 s for a
    /// head of at most 8 KiB, 5 minutes per connection.
    fn default() -> Self {
        Self {
            connections_max: 64,
            header_timeout: Duration::from_secs(10),
            head_bytes_max: 8192,
            connection_life: Duration::from_secs(300),
        }
    }
}

/// Serves `router` on `listener` under `limits` and `access` until the
/// task is dropped.
pub async fn serve(listener: TcpListener, router: Router, limits: Limits, access: Access) {
    let router = if access.authenticates() {
        let logins = Logins::new(access.clone());
        router.layer(middleware::from_fn_with_state(
            logins,
            require_authentication,
        ))
    } else {
        router
    };
    let loopback = listener.local_addr().is_ok_and(|a| a.ip().is_loopback());
    let router = if loopback {
        router.layer(middleware::from_fn(loopback_host_only))
    } else {
        router
    };
    let permits = Arc::new(Semaphore::new(limits.connections_max));
    // The connections are this future's: dropped (the endpoint stopped),
    // it ends them all, and nothing answers from what it served.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::debug!("accepting an HTTP connection: {error}");
                tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::debug!(
                %peer,
                "closing an HTTP connection: {} are open already",
                limits.connections_max
            );
            continue;
        };
        let service = TowerToHyperService::new(router.clone().layer(Extension(Peer(peer.ip()))));
        let acceptor = access.acceptor().cloned();
        connections.spawn(async move {
            let _permit = permit;
            let Some(acceptor) = acceptor else {
                return connection(stream, service, limits, peer).await;
            };
            match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => connection(tls, service, limits, peer).await,
                Ok(Err(error)) => tracing::debug!(%peer, "HTTP TLS handshake: {error}"),
                Err(_) => tracing::debug!(%peer, "HTTP TLS handshake not finished in time"),
            }
        });
    }
}

/// One connection's requests, answered until it closes or its life ends.
async fn connection<I>(
    io: I,
    service: TowerToHyperService<Router>,
    limits: Limits,
    peer: std::net::SocketAddr,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(limits.head_bytes_max)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        () = tokio::time::sleep(limits.connection_life) => {
            connection.as_mut().graceful_shutdown();
            match tokio::time::timeout(CLOSING_GRACE, connection).await {
                Ok(ended) => ended,
                Err(_) => return,
            }
        }
    };
    if let Err(error) = ended {
        tracing::debug!(%peer, "HTTP connection: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// Generous: how long a closing the test waits for may take on a busy
    /// machine (less than hyper's own 30 s for a head, so the limits set
    /// here are what closes).
    const PATIENCE: Duration = Duration::from_secs(20);

    async fn started(limits: Limits) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().route("/", get(|| async { "served" }));
        tokio::spawn(serve(listener, router, limits, Access::default()));
        addr
    }

    /// Reads until the server closes the connection (a reset, when it
    /// closed with bytes of ours unread, ends it too); what it sent.
    async fn until_closed(stream: &mut TcpStream) -> String {
        let mut answer = Vec::new();
        let read = async {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = stream.read(&mut chunk).await {
                answer.extend_from_slice(&chunk[..n]);
            }
        };
        tokio::time::timeout(PATIENCE, read)
            .await
            .expect("the server closes the connection");
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn a_client_that_never_sends_its_head_is_closed() {
        let addr = started(Limits {
            header_timeout: Duration::from_millis(200),
            ..Limits::default()
        })
        .await;
        let mut silent = TcpStream::connect(addr).await.unwrap();
        assert_eq!(until_closed(&mut silent).await, "");
    }

    #[tokio::test]
    async fn a_connection_over_the_cap_is_closed_at_once_and_its_place_freed_later_serves() {
        let addr = started(Limits {
            connections_max: 1,
            // Longer than the test waits: only the cap closes a connection.
            header_timeout: 2 * PATIENCE,
            ..Limits::default()
        })
        .await;
        let mut first = TcpStream::connect(addr).await.unwrap();
        let mut over = TcpStream::connect(addr).await.unwrap();
        assert_eq!(until_closed(&mut over).await, "");
        // The first is served, and closes, freeing its place.
        (first
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await)
            .unwrap();
        let answer = until_closed(&mut first).await;
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("served"),
            "{answer}"
        );
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let mut next = TcpStream::connect(addr).await.unwrap();
            (next
                .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .await)
                .unwrap();
            let answer = until_closed(&mut next).await;
            if answer.starts_with("HTTP/1.1 200") {
                break;
            }
            // Accepted before the first's place was given back.
            assert!(
                tokio::time::Instant::now() < deadline,
                "the place is never freed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_head_over_the_limit_is_answered_431() {
        let addr = started(Limits::default()).await;
        let mut long = TcpStream::connect(addr).await.unwrap();
        let padding = "x".repeat(Limits::default().head_bytes_max);
        let request = format!("GET / HTTP/1.1\r\nHost: localhost\r\nX-Padding: {padding}\r\n\r\n");
        // The server may answer and close before the whole head is written.
        let _ = long.write_all(request.as_bytes()).await;
        let answer = until_closed(&mut long).await;
        assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    }

    #[tokio::test]
    async fn stopping_the_endpoint_ends_its_open_connections() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().route("/", get(|| async { "served" }));
        let served = tokio::spawn(serve(
            listener,
            router,
            Limits::default(),
            Access::default(),
        ));
        let mut kept = TcpStream::connect(addr).await.unwrap();
        (kept
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await)
            .unwrap();
        let mut answer = [0u8; 16];
        kept.read_exact(&mut answer).await.unwrap();
        assert!(
            answer.starts_with(b"HTTP/1.1 200"),
            "answered, and kept alive"
        );
        served.abort();
        // Closed with the endpoint, not at the end of its life.
        until_closed(&mut kept).await;
    }

    #[tokio::test]
    async fn a_kept_alive_connection_is_closed_once_its_life_is_over() {
        let addr = started(Limits {
            connection_life: Duration::from_millis(200),
            // Only the connection's life closes it within the test's wait.
            header_timeout: 2 * PATIENCE,
            ..Limits::default()
        })
        .await;
        let mut kept = TcpStream::connect(addr).await.unwrap();
        (kept
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await)
            .unwrap();
        let answer = until_closed(&mut kept).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}
