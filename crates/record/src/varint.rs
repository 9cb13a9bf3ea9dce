//! Zig-zag variable-length integers as used inside v2 records
//! (protobuf encoding: 7 bits per byte, least significant group first).

/// Longest encoding of a 32-bit varint.
const VARINT_BYTES_MAX: usize = 5;
/// Longest encoding of a 64-bit varlong.
const VARLONG_BYTES_MAX: usize = 10;

/// Reads a zig-zag varint from the front of `buf`, returning it and the bytes
/// consumed, or `None` if `buf` ends first or the encoding is overlong.
#[inline]
pub fn read_varint(buf: &[u8]) -> Option<(i32, usize)> {
    let (raw, used) = read_unsigned(buf, VARINT_BYTES_MAX)?;
    let raw = u32::try_from(raw).ok()?;
    Some((((raw >> 1) as i32) ^ -((raw & 1) as i32), used))
}

/// Reads a zig-zag varlong from the front of `buf`.
#[inline]
pub fn read_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    let (raw, used) = read_unsigned(buf, VARLONG_BYTES_MAX)?;
    Some((((raw >> 1) as i64) ^ -((raw & 1) as i64), used))
}

/// A record's varints are mostly one or two bytes (lengths under 64 and
/// 8,192, deltas inside a batch): those are read inline, the longer ones
/// by the loop. Measured under callgrind on the operators bench's join,
/// reading a 100-byte record whole took about 365 instructions with the
/// loop for every varint, 340 with this.
#[inline]
fn read_unsigned(buf: &[u8], bytes_max: usize) -> Option<(u64, usize)> {
    match *buf {
        [first, ..] if first < 0x80 => Some((u64::from(first), 1)),
        [first, second, ..] if second < 0x80 => {
            Some((u64::from(first & 0x7f) | u64::from(second) << 7, 2))
        }
        _ => read_unsigned_long(buf, bytes_max),
    }
}

#[inline(never)]
fn read_unsigned_long(buf: &[u8], bytes_max: usize) -> Option<(u64, usize)> {
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

/// Appends `value` as a zig-zag varlong (batches gather theirs with
/// [`Gathered`]; the tests check one against the other).
#[cfg(test)]
fn write_varlong(out: &mut Vec<u8>, value: i64) {
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

/// Varints gathered on the stack and then copied into a buffer with one
/// call, where writing them one byte at a time (a capacity check per
/// byte) costs more than the copy.
pub struct Gathered {
    bytes: [u8; GATHERED_BYTES_MAX],
    len: usize,
}

/// Most bytes [`Gathered`] holds: a record's fields up to its value (its
/// length, attributes, timestamp and offset deltas, and the key's and the
/// value's lengths when there is no key).
pub const GATHERED_BYTES_MAX: usize =
    3 * VARINT_BYTES_MAX + 1 + VARLONG_BYTES_MAX + VARINT_BYTES_MAX;

impl Default for Gathered {
    fn default() -> Self {
        Self {
            bytes: [0; GATHERED_BYTES_MAX],
            len: 0,
        }
    }
}

impl Gathered {
    /// Adds a zig-zag varint. Panics past `GATHERED_BYTES_MAX` bytes
    /// gathered: callers drain before that.
    #[inline]
    pub fn varint(&mut self, value: i32) {
        self.unsigned(u64::from(((value << 1) ^ (value >> 31)) as u32));
    }

    /// Adds a zig-zag varlong (panics as [`Gathered::varint`]).
    #[inline]
    pub fn varlong(&mut self, value: i64) {
        self.unsigned(((value << 1) ^ (value >> 63)) as u64);
    }

    /// Adds one byte (panics as [`Gathered::varint`]).
    #[inline]
    pub fn byte(&mut self, byte: u8) {
        self.bytes[self.len] = byte;
        self.len += 1;
    }

    #[inline]
    fn unsigned(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte((value as u8) | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }

    /// Appends what was gathered to `out` and starts again.
    pub fn drain_into(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bytes[..self.len]);
        self.len = 0;
    }
}

/// Bytes `write_unsigned(value)` takes.
fn unsigned_len(value: u64) -> usize {
    // One byte per 7 significant bits (at least one), looked up by the
    // leading zeros rather than counted in a loop: a batch builder sizes
    // five of these per record.
    const BY_LEADING_ZEROS: [u8; 65] = {
        let mut table = [0u8; 65];
        let mut zeros = 0;
        while zeros <= 64 {
            let bits = 64 - zeros;
            table[zeros] = if bits == 0 { 1 } else { bits.div_ceil(7) as u8 };
            zeros += 1;
        }
        table
    };
    BY_LEADING_ZEROS[value.leading_zeros() as usize] as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_varints_are_written_as_one_at_a_time() {
        let ints = [0, 1, -1, 63, -64, 64, 300, i32::MAX, i32::MIN];
        let longs = [0, -1, 1 << 40, i64::MAX, i64::MIN];
        let mut one_at_a_time = Vec::new();
        let mut gathered = Gathered::default();
        let mut drained = Vec::new();
        for (value, long) in ints.iter().zip(longs.iter().cycle()) {
            write_varint(&mut one_at_a_time, *value);
            write_varlong(&mut one_at_a_time, *long);
            one_at_a_time.push(7);
            gathered.varint(*value);
            gathered.varlong(*long);
            gathered.byte(7);
            gathered.drain_into(&mut drained);
        }
        assert_eq!(drained, one_at_a_time);
    }

    #[test]
    fn lengths_are_the_bytes_written() {
        let mut values: Vec<u64> = vec![0, 1, u64::MAX];
        for shift in 0..64 {
            values.extend([(1 << shift) - 1, 1 << shift, (1 << shift) + 1]);
        }
        for value in values {
            let mut buf = Vec::new();
            write_unsigned(&mut buf, value);
            assert_eq!(unsigned_len(value), buf.len(), "{value}");
        }
    }

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

    proptest::proptest! {
        /// The inline reads of one- and two-byte varints read what the
        /// loop reads, from any bytes.
        #[test]
        fn short_varints_read_inline_as_the_loop_reads_them(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..12),
        ) {
            for bytes_max in [VARINT_BYTES_MAX, VARLONG_BYTES_MAX] {
                proptest::prop_assert_eq!(
                    read_unsigned(&bytes, bytes_max),
                    read_unsigned_long(&bytes, bytes_max)
                );
            }
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
