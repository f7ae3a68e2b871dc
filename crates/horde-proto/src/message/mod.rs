//! Messages with priorities and deadlines, and bandwidth notifications: the network API of
//! ATP (Atkin & Birman) over all of a session's channels at once. Sans-IO: the time is an
//! argument, and nothing here owns a socket, a thread or a payload.
//!
//! - [`MessageScheduler`]: the sender. Messages are submitted ([`MessageSpec`]), pass
//!   admission control, and are cut into [`Piece`]s that a driver asks for one channel
//!   slot at a time ([`MessageScheduler::poll_piece`]). Strict priority across
//!   [`PRIORITY_LEVELS`] levels, earliest deadline first within a level, fair shares
//!   between [`QueueId`]s. Every message ends in exactly one [`Fate`], reported by a
//!   [`MessageEvent::Finished`]; a deadline that can no longer be met suspends the message
//!   and reports [`MessageEvent::Early`] first.
//! - [`Reassembly`]: the receiver. Pieces in any order become whole messages; a
//!   [`ControlItem::Cancel`] frees what a cancelled message held.
//! - [`BandwidthEstimator`] and [`BandwidthNotifier`]: the host-wide estimate across all
//!   channels, and one-shot range registrations that fire when it leaves the range.
//! - [`codec`]: the byte layout of a piece header and a control item, for carrying them as
//!   ADUs.
//!
//! The rules (admission, early expiry, shares, estimator) are written in
//! `docs/messages.md`.

mod admission;
pub mod codec;
mod error;
mod estimate;
mod pool;
mod queue;
mod reassembly;
mod scheduler;
mod source;

use std::fmt;
use std::time::Duration;

pub use crate::channel::{Startup, STARTUP_ROUNDS};
pub use error::{MessageError, Refusal};
pub use estimate::{
    BandwidthEstimate, BandwidthEstimator, BandwidthEvent, BandwidthNotifier, EstimatorConfig,
    RangeId, UsageSample,
};
pub use pool::{MemberId, PooledEstimator};
pub use reassembly::{Reassembly, ReassemblyError, ReceivedMessage};
pub use scheduler::{MessageScheduler, MessageStatus};
pub use source::MessageSource;

/// How many strict priority levels there are; level 0 is the most important.
pub const PRIORITY_LEVELS: u8 = 8;

/// A message, numbered by its sender from 1 upwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(pub u64);

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A message queue of the application; queue 0 exists from the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId(pub u32);

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "q{}", self.0)
    }
}

/// What the application says about a new message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageSpec {
    /// The queue it joins.
    pub queue: QueueId,
    /// Its strict priority, `0..PRIORITY_LEVELS`, 0 most important.
    pub priority: u8,
    /// Its length in bytes; the bytes themselves stay with the application (see
    /// [`MessageSource`]).
    pub size: u64,
    /// When it becomes useless, on the sender's clock (the same clock as `now`). `None`
    /// is an infinite deadline.
    pub deadline: Option<Duration>,
}

impl MessageSpec {
    /// A message of `size` bytes on queue 0 at `priority`, without deadline.
    pub fn new(priority: u8, size: u64) -> Self {
        Self {
            queue: QueueId(0),
            priority,
            size,
            deadline: None,
        }
    }

    /// The same message with a deadline.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The same message on another queue.
    pub fn on_queue(mut self, queue: QueueId) -> Self {
        self.queue = queue;
        self
    }
}

/// What the sender knows of one channel: what admission, early expiry and slot choice use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelEstimate {
    /// Sending rate, bytes per second.
    pub rate: f64,
    /// One-way delay: a piece of `len` bytes sent at `t` arrives at
    /// `t + delay + len / rate`.
    pub delay: Duration,
    /// `Some` while the channel's start-up still counts: `rate` is how far its window has
    /// grown, not what the path carries, and admission and early expiry count it as
    /// doubling each `round_trip` for the `rounds_left`, then holding (`docs/messages.md`,
    /// "Start-up").
    pub startup: Option<Startup>,
}

impl ChannelEstimate {
    /// A channel whose rate is measured: it holds at `rate`.
    pub fn steady(rate: f64, delay: Duration) -> Self {
        Self {
            rate,
            delay,
            startup: None,
        }
    }

    /// Whether a piece of `len` bytes sent on this channel at `now` arrives by
    /// `deadline`: the rule by which the scheduler cuts pieces for it.
    pub fn arrives_by(&self, now: Duration, len: u32, deadline: Duration) -> bool {
        admission::arrives_in_time(self, now, len, deadline)
    }
}

