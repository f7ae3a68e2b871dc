//! Events a session reports to its application (thesis §3.2: ack, nack, throttle, and
//! received ADUs), plus connection and channel state changes.

use std::time::Duration;

use bytes::Bytes;

/// Why an ADU was reported lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackReason {
    /// Sent, and declared lost by gap or timeout.
    Lost,
    /// Dropped from the sender's queue to respect the stream's queue limit.
    QueueOverflow,
    /// Removed by the application before it was sent.
    Removed,
    /// Still queued when the session closed.
    Closed,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The handshake finished; both ends know each other's aliases.
    Connected,
    /// An ADU was acknowledged. `rtt` is its transmission's round trip; `latency` is the
    /// thesis's insertion-to-ack time.
    Ack {
        stream: u32,
        adu: u64,
        stream_seq: u64,
        channel: u8,
        rtt: Duration,
        latency: Duration,
    },
    /// An ADU is known or presumed lost.
    Nack {
        stream: u32,
        adu: u64,
        stream_seq: u64,
        channel: Option<u8>,
        reason: NackReason,
    },
    /// An ADU earlier nacked as [`NackReason::Lost`] was acknowledged after all: the loss
    /// was spurious (reordering or a delay spike), and the ADU did arrive.
    LateAck {
        stream: u32,
        adu: u64,
        stream_seq: u64,
        channel: u8,
        rtt: Duration,
        latency: Duration,
    },
    /// The bandwidth allocator changed this stream's allocation (bytes per second).
    Throttle {
        stream: u32,
        rate: f64,
    },
    /// The stream's send queue, having reached its high-water mark, has fallen to its
    /// low-water mark: the application may queue more (see [`Session::writable`] and
    /// [`StreamConfig::water_marks`]). Fires once per crossing, not per ADU sent.
    ///
    /// [`Session::writable`]: crate::Session::writable
    /// [`StreamConfig::water_marks`]: crate::StreamConfig::water_marks
    Writable {
        stream: u32,
    },
    /// An ADU arrived from the peer.
    Received {
        stream: u32,
        stream_seq: u64,
        channel: u8,
        payload: Bytes,
    },
    ChannelDown {
        channel: u8,
    },
    ChannelUp {
        channel: u8,
    },
    /// The peer closed the session.
    Closed,
}
