//! What the subcommands print: the dumped state, the status table and its
//! warnings, a diff report, the checkpoints taken.

use std::io::Write;

use comfy_table::{CellAlignment, ContentArrangement, Table, presets::NOTHING};

use crate::error::RuntimeError;
use crate::layout::{self, task_dirs};
use crate::location::Location;
use crate::ops::{
    self, DiffReport, Lookup, QueryAnswer, StatusRow, StoreQuery, TaskCheckpoint,
    dump_state::checkpoint_at,
};
use crate::progress::duration;
use crate::topology::App;
use crate::versions::Versions;

/// `query`: the entries as `key<TAB>value` lines (JSON values; strings
/// bare), or the whole answer as JSON; a key not found, or tasks left
/// out, said on stderr. A key not found is an error (exit status 1).
pub(super) fn query(
    query: &StoreQuery,
    answer: &QueryAnswer,
    json: bool,
) -> Result<super::Outcome, RuntimeError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        let text = serde_json::to_string_pretty(answer).map_err(|e| RuntimeError::Query {
            store: answer.store.clone(),
            reason: e.to_string(),
        })?;
        writeln!(out, "{text}").map_err(stdout_error)?;
    } else {
        let bare = |value: &serde_json::Value| match value {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        for entry in &answer.entries {
            writeln!(out, "{}\t{}", bare(&entry.key), bare(&entry.value)).map_err(stdout_error)?;
        }
    }
    out.flush().map_err(stdout_error)?;
    if answer.truncated {
        eprintln!(
            "(more entries matched than --limit {} let through)",
            query.limit
        );
    }
    if answer.stopped {
        eprintln!(
            "(no instance runs on this state directory: the state as it was left; its tasks may run on other instances now)"
        );
    }
    for left in &answer.elsewhere {
        let owner = left.owner.as_deref().unwrap_or("another instance");
        let why = left.error.as_deref().unwrap_or("not asked");
        eprintln!(
            "(task {} is run by {owner}: its entries are missing: {why})",
            left.task
        );
    }
    match &query.lookup {
        Lookup::Key(key) if answer.entries.is_empty() => Err(RuntimeError::Query {
            store: answer.store.clone(),
            reason: format!("no key {key:?}"),
        }),
        _ => Ok(super::Outcome::Done),
    }
}

