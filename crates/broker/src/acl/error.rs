//! Why an ACL could not be created, deleted or loaded.

use std::path::PathBuf;

use strata_log::LogError;
use strata_protocol::acl::InvalidAcl;

#[derive(Debug, thiserror::Error)]
pub enum AclError {
    /// A binding or filter that cannot be stored or applied (Kafka's
    /// INVALID_REQUEST): the message says what to change.
    #[error("invalid ACL: {0}")]
    Invalid(String),
    /// The ACL file is unreadable as ACLs. The broker does not start on it:
    /// starting without its DENY entries would open what they close.
    #[error(
        "{}: {reason}; restore the file from a backup, or move it away to start with no ACLs",
        path.display()
    )]
    Corrupt { path: PathBuf, reason: String },
    #[error("the broker holds at most {max} ACLs; delete some before adding more")]
    TooMany { max: usize },
    /// The ACLs would make a file past the size read back at start.
    #[error(
        "the ACLs would take {bytes} bytes, past the {max}-byte limit of the ACL file; delete some, or use prefixed ACLs"
    )]
    TooLarge { bytes: usize, max: usize },
    /// Writing the ACL file failed; nothing changed.
    #[error("storing ACLs: {0}")]
    Storage(#[from] LogError),
}

impl From<InvalidAcl> for AclError {
    fn from(invalid: InvalidAcl) -> Self {
        Self::Invalid(invalid.0)
    }
}
