//! The sealing worker: AES-GCM on a second core.
//!
//! The driver thread keeps everything that must happen in order: it polls the sessions,
//! assigns each datagram its channel counter and key phase (`prepare_append`, which also
//! rotates keys), and writes header and plaintext into a per-socket batch. The worker
//! only encrypts: it takes whole batches through a bounded channel, seals every datagram
//! in place with the key each was prepared under, and hands the batch back for the
//! driver to send. Batches and their buffers go round between the two threads and are
//! used again, so a steady flow allocates nothing; when every batch is out, the driver
//! waits for one to come back (back-pressure, not growth).
//!
//! A key rotated on the driver reaches the worker inside the batch: each batch holds the
//! keys its datagrams were prepared under (a reference count, no copy), so a datagram is
//! always sealed with its own key, even if the session has rotated since.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::Notify;

use horde_crypto::{SealError, SealKey};

use crate::batch::{Owner, TxQueue};

/// Batches in circulation: the worker seals one while the driver fills the next.
pub(super) const BATCHES: usize = 8;
/// A batch goes to the worker once it holds this many datagrams (or its queue is full).
pub(super) const HANDOFF_DATAGRAMS: usize = 64;
/// At the end of a flush, a batch this small is sealed on the driver: a round trip to
/// the worker would cost more than the sealing (acks, a few datagrams).
pub(super) const INLINE_DATAGRAMS: usize = 4;

/// One socket's datagrams, prepared and not yet (or just) sealed.
#[derive(Default)]
pub(super) struct SealBatch {
    /// The interface (socket) they go out on.
    pub iface: usize,
    pub queue: TxQueue,
    /// Per datagram: where it sits in the queue's buffer, and its key in `keys`.
    jobs: Vec<Job>,
    keys: Vec<SealKey>,
}

#[derive(Clone, Copy)]
struct Job {
    start: u32,
    len: u32,
    key: u16,
}

impl SealBatch {
    pub fn datagrams(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty() && self.queue.is_empty()
    }

    fn clear(&mut self) {
        self.queue.clear();
        self.jobs.clear();
        self.keys.clear();
    }

    /// Append one datagram, prepared by `crypto` for `channel` from `plaintext`.
    pub fn push(
        &mut self,
        crypto: &mut horde_crypto::Session,
        channel: u8,
        plaintext: &[u8],
        dst: std::net::SocketAddr,
        owner: Owner,
        max_segments: usize,
    ) -> Result<(), SealError> {
        // The key before preparing may rotate during it: take the key after.
        let mut start = 0;
        self.queue.push_with(dst, owner, max_segments, |buf| {
            start = buf.len();
            crypto.prepare_append(channel, plaintext, buf).map(drop)
        })?;
        let len = self.queue.buffer_len() - start;
        if !self.keys.last().is_some_and(|k| crypto.is_send_key(k)) {
            self.keys.push(crypto.send_key());
        }
        self.jobs.push(Job {
            start: start as u32,
            len: len as u32,
            key: (self.keys.len() - 1) as u16,
        });
        Ok(())
    }

    /// Encrypt every datagram in place.
    pub fn seal(&mut self) {
        for j in &self.jobs {
            let d = self
                .queue
                .buffer_mut(j.start as usize..(j.start + j.len) as usize);
            self.keys[usize::from(j.key)].seal_prepared(d);
        }
        self.jobs.clear();
        self.keys.clear();
    }
}

/// The driver's end: batches being filled, free ones, and the worker.
pub(super) struct Sealer {
    /// Per interface, the batch being filled.
    filling: Vec<Option<SealBatch>>,
    free: Vec<SealBatch>,
    to_worker: Option<SyncSender<SealBatch>>,
    from_worker: Receiver<SealBatch>,
    /// Batches with the worker now.
    out: usize,
    /// Datagrams the worker has sealed.
    pub sealed_off_thread: u64,
    /// Told by the worker each time it hands a batch back, so the driver need not wait
    /// for the last batches of a flush: it sends them when they are ready.
    pub done: Arc<Notify>,
    thread: Option<JoinHandle<()>>,
}

