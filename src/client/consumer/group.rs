//! A consumer's membership in a group: the classic protocol of JoinGroup,
//! SyncGroup, Heartbeat and LeaveGroup against the group's coordinator.
//!
//! Membership keeps a connection of its own to the coordinator, so a
//! JoinGroup the coordinator holds until the whole group has rejoined does
//! not hold up the consumer's fetches behind it. Heartbeats run in a
//! background task between rebalances; when the coordinator answers one
//! with a rebalance (or no longer knows the member), the task stops and
//! marks the membership for rejoining, which the consumer's next poll does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::assignor::{self, Assignor, TopicPartition};
use crate::client::admin::coordinator;
use crate::client::connection::decode_or_error_code;
use crate::client::error::codes;
use crate::client::{ClientError, Cluster, Connection};

const JOIN_GROUP_VERSION_MAX: i16 = 9;
const SYNC_GROUP_VERSION_MAX: i16 = 5;
const HEARTBEAT_VERSION_MAX: i16 = 4;
const LEAVE_GROUP_VERSION_MAX: i16 = 5;
/// The protocol type of consumer groups.
const PROTOCOL_TYPE: &str = "consumer";
/// Join attempts before a rebalance is given up (each may wait for the
/// whole group; errors that need no wait retry at once).
const JOIN_ATTEMPTS: u32 = 20;

/// Timing and assignors of a membership.
#[derive(Debug, Clone)]
pub(crate) struct MembershipConfig {
    pub group: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub assignors: Vec<Assignor>,
}

pub(crate) struct Membership {
    cluster: Arc<Cluster>,
    config: MembershipConfig,
    member_id: String,
    generation: i32,
    /// Set by the heartbeat task (or a failed commit) when the member must
    /// join again.
    rejoin: Arc<AtomicBool>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
    connection: Option<Arc<Connection>>,
    /// Set when the coordinator stopped answering: connect afresh.
    reconnect: Arc<AtomicBool>,
}

impl Drop for Membership {
    fn drop(&mut self) {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
    }
}

impl Membership {
    pub fn new(cluster: Arc<Cluster>, config: MembershipConfig) -> Self {
        Self {
            cluster,
            config,
            member_id: String::new(),
            generation: -1,
            rejoin: Arc::new(AtomicBool::new(true)),
            heartbeat: None,
            connection: None,
            reconnect: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the member must (re)join before it may consume.
    pub fn needs_rejoin(&self) -> bool {
        self.rejoin.load(Ordering::Relaxed)
    }

    /// Marks the membership for rejoining (after a commit was refused for
    /// a stale generation, for example).
    pub fn request_rejoin(&self) {
        self.rejoin.store(true, Ordering::Relaxed);
    }

    pub fn generation(&self) -> (i32, &str) {
        (self.generation, &self.member_id)
    }

    /// Joins (or rejoins) the group subscribed to `topics`, and returns this
    /// member's assignment once the group is stable.
    pub async fn join(&mut self, topics: &[String]) -> Result<Vec<TopicPartition>, ClientError> {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
        let mut last_error = None;
        for attempt in 0..JOIN_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(self.cluster.config().retry_backoff).await;
            }
            match self.join_once(topics).await {
                Ok(joined) => {
                    self.rejoin.store(false, Ordering::Relaxed);
                    self.start_heartbeat();
                    return Ok(joined);
                }
                Err(error) => {
                    tracing::debug!(group = %self.config.group, "join attempt failed: {error}");
                    match error.code() {
                        Some(codes::UNKNOWN_MEMBER_ID | codes::ILLEGAL_GENERATION) => {
                            self.member_id.clear();
                            self.generation = -1;
                        }
                        Some(codes::REBALANCE_IN_PROGRESS) => {}
                        _ if error.is_retriable() => self.connection = None,
                        _ => return Err(error),
                    }
                    last_error = Some(error);
                }
            }
        }
        Err(last_error.unwrap_or(ClientError::Closed))
    }

