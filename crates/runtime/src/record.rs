//! [`Record`]: one input record as a processor receives it, its key and
//! value decoded with the processor's input codecs; [`RawRecord`], the
//! same record's key and value as the log holds them, what a
//! [`RawProcessor`](super::RawProcessor) receives.

/// A record header: a string key and an optional value.
pub type RecordHeader = (String, Option<Vec<u8>>);

/// The value of the last header named `name`, as text (bytes that are not
/// UTF-8 replaced); None when there is none, or it has no value.
pub(crate) fn last_header_text(headers: &[RecordHeader], name: &str) -> Option<String> {
    (headers.iter().rev())
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.as_deref())
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// An input record's key and value as the log holds them (None: null),
/// borrowed from the fetched batch for the length of one call. Its topic,
/// partition, offset, timestamp and headers are the context's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

impl<'a> RawRecord<'a> {
    /// The key and value of a record as its batch holds them.
    #[inline]
    pub(crate) fn of(record: &strata_record::Record<'a>) -> Self {
        Self {
            key: record.key,
            value: record.value,
        }
    }
}

/// One input record with its key and value decoded. Its topic is the
/// context's ([`Context::topic`](super::Context::topic)).
#[derive(Debug, Clone, PartialEq)]
pub struct Record<K, V> {
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    /// Decoded with the input's key codec; a null key decodes from zero
    /// bytes (an empty string or byte vector with the raw and utf8 codecs).
    pub key: K,
    /// Decoded like the key; see [`Record::is_tombstone`] for a null value.
    pub value: V,
    pub headers: Vec<RecordHeader>,
    pub(crate) key_is_null: bool,
    pub(crate) value_is_null: bool,
}

impl<K, V> Record<K, V> {
    /// Whether the record had no key (null, not empty).
    pub fn key_is_null(&self) -> bool {
        self.key_is_null
    }

    /// Whether the record's value was null: a deletion marker by Kafka's
    /// convention.
    pub fn is_tombstone(&self) -> bool {
        self.value_is_null
    }

    /// The first header named `name`.
    pub fn header(&self, name: &str) -> Option<Option<&[u8]>> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_deref())
    }
}
