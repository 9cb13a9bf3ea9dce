//! The codecs a batch's records may be compressed with (attributes bits 0-2).
//!
//! Decompression is bounded: a payload that inflates past the caller's limit is
//! rejected as it is read, so a small malicious batch cannot exhaust memory.

use std::io::{Read, Write};

use super::{RecordError, Result};

/// Batch compression codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Attribute bits that hold the codec id.
const CODEC_MASK: i16 = 0x07;
/// Framing snappy-java (and so the Java client) puts before snappy blocks.
const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// Uncompressed bytes per snappy block, as snappy-java writes them.
const SNAPPY_BLOCK_BYTES: usize = 32 * 1024;

impl Compression {
    pub fn from_attributes(attributes: i16) -> Result<Self> {
        match attributes & CODEC_MASK {
            0 => Ok(Self::None),
            1 => Ok(Self::Gzip),
            2 => Ok(Self::Snappy),
            3 => Ok(Self::Lz4),
            4 => Ok(Self::Zstd),
            id => Err(RecordError::UnknownCompression { id }),
        }
    }

    /// The codec id stored in the attributes.
    pub fn id(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Gzip => 1,
            Self::Snappy => 2,
            Self::Lz4 => 3,
            Self::Zstd => 4,
        }
    }

    /// The name Kafka's configs use (`compression.type`).
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }

    /// Parses a `compression.type` name.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::None, Self::Gzip, Self::Snappy, Self::Lz4, Self::Zstd]
            .into_iter()
            .find(|codec| codec.name() == name)
    }

    /// Compresses `input` into a new buffer.
    pub fn compress(self, input: &[u8]) -> Result<Vec<u8>> {
        let fail = |e: std::io::Error| self.error(e.to_string());
        match self {
            Self::None => Ok(input.to_vec()),
            Self::Gzip => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(input).map_err(fail)?;
                encoder.finish().map_err(fail)
            }
            Self::Snappy => compress_xerial_snappy(input).map_err(|e| self.error(e.to_string())),
            Self::Lz4 => {
                let mut encoder = lz4::EncoderBuilder::new()
                    .block_mode(lz4::BlockMode::Independent)
                    .build(Vec::new())
                    .map_err(fail)?;
                encoder.write_all(input).map_err(fail)?;
                let (out, result) = encoder.finish();
                result.map_err(fail)?;
                Ok(out)
            }
            Self::Zstd => zstd::stream::encode_all(input, 3).map_err(fail),
        }
    }

    /// Decompresses `input`, failing once the output would exceed
    /// `output_bytes_max`.
    pub fn decompress(self, input: &[u8], output_bytes_max: usize) -> Result<Vec<u8>> {
        match self {
            Self::None => {
                check_limit(input.len(), output_bytes_max)?;
                Ok(input.to_vec())
            }
            Self::Gzip => {
                self.read_bounded(flate2::read::MultiGzDecoder::new(input), output_bytes_max)
            }
            Self::Snappy => decompress_snappy(input, output_bytes_max),
            Self::Lz4 => {
                let decoder = lz4::Decoder::new(input).map_err(|e| self.error(e.to_string()))?;
                self.read_bounded(decoder, output_bytes_max)
            }
            Self::Zstd => {
                let decoder = zstd::stream::read::Decoder::new(input)
                    .map_err(|e| self.error(e.to_string()))?;
                self.read_bounded(decoder, output_bytes_max)
            }
        }
    }

    fn read_bounded(self, reader: impl Read, output_bytes_max: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let limit = u64::try_from(output_bytes_max)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        reader
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| self.error(e.to_string()))?;
        check_limit(out.len(), output_bytes_max)?;
        Ok(out)
    }

    fn error(self, reason: String) -> RecordError {
        RecordError::Decompress {
            codec: self.name(),
            reason,
        }
    }
}

fn check_limit(size: usize, limit: usize) -> Result<()> {
    if size > limit {
        return Err(RecordError::TooLarge { size, limit });
    }
    Ok(())
}

fn compress_xerial_snappy(input: &[u8]) -> std::result::Result<Vec<u8>, snap::Error> {
    let mut out = Vec::with_capacity(XERIAL_MAGIC.len() + input.len() / 2);
    out.extend_from_slice(XERIAL_MAGIC);
    let mut encoder = snap::raw::Encoder::new();
    for block in input.chunks(SNAPPY_BLOCK_BYTES) {
        let compressed = encoder.compress_vec(block)?;
        let length =
            u32::try_from(compressed.len()).expect("a 32 KiB block compresses below 4 GiB");
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&compressed);
    }
    Ok(out)
}

