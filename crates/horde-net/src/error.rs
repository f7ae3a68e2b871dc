//! Why a runtime call failed.

use thiserror::Error;

use horde_host::HostError;

#[derive(Debug, Error)]
/// Why a runtime call failed.
pub enum NetError {
    #[error("i/o: {0}")]
    /// A socket operation failed.
    Io(#[from] std::io::Error),
    #[error("the host has shut down")]
    /// The host's driver task has stopped (shut down, or the runtime ended).
    HostGone,
    #[error("handshake with the peer timed out")]
    /// The peer did not answer the handshake within `handshake_timeout`.
    HandshakeTimeout,
    #[error("no interface {0}")]
    /// The host has no open interface with that index (removed, or down just now).
    NoInterface(usize),
    #[error("{0}")]
    /// The session refused the call (unknown stream, ADU too large, closed...).
    Session(#[from] horde_proto::SessionError),
    #[error("configuration: {0}")]
    /// The host or connection configuration cannot work.
    Config(#[from] crate::config::ConfigError),
}

impl From<HostError> for NetError {
    fn from(e: HostError) -> Self {
        match e {
            HostError::HandshakeTimeout => NetError::HandshakeTimeout,
            HostError::NoInterface(i) => NetError::NoInterface(i),
            HostError::Session(e) => NetError::Session(e),
        }
    }
}
