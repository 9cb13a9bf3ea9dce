//! An app against its log: the log opened (embedded) or connected to
//! (remote), the Kafka protocol served from an embedded app, and the
//! topology resolved (partition counts, derived topics created).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::RuntimeError;
use crate::location::Location;
use crate::log_access::LogAccess;
use crate::spec::OutputSpec;
use crate::spec::TopicOutput;
use crate::topology::{App, ProcessorSpec};
use strata_log::{CleanupPolicy, LogConfig, LogError, LogManager};

/// A processor's outputs as its tasks emit to them.
pub(crate) fn outputs(
    app: &App,
    spec: &ProcessorSpec,
    partitions: &BTreeMap<String, i32>,
) -> Vec<TopicOutput> {
    let output = |o: &OutputSpec| TopicOutput {
        spec: o.clone(),
        log_topic: app.log_topic(&o.topic),
        partitions: partitions[&o.topic],
    };
    spec.outputs.iter().map(output).collect()
}

/// Partition counts of every topic of the app, creating derived topics
/// (with their processor's input partition count unless declared).
pub(crate) async fn resolve(
    app: &App,
    log: &LogAccess,
) -> Result<BTreeMap<String, i32>, RuntimeError> {
    let mut partitions: BTreeMap<String, i32> = BTreeMap::new();
    for topic in app.external_inputs() {
        let count =
            log.partition_count(&topic)
                .await?
                .ok_or_else(|| RuntimeError::UnknownTopic {
                    topic: topic.clone(),
                })?;
        partitions.insert(topic, count);
    }
    // Processors in an order where each one's inputs are known: a
    // derived topic is created by the processor that writes it.
    let mut left: Vec<usize> = (0..app.processors.len()).collect();
    while !left.is_empty() {
        let ready = left.iter().position(|&i| {
            app.processors[i]
                .inputs
                .iter()
                .all(|t| partitions.contains_key(t))
        });
        let Some(at) = ready else {
            let names: Vec<&str> = left
                .iter()
                .map(|&i| app.processors[i].name.as_str())
                .collect();
            return Err(RuntimeError::Config(format!(
                "processors {names:?} read each other's outputs in a cycle"
            )));
        };
        let spec = &app.processors[left.remove(at)];
        let counts: Vec<i32> = spec.inputs.iter().map(|t| partitions[t]).collect();
        if counts.iter().any(|&c| c != counts[0]) {
            return Err(RuntimeError::Config(format!(
                "the inputs of processor {:?} ({:?}) have different partition counts {counts:?}; partition i of each goes to one task, so they must match",
                spec.name, spec.inputs
            )));
        }
        for output in &spec.outputs {
            let wanted = output.partitions.unwrap_or(counts[0]);
            let count = log
                .ensure_topic(&app.log_topic(&output.topic), wanted)
                .await?;
            if let Some(known) = partitions.get(&output.topic)
                && *known != count
            {
                return Err(RuntimeError::Config(format!(
                    "topic {:?}: partition counts disagree",
                    output.topic
                )));
            }
            partitions.insert(output.topic.clone(), count);
        }
    }
    Ok(partitions)
}

/// Creates the changelog topic of every store when the app writes
/// changelogs (remote, or asked for), and, remote, every processor's
/// positions log: compacted, one partition per task; an existing one must
/// have as many partitions as its processor's inputs and be compacted only
/// (retention would delete the state a restore reads).
pub(crate) async fn ensure_changelogs(
    app: &App,
    log: &LogAccess,
    partitions: &BTreeMap<String, i32>,
) -> Result<(), RuntimeError> {
    if !matches!(log, LogAccess::Remote(_)) && !app.config.changelogs {
        return Ok(());
    }
    let compacted = [("cleanup.policy".to_string(), "compact".to_string())];
    let remote = matches!(log, LogAccess::Remote(_));
    for spec in &app.processors {
        let tasks = partitions[&spec.inputs[0]];
        let positions = remote.then(|| app.positions_topic(&spec.name));
        let stores = spec.stores.iter().map(|s| app.changelog_topic(&s.name));
        for topic in stores.chain(positions) {
            let count = log.ensure_topic_with(&topic, tasks, &compacted).await?;
            if count != tasks {
                return Err(RuntimeError::Config(format!(
                    "{} topic {topic:?} has {count} partitions, but processor {:?} runs {tasks} tasks (the partitions of {:?}); it holds one partition per task: delete it, or give the inputs {count} partitions",
                    kind_of(&topic),
                    spec.name,
                    spec.inputs
                )));
            }
            check_compacted(log, &topic).await?;
        }
    }
    Ok(())
}

