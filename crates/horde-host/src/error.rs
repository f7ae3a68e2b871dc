//! Why a host call failed.

use thiserror::Error;

/// Why a connection could not be opened or an operation on it failed.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum HostError {
    /// The peer did not complete the handshake within the connection's handshake timeout;
    /// what this end saw of it says why.
    #[error("handshake with the peer timed out: {0}")]
    HandshakeTimeout(HandshakeSeen),
    /// The host has no open interface with that index (removed, or down just now).
    #[error("no interface {0}")]
    NoInterface(usize),
    /// The session refused the call (unknown stream, ADU too large, closed...).
    #[error("{0}")]
    Session(#[from] horde_proto::SessionError),
}

/// What the initiator saw of a handshake that never completed: the answers it got tell a
/// silent peer (wrong key, not allowed, not running, unreachable) from a loaded one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HandshakeSeen {
    /// Initiations sent (each resend on every channel counts).
    pub initiations_sent: u32,
    /// Cookie replies accepted: the peer got the initiation, knows this end's address, and
    /// was under load or rate-limiting it.
    pub cookie_replies: u32,
    /// Responses to this handshake that did not authenticate (not from the holder of the
    /// peer key, or altered on the way).
    pub bad_responses: u32,
}

impl std::fmt::Display for HandshakeSeen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sent = self.initiations_sent;
        if self.bad_responses > 0 {
            write!(
                f,
                "{} response(s) to {sent} initiation(s) did not authenticate (not from the \
                 holder of the peer key, or altered on the way)",
                self.bad_responses
            )
        } else if self.cookie_replies > 0 {
            write!(
                f,
                "the peer answered {sent} initiation(s) only with {} cookie reply(ies): it \
                 is under load or rate-limiting this address, and never completed the handshake",
                self.cookie_replies
            )
        } else {
            write!(f, "no reply at all to {sent} initiation(s)")
        }
    }
}
