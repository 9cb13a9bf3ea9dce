//! The ACL model as Kafka defines it, shared by the broker that keeps and
//! checks ACLs and the client that manages them on any Kafka cluster.
//!
//! An ACL ([`AclBinding`]) is a resource pattern (a type, a name, and
//! whether the name is literal or a prefix) and an entry (a principal, a
//! host, an operation, and ALLOW or DENY). Every code is Kafka's wire code,
//! so DescribeAcls, CreateAcls and DeleteAcls carry them as they are.
//! [`AclBindingFilter`] selects ACLs with Kafka's filter semantics (ANY,
//! MATCH).

mod binding;
mod entry;
mod filter;
mod operation;
mod pattern;
mod resource;

pub use binding::{ACL_TEXT_BYTES_MAX, AclBinding};
pub use entry::{AccessControlEntry, Permission, WILDCARD_HOST};
pub use filter::{AclBindingFilter, EntryFilter, PatternFilter};
pub use operation::Operation;
pub use pattern::{PatternType, ResourcePattern};
pub use resource::{CLUSTER_NAME, Resource, ResourceType, WILDCARD_RESOURCE};

/// A binding or filter that cannot be stored or applied (Kafka's
/// INVALID_REQUEST): the message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ACL: {0}")]
pub struct InvalidAcl(pub String);

/// A name as the command line may write it (`transactional-id`,
/// `DESCRIBE_CONFIGS`, `describeConfigs`), reduced to compare with
/// Kafka's: lower case, without `-` and `_`.
fn normalized(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .map(|c| c.to_ascii_lowercase())
        .collect()
}
