//! [`restamp_producer`]: a finished batch given another producer identity
//! (the runtime's outbox batches, stamped anew for each transaction).

use super::batch::seal_crc;
use super::header::{
    ATTRIBUTES_AT, BASE_SEQUENCE_AT, BatchHeader, PRODUCER_EPOCH_AT, PRODUCER_ID_AT,
    TRANSACTIONAL_BIT,
};
use super::{RecordError, Result};

/// Gives the whole batch at the front of `bytes` another producer
/// identity: producer id, epoch, base sequence and the transactional bit,
/// then its CRC again (all four lie inside what the CRC covers). The
/// runtime stamps its outbox batches anew for each transaction: a
/// transactional producer's epoch changes with every start, and its
/// sequences count from 0 within an epoch.
///
/// `bytes` must be exactly one batch (checked).
pub fn restamp_producer(
    bytes: &mut [u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
) -> Result<()> {
    let header = BatchHeader::parse(bytes)?;
    if header.size_bytes() != bytes.len() {
        return Err(RecordError::Invalid(format!(
            "restamping {} bytes holding a batch of {}",
            bytes.len(),
            header.size_bytes()
        )));
    }
    let mut attributes = header.attributes & !TRANSACTIONAL_BIT;
    if transactional {
        attributes |= TRANSACTIONAL_BIT;
    }
    bytes[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    bytes[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&producer_id.to_be_bytes());
    bytes[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&producer_epoch.to_be_bytes());
    bytes[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&base_sequence.to_be_bytes());
    seal_crc(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restamped_batch_carries_the_new_identity_and_a_valid_crc() {
        use crate::{BatchBuilder, Compression, NewRecord, RecordBatch};
        let mut builder = BatchBuilder::new(Compression::None).producer(7, 1, 40);
        builder.push(NewRecord::new(Some(b"k"), b"v", 5)).unwrap();
        builder.push(NewRecord::new(None, b"w", 6)).unwrap();
        let mut bytes = builder.build().unwrap();
        restamp_producer(&mut bytes, 9, 3, 0, true).unwrap();
        let batch = RecordBatch::parse_and_verify(&bytes).unwrap();
        let header = batch.header();
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (9, 3, 0)
        );
        assert!(header.is_transactional());
        assert_eq!(batch.records(1 << 20).unwrap().iter().count(), 2);
        restamp_producer(&mut bytes, 9, 4, 2, false).unwrap();
        let batch = RecordBatch::parse_and_verify(&bytes).unwrap();
        assert!(!batch.header().is_transactional());
        assert_eq!(batch.header().base_sequence, 2);
    }

    #[test]
    fn restamping_refuses_bytes_that_are_not_exactly_one_batch() {
        use crate::{BatchBuilder, Compression, NewRecord};
        let mut builder = BatchBuilder::new(Compression::None);
        builder.push(NewRecord::new(None, b"v", 5)).unwrap();
        let mut bytes = builder.build().unwrap();
        bytes.push(0);
        assert!(matches!(
            restamp_producer(&mut bytes, 1, 0, 0, true),
            Err(RecordError::Invalid(_))
        ));
        assert!(matches!(
            restamp_producer(&mut bytes[..30], 1, 0, 0, true),
            Err(RecordError::Truncated { .. })
        ));
    }
}
