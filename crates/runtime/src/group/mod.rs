//! Instances of one app sharing its tasks: remote, every instance (same
//! app, same cluster) joins the group named after the app and runs the
//! share of tasks the group's leader assigns it (`assignor`: balanced,
//! sticky, cooperative). A task is one processor on one partition index
//! of its co-partitioned inputs.
//!
//! The group speaks the `consumer` protocol, its subscription listing the
//! app's input topics and its assignment the partitions of the member's
//! tasks, so any Kafka tool describes it; what strata needs beyond that
//! travels in the user data (`codec`).
//!
//! [`Member`] runs the membership on a task of its own: it joins, hands
//! each assignment to the runner, and joins again when the coordinator
//! asks (a heartbeat answered with a rebalance) or the runner does (after
//! giving tasks up). The runner tells it which tasks it runs: those go
//! into the next join as owned, so the leader keeps them where they are.
//!
//! Fencing, not membership, keeps two instances from running one task at
//! once: each task's transactional id fences every older producer of it
//! when the task starts (see `task::transaction`). A member that lost its
//! session (paused, cut off) may still believe in its tasks; their next
//! commit is refused and the runner gives them up.

mod assignor;
mod codec;
mod placement;
mod protocol;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::board::TaskBoard;
use crate::error::RuntimeError;
use strata_client::error::codes;
use strata_client::membership::{Membership, MembershipConfig};
use strata_client::{self as client, Cluster};

pub(crate) use codec::{MemberInfo, TaskAssignment};
pub(crate) use placement::placements;
pub use placement::tasks_of_assignment;
use protocol::TaskProtocol;

/// The only protocol an app's members offer.
const PROTOCOL: &str = "strata-tasks";
/// How often the member looks whether it must join again.
const REJOIN_CHECK: Duration = Duration::from_millis(50);
/// How long a member waits before asking the cluster again when it could
/// not reach it (Kafka's clients back off up to a second too).
pub(crate) const UNAVAILABLE_BACKOFF: Duration = Duration::from_secs(1);
/// How long a member told mid-join that it lost its place waits before it
/// joins again, claiming nothing (Kafka's retry.backoff.ms default).
const REJOIN_AFTER_LOST: Duration = Duration::from_millis(100);
/// How long a stopping member tries to leave its group: with the cluster
/// away it stops without, and its session expires instead.
const LEAVE_WAIT: Duration = Duration::from_secs(5);

/// One processor on one partition index of its inputs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TaskId {
    pub processor: String,
    pub partition: i32,
}

impl TaskId {
    pub fn new(processor: &str, partition: i32) -> Self {
        Self {
            processor: processor.to_string(),
            partition,
        }
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.processor, self.partition)
    }
}

/// How an instance takes part in its app's group.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    /// Static membership: an instance restarted under the same id within
    /// the session timeout gets its tasks back without a rebalance.
    pub instance_id: Option<String>,
    /// How long the group waits for a silent instance before its tasks
    /// move (also the rebalance timeout).
    pub session_timeout: Duration,
    /// Warm copies of each stateful task kept on other instances (as the
    /// group's leader has it set).
    pub standbys: usize,
    /// Whether the instance waits for a cluster that is away, rejoining
    /// every [`UNAVAILABLE_BACKOFF`] for as long as it takes (a run that
    /// goes on), or fails once the client's retries are spent (a run to
    /// the end of its inputs).
    pub wait_for_cluster: bool,
}

impl Default for GroupOptions {
    fn default() -> Self {
        Self {
            instance_id: None,
            session_timeout: Duration::from_secs(10),
            standbys: 0,
            wait_for_cluster: true,
        }
    }
}

/// A processor of the app as the group sees it: its name and its inputs'
/// names in the log (co-partitioned: partition i of each makes task i).
#[derive(Debug, Clone)]
pub(crate) struct GroupProcessor {
    pub name: String,
    pub inputs: Vec<String>,
    /// Whether its tasks keep state (and so may have standby copies).
    pub stateful: bool,
}

/// An assignment as the runner receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assigned {
    pub generation: i32,
    pub active: BTreeSet<TaskId>,
    pub standby: BTreeSet<TaskId>,
}

