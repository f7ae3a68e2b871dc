//! Messages with priorities and deadlines over a connection: the sans-IO message core of
//! `horde_proto::message` driven by a task of its own above the session.
//!
//! A [`MessageEndpoint`] takes a [`Connection`] whole. Its task reads the connection's
//! events, carries message pieces as ADUs on [`MESSAGE_STREAM`] (or, when only the
//! quickest channel lands them in time, [`MESSAGE_QUICK_STREAM`]) and cancels on
//! [`MESSAGE_CONTROL_STREAM`], feeds the scheduler the channels' rates and delays, and
//! reports what happens as [`MessageNotice`]s; every other connection event is passed on
//! as [`MessageNotice::Connection`]. Both ends of a connection can use one: each sends and
//! receives. The layering and its limits are written in `docs/messages.md`.

mod arrival;
mod host_bandwidth;
mod pump;
mod slots;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use horde_proto::message::{
    codec, BandwidthEstimate, BandwidthEvent, BandwidthNotifier, ChannelEstimate, MessageConfig,
    MessageError, MessageEvent, MessageId, MessageScheduler, MessageSource, MessageSpec,
    MessageStatus, QueueId, RangeId, Reassembly, ReceivedMessage,
};
use horde_proto::{Event, StreamConfig};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::connection::{Connection, ConnectionHandle};
use crate::error::NetError;
pub use host_bandwidth::HostBandwidth;
use host_bandwidth::Membership;

/// The stream that carries message pieces, one piece per ADU.
pub const MESSAGE_STREAM: u32 = 0xFFFF_FF00;
/// The stream that carries cancels, so that a cancel does not wait behind the pieces it
/// cancels.
pub const MESSAGE_CONTROL_STREAM: u32 = 0xFFFF_FF01;
/// The stream that carries the pieces only the quickest channel lands in time: the
/// session puts each on the quickest slot of its cycle ([`StreamConfig::quickest`]).
pub const MESSAGE_QUICK_STREAM: u32 = 0xFFFF_FF02;

/// Whether `stream` is one of the message layer's.
pub fn is_message_stream(stream: u32) -> bool {
    matches!(
        stream,
        MESSAGE_STREAM | MESSAGE_CONTROL_STREAM | MESSAGE_QUICK_STREAM
    )
}

/// The most bytes the message stream's session queue holds, and so the most the endpoint
/// keeps unacknowledged: its window, not the queue, decides what waits in the session,
/// and a queue that overflowed would nack pieces only to have them sent again.
const MESSAGE_QUEUE_LIMIT: usize = 16 << 20;

/// The largest ADU of a session with the default channel settings.
const DEFAULT_SLOT_ADU: u32 = 1200;

/// Settings of a [`MessageEndpoint`]. A piece plus its header
/// ([`codec::PIECE_HEADER_LEN`]) must fit in one ADU of the session: a piece the session
/// refuses cancels its message with [`MessageNotice::SendFailed`].
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// The sender's settings (piece size, admission, check interval...).
    pub messages: MessageConfig,
    /// Most bytes the receiver holds for partial messages, each counted at its whole
    /// length from its first piece (the buffer its pieces are written into).
    pub receive_limit: u64,
    /// How often the channels' rates and delays are read again.
    pub refresh: Duration,
    /// Extra time of sending, beyond each channel's round trip, that may sit unacknowledged
    /// in the session: enough to keep the channels busy, little enough that a more
    /// important message does not wait behind many pieces already handed over.
    pub queue_ahead: Duration,
    /// What a message's deadline is checked against.
    pub deadline_check: DeadlineCheck,
    /// The bandwidth estimate behind [`MessageNotice::Bandwidth`], sampled once per its
    /// tick. `None` (the default): the host's ([`Host::bandwidth`](crate::Host::bandwidth)),
    /// which the endpoints of the host's other connections share, so that the ranges are
    /// judged on what all their channels carry. `Some`: one of the application's own,
    /// e.g. `HostBandwidth::new` for this connection alone or other settings.
    pub host_bandwidth: Option<HostBandwidth>,
}

