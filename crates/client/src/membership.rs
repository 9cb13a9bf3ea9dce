//! A member of a group: the classic protocol of JoinGroup, SyncGroup,
//! Heartbeat and LeaveGroup against the group's coordinator, for any
//! [`GroupProtocol`] (the consumer's, or an app's tasks).
//!
//! Membership keeps a connection of its own to the coordinator, so a
//! JoinGroup the coordinator holds until the whole group has rejoined does
//! not hold up the member's other requests behind it. Heartbeats run in a
//! background task between rebalances; when the coordinator answers one
//! with a rebalance (or no longer knows the member), the task stops and
//! marks the membership for rejoining, which the member's owner does.
//!
//! A static member (`instance_id`, KIP-345) keeps its place across
//! restarts within the session timeout: it joins under the same instance
//! id, the coordinator hands it its assignment back without a rebalance,
//! and it does not leave the group when it stops.

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

use bytes::Bytes;

use crate::admin::coordinator;
use crate::connection::decode_or_error_code;
use crate::error::codes;
use crate::{ClientError, Cluster, Connection};

const JOIN_GROUP_VERSION_MAX: i16 = 9;
const SYNC_GROUP_VERSION_MAX: i16 = 5;
const HEARTBEAT_VERSION_MAX: i16 = 4;
const LEAVE_GROUP_VERSION_MAX: i16 = 5;
/// Join attempts before a rebalance is given up (each may wait for the
/// whole group; errors that need no wait retry at once).
const JOIN_ATTEMPTS: u32 = 20;

/// The group and the timing of a membership.
#[derive(Debug, Clone)]
pub struct MembershipConfig {
    pub group: String,
    /// Static membership: the same id across restarts of one instance.
    pub instance_id: Option<String>,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub heartbeat_interval: Duration,
}

/// A member as the coordinator lists it to the leader.
#[derive(Debug, Clone)]
pub struct JoinedMember {
    pub member_id: String,
    /// Its metadata for the protocol the group chose.
    pub metadata: Bytes,
}

/// What a group's members agree on: the protocol type, the protocols each
/// member offers with its metadata, and the leader's assignment.
pub trait GroupProtocol: Sync {
    /// The group's protocol type (`consumer` for consumer groups).
    fn protocol_type(&self) -> &str;

    /// (protocol name, this member's metadata), preferred first.
    fn protocols(&self) -> Result<Vec<(String, Bytes)>, ClientError>;

    /// The leader's part: every member's assignment under `protocol`.
    /// Members left out get an empty one.
    fn assign(
        &self,
        cluster: &Arc<Cluster>,
        protocol: &str,
        members: &[JoinedMember],
    ) -> impl Future<Output = Result<BTreeMap<String, Bytes>, ClientError>> + Send;

    /// Whether this member's metadata claims what it owns now (Kafka's
    /// cooperative protocols). Such a member that lost its place must not
    /// join again with the same claims: [`Membership::join`] then ends
    /// with the coordinator's error, [`Membership::take_lost`] is set, and
    /// the caller describes itself afresh before it joins again.
    fn claims_owned(&self) -> bool {
        false
    }
}

