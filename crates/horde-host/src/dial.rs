//! This end's handshakes: opening a connection, its retries and deadline, the
//! responder's answer, and a persistent connection's reconnection after its session died.

use std::time::Duration;

use horde_crypto::{random_index, redial_index, DropReason, Initiator};
use horde_proto::{ChannelId, CloseReason, ConnectOptions};

use crate::config::{ChannelTarget, ConnectConfig, Reconnect, SessionIdentity};
use crate::conn::{Conn, ConnState, PendingHandshake};
use crate::timers::Timer;
use crate::{
    HandshakeSeen, HandshakeTransmit, Host, HostError, HostEvent, InterfaceState, INITIATION_RETRY,
};

impl Host {
    /// Open a connection to a peer: its first initiation leaves at the next
    /// [`Host::handle_timeout`]. `reserved` says which local indices a responder has
    /// promised meanwhile. The answer comes as [`HostEvent::Connected`] or
    /// [`HostEvent::ConnectFailed`]; with `reconnect`, the connection later comes back
    /// by itself after its session dies.
    pub fn connect(
        &mut self,
        now: Duration,
        config: ConnectConfig,
        reconnect: Option<Reconnect>,
        reserved: impl Fn(u32) -> bool,
    ) -> Result<u64, HostError> {
        // An interface that is only down for now is fine: its channels wait for it.
        if let Some(bad) = config.channels.iter().find(|c| {
            self.interfaces
                .get(c.interface)
                .is_none_or(|i| *i == InterfaceState::Removed)
        }) {
            return Err(HostError::NoInterface(bad.interface));
        }
        let by_index = &self.by_index;
        let index = random_index(&mut self.rng, |i| by_index.contains_key(&i) || reserved(i));
        let initiator = Initiator::new(
            &self.keypair,
            &config.peer,
            index,
            self.unix_micros(now),
            &mut self.rng,
        );
        let key = self.issue_key();
        self.index_insert(index, key);
        self.timers.set(key, Timer::Resend, now);
        self.timers
            .set(key, Timer::GiveUp, now + config.handshake_timeout);
        let mut conn = Conn::new(
            ConnState::Dialing(Box::new(PendingHandshake {
                initiator,
                retry: INITIATION_RETRY,
                seen: HandshakeSeen::default(),
            })),
            index,
        );
        conn.reconnect = reconnect;
        conn.connect = Some(config);
        self.conns.insert(key, conn);
        Ok(key)
    }

    /// Fix the connection id, seed and advertised addresses of the first session of
    /// connection `key`, which this end is still dialing; a reconnection draws its own.
    pub fn pin_session(&mut self, key: u64, identity: SessionIdentity) {
        if let Some(conn) = self.conns.get_mut(&key) {
            if matches!(conn.state, ConnState::Dialing(_)) {
                conn.pinned = Some(identity);
            }
        }
    }

    /// A persistent connection's session has ended for `reason`: keep it for its
    /// streams and start handshaking again, with backoff.
    pub(crate) fn start_redial(&mut self, key: u64, reason: CloseReason, now: Duration) {
        let Some(mut conn) = self.conns.remove(&key) else {
            return;
        };
        let (Some(policy), Some(config)) = (conn.reconnect, conn.connect.as_ref()) else {
            self.conns.insert(key, conn);
            return;
        };
        let peer = config.peer;
        conn.refused.clear();
        self.index_remove(conn.index);
        let by_index = &self.by_index;
        let in_use = |i| by_index.contains_key(&i);
        // Back to the same server behind a load balancer (docs/load-balancing.md).
        let index = match &conn.state {
            ConnState::Established { crypto, .. } => {
                redial_index(&mut self.rng, crypto.remote_index(), in_use)
            }
            _ => random_index(&mut self.rng, in_use),
        };
        let initiator = Initiator::new(
            &self.keypair,
            &peer,
            index,
            self.unix_micros(now),
            &mut self.rng,
        );
        self.index_insert(index, key);
        conn.index = index;
        tracing::info!("session ended ({}); reconnecting", reason.as_str());
        conn.redialing_since = Some(now);
        let handshake = Box::new(PendingHandshake {
            initiator,
            retry: policy.initial,
            seen: HandshakeSeen::default(),
        });
        conn.state = match conn.state {
            ConnState::Established {
                session, handle, ..
            } => ConnState::Redialing {
                handshake,
                old: session,
                handle,
                reason,
            },
            other => other,
        };
        self.conns.insert(key, conn);
        // The ended session runs no timers; its events are still drained.
        self.timers.stop(key, Timer::Session);
        self.touch(key);
        self.timers.set(key, Timer::Resend, now);
        self.timers
            .set(key, Timer::GiveUp, now + policy.give_up_after);
    }

