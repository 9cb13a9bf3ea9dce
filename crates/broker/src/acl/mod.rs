//! Access control lists, as Kafka defines them: who may do what to which
//! resource, kept durably by the broker and checked on every request. The
//! model (bindings, filters, operations) is [`strata_protocol::acl`], shared
//! with the client; the store and the authorizer are here.
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
//!   Kafka's rules (super users, DENY over ALLOW, implied DESCRIBE), and
//!   Kafka's default for a caller no ACL allows (denied), except on a
//!   listener that does not authenticate while no ACL exists at all, or
//!   always when such listeners are trusted.
//! - [`AclBindingFilter`] selects ACLs with Kafka's filter semantics (ANY,
//!   MATCH), for DescribeAcls and DeleteAcls.
//!
//! Thread-safety: the store and the authorizer are shared by every
//! connection; authorization reads a snapshot and never waits on a change
//! being written to disk.

mod acl_set;
mod authorizer;
mod error;
mod store;

pub use acl_set::AclSet;
pub use authorizer::Authorizer;
pub use error::AclError;
pub use store::{ACLS_FILE, ACLS_MAX, AclStore};
pub use strata_protocol::acl::{
    ACL_TEXT_BYTES_MAX, AccessControlEntry, AclBinding, AclBindingFilter, CLUSTER_NAME,
    EntryFilter, InvalidAcl, Operation, PatternFilter, PatternType, Permission, Resource,
    ResourcePattern, ResourceType, WILDCARD_HOST, WILDCARD_RESOURCE,
};
