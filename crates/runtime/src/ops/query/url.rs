//! Percent-encoding of a request target's parts, as requests to other
//! instances are written (the endpoint decodes them through axum's
//! extractors). A dozen lines: the one function needed, with a test that
//! the endpoint's decoding gives back what was encoded.

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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::Query;
    use axum::http::Uri;
    use std::collections::BTreeMap;

    #[test]
    fn what_is_encoded_the_endpoint_reads_back_as_it_was() {
        for text in ["a b", "a&b=c/ü", "100%", "plain-text_1.2~", "", "a+b"] {
            let uri: Uri = format!("/s?v={}", percent_encode(text)).parse().unwrap();
            let Query(params) = Query::<BTreeMap<String, String>>::try_from_uri(&uri).unwrap();
            assert_eq!(params["v"], text);
        }
    }
}