/// `dump-state`: the lines on stdout; with `at`, which checkpoint each task's
/// lines come from on stderr.
pub(super) fn dump_state(
    app: &App,
    location: &Location,
    only: Option<&str>,
    at: Option<i64>,
) -> Result<(), RuntimeError> {
    let lines = ops::dump_state_at(app, location, only, at)?;
    if let Some(at) = at {
        for spec in app.processors.iter().filter(|p| !p.stores.is_empty()) {
            for (partition, _) in
                task_dirs(&layout::processor_dir(location.state_dir(), &spec.name))?
            {
                let (offset, _) = checkpoint_at(location.state_dir(), &spec.name, partition, at)?;
                eprintln!(
                    "{}/{partition}: the checkpoint at offset {offset}",
                    spec.name
                );
            }
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in lines {
        writeln!(out, "{line}").map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)
}

/// `status`: a table of the rows, then the catch-up warnings.
pub(super) async fn status(app: &App, location: &Location) -> Result<(), RuntimeError> {
    let rows = ops::status(app, location).await?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in status_table(&rows).lines() {
        writeln!(out, "{}", line.trim_end()).map_err(stdout_error)?;
    }
    if rows.is_empty() {
        writeln!(
            out,
            "(no task has run yet under {})",
            location.state_dir().display()
        )
        .map_err(stdout_error)?;
    }
    for warning in rows.iter().filter_map(StatusRow::warning) {
        writeln!(out, "WARNING: {warning}").map_err(stdout_error)?;
    }
    // Best effort: the dead letters are read from the log, which may be
    // away; the table above stands without them.
    let sends = (app.processors.iter()).any(|p| p.on_error.sends_letters());
    let letters = match sends {
        true => ops::dead_letters(app, location, None).await,
        false => Ok(Vec::new()),
    };
    let letters = letters.unwrap_or_else(|error| {
        eprintln!("(the dead letters could not be read: {error})");
        Vec::new()
    });
    for letters in letters {
        if !letters.letters.is_empty() {
            writeln!(
                out,
                "{}: {} records failed and are in {}, {} not replayed yet (`dlq list`, `dlq show`, `dlq replay`)",
                letters.processor,
                letters.letters.len(),
                letters.topic,
                letters.waiting()
            )
            .map_err(stdout_error)?;
        }
    }
    out.flush().map_err(stdout_error)
}

/// `status --keys`: each task's hottest keys, as the instance running
/// under the state directory last published them.
pub(super) fn hot_keys(location: &Location) -> Result<(), RuntimeError> {
    let state_dir = location.state_dir();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let Some(tasks) = crate::board::read_published_hot_keys(state_dir) else {
        writeln!(
            out,
            "(no instance runs under {}: a running instance counts the keys its tasks read; `strata topics skew TOPIC` counts them from the log)",
            state_dir.display()
        )
        .map_err(stdout_error)?;
        return out.flush().map_err(stdout_error);
    };
    const COLUMNS: [(&str, CellAlignment); 5] = [
        ("TASK", CellAlignment::Left),
        ("KEY", CellAlignment::Left),
        ("RECORDS", CellAlignment::Right),
        ("ERROR", CellAlignment::Right),
        ("SINCE", CellAlignment::Left),
    ];
    let mut table = Table::new();
    for (task, lines) in &tasks {
        for line in lines {
            table.add_row([
                task.clone(),
                line.key.clone(),
                line.records.to_string(),
                format!("±{}", line.error),
                strata_record::time::format_rfc3339(line.since_ms),
            ]);
        }
    }
    plain(&mut table, &COLUMNS);
    for line in table.lines() {
        writeln!(out, "{}", line.trim_end()).map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)
}

/// The status rows under their header as plain columns (comfy-table): no
/// borders, two spaces apart, counts right-aligned, never wrapped to the
/// terminal's width: scripts and tests split each line on whitespace.
fn status_table(rows: &[StatusRow]) -> Table {
    const COLUMNS: [(&str, CellAlignment); 12] = [
        ("TASK", CellAlignment::Left),
        ("INPUT", CellAlignment::Left),
        ("OFFSET", CellAlignment::Right),
        ("END", CellAlignment::Right),
        ("LAG", CellAlignment::Right),
        ("OUTBOX", CellAlignment::Right),
        ("RATE/S", CellAlignment::Right),
        ("ETA", CellAlignment::Right),
        ("EXPIRES", CellAlignment::Right),
        ("OWNER", CellAlignment::Left),
        ("STANDBYS", CellAlignment::Left),
        ("STATE", CellAlignment::Left),
    ];
    let show = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    let mut table = Table::new();
    for row in rows {
        table.add_row([
            row.task.clone(),
            format!("{}/{}", row.topic, row.partition),
            show(row.offset),
            show(row.end),
            show(row.lag()),
            row.outbox_records.to_string(),
            row.rate.map_or("-".to_string(), |r| format!("{r:.0}")),
            match (row.lag(), row.eta_secs()) {
                (Some(0), _) => "0s".to_string(),
                (_, Some(eta)) => duration(eta),
                _ => "-".to_string(),
            },
            match row.expires_in_ms {
                Some(ms) if ms <= 0 => "due".to_string(),
                Some(ms) => duration(ms as f64 / 1000.0),
                None => "-".to_string(),
            },
            row.owner.clone().unwrap_or_else(|| "-".to_string()),
            match row.standbys.is_empty() {
                true => "-".to_string(),
                false => row.standbys.join(","),
            },
            match (&row.here, &row.owner) {
                // This instance's own word for it.
                (Some(view), _) => view.to_string(),
                // Another instance runs it (restoring, perhaps: its state
                // directory's status says).
                (None, Some(_)) => "assigned".to_string(),
                (None, None) => "-".to_string(),
            },
        ]);
    }
    plain(&mut table, &COLUMNS);
    table
}

/// `table` (its rows added) as plain columns under `columns`' names: no
/// borders, two spaces apart, each column aligned as named, never wrapped
/// to the terminal's width.
pub(super) fn plain(table: &mut Table, columns: &[(&str, CellAlignment)]) {
    table
        .load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(columns.iter().map(|(name, _)| *name));
    let last = columns.len().saturating_sub(1);
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, if i < last { 2 } else { 0 }));
        column.set_cell_alignment(columns.get(i).map_or(CellAlignment::Left, |c| c.1));
    }
}