pub struct Membership {
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
    /// Set when the coordinator no longer knew the member (its session
    /// expired): whatever it was assigned is lost, not merely to be
    /// revoked (KIP-429's "lost" partitions).
    lost: Arc<AtomicBool>,
    /// Set by the heartbeat task when the coordinator answered that it
    /// does not know the member (or its generation): the next join starts
    /// without the old member id.
    forgotten: Arc<AtomicBool>,
    /// Whether a join is under way, or was given up unfinished (its future
    /// dropped): the coordinator may hold that JoinGroup for the whole
    /// rebalance, and answers a connection's requests in order, so a
    /// LeaveGroup sent behind it would wait as long.
    joining: bool,
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
            lost: Arc::new(AtomicBool::new(false)),
            forgotten: Arc::new(AtomicBool::new(false)),
            joining: false,
        }
    }

    /// Whether the member lost its membership since last asked: the group
    /// has moved its assignment on without it.
    pub fn take_lost(&self) -> bool {
        self.lost.swap(false, Ordering::Relaxed)
    }

    /// Whether the member lost its membership and has not been asked yet
    /// ([`Membership::take_lost`] asks and forgets).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
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

    /// Joins (or rejoins) the group with `protocol`, and returns this
    /// member's assignment (as the protocol encodes it) once the group is
    /// stable.
    pub async fn join<P: GroupProtocol>(&mut self, protocol: &P) -> Result<Bytes, ClientError> {
        self.joining = true;
        let joined = self.join_attempts(protocol).await;
        self.joining = false;
        joined
    }

    async fn join_attempts<P: GroupProtocol>(
        &mut self,
        protocol: &P,
    ) -> Result<Bytes, ClientError> {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
        // Told by a heartbeat that the coordinator no longer knows it: it
        // joins as new (its loss was reported then, not again here).
        if self.forgotten.swap(false, Ordering::Relaxed) {
            self.member_id.clear();
            self.generation = -1;
        }
        // Whether it held a place before this join (a JoinGroup answered
        // below stores the generation it is given).
        let had_place = self.generation >= 0;
        let mut last_error = None;
        for attempt in 0..JOIN_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(self.cluster.config().retry_backoff).await;
            }
            match self.join_once(protocol).await {
                Ok(joined) => {
                    self.rejoin.store(false, Ordering::Relaxed);
                    self.start_heartbeat();
                    return Ok(joined);
                }
                Err(error) => {
                    tracing::debug!(group = %self.config.group, "join attempt failed: {error}");
                    match error.code() {
                        Some(codes::UNKNOWN_MEMBER_ID | codes::ILLEGAL_GENERATION) => {
                            // The group went on without this member: what it
                            // was assigned is lost (Kafka's consumers call
                            // onPartitionsLost here), and it joins as new.
                            self.member_id.clear();
                            self.generation = -1;
                            if had_place {
                                self.lost.store(true, Ordering::Relaxed);
                                if protocol.claims_owned() {
                                    return Err(error);
                                }
                            }
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
        let connection =
            connect_to_coordinator(&self.cluster, &self.config.group, self.join_timeout()).await?;
        self.connection = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// How long a request to the coordinator may wait: a JoinGroup may be
    /// held for the whole rebalance timeout.
    fn join_timeout(&self) -> Duration {
        self.config.rebalance_timeout + self.cluster.config().request_timeout
    }

    async fn join_once<P: GroupProtocol>(&mut self, protocol: &P) -> Result<Bytes, ClientError> {
        let connection = self.coordinator().await?;
        let response = loop {
            let response = self.send_join(&connection, protocol).await?;
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
        let chosen = response
            .protocol_name
            .as_ref()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let assignments = if response.leader.as_str() == self.member_id {
            self.lead(&response, protocol, &chosen).await?
        } else {
            Vec::new()
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(s(&self.config.group)))
            .with_generation_id(self.generation)
            .with_member_id(s(&self.member_id))
            .with_group_instance_id(self.config.instance_id.as_deref().map(s))
            .with_protocol_type(Some(s(protocol.protocol_type())))
            .with_protocol_name(Some(s(&chosen)))
            .with_assignments(assignments);
        let version = connection.version::<SyncGroupRequest>(SYNC_GROUP_VERSION_MAX)?;
        let body = connection.send_for_body(&sync, version).await?;
        let synced =
            decode_or_error_code::<SyncGroupResponse>(body, version, error_at(version, 1))?
                .map_err(|code| ClientError::kafka(code, None, None))?;
        if synced.error_code != codes::NONE {
            return Err(ClientError::kafka(synced.error_code, None, None));
        }
        tracing::debug!(
            group = %self.config.group,
            generation = self.generation,
            member = %self.member_id,
            "joined the group"
        );
        Ok(synced.assignment)
    }

    async fn send_join<P: GroupProtocol>(
        &self,
        connection: &Connection,
        protocol: &P,
    ) -> Result<JoinGroupResponse, ClientError> {
        let protocols = protocol
            .protocols()?
            .into_iter()
            .map(|(name, metadata)| {
                JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_string(name))
                    .with_metadata(metadata)
            })
            .collect();
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(s(&self.config.group)))
            .with_session_timeout_ms(millis(self.config.session_timeout))
            .with_rebalance_timeout_ms(millis(self.config.rebalance_timeout))
            .with_member_id(s(&self.member_id))
            .with_group_instance_id(self.config.instance_id.as_deref().map(s))
            .with_protocol_type(s(protocol.protocol_type()))
            .with_protocols(protocols);
        let version = connection.version::<JoinGroupRequest>(JOIN_GROUP_VERSION_MAX)?;
        if self.config.instance_id.is_some() && version < 5 {
            return Err(ClientError::Invalid(
                "static membership (an instance id) needs a broker with JoinGroup v5 (Kafka 2.3 or newer)".into(),
            ));
        }
        let body = connection.send_for_body(&request, version).await?;
        decode_or_error_code::<JoinGroupResponse>(body, version, error_at(version, 2))?
            .map_err(|code| ClientError::kafka(code, None, None))
    }

    /// The leader's part: every member's assignment from the protocol.
    async fn lead<P: GroupProtocol>(
        &self,
        response: &JoinGroupResponse,
        protocol: &P,
        chosen: &str,
    ) -> Result<Vec<SyncGroupRequestAssignment>, ClientError> {
        let members: Vec<JoinedMember> = response
            .members
            .iter()
            .map(|m| JoinedMember {
                member_id: m.member_id.as_str().to_string(),
                metadata: m.metadata.clone(),
            })
            .collect();
        let assigned = protocol.assign(&self.cluster, chosen, &members).await?;
        Ok(assigned
            .into_iter()
            .map(|(member, assignment)| {
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(member))
                    .with_assignment(assignment)
            })
            .collect())
    }

    /// Heartbeats in the background until the coordinator asks for a
    /// rejoin. A coordinator that moved (NOT_COORDINATOR, or its connection
    /// lost) is looked up again and heartbeated there, as Kafka's clients
    /// do: the group's state moves with its coordinator, so the member
    /// stands and the group does not rebalance. Only a session without an
    /// answer gives the membership up for a rejoin.
    fn start_heartbeat(&mut self) {
        let Some(connection) = self.connection.clone() else {
            return;
        };
        let rejoin = Arc::clone(&self.rejoin);
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(s(&self.config.group)))
            .with_generation_id(self.generation)
            .with_member_id(s(&self.member_id))
            .with_group_instance_id(self.config.instance_id.as_deref().map(s));
        let interval = self.config.heartbeat_interval;
        // The connection waits as long as a JoinGroup may take; a heartbeat
        // unanswered for a session is a coordinator gone.
        let session = self.config.session_timeout;
        let cluster = Arc::clone(&self.cluster);
        let request_timeout = self.cluster.config().request_timeout;
        let join_timeout = self.join_timeout();
        let group = self.config.group.clone();
        let reconnect = Arc::clone(&self.reconnect);
        let lost = Arc::clone(&self.lost);
        let forgotten = Arc::clone(&self.forgotten);
        self.heartbeat = Some(tokio::spawn(async move {
            let mut connection = connection;
            let mut answered = tokio::time::Instant::now();
            loop {
                tokio::time::sleep(interval).await;
                // An answer is waited for no longer than a request may take
                // (nor than a session).
                let sent = connection.send(&request, HEARTBEAT_VERSION_MAX);
                let answer = tokio::time::timeout(request_timeout.min(session), sent).await;
                let why = match answer {
                    Ok(Ok(response)) if response.error_code == codes::NONE => {
                        answered = tokio::time::Instant::now();
                        continue;
                    }
                    Ok(Ok(response)) if !moved(response.error_code) => {
                        tracing::debug!(
                            %group,
                            "heartbeat answered with {}; rejoining",
                            crate::error::code_name(response.error_code)
                        );
                        if matches!(
                            response.error_code,
                            codes::UNKNOWN_MEMBER_ID | codes::ILLEGAL_GENERATION
                        ) {
                            lost.store(true, Ordering::Relaxed);
                            forgotten.store(true, Ordering::Relaxed);
                        }
                        rejoin.store(true, Ordering::Relaxed);
                        return;
                    }
                    Ok(Ok(response)) => crate::error::code_name(response.error_code).to_string(),
                    Ok(Err(error)) => error.to_string(),
                    Err(_) => "no answer in time".to_string(),
                };
                // Whatever connection the membership holds is to the old
                // coordinator: the next join or leave connects afresh.
                reconnect.store(true, Ordering::Relaxed);
                if answered.elapsed() >= session {
                    // The coordinator has expired the member by now:
                    // whatever it was assigned is someone else's.
                    tracing::debug!(%group, "heartbeat failed ({why}) for a whole session; rejoining");
                    lost.store(true, Ordering::Relaxed);
                    rejoin.store(true, Ordering::Relaxed);
                    return;
                }
                tracing::debug!(%group, "heartbeat failed ({why}); heartbeating the coordinator found now");
                match connect_to_coordinator(&cluster, &group, join_timeout).await {
                    Ok(found) => connection = found,
                    Err(error) => tracing::debug!(%group, "finding the coordinator: {error}"),
                }
            }
        }));
    }

    /// Leaves the group (its partitions are reassigned at once rather than
    /// after the session times out), finding a coordinator that moved. A
    /// static member only stops heartbeating: it keeps its place for a
    /// restart within the session timeout.
    pub async fn leave(&mut self) -> Result<(), ClientError> {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
        if self.member_id.is_empty() || self.config.instance_id.is_some() {
            return Ok(());
        }
        // A join given up unfinished may still be held at the coordinator:
        // leave on a connection of its own.
        if std::mem::take(&mut self.joining) {
            self.connection = None;
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

/// A connection of its own to `group`'s coordinator, its requests waiting
/// at most `timeout`.
async fn connect_to_coordinator(
    cluster: &Arc<Cluster>,
    group: &str,
    timeout: Duration,
) -> Result<Arc<Connection>, ClientError> {
    let shared = coordinator(cluster, group).await?;
    let config = cluster.config();
    let connection = super::authenticate::connect_secured(
        shared.addr(),
        &config.client_id,
        timeout,
        &config.security,
    )
    .await?;
    Ok(Arc::new(connection))
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
