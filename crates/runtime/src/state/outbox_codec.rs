//! [`OutboxBatch`] and its encoding as an `outbox` value.
//!
//! | bytes | field |
//! |---|---|
//! | 2 | topic name length n (u16, big-endian) |
//! | n | topic name (UTF-8) |
//! | 4 | partition (i32, big-endian) |
//! | rest | one v2 record batch, baseOffset 0 |
//!
//! Decoding checks every length against the bytes there and the batch's
//! CRC before anything is kept: an outbox value is trusted no more than a
//! log segment (the decoder is fuzzed: `fuzz/fuzz_targets/outbox_codec.rs`).

use strata_record::RecordBatch;

use super::error::StateError;

/// A record batch to append to a derived partition, fixed at commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxBatch {
    pub topic: String,
    pub partition: i32,
    /// One v2 record batch with the task's producer id, epoch and sequences.
    pub batch: Vec<u8>,
}

impl OutboxBatch {
    /// The value stored in the outbox.
    #[doc(hidden)]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.topic.len() + 4 + self.batch.len());
        let len = u16::try_from(self.topic.len()).expect("topic names are at most 249 bytes");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(self.topic.as_bytes());
        out.extend_from_slice(&self.partition.to_be_bytes());
        out.extend_from_slice(&self.batch);
        out
    }

    /// An outbox value back (`seq`: its outbox sequence, for the error);
    /// every length checked, the batch's CRC verified.
    #[doc(hidden)]
    pub fn decode(seq: u64, raw: &[u8]) -> Result<Self, StateError> {
        let corrupt = |what: &str| StateError::Corrupt(format!("outbox entry {seq}: {what}"));
        let len = raw
            .get(..2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            .ok_or_else(|| corrupt("shorter than its header"))?;
        let topic = raw
            .get(2..2 + len)
            .ok_or_else(|| corrupt("topic name cut short"))?;
        let topic = std::str::from_utf8(topic).map_err(|_| corrupt("topic name not UTF-8"))?;
        let partition = raw
            .get(2 + len..6 + len)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| corrupt("partition cut short"))?;
        let batch = &raw[6 + len..];
        RecordBatch::parse_and_verify(batch).map_err(|e| corrupt(&e.to_string()))?;
        Ok(Self {
            topic: topic.to_string(),
            partition,
            batch: batch.to_vec(),
        })
    }

    /// Records in the batch.
    pub fn record_count(&self) -> usize {
        RecordBatch::parse(&self.batch).map_or(0, |b| b.header().record_count.max(0) as usize)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use strata_record::{BatchBuilder, Compression, NewRecord};

    fn batch(values: &[Vec<u8>]) -> Vec<u8> {
        let mut builder = BatchBuilder::new(Compression::None).producer(7, 0, 0);
        for value in values {
            builder.push(NewRecord::new(None, value, 100)).unwrap();
        }
        builder.into_batch().unwrap()
    }

    #[test]
    fn a_value_cut_anywhere_is_refused_as_corrupt() {
        let entry = OutboxBatch {
            topic: "words".into(),
            partition: 3,
            batch: batch(&[b"a".to_vec(), b"bc".to_vec()]),
        };
        let raw = entry.encode();
        assert_eq!(OutboxBatch::decode(0, &raw).unwrap(), entry);
        for cut in 0..raw.len() {
            let error = OutboxBatch::decode(9, &raw[..cut]).unwrap_err();
            assert!(matches!(error, StateError::Corrupt(_)), "{cut}: {error}");
        }
    }

    proptest! {
        /// What the fuzz target `outbox_codec` checks, on arbitrary bytes.
        #[test]
        fn any_bytes_decode_to_an_error_or_to_what_encodes_back(raw in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(entry) = OutboxBatch::decode(0, &raw) {
                prop_assert_eq!(entry.encode(), raw);
            }
        }

        #[test]
        fn entries_round_trip(topic in "[a-z.-]{1,40}", partition in any::<i32>(), values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..32), 1..8)) {
            let entry = OutboxBatch { topic, partition, batch: batch(&values) };
            prop_assert_eq!(OutboxBatch::decode(1, &entry.encode()).unwrap(), entry);
        }
    }
}
