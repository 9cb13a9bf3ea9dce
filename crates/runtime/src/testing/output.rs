//! [`OutputRecord`]: a record of a topic as the driver reads it back,
//! decoded with the topic handle's codecs; and a store's entries across
//! its tasks.

use serde::de::DeserializeOwned;
use strata_record::codec::Codec;

use crate::handles::Topic;
use crate::location::Location;
use crate::ops::diff::store_entries as entries_of;
use crate::record::RecordHeader;
use crate::topology::App;

use super::error::TestError;
use crate::topic_read::ReadRecord;

/// A record of a topic, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputRecord<K, V> {
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    /// None for a record without a key.
    pub key: Option<K>,
    /// None for a tombstone.
    pub value: Option<V>,
    pub headers: Vec<RecordHeader>,
}

pub(super) fn decode<K, V>(
    topic: &Topic<K, V>,
    raw: ReadRecord,
) -> Result<OutputRecord<K, V>, TestError>
where
    K: DeserializeOwned + 'static,
    V: DeserializeOwned + 'static,
{
    let what = |part: &str| {
        let (name, partition, offset) = (topic.name(), raw.partition, raw.offset);
        format!("topic {name:?} partition {partition} offset {offset}: the record's {part}")
    };
    let key = (raw.key.as_deref())
        .map(|bytes| decoded(topic.key_codec(), bytes, || what("key")))
        .transpose()?;
    let value = (raw.value.as_deref())
        .map(|bytes| decoded(topic.value_codec(), bytes, || what("value")))
        .transpose()?;
    Ok(OutputRecord {
        partition: raw.partition,
        offset: raw.offset,
        timestamp: raw.timestamp,
        key,
        value,
        headers: raw.headers,
    })
}

/// `bytes` decoded with `codec`; an error says what they were.
pub(super) fn decoded<T: DeserializeOwned + 'static>(
    codec: Codec,
    bytes: &[u8],
    what: impl FnOnce() -> String,
) -> Result<T, TestError> {
    (codec.decode(bytes)).map_err(|error| TestError::Codec {
        what: what(),
        error,
    })
}

/// A store entry as the state holds it: (key, value), encoded.
type Entry = (Vec<u8>, Vec<u8>);

/// Every committed (key, value) of store `store`, across the tasks of the
/// processors declaring it, as the state holds them; a key two tasks hold
/// is an error (the store is not partitioned by its key).
pub(super) fn store_entries(
    app: &App,
    location: &Location,
    store: &str,
) -> Result<Vec<Entry>, TestError> {
    let mut all = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for spec in &app.processors {
        if spec.stores.iter().any(|s| s.name == store) {
            for ((_, key), value) in entries_of(location.state_dir(), &spec.name, store)? {
                if !seen.insert(key.clone()) {
                    return Err(TestError::KeyInTwoTasks {
                        store: store.to_string(),
                    });
                }
                all.push((key, value));
            }
        }
    }
    Ok(all)
}
