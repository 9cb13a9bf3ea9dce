//! How a store's keys are read from text (a query's key, prefix or
//! bounds, typed on a command line or in a URL) and how its keys and values
//! are written as JSON (a query's answer). Made from the store's handle,
//! where its types are known, and kept type-erased with its spec.
//!
//! Text to key: with the raw and UTF-8 codecs a string or byte key is the
//! text's bytes, so the text is taken as it is; with postcard and JSON the
//! text is read as JSON of the key's type (`42`, `["a",1]`), or, if it is
//! not JSON, as a JSON string (`alice` for `"alice"`), then encoded with
//! the store's codec.
//!
//! Bytes to JSON: decoded with the codec and written with serde_json; bytes
//! that do not decode (a store written by another build) are written as
//! `{"hex": "…"}` rather than failing the whole answer.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use strata_record::codec::Codec;

use super::index_key::split_entry_key;
use super::window_key::split_window_key;

/// Text to an encoded key, or why the text is not one.
pub(crate) type Parse = Arc<dyn Fn(&str) -> Result<Vec<u8>, String> + Send + Sync>;
/// Encoded bytes to JSON.
pub(crate) type ToJson = Arc<dyn Fn(&[u8]) -> Value + Send + Sync>;

/// A store's keys and values between text and bytes.
#[derive(Clone)]
pub(crate) struct StoreText {
    pub parse_key: Parse,
    pub key_json: ToJson,
    pub value_json: ToJson,
    /// Whether a text prefix of a key is a byte prefix of its encoding
    /// (the raw and UTF-8 codecs).
    pub prefix_is_bytes: bool,
    /// A window store's inner keys ([`super::window_key`] layout).
    pub window: Option<WindowText>,
    /// An index store ([`super::index_key`] layout): queried by field.
    pub index: bool,
}

/// A window store's inner keys from text.
#[derive(Clone)]
pub(crate) struct WindowText {
    pub parse_key: Parse,
}

impl StoreText {
    pub fn of<K, V>(key_codec: Codec, value_codec: Codec) -> Self
    where
        K: Serialize + DeserializeOwned + 'static,
        V: Serialize + DeserializeOwned + 'static,
    {
        Self {
            parse_key: parser::<K>(key_codec),
            key_json: to_json::<K>(key_codec),
            value_json: to_json::<V>(value_codec),
            prefix_is_bytes: matches!(key_codec, Codec::Raw | Codec::Utf8),
            window: None,
            index: false,
        }
    }

    /// The same store read as an index store whose row keys are `K`
    /// encoded with `codec`: each entry's key shown as its field (text, or
    /// `{"hex": …}`) and its row key.
    pub fn indexed<K>(mut self, codec: Codec) -> Self
    where
        K: Serialize + DeserializeOwned + 'static,
    {
        let row = to_json::<K>(codec);
        self.key_json = Arc::new(move |bytes: &[u8]| match split_entry_key(bytes) {
            Ok((field, key)) => {
                let field = match String::from_utf8(field) {
                    Ok(text) => Value::String(text),
                    Err(bytes) => hex(bytes.as_bytes()),
                };
                serde_json::json!({ "field": field, "key": row(key) })
            }
            Err(_) => hex(bytes),
        });
        self.index = true;
        self
    }

    /// The same store read as a window store whose inner keys are `K`
    /// encoded with `codec`.
    pub fn windowed<K>(mut self, codec: Codec) -> Self
    where
        K: Serialize + DeserializeOwned + 'static,
    {
        let inner = to_json::<K>(codec);
        let key_json: ToJson = Arc::new(move |bytes: &[u8]| match split_window_key(bytes) {
            Ok((key, start)) => serde_json::json!({ "key": inner(key), "start": start }),
            Err(_) => hex(bytes),
        });
        self.key_json = key_json;
        // A text prefix would match the length field, not the key.
        self.prefix_is_bytes = false;
        self.window = Some(WindowText {
            parse_key: parser::<K>(codec),
        });
        self
    }
}

