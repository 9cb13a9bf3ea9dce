//! Provenance: a word count whose outputs are declared with
//! `.provenance()` walks any word count back, through `explain`, to the
//! line the word came from, through the word record between; an output
//! declared without it names nothing.

use strata::record::codec::Codec;
use strata::runtime::ops::explain;
use strata::runtime::testing::TestDriver;
use strata::runtime::{App, Context, Location, OnError, ProcessError, Record, Store, Topic};

const LINES: Topic<String, String> = Topic::new("lines").codecs(Codec::Utf8, Codec::Utf8);
const WORDS: Topic<String, String> = Topic::new("words").codecs(Codec::Utf8, Codec::Utf8);
const WORD_COUNTS: Topic<String, String> =
    Topic::new("word-counts").codecs(Codec::Utf8, Codec::Utf8);
const COUNTS: Store<String, u64> = Store::new("counts");

fn split(line: Record<String, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    (line.value.split_whitespace()).try_for_each(|word| ctx.emit(WORDS, word, ""))
}

fn count(word: Record<String, String>, ctx: &mut Context) -> Result<(), ProcessError> {
    let n = ctx.get(COUNTS, &word.key)?.unwrap_or(0) + 1;
    ctx.put(COUNTS, &word.key, &n)?;
    ctx.emit(WORD_COUNTS, &word.key, &n.to_string())
}

fn app(provenance: bool) -> App {
    let app = App::new("wordcount")
        .processor("split", split)
        .input(LINES)
        .output(WORDS);
    let app = if provenance { app.provenance() } else { app };
    let app = app
        .processor("count", count)
        .input(WORDS)
        .store(COUNTS)
        .output(WORD_COUNTS);
    if provenance { app.provenance() } else { app }
}

fn text(bytes: &Option<Vec<u8>>) -> String {
    String::from_utf8(bytes.clone().unwrap_or_default()).unwrap()
}

#[test]
fn explain_walks_a_word_count_back_to_the_line_it_came_from() {
    let mut driver = TestDriver::new(app(true)).unwrap();
    driver.partitions(LINES, 3).unwrap();
    for i in 0..60 {
        let line = format!("w{} w{} line{i}", i % 7, (i + 2) % 5);
        driver.pipe(LINES, &format!("line-{i}"), &line).unwrap();
    }
    let counts = driver.output(WORD_COUNTS).unwrap();
    let location = Location::embedded(driver.data_dir(), "wordcount");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for record in counts.iter().filter(|r| r.offset % 9 == 0) {
        let word = record.key.clone().unwrap();
        let at = ("word-counts", record.partition, record.offset);
        let steps = runtime.block_on(explain(&location, at)).unwrap();
        let topics: Vec<&str> = steps.iter().map(|s| s.topic.as_str()).collect();
        assert_eq!(topics, ["word-counts", "words", "lines"]);
        let [counted, split_off, line] = &steps[..] else {
            unreachable!()
        };
        let counted = counted.record.as_ref().unwrap();
        assert_eq!(text(&counted.value), *record.value.as_ref().unwrap());
        let made = counted.made_by.as_ref().unwrap();
        assert_eq!(
            (
                made.app.as_str(),
                made.version.as_str(),
                made.processor.as_str()
            ),
            ("wordcount", "base", "count")
        );
        let word_record = split_off.record.as_ref().unwrap();
        assert_eq!(text(&word_record.key), word);
        assert_eq!(word_record.made_by.as_ref().unwrap().processor, "split");
        let line = line.record.as_ref().unwrap();
        assert!(line.made_by.is_none(), "a line comes from outside the app");
        let words: Vec<String> = text(&line.value).split(' ').map(str::to_string).collect();
        assert!(words.contains(&word), "{word} comes from {words:?}");
    }
    assert!(
        runtime
            .block_on(explain(&location, ("word-counts", 0, 1_000_000)))
            .unwrap_err()
            .to_string()
            .contains("holds no record at offset 1000000"),
    );
}

#[test]
fn provenance_declared_after_an_error_policy_is_the_outputs_not_the_dead_letters() {
    let app = App::new("wordcount")
        .processor("split", split)
        .input(LINES)
        .output(WORDS)
        .on_error(OnError::dead_letter())
        .provenance();
    let mut driver = TestDriver::new(app).unwrap();
    driver.pipe(LINES, "line-0", "a b").unwrap();
    let words = driver.output(WORDS).unwrap();
    assert_eq!(words.len(), 2);
    for word in &words {
        let processor = word
            .headers
            .iter()
            .find(|(n, _)| n == "strata.from.processor");
        assert_eq!(
            processor.and_then(|(_, v)| v.clone()),
            Some(b"split".to_vec())
        );
    }
}

#[test]
fn an_output_without_provenance_names_nothing() {
    let mut driver = TestDriver::new(app(false)).unwrap();
    driver.pipe(LINES, "line-0", "a b").unwrap();
    let counts = driver.output(WORD_COUNTS).unwrap();
    assert!(counts.iter().all(|r| r.headers.is_empty()));
    let location = Location::embedded(driver.data_dir(), "wordcount");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let steps = runtime
        .block_on(explain(
            &location,
            ("word-counts", counts[0].partition, counts[0].offset),
        ))
        .unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].record.as_ref().unwrap().made_by, None);
}
