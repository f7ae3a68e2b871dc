//! The sealing worker: AES-GCM on a second core, when there is enough to seal.
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
//! The hand-off is adaptive ([`place`]): a batch goes to the worker only when it is
//! large and the worker keeps up. A small batch at the end of a flush (acks, a
//! lightly loaded connection) is sealed on the driver, so it never pays two wake-ups;
//! and once the worker already holds [`WORKER_BACKLOG`] datagrams (it is behind, e.g.
//! it gets no core of its own), the driver seals its own batches for a while
//! ([`BACKOFF_BATCHES`]) instead of queueing more.
//! Every batch carries a sequence number taken when it leaves the driver, and batches
//! are sent in that order whoever sealed them, so datagrams leave in the order they
//! were numbered. (Before any of this, a flush that finds the sealer idle seals its
//! first few datagrams on the plain path, straight into the socket queues: see
//! `transmit.rs`.)
//!
//! A key rotated on the driver reaches the worker inside the batch: each batch holds the
//! keys its datagrams were prepared under (a reference count, no copy), so a datagram is
//! always sealed with its own key, even if the session has rotated since.

use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::Notify;

use horde_crypto::{SealError, SealKey};
use horde_policy::ChannelId;

use crate::batch::{Owner, TxQueue};

/// Batches in circulation: the worker seals some while the driver fills and sends others.
pub(super) const BATCHES: usize = 8;
/// The batches being filled leave the driver together once they hold this many
/// datagrams between them (or one's queue is full). Together, and counted together,
/// because that bounds how far a datagram can be sent behind later-numbered ones on
/// other sockets: a delay of a whole key rotation would make the receiver open it with
/// the wrong key (it tells keys apart by a one-bit phase).
pub(super) const HANDOFF_DATAGRAMS: usize = crate::config::SEAL_GROUP_DATAGRAMS;
/// At the end of a flush (or when a group leaves), a batch smaller than this is sealed
/// on the driver: the driver would otherwise sleep while the worker wakes, seals a few
/// microseconds' worth and wakes it again (acks, a lightly loaded connection).
pub(super) const INLINE_DATAGRAMS: usize = 16;
/// Datagrams the worker may hold (one group being sealed, one waiting) before the
/// driver seals its own: a worker this far behind has no core to itself, and queueing
/// more would only add hand-off cost and delay.
pub(super) const WORKER_BACKLOG: usize = 2 * HANDOFF_DATAGRAMS;

/// Once the worker is found behind, this many batches in a row are sealed on the driver
/// before the worker is tried again: with no core of its own the worker only adds
/// hand-off cost, and a worker that is merely slow catches up meanwhile.
pub(super) const BACKOFF_BATCHES: u32 = 8;

/// Where a batch that is ready to leave the driver is sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// On the driver thread, now.
    Driver,
    /// On the worker.
    Worker,
}

/// Where to seal a batch of `datagrams` with `out` datagrams already at the worker;
/// `end_of_flush`: the driver has nothing more to prepare and is about to send and sleep;
/// `backing_off`: the worker was behind a few batches ago (see [`BACKOFF_BATCHES`]).
pub(super) fn place(datagrams: usize, out: usize, end_of_flush: bool, backing_off: bool) -> Place {
    if backing_off || out >= WORKER_BACKLOG || (end_of_flush && datagrams < INLINE_DATAGRAMS) {
        Place::Driver
    } else {
        Place::Worker
    }
}