    /// Give up reconnecting: what the ended session kept for a successor is nacked, the
    /// application hears the end, and the connection is forgotten.
    pub(crate) fn end_redial(&mut self, key: u64, reason: CloseReason) {
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        conn.reconnect = None;
        if let ConnState::Redialing { old, .. } = &mut conn.state {
            old.release();
        }
        let Some(mut c) = self.detach(key) else {
            return;
        };
        c.deliver(key, horde_proto::Event::Closed { reason }, &mut self.events);
        c.fail_waiters();
        self.events.push_back(HostEvent::Removed { key });
        self.counters.sessions_removed += 1;
    }

    /// Handshakes whose resend or give-up is due (`due`, in connection order).
    pub(crate) fn handshake_timers(&mut self, now: Duration, due: Vec<(u64, Timer)>) {
        for (key, timer) in due {
            match timer {
                Timer::GiveUp => self.give_up(key),
                Timer::Resend => self.resend_initiation(key, now),
                Timer::Session => {}
            }
        }
    }

    fn give_up(&mut self, key: u64) {
        let Some(conn) = self.conns.get(&key) else {
            return;
        };
        match &conn.state {
            ConnState::Redialing { reason, .. } => {
                let reason = *reason;
                let after = conn
                    .reconnect
                    .map_or(0.0, |r| r.give_up_after.as_secs_f64());
                tracing::info!(
                    "gave up reconnecting after {after:.1} s (the session ended: {})",
                    reason.as_str()
                );
                self.end_redial(key, reason);
            }
            ConnState::AwaitingHello { .. } => {
                tracing::debug!("no hello on a new secure session: forgotten");
                self.detach(key);
                self.counters.hello_never_came += 1;
            }
            ConnState::Dialing(h) => {
                let seen = h.seen;
                tracing::warn!("handshake timed out: {seen}");
                self.detach(key);
                self.events.push_back(HostEvent::ConnectFailed {
                    key,
                    error: HostError::HandshakeTimeout(seen),
                });
            }
            _ => {}
        }
    }

    fn resend_initiation(&mut self, key: u64, now: Duration) {
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        let backoff = match &conn.state {
            ConnState::Redialing { .. } => conn.reconnect.map(|r| r.max),
            _ => None,
        };
        let channels: Vec<(usize, std::net::SocketAddr)> = conn
            .connect
            .as_ref()
            .map(|c| c.channels.iter().map(|t| (t.interface, t.remote)).collect())
            .unwrap_or_default();
        let Some(h) = conn.handshake() else {
            return;
        };
        let next = now + h.retry;
        if let Some(max) = backoff {
            h.retry = (h.retry * 2).min(max);
        }
        for (iface, dst) in channels {
            h.seen.initiations_sent = h.seen.initiations_sent.saturating_add(1);
            self.handshake_tx.push_back(HandshakeTransmit {
                iface,
                dst,
                datagram: h.initiator.initiation().to_vec(),
            });
        }
        self.timers.set(key, Timer::Resend, next);
    }

    /// A cookie reply: our initiation is wanted again with `mac2`; it is resent now.
    pub(crate) fn on_cookie_reply(&mut self, receiver: u32, data: &[u8], now: Duration) {
        let Some(&key) = self.by_index.get(&receiver) else {
            self.counters.dropped.record(DropReason::WrongIndex);
            return;
        };
        let conn = self.conns.get_mut(&key).expect("indexed connection exists");
        let Some(hs) = conn.handshake() else {
            self.counters.dropped.record(DropReason::UnexpectedType);
            return;
        };
        match hs.initiator.read_cookie_reply(data) {
            Ok(()) => {
                hs.seen.cookie_replies = hs.seen.cookie_replies.saturating_add(1);
                self.timers.set(key, Timer::Resend, now);
            }
            Err(reason) => self.counters.dropped.record(reason),
        }
    }

