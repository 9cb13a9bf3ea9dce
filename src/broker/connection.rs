//! One client connection: read a request, answer it, repeat, in order.
//!
//! Requests are handled one at a time, so a connection has at most one
//! request in flight and one response buffered: a slow reader holds back
//! only its own connection, and memory per connection is bounded by the
//! request size limit. The connection ends on EOF, on any malformed or
//! unsupported request, or when the server shuts down (after the request in
//! hand is answered).

use std::sync::Arc;

use nix::sys::sendfile::sendfile;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::api::{self, BrokerContext, Reply};
use super::fetch_frame::Part;
use super::frame::read_frame;
use crate::log::FileSlice;

pub(crate) async fn serve(
    mut stream: TcpStream,
    ctx: Arc<BrokerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let peer = stream.peer_addr().ok();
    let limit = ctx.config.request_bytes_max;
    loop {
        let idle = ctx.config.connection_idle_timeout;
        let frame = tokio::select! {
            frame = tokio::time::timeout(idle, read_frame(&mut stream, limit)) => match frame {
                Ok(frame) => frame,
                Err(_) => {
                    tracing::debug!(?peer, "closing an idle connection");
                    break;
                }
            },
            _ = shutdown.changed() => break,
        };
        let frame = match frame {
            Ok(Some(frame)) => frame.freeze(),
            Ok(None) => break,
            Err(error) => {
                tracing::debug!(?peer, "closing connection: {error}");
                break;
            }
        };
        let started = std::time::Instant::now();
        let api_key = i16::from_be_bytes([
            frame.first().copied().unwrap_or(0xff),
            frame.get(1).copied().unwrap_or(0xff),
        ]);
        let bytes_in = frame.len() as u64 + 4;
        let Some(response) = answer(&ctx, frame, &mut shutdown, peer).await else {
            break;
        };
        let bytes_out = response
            .as_ref()
            .map_or(0, |parts| parts.iter().map(Part::len).sum());
        ctx.metrics
            .observe(api_key, started.elapsed(), bytes_in, bytes_out);
        let Some(response) = response else {
            continue;
        };
        if let Err(error) = write_parts(&mut stream, &response).await {
            tracing::debug!(?peer, "closing connection: writing a response: {error}");
            break;
        }
    }
}

/// Runs the request's handler off the executor's threads (handlers block on
/// disk I/O), waiting between passes when a fetch asks to wait for data.
/// `None` closes the connection; `Some(None)` means no response is due.
async fn answer(
    ctx: &Arc<BrokerContext>,
    frame: bytes::Bytes,
    shutdown: &mut watch::Receiver<bool>,
    peer: Option<std::net::SocketAddr>,
) -> Option<Option<Vec<Part>>> {
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        // Registered before the handler looks, so an append in between
        // still wakes this wait.
        let appended = ctx.appended.notified();
        tokio::pin!(appended);
        appended.as_mut().enable();
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
                    _ = shutdown.changed() => None,
                };
            }
            Ok(Ok(Reply::WaitForData(wait))) => {
                let until = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + wait);
                tokio::select! {
                    () = &mut appended => {}
                    () = tokio::time::sleep_until(until) => {}
                    _ = shutdown.changed() => return None,
                }
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

/// Writes a response: in-memory parts with `write_all`, file ranges with
/// `sendfile` (the kernel copies from the page cache to the socket).
async fn write_parts(stream: &mut TcpStream, parts: &[Part]) -> std::io::Result<()> {
    for part in parts {
        match part {
            Part::Bytes(bytes) => stream.write_all(bytes).await?,
            Part::File(slice) => send_file(stream, slice).await?,
        }
    }
    Ok(())
}

async fn send_file(stream: &TcpStream, slice: &FileSlice) -> std::io::Result<()> {
    let mut offset = i64::try_from(slice.position).map_err(std::io::Error::other)?;
    let mut remaining = usize::try_from(slice.len).map_err(std::io::Error::other)?;
    while remaining > 0 {
        stream.writable().await?;
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
