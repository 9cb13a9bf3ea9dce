//! Word count, a two-processor pipeline through the log:
//!
//! - `split` reads `lines` (each value a UTF-8 line) and emits, for every
//!   whitespace-separated word in order, a record to `words` keyed by the
//!   word (partitioned by key, Java-compatible murmur2), with an empty value;
//! - `count` reads `words`, keeps `counts`: word → u64, and emits to
//!   `word-counts` the word's new count as a decimal string, so that topic
//!   holds, per word, exactly 1, 2, …, N in order.
//!
//! ```text
//! cargo run --example wordcount -- --data-dir ./strata-data run --until-end
//! cargo run --example wordcount -- --data-dir ./strata-data dump-state
//! ```

use strata::runtime::{App, Context, ProcessError, Record, Store, Topic};

const LINES: Topic<Vec<u8>, String> = Topic::new("lines");
const WORDS: Topic<String, ()> = Topic::new("words");
const WORD_COUNTS: Topic<String, String> = Topic::new("word-counts");
const COUNTS: Store<String, u64> = Store::new("counts");

fn split(line: Record<Vec<u8>, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    (line.value.split_whitespace()).try_for_each(|word| ctx.emit(WORDS, word, &()))
}

fn count(word: Record<String, ()>, ctx: &mut Context) -> Result<(), ProcessError> {
    let n = ctx.get(COUNTS, &word.key)?.unwrap_or(0) + 1;
    ctx.put(COUNTS, &word.key, &n)?;
    ctx.emit(WORD_COUNTS, &word.key, &n.to_string())
}

strata::main! {
    App::new("wordcount")
        .processor("split", split).input(LINES).output(WORDS)
        .processor("count", count).input(WORDS).store(COUNTS).output(WORD_COUNTS)
}
