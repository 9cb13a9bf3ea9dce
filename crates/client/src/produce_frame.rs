//! Produce requests framed by hand, as a list of byte chunks: the small
//! encoded pieces, and each batch's bytes as they are. Encoding the request
//! through the protocol crate would copy every batch into one buffer; the
//! connection writes these chunks one after another instead. Versions 3 to
//! 12 (topics by name); tested byte-identical to the protocol crate's
//! encoding of the same request.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

/// Versions this module frames.
pub(crate) const VERSIONS: std::ops::RangeInclusive<i16> = 3..=12;
/// Produce's API key.
const API_KEY: i16 = 0;
/// From this version on, Produce is flexible (compact strings and arrays,
/// tagged fields; request header v2).
const FLEXIBLE_FROM: i16 = 9;

/// One partition's batches.
pub(crate) struct PartitionRecords {
    pub partition: i32,
    pub records: Bytes,
}

/// The whole request frame (size prefix included) as chunks to write in
/// order.
pub(crate) fn frame(
    version: i16,
    correlation_id: i32,
    client_id: &str,
    transactional_id: Option<&str>,
    acks: i16,
    timeout_ms: i32,
    topics: &[(String, Vec<PartitionRecords>)],
) -> Vec<Bytes> {
    debug_assert!(VERSIONS.contains(&version));
    let flexible = version >= FLEXIBLE_FROM;
    let mut parts = Vec::new();
    let mut head = BytesMut::with_capacity(64);
    head.put_i32(0); // the size, filled in at the end
    head.put_i16(API_KEY);
    head.put_i16(version);
    head.put_i32(correlation_id);
    // The header's client id is a non-compact nullable string in every
    // header version.
    head.put_i16(client_id.len() as i16);
    head.put_slice(client_id.as_bytes());
    if flexible {
        head.put_u8(0); // header tagged fields
    }
    // transactional_id: a nullable string (Kafka refuses transactional
    // batches in a request without it).
    match transactional_id {
        Some(id) => put_string(&mut head, id, flexible),
        None if flexible => put_uvarint(&mut head, 0),
        None => head.put_i16(-1),
    }
    head.put_i16(acks);
    head.put_i32(timeout_ms);
    put_array_len(&mut head, topics.len(), flexible);
    for (name, partitions) in topics {
        put_string(&mut head, name, flexible);
        put_array_len(&mut head, partitions.len(), flexible);
        for partition in partitions {
            head.put_i32(partition.partition);
            if flexible {
                put_uvarint(&mut head, partition.records.len() as u64 + 1);
            } else {
                head.put_i32(partition.records.len() as i32);
            }
            parts.push(std::mem::take(&mut head).freeze());
            parts.push(partition.records.clone());
            if flexible {
                head.put_u8(0); // partition tagged fields
            }
        }
        if flexible {
            head.put_u8(0); // topic tagged fields
        }
    }
    if flexible {
        head.put_u8(0); // request tagged fields
    }
    parts.push(head.freeze());
    let total: usize = parts.iter().map(Bytes::len).sum();
    let size = (total - 4) as i32;
    let mut first = BytesMut::from(&parts[0][..]);
    first[..4].copy_from_slice(&size.to_be_bytes());
    parts[0] = first.freeze();
    parts.retain(|p| !p.is_empty());
    parts
}

/// The same request as the protocol crate's message, for versions this
/// module does not frame.
pub(crate) fn as_request(
    transactional_id: Option<&str>,
    acks: i16,
    timeout_ms: i32,
    topics: &[(String, Vec<PartitionRecords>)],
) -> ProduceRequest {
    ProduceRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_string()))),
        )
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(
            topics
                .iter()
                .map(|(name, partitions)| {
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(name.clone())))
                        .with_partition_data(
                            partitions
                                .iter()
                                .map(|p| {
                                    PartitionProduceData::default()
                                        .with_index(p.partition)
                                        .with_records(Some(p.records.clone()))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

fn put_array_len(buf: &mut BytesMut, len: usize, flexible: bool) {
    if flexible {
        put_uvarint(buf, len as u64 + 1);
    } else {
        buf.put_i32(len as i32);
    }
}

fn put_string(buf: &mut BytesMut, text: &str, flexible: bool) {
    if flexible {
        put_uvarint(buf, text.len() as u64 + 1);
    } else {
        buf.put_i16(text.len() as i16);
    }
    buf.put_slice(text.as_bytes());
}

fn put_uvarint(buf: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::RequestHeader;
    use kafka_protocol::protocol::{Encodable, HeaderVersion};

    use super::*;

    #[test]
    fn the_frame_is_what_the_protocol_crate_encodes() {
        let batch = |n: u8| Bytes::from(vec![n; 300 + n as usize]);
        let topics = vec![
            (
                "orders".to_string(),
                vec![
                    PartitionRecords {
                        partition: 0,
                        records: batch(1),
                    },
                    PartitionRecords {
                        partition: 3,
                        records: batch(2),
                    },
                ],
            ),
            (
                "payments".to_string(),
                vec![PartitionRecords {
                    partition: 1,
                    records: batch(3),
                }],
            ),
        ];
        for (version, transactional_id) in VERSIONS.flat_map(|v| [(v, None), (v, Some("txn-7"))]) {
            let ours: Vec<u8> = frame(version, 77, "strata", transactional_id, -1, 30_000, &topics)
                .iter()
                .flat_map(|p| p.iter().copied())
                .collect();
            let request = as_request(transactional_id, -1, 30_000, &topics);
            let header = RequestHeader::default()
                .with_request_api_key(API_KEY)
                .with_request_api_version(version)
                .with_correlation_id(77)
                .with_client_id(Some(StrBytes::from_static_str("strata")));
            let mut theirs = BytesMut::new();
            theirs.put_i32(0);
            header
                .encode(&mut theirs, ProduceRequest::header_version(version))
                .unwrap();
            request.encode(&mut theirs, version).unwrap();
            let size = (theirs.len() - 4) as i32;
            theirs[..4].copy_from_slice(&size.to_be_bytes());
            assert_eq!(
                ours,
                theirs.to_vec(),
                "Produce v{version}, transactional id {transactional_id:?}"
            );
        }
    }
}
