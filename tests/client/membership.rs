//! A group member that lost its place while it was not looking: the
//! coordinator ended a rebalance without it, and its next join is refused
//! for its old member id. Whatever it was assigned is someone else's now,
//! and the membership says so, whether or not its protocol claims what it
//! owns.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strata::broker::BrokerConfig;
use strata::client::error::codes;
use strata::client::membership::{GroupProtocol, JoinedMember, Membership, MembershipConfig};
use strata::client::{ClientConfig, ClientError, Cluster};

const GROUP: &str = "places";

/// A protocol that hands every member an empty assignment; `claims` says
/// whether its metadata claims owned work (as the runtime's tasks do).
struct Claims {
    claims: bool,
}

impl GroupProtocol for Claims {
    fn protocol_type(&self) -> &str {
        "test"
    }

    fn protocols(&self) -> Result<Vec<(String, Bytes)>, ClientError> {
        Ok(vec![("claims".into(), Bytes::from_static(b"owned: all"))])
    }

    async fn assign(
        &self,
        _cluster: &Arc<Cluster>,
        _protocol: &str,
        members: &[JoinedMember],
    ) -> Result<BTreeMap<String, Bytes>, ClientError> {
        Ok((members.iter())
            .map(|m| (m.member_id.clone(), Bytes::new()))
            .collect())
    }

    fn claims_owned(&self) -> bool {
        self.claims
    }
}

/// A member whose rebalances end a second after they start, with a
/// session long enough never to expire in the test.
fn member(cluster: &Arc<Cluster>) -> Membership {
    Membership::new(
        Arc::clone(cluster),
        MembershipConfig {
            group: GROUP.into(),
            instance_id: None,
            session_timeout: Duration::from_secs(30),
            rebalance_timeout: Duration::from_secs(1),
            heartbeat_interval: Duration::from_millis(100),
        },
    )
}

/// `first` joins; a second member joins and `first` does not take part in
/// the rebalance that starts, so the coordinator ends it without `first`.
/// Returns `first` (out of the group now) and the member that stayed.
async fn left_behind(cluster: &Arc<Cluster>, protocol: &Claims) -> (Membership, Membership) {
    let mut first = member(cluster);
    first.join(protocol).await.expect("the first member joins");
    let mut second = member(cluster);
    tokio::time::timeout(Duration::from_secs(30), second.join(protocol))
        .await
        .expect("the rebalance ends once the first member's time to rejoin is up")
        .expect("the second member joins");
    (first, second)
}

async fn broker() -> (support::InProcessBroker, tempfile::TempDir, Arc<Cluster>) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig::default();
    config.groups.initial_rebalance_delay = Duration::ZERO;
    let broker = support::InProcessBroker::start_in(dir.path(), config).await;
    let cluster = Cluster::connect(ClientConfig::new(&broker.addr.to_string()))
        .await
        .unwrap();
    (broker, dir, cluster)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_claims_what_it_owns_is_told_it_lost_its_place_before_it_joins_again() {
    let (_broker, _dir, cluster) = broker().await;
    let protocol = Claims { claims: true };
    let (mut first, _second) = left_behind(&cluster, &protocol).await;
    // Joining again with the same claims would take back what the group
    // gave away: the join ends with the coordinator's refusal instead.
    let refused = first.join(&protocol).await.unwrap_err();
    assert!(
        matches!(
            refused.code(),
            Some(codes::UNKNOWN_MEMBER_ID | codes::ILLEGAL_GENERATION)
        ),
        "{refused}"
    );
    assert!(first.take_lost(), "the membership says its place is lost");
    // Described afresh, it joins as a new member.
    first.join(&protocol).await.expect("it joins as new");
    assert!(!first.take_lost(), "a place is lost once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_claims_nothing_joins_again_at_once_and_is_told_it_lost_its_place() {
    let (_broker, _dir, cluster) = broker().await;
    let protocol = Claims { claims: false };
    let (mut first, _second) = left_behind(&cluster, &protocol).await;
    first
        .join(&protocol)
        .await
        .expect("it joins as new at once");
    assert!(first.take_lost(), "what it had is lost all the same");
}
