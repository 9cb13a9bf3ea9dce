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

fn app() -> App {
    App::new("wordcount")
        .processor("split", split)
        .input(LINES)
        .output(WORDS)
        .processor("count", count)
        .input(WORDS)
        .store(COUNTS)
        .output(WORD_COUNTS)
}

strata::main!(app());

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use strata::testing::TestDriver;

    /// 10,000 lines over four partitions, the words drawn from 50.
    fn lines(driver: &mut TestDriver) -> BTreeMap<String, u64> {
        let mut expected = BTreeMap::new();
        for i in 0..10_000u64 {
            let words: Vec<String> = (0..3)
                .map(|j| format!("w{}", (i * 7 + j * 13) % 50))
                .collect();
            words
                .iter()
                .for_each(|w| *expected.entry(w.clone()).or_insert(0) += 1);
            driver
                .pipe(LINES, &i.to_be_bytes().to_vec(), &words.join(" "))
                .unwrap();
        }
        expected
    }

    #[test]
    fn every_word_is_counted_once_per_occurrence_and_its_counts_come_in_order() {
        let mut driver = TestDriver::new(app()).unwrap();
        driver.partitions(LINES, 4).unwrap();
        let expected = lines(&mut driver);
        assert_eq!(driver.store(COUNTS).unwrap(), expected);
        let mut seen: BTreeMap<String, u64> = BTreeMap::new();
        for record in driver.output(WORD_COUNTS).unwrap() {
            let (word, count) = (record.key.unwrap(), record.value.unwrap());
            let last = seen.entry(word.clone()).or_insert(0);
            *last += 1;
            assert_eq!(
                count,
                last.to_string(),
                "{word}'s counts in order, none twice"
            );
        }
        driver.assert_replay_matches();
    }

    #[test]
    fn a_crash_mid_run_loses_nothing_and_counts_nothing_twice() {
        let mut driver = TestDriver::new(app()).unwrap();
        driver.partitions(LINES, 4).unwrap();
        for i in 0..10_000u32 {
            driver
                .pipe(LINES, &i.to_be_bytes().to_vec(), "to be or not to be")
                .unwrap();
        }
        assert!(
            driver.crash_after(12_345).unwrap(),
            "the crash cuts the run"
        );
        driver.restart().unwrap();
        assert_eq!(driver.store(COUNTS).unwrap()["be"], 20_000);
        assert_eq!(driver.output_table(WORD_COUNTS).unwrap()["be"], "20000");
        driver.assert_replay_matches();
    }
}
