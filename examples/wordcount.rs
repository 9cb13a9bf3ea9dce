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

use clap::Parser;
use strata::runtime::{App, Cli, Context, ProcessError, Processor, Record, async_trait};

#[derive(Debug, Clone, clap::Args)]
struct Topics {
    /// Topic of text lines.
    #[arg(long, global = true, default_value = "lines")]
    input: String,
    /// Topic of (word, count) records.
    #[arg(long, global = true, default_value = "word-counts")]
    output: String,
}

#[derive(Clone)]
struct Split;

#[async_trait]
impl Processor for Split {
    type Key = Vec<u8>;
    type Value = String;

    async fn process(
        &mut self,
        line: Record<Vec<u8>, String>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        for word in line.value.split_whitespace() {
            ctx.emit("words", word, "")?;
        }
        Ok(())
    }
}

#[derive(Clone)]
struct Count {
    output: String,
}

#[async_trait]
impl Processor for Count {
    type Key = String;
    type Value = Vec<u8>;

    async fn process(
        &mut self,
        word: Record<String, Vec<u8>>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let mut counts = ctx.store::<String, u64>("counts");
        let count = counts.get(&word.key)?.unwrap_or(0) + 1;
        counts.put(&word.key, &count)?;
        ctx.emit(&self.output, &word.key, &count.to_string())?;
        Ok(())
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::<Topics>::parse();
    let topics = &cli.args;
    let app = App::new("wordcount")
        .processor("split", Split)
        .input(&topics.input)
        .output("words")
        .processor(
            "count",
            Count {
                output: topics.output.clone(),
            },
        )
        .input("words")
        .store::<String, u64>("counts")
        .output(&topics.output);
    strata::runtime::run_parsed(&app, &cli.location, &cli.command)
}
