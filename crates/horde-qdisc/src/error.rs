//! Configuration errors.

/// A discipline's configuration is invalid, or a discipline name is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QdiscError {
    /// A parameter is out of range, e.g. `chap limit.packets must be at least 2, got 1`.
    #[error("{what} must be {expected}, got {got}")]
    Invalid {
        /// The parameter.
        what: &'static str,
        /// What would have been accepted.
        expected: String,
        /// The offending value.
        got: String,
    },
    /// A discipline name that is not one of `fifo`, `spq`, `chap`, `fq_codel`.
    #[error("unknown queue discipline `{0}`: expected fifo, spq, chap or fq_codel")]
    UnknownKind(String),
}

impl QdiscError {
    pub(crate) fn invalid(
        what: &'static str,
        expected: impl Into<String>,
        got: impl ToString,
    ) -> QdiscError {
        QdiscError::Invalid {
            what,
            expected: expected.into(),
            got: got.to_string(),
        }
    }
}
