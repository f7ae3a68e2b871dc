//! The operations an application asks of one connection, each with the way its answer
//! goes back. Answers are callbacks, so that the host owns no channel type of any
//! runtime: a tokio driver wraps its oneshot senders, a test collects into a cell.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use horde_policy::{Fields, Objective, ObjectiveId, Value};
use horde_proto::recovery::RecoveryStats;
use horde_proto::{
    AduHandle, ChannelId, ChannelStats, ChannelView, LatencyMode, SessionStats, Startup,
    StreamConfig,
};

use crate::config::ChannelTarget;
use crate::error::HostError;

/// Where one answer goes.
pub type Reply<T> = Box<dyn FnOnce(T) + Send>;
/// Where the answer to a call that can fail goes.
pub type Answer<T> = Reply<Result<T, HostError>>;

/// One operation on a connection ([`Host::handle_command`](crate::Host::handle_command)).
/// An operation on a connection that is gone is dropped with its reply unanswered.
pub enum ConnOp {
    /// Open a stream for sending.
    OpenStream(u32, StreamConfig, Answer<()>),
    /// Queue an ADU; without a reply, a refusal is only logged.
    Send {
        /// The stream.
        stream: u32,
        /// The ADU.
        payload: Bytes,
        /// Its header fields, for objectives.
        fields: Fields,
        /// Where its handle goes.
        reply: Option<Answer<AduHandle>>,
    },
    /// Queue several ADUs of one stream, in order, with one answer for the lot: each
    /// ADU's handle or why it was refused.
    SendBatch {
        /// The stream.
        stream: u32,
        /// The ADUs.
        payloads: Vec<Bytes>,
        /// Their header fields, the same for each.
        fields: Fields,
        /// Where their handles go, in the order of `payloads`.
        reply: Reply<Vec<Result<AduHandle, HostError>>>,
    },
    /// Change a header field of a queued ADU.
    SetField(AduHandle, String, Value),
    /// Withdraw a queued ADU; `false` if it was already sent.
    Remove(AduHandle, Reply<bool>),
    /// Cap a stream's rate, or make it elastic.
    SetMaxRate(u32, Option<f64>, Answer<()>),
    /// Answered once the stream may take more ADUs.
    Writable(u32, Answer<()>),
    /// Give the scheduler an objective.
    Inject(Arc<dyn Objective>, Reply<ObjectiveId>),
    /// Withdraw an objective.
    RemoveObjective(ObjectiveId),
    /// The RTT (mean, variance) of each live channel.
    LatencyModes(Reply<Vec<LatencyMode>>),
    /// The session's counters.
    Stats(Reply<SessionStats>),
    /// What the streams' loss recovery did, summed; `None` if no stream uses it.
    Recovery(Reply<Option<RecoveryStats>>),
    /// Each channel as it stands now.
    Channels(Reply<Vec<ChannelStatus>>),
    /// Where the session's keys stand in their rotation.
    Keys(Reply<Option<horde_crypto::KeyStatus>>),
    /// Add a channel over one of the host's interfaces.
    AddChannel(ChannelTarget, Answer<ChannelId>),
    /// Remove a channel.
    RemoveChannel(ChannelId),
    /// Close the connection.
    Close,
}

/// One channel of a connection, as [`ConnOp::Channels`] reports it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChannelStatus {
    /// The channel's id, the same at both ends.
    pub id: ChannelId,
    /// Index of the host interface the channel sends from.
    pub interface: u16,
    /// The peer's address on this channel, as last seen.
    pub remote: SocketAddr,
    /// Whether the channel's packets are being acknowledged; a dead channel gets no
    /// traffic until a probe is answered.
    pub alive: bool,
    /// Smoothed round trip, once measured.
    pub srtt_ms: Option<f64>,
    /// The rate the congestion controller expects the channel to carry, bytes/s.
    pub rate_bytes_per_s: f64,
    /// While the channel's start-up still counts, the round trip its rate doubles over and
    /// the rounds of doubling left: the rate is how far the start-up has come, not what
    /// the path carries. `None` once the rate is what the channel is judged on.
    pub startup: Option<Startup>,
    /// Estimated link loss probability, in [0, 1].
    pub loss: f64,
    /// The congestion controller's name.
    pub congestion: &'static str,
    /// Packet and byte counters.
    pub stats: ChannelStats,
    /// The queueing budget a stream's latency bound holds the channel to, ms, while it
    /// does (docs/congestion.md, "Latency objectives").
    pub queue_budget_ms: Option<f64>,
}

impl ChannelStatus {
    /// The status of one channel of a session.
    pub fn of(c: ChannelView<'_>) -> Self {
        Self {
            id: c.id(),
            interface: c.local(),
            remote: c.remote(),
            alive: c.is_alive(),
            srtt_ms: c.srtt().map(|d| d.as_secs_f64() * 1e3),
            rate_bytes_per_s: c.rate(),
            startup: c.startup(),
            loss: c.loss_rate(),
            congestion: c.congestion_control(),
            stats: c.stats(),
            queue_budget_ms: c.queue_budget().map(|d| d.as_secs_f64() * 1e3),
        }
    }
}
