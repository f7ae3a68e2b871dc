//! Receiving: datagrams routed by crypto index, opened, and fed to their session; the
//! responder's new secure sessions; and the hello that makes one a connection.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::{classify, DropReason, Packet, PublicKey, Reply};
use horde_proto::AcceptError;

use crate::conn::{Conn, ConnState};
use crate::timers::Timer;
use crate::{HandshakeTransmit, Host, HostEvent, Inbound, HELLO_WAIT};

impl Host {
    /// One datagram received on interface `iface` from `src`.
    pub fn handle_datagram(
        &mut self,
        now: Duration,
        iface: usize,
        src: SocketAddr,
        data: &[u8],
    ) -> Inbound {
        match classify(data) {
            Err(DropReason::LegacyHandshake) => return Inbound::LegacyHandshake,
            Err(reason) => self.counters.dropped.record(reason),
            Ok(Packet::Initiation { .. }) => self.on_initiation(now, iface, src, data),
            Ok(Packet::Response { receiver_index }) => self.on_response(receiver_index, data, now),
            Ok(Packet::CookieReply { receiver_index }) => {
                self.on_cookie_reply(receiver_index, data, now)
            }
            Ok(Packet::Transport { receiver_index, .. }) => {
                self.on_transport(receiver_index, iface, src, data, now)
            }
        }
        Inbound::Handled
    }

    fn on_transport(
        &mut self,
        receiver: u32,
        iface: usize,
        src: SocketAddr,
        data: &[u8],
        now: Duration,
    ) {
        let Some(&key) = self.by_index.get(&receiver) else {
            self.counters.dropped.record(DropReason::WrongIndex);
            return;
        };
        self.touched.touch(key);
        let conn = self.conns.get_mut(&key).expect("indexed connection exists");
        conn.refused.clear();
        let crypto = match &mut conn.state {
            ConnState::AwaitingHello { crypto } | ConnState::Established { crypto, .. } => crypto,
            _ => return,
        };
        crypto.tick(now);
        let plain = match self
            .plaintext
            .open_in_place(data, |d| crypto.open_in_place(d).map(|(_, at)| at))
        {
            Ok(p) => p,
            Err(reason) => {
                self.counters.dropped.record(reason);
                return;
            }
        };
        match &mut conn.state {
            ConnState::Established { session, .. } => {
                session.handle_datagram(now, iface as u16, src, plain)
            }
            _ => self.accept_session(key, iface, src, plain, now),
        }
    }

    /// The responder's answer to an initiation that arrived on `iface` from `src`: its
    /// response goes out, and a new secure session waits for the peer's hello.
    pub(crate) fn install_reply(
        &mut self,
        now: Duration,
        iface: usize,
        src: SocketAddr,
        result: Result<Reply, DropReason>,
    ) {
        let reply = match result {
            Ok(r) => r,
            Err(reason) => {
                self.counters.dropped.record(reason);
                return;
            }
        };
        if let Reply::NewSession { session, .. } = &reply {
            // Indices a responder picks on its own are checked here; a clash (one in
            // 2^32 per live session) loses this handshake, and the initiator retries.
            if self.by_index.contains_key(&session.local_index()) {
                tracing::debug!("handshake index clash: response not sent");
                return;
            }
        }
        self.handshake_tx.push_back(HandshakeTransmit {
            iface,
            dst: src,
            datagram: reply.response().to_vec(),
        });
        if let Reply::NewSession { mut session, .. } = reply {
            session.set_rekey_policy(self.rekey);
            // Key ages count from the host's clock: unticked, a session's first key
            // would be stamped as used at 0 and expire once the host is older than
            // the reject-after time.
            session.tick(now);
            let key = self.issue_key();
            let index = session.local_index();
            self.index_insert(index, key);
            self.conns.insert(
                key,
                Conn::new(ConnState::AwaitingHello { crypto: session }, index),
            );
            // Keys alone must not hold memory: without a hello, the session is forgotten.
            self.timers.set(key, Timer::GiveUp, now + HELLO_WAIT);
        }
    }

    /// The first protocol datagram on a new secure session must be a hello for a service
    /// this host serves.
    fn accept_session(
        &mut self,
        key: u64,
        iface: usize,
        src: SocketAddr,
        plain: Bytes,
        now: Duration,
    ) {
        let new = match self.endpoint.accept_hello(now, iface as u16, src, &plain) {
            Ok(new) => new,
            Err(AcceptError::UnsupportedVersion { peer, ours }) => {
                tracing::warn!(
                    peer = %src,
                    "refused a peer speaking wire version {peer}: this host speaks version {ours} only"
                );
                self.counters.unroutable += 1;
                return;
            }
            Err(AcceptError::UnknownService(service)) => {
                self.refuse_service(key, iface, src, &plain, service, now);
                return;
            }
            Err(_) => {
                self.counters.unroutable += 1;
                return;
            }
        };
        // Taken from the endpoint's queue at once: the driver's listener is the backlog.
        self.endpoint.accept();
        let service = new.session.service();
        let peer = self.conns[&key].peer().expect("a secure session is up");
        self.replace_sessions_of(&peer, service, key, now);
        self.timers.stop(key, Timer::GiveUp);
        let mut conn = self.conns.remove(&key).expect("connection exists");
        conn.state = match conn.state {
            ConnState::AwaitingHello { crypto } => ConnState::Established {
                crypto,
                session: new.session,
                handle: new.handle,
            },
            other => other,
        };
        self.conns.insert(key, conn);
        self.by_peer.entry((peer, service)).or_default().push(key);
        self.touch(key);
        self.events
            .push_back(HostEvent::Accepted { key, service, peer });
    }

    /// A new session from `peer` for `service` (connection `new`) replaces the sessions
    /// the peer opened to that service before (it restarted, or reconnected): their
    /// applications hear [`horde_proto::CloseReason::Replaced`], what they had in flight
    /// is abandoned, and their state is freed. Its sessions to other services stay.
    fn replace_sessions_of(&mut self, peer: &PublicKey, service: u32, new: u64, now: Duration) {
        let old: Vec<u64> = self
            .by_peer
            .get(&(*peer, service))
            .map(|keys| keys.iter().copied().filter(|&k| k != new).collect())
            .unwrap_or_default();
        for key in old {
            if let Some(p) = self.conns.get_mut(&key).and_then(Conn::session_mut) {
                p.replaced(now);
            }
            if let Some(mut c) = self.remove(key) {
                c.fail_waiters();
            }
            self.counters.sessions_replaced += 1;
            tracing::info!(peer = %peer, "new handshake from the peer replaces its old session");
        }
    }
}

impl Host {
    /// A connection leaving: it no longer stands for its peer among the responder's
    /// sessions.
    pub(crate) fn unlist_peer(&mut self, key: u64, conn: &Conn) {
        let (Some(crypto), Some(p)) = (conn.crypto(), conn.session()) else {
            return;
        };
        if crypto.is_initiator() {
            return;
        }
        let listed = (*crypto.remote_static(), p.service());
        if let Some(keys) = self.by_peer.get_mut(&listed) {
            keys.retain(|&k| k != key);
            if keys.is_empty() {
                self.by_peer.remove(&listed);
            }
        }
    }
}
