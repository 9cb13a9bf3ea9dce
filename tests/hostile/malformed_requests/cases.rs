//! The table: each case a name, the bytes a client sends (size prefixes
//! included), and what the broker must do with them.

use super::*;
use batches::*;
use requests::*;

/// The broker's default largest request frame.
const REQUEST_BYTES_MAX: i32 = 100 << 20;
/// Bytes of zeros each decompression bomb inflates to: three times the
/// log's default decompression limit, and little enough that even lz4's
/// bomb (at most 255:1) fits in the default max.message.bytes.
const BOMB_BYTES: usize = 192 << 20;

const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const INVALID_TOPIC: i16 = 17;
const ILLEGAL_SASL_STATE: i16 = 34;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const INVALID_REQUIRED_ACKS: i16 = 21;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const UNSUPPORTED_VERSION: i16 = 35;
const INVALID_PARTITIONS: i16 = 37;
const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
const UNKNOWN_PRODUCER_ID: i16 = 59;
const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
const INVALID_RECORD: i16 = 87;
pub(crate) const MESSAGE_TOO_LARGE: i16 = 10;

/// What the broker must do with a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Close the connection without an answer: the request cannot be
    /// decoded, or its API or version is not served.
    Closed,
    /// Answer with this error code first in the response.
    Error(i16),
    /// Answer without error: a request absurd but valid.
    Served,
}

pub(crate) struct Case {
    pub(crate) name: &'static str,
    /// Everything the client sends, size prefixes included.
    pub(crate) bytes: Vec<u8>,
    pub(crate) expect: Expect,
}

pub(crate) fn case(name: &'static str, bytes: Vec<u8>, expect: Expect) -> Case {
    Case {
        name,
        bytes,
        expect,
    }
}

/// Every case of the table, by group.
pub(crate) fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.extend(framing_cases());
    cases.extend(header_cases());
    cases.extend(version_cases());
    cases.extend(body_cases());
    cases.extend(record_batch_cases());
    cases.extend(compression_cases());
    cases.extend(handler_cases());
    cases
}

/// The size prefix lying, negative, cut short.
pub(crate) fn framing_cases() -> Vec<Case> {
    use Expect::Closed;
    let metadata = raw_request(ApiKey::Metadata, 1, &[0, 0, 0, 0]);
    let mut promises_more = ((metadata.len() + 1000) as i32).to_be_bytes().to_vec();
    promises_more.extend_from_slice(&metadata);
    let mut at_limit_then_little = REQUEST_BYTES_MAX.to_be_bytes().to_vec();
    at_limit_then_little.extend_from_slice(&metadata);
    vec![
        case("size_negative", (-1i32).to_be_bytes().to_vec(), Closed),
        case("size_i32_min", i32::MIN.to_be_bytes().to_vec(), Closed),
        case("size_i32_max", i32::MAX.to_be_bytes().to_vec(), Closed),
        case(
            "size_one_past_the_limit",
            (REQUEST_BYTES_MAX + 1).to_be_bytes().to_vec(),
            Closed,
        ),
        case(
            "size_at_the_limit_then_a_few_bytes",
            at_limit_then_little,
            Closed,
        ),
        case("size_promises_1000_more_bytes", promises_more, Closed),
        case("size_cut_after_two_bytes", vec![0, 0], Closed),
        case("size_zero", sized(&[]), Closed),
        case("one_byte_frame", sized(&[0]), Closed),
        case("api_key_and_half_a_version", sized(&[0, 3, 0]), Closed),
    ]
}

