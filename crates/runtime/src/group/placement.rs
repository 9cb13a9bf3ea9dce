//! Where the app's group has placed each task, read from the group itself
//! (DescribeGroups: every member's assignment and subscription): which
//! instance runs it, which keep standby copies, where each answers
//! queries. For `status` and for queries asked of other instances.

use std::collections::BTreeMap;

use strata_client as client;

use super::codec::{MemberInfo, TaskAssignment};
use crate::error::RuntimeError;

/// The tasks of one member of an app's group, from its assignment as
/// DescribeGroups shows it; None when it is not an app's assignment.
pub fn tasks_of_assignment(assignment: &[u8]) -> Option<Vec<String>> {
    let (_, data) = client::decode_assignment_with(assignment).ok()?;
    let assignment = TaskAssignment::decode(&data?).ok()?;
    Some(assignment.active.iter().map(ToString::to_string).collect())
}

/// Where a task of the app's group is placed now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The instance running it.
    pub active: Option<String>,
    /// The instances keeping standby copies of it.
    pub standbys: Vec<String>,
    /// Where the instance running it answers queries, if it does.
    pub query: Option<std::net::SocketAddr>,
}

/// Where each task of the app's group is placed now, by instance: its
/// instance id (static members) or its host and a member id's tail.
pub(crate) async fn placements(
    admin: &client::Admin,
    group: &str,
) -> Result<BTreeMap<String, Placement>, RuntimeError> {
    let described = admin.describe_group(group).await?;
    let mut placed: BTreeMap<String, Placement> = BTreeMap::new();
    for member in &described.members {
        let label = match &member.instance_id {
            Some(instance) => instance.clone(),
            None => format!(
                "{}{}",
                member.client_host.trim_start_matches('/'),
                short(&member.member_id)
            ),
        };
        let Some(assignment) = client::decode_assignment_with(&member.assignment)
            .ok()
            .and_then(|(_, data)| TaskAssignment::decode(&data?).ok())
        else {
            continue;
        };
        let query = query_address(member);
        for task in &assignment.active {
            let placement = placed.entry(task.to_string()).or_default();
            placement.active = Some(label.clone());
            placement.query = query;
        }
        for task in &assignment.standby {
            let standbys = &mut placed.entry(task.to_string()).or_default().standbys;
            standbys.push(label.clone());
        }
    }
    Ok(placed)
}

/// Where a member answers queries: the address in its subscription, with
/// the host the coordinator saw it connect from when it listens on every
/// interface (`0.0.0.0:8080`).
fn query_address(member: &client::GroupMemberDescription) -> Option<std::net::SocketAddr> {
    let (_, data) = client::decode_subscription_with(&member.metadata).ok()?;
    let info = MemberInfo::decode(&data?).ok()?;
    let mut addr: std::net::SocketAddr = info.query.parse().ok()?;
    if addr.ip().is_unspecified() {
        let host = member.client_host.trim_start_matches('/');
        addr.set_ip(host.parse().ok()?);
    }
    Some(addr)
}

/// A member id's distinguishing tail (`…-1a2b`), so two members on one
/// host tell apart.
fn short(member_id: &str) -> String {
    let tail: String = member_id
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("~{tail}")
}
