//! The typed errors of the message layer: every bad call gets one, nothing panics.

use std::time::Duration;

use super::{Fate, MessageId, QueueId};

/// Why a call on the message layer was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MessageError {
    /// No such message: never submitted, or finished so long ago that its fate is forgotten.
    #[error("unknown message {0}")]
    UnknownMessage(MessageId),
    /// No such message queue.
    #[error("unknown message queue {0}")]
    UnknownQueue(QueueId),
    /// No such channel index in the estimates last given.
    #[error("unknown channel index {index} ({count} channels known)")]
    UnknownChannel {
        /// The index asked for.
        index: usize,
        /// How many channels the scheduler knows.
        count: usize,
    },
    /// A deadline at or before the current time.
    #[error("deadline {deadline:?} is not after now ({now:?})")]
    DeadlineInPast {
        /// The deadline given.
        deadline: Duration,
        /// The time of the call.
        now: Duration,
    },
    /// A priority outside `0..PRIORITY_LEVELS`.
    #[error("priority {priority} is outside 0..{levels}")]
    InvalidPriority {
        /// The priority given.
        priority: u8,
        /// How many levels there are.
        levels: u8,
    },
    /// A message larger than the configured limit.
    #[error("message of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The size given.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A cancel (or another change) of a message already delivered.
    #[error("message {0} was already delivered")]
    AlreadyDelivered(MessageId),
    /// A change to a message that already met another fate.
    #[error("message {id} already finished: {fate}")]
    AlreadyFinished {
        /// The message.
        id: MessageId,
        /// How it ended.
        fate: Fate,
    },
    /// A delivery confirmation for a message whose pieces are not all sent.
    #[error("message {0} is not fully sent, so it cannot be delivered")]
    NotFullySent(MessageId),
    /// A bandwidth range with min > max, or a bound that is negative or not a number.
    #[error("bandwidth range [{min}, {max}] is invalid: need 0 <= min <= max, both finite")]
    InvalidRange {
        /// The lower bound given, bytes per second.
        min: f64,
        /// The upper bound given, bytes per second.
        max: f64,
    },
    /// A configuration or estimate value that makes no sense.
    #[error("invalid {what}: {why}")]
    InvalidConfig {
        /// The setting.
        what: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// Admission control refused the message.
    #[error("message refused: {0}")]
    Refused(Refusal),
}

/// Why admission control refused a new message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// Admitting it would make an admitted message miss the deadline it can meet now.
    #[error(
        "it would make message {endangered} miss its deadline {deadline:?} \
         ({needed} pieces needed, {capacity} can arrive in time)"
    )]
    Endangers {
        /// The admitted message that would miss its deadline.
        endangered: MessageId,
        /// That message's deadline.
        deadline: Duration,
        /// Pieces that would have to arrive before that deadline.
        needed: u64,
        /// Pieces the channels can deliver before it.
        capacity: u64,
    },
    /// The message itself cannot arrive before its own deadline.
    #[error(
        "it cannot meet its own deadline {deadline:?} ({needed} pieces needed, \
         {capacity} can arrive in time)"
    )]
    Unreachable {
        /// The message's deadline.
        deadline: Duration,
        /// Pieces that would have to arrive before it.
        needed: u64,
        /// Pieces the channels can deliver before it.
        capacity: u64,
    },
}