    /// The responder's answer to our initiation: the secure session is up, and the
    /// protocol session starts (or, reconnecting, takes over the ended one's streams).
    pub(crate) fn on_response(&mut self, receiver: u32, data: &[u8], now: Duration) {
        let Some(&key) = self.by_index.get(&receiver) else {
            self.counters.dropped.record(DropReason::WrongIndex);
            return;
        };
        let conn = self.conns.get_mut(&key).expect("indexed connection exists");
        let Some(hs) = conn.handshake() else {
            self.counters.dropped.record(DropReason::UnexpectedType);
            return;
        };
        let mut crypto = match hs.initiator.read_response(data) {
            Ok(s) => s,
            Err(reason) => {
                if reason == DropReason::BadTag {
                    hs.seen.bad_responses = hs.seen.bad_responses.saturating_add(1);
                }
                self.counters.dropped.record(reason);
                return;
            }
        };
        crypto.set_rekey_policy(self.rekey);
        crypto.tick(now);
        // Channels over an interface that is down now wait for it to come back.
        let interfaces = &self.interfaces;
        let config = conn.connect.as_ref().expect("this end dialed");
        let (live, parked): (Vec<ChannelTarget>, Vec<ChannelTarget>) = config
            .channels
            .iter()
            .cloned()
            .partition(|c| interfaces.get(c.interface) == Some(&InterfaceState::Open));
        let pinned = conn.pinned.take();
        let options = ConnectOptions {
            service: config.service,
            channels: live.iter().map(ChannelTarget::spec).collect(),
            conn_id: pinned.as_ref().map(|p| p.conn_id),
            seed: pinned.as_ref().map(|p| p.seed),
            aliases: pinned.map(|p| p.aliases),
        };
        let mut p = match self.endpoint.connect(now, options) {
            Ok((handle, p)) => (handle, p),
            Err(e) => {
                let redial = matches!(conn.state, ConnState::Redialing { .. });
                self.detach(key);
                self.events.push_back(if redial {
                    HostEvent::Removed { key }
                } else {
                    HostEvent::ConnectFailed {
                        key,
                        error: e.into(),
                    }
                });
                return;
            }
        };
        self.timers.stop_handshake(key);
        self.touch(key);
        let conn = self.conns.get_mut(&key).expect("checked above");
        p.1.set_successor_expected(conn.reconnect.is_some());
        // `Session::connect` numbers the channels 0.. in order.
        conn.targets = ChannelId::all().zip(live).collect();
        conn.parked = parked;
        let peer = *crypto.remote_static();
        let (handle, session) = p;
        let established = ConnState::Established {
            crypto: Box::new(crypto),
            session: Box::new(session),
            handle,
        };
        match std::mem::replace(&mut conn.state, established) {
            ConnState::Redialing {
                mut old,
                handle: old_handle,
                ..
            } => {
                // A reconnection: the new session carries on the old one's streams, and
                // the application keeps its handle and event channel.
                self.endpoint.forget(old_handle);
                let ConnState::Established { session, .. } = &mut conn.state else {
                    unreachable!("just set");
                };
                #[cfg(feature = "planted-bugs")]
                let planted = self.planted == crate::PlantedBug::ReleaseOnRedial;
                #[cfg(not(feature = "planted-bugs"))]
                let planted = false;
                if planted {
                    old.release();
                } else {
                    session.inherit(&mut old, now);
                }
                while let Some(e) = old.poll_event() {
                    conn.deliver(key, e, &mut self.events);
                }
                self.counters.reconnects += 1;
                let after = conn
                    .redialing_since
                    .take()
                    .map_or(0.0, |t| now.saturating_sub(t).as_secs_f64());
                tracing::info!("reconnected to the peer after {after:.1} s");
            }
            _ => self.events.push_back(HostEvent::Connected { key, peer }),
        }
    }
}
