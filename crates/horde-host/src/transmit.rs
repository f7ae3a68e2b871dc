//! Transmit: each connection's protocol datagrams in turn, and after each connection's
//! last one, what becomes of it (unreachable, reconnecting, closed and removed).

use std::net::SocketAddr;
use std::time::Duration;

use horde_proto::{ChannelId, CloseReason, Transmit, TransmitAdus};

use crate::conn::ConnState;
use crate::timers::Timer;
use crate::{Host, REFUSED_SENDS};

/// One protocol datagram, in the caller's buffer, to seal with the connection's
/// [`Host::crypto_mut`] and send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostTransmit {
    /// The connection.
    pub conn: u64,
    /// The interface (socket) to send from.
    pub iface: usize,
    /// Where to.
    pub dst: SocketAddr,
    /// The channel it belongs to (its AEAD channel byte).
    pub channel: ChannelId,
    /// The channel sequence number it carries (data, packed data and pings).
    pub seq: Option<u64>,
    /// The ADUs it carries, in packet order; empty for control packets.
    pub adus: TransmitAdus,
}

/// [`HostTransmit`] without its ADUs, for a driver that only seals and sends: the ADU
/// list is held inline (hundreds of bytes), and copying it for every datagram cost the
/// runtime more than all the rest of the host's part of a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostDatagram {
    /// The connection.
    pub conn: u64,
    /// The interface (socket) to send from.
    pub iface: usize,
    /// Where to.
    pub dst: SocketAddr,
    /// The channel it belongs to (its AEAD channel byte).
    pub channel: ChannelId,
    /// The channel sequence number it carries (data, packed data and pings).
    pub seq: Option<u64>,
}

/// A walk over the touched connections by [`Host::poll_transmit`], from its first call
/// to the `None` that ends it.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// The connections to walk, listed when it starts (kept between walks).
    keys: Vec<u64>,
    at: usize,
    started: bool,
    /// Whether the current connection's clock has been ticked.
    entered: bool,
    /// Connections whose session has closed and has nothing left to do.
    closed: Vec<u64>,
    /// Persistent connections whose session ended, to reconnect.
    ended: Vec<(u64, CloseReason)>,
}

impl Host {
    /// The next datagram to send, written into `buf`. Repeated until `None`, it walks
    /// once every connection touched since the last walk (a datagram, a command, a due
    /// timer); after a connection's last datagram the host settles its fate and keeps
    /// its session's next deadline, and at the end of the walk removes closed
    /// connections and starts reconnections. A connection nothing happened to has
    /// nothing to send and is not visited.
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<HostTransmit> {
        self.walk_transmit(now, buf, |conn, t| HostTransmit {
            conn,
            iface: usize::from(t.local),
            dst: t.dst,
            channel: t.channel,
            seq: t.seq,
            adus: t.adus,
        })
    }

    /// [`Host::poll_transmit`] sealed at once, for a driver that seals on its own thread
    /// (horde-net seals on worker threads instead): the protocol datagram is written
    /// into `plain`, what goes on the wire into `sealed`. A datagram whose connection
    /// has no keys left to seal it with is skipped, as a failed send would be.
    pub fn poll_sealed(
        &mut self,
        now: Duration,
        plain: &mut Vec<u8>,
        sealed: &mut Vec<u8>,
    ) -> Option<HostTransmit> {
        loop {
            plain.clear();
            let t = self.poll_transmit(now, plain)?;
            sealed.clear();
            let Some(crypto) = self.crypto_mut(t.conn) else {
                continue;
            };
            if crypto
                .seal_append(u8::from(t.channel), plain, sealed)
                .is_ok()
            {
                return Some(t);
            }
        }
    }

    /// [`Host::poll_transmit`], without the ADUs each datagram carries.
    pub fn poll_datagram(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<HostDatagram> {
        self.walk_transmit(now, buf, |conn, t| HostDatagram {
            conn,
            iface: usize::from(t.local),
            dst: t.dst,
            channel: t.channel,
            seq: t.seq,
        })
    }

    /// The walk of [`Host::poll_transmit`], handing each datagram's connection and
    /// transmit to `out`, which takes what its caller needs.
    fn walk_transmit<R>(
        &mut self,
        now: Duration,
        buf: &mut Vec<u8>,
        out: impl FnOnce(u64, &Transmit) -> R,
    ) -> Option<R> {
        if !self.walk.started {
            self.walk.started = true;
            self.walk.at = 0;
            self.walk.entered = false;
            self.walk.keys.clear();
            #[cfg(test)]
            if self.full_walk {
                self.touch_all();
            }
            self.touched.take_transmit(&mut self.walk.keys);
        }
        while let Some(&key) = self.walk.keys.get(self.walk.at) {
            if let Some(ConnState::Established {
                crypto, session, ..
            }) = self.conns.get_mut(&key).map(|c| &mut c.state)
            {
                if !self.walk.entered {
                    crypto.tick(now);
                    self.walk.entered = true;
                }
                if let Some(t) = session.poll_transmit(now, buf) {
                    return Some(out(key, &t));
                }
                self.settle(key, now);
                self.touched.touch_events(key);
                self.keep_deadline(key, now);
            }
            self.walk.at += 1;
            self.walk.entered = false;
        }
        self.walk.started = false;
        for key in std::mem::take(&mut self.walk.closed) {
            self.remove(key);
            self.counters.sessions_removed += 1;
        }
        for (key, reason) in std::mem::take(&mut self.walk.ended) {
            self.start_redial(key, reason, now);
        }
        None
    }

    /// A walked connection's session's next deadline, kept until something touches it.
    fn keep_deadline(&mut self, key: u64, now: Duration) {
        #[cfg(test)]
        if self.full_walk {
            return;
        }
        let at = self
            .conns
            .get(&key)
            .and_then(|c| c.session())
            .and_then(|p| p.poll_timeout(now));
        self.timers.set_or_stop(key, Timer::Session, at);
    }

    /// A connection has sent what it had: is its peer unreachable, and has its session
    /// ended?
    fn settle(&mut self, key: u64, now: Duration) {
        let conn = self.conns.get_mut(&key).expect("walked connection exists");
        let (refused, reconnect) = (&conn.refused, conn.reconnect.is_some());
        let Some(p) = (match &mut conn.state {
            ConnState::Established { session, .. } => Some(session),
            _ => None,
        }) else {
            return;
        };
        let everywhere = !p.channels().is_empty()
            && p.channels()
                .iter()
                .all(|c| refused.get(&c.id()).is_some_and(|&n| n >= REFUSED_SENDS));
        // A persistent connection whose peer is unreachable (every channel dead and the
        // peer silent through sixteen packets, `Session::peer_unreachable`) handshakes
        // again rather than wait out the idle timeout: a restarted peer answers the
        // handshake at once, and one behind an outage as soon as it is back.
        let all_dead = reconnect && p.peer_unreachable(now);
        if (everywhere || all_dead) && !p.is_closed() {
            p.unreachable(now);
        }
        if reconnect {
            if let Some(reason) = p.close_reason().filter(|r| r.reconnects()) {
                self.walk.ended.push((key, reason));
                return;
            }
        }
        if p.is_closed() {
            let done = p.poll_timeout(now).is_none();
            conn.fail_waiters();
            if done {
                self.walk.closed.push(key);
            }
        }
    }
}
