//! How response bytes reach the client: on a plain TCP connection, file
//! ranges go from the page cache to the socket with `sendfile` (zero
//! copy), but for small responses, written in one piece; on TLS every byte must pass through the cipher, so file ranges
//! are read in [`TLS_FILE_CHUNK_BYTES`] pieces (off the executor's
//! threads) and written through the TLS stream.
//!
//! Either way a write that makes no progress for the stall timeout fails,
//! so a client that stops reading cannot hold the connection's memory.

use std::future::Future;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use nix::sys::sendfile::sendfile;
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::net::tcp::WriteHalf;

use super::fetch_frame::Part;
use strata_log::FileSlice;

/// Bytes of a file range read into memory at once on a TLS connection: a
/// few TLS records (16 KiB each) per write, one buffer per connection.
pub const TLS_FILE_CHUNK_BYTES: usize = 256 << 10;

/// Where a connection writes its responses.
pub(crate) trait ResponseWriter: Send {
    /// Writes the parts in order; fails when the client takes nothing for
    /// `stall`.
    fn write_parts(
        &mut self,
        parts: &[Part],
        stall: Duration,
    ) -> impl Future<Output = std::io::Result<()>> + Send;
}

/// A response of at most this many bytes goes out in one write, its file
/// ranges read into memory beside its other bytes, instead of a write
/// per part and a `sendfile` per range: each of those is a system call
/// and a segment of its own on the wire (the socket sends at once), so a
/// one-batch fetch went out as three. For clients that fetch a record at
/// a time that was most of the broker's CPU per request beyond an echo
/// server's (`make bench-requests`). Larger ranges keep `sendfile`: their
/// copy would cost more than the calls saved. The copy is held while the
/// write waits for the client (up to the stall timeout), so this bounds
/// what a connection holds that way.
pub const COALESCED_RESPONSE_BYTES_MAX: u64 = 16 << 10;

/// A plain TCP connection's write half: file ranges with `sendfile`, or
/// read in with a small response's other bytes.
impl ResponseWriter for WriteHalf<'_> {
    async fn write_parts(&mut self, parts: &[Part], stall: Duration) -> std::io::Result<()> {
        let size: u64 = parts.iter().map(Part::len).sum();
        if parts.len() > 1 && size <= COALESCED_RESPONSE_BYTES_MAX {
            let mut response = Vec::with_capacity(size as usize);
            for part in parts {
                match part {
                    Part::Bytes(bytes) => response.extend_from_slice(bytes),
                    // A page cache copy, as `sendfile`'s would be.
                    Part::File(slice) => {
                        (slice.read_onto(&mut response)).map_err(std::io::Error::other)?
                    }
                }
            }
            return write_bytes(self, &response, stall).await;
        }
        for part in parts {
            match part {
                Part::Bytes(bytes) => write_bytes(self, bytes, stall).await?,
                Part::File(slice) => send_file(self.as_ref(), slice, stall).await?,
            }
        }
        Ok(())
    }
}

/// A TLS connection's write half: file ranges copied through the cipher,
/// by way of one buffer kept for the connection's life (at most
/// [`TLS_FILE_CHUNK_BYTES`]), not one per fetched range.
pub(crate) struct TlsWriter<W> {
    stream: W,
    buffer: Vec<u8>,
}

impl<W> TlsWriter<W> {
    pub fn new(stream: W) -> Self {
        Self {
            stream,
            buffer: Vec::new(),
        }
    }
}

impl<W: AsyncWrite + Unpin + Send> ResponseWriter for TlsWriter<W> {
    async fn write_parts(&mut self, parts: &[Part], stall: Duration) -> std::io::Result<()> {
        for part in parts {
            match part {
                Part::Bytes(bytes) => write_bytes(&mut self.stream, bytes, stall).await?,
                Part::File(slice) => {
                    copy_file(&mut self.stream, &mut self.buffer, slice, stall).await?;
                }
            }
        }
        // rustls buffers what it encrypted; push it out before the next
        // response is awaited.
        tokio::time::timeout(stall, self.stream.flush())
            .await
            .map_err(|_| stalled(stall))?
    }
}

fn stalled(stall: Duration) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("the client read nothing for {stall:?}"),
    )
}

async fn write_bytes<W: AsyncWrite + Unpin>(
    stream: &mut W,
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

/// The file ended before the range did: retention cannot shrink an open
/// file, so this is a bug or outside interference; the frame is now short.
fn file_ended_early() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "segment file ended before the fetched range",
    )
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
            Ok(0) => return Err(file_ended_early()),
            Ok(n) => remaining -= n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn copy_file<W: AsyncWrite + Unpin>(
    stream: &mut W,
    buffer: &mut Vec<u8>,
    slice: &FileSlice,
    stall: Duration,
) -> std::io::Result<()> {
    let mut position = slice.position;
    let end = slice.position.saturating_add(slice.len);
    while position < end {
        let want = usize::try_from((end - position).min(TLS_FILE_CHUNK_BYTES as u64))
            .expect("a chunk fits in memory");
        let file = std::sync::Arc::clone(&slice.file);
        let mut chunk = std::mem::take(buffer);
        chunk.resize(want, 0);
        // A read may miss the page cache: never on the executor's threads.
        let (read, returned) = tokio::task::spawn_blocking(move || {
            let read = file.read_exact_at(&mut chunk, position);
            (read, chunk)
        })
        .await
        .map_err(std::io::Error::other)?;
        *buffer = returned;
        read.map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => file_ended_early(),
            _ => e,
        })?;
        write_bytes(stream, buffer, stall).await?;
        position += want as u64;
    }
    Ok(())
}
