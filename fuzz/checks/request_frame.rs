//! Any bytes as what a client sends on a connection: split into frames as
//! the connection reads its socket (size prefix checked against the
//! broker's default `request_bytes_max`), then each frame decoded as the
//! broker decodes it, API key and version checked before the header and
//! body.
//!
//! Beyond "no panic": frames never exceed the limit nor the bytes sent, and
//! a decoded request is always of a served API, in a served version, with
//! the header saying so.

use bytes::Bytes;
use strata::broker::BrokerConfig;
use strata::broker::api::{SUPPORTED_APIS, served_versions};
use strata::broker::fuzzing::{DecodedRequest, decode_request, read_frames};

/// Bytes of a frame's size prefix.
const SIZE_PREFIX_BYTES: usize = 4;

pub fn check(data: &[u8]) {
    let limit = BrokerConfig::default().request_bytes_max;
    let (frames, _ended_by) = read_frames(data, limit);
    let consumed: usize = frames.iter().map(|f| SIZE_PREFIX_BYTES + f.len()).sum();
    assert!(consumed <= data.len(), "frames past the input");
    for frame in frames {
        assert!(frame.len() <= limit);
        check_decoded(frame);
    }
}

fn check_decoded(frame: Bytes) {
    let correlation_id = frame
        .get(4..8)
        .map(|raw| i32::from_be_bytes(raw.try_into().expect("four bytes")));
    match decode_request(frame) {
        Err(_) => {}
        Ok(DecodedRequest::ApiVersionsTooNew { correlation_id: id }) => {
            assert_eq!(Some(id), correlation_id);
        }
        Ok(DecodedRequest::Request { key, header, .. }) => {
            assert!(SUPPORTED_APIS.contains(&key));
            assert_eq!(header.request_api_key, key as i16);
            let range = served_versions(key);
            assert!((range.min..=range.max).contains(&header.request_api_version));
            assert_eq!(Some(header.correlation_id), correlation_id);
        }
    }
}