    /// A dedicated connection to the group's coordinator.
    async fn coordinator(&mut self) -> Result<Arc<Connection>, ClientError> {
        if self.reconnect.swap(false, Ordering::Relaxed) {
            self.connection = None;
        }
        if let Some(connection) = &self.connection
            && !connection.is_broken()
        {
            return Ok(Arc::clone(connection));
        }
        let shared = coordinator(&self.cluster, &self.config.group).await?;
        // JoinGroup may be held for the whole rebalance timeout.
        let timeout = self.config.rebalance_timeout + self.cluster.config().request_timeout;
        let connection = Arc::new(
            Connection::connect(shared.addr(), &self.cluster.config().client_id, timeout).await?,
        );
        self.connection = Some(Arc::clone(&connection));
        Ok(connection)
    }

    async fn join_once(&mut self, topics: &[String]) -> Result<Vec<TopicPartition>, ClientError> {
        let connection = self.coordinator().await?;
        let response = loop {
            let response = self.send_join(&connection, topics).await?;
            if response.error_code == codes::MEMBER_ID_REQUIRED {
                // JoinGroup v4+: the coordinator names the member, which
                // joins again under that id.
                self.member_id = response.member_id.as_str().to_string();
                continue;
            }
            break response;
        };
        if response.error_code != codes::NONE {
            return Err(ClientError::kafka(response.error_code, None, None));
        }
        self.member_id = response.member_id.as_str().to_string();
        self.generation = response.generation_id;
        let protocol = response
            .protocol_name
            .as_ref()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let assignments = if response.leader.as_str() == self.member_id {
            self.lead(&response, &protocol).await?
        } else {
            Vec::new()
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(s(&self.config.group)))
            .with_generation_id(self.generation)
            .with_member_id(s(&self.member_id))
            .with_protocol_type(Some(s(PROTOCOL_TYPE)))
            .with_protocol_name(Some(s(&protocol)))
            .with_assignments(assignments);
        let version = connection.version::<SyncGroupRequest>(SYNC_GROUP_VERSION_MAX)?;
        let body = connection.send_for_body(&sync, version).await?;
        let synced =
            decode_or_error_code::<SyncGroupResponse>(body, version, error_at(version, 1))?
                .map_err(|code| ClientError::kafka(code, None, None))?;
        if synced.error_code != codes::NONE {
            return Err(ClientError::kafka(synced.error_code, None, None));
        }
        let assignment = assignor::decode_assignment(&synced.assignment)?;
        tracing::debug!(
            group = %self.config.group,
            generation = self.generation,
            member = %self.member_id,
            ?assignment,
            "joined the group"
        );
        Ok(assignment)
    }

