//! How commands print: aligned tables for terminals, one-line JSON for
//! scripts.

/// Prints rows as aligned columns under `header`.
pub(crate) fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len().saturating_sub(1);
        let text: Vec<String> = cells
            .into_iter()
            .enumerate()
            .map(|(i, cell)| {
                if i == last {
                    cell
                } else {
                    format!("{cell:<width$}", width = widths[i])
                }
            })
            .collect();
        println!("{}", text.join("  "));
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
}

/// Prints a JSON value on one line.
pub(crate) fn print_json(value: &serde_json::Value) {
    println!("{value}");
}

/// Bytes as JSON: a string when they are UTF-8, else `{"hex": "…"}`.
pub(crate) fn bytes_json(bytes: Option<&[u8]>) -> serde_json::Value {
    match bytes {
        None => serde_json::Value::Null,
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => serde_json::Value::String(text.to_string()),
            Err(_) => serde_json::json!({ "hex": crate::hex::hex(bytes) }),
        },
    }
}
