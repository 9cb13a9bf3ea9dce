//! The raw and UTF-8 codecs: a serde serializer that takes only bytes
//! (byte strings, sequences and arrays of u8) and text, and a deserializer
//! that offers the input as bytes or as checked UTF-8 text.

use serde::de::value::SeqDeserializer;
use serde::de::{self, Visitor};
use serde::ser::{self, Impossible};
use serde::{Deserialize, Serialize};

/// What a codec takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    BytesOrText,
    Text,
}

impl Accept {
    fn takes(self) -> &'static str {
        match self {
            Self::BytesOrText => "bytes or strings",
            Self::Text => "strings",
        }
    }
}

/// Appends the value's bytes to `out`.
pub fn write_bytes<T: Serialize + ?Sized>(
    value: &T,
    accept: Accept,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    value.serialize(Capture { accept, out }).map_err(|e| e.0)
}

pub fn from_bytes<T: for<'de> Deserialize<'de>>(bytes: &[u8], accept: Accept) -> Result<T, String> {
    T::deserialize(Offer { bytes, accept }).map_err(|e| e.0)
}

#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

impl de::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

fn refuse(accept: Accept, what: &str) -> Error {
    Error(format!(
        "takes {}, not {what}; use postcard or json for other types",
        accept.takes()
    ))
}

/// Serializes a value into its bytes, if it is bytes or text.
struct Capture<'o> {
    accept: Accept,
    out: &'o mut Vec<u8>,
}

/// Collects a sequence (or array) of u8.
struct ByteSeq<'o> {
    out: &'o mut Vec<u8>,
}

/// Takes one u8 of a sequence.
struct OneByte;

macro_rules! refuse_scalars {
    ($($method:ident($ty:ty) => $what:expr),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Result<Self::Ok, Error> {
            Err(refuse(self.accept, $what))
        })*
    };
}

impl<'o> ser::Serializer for Capture<'o> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ByteSeq<'o>;
    type SerializeTuple = ByteSeq<'o>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.out
            .extend_from_slice(v.encode_utf8(&mut [0; 4]).as_bytes());
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        match self.accept {
            Accept::BytesOrText => {
                self.out.extend_from_slice(v);
                Ok(())
            }
            Accept::Text => Err(refuse(self.accept, "bytes")),
        }
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<ByteSeq<'o>, Error> {
        match self.accept {
            Accept::BytesOrText => {
                self.out.reserve(len.unwrap_or(0));
                Ok(ByteSeq { out: self.out })
            }
            Accept::Text => Err(refuse(self.accept, "a sequence")),
        }
    }

    fn serialize_tuple(self, len: usize) -> Result<ByteSeq<'o>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    refuse_scalars! {
        serialize_bool(bool) => "a bool",
        serialize_i8(i8) => "a number",
        serialize_i16(i16) => "a number",
        serialize_i32(i32) => "a number",
        serialize_i64(i64) => "a number",
        serialize_u8(u8) => "a number",
        serialize_u16(u16) => "a number",
        serialize_u32(u32) => "a number",
        serialize_u64(u64) => "a number",
        serialize_f32(f32) => "a number",
        serialize_f64(f64) => "a number",
    }

    fn serialize_none(self) -> Result<(), Error> {
        Err(refuse(self.accept, "an option"))
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Error> {
        Err(refuse(self.accept, "an option"))
    }

    fn serialize_unit(self) -> Result<(), Error> {
        // No bytes: the empty value of a record that only has a key.
        Ok(())
    }

    fn serialize_unit_struct(self, name: &'static str) -> Result<(), Error> {
        Err(refuse(self.accept, name))
    }

    fn serialize_unit_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), Error> {
        Err(refuse(self.accept, name))
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(refuse(self.accept, name))
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(refuse(self.accept, name))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(refuse(self.accept, name))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(refuse(self.accept, "a map"))
    }

    fn serialize_struct(
        self,
        name: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(refuse(self.accept, name))
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(refuse(self.accept, name))
    }
}

impl ser::SerializeSeq for ByteSeq<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.out.push(value.serialize(OneByte)?);
        Ok(())
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl ser::SerializeTuple for ByteSeq<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<(), Error> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::Serializer for OneByte {
    type Ok = u8;
    type Error = Error;
    type SerializeSeq = Impossible<u8, Error>;
    type SerializeTuple = Impossible<u8, Error>;
    type SerializeTupleStruct = Impossible<u8, Error>;
    type SerializeTupleVariant = Impossible<u8, Error>;
    type SerializeMap = Impossible<u8, Error>;
    type SerializeStruct = Impossible<u8, Error>;
    type SerializeStructVariant = Impossible<u8, Error>;

    fn serialize_u8(self, v: u8) -> Result<u8, Error> {
        Ok(v)
    }

    fn serialize_bool(self, _: bool) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_i8(self, _: i8) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_i16(self, _: i16) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_i32(self, _: i32) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_i64(self, _: i64) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_u16(self, _: u16) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_u32(self, _: u32) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_u64(self, _: u64) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_f32(self, _: f32) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_f64(self, _: f64) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_char(self, _: char) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_str(self, _: &str) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_bytes(self, _: &[u8]) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_none(self) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_unit(self) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<u8, Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<u8, Error> {
        Err(not_a_byte())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(not_a_byte())
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(not_a_byte())
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(not_a_byte())
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(not_a_byte())
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(not_a_byte())
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(not_a_byte())
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(not_a_byte())
    }
}

fn not_a_byte() -> Error {
    refuse(Accept::BytesOrText, "a sequence of anything but bytes")
}

/// Offers the input bytes to a type's deserializer.
struct Offer<'a> {
    bytes: &'a [u8],
    accept: Accept,
}

impl Offer<'_> {
    fn text(&self) -> Result<&str, Error> {
        std::str::from_utf8(self.bytes).map_err(|e| Error(format!("not UTF-8 text: {e}")))
    }
}

impl<'de> de::Deserializer<'de> for Offer<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.accept {
            Accept::BytesOrText => visitor.visit_bytes(self.bytes),
            Accept::Text => visitor.visit_str(self.text()?),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str(self.text()?)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_string(self.text()?.to_string())
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.accept {
            Accept::BytesOrText => visitor.visit_bytes(self.bytes),
            Accept::Text => Err(refuse(self.accept, "bytes")),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.accept {
            Accept::BytesOrText => visitor.visit_byte_buf(self.bytes.to_vec()),
            Accept::Text => Err(refuse(self.accept, "bytes")),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.accept == Accept::Text {
            return Err(refuse(self.accept, "a sequence"));
        }
        let mut seq = SeqDeserializer::new(self.bytes.iter().copied());
        let value = visitor.visit_seq(&mut seq)?;
        seq.end()?;
        Ok(value)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        if self.accept == Accept::BytesOrText && self.bytes.len() != len {
            return Err(Error(format!(
                "{} bytes where an array of {len} was expected",
                self.bytes.len()
            )));
        }
        self.deserialize_seq(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if !self.bytes.is_empty() {
            return Err(Error(format!(
                "{} bytes where () (no bytes) was expected; serde's IgnoredAny takes any",
                self.bytes.len()
            )));
        }
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char option unit_struct
        tuple_struct map struct enum identifier ignored_any
    }
}