    async fn send_join(
        &self,
        connection: &Connection,
        topics: &[String],
    ) -> Result<JoinGroupResponse, ClientError> {
        let metadata = assignor::encode_subscription(topics)?;
        let protocols = self
            .config
            .assignors
            .iter()
            .map(|a| {
                JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(a.name()))
                    .with_metadata(metadata.clone())
            })
            .collect();
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(s(&self.config.group)))
            .with_session_timeout_ms(millis(self.config.session_timeout))
            .with_rebalance_timeout_ms(millis(self.config.rebalance_timeout))
            .with_member_id(s(&self.member_id))
            .with_protocol_type(s(PROTOCOL_TYPE))
            .with_protocols(protocols);
        let version = connection.version::<JoinGroupRequest>(JOIN_GROUP_VERSION_MAX)?;
        let body = connection.send_for_body(&request, version).await?;
        decode_or_error_code::<JoinGroupResponse>(body, version, error_at(version, 2))?
            .map_err(|code| ClientError::kafka(code, None, None))
    }

    /// The leader's part: assign every member's subscribed partitions with
    /// the protocol the group chose.
    async fn lead(
        &self,
        response: &JoinGroupResponse,
        protocol: &str,
    ) -> Result<Vec<SyncGroupRequestAssignment>, ClientError> {
        let assignor = Assignor::from_name(protocol).ok_or_else(|| {
            ClientError::Protocol(format!("the group chose an unknown assignor {protocol:?}"))
        })?;
        let mut members = BTreeMap::new();
        for member in &response.members {
            let topics = assignor::decode_subscription(&member.metadata)?;
            members.insert(member.member_id.as_str().to_string(), topics);
        }
        let mut wanted: Vec<String> = members.values().flatten().cloned().collect();
        wanted.sort();
        wanted.dedup();
        self.cluster.refresh(&wanted).await?;
        let mut counts = BTreeMap::new();
        for topic in &wanted {
            match self.cluster.topic(topic).await {
                Ok(info) => {
                    counts.insert(topic.clone(), info.partitions.len() as i32);
                }
                // A subscribed topic that does not exist (yet) gets nothing.
                Err(error) => tracing::debug!("not assigning {topic}: {error}"),
            }
        }
        let assigned = assignor.assign(&members, &counts);
        assigned
            .into_iter()
            .map(|(member, partitions)| {
                Ok(SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(member))
                    .with_assignment(assignor::encode_assignment(&partitions)?))
            })
            .collect()
    }

    fn start_heartbeat(&mut self) {
        let Some(connection) = self.connection.clone() else {
            return;
        };
        let rejoin = Arc::clone(&self.rejoin);
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(s(&self.config.group)))
            .with_generation_id(self.generation)
            .with_member_id(s(&self.member_id));
        let interval = self.config.heartbeat_interval;
        // The connection waits as long as a JoinGroup may take; a heartbeat
        // unanswered for a session is a coordinator gone.
        let session = self.config.session_timeout;
        let group = self.config.group.clone();
        let reconnect = Arc::clone(&self.reconnect);
        self.heartbeat = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let sent = connection.send(&request, HEARTBEAT_VERSION_MAX);
                let Ok(answer) = tokio::time::timeout(session, sent).await else {
                    tracing::debug!(%group, "no heartbeat answer within {session:?}; rejoining");
                    reconnect.store(true, Ordering::Relaxed);
                    rejoin.store(true, Ordering::Relaxed);
                    return;
                };
                match answer {
                    Ok(response) if response.error_code == codes::NONE => {}
                    Ok(response) => {
                        tracing::debug!(
                            %group,
                            "heartbeat answered with {}; rejoining",
                            crate::client::error::code_name(response.error_code)
                        );
                        if moved(response.error_code) {
                            reconnect.store(true, Ordering::Relaxed);
                        }
                        rejoin.store(true, Ordering::Relaxed);
                        return;
                    }
                    // A lost connection: the next poll finds the
                    // coordinator again and rejoins.
                    Err(error) => {
                        tracing::debug!(%group, "heartbeat failed: {error}; rejoining");
                        rejoin.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }));
    }

    /// Leaves the group (its partitions are reassigned at once rather than
    /// after the session times out), finding a coordinator that moved.
    pub async fn leave(&mut self) -> Result<(), ClientError> {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
        if self.member_id.is_empty() {
            return Ok(());
        }
        let mut attempts = 0;
        loop {
            match self.leave_once().await {
                Err(error) if error.is_retriable() && attempts < self.cluster.config().retries => {
                    tracing::debug!(group = %self.config.group, "leaving failed: {error}");
                    attempts += 1;
                    self.connection = None;
                    tokio::time::sleep(self.cluster.config().retry_backoff).await;
                }
                left => return left,
            }
        }
    }

    async fn leave_once(&mut self) -> Result<(), ClientError> {
        let connection = self.coordinator().await?;
        let version = connection.version::<LeaveGroupRequest>(LEAVE_GROUP_VERSION_MAX)?;
        let mut request =
            LeaveGroupRequest::default().with_group_id(GroupId(s(&self.config.group)));
        if version >= 3 {
            request.members = vec![MemberIdentity::default().with_member_id(s(&self.member_id))];
        } else {
            request.member_id = s(&self.member_id);
        }
        let response = connection.send_versioned(&request, version).await?;
        match response.error_code {
            codes::NONE | codes::UNKNOWN_MEMBER_ID => {
                self.member_id.clear();
                self.generation = -1;
                self.rejoin.store(true, Ordering::Relaxed);
                Ok(())
            }
            code => Err(ClientError::kafka(code, None, None)),
        }
    }
}

/// Where an answer's error code sits: first, after the throttle time from
/// version `throttled` on. (Read directly when an error answer does not
/// decode: see [`decode_or_error_code`].)
fn error_at(version: i16, throttled: i16) -> usize {
    if version >= throttled { 4 } else { 0 }
}

/// Whether `code` says the coordinator is elsewhere (or not ready): the
/// member finds it again rather than asking the same broker.
fn moved(code: i16) -> bool {
    matches!(
        code,
        codes::NOT_COORDINATOR
            | codes::COORDINATOR_NOT_AVAILABLE
            | codes::COORDINATOR_LOAD_IN_PROGRESS
    )
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn millis(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis()).unwrap_or(i32::MAX)
}