fn parser<K>(codec: Codec) -> Parse
where
    K: Serialize + DeserializeOwned + 'static,
{
    Arc::new(move |text: &str| {
        let key: K = match codec {
            Codec::Raw | Codec::Utf8 => codec.decode(text.as_bytes()).map_err(|e| {
                format!(
                    "{text:?} is not a key of type {}: {e}",
                    std::any::type_name::<K>()
                )
            })?,
            Codec::Postcard | Codec::Json | Codec::Registry(_) => serde_json::from_str(text)
                .or_else(|_| serde_json::from_value(Value::String(text.to_string())))
                .map_err(|e| {
                    format!(
                        "{text:?} is not a key of type {} (give it as JSON): {e}",
                        std::any::type_name::<K>()
                    )
                })?,
        };
        codec.encode(&key).map_err(|e| e.to_string())
    })
}

fn to_json<T>(codec: Codec) -> ToJson
where
    T: Serialize + DeserializeOwned + 'static,
{
    Arc::new(move |bytes: &[u8]| {
        if matches!(codec, Codec::Raw | Codec::Utf8) {
            // Byte strings as text where they are text, not arrays of numbers.
            if let Ok(text) = std::str::from_utf8(bytes)
                && codec.decode::<T>(bytes).is_ok()
            {
                return Value::String(text.to_string());
            }
        }
        match codec.decode::<T>(bytes) {
            Ok(value) => serde_json::to_value(&value).unwrap_or_else(|_| hex(bytes)),
            Err(_) => hex(bytes),
        }
    })
}

fn hex(bytes: &[u8]) -> Value {
    serde_json::json!({ "hex": strata_record::hex::hex(bytes) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window_key::window_key;

    #[test]
    fn a_text_key_is_its_bytes_with_the_raw_codec() {
        let text = StoreText::of::<String, u64>(Codec::Raw, Codec::Postcard);
        assert_eq!((text.parse_key)("alice").unwrap(), b"alice");
        assert_eq!((text.key_json)(b"alice"), Value::String("alice".into()));
        let seven = Codec::Postcard.encode(&7u64).unwrap();
        assert_eq!((text.value_json)(&seven), serde_json::json!(7));
    }

    #[test]
    fn a_postcard_key_is_read_as_json_or_as_a_json_string() {
        let numbers = StoreText::of::<u64, String>(Codec::Postcard, Codec::Raw);
        assert_eq!(
            (numbers.parse_key)("42").unwrap(),
            Codec::Postcard.encode(&42u64).unwrap()
        );
        assert!((numbers.parse_key)("forty-two").is_err());
        let pairs = StoreText::of::<(String, u32), u8>(Codec::Postcard, Codec::Postcard);
        let encoded = (pairs.parse_key)(r#"["a",1]"#).unwrap();
        assert_eq!(encoded, Codec::Postcard.encode(&("a", 1u32)).unwrap());
        assert_eq!((pairs.key_json)(&encoded), serde_json::json!(["a", 1]));
        let names = StoreText::of::<String, u8>(Codec::Postcard, Codec::Postcard);
        assert_eq!(
            (names.parse_key)("bob").unwrap(),
            Codec::Postcard.encode("bob").unwrap()
        );
    }

    #[test]
    fn bytes_that_do_not_decode_are_shown_as_hex() {
        let text = StoreText::of::<u64, u64>(Codec::Postcard, Codec::Postcard);
        assert_eq!((text.value_json)(&[0xff]), serde_json::json!({"hex": "ff"}));
    }

    #[test]
    fn an_index_key_is_shown_as_its_field_and_row_key() {
        let text = StoreText::of::<Vec<u8>, ()>(Codec::Raw, Codec::Postcard)
            .indexed::<u64>(Codec::Postcard);
        let row = Codec::Postcard.encode(&7u64).unwrap();
        let key = crate::index_key::entry_key(b"London", &row);
        assert_eq!(
            (text.key_json)(&key),
            serde_json::json!({"field": "London", "key": 7})
        );
        assert!(text.index);
    }

    #[test]
    fn a_window_key_is_shown_as_its_key_and_start() {
        let text = StoreText::of::<Vec<u8>, u64>(Codec::Raw, Codec::Postcard)
            .windowed::<String>(Codec::Raw);
        let mut key = Vec::new();
        window_key(b"alice", 60_000, &mut key);
        assert_eq!(
            (text.key_json)(&key),
            serde_json::json!({"key": "alice", "start": 60_000})
        );
        let window = text.window.expect("windowed");
        assert_eq!((window.parse_key)("alice").unwrap(), b"alice");
    }
}
