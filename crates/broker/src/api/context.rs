//! What every request handler can reach: the log, the configuration, the
//! group and transaction coordinators, the append signals, the metrics and
//! the SCRAM credentials. One per broker, shared by every connection.

use std::sync::Arc;

use crate::acl::Authorizer;
use crate::auth::CredentialStore;
use crate::group::GroupCoordinator;
use crate::txn::TxnCoordinator;
use crate::{AppendSignals, BrokerConfig, Metrics};
use strata_log::LogManager;

/// What every handler can reach.
pub struct BrokerContext {
    pub log: Arc<LogManager>,
    pub config: BrokerConfig,
    /// Per-partition wakeups for fetches that wait for data; produce signals
    /// each partition it appends to, and so does an app appending to the
    /// same log in this process.
    pub appends: Arc<AppendSignals>,
    pub metrics: Metrics,
    pub groups: GroupCoordinator,
    pub transactions: TxnCoordinator,
    /// The users SASL/SCRAM and SASL/PLAIN authenticate, in
    /// `<data>/security/`.
    pub credentials: CredentialStore,
    /// The ACLs and super users every request is checked against.
    pub acls: Authorizer,
}
