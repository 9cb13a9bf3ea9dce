//! What a connection's tests reach: a broker's context over an empty data
//! directory, with the default configuration, and one poll of a future.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use crate::acl::{AclStore, Authorizer};
use crate::api::BrokerContext;
use crate::auth::CredentialStore;
use crate::group::GroupCoordinator;
use crate::txn::TxnCoordinator;
use crate::{AppendSignals, BrokerConfig, Metrics};
use strata_log::storage::Disk;
use strata_log::{LogConfig, LogManager};

/// A broker's context over the empty data directory `dir`.
pub(super) fn context(dir: &tempfile::TempDir) -> Arc<BrokerContext> {
    let log = Arc::new(LogManager::open(dir.path(), LogConfig::default()).unwrap());
    let config = BrokerConfig::default();
    let appends: Arc<AppendSignals> = Arc::default();
    let groups = GroupCoordinator::open(&dir.path().join("groups"), config.groups.clone());
    let transactions = TxnCoordinator::open(
        &dir.path().join("transactions"),
        config.transactions.clone(),
        Arc::clone(&log),
        Arc::clone(&appends),
    );
    let acls = AclStore::open(&Disk::os(), dir.path()).unwrap();
    Arc::new(BrokerContext {
        log,
        config,
        appends,
        metrics: Metrics::default(),
        groups: groups.unwrap(),
        transactions: transactions.unwrap(),
        acls: Authorizer::new(acls, Vec::new()),
        credentials: CredentialStore::open(dir.path()).unwrap(),
    })
}

/// Polls `future` once: it runs until it has to wait for something.
pub(super) async fn step<F: Future>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}
