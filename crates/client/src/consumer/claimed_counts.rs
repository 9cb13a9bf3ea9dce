//! A check of the consumer protocol's array counts before the protocol crate
//! decodes a subscription or an assignment.
//!
//! The crate reserves room for as many elements as a count claims before it
//! reads them, so a few bytes from another member of the group could ask for
//! gigabytes, and a failed allocation aborts the process. Every count must
//! fit in the bytes left: each element takes at least its smallest encoding
//! (an i32, a string's i16 length, a topic's name and partition count).
//!
//! ```text
//! subscription v0-3: topics [string], user_data bytes,
//!                    v1+ owned_partitions [string, [i32]], v2+ generation i32,
//!                    v3+ rack_id string
//! assignment v0-3:   assigned_partitions [string, [i32]], user_data bytes
//! ```
//!
//! Only counts are checked; the decoder finds every other fault.

use crate::ClientError;

const I16_BYTES: usize = 2;
const I32_BYTES: usize = 4;
/// The smallest topic-and-partitions element: an empty name, no partitions.
const TOPIC_PARTITIONS_MIN_BYTES: usize = I16_BYTES + I32_BYTES;

/// Checks the counts of a subscription (without its version) at `version`.
pub(super) fn check_subscription(body: &[u8], version: i16) -> Result<(), ClientError> {
    let mut reader = Reader(body);
    for _ in 0..reader.count(I16_BYTES)? {
        reader.string()?;
    }
    reader.bytes()?;
    if version >= 1 {
        reader.topic_partitions()?;
    }
    Ok(())
}

/// Checks the counts of an assignment (without its version).
pub(super) fn check_assignment(body: &[u8]) -> Result<(), ClientError> {
    Reader(body).topic_partitions()
}

/// What is left of a message. A field cut short ends the check: the decoder
/// then refuses the message with its own error.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (taken, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(taken)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take(I16_BYTES)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(I32_BYTES)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An array's count, checked against the bytes left for elements of at
    /// least `element_bytes`; 0 for a null or cut-short array.
    fn count(&mut self, element_bytes: usize) -> Result<usize, ClientError> {
        let Some(count) = self.i32().and_then(|c| usize::try_from(c).ok()) else {
            return Ok(0);
        };
        if count > self.0.len() / element_bytes {
            return Err(ClientError::Protocol(format!(
                "an array of {count} elements in {} bytes",
                self.0.len()
            )));
        }
        Ok(count)
    }

    fn string(&mut self) -> Result<(), ClientError> {
        let length = self.i16().and_then(|l| usize::try_from(l).ok());
        self.skip(length)
    }

    fn bytes(&mut self) -> Result<(), ClientError> {
        let length = self.i32().and_then(|l| usize::try_from(l).ok());
        self.skip(length)
    }

    fn skip(&mut self, length: Option<usize>) -> Result<(), ClientError> {
        if let Some(length) = length {
            self.0 = self.0.get(length..).unwrap_or_default();
        }
        Ok(())
    }

    fn topic_partitions(&mut self) -> Result<(), ClientError> {
        for _ in 0..self.count(TOPIC_PARTITIONS_MIN_BYTES)? {
            self.string()?;
            let partitions = self.count(I32_BYTES)?;
            self.take(partitions * I32_BYTES);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_past_the_bytes_left_is_refused_before_decoding() {
        // One topic "t" claiming a billion partitions.
        let mut assignment = vec![0, 0, 0, 1, 0, 1, b't'];
        assignment.extend_from_slice(&1_000_000_000i32.to_be_bytes());
        assert!(check_assignment(&assignment).is_err());
        let subscription = i32::MAX.to_be_bytes();
        assert!(check_subscription(&subscription, 0).is_err());
    }

    #[test]
    fn counts_that_fit_pass() {
        let mut assignment = vec![0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2];
        assignment.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        check_assignment(&assignment).unwrap();
        let subscription = [0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff];
        check_subscription(&subscription, 0).unwrap();
    }

    /// Inputs the fuzzers found (fuzz/corpus/consumer_assignment/d67c6cbc…,
    /// consumer_subscription/8b6cd757…): tens of gigabytes claimed in 29 and
    /// 34 bytes, which aborted the process in the decoder.
    #[test]
    fn the_fuzzers_huge_claims_are_refused_without_aborting() {
        let assignment = [
            0x00, 0xff, 0x1d, 0x00, 0xf6, 0xff, 0x73, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
            0x02, 0x00, 0x08, 0x00, 0x40, 0x00, 0x00, 0x00, 0x06, 0x6b, 0x6c, 0x69, 0x00, 0x00,
            0x63,
        ];
        assert!(crate::decode_assignment(&assignment).is_err());
        let subscription = [
            0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x06, 0x63, 0x6c, 0x69, 0x63, 0x6b, 0x73,
            0xff, 0xff, 0xff, 0xff, 0x40, 0x00, 0x00, 0x01, 0x00, 0x06, 0x63, 0x6c, 0x69, 0x63,
            0x6b, 0x73, 0x00, 0x00, 0x00, 0x00,
        ];
        assert!(crate::decode_subscription(&subscription).is_err());
    }
}
