//! The app's side of the group protocol: the `consumer` protocol's
//! subscription (the app's input topics, this member's view in the user
//! data) and the leader's assignment of the app's tasks (see `assignor`),
//! with the co-partitioning check.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;

use strata_client::membership::{GroupProtocol, JoinedMember};
use strata_client::{self as client, ClientError, Cluster};

use super::codec::{MemberInfo, TaskAssignment};
use super::{GroupProcessor, PROTOCOL, TaskId, assignor};

/// The app's side of the group protocol.
pub(super) struct TaskProtocol {
    pub group: String,
    pub processors: Vec<GroupProcessor>,
    pub info: MemberInfo,
    pub standbys: usize,
}

impl GroupProtocol for TaskProtocol {
    fn protocol_type(&self) -> &str {
        client::CONSUMER
    }

    /// Each member names the tasks it runs, so the assignor keeps them
    /// where they are.
    fn claims_owned(&self) -> bool {
        true
    }

    fn protocols(&self) -> Result<Vec<(String, Bytes)>, ClientError> {
        let topics = self.topics();
        let metadata = client::encode_subscription_with(&topics, Some(self.info.encode()))?;
        Ok(vec![(PROTOCOL.to_string(), metadata)])
    }

    async fn assign(
        &self,
        cluster: &Arc<Cluster>,
        _protocol: &str,
        members: &[JoinedMember],
    ) -> Result<BTreeMap<String, Bytes>, ClientError> {
        let topics = self.topics();
        let counts = client::partition_counts(cluster, topics.iter()).await?;
        let mut infos = BTreeMap::new();
        for member in members {
            let (_, data) = client::decode_subscription_with(&member.metadata)?;
            // A member whose view does not decode runs nothing it had.
            let info = data
                .map(|d| MemberInfo::decode(&d))
                .transpose()
                .unwrap_or_else(|error| {
                    tracing::warn!(member = %member.member_id, "its subscription: {error}");
                    None
                })
                .unwrap_or_default();
            infos.insert(member.member_id.clone(), info);
        }
        let (tasks, error) = match self.tasks(&counts) {
            Ok(tasks) => (tasks, String::new()),
            Err(error) => (BTreeSet::new(), error),
        };
        let assigned = assignor::assign(&tasks, &infos);
        let stateful: BTreeSet<TaskId> = (tasks.iter())
            .filter(|t| {
                self.processors
                    .iter()
                    .any(|p| p.name == t.processor && p.stateful)
            })
            .cloned()
            .collect();
        let mut standby = assignor::assign_standbys(&stateful, self.standbys, &assigned, &infos);
        tracing::debug!(group = %self.group, ?assigned, ?standby, "assigned the app's tasks");
        assigned
            .into_iter()
            .map(|(member, active)| {
                let partitions = self.partitions(&active);
                let data = TaskAssignment {
                    error: error.clone(),
                    standby: standby.remove(&member).unwrap_or_default(),
                    active,
                };
                let bytes = client::encode_assignment_with(&partitions, Some(data.encode()))?;
                Ok((member, bytes))
            })
            .collect()
    }
}

impl TaskProtocol {
    fn topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self
            .processors
            .iter()
            .flat_map(|p| p.inputs.iter().cloned())
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    /// Every task of the app, once each processor's inputs are known and
    /// co-partitioned; else why not.
    fn tasks(&self, counts: &BTreeMap<String, i32>) -> Result<BTreeSet<TaskId>, String> {
        let mut tasks = BTreeSet::new();
        for processor in &self.processors {
            let mut found = Vec::new();
            for topic in &processor.inputs {
                let count = counts
                    .get(topic)
                    .ok_or_else(|| format!("input topic {topic:?} does not exist"))?;
                found.push((topic.as_str(), *count));
            }
            if found.iter().any(|(_, c)| *c != found[0].1) {
                return Err(format!(
                    "the inputs of processor {:?} are not co-partitioned: {}; partition i of each goes to one task, so give them the same partition count",
                    processor.name,
                    found
                        .iter()
                        .map(|(t, c)| format!("{t} has {c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let count = found.first().map_or(0, |(_, c)| *c);
            tasks.extend((0..count).map(|n| TaskId::new(&processor.name, n)));
        }
        Ok(tasks)
    }

    /// The input partitions of `tasks`, as the `consumer` assignment shows
    /// them.
    fn partitions(&self, tasks: &BTreeSet<TaskId>) -> Vec<(String, i32)> {
        let mut partitions: Vec<(String, i32)> = tasks
            .iter()
            .flat_map(|task| {
                let inputs = self
                    .processors
                    .iter()
                    .find(|p| p.name == task.processor)
                    .map(|p| p.inputs.clone())
                    .unwrap_or_default();
                inputs.into_iter().map(move |t| (t, task.partition))
            })
            .collect();
        partitions.sort();
        partitions.dedup();
        partitions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protocol() -> TaskProtocol {
        TaskProtocol {
            group: "app".into(),
            processors: vec![GroupProcessor {
                name: "join".into(),
                inputs: vec!["clicks".into(), "users".into()],
                stateful: true,
            }],
            info: MemberInfo::default(),
            standbys: 0,
        }
    }

    #[test]
    fn tasks_are_one_per_partition_index_of_co_partitioned_inputs() {
        let counts = [("clicks".to_string(), 3), ("users".to_string(), 3)].into();
        let tasks = protocol().tasks(&counts).unwrap();
        assert_eq!(
            tasks,
            (0..3)
                .map(|n| TaskId::new("join", n))
                .collect::<BTreeSet<_>>()
        );
        let partitions = protocol().partitions(&[TaskId::new("join", 1)].into());
        assert_eq!(
            partitions,
            vec![("clicks".to_string(), 1), ("users".to_string(), 1)]
        );
    }

    #[test]
    fn inputs_not_co_partitioned_are_an_error_naming_them() {
        let counts = [("clicks".to_string(), 3), ("users".to_string(), 4)].into();
        let error = protocol().tasks(&counts).unwrap_err();
        assert!(error.contains("\"join\""), "{error}");
        assert!(error.contains("clicks has 3, users has 4"), "{error}");
        let missing = [("clicks".to_string(), 3)].into();
        assert!(
            protocol()
                .tasks(&missing)
                .unwrap_err()
                .contains("\"users\"")
        );
    }
}
