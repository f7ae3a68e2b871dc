//! Why a session call was refused.

use thiserror::Error;

use horde_policy::ChannelId;

use super::AduHandle;
use crate::recovery::RecoveryConfigError;
use crate::wire::WireError;

/// Why a [`Session`] call was refused. Nothing a peer sends produces one after the
/// handshake: bad datagrams are counted in [`SessionStats`] instead.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SessionError {
    /// No stream with this id was opened with [`Session::open_stream`].
    #[error("unknown stream {0}")]
    UnknownStream(u32),
    /// [`Session::open_stream`] was called twice with this id.
    #[error("stream {0} already open")]
    StreamExists(u32),
    /// The ADU would not fit the largest slot any channel offers (its MTU).
    #[error("ADU of {len} bytes exceeds the largest slot ({max} bytes)")]
    AduTooLarge {
        /// The ADU's payload length, bytes.
        len: usize,
        /// The largest payload a slot carries now, bytes.
        max: u32,
    },
    /// The session has ended or is ending and takes no more ADUs.
    #[error("session is closed")]
    Closed,
    /// Channel ids are one byte: a session has at most 256 channels.
    #[error("too many channels (at most 256)")]
    TooManyChannels,
    /// The datagram that should open a session does not decode.
    #[error("not a handshake packet: {0}")]
    Malformed(#[from] WireError),
    /// The datagram that should open a session is a valid packet of another kind.
    #[error("not a handshake packet: a {0} packet")]
    NotAHello(&'static str),
    /// The peer's hello is of a wire version this end does not speak.
    #[error("peer speaks wire version {peer}; this end speaks version {ours} only")]
    UnsupportedVersion {
        /// The version in the peer's hello.
        peer: u8,
        /// [`crate::wire::VERSION`].
        ours: u8,
    },
    /// A stream's [`RecoveryConfig`](crate::RecoveryConfig) is out of range.
    #[error("bad recovery settings: {0}")]
    BadRecovery(#[from] RecoveryConfigError),
    /// The ADU is not (or no longer) in its stream's send queue: it was sent, dropped
    /// or withdrawn already.
    #[error("ADU {} of stream {} is not queued", .0.id, .0.stream)]
    AduNotQueued(AduHandle),
    /// The session has no channel by that id.
    #[error("no channel {0}")]
    UnknownChannel(ChannelId),
    /// No objective by that id is active.
    #[error("no such objective")]
    UnknownObjective,
    /// A stream's [`latency_bound_ms`](crate::StreamConfig::latency_bound_ms) is not a
    /// number of ms within [`LATENCY_BOUND_MS`](crate::LATENCY_BOUND_MS).
    #[error("stream {stream}: latency_bound_ms = {ms} is not within 1 to 60000 ms")]
    BadLatencyBound {
        /// The stream being opened.
        stream: u32,
        /// The bound it asked for.
        ms: f64,
    },
    /// A stream's [`latency_copies`](crate::StreamConfig::latency_copies) cannot be had
    /// (see [`StreamConfig::latency_copies_error`](crate::StreamConfig::latency_copies_error)).
    #[error("stream {stream}: {reason}")]
    BadLatencyCopies {
        /// The stream being opened.
        stream: u32,
        /// What is wrong, naming the key.
        reason: String,
    },
}
