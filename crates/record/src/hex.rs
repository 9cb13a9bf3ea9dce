//! Bytes as lowercase hexadecimal and back: how the runtime, the command
//! line and the query endpoint show bytes that are not text. A leaf every
//! layer may import.

/// `bytes` as lowercase hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from_digit(u32::from(b >> 4), 16).expect("a nibble"));
        out.push(char::from_digit(u32::from(b & 0xf), 16).expect("a nibble"));
    }
    out
}

/// The bytes `text` spells in hex (either case), or None if it is not hex.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_survive_hex_and_what_is_not_hex_is_refused() {
        let bytes = vec![0, 1, 0x7f, 0xab, 0xff, b'a'];
        assert_eq!(hex(&bytes), "00017fabff61");
        assert_eq!(unhex(&hex(&bytes)), Some(bytes));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("é1"), None);
    }
}
