//! Codecs: how a processor's typed keys and values become the bytes of
//! records and state-store entries, and back.
//!
//! - [`Codec::Postcard`]: compact binary (postcard's stable wire format),
//!   for any serde type.
//! - [`Codec::Json`]: `serde_json`, readable, for any serde type.
//! - [`Codec::Raw`]: the bytes as they are, for byte types (`Vec<u8>`,
//!   `[u8; N]`, types that serialize as bytes) and strings.
//! - [`Codec::Utf8`]: UTF-8 text, for strings; decoding checks the bytes
//!   are UTF-8.
//!
//! - [`Codec::Registry`]: Avro, Protobuf or JSON Schema in the Confluent
//!   wire format, through the schema registry the app runs with
//!   (`strata_schema`); made with [`Codec::avro`], [`Codec::protobuf`],
//!   [`Codec::json_schema`]. For topics only: writing names the topic's
//!   subject ([`Codec::encode_record_into`]).
//!
//! Raw and UTF-8 also take `()` as no bytes (the value of a record that
//! only has a key). They refuse other types with an error naming the
//! type's shape and the codecs that take it, rather than inventing an
//! encoding.

mod raw;

use serde::Serialize;
use serde::de::DeserializeOwned;
pub use strata_schema::{Part, SchemaFormat};

/// A serde codec for keys or values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    Postcard,
    Json,
    Raw,
    Utf8,
    Registry(SchemaFormat),
}

/// Why a value could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[error("{codec} codec: {reason}")]
pub struct CodecError {
    pub codec: &'static str,
    pub reason: String,
    /// No fault of the value's: the schema registry could not be asked,
    /// or refused the app (its credentials, its schema), or the app's own
    /// schema is wrong. Every record would fail alike, so a runtime stops
    /// rather than treat the record as bad.
    pub blameless: bool,
}

impl Codec {
    /// Avro through the schema registry, read as and written with
    /// `schema` (the schema's JSON).
    pub const fn avro(schema: &'static str) -> Self {
        Self::Registry(SchemaFormat::Avro { schema })
    }

    /// Protobuf through the schema registry: `message` of the `.proto`
    /// file `schema`.
    pub const fn protobuf(schema: &'static str, message: &'static str) -> Self {
        Self::Registry(SchemaFormat::Protobuf { schema, message })
    }