/// Request headers cut short or lying about their lengths.
pub(crate) fn header_cases() -> Vec<Case> {
    use Expect::Closed;
    let metadata_v1 = [0, 3, 0, 1];
    let metadata_v12 = [0, 3, 0, 12];
    let with = |start: &[u8], rest: &[u8]| sized(&[start, rest].concat());
    vec![
        case(
            "header_ends_before_the_correlation_id",
            with(&metadata_v1, &[0, 0]),
            Closed,
        ),
        case(
            "header_ends_before_the_client_id",
            with(&metadata_v1, &[0, 0, 0, 1]),
            Closed,
        ),
        case(
            "client_id_longer_than_the_frame",
            with(&metadata_v1, &[0, 0, 0, 1, 0x7f, 0xff, b'a', b'b']),
            Closed,
        ),
        case(
            "client_id_length_minus_two",
            with(&metadata_v1, &[0, 0, 0, 1, 0xff, 0xfe, 0, 0, 0, 0]),
            Closed,
        ),
        case(
            "flexible_header_without_tagged_fields",
            with(&metadata_v12, &[0, 0, 0, 1, 0, 1, b'c']),
            Closed,
        ),
        case(
            "flexible_header_tag_count_varint_overflowing",
            with(
                &metadata_v12,
                &[
                    0, 0, 0, 1, 0, 1, b'c', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                ],
            ),
            Closed,
        ),
        case(
            "flexible_header_tagged_field_longer_than_the_frame",
            with(
                &metadata_v12,
                &[0, 0, 0, 1, 0, 1, b'c', 1, 0, 0xe8, 0x07, 1],
            ),
            Closed,
        ),
        case(
            "flexible_header_varint_cut_mid_way",
            with(&metadata_v12, &[0, 0, 0, 1, 0, 1, b'c', 0x80]),
            Closed,
        ),
        case(
            "flexible_header_claiming_a_billion_tagged_fields",
            with(
                &metadata_v12,
                &[0, 0, 0, 1, 0, 1, b'c', 0xff, 0xff, 0xff, 0xff, 0x03],
            ),
            Closed,
        ),
    ]
}

/// API keys and versions not served.
pub(crate) fn version_cases() -> Vec<Case> {
    use Expect::{Closed, Error};
    let api_versions_v99 = sized(&raw_request_unchecked(18, 99, &[]));
    let api_versions_negative = sized(&raw_request_unchecked(18, -1, &[]));
    vec![
        case(
            "unknown_api_key",
            sized(&raw_request_unchecked(9999, 0, &[])),
            Closed,
        ),
        case(
            "negative_api_key",
            sized(&raw_request_unchecked(-1, 0, &[])),
            Closed,
        ),
        case(
            "api_key_not_served_describe_delegation_token",
            sized(&raw_request_unchecked(
                ApiKey::DescribeDelegationToken as i16,
                1,
                &[0; 16],
            )),
            Closed,
        ),
        // Served, but out of place on a listener without SASL.
        case(
            "sasl_handshake_on_a_plaintext_listener",
            sized(&raw_request_unchecked(
                ApiKey::SaslHandshake as i16,
                1,
                &[0, 5, b'P', b'L', b'A', b'I', b'N'],
            )),
            Error(ILLEGAL_SASL_STATE),
        ),
        case(
            "metadata_version_99",
            sized(&raw_request_unchecked(3, 99, &[0, 0, 0, 0])),
            Closed,
        ),
        case(
            "metadata_version_negative",
            sized(&raw_request_unchecked(3, -1, &[0, 0, 0, 0])),
            Closed,
        ),
        case(
            "produce_v2_advertised_but_not_served",
            sized(&raw_request_unchecked(
                0,
                2,
                &[0, 1, 0, 0, 0x75, 0x30, 0, 0, 0, 0],
            )),
            Closed,
        ),
        case(
            "api_versions_too_new_is_answered_in_v0",
            api_versions_v99,
            Error(UNSUPPORTED_VERSION),
        ),
        case(
            "api_versions_negative_version_is_answered_in_v0",
            api_versions_negative,
            Error(UNSUPPORTED_VERSION),
        ),
        case(
            "api_versions_too_new_without_a_correlation_id",
            sized(&[0, 18, 0, 99, 0]),
            Closed,
        ),
    ]
}

