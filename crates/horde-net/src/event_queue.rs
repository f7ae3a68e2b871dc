//! One connection's events on their way from the driver to the application.
//!
//! The driver hands over everything a connection has to say at once, under one lock and
//! with at most one wake-up, and the application takes everything waiting at once into
//! a buffer of its own. An ack or a received ADU is an event, so this runs for every
//! packet: per event, each side only moves it into or out of a `VecDeque`, and the two
//! sides swap buffers instead of allocating new ones.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use horde_proto::Event;

/// Room for events a buffer keeps once it is empty. A starved application can find tens
/// of thousands waiting at 10,000 ADUs/s; a buffer sized for that, kept, and written
/// round and round from wherever its ring had got to, would in time have every page of
/// it resident.
const KEPT_ROOM: usize = 1024;

#[derive(Default)]
struct State {
    /// Handed over, not yet taken by the application.
    events: VecDeque<Event>,
    /// The application's task, waiting for events.
    waker: Option<Waker>,
    /// The driver is done with the connection: no event follows those queued.
    sender_gone: bool,
    /// The application dropped its end: events are not kept.
    receiver_gone: bool,
}

#[derive(Default)]
struct Shared(Mutex<State>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A connection's event queue: the driver's end and the application's.
pub(crate) fn event_queue() -> (EventSender, EventQueue) {
    let shared = Arc::new(Shared::default());
    (
        EventSender(shared.clone()),
        EventQueue {
            shared,
            taken: VecDeque::new(),
        },
    )
}

/// The driver's end. Dropping it ends the application's events once it has read those
/// queued.
pub(crate) struct EventSender(Arc<Shared>);

impl EventSender {
    /// Hand `events` over, in order. Every one is taken from the iterator, even when the
    /// application is gone.
    pub fn send_all(&self, events: impl Iterator<Item = Event>) {
        let waker = {
            let mut s = self.0.lock();
            if s.receiver_gone {
                drop(s);
                events.for_each(drop);
                return;
            }
            let before = s.events.len();
            s.events.extend(events);
            if s.events.len() == before {
                return;
            }
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.0.lock();
            s.sender_gone = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The application's end.
pub(crate) struct EventQueue {
    shared: Arc<Shared>,
    /// Taken from the shared queue, not yet read.
    taken: VecDeque<Event>,
}

/// Why [`EventQueue::try_recv`] has no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Empty {
    /// None waits now.
    Now,
    /// None will come: the driver is done with the connection.
    ForGood,
}

impl EventQueue {
    /// The next event; `Ready(None)` once the driver is done and every event was read.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        match self.try_recv() {
            Ok(e) => Poll::Ready(Some(e)),
            Err(Empty::ForGood) => Poll::Ready(None),
            Err(Empty::Now) => {
                let mut s = self.shared.lock();
                // Handed over between the look and the lock: read it now.
                if !s.events.is_empty() || s.sender_gone {
                    drop(s);
                    return self.poll_recv(cx);
                }
                match &s.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => s.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Result<Event, Empty> {
        if let Some(e) = self.taken.pop_front() {
            return Ok(e);
        }
        // `taken` is empty: it lends its buffer to the driver's side, from its start and
        // no larger than usual.
        self.taken.clear();
        self.taken.shrink_to(KEPT_ROOM);
        let mut s = self.shared.lock();
        std::mem::swap(&mut s.events, &mut self.taken);
        let gone = s.sender_gone;
        drop(s);
        match self.taken.pop_front() {
            Some(e) => Ok(e),
            None if gone => Err(Empty::ForGood),
            None => Err(Empty::Now),
        }
    }

    /// How many events wait unread.
    pub fn len(&self) -> usize {
        self.taken.len() + self.shared.lock().events.len()
    }
}

impl Drop for EventQueue {
    fn drop(&mut self) {
        let mut s = self.shared.lock();
        s.receiver_gone = true;
        // The events' payloads go now, not with the driver's end.
        let events = std::mem::take(&mut s.events);
        drop(s);
        drop(events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn writable(stream: u32) -> Event {
        Event::Writable { stream }
    }

    #[test]
    fn events_come_out_in_order_with_one_wake_up_per_hand_over_and_end_after_the_last() {
        let (tx, mut rx) = event_queue();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(rx.poll_recv(&mut cx).is_pending());
        tx.send_all((0..3).map(writable));
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "one wake-up for three events"
        );
        tx.send_all(std::iter::empty());
        assert_eq!(rx.len(), 3);
        assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Some(writable(0))));
        tx.send_all((3..5).map(writable));
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "nobody was waiting");
        let got: Vec<Event> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(got, (1..5).map(writable).collect::<Vec<_>>());
        assert_eq!(rx.try_recv(), Err(Empty::Now));
        assert!(rx.poll_recv(&mut cx).is_pending());
        tx.send_all(std::iter::once(writable(5)));
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Some(writable(5))));
        assert!(rx.poll_recv(&mut cx).is_pending());
        drop(tx);
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            3,
            "the end wakes the reader"
        );
        assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(None));
        assert_eq!(rx.try_recv(), Err(Empty::ForGood));
    }

    #[test]
    fn a_dropped_receiver_keeps_nothing_but_every_event_is_still_taken() {
        let (tx, rx) = event_queue();
        tx.send_all((0..2).map(writable));
        drop(rx);
        let mut taken = 0;
        tx.send_all((0..4).map(writable).inspect(|_| taken += 1));
        assert_eq!(taken, 4);
        assert!(tx.0.lock().events.is_empty());
    }

    /// A burst (a starved application finding 50,000 events) grows both buffers; once
    /// it is read, neither keeps more than the usual room.
    #[test]
    fn room_grown_for_a_burst_is_given_back_once_it_is_read() {
        let (tx, mut rx) = event_queue();
        for _ in 0..2 {
            tx.send_all((0..50_000).map(writable));
            assert_eq!(rx.try_recv(), Ok(writable(0)));
            tx.send_all((0..50_000).map(writable));
            while rx.taken.pop_front().is_some() {}
            assert_eq!(rx.try_recv(), Ok(writable(0)));
            while rx.taken.pop_front().is_some() {}
        }
        assert_eq!(rx.try_recv(), Err(Empty::Now));
        let room = |rx: &EventQueue| (rx.taken.capacity(), rx.shared.lock().events.capacity());
        let (taken, shared) = room(&rx);
        assert!(
            taken <= KEPT_ROOM && shared <= KEPT_ROOM,
            "{taken}, {shared}"
        );
    }
}