/// What a message's deadline is checked against (`docs/messages.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeadlineCheck {
    /// The expected arrival of its pieces: a piece is cut only if it lands in time on
    /// whichever channel the session puts it (the latest channel's landing time), the
    /// unacknowledged bytes are held to each channel's round trip plus `queue_ahead`, and
    /// pieces in flight are checked again as the channels' queues change.
    #[default]
    Arrival,
    /// The hand-over of its last piece to the session, each piece judged on a channel of
    /// the endpoint's own choosing that the session need not take: a message can arrive
    /// after its deadline without an early callback. For comparison.
    Handover,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            // A piece and its header fill one ADU of the default channel slot.
            messages: MessageConfig {
                piece_size: DEFAULT_SLOT_ADU - codec::PIECE_HEADER_LEN as u32,
                ..MessageConfig::default()
            },
            receive_limit: 256 << 20,
            refresh: Duration::from_millis(50),
            queue_ahead: Duration::from_millis(30),
            deadline_check: DeadlineCheck::Arrival,
            host_bandwidth: None,
        }
    }
}

/// What a [`MessageEndpoint`] reports, in order.
#[derive(Debug)]
pub enum MessageNotice {
    /// About a message this end sent: its early callback or its fate.
    Sender(MessageEvent),
    /// A whole message from the peer.
    Received(ReceivedMessage),
    /// A message-stream ADU from the peer that is not a valid item, or a piece the receiver
    /// refused (too large, inconsistent): dropped.
    Dropped {
        /// What was wrong with it.
        error: String,
    },
    /// Handing a piece to the session failed; the message was cancelled.
    SendFailed {
        /// The message.
        id: MessageId,
        /// The session's error.
        error: NetError,
    },
    /// The bandwidth estimate left a range registered with
    /// [`MessageHandle::register_bandwidth_range`]; the range is gone, and the application
    /// may register a new one around `available`.
    Bandwidth(BandwidthEvent),
    /// Any other event of the connection.
    Connection(Event),
}

/// The scheduler, the bytes of live messages and the receiver, shared by the API and the
/// task. Never held across an await.
pub(crate) struct State {
    pub(crate) scheduler: MessageScheduler,
    /// Where each live message's bytes are read from, a piece at a time.
    pub(crate) sources: std::collections::HashMap<MessageId, Box<dyn MessageSource + Send>>,
    pub(crate) reassembly: Reassembly,
    pub(crate) estimates: Vec<ChannelEstimate>,
    /// The estimate of the quickest channel alone, when the arrival check has one: its
    /// pieces go on [`MESSAGE_QUICK_STREAM`].
    pub(crate) quick_lane: Option<usize>,
    /// Pieces of undelivered messages taken back from the session's queue.
    pub(crate) withdrawn_pieces: u64,
    pub(crate) copied_pieces: u64,
    /// The host's bandwidth estimate this endpoint reports to, and the ranges on it.
    pub(crate) bandwidth: Membership,
    pub(crate) ranges: BandwidthNotifier,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    pub(crate) wake: Notify,
    start: Instant,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the scheduler half-changed in a way
        // worse than stopping; keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn now(&self) -> Duration {
        self.start.elapsed()
    }
}

/// Prioritised messages with deadlines over one connection. See the [module](self)
/// documentation.
pub struct MessageEndpoint {
    api: MessageHandle,
    notices: mpsc::UnboundedReceiver<MessageNotice>,
}

/// The calls of a [`MessageEndpoint`], cheap to clone and share between tasks while one
/// of them reads the notices.
#[derive(Clone)]
pub struct MessageHandle {
    shared: Arc<Shared>,
    handle: ConnectionHandle,
}

