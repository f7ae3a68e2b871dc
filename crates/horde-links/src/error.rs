//! Error types: one for trace files, one for link specifications.

use std::io;

/// A Mahimahi trace could not be used.
///
/// Every variant names the trace (its file path, or the name given to
/// [`Trace::parse`](crate::Trace::parse)); line-level problems also name the 1-based line.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A line is malformed, or the trace as a whole cannot repeat. Shown as `file:line: message`.
    #[error("{file}:{line}: {message}")]
    Parse {
        /// The trace's name or path.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The trace has no timestamps at all.
    #[error("{file}: empty trace: expected one millisecond timestamp per line")]
    Empty {
        /// The trace's name or path.
        file: String,
    },
    /// The trace file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The trace's path.
        file: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// A [`LinkSpec`](crate::LinkSpec) is invalid or could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// A parameter is out of range, e.g. `loss.p must be a probability in [0, 1], got 1.5`.
    #[error("{what} must be {expected}, got {got}")]
    Invalid {
        /// The parameter, as written in TOML (`rate.kbps`, `loss.p`, ...).
        what: &'static str,
        /// What would have been accepted.
        expected: String,
        /// The offending value.
        got: String,
    },
    /// The rate trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

impl LinkError {
    pub(crate) fn invalid(
        what: &'static str,
        expected: impl Into<String>,
        got: impl ToString,
    ) -> LinkError {
        LinkError::Invalid {
            what,
            expected: expected.into(),
            got: got.to_string(),
        }
    }
}

/// [`CellularParams`](crate::cellular::CellularParams) or a requested trace length are out
/// of range.
#[derive(Debug, thiserror::Error)]
pub enum CellularError {
    /// A parameter is out of range, e.g. `mean_mbps must be a positive number ..., got -1`.
    #[error("{what} must be {expected}, got {got}")]
    Invalid {
        /// The parameter, as written in TOML (`mean_mbps`, `states.level`, ...).
        what: &'static str,
        /// What would have been accepted.
        expected: String,
        /// The offending value.
        got: String,
    },
}

impl CellularError {
    pub(crate) fn invalid(
        what: &'static str,
        expected: impl Into<String>,
        got: impl ToString,
    ) -> CellularError {
        CellularError::Invalid {
            what,
            expected: expected.into(),
            got: got.to_string(),
        }
    }
}
