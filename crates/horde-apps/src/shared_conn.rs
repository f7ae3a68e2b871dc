//! One connection shared by a stream run and a message run: where each reads its events
//! from, and a close that waits until both are done with the connection.

use std::future::Future;
use std::sync::Arc;

use horde_net::{ConnectionHandle, EventReceiver};
use horde_proto::Event;
use tokio::sync::{mpsc, watch};

/// Where a run reads its connection's events: the connection itself, or what a message
/// endpoint passes on.
pub trait EventSource: Send {
    /// The next event; `None` once the connection is gone.
    fn recv(&mut self) -> impl Future<Output = Option<Event>> + Send;
    /// An event already waiting, if any.
    fn try_recv(&mut self) -> Option<Event>;
}

impl EventSource for EventReceiver {
    fn recv(&mut self) -> impl Future<Output = Option<Event>> + Send {
        EventReceiver::recv(self)
    }

    fn try_recv(&mut self) -> Option<Event> {
        EventReceiver::try_recv(self).ok()
    }
}

impl EventSource for mpsc::UnboundedReceiver<Event> {
    fn recv(&mut self) -> impl Future<Output = Option<Event>> + Send {
        mpsc::UnboundedReceiver::recv(self)
    }

    fn try_recv(&mut self) -> Option<Event> {
        mpsc::UnboundedReceiver::try_recv(self).ok()
    }
}

/// Closes a connection that several runs share once the last of them is done with it,
/// so that one run's end does not cut off what another still waits for.
#[derive(Clone)]
pub struct SharedClose {
    handle: ConnectionHandle,
    /// Runs not done yet.
    left: Arc<watch::Sender<usize>>,
}

impl SharedClose {
    pub fn new(handle: ConnectionHandle, runs: usize) -> Self {
        Self {
            handle,
            left: Arc::new(watch::Sender::new(runs)),
        }
    }

    /// This run is done with the connection; the last one closes it. Each run calls it
    /// once (see [`DoneGuard`]).
    fn done(&self) {
        let mut last = false;
        self.left.send_modify(|left| {
            *left = left.saturating_sub(1);
            last = *left == 0;
        });
        if last {
            // The host may be gone already; the runs then settle with what they heard.
            let _ = self.handle.close();
        }
    }

    /// Waits until every run is done with the connection (so that it is closing).
    pub async fn all_done(&self) {
        let mut left = self.left.subscribe();
        let _ = left.wait_for(|n| *n == 0).await;
    }

    /// A guard that marks this run done when it says so or is dropped.
    pub fn guard(&self) -> DoneGuard {
        DoneGuard(Some(self.clone()))
    }
}

/// Marks its run done once: at [`DoneGuard::done`], or when dropped on any other way
/// out of the run.
pub struct DoneGuard(Option<SharedClose>);

impl DoneGuard {
    pub fn done(&mut self) {
        if let Some(close) = self.0.take() {
            close.done();
        }
    }
}

impl Drop for DoneGuard {
    fn drop(&mut self) {
        self.done();
    }
}

/// The connection as one run holds it: its calls, its events, and its share of the
/// close.
pub struct RunConn<E> {
    pub handle: ConnectionHandle,
    pub events: E,
    pub close: SharedClose,
}

impl RunConn<EventReceiver> {
    /// A connection that one run has to itself.
    pub fn alone(conn: horde_net::Connection) -> Self {
        let (handle, events) = conn.split();
        let close = SharedClose::new(handle.clone(), 1);
        Self {
            handle,
            events,
            close,
        }
    }
}
