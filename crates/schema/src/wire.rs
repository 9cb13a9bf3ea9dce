//! The Confluent wire format: how a record's key or value names the schema
//! it was written with.
//!
//! ```text
//! byte 0      magic, always 0
//! bytes 1..5  the schema id, u32 big-endian
//! Protobuf only: the message indexes, zigzag varints: their count, then
//!             each index (the path of the message among the file's
//!             nested types); the common path [0] is the single byte 0
//! the rest    the payload: an Avro datum, a Protobuf message, JSON text
//! ```
//!
//! Reading checks every length before it is used: a record that is not in
//! this format is an error naming what was wrong, never a panic.

/// The first byte of every record in the wire format.
pub const MAGIC: u8 = 0;

/// Magic byte and schema id.
pub const HEADER_LEN: usize = 5;

/// The most message indexes a record may name: deeper nesting than this
/// is taken as garbage, not allocated for.
pub const MESSAGE_INDEXES_MAX: usize = 64;

/// Why bytes are not a record in the wire format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("{0} bytes: too short for the schema-registry header (magic byte and schema id)")]
    TooShort(usize),
    #[error(
        "magic byte {0}, not 0: not written through a schema registry (read it with another codec)"
    )]
    NotRegistryFormat(u8),
    #[error("the Protobuf message indexes are cut short")]
    IndexesCut,
    #[error("{0} Protobuf message indexes: more than {MESSAGE_INDEXES_MAX}, not a real schema")]
    TooManyIndexes(u64),
    #[error("a negative Protobuf message index: not the wire format")]
    NegativeIndex,
}

/// The schema id and the rest of a record's bytes.
pub fn split(bytes: &[u8]) -> Result<(u32, &[u8]), WireError> {
    if bytes.len() < HEADER_LEN {
        return Err(WireError::TooShort(bytes.len()));
    }
    if bytes[0] != MAGIC {
        return Err(WireError::NotRegistryFormat(bytes[0]));
    }
    let id = u32::from_be_bytes(bytes[1..HEADER_LEN].try_into().expect("4 bytes"));
    Ok((id, &bytes[HEADER_LEN..]))
}

/// Writes the header of a record written with schema `id` into `out`.
pub fn write_header(id: u32, out: &mut Vec<u8>) {
    out.push(MAGIC);
    out.extend_from_slice(&id.to_be_bytes());
}

/// The message indexes at the start of a Protobuf payload, and the
/// message's bytes after them.
pub fn split_message_indexes(payload: &[u8]) -> Result<(Vec<usize>, &[u8]), WireError> {
    let mut rest = payload;
    let count = read_zigzag(&mut rest)?;
    if count == 0 {
        return Ok((vec![0], rest));
    }
    if count > MESSAGE_INDEXES_MAX as u64 {
        return Err(WireError::TooManyIndexes(count));
    }
    let indexes = (0..count)
        .map(|_| read_zigzag(&mut rest).map(|index| index as usize))
        .collect::<Result<_, _>>()?;
    Ok((indexes, rest))
}

/// Writes a message's indexes as `split_message_indexes` reads them.
pub fn write_message_indexes(indexes: &[usize], out: &mut Vec<u8>) {
    if indexes == [0] {
        out.push(0);
        return;
    }
    write_zigzag(indexes.len() as u64, out);
    for &index in indexes {
        write_zigzag(index as u64, out);
    }
}

/// A non-negative value zigzag-encoded as a varint (Kafka's and
/// Confluent's varint): `2n`, seven bits per byte, low bits first.
fn write_zigzag(value: u64, out: &mut Vec<u8>) {
    let mut rest = value << 1;
    while rest >= 0x80 {
        out.push((rest as u8) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

fn read_zigzag(bytes: &mut &[u8]) -> Result<u64, WireError> {
    let mut raw = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first().ok_or(WireError::IndexesCut)?;
        *bytes = rest;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return match raw & 1 {
                0 => Ok(raw >> 1),
                _ => Err(WireError::NegativeIndex),
            };
        }
    }
    Err(WireError::IndexesCut)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn a_header_and_indexes_read_back_as_written(
            id in any::<u32>(),
            indexes in prop::collection::vec(0usize..100_000, 1..8),
            payload in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut bytes = Vec::new();
            write_header(id, &mut bytes);
            write_message_indexes(&indexes, &mut bytes);
            bytes.extend_from_slice(&payload);
            let (read_id, rest) = split(&bytes).unwrap();
            prop_assert_eq!(read_id, id);
            let (read_indexes, message) = split_message_indexes(rest).unwrap();
            prop_assert_eq!(read_indexes, indexes);
            prop_assert_eq!(message, &payload[..]);
        }

        #[test]
        fn any_bytes_are_read_or_refused_without_a_panic(
            bytes in prop::collection::vec(any::<u8>(), 0..32),
        ) {
            if let Ok((_, rest)) = split(&bytes) {
                let _ = split_message_indexes(rest);
            }
        }
    }

    #[test]
    fn the_first_message_is_the_single_byte_zero() {
        let mut out = Vec::new();
        write_message_indexes(&[0], &mut out);
        assert_eq!(out, [0]);
        // Confluent's own encoding of [1, 2]: count 2, then 1 and 2, zigzagged.
        out.clear();
        write_message_indexes(&[1, 2], &mut out);
        assert_eq!(out, [4, 2, 4]);
    }

    #[test]
    fn short_or_foreign_bytes_are_refused_with_what_they_are() {
        assert_eq!(split(&[0, 0, 1]), Err(WireError::TooShort(3)));
        assert_eq!(split(b"hello"), Err(WireError::NotRegistryFormat(b'h')));
        assert_eq!(split_message_indexes(&[0x80]), Err(WireError::IndexesCut));
    }
}
