//! A read-only look at a session's channels, for drivers and status displays: what a
//! channel is (id, interface, peer address) and how it is doing (liveness, RTT, rate,
//! loss, counters), without access to the state the session mutates.

use std::net::SocketAddr;
use std::time::Duration;

use horde_policy::ChannelId;

use super::{Channel, ChannelStats};

/// One channel of a session, read-only (see [`crate::Session::channels`]).
#[derive(Clone, Copy)]
pub struct ChannelView<'a> {
    ch: &'a Channel,
}

impl<'a> ChannelView<'a> {
    /// The channel's id, the same at both ends.
    pub fn id(&self) -> ChannelId {
        self.ch.id
    }

    /// The local interface (socket index) the channel sends from.
    pub fn local(&self) -> u16 {
        self.ch.local
    }

    /// The peer's address on this channel, as last seen (it follows address changes).
    pub fn remote(&self) -> SocketAddr {
        self.ch.remote
    }

    /// Whether the channel is live: its packets are acknowledged. A dead one gets no
    /// slots until a probe is acknowledged again.
    pub fn is_alive(&self) -> bool {
        self.ch.is_alive()
    }

    /// Smoothed round trip, once there is a sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.ch
            .rtt
            .srtt_ms()
            .map(|ms| Duration::from_secs_f64(ms / 1e3))
    }

    /// The sustained rate the congestion controller expects the channel to carry, in
    /// bytes per second (0 while dead).
    pub fn rate(&self) -> f64 {
        self.ch.rate()
    }

    /// While the channel's start-up still counts, the round trip its rate doubles over
    /// and the rounds left (`Channel::startup`); `None` once its rate is what it
    /// is judged on.
    pub fn startup(&self) -> Option<crate::channel::Startup> {
        self.ch.startup()
    }

    /// Full-size packets the congestion controller and pacer would let the channel send
    /// at `now` (0 while dead): a driver that sees open slots, data queued and credit
    /// left after polling the session has a sender leaving the channel idle.
    pub fn open_slots(&self, now: Duration) -> usize {
        self.ch.real_slot_count(now)
    }

    /// The estimated link loss probability, in [0, 1] (congestion losses excluded).
    pub fn loss_rate(&self) -> f64 {
        self.ch.loss.loss_rate()
    }

    /// The congestion controller's name.
    pub fn congestion_control(&self) -> &'static str {
        self.ch.congestion_control().name()
    }

    /// The channel's packet and byte counters.
    pub fn stats(&self) -> ChannelStats {
        self.ch.stats
    }

    /// The queueing budget a stream's latency objective holds the channel to, if any
    /// (`StreamConfig::latency_bound_ms`).
    pub fn queue_budget(&self) -> Option<Duration> {
        self.ch.queue_budget()
    }
}

impl std::fmt::Debug for ChannelView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.ch.fmt(f)
    }
}

/// A session's channels, read-only, in the order they were added.
#[derive(Clone, Copy, Debug)]
pub struct ChannelViews<'a> {
    channels: &'a [Channel],
}

impl<'a> ChannelViews<'a> {
    pub(crate) fn new(channels: &'a [Channel]) -> Self {
        Self { channels }
    }

    /// How many channels the session has.
    pub fn len(&self) -> usize {
        self.channels.len()
    }

    /// Whether the session has no channel.
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }

    /// Each channel in turn.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ChannelView<'a>> + 'a {
        self.channels.iter().map(|ch| ChannelView { ch })
    }

    /// The channel with id `id`, if the session has it.
    pub fn get(&self, id: ChannelId) -> Option<ChannelView<'a>> {
        self.iter().find(|c| c.id() == id)
    }
}
