//! The handshake and channel membership: hellos and their acks, which channel a packet
//! belongs to, channels the peer opens on the accepting side.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::ChannelId;

use super::{ms, ChannelSpec, PendingTx, Session, SessionError, State};
use crate::channel::Channel;
use crate::event::Event;
use crate::wire::{self, Packet};

impl Session {
    pub(super) fn send_hellos(&mut self, now: Duration) {
        self.channels.queue_on_all(PendingTx::Hello);
        self.life
            .schedule_hellos(Some(now + ms(self.config.hello_interval_ms)));
    }

    /// Acknowledge a `Close` on the channel it came over (the first channel if the
    /// address is not one of them).
    pub(super) fn answer_close(&mut self, local: u16, src: SocketAddr) {
        if self.channels.is_empty() {
            return;
        }
        let idx = self
            .channels
            .iter()
            .position(|c| c.remote == src && c.local == local)
            .unwrap_or(0);
        let id = self.channels[idx].id;
        self.channels.queue(PendingTx::CloseAck(id));
    }

    /// The channel a hello or data packet arrived on, creating it on the accepting side.
    pub(super) fn peer_channel(
        &mut self,
        now: Duration,
        id: ChannelId,
        local: u16,
        src: SocketAddr,
    ) -> usize {
        if let Some(idx) = self.channels.index(id) {
            let ch = &mut self.channels[idx];
            ch.remote = src; // follow the peer across address changes
            ch.local = local;
            return idx;
        }
        let cfg = (self.channels.peer_config)(id);
        let idx = self.channels.push(Channel::new(id, local, src, cfg, now));
        if let Some(i) = self.channels.removed.iter().position(|&c| c == id) {
            self.channels.removed.swap_remove(i);
            self.events.push_back(Event::ChannelUp { channel: id });
        }
        idx
    }

    pub(super) fn data_channel(
        &mut self,
        now: Duration,
        id: ChannelId,
        local: u16,
        src: SocketAddr,
    ) -> Option<usize> {
        if self.is_client {
            self.known_channel(id, src)
        } else {
            Some(self.peer_channel(now, id, local, src))
        }
    }

    pub(super) fn known_channel(&mut self, id: ChannelId, src: SocketAddr) -> Option<usize> {
        match self.channels.index(id) {
            Some(idx) => {
                self.channels[idx].remote = src;
                Some(idx)
            }
            None => {
                self.stats.unknown_channel += 1;
                None
            }
        }
    }

    /// A hello (server side): the peer opens, or reopens, channel `channel`.
    pub(super) fn on_hello(
        &mut self,
        now: Duration,
        channel: ChannelId,
        aliases: Vec<SocketAddr>,
        local: u16,
        src: SocketAddr,
    ) {
        if self.is_client {
            return;
        }
        // A hello on a channel that already carried the peer's packets means the
        // peer removed the channel and added it again under the same id: its
        // sequence numbers start over, so this end starts over too (otherwise
        // they would look like duplicates of the old channel's packets).
        if self
            .channels
            .index(channel)
            .is_some_and(|i| self.channels[i].has_received())
        {
            self.drop_channel(now, channel);
        }
        self.peer_channel(now, channel, local, src);
        self.remote_aliases = aliases;
        self.channels.queue(PendingTx::HelloAck(channel));
    }

    /// A hello's acknowledgement (client side): the channel is confirmed, and the first
    /// one completes the handshake.
    pub(super) fn on_hello_ack(
        &mut self,
        now: Duration,
        channel: ChannelId,
        aliases: Vec<SocketAddr>,
        src: SocketAddr,
    ) {
        if !self.is_client {
            return;
        }
        if self.known_channel(channel, src).is_none() {
            return;
        }
        self.remote_aliases = aliases;
        self.life.confirmed(channel);
        if self.life.state == State::Handshaking {
            self.life.set_state(State::Connected, &self.config);
            self.life.schedule_hellos(None);
            self.events.push_back(Event::Connected);
            self.advertise_window(now);
        }
        if self.life.unconfirmed.is_empty() {
            self.life.schedule_hellos(None);
        } else if self.life.hello_due.is_none() {
            self.life
                .schedule_hellos(Some(now + ms(self.config.hello_interval_ms)));
        }
    }