/// `checkpoint`: one line per checkpoint taken.
pub(super) fn checkpoints(taken: &[TaskCheckpoint]) {
    for TaskCheckpoint { task, offset } in taken {
        println!("{task}: checkpoint at offset {offset}");
    }
}

/// `diff`: per store and derived partition, what differs.
pub(super) fn diff(report: &DiffReport) -> Result<(), RuntimeError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    write!(out, "{report}").map_err(stdout_error)?;
    out.flush().map_err(stdout_error)
}

pub(super) fn stdout_error(error: std::io::Error) -> RuntimeError {
    RuntimeError::Io {
        context: "writing to stdout".into(),
        error,
    }
}

/// `run` and `replay`: what they did, on stderr.
pub(super) fn processed(app: &str, summary: &ops::RunSummary) {
    let restored = match summary.restored {
        0 => String::new(),
        records => format!(
            " (restores put back {records} changelog records in {:.1} s of task time)",
            summary.restoring.as_secs_f64()
        ),
    };
    eprintln!(
        "{app}: {} records processed in {:.1} s{restored}",
        summary.records,
        summary.elapsed.as_secs_f64()
    );
}

/// `promote`: what is live now, and how to roll back.
pub(super) fn promoted(app: &str, promoted: &ops::Promoted) {
    match promoted {
        ops::Promoted::AlreadyLive(live) => {
            eprintln!("{app}: {} is already live", live.name);
        }
        ops::Promoted::Live {
            live,
            previous,
            derived_topics,
        } => {
            println!(
                "{} is live: `run` uses its state ({}) and derived topics ({})",
                live.name,
                live.state_dir.display(),
                derived_topics.join(", ")
            );
            println!(
                "the previous live version, {}, is kept: `promote {}` rolls back",
                previous.name, previous.name
            );
        }
    }
}

/// `versions`: one name a line, the live one marked.
pub(super) fn versions(versions: &Versions) {
    for name in versions.names() {
        let marker = match name == versions.live_name() {
            true => "  (live)",
            false => "",
        };
        println!("{name}{marker}");
    }
}

/// `explain`: each record on the way back, with what made it.
pub(super) fn explained(steps: &[ops::ExplainStep]) -> Result<(), RuntimeError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let text = |bytes: &Option<Vec<u8>>| match bytes {
        Some(bytes) => printable(bytes),
        None => "(null)".to_string(),
    };
    for step in steps {
        let at = format!(
            "{}/{}@{}",
            printable(step.topic.as_bytes()),
            step.partition,
            step.offset
        );
        let Some(record) = &step.record else {
            writeln!(
                out,
                "{at}  (no longer in the log: retention or compaction deleted it)"
            )
            .map_err(stdout_error)?;
            continue;
        };
        writeln!(
            out,
            "{at}  {}  key: {}  value: {}",
            strata_record::time::format_rfc3339(record.timestamp),
            text(&record.key),
            text(&record.value),
        )
        .map_err(stdout_error)?;
        let said = match &record.made_by {
            Some(made) => {
                let by = format!(
                    "made by {} ({}, version {})",
                    printable(made.processor.as_bytes()),
                    printable(made.app.as_bytes()),
                    printable(made.version.as_bytes())
                );
                match &made.input {
                    Some((topic, partition, offset)) => {
                        let topic = printable(topic.as_bytes());
                        format!("{by} from {topic}/{partition}@{offset}")
                    }
                    None => format!("{by} from a timer, init or close: no single input record"),
                }
            }
            None => "no provenance: a record from outside the app, or an output declared without .provenance()".to_string(),
        };
        writeln!(out, "  ← {said}").map_err(stdout_error)?;
    }
    let cut = (steps.last()).and_then(|s| s.record.as_ref()?.made_by.as_ref()?.input.as_ref());
    if steps.len() == ops::EXPLAIN_STEPS_MAX && cut.is_some() {
        writeln!(out, "(stopped after {} records)", steps.len()).map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)
}

