//! Request and response framing: a big-endian i32 size, then that many bytes.
//!
//! Reading is split in two so the connection can reserve the frame's bytes
//! from the broker's request memory budget between learning the size and
//! allocating the buffer: [`read_frame_size`] reads and checks the prefix
//! (a negative size or one over the limit is an error and the connection
//! closes), [`read_frame_body`] allocates exactly that many bytes and fills
//! them, giving up on a client that stops sending mid-frame.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::BrokerError;

/// Reads a frame's size prefix and checks it against `limit`; `None` at a
/// clean end of stream (no byte of a new frame).
pub(crate) async fn read_frame_size<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> Result<Option<usize>, BrokerError> {
    let mut size = [0u8; 4];
    match reader.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => {
            return Err(BrokerError::Io {
                context: "reading a request size".into(),
                error,
            });
        }
    }
    let size = i32::from_be_bytes(size);
    match usize::try_from(size) {
        Ok(size) if size <= limit => Ok(Some(size)),
        _ => Err(BrokerError::FrameTooLarge {
            size: i64::from(size),
            limit,
        }),
    }
}

/// Reads a frame's `size` payload bytes (the size already checked). A read
/// that brings nothing for `stall` fails: a client that stops sending in
/// the middle of a frame must not hold the frame's memory forever.
pub(crate) async fn read_frame_body<R: AsyncRead + Unpin>(
    reader: &mut R,
    size: usize,
    stall: Duration,
) -> Result<BytesMut, BrokerError> {
    // Read into spare capacity: zeroing the buffer first would cost as
    // much as a copy of every produced byte.
    let mut frame = BytesMut::with_capacity(size);
    let failed = |error| BrokerError::Io {
        context: format!("reading a request of {size} bytes"),
        error,
    };
    while frame.len() < size {
        let filled = frame.len();
        let mut rest = (&mut frame).limit(size - filled);
        let read = tokio::time::timeout(stall, reader.read_buf(&mut rest))
            .await
            .map_err(|_| {
                failed(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("nothing arrived for {stall:?} after {filled} bytes"),
                ))
            })?
            .map_err(failed)?;
        if read == 0 {
            return Err(failed(std::io::ErrorKind::UnexpectedEof.into()));
        }
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_frame<R: AsyncRead + Unpin>(
        input: &mut R,
        limit: usize,
    ) -> Result<Option<BytesMut>, BrokerError> {
        match read_frame_size(input, limit).await? {
            Some(size) => read_frame_body(input, size, Duration::from_secs(10))
                .await
                .map(Some),
            None => Ok(None),
        }
    }

    #[tokio::test]
    async fn frames_are_read_whole_and_oversized_sizes_are_refused() {
        let mut input: &[u8] = &[0, 0, 0, 3, b'a', b'b', b'c'];
        let frame = read_frame(&mut input, 10).await.unwrap().unwrap();
        assert_eq!(&frame[..], b"abc");
        assert!(read_frame(&mut input, 10).await.unwrap().is_none());

        let mut huge: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame(&mut huge, 100).await,
            Err(BrokerError::FrameTooLarge { .. })
        ));
        let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(read_frame(&mut negative, 100).await.is_err());
        let mut truncated: &[u8] = &[0, 0, 0, 5, 1, 2];
        assert!(read_frame(&mut truncated, 100).await.is_err());
    }

    #[tokio::test]
    async fn a_frame_body_that_stops_arriving_is_given_up() {
        let (mut client, mut server) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut client, b"abc")
            .await
            .unwrap();
        // Five bytes promised, three sent, the sender still connected.
        let read = read_frame_body(&mut server, 5, Duration::from_millis(50)).await;
        let Err(BrokerError::Io { error, .. }) = read else {
            panic!("expected a stall error, got {read:?}");
        };
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        drop(client);
    }

    #[tokio::test]
    async fn a_size_at_the_limit_is_accepted_and_one_past_it_refused() {
        let mut at: &[u8] = &[0, 0, 0, 100];
        assert_eq!(read_frame_size(&mut at, 100).await.unwrap(), Some(100));
        let mut past: &[u8] = &[0, 0, 0, 101];
        assert!(matches!(
            read_frame_size(&mut past, 100).await,
            Err(BrokerError::FrameTooLarge { size: 101, .. })
        ));
    }

    /// Hands out one byte per read, as a slow socket may.
    struct Trickle<'a>(&'a [u8]);

    impl tokio::io::AsyncRead for Trickle<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            if let Some((&byte, rest)) = self.0.split_first() {
                buf.put_slice(&[byte]);
                self.0 = rest;
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_frame_arriving_byte_by_byte_ends_where_its_size_says() {
        let mut input = Trickle(&[0, 0, 0, 2, b'a', b'b', 0, 0, 0, 1, b'c', 0, 0, 0, 3, b'd']);
        let first = read_frame(&mut input, 10).await.unwrap().unwrap();
        assert_eq!(&first[..], b"ab");
        let second = read_frame(&mut input, 10).await.unwrap().unwrap();
        assert_eq!(&second[..], b"c");
        assert!(read_frame(&mut input, 10).await.is_err());
    }
}
