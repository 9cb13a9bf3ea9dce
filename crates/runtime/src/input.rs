//! A processor's input as [`App::input`] takes it: a topic's name, or its
//! typed handle. A typed input is checked when the app is built, before
//! any record is read:
//!
//! - its key and value types must be the processor's record types (a
//!   `Topic<String, ()>` feeds a processor of `Record<String, ()>`);
//! - its codecs decode the processor's records, and every typed input of
//!   one processor must have the same codecs (one decoder per processor);
//! - a processor of the app that writes the topic must write it with the
//!   same types and codecs.
//!
//! A name alone is taken on trust, decoded as the processor decodes all
//! its inputs: with its typed inputs' codecs, or else its `input_codecs`
//! (raw by default).
//!
//! [`App::input`]: super::App::input

use std::any::TypeId;

use strata_record::codec::Codec;

use super::handles::Topic;
use super::spec::OutputSpec;

/// The key and value types of records, as a handle or a processor has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordTypes {
    key: TypeId,
    value: TypeId,
    key_name: &'static str,
    value_name: &'static str,
}

impl RecordTypes {
    pub fn of<K: 'static, V: 'static>() -> Self {
        Self {
            key: TypeId::of::<K>(),
            value: TypeId::of::<V>(),
            key_name: std::any::type_name::<K>(),
            value_name: std::any::type_name::<V>(),
        }
    }

    /// Whether an output's declaration has these types.
    fn written_by(&self, output: &OutputSpec) -> bool {
        self.key == output.key_type && self.value == output.value_type
    }
}

impl std::fmt::Display for RecordTypes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {})", self.key_name, self.value_name)
    }
}

/// An input of a processor: a topic's name, or its typed handle. Made from
/// `&str`, `String` or `&String` (the name), or a [`Topic`].
#[derive(Debug, Clone)]
pub struct InputTopic {
    pub(crate) name: String,
    pub(crate) typed: Option<TypedInput>,
}

/// What a typed handle says of its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypedInput {
    pub types: RecordTypes,
    pub key_codec: Codec,
    pub value_codec: Codec,
}

impl From<&str> for InputTopic {
    fn from(name: &str) -> Self {
        Self {
            name: name.to_string(),
            typed: None,
        }
    }
}

impl From<&String> for InputTopic {
    fn from(name: &String) -> Self {
        Self::from(name.as_str())
    }
}

impl From<String> for InputTopic {
    fn from(name: String) -> Self {
        Self { name, typed: None }
    }
}

impl<K: 'static, V: 'static> From<Topic<K, V>> for InputTopic {
    fn from(topic: Topic<K, V>) -> Self {
        Self {
            name: topic.name().to_string(),
            typed: Some(TypedInput {
                types: RecordTypes::of::<K, V>(),
                key_codec: topic.key_codec(),
                value_codec: topic.value_codec(),
            }),
        }
    }
}

/// Why processor `processor`, of records `records`, cannot read `input`
/// typed as `typed`, given the codecs its earlier typed inputs set
/// (`codecs`); `None` when it can.
pub(crate) fn refusal(
    processor: &str,
    records: RecordTypes,
    codecs: Option<(Codec, Codec)>,
    input: &str,
    typed: &TypedInput,
) -> Option<String> {
    if typed.types != records {
        return Some(format!(
            "processor {processor:?} takes records of {records}, but its input topic {input:?} holds {}: give the processor the topic's types, or read another topic",
            typed.types
        ));
    }
    match codecs {
        Some(codecs) if codecs != (typed.key_codec, typed.value_codec) => Some(format!(
            "processor {processor:?} reads {input:?} with codecs {:?}, other than its other inputs' {codecs:?}: a processor decodes all its inputs alike",
            (typed.key_codec, typed.value_codec)
        )),
        _ => None,
    }
}

/// Why processor `processor`, decoding its inputs with `codecs`, cannot
/// have the typed inputs `typed` (whose handles give other codecs: set by
/// `input_codecs` after them); `None` when it can.
pub(crate) fn overridden(
    processor: &str,
    typed: &[(String, TypedInput)],
    codecs: (Codec, Codec),
) -> Option<String> {
    let (topic, input) = typed.first()?;
    let theirs = (input.key_codec, input.value_codec);
    (theirs != codecs).then(|| {
        format!(
            "processor {processor:?} sets input codecs {codecs:?}, but its input {topic:?} is a Topic with codecs {theirs:?}: drop .input_codecs(..), or give the Topic those codecs"
        )
    })
}