/// What `topic` (one `ensure_changelogs` makes, or a dead-letter topic's
/// marks) is, for messages.
fn kind_of(topic: &str) -> &'static str {
    if topic.ends_with("-changelog") {
        "changelog"
    } else if topic.ends_with("-replayed") {
        "dead-letter marks"
    } else {
        "positions log"
    }
}

/// Refuses a changelog whose `cleanup.policy` is not `compact`: with
/// `delete` retention drops state the changelog is the only copy of, and
/// a restore would bring back less than was committed.
pub(crate) async fn check_compacted(log: &LogAccess, topic: &str) -> Result<(), RuntimeError> {
    let compacted_only = CleanupPolicy {
        delete: false,
        compact: true,
    };
    match log.cleanup_policy(topic).await? {
        Some(policy) if policy != compacted_only => Err(RuntimeError::Config(format!(
            "{} topic {topic:?} has cleanup.policy={}, but it must be compacted only (retention would delete what it must keep: state a restore needs, or which dead letters were replayed): set cleanup.policy=compact on it (kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config cleanup.policy=compact), or delete it for the app to create it anew",
            kind_of(topic),
            policy.name()
        ))),
        Some(_) => Ok(()),
        None => {
            tracing::warn!(
                "the cluster does not describe topic configs: {} {topic:?} is not checked to be compacted",
                kind_of(topic)
            );
            Ok(())
        }
    }
}

/// Opens the log (embedded) or connects (remote).
pub(crate) async fn open(
    location: &Location,
) -> Result<(LogAccess, Option<Arc<LogManager>>), RuntimeError> {
    match location {
        Location::Embedded { data_dir, .. } => {
            let manager = match LogManager::open(data_dir, LogConfig::default()) {
                Ok(manager) => Arc::new(manager),
                // Another process holds the directory: most likely the app
                // itself, running embedded.
                Err(LogError::Io { error, .. })
                    if error.kind() == std::io::ErrorKind::WouldBlock =>
                {
                    return Err(RuntimeError::Locked {
                        path: data_dir.clone(),
                        why: format!(
                            "it is in use by another process (an app running embedded, or strata serve), and only one process can open a log directory; reach the log through that process's Kafka port instead, with `--bootstrap ADDR --state-dir {}/apps/<app>` in place of --data-dir (an embedded app serves the port with `run --serve ADDR`)",
                            data_dir.display()
                        ),
                    });
                }
                Err(error) => return Err(error.into()),
            };
            Ok((
                LogAccess::Embedded(Arc::clone(&manager), Arc::default()),
                Some(manager),
            ))
        }
        remote @ Location::Remote { .. } => {
            let config = remote.client_config().expect("a remote location");
            Ok((LogAccess::connect(config).await?.0, None))
        }
    }
}

/// Closes the embedded log `embedded` (none remote): every partition
/// flushed and the shutdown marked clean. A run that crashed does not
/// call it: it leaves the log as a killed process would.
pub(crate) fn close(embedded: Option<Arc<LogManager>>) -> Result<(), RuntimeError> {
    if let Some(manager) = embedded {
        match Arc::try_unwrap(manager) {
            Ok(manager) => manager.close()?,
            Err(_) => tracing::warn!("the log is still in use; not closed cleanly"),
        }
    }
    Ok(())
}
