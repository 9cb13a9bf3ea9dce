//! The group coordinator: Kafka's classic consumer-group protocol.
//!
//! Members join (JoinGroup), the coordinator waits until every known member
//! has (re)joined or the rebalance timeout passes, starts a new generation
//! and names a leader; the leader computes the assignment and hands it in
//! with SyncGroup; each member receives its part. Heartbeats keep a member
//! alive for its session timeout and tell it when to rejoin. The coordinator
//! never looks inside protocol metadata or assignments: they are passed
//! through, so any client-side assignor works.
//!
//! ```text
//!            join                     all joined / timeout        leader's sync
//! Empty ─────────────▶ PreparingRebalance ─────────────▶ CompletingRebalance ───────▶ Stable
//!   ▲                        ▲   │ no members left                 │                    │
//!   └────────────────────────┼───┘                                 │ join, leave,       │
//!                            └─────────────────────────────────────┴─ session expiry ───┘
//! ```
//!
//! Membership lives in memory: after a restart members find their ids
//! unknown and rejoin. (Kafka keeps it in `__consumer_offsets`, so its
//! members outlive a coordinator failover.) Committed offsets are durable
//! ([`offsets`]).
//!
//! Requests that must wait (a JoinGroup until the rebalance completes, a
//! SyncGroup until the leader's assignment arrives) get a channel that the
//! coordinator completes later, from another member's request or from
//! [`GroupCoordinator::tick`].

mod config;
mod coordinator;
mod membership;
mod messages;
pub mod offsets;

pub use config::{
    GroupConfig, OFFSET_METADATA_BYTES_MAX, OFFSETS_RETENTION_CHECK_DEFAULT,
    OFFSETS_RETENTION_DEFAULT,
};
pub use coordinator::GroupCoordinator;
pub use messages::{
    Committer, GroupDescription, GroupListing, GroupState, JoinOutcome, JoinRequest, JoinedMember,
    MemberDescription, Pending, SyncOutcome, SyncRequest,
};

#[cfg(test)]
mod tests;
