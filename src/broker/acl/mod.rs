//! Access control lists, as Kafka defines them: who may do what to which
//! resource, kept durably by the broker and checked on every request.
//!
//! An ACL ([`AclBinding`]) is a resource pattern (a type, a name, and
//! whether the name is literal or a prefix) and an entry (a principal, a
//! host, an operation, and ALLOW or DENY). Every code is Kafka's wire code,
//! so the DescribeAcls, CreateAcls and DeleteAcls APIs carry them as they
//! are and Kafka's own tools and clients manage strata's ACLs.
//!
//! - [`AclStore`] keeps them in `<data_dir>/security/acls.json`, replaced
//!   whole and durably on each change, read at start.
//! - [`Authorizer`] decides a request from an in-memory snapshot under
//!   Kafka's rules (super users, DENY over ALLOW, implied DESCRIBE), with
//!   strata's default for a caller no ACL allows: denied on a listener that
//!   authenticates, allowed on one that does not.
//! - [`AclBindingFilter`] selects ACLs with Kafka's filter semantics (ANY,
//!   MATCH), for DescribeAcls and DeleteAcls.
//!
//! Thread-safety: the store and the authorizer are shared by every
//! connection; authorization reads a snapshot and never waits on a change
//! being written to disk.

mod acl_set;
mod authorizer;
mod binding;
mod entry;
mod error;
mod filter;
mod operation;
mod pattern;
mod resource;
mod store;

pub use acl_set::AclSet;
pub use authorizer::Authorizer;
pub use binding::{ACL_TEXT_BYTES_MAX, AclBinding};
pub use entry::{AccessControlEntry, Permission, WILDCARD_HOST};
pub use error::AclError;
pub use filter::{AclBindingFilter, EntryFilter, PatternFilter};
pub use operation::Operation;
pub use pattern::{PatternType, ResourcePattern};
pub use resource::{CLUSTER_NAME, Resource, ResourceType, WILDCARD_RESOURCE};
pub use store::{ACLS_FILE, ACLS_MAX, AclStore};

/// A name as the command line may write it (`transactional-id`,
/// `DESCRIBE_CONFIGS`, `describeConfigs`), reduced to compare with
/// Kafka's: lower case, without `-` and `_`.
fn normalized(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .map(|c| c.to_ascii_lowercase())
        .collect()
}
