//! The queue of one connection's events, from the driver to its application.
//!
//! A server holds one per connection, most of them idle. Tokio's unbounded channel
//! allocates a block of 32 slots with the channel and keeps it (some 2.4 kB with its
//! shared state for a 56-byte event); this queue holds a `VecDeque` sized to what
//! waits, and gives its room back when a burst has been read.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use horde_proto::Event;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::Notify;

/// Room a drained queue may keep; beyond, it is given back.
const KEPT_ROOM: usize = 16;

struct Shared {
    queue: Mutex<Queue>,
    /// Signals the reader: an event, or the sender's end.
    ready: Notify,
}

struct Queue {
    events: VecDeque<Event>,
    /// The sending end is gone: once drained, the stream ends.
    closed: bool,
}

/// The driver's end.
pub(crate) struct EventSender {
    shared: Arc<Shared>,
}

/// The application's end (inside [`EventReceiver`](crate::EventReceiver)).
pub(crate) struct EventQueue {
    shared: Arc<Shared>,
}

/// A new, empty queue.
pub(crate) fn event_queue() -> (EventSender, EventQueue) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue {
            events: VecDeque::new(),
            closed: false,
        }),
        ready: Notify::new(),
    });
    (
        EventSender {
            shared: shared.clone(),
        },
        EventQueue { shared },
    )
}

impl EventSender {
    pub fn send(&self, e: Event) {
        self.shared
            .queue
            .lock()
            .expect("event queue")
            .events
            .push_back(e);
        // Stores a permit when nobody waits: a reader about to wait returns at once.
        self.shared.ready.notify_one();
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        self.shared.queue.lock().expect("event queue").closed = true;
        self.shared.ready.notify_one();
    }
}

impl EventQueue {
    /// The next event; `None` once the sender is gone and every event was read.
    pub async fn recv(&mut self) -> Option<Event> {
        loop {
            match self.try_recv() {
                Ok(e) => return Some(e),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => self.shared.ready.notified().await,
            }
        }
    }

    pub fn try_recv(&mut self) -> Result<Event, TryRecvError> {
        let mut q = self.shared.queue.lock().expect("event queue");
        match q.events.pop_front() {
            Some(e) => {
                if q.events.is_empty() && q.events.capacity() > KEPT_ROOM {
                    q.events = VecDeque::new();
                }
                Ok(e)
            }
            None if q.closed => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    pub fn len(&self) -> usize {
        self.shared.queue.lock().expect("event queue").events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_proto::ChannelId;

    fn up(c: u8) -> Event {
        Event::ChannelUp {
            channel: ChannelId::new(c),
        }
    }

    #[tokio::test]
    async fn events_arrive_in_order_then_the_end() {
        let (tx, mut rx) = event_queue();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(e) = rx.recv().await {
                got.push(e);
            }
            got
        });
        for c in 0..100 {
            tx.send(up(c));
            if c % 10 == 0 {
                tokio::task::yield_now().await;
            }
        }
        drop(tx);
        let got = reader.await.unwrap();
        assert_eq!(got.len(), 100);
        for (c, e) in got.iter().enumerate() {
            assert!(
                matches!(e, Event::ChannelUp { channel } if *channel == ChannelId::new(c as u8)),
                "event {c}: {e:?}"
            );
        }
    }

    #[test]
    fn a_drained_burst_gives_its_room_back() {
        let (tx, mut rx) = event_queue();
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
        for c in 0..200 {
            tx.send(up(c as u8));
        }
        assert_eq!(rx.len(), 200);
        while rx.try_recv().is_ok() {}
        assert_eq!(rx.shared.queue.lock().unwrap().events.capacity(), 0);
        drop(tx);
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
    }
}
