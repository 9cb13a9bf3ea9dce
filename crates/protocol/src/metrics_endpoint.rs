//! The `/metrics` endpoint the broker and apps serve: `GET /metrics`
//! answered with the Prometheus text a caller renders, everything else 404.
//! One request per connection; a request head past `HTTP_HEAD_BYTES_MAX`
//! bytes is answered as it stands, without reading more.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Longest request head read; a scraper's is a few hundred bytes.
const HTTP_HEAD_BYTES_MAX: usize = 8192;

/// How long to wait after a failed accept (out of file descriptors, say)
/// before accepting again, so a persistent failure does not spin a core.
pub const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Serves `GET /metrics` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, render: impl Fn() -> String + Send + Sync + 'static) {
    let render = std::sync::Arc::new(render);
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
            continue;
        };
        let render = std::sync::Arc::clone(&render);
        tokio::spawn(async move {
            let mut head = Vec::with_capacity(1024);
            let mut chunk = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < HTTP_HEAD_BYTES_MAX {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&chunk[..n]),
                }
            }
            let (status, body) = if head.starts_with(b"GET /metrics ") {
                ("200 OK", render())
            } else {
                ("404 Not Found", "only GET /metrics is served\n".to_string())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}