/// One socket's datagrams, prepared and not yet (or just) sealed.
#[derive(Default)]
pub(super) struct SealBatch {
    /// The interface (socket) they go out on.
    pub iface: usize,
    pub queue: TxQueue,
    /// Per datagram: where it sits in the queue's buffer, and its key in `keys`.
    jobs: Vec<Job>,
    keys: Vec<SealKey>,
    /// Order in which batches left the driver, and are sent.
    seq: u64,
    /// Datagrams it took to the worker.
    handed: usize,
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
        channel: ChannelId,
        plaintext: &[u8],
        dst: std::net::SocketAddr,
        owner: Owner,
        max_segments: usize,
    ) -> Result<(), SealError> {
        // The key before preparing may rotate during it: take the key after.
        let mut start = 0;
        self.queue.push_with(dst, owner, max_segments, |buf| {
            start = buf.len();
            crypto
                .prepare_append(u8::from(channel), plaintext, buf)
                .map(drop)
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

/// The driver's end: batches being filled, sealed ones waiting for their turn, free
/// ones, and the worker.
pub(super) struct Sealer {
    /// Per interface, the batch being filled.
    filling: Vec<Option<SealBatch>>,
    free: Vec<SealBatch>,
    /// Sealed batches not yet sent, by sequence number.
    ready: Vec<SealBatch>,
    to_worker: Option<SyncSender<SealBatch>>,
    from_worker: Receiver<SealBatch>,
    /// Batches with the worker now, and their datagrams.
    out: usize,
    out_datagrams: usize,
    /// The next batch to leave the driver, and the next to be sent.
    next_seq: u64,
    next_send: u64,
    /// Batches still to seal here since the worker was last found behind.
    backoff: u32,
    /// Datagrams the worker has sealed.
    pub sealed_off_thread: u64,
    /// Datagrams the driver sealed itself (small batches, or the worker behind).
    pub sealed_on_driver: u64,
    /// Told by the worker when it hands a batch back while the driver waits for it
    /// (`wanted`), so the driver need not wait at the end of a flush: it sends the
    /// batch when it is ready. While the driver is flushing it collects batches as it
    /// goes, and a wake-up would only cost it an empty turn.
    pub done: Arc<Notify>,
    wanted: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sealer {
    pub fn spawn() -> std::io::Result<Self> {
        let (to_worker, work) = sync_channel::<SealBatch>(BATCHES);
        let (back, from_worker) = sync_channel::<SealBatch>(BATCHES);
        let done = Arc::new(Notify::new());
        let wanted = Arc::new(AtomicBool::new(false));
        let (wake, want) = (done.clone(), wanted.clone());
        let thread = std::thread::Builder::new()
            .name("horde-seal".into())
            .spawn(move || {
                for mut b in work {
                    b.seal();
                    if back.send(b).is_err() {
                        return;
                    }
                    // Pairs with the fence in `idle`: either the driver's next
                    // `collect` sees this batch or this sees that it waits.
                    fence(Ordering::SeqCst);
                    if want.swap(false, Ordering::SeqCst) {
                        wake.notify_one();
                    }
                }
            })?;
        Ok(Self {
            filling: Vec::new(),
            free: (0..BATCHES).map(|_| SealBatch::default()).collect(),
            ready: Vec::with_capacity(BATCHES),
            to_worker: Some(to_worker),
            from_worker,
            out: 0,
            out_datagrams: 0,
            next_seq: 0,
            next_send: 0,
            backoff: 0,
            sealed_off_thread: 0,
            sealed_on_driver: 0,
            done,
            wanted,
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

    /// Once the batches being filled hold [`HANDOFF_DATAGRAMS`] between them (or
    /// `iface`'s queue is full, or `end_of_flush` and it is not empty), every socket's
    /// batch leaves the driver: to the worker, or sealed here (see [`place`]).
    pub fn hand_off(&mut self, iface: usize, end_of_flush: bool) {
        let Some(Some(b)) = self.filling.get(iface) else {
            return;
        };
        let ready = b.queue.is_full()
            || (end_of_flush && !b.is_empty())
            || self
                .filling
                .iter()
                .flatten()
                .map(SealBatch::datagrams)
                .sum::<usize>()
                >= HANDOFF_DATAGRAMS;
        if !ready {
            return;
        }
        for j in 0..self.filling.len() {
            self.close(j, end_of_flush);
        }
    }

    /// `iface`'s batch, unless empty, leaves the driver (see [`Sealer::hand_off`]).
    fn close(&mut self, iface: usize, end_of_flush: bool) {
        let Some(mut b) = self.filling[iface].take() else {
            return;
        };
        if b.is_empty() {
            self.filling[iface] = Some(b);
            return;
        }
        b.seq = self.next_seq;
        self.next_seq += 1;
        let n = b.datagrams();
        if self.out_datagrams >= WORKER_BACKLOG {
            self.backoff = BACKOFF_BATCHES;
        }
        let backing_off = self.backoff > 0;
        // Small batches of a group stay here as they would at the end of a flush.
        let small_stays = end_of_flush || n < INLINE_DATAGRAMS;
        let out = self.out_datagrams;
        if place(n, out, small_stays, backing_off) == Place::Driver {
            // Only batches the worker would have taken count down the back-off.
            if backing_off && place(n, out, small_stays, false) == Place::Worker {
                self.backoff -= 1;
            }
            return self.seal_here(b);
        }
        let Some(worker) = self.to_worker.as_ref() else {
            return self.seal_here(b);
        };
        b.handed = n;
        match worker.send(b) {
            Ok(()) => {
                self.out += 1;
                self.out_datagrams += n;
                self.sealed_off_thread += n as u64;
            }
            // The worker is gone (it panicked): seal here from now on.
            Err(e) => {
                self.to_worker = None;
                self.seal_here(e.0);
            }
        }
    }

    fn seal_here(&mut self, mut b: SealBatch) {
        self.sealed_on_driver += b.datagrams() as u64;
        b.seal();
        self.insert_ready(b);
    }

    /// Keep `ready` in sequence order (the worker's batches come back in order, but
    /// after later ones the driver sealed itself).
    fn insert_ready(&mut self, b: SealBatch) {
        let at = self.ready.partition_point(|r| r.seq < b.seq);
        self.ready.insert(at, b);
    }

    /// Every batch being filled leaves the driver (the end of a flush).
    pub fn hand_off_all(&mut self) {
        for iface in 0..self.filling.len() {
            self.close(iface, true);
        }
    }

    /// Take the batches the worker has finished, without waiting.
    pub fn collect(&mut self) {
        while let Ok(b) = self.from_worker.try_recv() {
            self.back(b);
        }
    }

    fn back(&mut self, b: SealBatch) {
        self.out -= 1;
        self.out_datagrams -= b.handed;
        self.insert_ready(b);
    }

    /// Wait for every batch with the worker.
    pub fn collect_all(&mut self) {
        while self.out > 0 && self.wait_one().is_some() {}
    }

    /// Wait for one batch from the worker; `None` if none is out.
    pub fn wait_one(&mut self) -> Option<()> {
        if self.out == 0 {
            return None;
        }
        match self.from_worker.recv() {
            Ok(b) => {
                self.back(b);
                Some(())
            }
            Err(_) => {
                // Its batches are lost; the ones after them go out (see `sendable`).
                self.out = 0;
                self.out_datagrams = 0;
                self.to_worker = None;
                None
            }
        }
    }

    /// Move the sealed batches whose turn it is into `to_send`, in order: a batch
    /// waits while one that left the driver before it is still with the worker.
    pub fn sendable(&mut self, to_send: &mut Vec<SealBatch>) {
        let n = self
            .ready
            .iter()
            .enumerate()
            .take_while(|(i, b)| b.seq == self.next_send + *i as u64 || self.out == 0)
            .count();
        if let Some(last) = self.ready[..n].last() {
            self.next_send = last.seq + 1;
        }
        to_send.extend(self.ready.drain(..n));
    }

    /// The driver is flushing and collects batches itself: no wake-ups.
    pub fn busy(&self) {
        self.wanted.store(false, Ordering::Release);
    }

    /// The driver is done flushing: a batch handed back from now on wakes it. Call
    /// [`Sealer::collect`] after this, so that none handed back just before is missed.
    pub fn idle(&self) {
        self.wanted.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// A sent batch comes back for reuse.
    pub fn recycle(&mut self, mut b: SealBatch) {
        b.clear();
        self.free.push(b);
    }

    /// Nothing is being filled, sealed or waiting to be sent.
    pub fn quiet(&self) -> bool {
        self.out == 0
            && self.ready.is_empty()
            && self.filling.iter().flatten().all(SealBatch::is_empty)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_batches_at_the_end_of_a_flush_and_batches_behind_a_busy_worker_stay_here() {
        // A full batch mid-flush goes to a worker that keeps up.
        assert_eq!(place(HANDOFF_DATAGRAMS, 0, false, false), Place::Worker);
        assert_eq!(
            place(HANDOFF_DATAGRAMS, WORKER_BACKLOG - 1, false, false),
            Place::Worker
        );
        // A worker holding WORKER_BACKLOG batches is behind: the driver seals its own.
        assert_eq!(
            place(HANDOFF_DATAGRAMS, WORKER_BACKLOG, false, false),
            Place::Driver
        );
        assert_eq!(
            place(HANDOFF_DATAGRAMS, WORKER_BACKLOG, true, false),
            Place::Driver
        );
        // ... and goes on doing so while it backs off.
        assert_eq!(place(HANDOFF_DATAGRAMS, 0, false, true), Place::Driver);
        // The end of a flush: small batches are not worth two wake-ups, large ones are.
        assert_eq!(place(1, 0, true, false), Place::Driver);
        assert_eq!(place(INLINE_DATAGRAMS - 1, 0, true, false), Place::Driver);
        assert_eq!(place(INLINE_DATAGRAMS, 0, true, false), Place::Worker);
    }

    fn batch(seq: u64) -> SealBatch {
        SealBatch {
            seq,
            ..SealBatch::default()
        }
    }

    fn seqs(v: &[SealBatch]) -> Vec<u64> {
        v.iter().map(|b| b.seq).collect()
    }

    #[test]
    fn batches_sealed_here_wait_for_earlier_ones_at_the_worker() {
        let mut s = Sealer::spawn().unwrap();
        let mut out = Vec::new();
        // Batch 0 is at the worker; 2 and 1 were sealed here after it.
        s.out = 1;
        s.insert_ready(batch(2));
        s.insert_ready(batch(1));
        s.sendable(&mut out);
        assert!(out.is_empty(), "nothing passes batch 0");
        // Batch 0 comes back: all three go, in order.
        s.out = 0;
        s.insert_ready(batch(0));
        s.sendable(&mut out);
        assert_eq!(seqs(&out), [0, 1, 2]);
        // Batch 3 at the worker, 4 ready: 4 waits, then both go.
        out.clear();
        s.out = 1;
        s.insert_ready(batch(4));
        s.sendable(&mut out);
        assert!(out.is_empty());
        s.insert_ready(batch(3));
        s.sendable(&mut out);
        assert_eq!(seqs(&out), [3, 4], "3 is next whether or not 5 is out");
        assert_eq!(s.next_send, 5);
    }
}