/// One ADU-sized slice of a message, as the scheduler hands it out. The driver reads
/// `offset..offset + len` from the message's [`MessageSource`] and sends the bytes behind
/// a [`codec::PieceHeader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// The message.
    pub message: MessageId,
    /// Its queue.
    pub queue: QueueId,
    /// Its priority when the piece was cut.
    pub priority: u8,
    /// Where the slice starts in the message.
    pub offset: u64,
    /// The slice's length.
    pub len: u32,
    /// The message's whole length: the receiver knows the boundary from it.
    pub total: u64,
}

impl Piece {
    /// The first slice of its message.
    pub fn is_first(&self) -> bool {
        self.offset == 0
    }

    /// The last slice of its message.
    pub fn is_last(&self) -> bool {
        self.offset + u64::from(self.len) == self.total
    }

    /// The header that travels in front of the slice.
    pub fn header(&self) -> codec::PieceHeader {
        codec::PieceHeader {
            message: self.message,
            offset: self.offset,
            total: self.total,
            priority: self.priority,
        }
    }
}

/// How a message ended. Each message gets exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fate {
    /// All its pieces were sent and the driver confirmed the receiver has the whole message.
    Delivered,
    /// Its early callback fired ([`MessageEvent::Early`]) for its current deadline, and it
    /// then ended undelivered: the application cancelled it, or let the deadline pass.
    Early,
    /// The application cancelled it (no early callback outstanding).
    Cancelled,
    /// Its deadline passed on the sender's clock before all of it was sent.
    Expired,
}

impl fmt::Display for Fate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fate::Delivered => "delivered",
            Fate::Early => "early",
            Fate::Cancelled => "cancelled",
            Fate::Expired => "expired",
        })
    }
}

/// What the sender reports to the application, in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MessageEvent {
    /// The message can no longer meet its deadline with the current channel estimates, or
    /// its pieces already out will land after it ([`MessageScheduler::expect_arrival`]):
    /// what is left of it is suspended, and the application decides:
    /// [`MessageScheduler::resume`] (continue), [`MessageScheduler::defer`] (new
    /// deadline), [`MessageScheduler::cancel`] or [`MessageScheduler::reprioritise`].
    Early {
        /// The message.
        id: MessageId,
        /// When the scheduler noticed: before `deadline`, or after it when a piece
        /// already out was lost or landed later than forecast.
        at: Duration,
        /// The deadline it cannot meet.
        deadline: Duration,
        /// Bytes not yet sent.
        remaining: u64,
    },
    /// The message met its fate; nothing more is reported about it.
    Finished {
        /// The message.
        id: MessageId,
        /// How it ended.
        fate: Fate,
        /// When.
        at: Duration,
        /// When it was submitted.
        submitted: Duration,
    },
}

/// What the sender must tell the receiver besides pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlItem {
    /// The message was cancelled after some of it was sent: the receiver frees what it
    /// holds of it and drops its late pieces.
    Cancel(MessageId),
}

/// Settings of the message layer.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageConfig {
    /// Bytes per piece (one ADU).
    pub piece_size: u32,
    /// The largest message accepted, bytes.
    pub max_message_size: u64,
    /// Which admitted deadlines a new message must not break.
    pub admission: AdmissionPolicy,
    /// How often, at most, deadlines are re-checked against the channel estimates when
    /// nothing else happens (the driver calls `handle_timeout` at `poll_timeout`).
    pub check_interval: Duration,
    /// The weight of plain ADU streams against message queues while streams have data.
    pub stream_weight: u32,
    /// How many messages of a queue, in service order, a slot choice looks at to find one
    /// whose piece arrives in time on the slot's channel.
    pub slot_scan: usize,
    /// How many finished messages' fates are remembered, to tell "already delivered" from
    /// "unknown".
    pub remembered_fates: usize,
}

impl Default for MessageConfig {
    fn default() -> Self {
        Self {
            piece_size: 1200,
            max_message_size: 1 << 30,
            admission: AdmissionPolicy::ProtectAll,
            check_interval: Duration::from_millis(50),
            stream_weight: u32::from(PRIORITY_LEVELS),
            slot_scan: 64,
            remembered_fates: 65_536,
        }
    }
}

/// Which admitted deadlines admission control protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionPolicy {
    /// Every admitted deadline that the estimates say can be met (the paper's sentence).
    ProtectAll,
    /// Only those of the new message's priority level: a more important message may push
    /// less important ones past their deadlines, and they then fire early.
    ProtectSameLevel,
}