impl MessageEndpoint {
    /// Takes the connection over: opens the message streams and starts the task on the
    /// current tokio runtime. The task stops when the endpoint is dropped or the
    /// connection is gone.
    pub async fn new(conn: Connection, config: EndpointConfig) -> Result<Self, NetError> {
        let scheduler = MessageScheduler::new(config.messages.clone())?;
        let host = config
            .host_bandwidth
            .clone()
            .unwrap_or_else(|| conn.host_bandwidth().clone());
        let bandwidth = host.join();
        let (handle, events) = conn.split();
        let pieces = StreamConfig {
            max_queue_bytes: MESSAGE_QUEUE_LIMIT,
            ..StreamConfig::default()
        };
        handle.open_stream(MESSAGE_STREAM, pieces.clone()).await?;
        let quick = StreamConfig {
            quickest: true,
            ..pieces
        };
        handle.open_stream(MESSAGE_QUICK_STREAM, quick).await?;
        handle
            .open_stream(MESSAGE_CONTROL_STREAM, StreamConfig::default())
            .await?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                scheduler,
                sources: Default::default(),
                reassembly: Reassembly::new(config.receive_limit, config.messages.remembered_fates),
                estimates: Vec::new(),
                quick_lane: None,
                withdrawn_pieces: 0,
                copied_pieces: 0,
                bandwidth,
                ranges: BandwidthNotifier::new(),
            }),
            wake: Notify::new(),
            start: Instant::now(),
        });
        let (tx, notices) = mpsc::unbounded_channel();
        tokio::spawn(pump::start(shared.clone(), handle.clone(), events, tx, config).await);
        Ok(Self {
            api: MessageHandle { shared, handle },
            notices,
        })
    }

    /// The next notice; `None` once the connection is gone.
    pub async fn next_notice(&mut self) -> Option<MessageNotice> {
        self.notices.recv().await
    }

    /// A handle for the calls, for other tasks.
    pub fn handle(&self) -> MessageHandle {
        self.api.clone()
    }
}

impl std::ops::Deref for MessageEndpoint {
    type Target = MessageHandle;
    fn deref(&self) -> &MessageHandle {
        &self.api
    }
}

impl MessageHandle {
    /// The endpoint's clock, the one deadlines are on: time since it was created.
    pub fn now(&self) -> Duration {
        self.shared.now()
    }

    /// Submits a message of `payload` (its length must be `spec.size`); its deadline, if
    /// any, is on [`now`](Self::now)'s clock. Refused with the core's typed errors
    /// ([`MessageError::Refused`] by admission control).
    pub fn submit(&self, spec: MessageSpec, payload: Bytes) -> Result<MessageId, MessageError> {
        if spec.size != payload.len() as u64 {
            return Err(MessageError::InvalidConfig {
                what: "message size",
                why: format!(
                    "the spec says {} bytes, the payload has {}",
                    spec.size,
                    payload.len()
                ),
            });
        }
        self.submit_source(spec, Box::new(payload))
    }

    /// Submits a message whose `spec.size` bytes are read from `source` a piece at a time
    /// as they are sent, so that a large message (a file: `BufReader<File>`) never sits in
    /// memory whole. A source that turns out shorter than `spec.size` cancels the message
    /// when the missing piece is due.
    pub fn submit_source(
        &self,
        spec: MessageSpec,
        source: Box<dyn MessageSource + Send>,
    ) -> Result<MessageId, MessageError> {
        let now = self.now();
        let id = {
            let mut state = self.shared.lock();
            let id = state.scheduler.submit(now, spec)?;
            state.sources.insert(id, source);
            id
        };
        self.shared.wake.notify_one();
        Ok(id)
    }

    /// Submits `payload` at `priority` on queue 0, due `within` from now (`None`: no
    /// deadline).
    pub fn send(
        &self,
        priority: u8,
        within: Option<Duration>,
        payload: Bytes,
    ) -> Result<MessageId, MessageError> {
        let mut spec = MessageSpec::new(priority, payload.len() as u64);
        spec.deadline = within.map(|w| self.now() + w);
        self.submit(spec, payload)
    }