    /// JSON checked against the JSON Schema `schema`, through the schema
    /// registry.
    pub const fn json_schema(schema: &'static str) -> Self {
        Self::Registry(SchemaFormat::JsonSchema { schema })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Postcard => "postcard",
            Self::Json => "json",
            Self::Raw => "raw",
            Self::Utf8 => "utf8",
            Self::Registry(format) => format.name(),
        }
    }

    /// Parses a codec name as [`Codec::name`] writes it (not the registry
    /// codecs, which need their schema).
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Postcard, Self::Json, Self::Raw, Self::Utf8]
            .into_iter()
            .find(|c| c.name() == name)
    }

    pub fn encode<T: Serialize + ?Sized>(self, value: &T) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        self.encode_into(value, &mut out)?;
        Ok(out)
    }

    /// Encodes into `out`, replacing what it held and keeping its
    /// allocation (per-record encodes reuse one buffer).
    pub fn encode_into<T: Serialize + ?Sized>(
        self,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let fail = |reason: String| CodecError {
            codec: self.name(),
            reason,
            blameless: false,
        };
        out.clear();
        match self {
            Self::Postcard => postcard::to_extend(value, std::mem::take(out))
                .map(|written| *out = written)
                .map_err(|e| fail(e.to_string())),
            Self::Json => serde_json::to_writer(&mut *out, value).map_err(|e| fail(e.to_string())),
            Self::Raw => raw::write_bytes(value, raw::Accept::BytesOrText, out).map_err(fail),
            Self::Utf8 => raw::write_bytes(value, raw::Accept::Text, out).map_err(fail),
            Self::Registry(_) => Err(fail(
                "writes topics' records only (their subject names the topic): give stores postcard, json, raw or utf8".into(),
            )),
        }
    }

    /// Encodes `topic`'s key or value into `out`: as [`Codec::encode_into`],
    /// and for the registry codecs in the wire format, the schema
    /// registered under the topic's subject the first time.
    pub fn encode_record_into<T: Serialize + ?Sized>(
        self,
        topic: &str,
        part: Part,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        match self {
            Self::Registry(format) => (strata_schema::encode(&format, topic, part, value, out))
                .map_err(|e| self.schema_error(e)),
            _ => self.encode_into(value, out),
        }
    }

    /// Decodes a value. With the raw and UTF-8 codecs, `Vec<u8>` and
    /// `String` are taken straight from the bytes (serde would visit a
    /// `Vec<u8>` one byte at a time); the results and errors are serde's.
    pub fn decode<T: DeserializeOwned + 'static>(self, bytes: &[u8]) -> Result<T, CodecError> {
        use std::any::{Any, TypeId};
        let wanted = TypeId::of::<T>();
        if self == Self::Raw && wanted == TypeId::of::<Vec<u8>>() {
            let mut slot = Some(bytes.to_vec());
            if let Some(value) = (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>() {
                return Ok(value.take().expect("just set"));
            }
        }
        if matches!(self, Self::Raw | Self::Utf8)
            && wanted == TypeId::of::<String>()
            && let Ok(text) = text_of(bytes)
        {
            let mut slot = Some(text.to_string());
            if let Some(value) = (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>() {
                return Ok(value.take().expect("just set"));
            }
        }
        self.decode_with_serde(bytes)
    }

    fn schema_error(self, error: strata_schema::SchemaError) -> CodecError {
        CodecError {
            codec: self.name(),
            blameless: !error.blames_the_record(),
            reason: error.to_string(),
        }
    }

    fn decode_with_serde<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, CodecError> {
        let fail = |reason: String| CodecError {
            codec: self.name(),
            reason,
            blameless: false,
        };
        match self {
            Self::Postcard => {
                let (value, rest) =
                    postcard::take_from_bytes(bytes).map_err(|e| fail(e.to_string()))?;
                if !rest.is_empty() {
                    return Err(fail(format!("{} bytes left after the value", rest.len())));
                }
                Ok(value)
            }
            Self::Json => serde_json::from_slice(bytes).map_err(|e| fail(e.to_string())),
            Self::Raw => raw::from_bytes(bytes, raw::Accept::BytesOrText).map_err(fail),
            Self::Utf8 => raw::from_bytes(bytes, raw::Accept::Text).map_err(fail),
            Self::Registry(format) => {
                strata_schema::decode(&format, bytes).map_err(|e| self.schema_error(e))
            }
        }
    }
}

