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

use std::process::ExitCode;

use clap::Parser;
use strata::runtime::{App, Cli, Context, Output, ProcessError, Record, Store, run_parsed};

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

const WORDS: Output<String, ()> = Output::new("words");
const COUNTS: Store<String, u64> = Store::new("counts");

fn split(line: Record<Vec<u8>, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    for word in line.value.split_whitespace() {
        ctx.emit(WORDS, word, &())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::<Topics>::parse();
    // The output topic is a flag: its handle is made at run time.
    let word_counts = Output::<String, String>::named(&cli.args.output);
    let count = move |word: Record<String, ()>, ctx: &mut Context| {
        let n = ctx.get(COUNTS, &word.key)?.unwrap_or(0) + 1;
        ctx.put(COUNTS, &word.key, &n)?;
        ctx.emit(word_counts, &word.key, &n.to_string())
    };
    let app = App::new("wordcount")
        .processor("split", split)
        .input(&cli.args.input)
        .output(WORDS)
        .processor("count", count)
        .input("words")
        .store(COUNTS)
        .output(word_counts);
    run_parsed(&app, &cli.location, &cli.command)
}