    /// Add a channel at run time (a new interface came up, or came back). Returns its id,
    /// the lowest free one: it may be the id of a channel removed earlier. The
    /// application hears [`Event::ChannelUp`]. On the client side the channel's hello is
    /// repeated until the peer acknowledges it, and the peer restarts its state for that
    /// id when the hello arrives (see [`Session::handle_datagram`]).
    pub fn add_channel(
        &mut self,
        now: Duration,
        spec: ChannelSpec,
    ) -> Result<ChannelId, SessionError> {
        self.life.timers.invalidate_derived();
        let id = ChannelId::all()
            .find(|id| self.channels.index(*id).is_none())
            .ok_or(SessionError::TooManyChannels)?;
        self.channels
            .push(Channel::new(id, spec.local, spec.remote, spec.config, now));
        self.channels.removed.retain(|&c| c != id);
        self.events.push_back(Event::ChannelUp { channel: id });
        if self.is_client {
            self.channels.queue(PendingTx::Hello(id));
            self.life.unconfirmed(id);
            if self.life.hello_due.is_none() {
                self.life
                    .schedule_hellos(Some(now + ms(self.config.hello_interval_ms)));
            }
        }
        Ok(id)
    }

    /// Remove a channel (its interface went away). A live channel is announced with
    /// [`Event::ChannelDown`] first; then its outstanding ADUs are nacked. On the
    /// accepting side, the peer's traffic may bring the channel back (it still sends on
    /// it, perhaps from a new address), and the session then announces
    /// [`Event::ChannelUp`].
    pub fn remove_channel(&mut self, now: Duration, id: ChannelId) -> Result<(), SessionError> {
        let alive = self
            .channels
            .index(id)
            .is_some_and(|i| self.channels[i].is_alive());
        if alive {
            self.events.push_back(Event::ChannelDown { channel: id });
        }
        if !self.drop_channel(now, id) {
            return Err(SessionError::UnknownChannel(id));
        }
        if !self.is_client && !self.channels.removed.contains(&id) {
            self.channels.removed.push(id);
        }
        Ok(())
    }

    /// Forget channel `id`, nacking what was in flight on it, without telling the
    /// application of the channel itself.
    fn drop_channel(&mut self, now: Duration, id: ChannelId) -> bool {
        self.life.timers.invalidate_derived();
        let Some(idx) = self.channels.index(id) else {
            return false;
        };
        let mut ch = self.channels.remove(idx);
        self.life.confirmed(id);
        // Everything outstanding on it is lost.
        let mut out = Vec::new();
        ch.abandon(now, &mut out);
        self.on_resolved(now, id, &out);
        true
    }

    /// Repeat the hellos the peer has not answered: every channel's while handshaking,
    /// then those of channels added later and not yet confirmed.
    pub(super) fn repeat_hellos(&mut self, now: Duration) {
        match self.life.state {
            State::Handshaking => self.send_hellos(now),
            State::Connected if !self.life.unconfirmed.is_empty() => {
                for i in 0..self.channels.len() {
                    let id = self.channels[i].id;
                    if self.life.unconfirmed.contains(&id) {
                        self.channels.queue(PendingTx::Hello(id));
                    }
                }
                self.life
                    .schedule_hellos(Some(now + ms(self.config.hello_interval_ms)));
            }
            _ => self.life.schedule_hellos(None),
        }
    }
}

/// A decoded hello: the packet that opens a session, with its connection id and service.
pub(crate) struct Hello {
    pub conn: u64,
    pub service: u32,
    pub packet: Packet,
}

impl Hello {
    /// `packet` if it is a hello.
    pub(crate) fn of(packet: Packet) -> Result<Hello, Packet> {
        match packet {
            Packet::Hello { conn, service, .. } => Ok(Hello {
                conn,
                service,
                packet,
            }),
            other => Err(other),
        }
    }
}

/// The hello that opens a session, or why the datagram is not one.
pub(super) fn parse_hello(datagram: &Bytes) -> Result<Hello, SessionError> {
    if let Some(peer) = wire::foreign_hello_version(datagram) {
        return Err(SessionError::UnsupportedVersion {
            peer,
            ours: wire::VERSION,
        });
    }
    Hello::of(wire::decode(datagram)?).map_err(|other| SessionError::NotAHello(other.kind()))
}