/// Request bodies whose fields lie about their lengths.
pub(crate) fn body_cases() -> Vec<Case> {
    use Expect::Closed;
    let metadata = |version: i16, body: &[u8]| sized(&raw_request(ApiKey::Metadata, version, body));
    let uuid = [0u8; 16];
    vec![
        case("metadata_v1_without_a_body", metadata(1, &[]), Closed),
        case(
            "metadata_v1_topic_name_longer_than_the_frame",
            metadata(1, &[0, 0, 0, 1, 0x75, 0x30, b't']),
            Closed,
        ),
        case(
            "metadata_v1_topic_name_length_negative",
            metadata(1, &[0, 0, 0, 1, 0xff, 0xfb, b't']),
            Closed,
        ),
        case(
            "metadata_v1_topic_name_not_utf8",
            metadata(1, &[0, 0, 0, 1, 0, 2, 0xff, 0xfe]),
            Closed,
        ),
        case(
            "metadata_v4_topics_count_minus_two",
            metadata(4, &[0xff, 0xff, 0xff, 0xfe, 0]),
            Closed,
        ),
        case(
            "metadata_v12_compact_array_varint_overflowing",
            metadata(12, &[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            Closed,
        ),
        case(
            "metadata_v12_compact_string_length_overflowing",
            metadata(
                12,
                &[&[2][..], &uuid, &[0xff, 0xff, 0xff, 0xff, 0x0f, b't']].concat(),
            ),
            Closed,
        ),
        case(
            "metadata_v12_body_tagged_field_longer_than_the_frame",
            metadata(12, &[1, 0, 0, 1, 5, 0xff, 0xff, 0xff, 0x07, 0]),
            Closed,
        ),
        case(
            "metadata_v12_body_claiming_a_billion_tagged_fields",
            metadata(12, &[1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x03]),
            Closed,
        ),
        case(
            "api_versions_v3_client_software_name_longer_than_the_frame",
            sized(&raw_request(
                ApiKey::ApiVersions,
                3,
                &[0xc9, 0x01, b's', b'w'],
            )),
            Closed,
        ),
        case(
            "produce_v9_records_length_longer_than_the_frame",
            {
                let batch = three_records();
                let mut request = without_size(produce(
                    9,
                    produce_request(1, TARGET_TOPIC, 0, batch.clone()),
                ));
                // The records' compact length is the byte before the batch.
                let at = request
                    .windows(batch.len())
                    .position(|window| window == batch)
                    .unwrap()
                    - 1;
                request[at] = 0xff;
                request.insert(at + 1, 0x7f);
                sized(&request)
            },
            Closed,
        ),
    ]
}

/// Record batches that lie, produced to an existing partition.
pub(crate) fn record_batch_cases() -> Vec<Case> {
    use Expect::Error;
    let refused = |name, batch: Vec<u8>, code| {
        case(
            name,
            produce(9, produce_request(1, TARGET_TOPIC, 0, batch)),
            Error(code),
        )
    };
    let corrupt = |name, batch| refused(name, batch, CORRUPT_MESSAGE);
    let invalid = |name, batch| refused(name, batch, INVALID_RECORD);
    let old_format = |name, batch| refused(name, batch, UNSUPPORTED_FOR_MESSAGE_FORMAT);
    let valid = three_records();
    let mut bad_crc = valid.clone();
    bad_crc[CRC_AT] ^= 0xff;
    let mut flipped_payload = valid.clone();
    *flipped_payload.last_mut().unwrap() ^= 1;
    let length = |length: i32| {
        let mut batch = valid.clone();
        batch[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
        batch
    };
    let count = |count: i32| {
        let mut batch = valid.clone();
        batch[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
        reseal(batch)
    };
    let first_record_length = |varint: &[u8]| {
        let mut batch = valid.clone();
        batch.splice(
            BATCH_HEADER_BYTES..BATCH_HEADER_BYTES + 1,
            varint.iter().copied(),
        );
        fix_length(&mut batch);
        reseal(batch)
    };
    let mut second_cut = valid.clone();
    second_cut.extend_from_slice(&valid[..valid.len() / 2]);
    let mut header_only = valid[..BATCH_HEADER_BYTES].to_vec();
    fix_length(&mut header_only);
    let mut magic_3 = valid.clone();
    magic_3[MAGIC_AT] = 3;
    vec![
        old_format("batch_magic_v0_message_set", legacy_message_set(0)),
        old_format("batch_magic_v1_message_set", legacy_message_set(1)),
        old_format("batch_magic_3", reseal(magic_3)),
        corrupt("batch_bad_crc", bad_crc),
        corrupt("batch_payload_byte_flipped", flipped_payload),
        corrupt(
            "batch_length_past_the_records",
            length(valid.len() as i32 + 1000),
        ),
        corrupt("batch_length_negative", length(-1)),
        corrupt("batch_length_shorter_than_a_header", length(20)),
        corrupt("batch_length_i32_max", length(i32::MAX)),
        invalid("records_count_lying_high", count(1000)),
        invalid("records_count_lying_low", count(1)),
        invalid("records_count_negative", count(-1)),
        invalid("records_count_i32_max", count(i32::MAX)),
        invalid("record_length_negative", first_record_length(&[0x01])),
        invalid(
            "record_length_past_the_batch",
            first_record_length(&[0xc0, 0x9a, 0x0c]),
        ),
        invalid(
            "record_length_varint_overflowing",
            first_record_length(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        ),
        corrupt("second_batch_cut_in_half", second_cut),
        invalid("batch_header_without_records", reseal(header_only)),
        corrupt("records_shorter_than_a_batch_header", valid[..30].to_vec()),
    ]
}

/// Compressed payloads that are garbage, or inflate far past any limit.
pub(crate) fn compression_cases() -> Vec<Case> {
    use Expect::Error;
    let mut rng = support::rng::Rng(0x0bad_c0de);
    let garbage = rng.bytes(512);
    let mut cases: Vec<Case> = [
        ("gzip_garbage", Compression::Gzip),
        ("snappy_garbage", Compression::Snappy),
        ("lz4_garbage", Compression::Lz4),
        ("zstd_garbage", Compression::Zstd),
    ]
    .into_iter()
    .map(|(name, codec)| {
        let batch = with_payload(codec, &garbage);
        case(
            name,
            produce(9, produce_request(1, TARGET_TOPIC, 0, batch)),
            Error(CORRUPT_MESSAGE),
        )
    })
    .collect();
    let mut unknown_codec = three_records();
    unknown_codec[ATTRIBUTES_AT + 1] |= 0x07;
    cases.push(case(
        "codec_number_7",
        produce(
            9,
            produce_request(1, TARGET_TOPIC, 0, reseal(unknown_codec)),
        ),
        Error(UNSUPPORTED_COMPRESSION_TYPE),
    ));
    for (name, codec) in [
        ("gzip_bomb", Compression::Gzip),
        ("zstd_bomb", Compression::Zstd),
        ("lz4_bomb", Compression::Lz4),
    ] {
        cases.push(case(name, bomb(codec), Error(MESSAGE_TOO_LARGE)));
    }
    cases
}

/// Requests that decode, with values the handlers must refuse (or serve,
/// when absurd but valid).
pub(crate) fn handler_cases() -> Vec<Case> {
    use Expect::{Error, Served};
    let produce_to = |topic: &str, partition: i32| {
        produce(9, produce_request(1, topic, partition, three_records()))
    };
    let fetch = |partitions: &[i32], offset: i64, max_bytes: i32| {
        frame(
            ApiKey::Fetch,
            12,
            CORRELATION_ID,
            &fetch_request(TARGET_TOPIC, partitions, offset, max_bytes, 0),
        )
    };
    let mut unknown_producer = three_records();
    unknown_producer[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&4242i64.to_be_bytes());
    unknown_producer[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&7i32.to_be_bytes());
    let mut stray_transactional = unknown_producer.clone();
    stray_transactional[ATTRIBUTES_AT + 1] |= TRANSACTIONAL_BIT;
    vec![
        case(
            "produce_to_a_partition_past_the_last",
            produce_to(TARGET_TOPIC, 7),
            Error(UNKNOWN_TOPIC_OR_PARTITION),
        ),
        case(
            "produce_to_partition_minus_one",
            produce_to(TARGET_TOPIC, -1),
            Error(UNKNOWN_TOPIC_OR_PARTITION),
        ),
        case(
            "produce_to_partition_i32_max",
            produce_to(TARGET_TOPIC, i32::MAX),
            Error(UNKNOWN_TOPIC_OR_PARTITION),
        ),
        case(
            "produce_garbage_to_an_absent_topic_named_badly",
            produce(
                9,
                produce_request(1, "../escape", 0, rng_bytes(0x0e5c, 256)),
            ),
            Error(UNKNOWN_TOPIC_OR_PARTITION),
        ),
        case(
            "produce_with_acks_5",
            produce(9, produce_request(5, TARGET_TOPIC, 0, three_records())),
            Error(INVALID_REQUIRED_ACKS),
        ),
        case(
            "produce_without_records",
            produce(9, {
                let mut request = produce_request(1, TARGET_TOPIC, 0, Vec::new());
                request.topic_data[0].partition_data[0].records = None;
                request
            }),
            Error(INVALID_RECORD),
        ),
        case(
            "produce_from_a_producer_never_handed_out",
            produce(
                9,
                produce_request(1, TARGET_TOPIC, 0, reseal(unknown_producer)),
            ),
            Error(UNKNOWN_PRODUCER_ID),
        ),
        // Transactional records in a request naming no transactional id:
        // refused before the producer is looked at, as Kafka refuses them.
        case(
            "produce_transactional_from_a_producer_never_handed_out",
            produce(
                9,
                produce_request(1, TARGET_TOPIC, 0, reseal(stray_transactional)),
            ),
            Error(TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ),
        case("fetch_max_bytes_i32_max", fetch(&[0], 0, i32::MAX), Served),
        case("fetch_max_bytes_negative", fetch(&[0], 0, -1), Served),
        case(
            "fetch_partition_negative",
            fetch(&[-1], 0, 1 << 20),
            Error(UNKNOWN_TOPIC_OR_PARTITION),
        ),
        case(
            "fetch_offset_negative",
            fetch(&[0], -5, 1 << 20),
            Error(OFFSET_OUT_OF_RANGE),
        ),
        case(
            "fetch_offset_i64_max",
            fetch(&[0], i64::MAX, 1 << 20),
            Error(OFFSET_OUT_OF_RANGE),
        ),
        case(
            "create_topic_with_i32_max_partitions",
            frame(
                ApiKey::CreateTopics,
                7,
                CORRELATION_ID,
                &create_topics_request("many", i32::MAX),
            ),
            Error(INVALID_PARTITIONS),
        ),
        case(
            "create_topic_with_minus_five_partitions",
            frame(
                ApiKey::CreateTopics,
                7,
                CORRELATION_ID,
                &create_topics_request("negative", -5),
            ),
            Error(INVALID_PARTITIONS),
        ),
        case(
            "create_topic_named_with_a_path",
            frame(
                ApiKey::CreateTopics,
                7,
                CORRELATION_ID,
                &create_topics_request("../../etc", 1),
            ),
            Error(INVALID_TOPIC),
        ),
        case(
            "create_topic_named_with_300_characters",
            frame(
                ApiKey::CreateTopics,
                7,
                CORRELATION_ID,
                &create_topics_request(&"x".repeat(300), 1),
            ),
            Error(INVALID_TOPIC),
        ),
        case(
            "join_group_with_a_negative_session_timeout",
            frame(ApiKey::JoinGroup, 5, CORRELATION_ID, &{
                use kafka_protocol::messages::GroupId;
                kafka_protocol::messages::JoinGroupRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("g")))
                    .with_session_timeout_ms(-1)
                    .with_rebalance_timeout_ms(-1)
                    .with_protocol_type(StrBytes::from_static_str("consumer"))
            }),
            Error(INVALID_SESSION_TIMEOUT),
        ),
    ]
}

/// A produce of one batch whose records inflate to `BOMB_BYTES` of zeros.
pub(crate) fn bomb(codec: Compression) -> Vec<u8> {
    let payload = codec.compress(&vec![0u8; BOMB_BYTES]).unwrap();
    produce(
        9,
        produce_request(1, TARGET_TOPIC, 0, with_payload(codec, &payload)),
    )
}