    fn change<T>(
        &self,
        f: impl FnOnce(&mut MessageScheduler, Duration) -> Result<T, MessageError>,
    ) -> Result<T, MessageError> {
        let now = self.now();
        let result = f(&mut self.shared.lock().scheduler, now);
        self.shared.wake.notify_one();
        result
    }

    /// Cancels a message; the receiver frees what it holds of it.
    pub fn cancel(&self, id: MessageId) -> Result<(), MessageError> {
        self.change(|s, now| s.cancel(now, id))
    }

    /// Sends a suspended message again (after an early callback: "continue").
    pub fn resume(&self, id: MessageId) -> Result<(), MessageError> {
        self.change(|s, _| s.resume(id))
    }

    /// Gives a message a new deadline on [`now`](Self::now)'s clock, or none.
    pub fn defer(&self, id: MessageId, deadline: Option<Duration>) -> Result<(), MessageError> {
        self.change(|s, now| s.defer(now, id, deadline))
    }

    /// Moves a message to another priority level.
    pub fn reprioritise(&self, id: MessageId, priority: u8) -> Result<(), MessageError> {
        self.change(|s, _| s.reprioritise(id, priority))
    }

    /// A new message queue with `weight`.
    pub fn create_queue(&self, weight: u32) -> Result<QueueId, MessageError> {
        self.change(|s, _| s.create_queue(weight))
    }

    /// Where a live message stands.
    pub fn status(&self, id: MessageId) -> Result<MessageStatus, MessageError> {
        self.shared.lock().scheduler.status(id)
    }

    /// The channel estimates the scheduler works with now (rate in bytes/s, one-way delay).
    pub fn estimates(&self) -> Vec<ChannelEstimate> {
        self.shared.lock().estimates.clone()
    }

    /// Pieces of cancelled or expired messages taken back from the session's queue before
    /// they were sent.
    pub fn withdrawn_pieces(&self) -> u64 {
        self.shared.lock().withdrawn_pieces
    }

    /// Pieces overdue on a slower channel that were sent again on the quick lane
    /// (see `docs/messages.md`, "Overdue pieces").
    pub fn copied_pieces(&self) -> u64 {
        self.shared.lock().copied_pieces
    }

    /// Whether plain streams on the connection count as having data: the session acked
    /// or nacked one of their ADUs within the last second. Admission then leaves them
    /// their weight's share ([`MessageConfig::stream_weight`]).
    pub fn streams_active(&self) -> bool {
        self.shared.lock().scheduler.streams_active()
    }

    /// Asks for a [`MessageNotice::Bandwidth`] when the bandwidth estimate (bytes/s)
    /// leaves `min..=max`: once, at the next estimate that is outside. A range with
    /// `min > max` or a bound that is not a finite rate >= 0 is refused.
    pub fn register_bandwidth_range(&self, min: f64, max: f64) -> Result<RangeId, MessageError> {
        self.shared.lock().ranges.register(min, max)
    }

    /// Withdraws a range that has not fired; `false` if it is unknown or already fired.
    pub fn unregister_bandwidth_range(&self, range: RangeId) -> bool {
        self.shared.lock().ranges.unregister(range)
    }

    /// The last bandwidth estimate (the host's, with
    /// [`EndpointConfig::host_bandwidth`]), once one tick has passed.
    pub fn bandwidth(&self) -> Option<BandwidthEstimate> {
        self.shared.lock().bandwidth.current()
    }

    /// Bytes the receiver holds for partial messages from the peer.
    pub fn held_bytes(&self) -> u64 {
        self.shared.lock().reassembly.held_bytes()
    }

    /// Partial messages from the peer the receiver holds.
    pub fn partial_messages(&self) -> usize {
        self.shared.lock().reassembly.partial_messages()
    }

    /// The connection's command handle, for plain streams and status.
    pub fn connection(&self) -> &ConnectionHandle {
        &self.handle
    }
}
