//! One connection's state: which phase of its life it is in, and what it keeps across
//! sessions (its channels' targets, its application's waiters, how to reconnect).

use std::collections::{BTreeMap, VecDeque};

use horde_crypto::{Initiator, PublicKey, Session as SecureSession};
use horde_proto::{ChannelId, CloseReason, Event, Session, SessionError, SessionHandle};

use crate::config::{ChannelTarget, ConnectConfig, Reconnect, SessionIdentity};
use crate::ops::Answer;
use crate::touched::Touched;
use crate::HostEvent;

/// This end's handshake towards the peer, while it waits for the response.
pub(crate) struct PendingHandshake {
    pub initiator: Initiator,
    /// Interval until the next initiation (doubling while reconnecting).
    pub retry: std::time::Duration,
    /// What came back so far, for the error should the handshake time out.
    pub seen: crate::HandshakeSeen,
}

/// Where a connection is in its life.
pub(crate) enum ConnState {
    /// This end opened the connection and waits for the handshake response. (Boxed,
    /// as in `Redialing`: a handshake state is large, and every connection of a server
    /// would carry its room.)
    Dialing(Box<PendingHandshake>),
    /// The peer's handshake is done; its first datagram must be a hello.
    AwaitingHello { crypto: Box<SecureSession> },
    /// A session is up (or closing, until its last timer has run).
    Established {
        crypto: Box<SecureSession>,
        session: Box<Session>,
        /// The session's handle in the host's endpoint.
        handle: SessionHandle,
    },
    /// A persistent connection's session ended; this end handshakes again. The ended
    /// session holds the streams until the new one takes them over.
    Redialing {
        handshake: Box<PendingHandshake>,
        old: Box<Session>,
        handle: SessionHandle,
        reason: CloseReason,
    },
}

pub(crate) struct Conn {
    pub state: ConnState,
    /// The local crypto index the peer's datagrams for this connection carry.
    pub index: u32,
    /// Channels this end opened, by id, with the target that made them.
    pub targets: BTreeMap<ChannelId, ChannelTarget>,
    /// Targets whose interface is down, added again when it comes back.
    pub parked: Vec<ChannelTarget>,
    /// Callers waiting for their stream to drain.
    pub waiters: Vec<(u32, Answer<()>)>,
    /// Payload bytes the application has read that the session has been told of.
    pub read_told: u64,
    /// Persistent connections: how to reconnect.
    pub reconnect: Option<Reconnect>,
    /// The connection config a connection this end opened was opened with.
    pub connect: Option<ConnectConfig>,
    /// The first session's identity, when the driver fixed it ([`crate::Host::pin_session`]).
    pub pinned: Option<SessionIdentity>,
    /// Per channel: sends refused by ICMP port unreachable since the last datagram
    /// from the peer.
    pub refused: BTreeMap<ChannelId, u32>,
    /// When a persistent connection lost its session, while it reconnects.
    pub redialing_since: Option<std::time::Duration>,
}

impl Conn {
    pub fn new(state: ConnState, index: u32) -> Self {
        Conn {
            state,
            index,
            targets: BTreeMap::new(),
            parked: Vec::new(),
            waiters: Vec::new(),
            read_told: 0,
            reconnect: None,
            connect: None,
            pinned: None,
            refused: BTreeMap::new(),
            redialing_since: None,
        }
    }

    pub fn crypto(&self) -> Option<&SecureSession> {
        match &self.state {
            ConnState::AwaitingHello { crypto } | ConnState::Established { crypto, .. } => {
                Some(crypto)
            }
            _ => None,
        }
    }

    pub fn peer(&self) -> Option<PublicKey> {
        self.crypto().map(|c| *c.remote_static())
    }

    /// The live session, if one is up.
    pub fn session(&self) -> Option<&Session> {
        match &self.state {
            ConnState::Established { session, .. } => Some(session),
            _ => None,
        }
    }