/// What the runner and the member share.
struct Shared {
    /// The tasks the runner runs now (stopping ones included).
    owned: Mutex<BTreeSet<TaskId>>,
    /// The instance's board: the copies of task state it holds.
    board: TaskBoard,
    rejoin: Notify,
    /// Set when the membership was lost: the runner gives every task up.
    lost: AtomicBool,
    /// The generation of the last assignment the runner followed.
    followed: std::sync::atomic::AtomicI32,
}

/// The instance's membership, run on a task of its own; see the module
/// doc.
pub(crate) struct Member {
    shared: Arc<Shared>,
    assigned: watch::Receiver<Option<Assigned>>,
    stop: watch::Sender<bool>,
    /// None once its end was reported by [`Member::next`].
    task: Option<tokio::task::JoinHandle<Result<(), RuntimeError>>>,
}

impl Member {
    /// Starts joining `group`. `board` says, at every join, which tasks'
    /// state this instance holds on disk and how far each copy read its
    /// changelogs (the leader gives a task to the furthest copy).
    pub fn start(
        cluster: Arc<Cluster>,
        group: String,
        processors: Vec<GroupProcessor>,
        board: TaskBoard,
        options: &GroupOptions,
        saved: Option<PathBuf>,
        query: Option<std::net::SocketAddr>,
    ) -> Self {
        let session = options.session_timeout;
        let config = MembershipConfig {
            group: group.clone(),
            instance_id: options.instance_id.clone(),
            session_timeout: session,
            rebalance_timeout: session,
            heartbeat_interval: (session / 3).max(Duration::from_millis(100)),
        };
        let shared = Arc::new(Shared {
            owned: Mutex::new(BTreeSet::new()),
            board,
            rejoin: Notify::new(),
            lost: AtomicBool::new(false),
            followed: std::sync::atomic::AtomicI32::new(0),
        });
        let (assigned_tx, assigned) = watch::channel(None);
        let (stop, stop_rx) = watch::channel(false);
        let membership = Membership::new(cluster, config);
        let protocol = TaskProtocol {
            group,
            processors,
            info: MemberInfo {
                owned: BTreeSet::new(),
                stored: BTreeSet::new(),
                query: query.map(|a| a.to_string()).unwrap_or_default(),
                copies: BTreeMap::new(),
            },
            standbys: options.standbys,
        };
        let task = tokio::spawn(member_loop(
            membership,
            protocol,
            Arc::clone(&shared),
            assigned_tx,
            stop_rx,
            saved,
            options.wait_for_cluster,
        ));
        Self {
            shared,
            assigned,
            stop,
            task: Some(task),
        }
    }

    /// Tells the member which tasks run here now.
    pub fn set_owned(&self, owned: BTreeSet<TaskId>) {
        *self.shared.owned.lock().expect("never poisoned") = owned;
    }

    /// Tells the member the runner follows assignment `generation` now
    /// (its owned tasks are set accordingly).
    pub fn followed(&self, generation: i32) {
        self.shared.followed.store(generation, Ordering::Relaxed);
    }

    /// Asks for a rebalance (after tasks were given up).
    pub fn rejoin(&self) {
        self.shared.rejoin.notify_one();
    }

    /// [`rejoin`](Self::rejoin), after `delay`.
    pub fn rejoin_after(&self, delay: Duration) {
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            shared.rejoin.notify_one();
        });
    }

    /// Leaves the group (a static member keeps its place).
    pub async fn leave(self) -> Result<(), RuntimeError> {
        let _ = self.stop.send(true);
        let Some(task) = self.task else {
            return Ok(());
        };
        match task.await {
            Ok(result) => result,
            Err(error) => Err(RuntimeError::TaskPanicked {
                task: "group membership".into(),
                reason: error.to_string(),
            }),
        }
    }

    /// Drops out as a killed process would: the membership's task ends
    /// without a LeaveGroup (its heartbeats stop with it, and the
    /// coordinator expires the member once its session times out).
    pub fn abandon(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// The next assignment, or the error the membership ended with.
    pub async fn next(&mut self) -> Event {
        loop {
            if self.shared.lost.swap(false, Ordering::Relaxed) {
                return Event::Lost;
            }
            if let Some(task) = self.task.take_if(|t| t.is_finished()) {
                return Event::Failed(match task.await {
                    Ok(Err(error)) => error,
                    Ok(Ok(())) => RuntimeError::Group {
                        group: String::new(),
                        reason: "the membership ended".into(),
                    },
                    Err(error) => RuntimeError::TaskPanicked {
                        task: "group membership".into(),
                        reason: error.to_string(),
                    },
                });
            }
            tokio::select! {
                changed = self.assigned.changed() => {
                    if changed.is_err() {
                        // The member's task ended: its result is next.
                        tokio::time::sleep(REJOIN_CHECK).await;
                        continue;
                    }
                    if let Some(assigned) = self.assigned.borrow_and_update().clone() {
                        return Event::Assigned(assigned);
                    }
                }
                () = tokio::time::sleep(REJOIN_CHECK) => {}
            }
        }
    }
}