impl Sealer {
    pub fn spawn() -> std::io::Result<Self> {
        let (to_worker, work) = sync_channel::<SealBatch>(BATCHES);
        let (back, from_worker) = sync_channel::<SealBatch>(BATCHES);
        let done = Arc::new(Notify::new());
        let wake = done.clone();
        let thread = std::thread::Builder::new()
            .name("horde-seal".into())
            .spawn(move || {
                for mut b in work {
                    b.seal();
                    if back.send(b).is_err() {
                        return;
                    }
                    wake.notify_one();
                }
            })?;
        Ok(Self {
            filling: Vec::new(),
            free: (0..BATCHES).map(|_| SealBatch::default()).collect(),
            to_worker: Some(to_worker),
            from_worker,
            out: 0,
            sealed_off_thread: 0,
            done,
            thread: Some(thread),
        })
    }

    /// Whether `iface` has a batch being filled or a free one to start; if not, the
    /// caller waits for one ([`Sealer::wait_one`]), sends it and recycles it.
    pub fn can_fill(&self, iface: usize) -> bool {
        !self.free.is_empty() || self.filling.get(iface).is_some_and(Option::is_some)
    }

    /// The batch being filled for `iface`, starting a free one if needed (see
    /// [`Sealer::can_fill`]).
    pub fn filling(&mut self, iface: usize) -> Option<&mut SealBatch> {
        if self.filling.len() <= iface {
            self.filling.resize_with(iface + 1, || None);
        }
        if self.filling[iface].is_none() {
            let mut b = self.free.pop()?;
            b.clear();
            b.iface = iface;
            self.filling[iface] = Some(b);
        }
        self.filling[iface].as_mut()
    }

    /// Hand `iface`'s batch to the worker if it is big enough (or `force`d and not
    /// empty); a forced small one is sealed here and put in `sealed` at once.
    pub fn hand_off(&mut self, iface: usize, force: bool, sealed: &mut Vec<SealBatch>) {
        let Some(slot) = self.filling.get_mut(iface) else {
            return;
        };
        let ready = slot.as_ref().is_some_and(|b| {
            b.datagrams() >= HANDOFF_DATAGRAMS || b.queue.is_full() || (force && !b.is_empty())
        });
        if !ready {
            return;
        }
        let mut b = slot.take().expect("checked");
        // Sealed here only with nothing at the worker: the socket's datagrams stay in
        // the order they were numbered.
        if b.datagrams() < INLINE_DATAGRAMS && self.out == 0 {
            b.seal();
            sealed.push(b);
            return;
        }
        self.sealed_off_thread += b.datagrams() as u64;
        match self.to_worker.as_ref().map(|w| w.send(b)) {
            Some(Ok(())) => self.out += 1,
            // The worker is gone (it panicked): seal here from now on.
            Some(Err(e)) => {
                let mut b = e.0;
                self.sealed_off_thread -= b.datagrams() as u64;
                b.seal();
                sealed.push(b);
                self.to_worker = None;
            }
            None => unreachable!("a batch is only filled while the worker runs"),
        }
    }

    /// Hand every batch being filled to the worker (or seal it here if small).
    pub fn hand_off_all(&mut self, sealed: &mut Vec<SealBatch>) {
        for iface in 0..self.filling.len() {
            self.hand_off(iface, true, sealed);
        }
    }

    /// Move batches the worker has finished into `sealed`, without waiting.
    pub fn collect(&mut self, sealed: &mut Vec<SealBatch>) {
        while let Ok(b) = self.from_worker.try_recv() {
            self.out -= 1;
            sealed.push(b);
        }
    }

    /// Wait for every batch with the worker and move them into `sealed`.
    pub fn collect_all(&mut self, sealed: &mut Vec<SealBatch>) {
        while self.out > 0 && self.wait_one(sealed).is_some() {}
    }

    /// Wait for one batch from the worker; `None` if none is out.
    pub fn wait_one(&mut self, sealed: &mut Vec<SealBatch>) -> Option<()> {
        if self.out == 0 {
            return None;
        }
        match self.from_worker.recv() {
            Ok(b) => {
                self.out -= 1;
                sealed.push(b);
                Some(())
            }
            Err(_) => {
                self.out = 0;
                self.to_worker = None;
                None
            }
        }
    }

    /// A sent batch comes back for reuse.
    pub fn recycle(&mut self, mut b: SealBatch) {
        b.clear();
        self.free.push(b);
    }

    /// Whether the worker still runs (batches can be filled).
    pub fn running(&self) -> bool {
        self.to_worker.is_some()
    }
}

impl Drop for Sealer {
    fn drop(&mut self) {
        // Closing the channel ends the worker's loop.
        self.to_worker = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
