//! [`ProcessError`]: why a processor could not handle a record. Any
//! `std::error::Error` converts into it with `?`, so a processor returns
//! its own errors, the context's and its libraries' alike.

use std::fmt;

use strata_record::codec::{CodecError, Part};

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a processor could not handle a record: it stops the task, and the
/// run in progress is not committed (a fixed processor resumes at the
/// record).
///
/// Like `anyhow::Error`, it does not implement `std::error::Error` itself,
/// which lets every error type convert into it.
pub struct ProcessError(BoxError);

impl ProcessError {
    /// An error with the processor's own message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self(message.to_string().into())
    }

    /// An input record's key or value (`part`) that does not decode: a
    /// failure of kind `decode` for the error policies (see `OnError`),
    /// as when the runtime decodes a processor's input. For a
    /// [`RawProcessor`](crate::RawProcessor), which decodes its own.
    pub fn undecodable(part: Part, error: CodecError) -> Self {
        let what = match part {
            Part::Key => "key",
            Part::Value => "value",
        };
        UndecodableInput { what, error }.into()
    }

    /// The error as it was raised, to look at its type.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref()
    }

    pub fn into_inner(self) -> BoxError {
        self.0
    }
}

/// A record's key or value its processor's input codecs could not
/// decode: a failure of kind `decode` (see `on_error`).
#[derive(Debug, thiserror::Error)]
#[error("its {what} could not be decoded: {error}")]
pub(crate) struct UndecodableInput {
    /// `key` or `value`.
    pub what: &'static str,
    pub error: CodecError,
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ProcessError {
    fn from(error: E) -> Self {
        Self(Box::new(error))
    }
}

impl fmt::Display for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl AsRef<dyn std::error::Error + Send + Sync + 'static> for ProcessError {
    fn as_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("lookup failed for {0}")]
    struct LookupFailed(String);

    fn fails() -> Result<(), ProcessError> {
        Err(LookupFailed("user-1".into()))?;
        Ok(())
    }

    #[test]
    fn any_error_converts_with_the_question_mark_and_keeps_its_type() {
        let error = fails().unwrap_err();
        assert_eq!(error.to_string(), "lookup failed for user-1");
        assert!(error.downcast_ref::<LookupFailed>().is_some());
        let io: ProcessError = std::io::Error::other("disk").into();
        assert_eq!(io.to_string(), "disk");
    }

    #[test]
    fn a_message_is_an_error_of_its_own() {
        assert_eq!(
            ProcessError::msg("refusing BOOM").to_string(),
            "refusing BOOM"
        );
    }
}
