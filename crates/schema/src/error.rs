//! Why a record could not be read or written in a registry format, and
//! whether the record is to blame.
//!
//! A runtime diverts a record its codec refuses under the processor's
//! error policy; that is right only when the record itself is wrong. A
//! registry out of reach, refusing the app's credentials or its schema, or
//! an app schema that does not parse would refuse every record alike, so
//! [`SchemaError::blames_the_record`] names the few errors that are the
//! record's (an allow-list: an error added later stops the task until
//! someone decides otherwise).

use crate::format::SchemaType;
use crate::registry::RegistryError;
use crate::wire::WireError;

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(
        "the {0} codec needs a schema registry: run the app with --schema-registry URL (or STRATA_SCHEMA_REGISTRY)"
    )]
    NoRegistry(&'static str),
    /// The schema a record names does not parse.
    #[error("registered schema {id} does not parse: {reason}")]
    BadRegistered { id: u32, reason: String },
    /// The app's own schema does not parse (or has no such message).
    #[error("the {codec} codec's schema does not parse: {reason}")]
    BadDeclared { codec: &'static str, reason: String },
    #[error("the record was written as {found} (schema id {id}); the codec reads {codec}")]
    OtherType {
        id: u32,
        found: SchemaType,
        codec: SchemaType,
    },
    #[error("the record holds message {found} (schema id {id}); the codec reads {declared}")]
    OtherMessage {
        id: u32,
        found: String,
        declared: String,
    },
    #[error(
        "schema id {0} imports other subjects' schemas, which these codecs do not follow: register it self-contained"
    )]
    References(u32),
    #[error("{0}")]
    Subject(String),
    #[error("the record does not read as its schema: {0}")]
    Decode(String),
    #[error("the value does not fit the schema: {0}")]
    Encode(String),
}

impl SchemaError {
    /// Whether the record (or the value being written) is what is wrong,
    /// so that another record may well read: its bytes, the schema it
    /// names, or a value that does not fit. Everything else (the registry
    /// not asked, or refusing the app; the app's own schema or subject
    /// strategy) would fail every record alike.
    pub fn blames_the_record(&self) -> bool {
        match self {
            Self::Wire(_)
            | Self::Decode(_)
            | Self::Encode(_)
            | Self::OtherType { .. }
            | Self::OtherMessage { .. }
            | Self::BadRegistered { .. }
            | Self::References(_) => true,
            // The id the record names is not registered.
            Self::Registry(error) => error.is_unknown_schema(),
            Self::NoRegistry(_) | Self::BadDeclared { .. } | Self::Subject(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_records_own_errors_blame_it() {
        let refused = |status, code| {
            SchemaError::Registry(RegistryError::Refused {
                status,
                code,
                message: String::new(),
            })
        };
        assert!(refused(404, 40403).blames_the_record());
        for (status, code) in [
            (401, 401),
            (403, 403),
            (429, 429),
            (409, 409),
            (422, 42201),
            (500, 50001),
        ] {
            assert!(
                !refused(status, code).blames_the_record(),
                "{status} {code}"
            );
        }
        let unreachable = RegistryError::Unreachable {
            url: "http://127.0.0.1:1".into(),
            reason: "refused".into(),
        };
        assert!(!SchemaError::Registry(unreachable).blames_the_record());
        assert!(!SchemaError::NoRegistry("avro").blames_the_record());
        assert!(SchemaError::Wire(WireError::TooShort(2)).blames_the_record());
        assert!(SchemaError::Decode("x".into()).blames_the_record());
    }
}