/// `bytes` as text (a `String` key or value). Keys are mostly short and
/// ASCII, which the standard check walks a byte at a time when short:
/// about 110 instructions per 10-byte key, measured under callgrind on the
/// operators bench's join. Checked a word at a time for ASCII first, about
/// 17.
#[inline]
fn text_of(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    if bytes.is_ascii() {
        // SAFETY: ASCII bytes are UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Session {
        user: String,
        pages: Vec<u32>,
        started_ms: i64,
        tags: BTreeMap<String, Option<String>>,
    }

    fn session() -> Session {
        Session {
            user: "user-7".into(),
            pages: vec![1, 2, 300],
            started_ms: -1_700_000_000_000,
            tags: BTreeMap::from([("a".into(), None), ("b".into(), Some("é€".into()))]),
        }
    }

    #[test]
    fn structured_codecs_round_trip_any_serde_type() {
        for codec in [Codec::Postcard, Codec::Json] {
            let bytes = codec.encode(&session()).unwrap();
            assert_eq!(
                codec.decode::<Session>(&bytes).unwrap(),
                session(),
                "{codec:?}"
            );
            assert_eq!(
                codec.decode::<u64>(&codec.encode(&42u64).unwrap()).unwrap(),
                42
            );
        }
        let compact = Codec::Postcard.encode(&session()).unwrap();
        let readable = Codec::Json.encode(&session()).unwrap();
        assert!(compact.len() < readable.len());
        assert!(
            String::from_utf8(readable)
                .unwrap()
                .contains("\"user\":\"user-7\"")
        );
    }

    #[test]
    fn raw_keeps_bytes_and_text_as_they_are() {
        let bytes = vec![0u8, 255, 10, 13];
        assert_eq!(Codec::Raw.encode(&bytes).unwrap(), bytes);
        assert_eq!(Codec::Raw.decode::<Vec<u8>>(&bytes).unwrap(), bytes);
        assert_eq!(Codec::Raw.encode("héllo").unwrap(), "héllo".as_bytes());
        assert_eq!(
            Codec::Raw.decode::<String>("héllo".as_bytes()).unwrap(),
            "héllo"
        );
        assert_eq!(Codec::Raw.encode(&[1u8, 2, 3]).unwrap(), [1, 2, 3]);
        assert_eq!(Codec::Raw.decode::<[u8; 3]>(&[1, 2, 3]).unwrap(), [1, 2, 3]);
        assert!(Codec::Raw.decode::<[u8; 3]>(&[1, 2]).is_err());
        let empty: Vec<u8> = Vec::new();
        assert_eq!(Codec::Raw.encode(&empty).unwrap(), empty);
    }

    proptest::proptest! {
        /// Text is taken as the standard check takes it, from any bytes:
        /// ASCII, other UTF-8 and bytes that are not text.
        #[test]
        fn text_is_checked_as_the_standard_check_does(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![0u8..0x80, proptest::num::u8::ANY], 0..40),
            text in ".{0,12}",
        ) {
            proptest::prop_assert_eq!(text_of(&bytes), std::str::from_utf8(&bytes));
            proptest::prop_assert_eq!(text_of(text.as_bytes()), Ok(text.as_str()));
        }
    }

    #[test]
    fn utf8_takes_text_only_and_checks_it() {
        assert_eq!(Codec::Utf8.encode("ünïcode").unwrap(), "ünïcode".as_bytes());
        assert_eq!(Codec::Utf8.decode::<String>(b"plain").unwrap(), "plain");
        let error = Codec::Utf8.decode::<String>(&[0xff, 0xfe]).unwrap_err();
        assert!(error.to_string().contains("UTF-8"), "{error}");
        let error = Codec::Utf8.encode(&vec![1u8, 2]).unwrap_err();
        assert!(error.to_string().contains("utf8 codec"), "{error}");
    }

    #[test]
    fn raw_and_utf8_refuse_other_shapes_and_say_what_to_use() {
        for codec in [Codec::Raw, Codec::Utf8] {
            let error = codec.encode(&session()).unwrap_err().to_string();
            assert!(error.contains("postcard or json"), "{error}");
            let error = codec.encode(&7u32).unwrap_err().to_string();
            assert!(error.contains("postcard or json"), "{error}");
            assert!(codec.decode::<u32>(b"7").is_err());
        }
    }

    #[test]
    fn raw_and_utf8_take_unit_as_no_bytes() {
        for codec in [Codec::Raw, Codec::Utf8] {
            assert_eq!(codec.encode(&()).unwrap(), b"");
            codec.decode::<()>(b"").unwrap();
            let error = codec.decode::<()>(b"x").unwrap_err().to_string();
            assert!(error.contains("IgnoredAny"), "{error}");
        }
    }

    #[test]
    fn trailing_or_truncated_input_is_an_error() {
        let mut bytes = Codec::Postcard.encode(&session()).unwrap();
        bytes.push(0);
        assert!(Codec::Postcard.decode::<Session>(&bytes).is_err());
        bytes.truncate(3);
        assert!(Codec::Postcard.decode::<Session>(&bytes).is_err());
        assert!(Codec::Json.decode::<Session>(b"{\"user\":").is_err());
    }

    #[test]
    fn the_owned_fast_path_decodes_as_serde_does() {
        for codec in [Codec::Raw, Codec::Utf8] {
            for bytes in [&b"caf\xc3\xa9"[..], b"", b"\xff\xfe not utf-8"] {
                let fast = codec.decode::<String>(bytes).map_err(|e| e.to_string());
                let slow = codec
                    .decode_with_serde::<String>(bytes)
                    .map_err(|e| e.to_string());
                assert_eq!(fast, slow, "{codec:?} {bytes:?}");
                let fast = codec.decode::<Vec<u8>>(bytes).map_err(|e| e.to_string());
                let slow = codec
                    .decode_with_serde::<Vec<u8>>(bytes)
                    .map_err(|e| e.to_string());
                assert_eq!(fast, slow, "{codec:?} {bytes:?}");
            }
        }
        assert_eq!(Codec::Postcard.decode::<u64>(&[7]).unwrap(), 7);
    }

    #[test]
    fn names_round_trip() {
        for codec in [Codec::Postcard, Codec::Json, Codec::Raw, Codec::Utf8] {
            assert_eq!(Codec::from_name(codec.name()), Some(codec));
        }
        assert_eq!(Codec::from_name("bincode"), None);
    }
}
