//! Asking another process's endpoint (one instance forwarding a query to
//! another, the command line asking a running instance): one GET on a
//! connection of its own, through hyper, over TLS when a CA is given (the
//! peer's certificate checked against [`HttpSecurity::tls_ca`] for its IP
//! address; a process whose own endpoints serve TLS asks nothing in
//! clear), with the token when there is one. The answer's body is
//! read up to a bound, and the whole exchange within a time.
//!
//! [`HttpSecurity::tls_ca`]: crate::access::HttpSecurity::tls_ca

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::client::conn::http1;
use hyper::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::access::Access;

/// Why an answer could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Not reached, or no whole answer in time: nothing was answered.
    #[error("{0}")]
    Unreachable(String),
    /// It answered more than the caller reads.
    #[error("an answer over {0} bytes")]
    TooLarge(usize),
    /// The token would go in clear to another machine.
    #[error(
        "the token would go in clear to {0}, beyond this machine: give the CA its certificate chains to (--http-tls-ca) so it is asked over TLS"
    )]
    TokenInClear(SocketAddr),
    /// Its endpoints serve TLS and no CA was given to check them with.
    #[error(
        "the endpoints serve TLS, and no CA is given to check another instance's certificate with (--http-tls-ca)"
    )]
    NoCa,
}

/// The status and body of `GET target` at `addr`, within `time`, the body
/// read up to `body_max` bytes.
pub async fn get(
    addr: SocketAddr,
    target: &str,
    access: &Access,
    body_max: usize,
    time: Duration,
) -> Result<(StatusCode, Bytes), FetchError> {
    let late = |_| FetchError::Unreachable(format!("no answer within {} s", time.as_secs()));
    tokio::time::timeout(time, ask(addr, target, access, body_max))
        .await
        .map_err(late)?
}

async fn ask(
    addr: SocketAddr,
    target: &str,
    access: &Access,
    body_max: usize,
) -> Result<(StatusCode, Bytes), FetchError> {
    let mut request = Request::get(target).header(header::HOST, addr.to_string());
    if let Some(token) = access.token() {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request.body(Empty::<Bytes>::new()).map_err(unreachable)?;
    // With a CA to check the other side against, over TLS; in clear only
    // when this side's endpoints are in clear too.
    let connector = match (access.connector(), access.acceptor()) {
        (Some(connector), _) => connector,
        (None, Some(_)) => return Err(FetchError::NoCa),
        (None, None) => {
            if access.token().is_some() && !addr.ip().is_loopback() {
                return Err(FetchError::TokenInClear(addr));
            }
            let stream = TcpStream::connect(addr).await.map_err(unreachable)?;
            return exchange(stream, request, body_max).await;
        }
    };
    let stream = TcpStream::connect(addr).await.map_err(unreachable)?;
    let name = ServerName::IpAddress(addr.ip().into());
    let tls = (connector.connect(name, stream).await).map_err(unreachable)?;
    exchange(tls, request, body_max).await
}

async fn exchange<I>(
    io: I,
    request: Request<Empty<Bytes>>,
    body_max: usize,
) -> Result<(StatusCode, Bytes), FetchError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        (http1::handshake(TokioIo::new(io)).await).map_err(unreachable)?;
    // The connection is driven beside the request, and dropped with it.
    let driven = tokio::spawn(connection);
    let answered = async {
        let response = (sender.send_request(request).await).map_err(unreachable)?;
        let status = response.status();
        let body = Limited::new(response.into_body(), body_max)
            .collect()
            .await
            .map_err(
                |error| match error.downcast::<http_body_util::LengthLimitError>() {
                    Ok(_) => FetchError::TooLarge(body_max),
                    Err(error) => unreachable(&error),
                },
            )?;
        Ok((status, body.to_bytes()))
    }
    .await;
    driven.abort();
    answered
}

/// Nothing answered: `error` is why.
fn unreachable(error: impl std::fmt::Display) -> FetchError {
    FetchError::Unreachable(error.to_string())
}
