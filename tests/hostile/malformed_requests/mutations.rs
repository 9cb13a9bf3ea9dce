//! Random mutations of requests real clients send, for the property test.

use super::*;
use batches::*;
use requests::*;

/// One change to a request's bytes.
#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    /// Sets the byte at (index modulo the length).
    Set(usize, u8),
    /// Flips one bit.
    Flip(usize, u8),
    /// Cuts the bytes at (index modulo the length).
    Truncate(usize),
    /// Inserts bytes.
    Insert(usize, Vec<u8>),
    /// Overwrites four bytes with a count or length a hostile client would
    /// pick.
    Count(usize, HostileCount),
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum HostileCount {
    Negative,
    MinusOne,
    Zero,
    Huge,
    Max,
}

impl HostileCount {
    fn value(self) -> i32 {
        match self {
            Self::Negative => -2,
            Self::MinusOne => -1,
            Self::Zero => 0,
            Self::Huge => 1 << 28,
            Self::Max => i32::MAX,
        }
    }
}

pub(crate) fn mutation() -> impl Strategy<Value = Mutation> {
    let count = prop_oneof![
        Just(HostileCount::Negative),
        Just(HostileCount::MinusOne),
        Just(HostileCount::Zero),
        Just(HostileCount::Huge),
        Just(HostileCount::Max),
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Mutation::Set(i, v)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(i, bytes)| Mutation::Insert(i, bytes)),
        (any::<usize>(), count).prop_map(|(i, c)| Mutation::Count(i, c)),
    ]
}

impl Mutation {
    pub(crate) fn apply(&self, bytes: &mut Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        let at = |i: usize| i % bytes.len();
        match self {
            Self::Set(i, value) => {
                let i = at(*i);
                bytes[i] = *value;
            }
            Self::Flip(i, bit) => {
                let i = at(*i);
                bytes[i] ^= 1 << (bit % 8);
            }
            Self::Truncate(i) => bytes.truncate(at(*i)),
            Self::Insert(i, inserted) => {
                let i = at(*i);
                bytes.splice(i..i, inserted.iter().copied());
            }
            Self::Count(i, count) => {
                let i = at(*i).min(bytes.len().saturating_sub(4));
                let value = count.value().to_be_bytes();
                let end = (i + 4).min(bytes.len());
                bytes[i..end].copy_from_slice(&value[..end - i]);
            }
        }
    }
}

/// Requests real clients send, size-prefixed, to mutate.
pub(crate) fn valid_requests() -> Vec<Vec<u8>> {
    vec![
        frame(
            ApiKey::ApiVersions,
            3,
            CORRELATION_ID,
            &ApiVersionsRequest::default(),
        ),
        frame(
            ApiKey::Metadata,
            12,
            CORRELATION_ID,
            &kafka_protocol::messages::MetadataRequest::default(),
        ),
        produce(9, produce_request(1, TARGET_TOPIC, 0, three_records())),
        produce(
            3,
            produce_request(1, TARGET_TOPIC, 0, batch_with(Compression::Gzip, records())),
        ),
        frame(
            ApiKey::Fetch,
            12,
            CORRELATION_ID,
            &fetch_request(TARGET_TOPIC, &[0], 0, 1 << 20, 0),
        ),
        frame(
            ApiKey::Fetch,
            4,
            CORRELATION_ID,
            &fetch_request(TARGET_TOPIC, &[0], 0, 1 << 20, 0),
        ),
        frame(
            ApiKey::CreateTopics,
            7,
            CORRELATION_ID,
            &create_topics_request("mutated", 1),
        ),
    ]
}
