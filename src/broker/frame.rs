//! Request and response framing: a big-endian i32 size, then that many bytes.
//!
//! The size is checked against the limit before the buffer is allocated; a
//! negative or oversized size is an error and the connection closes.

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::BrokerError;

/// Reads one frame's payload, or `None` at a clean end of stream.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> Result<Option<BytesMut>, BrokerError> {
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
    let too_large = usize::try_from(size).map_or(true, |s| s > limit);
    if too_large {
        return Err(BrokerError::FrameTooLarge {
            size: i64::from(size),
            limit,
        });
    }
    // Read into spare capacity: zeroing the buffer first would cost as
    // much as a copy of every produced byte.
    let size = size as usize;
    let mut frame = BytesMut::with_capacity(size);
    while frame.len() < size {
        let missing = size - frame.len();
        let mut rest = (&mut frame).limit(missing);
        let read = reader
            .read_buf(&mut rest)
            .await
            .map_err(|error| BrokerError::Io {
                context: format!("reading a request of {size} bytes"),
                error,
            })?;
        if read == 0 {
            return Err(BrokerError::Io {
                context: format!("reading a request of {size} bytes"),
                error: std::io::ErrorKind::UnexpectedEof.into(),
            });
        }
    }
    Ok(Some(frame))
}

#[cfg(test)]
mod tests {
    use super::*;

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
