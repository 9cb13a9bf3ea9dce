//! [`OutputRecord`]: a record of a topic as the driver reads it back,
//! decoded with the topic handle's codecs; and a store's entries across
//! its tasks.

use crate::error::RuntimeError;
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
    K: serde::de::DeserializeOwned + 'static,
    V: serde::de::DeserializeOwned + 'static,
{
    let what = |part: &str| {
        let (name, partition, offset) = (topic.name(), raw.partition, raw.offset);
        format!("topic {name:?} partition {partition} offset {offset}: the record's {part}")
    };
    let key = match &raw.key {
        Some(bytes) => {
            Some(
                (topic.key_codec().decode(bytes)).map_err(|error| TestError::Codec {
                    what: what("key"),
                    error,
                })?,
            )
        }
        None => None,
    };
    let value = match &raw.value {
        Some(bytes) => {
            Some(
                (topic.value_codec().decode(bytes)).map_err(|error| TestError::Codec {
                    what: what("value"),
                    error,
                })?,
            )
        }
        None => None,
    };
    Ok(OutputRecord {
        partition: raw.partition,
        offset: raw.offset,
        timestamp: raw.timestamp,
        key,
        value,
        headers: raw.headers,
    })
}

/// A store entry as the state holds it: (key, value), encoded.
type Entry = (Vec<u8>, Vec<u8>);

/// Every committed (key, value) of store `store`, across the tasks of the
/// processors declaring it, as the state holds them.
pub(super) fn store_entries(
    app: &App,
    location: &Location,
    store: &str,
) -> Result<Vec<Entry>, RuntimeError> {
    let mut all = Vec::new();
    for spec in &app.processors {
        if spec.stores.iter().any(|s| s.name == store) {
            let entries = entries_of(location.state_dir(), &spec.name, store)?;
            all.extend(entries.into_iter().map(|((_, key), value)| (key, value)));
        }
    }
    Ok(all)
}