/// What [`Member::next`] reports.
pub(crate) enum Event {
    Assigned(Assigned),
    /// The group went on without this instance (its session expired while
    /// it was paused or cut off): every task it runs is someone else's.
    Lost,
    /// The membership failed for good (the leader could not assign, or the
    /// coordinator could not be reached through every retry).
    Failed(RuntimeError),
}

async fn member_loop(
    mut membership: Membership,
    mut protocol: TaskProtocol,
    shared: Arc<Shared>,
    assigned: watch::Sender<Option<Assigned>>,
    mut stop: watch::Receiver<bool>,
    saved: Option<PathBuf>,
    wait_for_cluster: bool,
) -> Result<(), RuntimeError> {
    let group = protocol.group.clone();
    // A static member restarted presents itself as it last joined, so the
    // coordinator knows it unchanged and hands its tasks back.
    if let Some(mut view) = saved.as_deref().and_then(read_saved) {
        // The saved view's tasks, with where this run answers queries.
        view.query = std::mem::take(&mut protocol.info.query);
        protocol.info = view;
    }
    let mut generation = 0;
    let mut must_join = true;
    loop {
        // Dropped without a word (the run crashed): gone as a killed
        // process is, without a LeaveGroup.
        if stop.has_changed().is_err() {
            return Ok(());
        }
        if *stop.borrow() {
            return leave(&mut membership, &group).await;
        }
        // A join of our own waits until the runner has taken up the last
        // assignment, so the tasks it started count as owned.
        let caught_up = shared.followed.load(Ordering::Relaxed) >= generation;
        if (must_join && caught_up) || membership.needs_rejoin() {
            must_join = false;
            describe_holdings(&mut protocol, &shared, &mut membership, generation);
            let joined = tokio::select! {
                joined = membership.join(&protocol) => joined,
                _ = stop.changed() => continue,
            };
            let bytes = match joined {
                Ok(bytes) => bytes,
                // The group went on without this member mid-join: it
                // describes itself afresh, claiming nothing, and joins again.
                Err(_) if membership.is_lost() => {
                    must_join = true;
                    tokio::select! {
                        () = tokio::time::sleep(REJOIN_AFTER_LOST) => {}
                        _ = stop.changed() => {}
                    }
                    continue;
                }
                // The cluster is away (a broker restarting) or the group
                // still settling after it: the instance waits for it, as
                // Kafka's clients do, instead of stopping.
                Err(error) if wait_for_cluster && worth_waiting_for(&error) => {
                    tracing::warn!(
                        %group,
                        "joining the app's group failed ({error}); trying again in {UNAVAILABLE_BACKOFF:?}"
                    );
                    must_join = true;
                    tokio::select! {
                        () = tokio::time::sleep(UNAVAILABLE_BACKOFF) => {}
                        _ = stop.changed() => {}
                    }
                    continue;
                }
                Err(error) => {
                    return Err(RuntimeError::from(error).concerning(|| format!("group {group}")));
                }
            };
            if let Some(path) = &saved {
                let _ = std::fs::write(path, protocol.info.encode());
            }
            let assignment = assignment_of(&bytes, &protocol)?;
            // Tasks claimed but neither kept nor running here (a static
            // member's saved view): nobody gives them up, so a new round
            // must hand them out.
            let running = shared.owned.lock().expect("never poisoned").clone();
            let orphaned = (protocol.info.owned.iter())
                .any(|t| !assignment.active.contains(t) && !running.contains(t));
            generation += 1;
            log_assignment(&group, &assignment);
            let _ = assigned.send(Some(Assigned {
                generation,
                active: assignment.active,
                standby: assignment.standby,
            }));
            must_join = orphaned;
        }
        tokio::select! {
            () = tokio::time::sleep(REJOIN_CHECK) => {}
            () = shared.rejoin.notified() => must_join = true,
            _ = stop.changed() => {}
        }
    }
}

