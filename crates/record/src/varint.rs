//! Zig-zag variable-length integers as used inside v2 records
//! (protobuf encoding: 7 bits per byte, least significant group first).

/// Longest encoding of a 32-bit varint.
const VARINT_BYTES_MAX: usize = 5;
/// Longest encoding of a 64-bit varlong.
const VARLONG_BYTES_MAX: usize = 10;

/// Reads a zig-zag varint from the front of `buf`, returning it and the bytes
/// consumed, or `None` if `buf` ends first or the encoding is overlong.
pub fn read_varint(buf: &[u8]) -> Option<(i32, usize)> {
    let (raw, used) = read_unsigned(buf, VARINT_BYTES_MAX)?;
    let raw = u32::try_from(raw).ok()?;
    Some((((raw >> 1) as i32) ^ -((raw & 1) as i32), used))
}

/// Reads a zig-zag varlong from the front of `buf`.
pub fn read_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    let (raw, used) = read_unsigned(buf, VARLONG_BYTES_MAX)?;
    Some((((raw >> 1) as i64) ^ -((raw & 1) as i64), used))
}

fn read_unsigned(buf: &[u8], bytes_max: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in buf.iter().take(bytes_max).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Appends `value` as a zig-zag varint.
pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Appends `value` as a zig-zag varlong.
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Bytes `write_varlong(value)` takes.
pub fn varlong_len(value: i64) -> usize {
    unsigned_len(((value << 1) ^ (value >> 63)) as u64)
}

/// Bytes `write_varint(value)` takes.
pub fn varint_len(value: i32) -> usize {
    unsigned_len(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

/// Bytes `write_unsigned(value)` takes.
fn unsigned_len(mut value: u64) -> usize {
    let mut len = 1;
    while value >= 0x80 {
        value >>= 7;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_edges() {
        for value in [0, 1, -1, 63, -64, 64, 300, i32::MAX, i32::MIN] {
            let mut buf = Vec::new();
            write_varint(&mut buf, value);
            assert_eq!(buf.len(), varint_len(value));
            assert_eq!(read_varint(&buf), Some((value, buf.len())));
        }
        for value in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut buf = Vec::new();
            write_varlong(&mut buf, value);
            assert_eq!(buf.len(), varlong_len(value));
            assert_eq!(read_varlong(&buf), Some((value, buf.len())));
        }
    }

    #[test]
    fn truncated_or_overlong_varints_are_rejected() {
        assert_eq!(read_varint(&[]), None);
        assert_eq!(read_varint(&[0x80]), None);
        assert_eq!(read_varint(&[0xff; 6]), None);
        assert_eq!(read_varlong(&[0xff; 11]), None);
    }
}