/// Bytes as a terminal may show them: text, with bytes that are not
/// UTF-8 replaced and control characters escaped (a letter's key, value
/// and error come from outside).
pub(super) fn printable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .flat_map(|c| match c.is_control() {
            true => c.escape_default().collect::<Vec<_>>(),
            false => vec![c],
        })
        .collect()
}

/// `rebuild`: what was rebuilt and how it took over, on stderr.
pub(super) fn rebuilt(app: &str, summary: &ops::RebuildSummary) {
    let by = match summary.handed_over > 0 {
        true => "the running app swapped it in",
        false => "swapped in",
    };
    eprintln!(
        "{app}: rebuilt {} task(s) from {} records in {:.1} s; {by}",
        summary.tasks,
        summary.records,
        summary.elapsed.as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(task: &str, offset: Option<i64>, owner: Option<&str>) -> StatusRow {
        StatusRow {
            task: task.to_string(),
            owner: owner.map(str::to_string),
            standbys: Vec::new(),
            here: None,
            topic: "words".to_string(),
            partition: 3,
            offset,
            end: Some(1_000_000),
            outbox_records: 0,
            rate: Some(2500.4),
            expires_in_ms: None,
            start: Some(0),
        }
    }

    #[test]
    fn status_lines_split_on_whitespace_into_the_header_and_one_row_each() {
        let rows = [
            row("wordcount/counter-3", Some(999_990), Some("instance-1")),
            row("w/c-3", None, None),
        ];
        let table = status_table(&rows);
        let lines: Vec<String> = (table.lines()).map(|l| l.trim_end().to_string()).collect();
        let columns = |line: &str| {
            line.split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert_eq!(
            columns(&lines[0]),
            [
                "TASK", "INPUT", "OFFSET", "END", "LAG", "OUTBOX", "RATE/S", "ETA", "EXPIRES",
                "OWNER", "STANDBYS", "STATE"
            ]
        );
        assert_eq!(
            columns(&lines[1]),
            [
                "wordcount/counter-3",
                "words/3",
                "999990",
                "1000000",
                "10",
                "0",
                "2500",
                "0s",
                "-",
                "instance-1",
                "-",
                "assigned"
            ]
        );
        assert_eq!(
            columns(&lines[2])[..5],
            ["w/c-3", "words/3", "-", "1000000", "1000000"]
        );
        for line in &lines {
            assert!(line.starts_with(|c: char| !c.is_whitespace()), "{line:?}");
            assert!(line.is_ascii(), "no box characters: {line:?}");
        }
        assert!(lines[2].ends_with(" -"), "{:?}", lines[2]);
    }

    #[test]
    fn counts_are_right_aligned_under_their_headers() {
        let table = status_table(&[row("a/0", Some(999_990), None)]);
        let lines: Vec<String> = table.lines().collect();
        let end_of = |line: &str, word: &str| line.find(word).map(|at| at + word.len());
        assert_eq!(end_of(&lines[0], "OFFSET"), end_of(&lines[1], "999990"));
    }
}
