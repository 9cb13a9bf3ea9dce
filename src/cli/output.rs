//! How commands print: plain aligned tables (comfy-table) for terminals,
//! one-line JSON for scripts.

use comfy_table::{CellAlignment, ContentArrangement, Table, presets::NOTHING};

/// How a column's cells line up under its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// Prints rows as left-aligned columns under `header`.
pub(crate) fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let header: Vec<(&str, Align)> = header.iter().map(|h| (*h, Align::Left)).collect();
    for line in table_lines(&header, rows) {
        println!("{line}");
    }
}

/// `rows` under `header` as plain columns, the header's line first, then
/// one line per row: no borders, two spaces between columns, no trailing
/// spaces, never wrapped to the terminal's width (scripts split these
/// lines on whitespace).
pub(crate) fn table_lines(header: &[(&str, Align)], rows: &[Vec<String>]) -> Vec<String> {
    let mut table = Table::new();
    table
        .load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().map(|(name, _)| *name))
        .add_rows(rows);
    let last = header.len().saturating_sub(1);
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, if i < last { 2 } else { 0 }));
        column.set_cell_alignment(match header.get(i).map(|(_, align)| *align) {
            Some(Align::Right) => CellAlignment::Right,
            _ => CellAlignment::Left,
        });
    }
    table
        .lines()
        .map(|line| line.trim_end().to_string())
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_plain_columns_with_the_header_first_and_no_trailing_spaces() {
        let rows = vec![
            vec!["orders".to_string(), "0".to_string(), "12345".to_string()],
            vec!["clicks-eu".to_string(), "11".to_string(), "7".to_string()],
        ];
        let lines = table_lines(
            &[
                ("TOPIC", Align::Left),
                ("PARTITION", Align::Right),
                ("STATE", Align::Left),
            ],
            &rows,
        );
        assert_eq!(
            lines,
            [
                "TOPIC      PARTITION  STATE",
                "orders             0  12345",
                "clicks-eu         11  7",
            ]
        );
    }

    #[test]
    fn long_rows_are_never_wrapped() {
        let long = "x".repeat(500);
        let lines = table_lines(
            &[("A", Align::Left), ("B", Align::Left)],
            &[vec![long.clone(), long.clone()]],
        );
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            [&long, &long]
        );
    }
}
