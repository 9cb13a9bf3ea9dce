//! Percent-encoding of a request target's parts, as the query endpoint
//! reads them and as requests to other instances are written.

/// Every byte but unreserved ones escaped as `%XX`.
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// `%XX` escapes decoded, and `+` as a space where `plus_is_space` (in a
/// query string, not a path); a malformed escape is kept as it is.
pub(crate) fn percent_decode(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push((hi * 16 + lo) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_encoded_decodes_to_itself() {
        for text in ["a b", "a&b=c/ü", "100%", "plain-text_1.2~", ""] {
            assert_eq!(percent_decode(&percent_encode(text), true), text);
        }
        assert_eq!(percent_decode("%zz", true), "%zz");
        assert_eq!(percent_decode("a+b", false), "a+b");
    }
}
