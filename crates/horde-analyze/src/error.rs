//! Errors: every input problem names the file and where in it.

use std::io;

/// Why an input could not be analysed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// A CSV file is malformed, shown as `file:line:col: message` (1-based).
    #[error("{file}:{line}:{col}: {message}")]
    Csv {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column (field number).
        col: usize,
        /// What is wrong.
        message: String,
    },
    /// A capture is malformed, shown as `file:packet N: message` (1-based packet number,
    /// or 0 for the file header).
    #[error("{file}:packet {packet}: {message}")]
    Pcap {
        /// The file.
        file: String,
        /// 1-based packet number; 0 is the file header.
        packet: usize,
        /// What is wrong.
        message: String,
    },
    /// A Mahimahi trace line is malformed, shown as `file:line: message`.
    #[error("{file}:{line}: {message}")]
    Trace {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A named column is not in the file.
    #[error("{file}: no column `{column}` (columns: {available})")]
    NoColumn {
        /// The file.
        file: String,
        /// The column asked for.
        column: String,
        /// The columns there are.
        available: String,
    },
    /// An argument is out of range, e.g. a lag longer than the series.
    #[error("{0}")]
    Invalid(String),
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}