/// Why `reader`'s typed input `input` does not match `writer`'s output of
/// the same topic; `None` when they agree.
pub(crate) fn disagreement(
    reader: &str,
    input: &str,
    typed: &TypedInput,
    writer: &str,
    output: &OutputSpec,
) -> Option<String> {
    let codecs = (output.key_codec, output.value_codec);
    let agree = typed.types.written_by(output) && codecs == (typed.key_codec, typed.value_codec);
    (!agree).then(|| {
        format!(
            "processor {writer:?} writes {input:?} with codecs {codecs:?}, but processor {reader:?} reads it as {} with codecs {:?}: declare the topic once, as one Topic handle, and use it on both sides",
            typed.types,
            (typed.key_codec, typed.value_codec)
        )
    })
}

#[cfg(test)]
mod tests {
    use strata_record::codec::Codec;

    use crate::{App, Context, ProcessError, Record, Topic};

    const WORDS: Topic<String, ()> = Topic::new("words");

    fn take_words(_: Record<String, ()>, _: &mut Context) -> Result<(), ProcessError> {
        Ok(())
    }

    fn take_counts(_: Record<String, u64>, _: &mut Context) -> Result<(), ProcessError> {
        Ok(())
    }

    fn emit_words(_: Record<Vec<u8>, String>, _: &mut Context) -> Result<(), ProcessError> {
        Ok(())
    }

    fn error_of(app: &App) -> String {
        app.check().expect_err("the app is refused")
    }

    #[test]
    fn a_typed_input_gives_the_processor_its_codecs_and_a_name_keeps_the_default() {
        let json = Topic::<String, ()>::new("words-json").codecs(Codec::Json, Codec::Json);
        let app = App::new("a")
            .processor("count", take_words)
            .input(json)
            .processor("plain", take_words)
            .input("words");
        app.check().expect("both inputs are fine");
        let codecs: Vec<_> = (app.processors.iter())
            .map(|p| (p.key_codec, p.value_codec))
            .collect();
        assert_eq!(
            codecs,
            [(Codec::Json, Codec::Json), (Codec::Raw, Codec::Raw)]
        );
    }

    #[test]
    fn a_typed_input_of_other_types_than_the_processors_records_is_refused_naming_both() {
        let app = App::new("a").processor("count", take_counts).input(WORDS);
        let error = error_of(&app);
        assert!(
            error.contains("\"count\"") && error.contains("\"words\""),
            "{error}"
        );
        assert!(error.contains("u64") && error.contains("()"), "{error}");
    }

    #[test]
    fn typed_inputs_of_one_processor_decoded_differently_are_refused() {
        let other = Topic::<String, ()>::new("more-words").codecs(Codec::Json, Codec::Raw);
        let app = (App::new("a").processor("count", take_words))
            .input(WORDS)
            .input(other);
        assert!(error_of(&app).contains("decodes all its inputs alike"));
    }

    #[test]
    fn a_topic_read_with_other_codecs_or_types_than_its_writer_writes_is_refused() {
        let written = Topic::<String, ()>::new("words").codecs(Codec::Json, Codec::Raw);
        let app = App::new("a")
            .processor("split", emit_words)
            .input("lines")
            .output(written)
            .processor("count", take_words)
            .input(WORDS);
        let error = error_of(&app);
        assert!(
            error.contains("\"split\"") && error.contains("\"count\""),
            "{error}"
        );
        let as_counts = Topic::<String, u64>::new("words");
        let app = App::new("a")
            .processor("split", emit_words)
            .input("lines")
            .output(as_counts)
            .processor("count", take_words)
            .input(WORDS);
        assert!(error_of(&app).contains("declare the topic once"));
    }

    #[test]
    fn input_codecs_other_than_a_typed_inputs_are_refused_whichever_comes_first() {
        let json = Topic::<String, ()>::new("words").codecs(Codec::Json, Codec::Json);
        let after = (App::new("a").processor("count", take_words))
            .input(json)
            .input_codecs(Codec::Raw, Codec::Raw);
        assert!(error_of(&after).contains("drop .input_codecs"));
        let before = (App::new("a").processor("count", take_words))
            .input_codecs(Codec::Raw, Codec::Raw)
            .input(json);
        assert_eq!(
            before.check(),
            Ok(()),
            "a typed input after sets the codecs"
        );
    }

    #[test]
    fn one_handle_written_by_one_processor_and_read_by_the_next_is_accepted() {
        let app = App::new("a")
            .processor("split", emit_words)
            .input("lines")
            .output(WORDS)
            .processor("count", take_words)
            .input(WORDS);
        assert_eq!(app.check(), Ok(()));
    }
}
