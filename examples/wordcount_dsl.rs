//! Word count written with the pipeline of `strata-operators`: the same
//! contract as `examples/wordcount.rs`, kept exactly:
//!
//! - `split` reads `lines` (each value a UTF-8 line) and writes, for every
//!   whitespace-separated word in order, a record to `words` keyed by the
//!   word (partitioned by key, murmur2), with an empty value;
//! - `count` reads `words`, keeps `counts`: word → u64, and writes to
//!   `word-counts` the word's new count as a decimal string, so that topic
//!   holds, per word, exactly 1, 2, …, N in order.
//!
//! Same topics, keys, values, processors, store and subcommands: the crash
//! tests run both.
//!
//! ```text
//! cargo run --example wordcount_dsl -- --data-dir ./strata-data run --until-end
//! cargo run --example wordcount_dsl -- --data-dir ./strata-data dump-state
//! ```

use strata_operators::{Pipeline, Topic};

const LINES: Topic<Vec<u8>, String> = Topic::new("lines");
const WORDS: Topic<String, ()> = Topic::new("words");
const WORD_COUNTS: Topic<String, String> = Topic::new("word-counts");

strata::main! {
    let pipeline = Pipeline::new("wordcount");
    (pipeline.from(LINES).named("split"))
        .flat_map(|_, line: String| line.split_whitespace().map(|w| (w.to_string(), ())).collect::<Vec<_>>())
        .through(WORDS).named("count").stored_as("counts")
        .count().map_values(|n| n.to_string()).to(WORD_COUNTS);
    pipeline.app()
}
