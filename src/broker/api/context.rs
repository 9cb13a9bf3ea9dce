//! What every request handler can reach: the log, the configuration, the
//! group and transaction coordinators, the append signals and the metrics. One per broker,
//! shared by every connection.

use std::sync::Arc;

use crate::broker::acl::Authorizer;
use crate::broker::group::GroupCoordinator;
use crate::broker::txn::TxnCoordinator;
use crate::broker::{AppendSignals, BrokerConfig, Metrics};
use crate::log::LogManager;

/// What every handler can reach.
pub struct BrokerContext {
    pub log: Arc<LogManager>,
    pub config: BrokerConfig,
    /// The port clients are told to use (the bound one, if 0 was asked for).
    pub advertised_port: i32,
    /// Per-partition wakeups for fetches that wait for data; produce signals
    /// each partition it appends to, and so does an app appending to the
    /// same log in this process.
    pub appends: Arc<AppendSignals>,
    pub metrics: Metrics,
    pub groups: GroupCoordinator,
    pub transactions: TxnCoordinator,
    /// The ACLs and super users every request is checked against.
    pub acls: Authorizer,
}
