//! How much of a connection's payload its application has read, shared between the
//! application's [`EventReceiver`](crate::EventReceiver) and the driver, with the wake-up
//! that lets a shut receive window reopen as soon as the application has read enough.
//!
//! Without the wake-up the driver learns of the reading only when something else wakes
//! it; a receiver whose window is shut gets no data, so that can take until the sender's
//! next zero-window probe (250 ms).
//!
//! A connection whose application has read lists itself once in a [`ReadLog`] shared by
//! the driver's connections, so that the driver tells the host of the reading of those
//! connections only, not of every connection at every flush.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The connections whose applications have read since the driver last looked.
#[derive(Debug, Default)]
pub(crate) struct ReadLog(Mutex<Vec<u64>>);

impl ReadLog {
    /// The connections listed, in the order they read; the log is left empty.
    pub fn take(&self, into: &mut Vec<u64>) {
        let mut listed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut listed);
    }

    fn list(&self, key: u64) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(key);
    }
}

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
    /// The connection, as the driver's log names it.
    key: u64,
    /// Whether the connection is in the log now.
    listed: AtomicBool,
    log: Arc<ReadLog>,
}

impl ReadProgress {
    pub fn new(wake: Arc<Notify>, key: u64, log: Arc<ReadLog>) -> Self {
        Self {
            read: AtomicU64::new(0),
            wake_at: AtomicU64::new(NEVER),
            wake,
            key,
            listed: AtomicBool::new(false),
            log,
        }
    }

    /// Application side: `bytes` more were read.
    pub fn add(&self, bytes: u64) {
        let read = self.read.fetch_add(bytes, Ordering::AcqRel) + bytes;
        // Called per payload read: a plain load first spares the swap's locked write
        // while the connection is listed already, as it mostly is.
        if !self.listed.load(Ordering::Acquire) && !self.listed.swap(true, Ordering::AcqRel) {
            self.log.list(self.key);
        }
        if read >= self.wake_at.load(Ordering::Relaxed) {
            self.wake_at.store(NEVER, Ordering::Relaxed);
            self.wake.notify_one();
        }
    }

    /// Driver side: payload bytes read so far.
    pub fn read(&self) -> u64 {
        self.read.load(Ordering::Acquire)
    }

    /// Driver side: the connection was taken from the log; a later read lists it
    /// again. Called before [`ReadProgress::read`], so that no read goes unlisted.
    pub fn unlist(&self) {
        self.listed.store(false, Ordering::Release);
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
        let p = ReadProgress::new(wake.clone(), 1, Arc::default());
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
        let p = ReadProgress::new(wake.clone(), 1, Arc::default());
        p.add(500);
        p.wake_when_read(Some(400));
        assert!(woken(&wake));
        p.wake_when_read(None);
        p.add(500);
        assert!(!woken(&wake));
    }

    #[test]
    fn a_connection_that_reads_is_listed_once_until_taken() {
        let log = Arc::new(ReadLog::default());
        let wake = Arc::new(Notify::new());
        let a = ReadProgress::new(wake.clone(), 7, log.clone());
        let b = ReadProgress::new(wake.clone(), 9, log.clone());
        let _idle = ReadProgress::new(wake, 11, log.clone());
        a.add(10);
        b.add(10);
        a.add(10);
        let mut taken = Vec::new();
        log.take(&mut taken);
        assert_eq!(taken, vec![7, 9]);
        a.unlist();
        b.unlist();
        taken.clear();
        log.take(&mut taken);
        assert!(taken.is_empty(), "nobody read since");
        b.add(5);
        log.take(&mut taken);
        assert_eq!((taken, b.read()), (vec![9], 15));
    }
}
