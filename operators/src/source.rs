//! [`FromTopic`]: a stream's source, the records of one input topic
//! decoded with its codecs.

use serde::de::DeserializeOwned;
use strata_record::codec::{Codec, Part};
use strata_runtime::{Context, ProcessError, Processor, RawRecord, Record};

use crate::graph::{SegmentProcessor, Source};
use crate::item::{Data, Item};
use crate::operator::Next;

pub(crate) struct FromTopic<K, V> {
    codecs: (Codec, Codec),
    next: Next<K, V>,
}

impl<K: Data, V: Data> FromTopic<K, V> {
    pub fn new(codecs: (Codec, Codec), next: Next<K, V>) -> Self {
        Self { codecs, next }
    }
}

impl<K, V> Source for FromTopic<K, V>
where
    K: Data + DeserializeOwned,
    V: Data + DeserializeOwned,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.next.init(ctx)
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }

    #[inline]
    fn push(&mut self, record: RawRecord<'_>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let (key_codec, value_codec) = self.codecs;
        let item = Item {
            key: decode_part(key_codec, record.key, Part::Key)?,
            value: decode_part(value_codec, record.value, Part::Value)?,
            timestamp: ctx.timestamp(),
        };
        self.next.push(item, ctx)
    }
}

/// A record's key or value (`part`) decoded with `codec`; a null one
/// decodes from zero bytes, as the runtime decodes a hand-written
/// processor's input. One that does not decode is a `decode` failure for
/// the error policies.
#[inline]
pub(crate) fn decode_part<T: DeserializeOwned + 'static>(
    codec: Codec,
    bytes: Option<&[u8]>,
    part: Part,
) -> Result<T, ProcessError> {
    (codec.decode(bytes.unwrap_or_default()))
        .map_err(|error| ProcessError::undecodable(part, error))
}

/// A segment whose only source is a [`FromTopic`], as a processor of its
/// types: the runtime decodes keys and values straight into `K` and `V`.
pub(crate) struct TypedSegment<K, V> {
    source: Box<FromTopic<K, V>>,
}

impl<K, V> TypedSegment<K, V>
where
    K: Data + DeserializeOwned,
    V: Data + DeserializeOwned,
{
    pub fn new(segment: SegmentProcessor) -> Self {
        let source = segment
            .into_only_source()
            .into_any()
            .downcast::<FromTopic<K, V>>()
            .expect("a typed segment's source reads its types");
        Self { source }
    }
}

impl<K, V> Processor<K, V> for TypedSegment<K, V>
where
    K: Data + DeserializeOwned,
    V: Data + DeserializeOwned,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.source.next.init(ctx)
    }

    #[inline]
    fn process(&mut self, record: Record<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let item = Item {
            key: record.key,
            value: record.value,
            timestamp: record.timestamp,
        };
        self.source.next.push(item, ctx)
    }
}
