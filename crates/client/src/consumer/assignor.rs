//! Partition assignment inside a consumer group: the "consumer" protocol's
//! subscription and assignment encodings, and the range and round-robin
//! assignors, computed by the group's leader exactly as the Java client and
//! librdkafka compute them, so mixed groups agree.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::claimed_counts;
use crate::ClientError;

/// Version of the subscription and assignment this client writes: v0, the
/// one every client reads.
const PROTOCOL_VERSION: i16 = 0;
/// Newest version this client reads (newer ones only add fields).
const PROTOCOL_VERSION_MAX: i16 = 3;

/// One partition of one topic.
pub type TopicPartition = (String, i32);

/// How the group leader splits partitions among members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    /// Per topic, consecutive ranges of partitions; the first members (by
    /// member id) get one more when the count does not divide evenly.
    Range,
    /// Every subscribed partition, sorted, dealt to the members in turn.
    RoundRobin,
}

impl Assignor {
    /// The protocol name members vote with.
    pub fn name(self) -> &'static str {
        match self {
            Self::Range => "range",
            Self::RoundRobin => "roundrobin",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "range" => Some(Self::Range),
            "roundrobin" => Some(Self::RoundRobin),
            _ => None,
        }
    }

    /// Assigns the partitions of `partition_counts` to `members` (member id
    /// → subscribed topics). Every member appears in the result, possibly
    /// with nothing; topics no member subscribes to are left out.
    pub fn assign(
        self,
        members: &BTreeMap<String, Vec<String>>,
        partition_counts: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Vec<TopicPartition>> {
        let mut assignment: BTreeMap<String, Vec<TopicPartition>> = members
            .keys()
            .map(|member| (member.clone(), Vec::new()))
            .collect();
        let subscribers = |topic: &str| -> Vec<&String> {
            members
                .iter()
                .filter(|(_, topics)| topics.iter().any(|t| t == topic))
                .map(|(member, _)| member)
                .collect()
        };
        match self {
            Self::Range => {
                for (topic, &count) in partition_counts {
                    let takers = subscribers(topic);
                    if takers.is_empty() {
                        continue;
                    }
                    let each = count / takers.len() as i32;
                    let extra = count % takers.len() as i32;
                    let mut next = 0;
                    for (index, member) in takers.into_iter().enumerate() {
                        let share = each + i32::from((index as i32) < extra);
                        let target = assignment.get_mut(member).expect("every member is listed");
                        target.extend((next..next + share).map(|p| (topic.clone(), p)));
                        next += share;
                    }
                }
            }
            Self::RoundRobin => {
                let ordered: Vec<&String> = members.keys().collect();
                let mut turn = 0usize;
                for (topic, &count) in partition_counts {
                    for partition in 0..count {
                        // The next member in the cycle that subscribes to it.
                        for step in 0..ordered.len() {
                            let member = ordered[(turn + step) % ordered.len()];
                            if members[member].iter().any(|t| t == topic) {
                                assignment
                                    .get_mut(member)
                                    .expect("every member is listed")
                                    .push((topic.clone(), partition));
                                turn = (turn + step + 1) % ordered.len();
                                break;
                            }
                        }
                    }
                }
            }
        }
        assignment
    }
}

/// A member's subscription, as sent in JoinGroup.
#[doc(hidden)]
pub fn encode_subscription(topics: &[String]) -> Result<Bytes, ClientError> {
    encode_subscription_with(topics, None)
}

/// A subscription carrying `user_data` for the group's own assignor.
pub fn encode_subscription_with(
    topics: &[String],
    user_data: Option<Bytes>,
) -> Result<Bytes, ClientError> {
    let subscription = ConsumerProtocolSubscription::default()
        .with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        )
        .with_user_data(user_data);
    encode_versioned(&subscription)
}

/// The topics of a member's subscription, as received by the leader.
#[doc(hidden)]
pub fn decode_subscription(bytes: &[u8]) -> Result<Vec<String>, ClientError> {
    Ok(decode_subscription_with(bytes)?.0)
}

/// A subscription's topics and user data.
pub fn decode_subscription_with(bytes: &[u8]) -> Result<(Vec<String>, Option<Bytes>), ClientError> {
    let subscription: ConsumerProtocolSubscription =
        decode_versioned(bytes, "subscription", claimed_counts::check_subscription)?;
    let topics = subscription
        .topics
        .iter()
        .map(|t| t.as_str().to_string())
        .collect();
    Ok((topics, subscription.user_data))
}

/// A member's assignment, as the leader sends it in SyncGroup.
#[doc(hidden)]
pub fn encode_assignment(partitions: &[TopicPartition]) -> Result<Bytes, ClientError> {
    encode_assignment_with(partitions, None)
}

/// An assignment carrying `user_data` from the group's own assignor.
pub fn encode_assignment_with(
    partitions: &[TopicPartition],
    user_data: Option<Bytes>,
) -> Result<Bytes, ClientError> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let assignment = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    AssignedTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(partitions)
                })
                .collect(),
        )
        .with_user_data(user_data);
    encode_versioned(&assignment)
}

