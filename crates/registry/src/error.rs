//! RegistryError: every answer the registry refuses with, under Confluent's
//! numbered error codes, mapped to HTTP in one place; StoreError: what the
//! log under it refused (50001).
//!
//! A code's first three digits are its HTTP status (40401 → 404), except
//! an incompatible schema, whose code is the status itself (409), as
//! Confluent's clients expect. Messages say what is missing or wrong and
//! what to ask instead.

use strata_log::LogError;
use strata_record::RecordError;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("Subject '{0}' not found: register a schema under it first")]
    SubjectNotFound(String),
    #[error("Version {version} of subject '{subject}' not found")]
    VersionNotFound { subject: String, version: String },
    #[error("Schema {0} not found")]
    SchemaNotFound(String),
    #[error(
        "Subject '{0}' was soft deleted: delete it with permanent=true, or register a schema to bring it back"
    )]
    SubjectSoftDeleted(String),
    #[error(
        "Subject '{0}' was not deleted first: delete it without permanent=true before deleting it permanently"
    )]
    SubjectNotSoftDeleted(String),
    #[error("Version {version} of subject '{subject}' was soft deleted")]
    VersionSoftDeleted { subject: String, version: i32 },
    #[error(
        "Version {version} of subject '{subject}' was not deleted first: delete it without permanent=true before deleting it permanently"
    )]
    VersionNotSoftDeleted { subject: String, version: i32 },
    #[error(
        "Subject '{0}' does not have subject-level compatibility configured: ask with defaultToGlobal=true for the global level"
    )]
    SubjectLevelNotConfigured(String),
    #[error("Invalid schema: {0}")]
    InvalidSchema(String),
    #[error(
        "The specified version '{0}' is not a valid version id: use a positive integer or 'latest'"
    )]
    InvalidVersion(String),
    #[error(
        "Invalid compatibility level '{0}': use one of BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE"
    )]
    InvalidCompatibilityLevel(String),
    #[error(
        "Schema being registered is incompatible with an earlier schema for subject '{subject}', details: [{}]",
        details.join("; ")
    )]
    Incompatible {
        subject: String,
        details: Vec<String>,
    },
    #[error(
        "Version {version} of subject '{subject}' is referenced by schemas {referrers:?}: delete those first"
    )]
    ReferenceExists {
        subject: String,
        version: i32,
        referrers: Vec<i32>,
    },
    #[error("Unreadable request: {0}")]
    UnreadableRequest(String),
    #[error("The request was interrupted: {0}")]
    Interrupted(String),
    #[error("Error in the backend data store: {0}")]
    Store(#[from] StoreError),
}

/// What went wrong under the registry: the log refused, or the topic holds
/// what cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{action} the _schemas topic failed: {source}")]
    Log {
        action: &'static str,
        #[source]
        source: LogError,
    },
    #[error("a batch of the _schemas topic at offset {offset} is unreadable: {source}")]
    Batch {
        offset: i64,
        #[source]
        source: RecordError,
    },
    #[error("{0} is missing from the log")]
    Missing(String),
}

impl StoreError {
    pub(crate) fn log(action: &'static str, source: LogError) -> Self {
        Self::Log { action, source }
    }
}

impl RegistryError {
    /// Confluent's error code for this refusal.
    pub fn code(&self) -> u32 {
        match self {
            Self::SubjectNotFound(_) => 40401,
            Self::VersionNotFound { .. } => 40402,
            Self::SchemaNotFound(_) => 40403,
            Self::SubjectSoftDeleted(_) => 40404,
            Self::SubjectNotSoftDeleted(_) => 40405,
            Self::VersionSoftDeleted { .. } => 40406,
            Self::VersionNotSoftDeleted { .. } => 40407,
            Self::SubjectLevelNotConfigured(_) => 40408,
            Self::InvalidSchema(_) => 42201,
            Self::InvalidVersion(_) => 42202,
            Self::InvalidCompatibilityLevel(_) => 42203,
            Self::Incompatible { .. } => 409,
            Self::ReferenceExists { .. } => 42206,
            Self::UnreadableRequest(_) => 422,
            Self::Interrupted(_) => 500,
            Self::Store(_) => 50001,
        }
    }

    /// The HTTP status: the code's first three digits.
    pub fn http_status(&self) -> u16 {
        let code = self.code();
        let status = if code < 1000 { code } else { code / 100 };
        u16::try_from(status).expect("error codes have three digits before the detail")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_the_first_three_digits_of_the_code() {
        assert_eq!(
            RegistryError::SubjectNotFound("s".into()).http_status(),
            404
        );
        assert_eq!(RegistryError::InvalidSchema("x".into()).http_status(), 422);
        let incompatible = RegistryError::Incompatible {
            subject: "s".into(),
            details: vec![],
        };
        assert_eq!(
            (incompatible.code(), incompatible.http_status()),
            (409, 409)
        );
    }

    #[test]
    fn an_incompatible_schema_names_what_broke() {
        let error = RegistryError::Incompatible {
            subject: "orders-value".into(),
            details: vec!["version 1: field 'x' has no default".into()],
        };
        let message = error.to_string();
        assert!(message.contains("orders-value") && message.contains("field 'x'"));
    }
}
