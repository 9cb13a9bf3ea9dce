//! The broker's decoding of untrusted bytes, reachable without a socket or
//! a log: the entry points of the fuzz targets (`fuzz/`) and of their
//! corpus replay (`tests/hostile/fuzz_corpus.rs`). Each function runs the code the
//! broker runs on a connection, not a copy of it. Not a stable API.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;

use super::BrokerError;
use super::frame::{read_frame_body, read_frame_size};

pub use super::api::{DecodedRequest, decode_request};

/// How long a frame body may stall; never reached, since the input is in
/// memory and either has the bytes or ends.
const STALL: Duration = Duration::from_secs(60);

/// Splits `input` into request frames the way a connection reads its socket:
/// size prefix checked against `request_bytes_max`, then that many bytes.
/// Returns the frames read, and the error that ended the stream (`None` at
/// a clean end between frames).
pub fn read_frames(
    mut input: &[u8],
    request_bytes_max: usize,
) -> (Vec<Bytes>, Option<BrokerError>) {
    runtime().block_on(async {
        let mut frames = Vec::new();
        loop {
            let size = match read_frame_size(&mut input, request_bytes_max).await {
                Ok(Some(size)) => size,
                Ok(None) => return (frames, None),
                Err(error) => return (frames, Some(error)),
            };
            match read_frame_body(&mut input, size, STALL).await {
                Ok(frame) => frames.push(frame.freeze()),
                Err(error) => return (frames, Some(error)),
            }
        }
    })
}

/// One runtime for every call: building one per input would dominate a
/// fuzzer's time.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime builds")
    })
}
