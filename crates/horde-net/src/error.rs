//! Why a runtime call failed.

use thiserror::Error;

use horde_host::{HandshakeSeen, HostError};

#[derive(Debug, Error)]
/// Why a runtime call failed.
pub enum NetError {
    #[error("i/o: {0}")]
    /// A socket operation failed.
    Io(#[from] std::io::Error),
    #[error("the host has shut down")]
    /// The host's driver task has stopped (shut down, or the runtime ended).
    HostGone,
    #[error("handshake with the peer timed out: {0}")]
    /// The peer did not complete the handshake within `handshake_timeout`; what this end
    /// saw of it (no reply at all, cookie replies, responses that did not authenticate).
    HandshakeTimeout(HandshakeSeen),
    #[error("no interface {0}")]
    /// The host has no open interface with that index (removed, or down just now).
    NoInterface(usize),
    #[error("{0}")]
    /// The session refused the call (unknown stream, ADU too large, closed...).
    Session(#[from] horde_proto::SessionError),
    #[error("configuration: {0}")]
    /// The host or connection configuration cannot work.
    Config(#[from] crate::config::ConfigError),
    #[error("{0}")]
    /// The message layer refused the call (see `horde_proto::message`).
    Message(#[from] horde_proto::message::MessageError),
}

impl From<HostError> for NetError {
    fn from(e: HostError) -> Self {
        match e {
            HostError::HandshakeTimeout(seen) => NetError::HandshakeTimeout(seen),
            HostError::NoInterface(i) => NetError::NoInterface(i),
            HostError::Session(e) => NetError::Session(e),
        }
    }
}