/// Leaves the group, waiting at most [`LEAVE_WAIT`].
async fn leave(membership: &mut Membership, group: &str) -> Result<(), RuntimeError> {
    match tokio::time::timeout(LEAVE_WAIT, membership.leave()).await {
        Ok(left) => Ok(left?),
        Err(_) => {
            tracing::warn!(
                %group,
                "could not leave the group within {LEAVE_WAIT:?}; its tasks move once its session expires"
            );
            Ok(())
        }
    }
}

/// What this member tells the group as it joins: the tasks it runs (after
/// its first assignment), the copies it holds and how far they read. A
/// member that lost its place claims none.
fn describe_holdings(
    protocol: &mut TaskProtocol,
    shared: &Shared,
    membership: &mut Membership,
    generation: i32,
) {
    if generation > 0 {
        protocol.info.owned = shared.owned.lock().expect("never poisoned").clone();
    }
    protocol.info.copies = copies_of(&shared.board);
    let held = protocol.info.copies.keys().cloned();
    protocol.info.stored.extend(held);
    if membership.take_lost() {
        // The group went on without this member (paused, cut off): its
        // tasks are someone else's now, or soon. It claims none, and
        // whatever of them it still runs is fenced.
        tracing::warn!(group = %protocol.group, "this instance lost its place in the group (its session expired): it gives its tasks up and rejoins without them");
        protocol.info.owned.clear();
        shared.lost.store(true, Ordering::Relaxed);
    }
}

/// Whether a failed join is the cluster away or the group still settling:
/// worth waiting for.
fn worth_waiting_for(error: &client::ClientError) -> bool {
    let settling = [
        codes::REBALANCE_IN_PROGRESS,
        codes::UNKNOWN_MEMBER_ID,
        codes::ILLEGAL_GENERATION,
    ];
    error.is_unavailable() || error.code().is_some_and(|code| settling.contains(&code))
}

/// The leader's assignment for this member, checked: no error from the
/// leader, and no task of a processor this instance does not have.
fn assignment_of(bytes: &[u8], protocol: &TaskProtocol) -> Result<TaskAssignment, RuntimeError> {
    let group = &protocol.group;
    let (_, data) = client::decode_assignment_with(bytes)?;
    let assignment = match data {
        Some(data) => TaskAssignment::decode(&data).map_err(|reason| RuntimeError::Group {
            group: group.clone(),
            reason: format!("the leader's assignment: {reason}"),
        })?,
        None => TaskAssignment::default(),
    };
    if !assignment.error.is_empty() {
        return Err(RuntimeError::Group {
            group: group.clone(),
            reason: assignment.error,
        });
    }
    let unknown: Vec<String> = (assignment.active.iter())
        .chain(&assignment.standby)
        .filter(|t| !protocol.processors.iter().any(|p| p.name == t.processor))
        .map(TaskId::to_string)
        .collect();
    if !unknown.is_empty() {
        return Err(RuntimeError::Group {
            group: group.clone(),
            reason: format!(
                "assigned tasks {unknown:?} of processors this instance does not have; every instance of an app must run the same processors"
            ),
        });
    }
    Ok(assignment)
}

fn log_assignment(group: &str, assignment: &TaskAssignment) {
    let list = |tasks: &BTreeSet<TaskId>| {
        let names: Vec<String> = tasks.iter().map(TaskId::to_string).collect();
        names.join(" ")
    };
    tracing::info!(
        %group,
        tasks = %list(&assignment.active),
        standby = %list(&assignment.standby),
        "assigned {} tasks",
        assignment.active.len()
    );
}

/// The copies on `board`, by task.
fn copies_of(board: &TaskBoard) -> BTreeMap<TaskId, i64> {
    (board.copies().into_iter())
        .filter_map(|(name, reached)| {
            let (processor, partition) = name.rsplit_once('/')?;
            Some((TaskId::new(processor, partition.parse().ok()?), reached))
        })
        .collect()
}

/// The view a static member saved when it last joined, if readable.
fn read_saved(path: &std::path::Path) -> Option<MemberInfo> {
    let bytes = std::fs::read(path).ok()?;
    MemberInfo::decode(&bytes).ok()
}
