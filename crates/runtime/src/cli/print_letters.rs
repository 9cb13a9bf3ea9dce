//! What `dlq list`, `dlq show` and `dlq replay` print.

use std::io::Write;

use comfy_table::{CellAlignment, Table};

use crate::error::RuntimeError;
use crate::letter::{FAILED, PROCESSED};
use crate::ops;

use super::print::{plain, printable, stdout_error};

/// `dlq list`: per processor, its dead-letter topic, the letters by kind,
/// how many no replay has taken, and the newest error.
pub(super) fn dead_letter_counts(all: &[ops::DeadLetters]) -> Result<(), RuntimeError> {
    const COLUMNS: [(&str, CellAlignment); 7] = [
        ("PROCESSOR", CellAlignment::Left),
        ("TOPIC", CellAlignment::Left),
        ("LETTERS", CellAlignment::Right),
        ("DECODE", CellAlignment::Right),
        ("PROCESS", CellAlignment::Right),
        ("WAITING", CellAlignment::Right),
        ("NEWEST ERROR", CellAlignment::Left),
    ];
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if all.is_empty() {
        writeln!(
            out,
            "(no processor sends failing records to a dead-letter topic)"
        )
        .map_err(stdout_error)?;
        return out.flush().map_err(stdout_error);
    }
    let mut table = Table::new();
    for letters in all {
        let kinds = letters.by_kind();
        let newest = letters.letters.last();
        table.add_row([
            letters.processor.clone(),
            letters.topic.clone(),
            letters.letters.len().to_string(),
            kinds.get("decode").copied().unwrap_or(0).to_string(),
            kinds.get("process").copied().unwrap_or(0).to_string(),
            letters.waiting().to_string(),
            newest.map_or("-".to_string(), |l| printable(l.error.as_bytes())),
        ]);
    }
    plain(&mut table, &COLUMNS);
    for line in table.lines() {
        writeln!(out, "{}", line.trim_end()).map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)
}

/// `dlq show`: the newest `limit` letters of each processor, each with
/// where its record was, why it failed, and its key and value (as text,
/// bytes that are not UTF-8 replaced).
pub(super) fn dead_letters(all: &[ops::DeadLetters], limit: usize) -> Result<(), RuntimeError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let text = |bytes: &Option<Vec<u8>>| match bytes {
        Some(bytes) => printable(bytes),
        None => "(null)".to_string(),
    };
    for letters in all {
        let shown = letters.letters.len().saturating_sub(limit);
        writeln!(
            out,
            "{} ({}): {} letters{}",
            letters.processor,
            letters.topic,
            letters.letters.len(),
            if shown > 0 {
                format!(", the newest {limit}")
            } else {
                String::new()
            }
        )
        .map_err(stdout_error)?;
        for letter in &letters.letters[shown..] {
            let (topic, partition, offset) = &letter.origin;
            let replayed = match &letter.replayed {
                None => String::new(),
                Some(mark) => format!(
                    "\n    replayed {}: {}{}",
                    strata_record::time::format_rfc3339(mark.at),
                    mark.outcome,
                    (mark.error.as_deref()).map_or(String::new(), |e| format!(
                        " again ({})",
                        printable(e.as_bytes())
                    ))
                ),
            };
            writeln!(
                out,
                "  {}/{}@{}  failed {}  {}: {}\n    from {topic}/{partition}@{offset} ({})\n    key: {}\n    value: {}{replayed}",
                letters.topic,
                letter.partition,
                letter.offset,
                strata_record::time::format_rfc3339(letter.failed_at),
                letter.kind,
                printable(letter.error.as_bytes()),
                strata_record::time::format_rfc3339(letter.timestamp),
                text(&letter.key),
                text(&letter.value),
            )
            .map_err(stdout_error)?;
        }
    }
    out.flush().map_err(stdout_error)
}

/// `dlq replay`: what the replay did.
pub(super) fn letters_replayed(summary: &ops::LetterReplaySummary) {
    let count = |outcome: &str| summary.outcomes.get(outcome).copied().unwrap_or(0);
    let (processed, failed) = (count(PROCESSED), count(FAILED));
    println!(
        "replayed {} dead letters of {} ({}) in {} tasks, {:.1?}: {processed} processed, {failed} failed again; {} not replayed (`dlq show`)",
        processed + failed,
        summary.processor,
        summary.topic,
        summary.tasks,
        summary.elapsed,
        summary.waiting,
    );
}