    pub fn session_mut(&mut self) -> Option<&mut Session> {
        match &mut self.state {
            ConnState::Established { session, .. } => Some(session),
            _ => None,
        }
    }

    pub fn handshake(&mut self) -> Option<&mut PendingHandshake> {
        match &mut self.state {
            ConnState::Dialing(h) | ConnState::Redialing { handshake: h, .. } => Some(h.as_mut()),
            _ => None,
        }
    }

    pub fn endpoint_handle(&self) -> Option<SessionHandle> {
        match &self.state {
            ConnState::Established { handle, .. } | ConnState::Redialing { handle, .. } => {
                Some(*handle)
            }
            _ => None,
        }
    }

    /// Pass one session event on to the application, answering `writable` waiters first.
    pub fn deliver(&mut self, key: u64, e: Event, out: &mut VecDeque<HostEvent>) {
        deliver(key, self.reconnect.is_some(), &mut self.waiters, e, out);
    }

    /// Every event the ended or live session still holds, passed on.
    pub fn drain_events(&mut self, key: u64, out: &mut VecDeque<HostEvent>) {
        let reconnecting = self.reconnect.is_some();
        let (state, waiters) = (&mut self.state, &mut self.waiters);
        let source = match state {
            ConnState::Established { session, .. } => session,
            ConnState::Redialing { old, .. } => old,
            _ => return,
        };
        while let Some(e) = source.poll_event() {
            deliver(key, reconnecting, waiters, e, out);
        }
    }

    /// A closed session will never drain: its waiters get an error.
    pub fn fail_waiters(&mut self) {
        for (_, reply) in self.waiters.drain(..) {
            reply(Err(SessionError::Closed.into()));
        }
    }
}

pub(crate) fn deliver(
    key: u64,
    reconnecting: bool,
    waiters: &mut Vec<(u32, Answer<()>)>,
    e: Event,
    out: &mut VecDeque<HostEvent>,
) {
    let event = relay(reconnecting, waiters, e);
    out.push_back(HostEvent::Conn { key, event });
}

/// A session event as the application hears it, with the `writable` waiters it answers
/// answered.
fn relay(reconnecting: bool, waiters: &mut Vec<(u32, Answer<()>)>, e: Event) -> Event {
    // A persistent connection's session that died is followed by a new one: the
    // application hears that instead of the end.
    let e = match e {
        Event::Closed { reason } if reason.reconnects() && reconnecting => {
            Event::Reconnecting { reason, attempt: 1 }
        }
        e => e,
    };
    if let Event::Writable { stream } = e {
        let mut i = 0;
        while i < waiters.len() {
            if waiters[i].0 == stream {
                let (_, reply) = waiters.remove(i);
                reply(Ok(()));
            } else {
                i += 1;
            }
        }
    }
    e
}

/// Every event one connection's session has queued, in order, as the application hears
/// them: see [`Host::poll_events`](crate::Host::poll_events).
///
/// Dropped before it has run out, it leaves the rest for the next drain.
pub struct ConnEvents<'a> {
    key: u64,
    conn: &'a mut Conn,
    touched: &'a mut Touched,
    done: bool,
}

impl<'a> ConnEvents<'a> {
    pub(crate) fn new(key: u64, conn: &'a mut Conn, touched: &'a mut Touched) -> Self {
        ConnEvents {
            key,
            conn,
            touched,
            done: false,
        }
    }

    /// The connection the events are of.
    pub fn key(&self) -> u64 {
        self.key
    }
}

impl Iterator for ConnEvents<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        let reconnecting = self.conn.reconnect.is_some();
        let e = match &mut self.conn.state {
            ConnState::Established { session, .. } => session.poll_event(),
            ConnState::Redialing { old, .. } => old.poll_event(),
            _ => None,
        };
        match e {
            Some(e) => Some(relay(reconnecting, &mut self.conn.waiters, e)),
            None => {
                self.done = true;
                None
            }
        }
    }
}

impl Drop for ConnEvents<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.touched.touch_events(self.key);
        }
    }
}
