//! Why a host call failed.

use thiserror::Error;

/// Why a connection could not be opened or an operation on it failed.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum HostError {
    /// The peer did not answer the handshake within the connection's handshake timeout.
    #[error("handshake with the peer timed out")]
    HandshakeTimeout,
    /// The host has no open interface with that index (removed, or down just now).
    #[error("no interface {0}")]
    NoInterface(usize),
    /// The session refused the call (unknown stream, ADU too large, closed...).
    #[error("{0}")]
    Session(#[from] horde_proto::SessionError),
}
