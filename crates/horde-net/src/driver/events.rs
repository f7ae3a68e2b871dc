//! The host's events, passed on: a connection that is up goes to its caller or its
//! listener, a session event to its application's channel.

use horde_host::{HostEvent, Polled};

use super::*;
use crate::connection::EventReceiver;
use crate::event_queue::event_queue;

impl Driver {
    /// Pass on everything the host has to say. Called after each step that can give
    /// sessions something to say (datagrams in, commands, timers, a flush).
    pub(super) fn forward_events(&mut self) {
        loop {
            let e = match self.host.poll_events() {
                None => return,
                // A connection's events in one hand-over: one lookup and at most one
                // wake-up for the lot (an ack is an event: this runs for every packet).
                Some(Polled::Conn(mut events)) => {
                    let Some(first) = events.next() else {
                        continue;
                    };
                    match self.apps.get(&events.key()) {
                        Some(app) => app.events.send_all(std::iter::once(first).chain(events)),
                        None => events.for_each(drop),
                    }
                    continue;
                }
                Some(Polled::Host(e)) => e,
            };
            match e {
                HostEvent::Conn { key, event } => {
                    if let Some(app) = self.apps.get(&key) {
                        app.events.send_all(std::iter::once(event));
                    }
                }
                HostEvent::Connected { key, peer } => {
                    let Some(reply) = self.dialing.remove(&key) else {
                        continue;
                    };
                    let c = self.open_app(key, Some(peer));
                    let _ = reply.send(Ok(c));
                }
                HostEvent::ConnectFailed { key, error } => {
                    if let Some(reply) = self.dialing.remove(&key) {
                        let _ = reply.send(Err(error.into()));
                    }
                    self.apps.remove(&key);
                }
                HostEvent::Accepted { key, service, peer } => {
                    let c = self.open_app(key, Some(peer));
                    let taken = self
                        .listeners
                        .get(&service)
                        .is_some_and(|l| l.try_send(c).is_ok());
                    if !taken {
                        // The application is not accepting: refuse rather than queue.
                        let now = self.now();
                        self.host.refuse(now, key);
                    }
                }
                HostEvent::Removed { key } => {
                    // Dropping its sender ends the application's event stream.
                    self.apps.remove(&key);
                    self.dialing.remove(&key);
                }
            }
        }
    }

    /// The application's end of connection `key`.
    fn open_app(&mut self, key: u64, peer: Option<horde_crypto::PublicKey>) -> Connection {
        let (tx, rx) = event_queue();
        let read = Arc::new(ReadProgress::new(
            self.reader_woke.clone(),
            key,
            self.read_log.clone(),
        ));
        let events = EventReceiver::new(rx, read.clone());
        self.apps.insert(key, App { events: tx, read });
        Connection::new(
            key,
            self.cmd_tx.clone(),
            events,
            peer,
            self.bandwidth.clone(),
        )
    }
}
