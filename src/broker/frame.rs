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
}
