//! Errors of the emulator.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Anything that can go wrong starting or configuring the emulator.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The configuration text is malformed or invalid.
    #[error("{file}:{line}:{col}: {message}")]
    Config {
        file: String,
        line: usize,
        col: usize,
        message: String,
    },
    /// The configuration file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A link model could not be built from its spec (e.g. a missing trace file).
    #[error("channel `{channel}` {direction}: cannot build link: {source}")]
    BuildLink {
        channel: String,
        direction: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A relay socket could not be created or bound.
    #[error("channel `{channel}`: cannot bind {addr}: {source}")]
    Bind {
        channel: String,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// Two channels share a name, or a channel has none.
    #[error("invalid channel setup: {0}")]
    Setup(String),
    /// No channel with this name.
    #[error("no channel named `{0}`")]
    UnknownChannel(String),
    /// An operating-system call failed (thread spawn, epoll, eventfd, signal handler).
    #[error("{what}: {source}")]
    Os {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl EmuError {
    pub(crate) fn os(what: &'static str, source: std::io::Error) -> Self {
        Self::Os { what, source }
    }
}
