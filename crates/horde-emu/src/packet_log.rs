//! Per-packet records, kept when a channel is started with packet logging: when each
//! packet arrived, when it left (or why it did not), and optionally its bytes.

use std::time::Duration;

use crate::stats::Direction;

/// What became of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Sent out of the emulator.
    Delivered,
    /// Tail-dropped: the link's buffer was full.
    DroppedQueue,
    /// Removed by the link's loss process (reported when the emulator reclaims its
    /// payload, so such records come late and out of order).
    DroppedLoss,
    /// The channel was down on arrival or at release.
    DroppedDown,
    /// No destination known, or the send failed.
    DroppedOther,
}

impl Fate {
    /// Short name used in logs: `delivered`, `queue`, `loss`, `down`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Delivered => "delivered",
            Fate::DroppedQueue => "queue",
            Fate::DroppedLoss => "loss",
            Fate::DroppedDown => "down",
            Fate::DroppedOther => "other",
        }
    }
}

/// One packet through one channel direction. Times are since the emulator started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketRecord {
    pub channel: usize,
    pub dir: Direction,
    pub arrival: Duration,
    /// When it was sent out; `None` for dropped packets.
    pub departure: Option<Duration>,
    pub size: usize,
    pub fate: Fate,
    /// The packet itself, for delivered packets when capture was asked for.
    pub payload: Option<Vec<u8>>,
}

/// How much the emulator remembers about each packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PacketLogging {
    /// Counters only.
    #[default]
    Off,
    /// A [`PacketRecord`] per packet, without payload.
    Records,
    /// Records with the payload of delivered packets (for packet captures).
    RecordsWithPayload,
}