/// The partitions of an assignment received from SyncGroup (empty bytes:
/// nothing assigned).
#[doc(hidden)]
pub fn decode_assignment(bytes: &[u8]) -> Result<Vec<TopicPartition>, ClientError> {
    Ok(decode_assignment_with(bytes)?.0)
}

/// An assignment's partitions and user data.
pub fn decode_assignment_with(
    bytes: &[u8],
) -> Result<(Vec<TopicPartition>, Option<Bytes>), ClientError> {
    if bytes.is_empty() {
        return Ok((Vec::new(), None));
    }
    let assignment: ConsumerProtocolAssignment =
        decode_versioned(bytes, "assignment", |body, _| {
            claimed_counts::check_assignment(body)
        })?;
    let mut partitions: Vec<TopicPartition> = assignment
        .assigned_partitions
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.0.as_str().to_string(), *p))
        })
        .collect();
    partitions.sort();
    Ok((partitions, assignment.user_data))
}

fn encode_versioned<T: Encodable>(message: &T) -> Result<Bytes, ClientError> {
    let mut buf = BytesMut::new();
    buf.put_i16(PROTOCOL_VERSION);
    message
        .encode(&mut buf, PROTOCOL_VERSION)
        .map_err(|e| ClientError::Invalid(format!("encoding a group protocol message: {e}")))?;
    Ok(buf.freeze())
}

/// Decodes a message after its version, once `check_counts` (given the
/// bytes after the version, and the version) has found no array count
/// past the bytes left.
fn decode_versioned<T: Decodable>(
    bytes: &[u8],
    what: &str,
    check_counts: fn(&[u8], i16) -> Result<(), ClientError>,
) -> Result<T, ClientError> {
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        return Err(ClientError::Protocol(format!(
            "a consumer {what} of {} bytes",
            bytes.len()
        )));
    }
    let version = buf.get_i16();
    if version < 0 {
        return Err(ClientError::Protocol(format!(
            "a consumer {what} of version {version}"
        )));
    }
    let version = version.min(PROTOCOL_VERSION_MAX);
    check_counts(&buf, version)?;
    T::decode(&mut buf, version)
        .map_err(|e| ClientError::Protocol(format!("a consumer {what}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(list: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        list.iter()
            .map(|(m, topics)| {
                (
                    m.to_string(),
                    topics.iter().map(|t| t.to_string()).collect(),
                )
            })
            .collect()
    }

    fn counts(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
        list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn parts(list: &[(&str, i32)]) -> Vec<TopicPartition> {
        list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
    }

    #[test]
    fn range_gives_the_first_members_the_remainder_per_topic() {
        let assigned = Assignor::Range.assign(
            &members(&[("a", &["t", "u"]), ("b", &["t", "u"])]),
            &counts(&[("t", 3), ("u", 3)]),
        );
        assert_eq!(
            assigned["a"],
            parts(&[("t", 0), ("t", 1), ("u", 0), ("u", 1)])
        );
        assert_eq!(assigned["b"], parts(&[("t", 2), ("u", 2)]));
    }

    #[test]
    fn round_robin_deals_across_topics_and_skips_members_not_subscribed() {
        let assigned = Assignor::RoundRobin.assign(
            &members(&[("a", &["t", "u"]), ("b", &["t"]), ("c", &["u"])]),
            &counts(&[("t", 3), ("u", 2)]),
        );
        assert_eq!(assigned["a"], parts(&[("t", 0), ("t", 2), ("u", 1)]));
        assert_eq!(assigned["b"], parts(&[("t", 1)]));
        assert_eq!(assigned["c"], parts(&[("u", 0)]));
    }

    #[test]
    fn every_member_is_listed_even_with_nothing_to_take() {
        let assigned = Assignor::Range.assign(
            &members(&[("a", &["t"]), ("b", &["t"])]),
            &counts(&[("t", 1)]),
        );
        assert_eq!(assigned["a"], parts(&[("t", 0)]));
        assert!(assigned["b"].is_empty());
    }

    #[test]
    fn subscriptions_and_assignments_round_trip() {
        let topics = vec!["t".to_string(), "u".to_string()];
        let bytes = encode_subscription(&topics).unwrap();
        assert_eq!(&bytes[..2], &[0, 0], "version 0 first");
        assert_eq!(decode_subscription(&bytes).unwrap(), topics);
        let partitions = parts(&[("t", 0), ("t", 2), ("u", 1)]);
        let bytes = encode_assignment(&partitions).unwrap();
        assert_eq!(decode_assignment(&bytes).unwrap(), partitions);
        assert!(decode_assignment(&[]).unwrap().is_empty());
        assert!(decode_subscription(&[0]).is_err());
        let data = Bytes::from_static(b"tasks");
        let bytes = encode_subscription_with(&topics, Some(data.clone())).unwrap();
        assert_eq!(
            decode_subscription_with(&bytes).unwrap(),
            (topics, Some(data.clone()))
        );
        let bytes = encode_assignment_with(&partitions, Some(data.clone())).unwrap();
        assert_eq!(
            decode_assignment_with(&bytes).unwrap(),
            (partitions, Some(data))
        );
    }
}
