//! One client connection: read a request, answer it, repeat, in order.
//!
//! Requests are handled one at a time, so a connection has at most one
//! request in flight and one response buffered: a slow reader holds back
//! only its own connection, and memory per connection is bounded by the
//! request size limit. The connection ends on EOF, on any malformed or
//! unsupported request, or when the server shuts down (after the request in
//! hand is answered).

use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::api::{self, BrokerContext};
use super::frame::read_frame;

pub(crate) async fn serve(
    mut stream: TcpStream,
    ctx: Arc<BrokerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let peer = stream.peer_addr().ok();
    let limit = ctx.config.request_bytes_max;
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut stream, limit) => frame,
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
        // Handlers block on disk I/O (appends, fsync): keep them off the
        // executor's threads.
        let handler_ctx = Arc::clone(&ctx);
        let handled = tokio::task::spawn_blocking(move || api::handle(&handler_ctx, frame)).await;
        let response = match handled {
            Ok(Ok(Some(response))) => response,
            Ok(Ok(None)) => continue,
            Ok(Err(error)) => {
                tracing::debug!(?peer, "closing connection: {error}");
                break;
            }
            Err(failed) => {
                tracing::error!(?peer, "a request handler failed: {failed}");
                break;
            }
        };
        if let Err(error) = stream.write_all(&response).await {
            tracing::debug!(?peer, "closing connection: writing a response: {error}");
            break;
        }
    }
}