/// Snappy payloads come either framed by snappy-java (magic, then
/// length-prefixed raw blocks) or as one raw block (librdkafka's default).
fn decompress_snappy(input: &[u8], output_bytes_max: usize) -> Result<Vec<u8>> {
    let fail = |reason: String| RecordError::Decompress {
        codec: "snappy",
        reason,
    };
    let mut decoder = snap::raw::Decoder::new();
    let Some(mut rest) = input.strip_prefix(XERIAL_MAGIC.as_slice()) else {
        let size = snap::raw::decompress_len(input).map_err(|e| fail(e.to_string()))?;
        check_limit(size, output_bytes_max)?;
        return decoder
            .decompress_vec(input)
            .map_err(|e| fail(e.to_string()));
    };
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Some((length, tail)) = rest.split_first_chunk::<4>() else {
            return Err(fail("truncated block length".into()));
        };
        let length = u32::from_be_bytes(*length) as usize;
        if tail.len() < length {
            return Err(fail(format!(
                "block of {length} bytes but only {} remain",
                tail.len()
            )));
        }
        let (block, tail) = tail.split_at(length);
        let size = snap::raw::decompress_len(block).map_err(|e| fail(e.to_string()))?;
        check_limit(out.len().saturating_add(size), output_bytes_max)?;
        let start = out.len();
        out.resize(start + size, 0);
        decoder
            .decompress(block, &mut out[start..])
            .map_err(|e| fail(e.to_string()))?;
        rest = tail;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn every_codec_round_trips() {
        let input: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in ALL {
            let compressed = codec.compress(&input).unwrap();
            assert_eq!(
                codec.decompress(&compressed, input.len()).unwrap(),
                input,
                "{codec:?}"
            );
        }
    }

    #[test]
    fn decompression_stops_at_the_limit() {
        let input = vec![0u8; 1 << 20];
        for codec in ALL {
            let compressed = codec.compress(&input).unwrap();
            let err = codec.decompress(&compressed, 1000).unwrap_err();
            assert!(
                matches!(err, RecordError::TooLarge { .. }),
                "{codec:?}: {err}"
            );
        }
    }

    /// Garbage fed to every compressing codec.
    const GARBAGE: [&[u8]; 5] = [
        b"",
        b"\x00",
        b"\xff\xff\xff\xff\xff",
        XERIAL_MAGIC,
        b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff",
    ];

    /// Whether `codec` reads `garbage` as a payload of no bytes instead of
    /// refusing it.
    fn decodes_to_nothing(codec: Compression, garbage: &[u8]) -> bool {
        match codec {
            // A raw block declaring length 0, and a snappy-java frame with
            // no blocks: both are how an empty payload is encoded.
            Compression::Snappy => garbage == b"\x00" || garbage == XERIAL_MAGIC,
            // The lz4 crate takes the end of the input inside a frame
            // header (shorter than the 7 bytes it decodes at once) for the
            // end of the stream. A batch holding records still refuses such
            // a payload: its records are missing.
            Compression::Lz4 => garbage.len() < 7,
            _ => false,
        }
    }

    #[test]
    fn garbage_payloads_are_decompress_errors_that_name_the_codec() {
        for codec in ALL[1..].iter().copied() {
            for garbage in GARBAGE {
                if decodes_to_nothing(codec, garbage) {
                    continue;
                }
                match codec.decompress(garbage, 1 << 20) {
                    Err(RecordError::Decompress { codec: named, .. }) => {
                        assert_eq!(named, codec.name(), "{garbage:x?}");
                    }
                    other => panic!("{codec:?} over {garbage:x?}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn garbage_that_encodes_an_empty_payload_decodes_to_nothing() {
        for codec in ALL[1..].iter().copied() {
            for garbage in GARBAGE {
                if decodes_to_nothing(codec, garbage) {
                    let decoded = codec.decompress(garbage, 1 << 20);
                    assert_eq!(
                        decoded.ok(),
                        Some(Vec::new()),
                        "{codec:?} over {garbage:x?}"
                    );
                }
            }
        }
    }

    #[test]
    fn raw_snappy_without_framing_is_accepted() {
        let raw = snap::raw::Encoder::new()
            .compress_vec(b"hello hello hello")
            .unwrap();
        assert_eq!(
            Compression::Snappy.decompress(&raw, 100).unwrap(),
            b"hello hello hello"
        );
    }

    #[test]
    fn codec_names_match_kafka_config_values() {
        for codec in ALL {
            assert_eq!(Compression::from_name(codec.name()), Some(codec));
            assert_eq!(Compression::from_attributes(codec.id()).unwrap(), codec);
        }
        assert!(Compression::from_attributes(5).is_err());
    }
}
