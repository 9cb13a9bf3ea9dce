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

use std::process::ExitCode;

use clap::Parser;
use strata::runtime::{Cli, run_parsed};
use strata_operators::{Pipeline, Topic};

/// `run --serve` answers the Kafka protocol: a request claiming an absurd
/// length must not abort the app (see `strata::broker::HugeReservingAllocator`).
#[global_allocator]
static ALLOCATOR: strata::broker::HugeReservingAllocator = strata::broker::HugeReservingAllocator;

#[derive(Debug, Clone, clap::Args)]
struct Topics {
    /// Topic of text lines.
    #[arg(long, global = true, default_value = "lines")]
    input: String,
    /// Topic of (word, count) records.
    #[arg(long, global = true, default_value = "word-counts")]
    output: String,
}

const WORDS: Topic<String, ()> = Topic::new("words");

/// Every whitespace-separated word of `line`, in order, with no value.
fn words_of(line: &str) -> Vec<(String, ())> {
    line.split_whitespace()
        .map(|w| (w.to_string(), ()))
        .collect()
}

fn main() -> ExitCode {
    let cli = Cli::<Topics>::parse();
    let lines = Topic::<Vec<u8>, String>::named(&cli.args.input);
    let word_counts = Topic::<String, String>::named(&cli.args.output);

    let pipeline = Pipeline::new("wordcount");
    pipeline
        .from(lines)
        .named("split")
        .flat_map(|_, line: String| words_of(&line))
        .through(WORDS)
        .named("count")
        .stored_as("counts")
        .count()
        .map_values(|n| n.to_string())
        .to(word_counts);

    match pipeline.app() {
        Ok(app) => run_parsed(&app, &cli.location, &cli.command),
        Err(error) => {
            eprintln!("wordcount: {error}");
            ExitCode::FAILURE
        }
    }
}
