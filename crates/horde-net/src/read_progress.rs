//! How much of a connection's payload its application has read, shared between the
//! application's [`EventReceiver`](crate::EventReceiver) and the driver, with the wake-up
//! that lets a shut receive window reopen as soon as the application has read enough.
//!
//! Without the wake-up the driver learns of the reading only when something else wakes
//! it; a receiver whose window is shut gets no data, so that can take until the sender's
//! next zero-window probe (250 ms).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// No wake-up wanted.
const NEVER: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct ReadProgress {
    /// Payload bytes the application has read.
    read: AtomicU64,
    /// Wake the driver once `read` reaches this.
    wake_at: AtomicU64,
    /// The host driver's wake-up, shared by all its connections.
    wake: Arc<Notify>,
}

impl ReadProgress {
    pub fn new(wake: Arc<Notify>) -> Self {
        Self {
            read: AtomicU64::new(0),
            wake_at: AtomicU64::new(NEVER),
            wake,
        }
    }

    /// Application side: `bytes` more were read.
    pub fn add(&self, bytes: u64) {
        let read = self.read.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if read >= self.wake_at.load(Ordering::Relaxed) {
            self.wake_at.store(NEVER, Ordering::Relaxed);
            self.wake.notify_one();
        }
    }

    /// Driver side: payload bytes read so far.
    pub fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Driver side: wake the driver once the application has read `at` bytes in all
    /// (`None`: no wake-up). If it already has, the wake-up is due at once.
    pub fn wake_when_read(&self, at: Option<u64>) {
        let at = at.unwrap_or(NEVER);
        self.wake_at.store(at, Ordering::Relaxed);
        // The reader may have passed `at` before the store: it would not have woken us.
        if at != NEVER && self.read() >= at {
            self.wake_at.store(NEVER, Ordering::Relaxed);
            self.wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn woken(n: &Notify) -> bool {
        let f = n.notified();
        tokio::pin!(f);
        f.as_mut().enable()
    }

    #[test]
    fn wakes_once_when_the_reader_reaches_the_mark() {
        let wake = Arc::new(Notify::new());
        let p = ReadProgress::new(wake.clone());
        p.wake_when_read(Some(1000));
        p.add(600);
        assert!(!woken(&wake));
        p.add(600);
        assert!(woken(&wake));
        p.add(600);
        assert!(!woken(&wake), "one wake-up per mark");
        assert_eq!(p.read(), 1800);
    }

    #[test]
    fn a_mark_already_passed_wakes_at_once() {
        let wake = Arc::new(Notify::new());
        let p = ReadProgress::new(wake.clone());
        p.add(500);
        p.wake_when_read(Some(400));
        assert!(woken(&wake));
        p.wake_when_read(None);
        p.add(500);
        assert!(!woken(&wake));
    }
}
