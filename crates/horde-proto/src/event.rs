//! Events a session reports to its application (thesis §3.2: ack, nack, throttle, and
//! received ADUs), plus connection and channel state changes.

use std::time::Duration;

use bytes::Bytes;
use horde_policy::ChannelId;

/// Why an ADU was reported lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackReason {
    /// Sent, and declared lost by gap or timeout.
    Lost,
    /// Dropped from the sender's queue to respect the stream's queue limit.
    QueueOverflow,
    /// Removed by the application before it was sent.
    Removed,
    /// Still queued when the session closed (never sent).
    Closed,
    /// Sent, but neither acknowledged nor declared lost when the session ended (closed,
    /// replaced, timed out): it may or may not have arrived.
    Abandoned,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// The peer sent `Close`.
    PeerClosed,
    /// This end's application closed it (reported once the close is acknowledged or
    /// its timeout passes).
    LocalClose,
    /// Nothing arrived from the peer for the idle timeout.
    IdleTimeout,
    /// A new handshake from the same peer key replaced this session (the peer restarted
    /// or reconnected).
    Replaced,
    /// The peer is unreachable (ICMP errors on every channel).
    Unreachable,
    /// The peer refused the session: it does not serve the service the hello asked for.
    /// Final: a persistent connection does not reconnect.
    ServiceRefused,
}

impl CloseReason {
    /// Whether a persistent connection opens a new session after this end: not after
    /// its own close, nor after the peer refused the service.
    pub fn reconnects(self) -> bool {
        !matches!(self, CloseReason::LocalClose | CloseReason::ServiceRefused)
    }

    /// A short phrase for logs and status lines ("idle timeout").
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::PeerClosed => "peer closed",
            CloseReason::LocalClose => "closed",
            CloseReason::IdleTimeout => "idle timeout",
            CloseReason::Replaced => "replaced by a new session",
            CloseReason::Unreachable => "peer unreachable",
            CloseReason::ServiceRefused => "service refused by the peer",
        }
    }
}

/// What [`Session::poll_event`](crate::Session::poll_event) hands the application, in
/// the order things happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The handshake finished; both ends know each other's aliases.
    Connected,
    /// An ADU was acknowledged. `rtt` is its transmission's round trip; `latency` is the
    /// thesis's insertion-to-ack time.
    Ack {
        /// The stream the ADU was queued on.
        stream: u32,
        /// The ADU's id within its stream ([`AduHandle::id`](crate::AduHandle::id)).
        adu: u64,
        /// The ADU's sequence number as the receiver sees it
        /// ([`AduHandle::seq`](crate::AduHandle::seq)).
        stream_seq: u64,
        /// The channel whose acknowledgement reported it.
        channel: ChannelId,
        /// Round trip of the acknowledged transmission, as the channel measured it.
        rtt: Duration,
        /// From [`Session::send_adu`](crate::Session::send_adu) to this ack, queueing
        /// included.
        latency: Duration,
    },
    /// An ADU is known or presumed lost.
    Nack {
        /// The stream the ADU was queued on.
        stream: u32,
        /// The ADU's id within its stream ([`AduHandle::id`](crate::AduHandle::id)).
        adu: u64,
        /// The ADU's sequence number as the receiver sees it
        /// ([`AduHandle::seq`](crate::AduHandle::seq)).
        stream_seq: u64,
        /// The channel of its last transmission; `None` if it was never sent.
        channel: Option<ChannelId>,
        /// Why it is considered lost.
        reason: NackReason,
    },
    /// An ADU earlier nacked as [`NackReason::Lost`] was acknowledged after all: the loss
    /// was spurious (reordering or a delay spike), and the ADU did arrive.
    LateAck {
        /// The stream the ADU was queued on.
        stream: u32,
        /// The ADU's id within its stream ([`AduHandle::id`](crate::AduHandle::id)).
        adu: u64,
        /// The ADU's sequence number as the receiver sees it
        /// ([`AduHandle::seq`](crate::AduHandle::seq)).
        stream_seq: u64,
        /// The channel whose acknowledgement reported it.
        channel: ChannelId,
        /// Round trip of the acknowledged transmission, as for [`Event::Ack`].
        rtt: Duration,
        /// From [`Session::send_adu`](crate::Session::send_adu) to this ack.
        latency: Duration,
    },
    /// The bandwidth allocator changed this stream's allocation (bytes per second).
    Throttle {
        /// The stream whose allocation changed.
        stream: u32,
        /// Its new allocation, bytes per second.
        rate: f64,
    },
    /// The stream's send queue, having reached its high-water mark, has fallen to its
    /// low-water mark: the application may queue more (see [`Session::writable`] and
    /// [`StreamConfig::water_marks`]). Fires once per crossing, not per ADU sent.
    ///
    /// [`Session::writable`]: crate::Session::writable
    /// [`StreamConfig::water_marks`]: crate::StreamConfig::water_marks
    Writable {
        /// The stream whose queue drained.
        stream: u32,
    },
    /// An ADU arrived from the peer.
    Received {
        /// The stream it was sent on.
        stream: u32,
        /// Its sequence number within the stream (the sender's
        /// [`AduHandle::seq`](crate::AduHandle::seq)).
        stream_seq: u64,
        /// The channel it arrived on.
        channel: ChannelId,
        /// The application's bytes, recovery framing removed.
        payload: Bytes,
    },
    /// A channel stopped getting acknowledgements (or was removed): it carries no data
    /// until a probe on it is answered.
    ChannelDown {
        /// The channel that went down.
        channel: ChannelId,
    },
    /// A channel was added, or answered a probe after [`Event::ChannelDown`]: the
    /// scheduler uses it again.
    ChannelUp {
        /// The channel that came up.
        channel: ChannelId,
    },
    /// The session ended; no event follows unless the runtime reconnects
    /// ([`Event::Reconnecting`]).
    Closed {
        /// Why it ended.
        reason: CloseReason,
    },
    /// The session ended for `reason` and the runtime is opening a new one to the same
    /// peer (attempt `attempt`, from 1); [`Event::Connected`] follows when it is up.
    Reconnecting {
        /// Why the previous session ended.
        reason: CloseReason,
        /// Handshake attempt number, from 1.
        attempt: u32,
    },
    /// The peer's receive buffer is full: data waits in the send queues (and
    /// [`Session::writable`] turns false as they fill) until [`Event::FlowResumed`].
    ///
    /// [`Session::writable`]: crate::Session::writable
    FlowBlocked,
    /// The peer has room again after [`Event::FlowBlocked`].
    FlowResumed,
}
