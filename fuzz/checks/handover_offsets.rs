//! Any bytes through the decoder of the rebuild handover files (`.hold`,
//! `.caught-up`: a task's input offsets as a JSON object).
//!
//! Beyond "no panic": what decodes encodes back to offsets that decode the
//! same.

use strata::runtime::decode_handover_offsets;

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(offsets) = decode_handover_offsets(text) {
        let again = serde_json_text(&offsets);
        assert_eq!(decode_handover_offsets(&again), Some(offsets));
    }
}

/// The offsets written as the handover files write them.
fn serde_json_text(offsets: &std::collections::BTreeMap<String, i64>) -> String {
    let fields: Vec<String> = offsets
        .iter()
        .map(|(topic, offset)| format!("{}:{offset}", json_string(topic)))
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// A JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
