//! Transport: sealing and opening datagrams of an established session, and rotating its
//! keys (see [`crate::rekey`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::by_channel::ByChannel;
use crate::drop::counted;
use crate::packet::{
    self, classify, Packet, COUNTER_LIMIT, KEY_PHASE_BIT, MAX_PLAINTEXT, TAG_LEN,
    TRANSPORT_HEADER_LEN, TYPE_TRANSPORT,
};
use crate::rekey::{KeyGeneration, KeyStatus, RekeyPolicy, TransportCipher};
use crate::replay::ReplayWindow;
use crate::{DropCounters, DropReason, PublicKey};

/// The two directional keys a handshake produced.
pub(crate) struct SessionKeys {
    send: KeyGeneration,
    recv: KeyGeneration,
}

impl SessionKeys {
    pub(crate) fn new(send: [u8; 32], recv: [u8; 32]) -> Self {
        Self {
            send: KeyGeneration::first(send),
            recv: KeyGeneration::first(recv),
        }
    }
}

/// A sending key, shared with a thread that encrypts datagrams prepared by
/// [`Session::prepare_append`]. Cheap to clone (a reference count); the key stays alive
/// until the last clone is dropped, even after the session has rotated past it.
#[derive(Clone)]
pub struct SealKey(Arc<TransportCipher>);

impl SealKey {
    /// Encrypts, in place, a whole datagram prepared under this key: header, plaintext
    /// and the tag's room, as [`Session::prepare_append`] appended it.
    pub fn seal_prepared(&self, datagram: &mut [u8]) {
        self.0.seal_prepared(datagram);
    }
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKey(..)")
    }
}

/// Why [`Session::seal`] refused to produce a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The plaintext is larger than [`MAX_PLAINTEXT`](crate::MAX_PLAINTEXT).
    #[error("plaintext of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Plaintext length given.
        len: usize,
        /// Largest accepted.
        max: usize,
    },
    /// The channel has used all 2^56 - 1 counters; a new handshake is needed.
    #[error("channel {channel} has exhausted its nonce counter")]
    CounterExhausted {
        /// The exhausted channel.
        channel: u8,
    },
}

/// An established session with one peer: per-direction keys from the Noise handshake, a send
/// counter and a replay window per channel, and drop counters.
///
/// Each of the 256 channels has its own nonce space: nonce = `channel << 56 | counter`, with
/// `counter` counting up from 0 per channel. Channels therefore never coordinate, and
/// reordering between channels never looks like replay.
pub struct Session {
    send: KeyGeneration,
    recv: KeyGeneration,
    /// The peer's key before its last rotation, for datagrams still in flight.
    recv_previous: Option<KeyGeneration>,
    policy: RekeyPolicy,
    /// The latest time given to [`Session::tick`].
    clock: Duration,
    rekeys_sent: u64,
    rekeys_received: u64,
    local_index: u32,
    remote_index: u32,
    remote_static: PublicKey,
    initiator: bool,
    confirmed: bool,
    /// Next counter to send, per channel sent on.
    send_next: ByChannel<u64>,
    /// Replay window per channel, made on the first authenticated packet (its ring
    /// grows with the counters).
    windows: ByChannel<ReplayWindow>,
    drops: DropCounters,
}

impl Session {
    pub(crate) fn new(
        keys: SessionKeys,
        local_index: u32,
        remote_index: u32,
        remote_static: PublicKey,
        initiator: bool,
    ) -> Self {
        Self {
            send: keys.send,
            recv: keys.recv,
            recv_previous: None,
            policy: RekeyPolicy::default(),
            clock: Duration::ZERO,
            rekeys_sent: 0,
            rekeys_received: 0,
            local_index,
            remote_index,
            remote_static,
            initiator,
            // The initiator has just authenticated the response; the responder has seen only a
            // (possibly replayed) first message until the initiator's first datagram arrives.
            confirmed: initiator,
            send_next: ByChannel::default(),
            windows: ByChannel::default(),
            drops: DropCounters::new(),
        }
    }

    /// Encrypts `plaintext` for `channel` into `out` (cleared first), which then holds the
    /// whole datagram: [`TRANSPORT_OVERHEAD`](crate::TRANSPORT_OVERHEAD) bytes more than the
    /// plaintext. Returns the counter used, which is the channel's next one.
    ///
    /// On error nothing is consumed and `out` is left empty.
    pub fn seal(
        &mut self,
        channel: u8,
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<u64, SealError> {
        out.clear();
        self.seal_append(channel, plaintext, out)
    }

    /// Like [`Session::seal`], but appends the datagram to `out` after what it already
    /// holds, so that a runtime can seal straight into its send batch without a copy.
    ///
    /// On error nothing is consumed and `out` is as it was.
    pub fn seal_append(
        &mut self,
        channel: u8,
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<u64, SealError> {
        let start = out.len();
        let counter = self.prepare_append(channel, plaintext, out)?;
        self.send.cipher().seal_prepared(&mut out[start..]);
        Ok(counter)
    }

    /// The first half of [`Session::seal_append`], for a runtime that encrypts on another
    /// thread: assigns the channel's next counter (rotating the key first if it is due),
    /// and appends the header, the plaintext and room for the tag. The datagram is sent
    /// only after [`SealKey::seal_prepared`] with [`Session::send_key`] as it is now,
    /// before any later call changes it, has encrypted it in place. Counters and key
    /// phases are thus decided here, in order, whichever thread encrypts.
    ///
    /// On error nothing is consumed and `out` is as it was.
    pub fn prepare_append(
        &mut self,
        channel: u8,
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<u64, SealError> {
        if plaintext.len() > MAX_PLAINTEXT {
            return Err(SealError::TooLarge {
                len: plaintext.len(),
                max: MAX_PLAINTEXT,
            });
        }
        let counter = self.next_counter(channel);
        if counter >= COUNTER_LIMIT {
            return Err(SealError::CounterExhausted { channel });
        }
        if self.policy.send_due(&self.send, self.clock) {
            self.send = self.send.next(self.clock);
            self.rekeys_sent += 1;
        }
        let nonce = packet::nonce(channel, counter);
        out.reserve(TRANSPORT_HEADER_LEN + plaintext.len() + TAG_LEN);
        let phase_bit = if self.send.phase() == 1 {
            KEY_PHASE_BIT
        } else {
            0
        };
        out.push(TYPE_TRANSPORT | phase_bit);
        out.extend_from_slice(&self.remote_index.to_le_bytes());
        out.extend_from_slice(&nonce.to_le_bytes());
        out.extend_from_slice(plaintext);
        out.extend_from_slice(&[0; TAG_LEN]);
        self.send.used(self.clock);
        *self.send_next.get_or_default(channel) = counter + 1;
        Ok(counter)
    }

    /// The key that finishes datagrams [`Session::prepare_append`] prepares now. It
    /// changes only when the key rotates; a runtime can keep one per batch.
    pub fn send_key(&self) -> SealKey {
        SealKey(self.send.shared_cipher().clone())
    }

    /// Whether `key` is still the current sending key.
    pub fn is_send_key(&self, key: &SealKey) -> bool {
        Arc::ptr_eq(&key.0, self.send.shared_cipher())
    }

    /// Tells the session the time (any monotonic clock, as a duration since an origin of the
    /// caller's choice). Keys rotate on time only for a session that is ticked; see
    /// [`RekeyPolicy`].
    pub fn tick(&mut self, now: Duration) {
        self.clock = self.clock.max(now);
    }

    /// Replaces the rekeying thresholds (the defaults are WireGuard's).
    pub fn set_rekey_policy(&mut self, policy: RekeyPolicy) {
        self.policy = policy;
    }

    /// Key rotations done: `(of our sending key, of the peer's sending key seen)`.
    pub fn rekeys(&self) -> (u64, u64) {
        (self.rekeys_sent, self.rekeys_received)
    }

    /// The sending key's generation, age and use, and when it will rotate, as of the last
    /// [`Session::tick`].
    pub fn key_status(&self) -> KeyStatus {
        let age = self.send.first_used().map(|t| self.clock.saturating_sub(t));
        KeyStatus {
            send_generation: self.rekeys_sent,
            recv_generation: self.rekeys_received,
            send_key_age: age,
            send_key_messages: self.send.messages(),
            rotate_in: age.map(|a| self.policy.rekey_after_time.saturating_sub(a)),
            rotate_after_messages: self
                .policy
                .rekey_after_messages
                .saturating_sub(self.send.messages()),
        }
    }

    /// Authenticates and decrypts a transport datagram. On success `out` holds the plaintext
    /// and the result is `(channel, plaintext)` borrowing from `out`.
    ///
    /// Checks, in order: header and length ([`DropReason::Truncated`],
    /// [`DropReason::Oversized`], [`DropReason::UnknownType`], [`DropReason::UnexpectedType`]),
    /// receiver index ([`DropReason::WrongIndex`]), replay window before decrypting
    /// ([`DropReason::TooOld`], [`DropReason::Replayed`]), then the AEAD tag
    /// ([`DropReason::BadTag`]). Only an authentic datagram changes the session: it marks its
    /// counter seen. Every drop is counted in [`Session::drop_counters`]; on a drop `out` is
    /// left empty.
    pub fn open<'o>(
        &mut self,
        datagram: &[u8],
        out: &'o mut Vec<u8>,
    ) -> Result<(u8, &'o [u8]), DropReason> {
        out.clear();
        let result = self.open_inner(datagram, out);
        let channel = counted(&mut self.drops, result)?;
        Ok((channel, &out[..]))
    }

    /// Like [`Session::open`], but decrypts inside `datagram` itself, so that a runtime can
    /// open a datagram where it already is (no copy). On success the result is the channel
    /// and where the plaintext lies in `datagram`. The checks, their order and the counting
    /// are those of [`Session::open`]; on a drop the bytes of `datagram` past the header may
    /// have been overwritten.
    pub fn open_in_place(
        &mut self,
        datagram: &mut [u8],
    ) -> Result<(u8, std::ops::Range<usize>), DropReason> {
        let result = self
            .open_checked(datagram)
            .and_then(|(channel, counter, phase)| {
                let len = datagram.len() - TAG_LEN;
                let (body, tag) = datagram.split_at_mut(len);
                let nonce = packet::nonce(channel, counter);
                self.decrypt(phase, nonce, &mut body[TRANSPORT_HEADER_LEN..], tag)?;
                self.accept(channel, counter)?;
                Ok((channel, TRANSPORT_HEADER_LEN..len))
            });
        counted(&mut self.drops, result)
    }

    fn open_inner(&mut self, datagram: &[u8], out: &mut Vec<u8>) -> Result<u8, DropReason> {
        let (channel, counter, key_phase) = self.open_checked(datagram)?;
        let nonce = packet::nonce(channel, counter);
        let (ciphertext, tag) = datagram[TRANSPORT_HEADER_LEN..]
            .split_at(datagram.len() - TRANSPORT_HEADER_LEN - TAG_LEN);
        out.extend_from_slice(ciphertext);
        if let Err(reason) = self.decrypt(key_phase, nonce, out, tag) {
            out.clear();
            return Err(reason);
        }
        self.accept(channel, counter)?;
        Ok(channel)
    }

    /// Marks an authenticated datagram's counter seen and the session confirmed.
    fn accept(&mut self, channel: u8, counter: u64) -> Result<(), DropReason> {
        let window = self.windows.get_or_default(channel);
        // Cannot fail: checked before decrypting and nothing ran in between.
        window.accept(counter)?;
        self.confirmed = true;
        Ok(())
    }

    /// The checks before any cryptography: header, index, replay window, reserved nonce.
    /// Returns `(channel, counter, key phase)`.
    fn open_checked(&self, datagram: &[u8]) -> Result<(u8, u64, u8), DropReason> {
        let (receiver_index, channel, counter, key_phase) = match classify(datagram)? {
            Packet::Transport {
                receiver_index,
                channel,
                counter,
                key_phase,
            } => (receiver_index, channel, counter, key_phase),
            Packet::Initiation { .. } | Packet::Response { .. } | Packet::CookieReply { .. } => {
                return Err(DropReason::UnexpectedType)
            }
        };
        if receiver_index != self.local_index {
            return Err(DropReason::WrongIndex);
        }
        if let Some(window) = self.windows.get(channel) {
            window.check(counter)?;
        }
        if packet::nonce(channel, counter) == u64::MAX {
            // Noise reserves this nonce; `seal` never produces it.
            return Err(DropReason::BadTag);
        }
        Ok((channel, counter, key_phase))
    }

    /// Decrypts `buf` in place under the key generation the phase bit names: the current
    /// one, else the previous one (a datagram sealed before the peer's last rotation) or the
    /// next one (the peer has just rotated; on success it becomes current). The buffer
    /// holds garbage unless the tag verifies (`open` empties it then).
    fn decrypt(
        &mut self,
        key_phase: u8,
        nonce: u64,
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), DropReason> {
        let (clock, policy) = (self.clock, self.policy);
        let try_key = |k: &KeyGeneration, buf: &mut [u8]| -> Result<(), DropReason> {
            if policy.expired(k, clock) {
                return Err(DropReason::KeyExpired);
            }
            k.cipher()
                .decrypt_in_place_detached(nonce, buf, tag)
                .map_err(|_| DropReason::BadTag)
        };
        if key_phase == self.recv.phase() {
            try_key(&self.recv, buf)?;
            self.recv.used(clock);
            return Ok(());
        }
        if let Some(previous) = self.recv_previous.as_mut() {
            // A failed attempt leaves garbage: the next key gets the ciphertext again.
            // Only datagrams around a rotation come here, so the copy is rare.
            let ciphertext = buf.to_vec();
            if try_key(previous, buf).is_ok() {
                previous.used(clock);
                return Ok(());
            }
            buf.copy_from_slice(&ciphertext);
        }
        let next = self.recv.next(clock);
        next.cipher()
            .decrypt_in_place_detached(nonce, buf, tag)
            .map_err(|_| DropReason::BadTag)?;
        self.recv_previous = Some(std::mem::replace(&mut self.recv, next));
        self.recv.used(clock);
        self.rekeys_received += 1;
        Ok(())
    }

    /// This side's index: the receiver index of datagrams sent to us.
    pub fn local_index(&self) -> u32 {
        self.local_index
    }

    /// The peer's index, written into every datagram [`Session::seal`] produces.
    pub fn remote_index(&self) -> u32 {
        self.remote_index
    }

    /// The peer's authenticated static public key.
    pub fn remote_static(&self) -> &PublicKey {
        &self.remote_static
    }

    /// Whether this side sent the handshake initiation.
    pub fn is_initiator(&self) -> bool {
        self.initiator
    }

    /// Whether the peer has proven it holds this session's keys: always true for the
    /// initiator; for the responder, true once the first transport datagram authenticated.
    /// A responder may send before that (the keys are already secret), but a caller that keeps
    /// an older session with the same peer can wait for confirmation before retiring it.
    pub fn is_confirmed(&self) -> bool {
        self.confirmed
    }

    /// The counter the next [`Session::seal`] on `channel` will use.
    pub fn next_counter(&self, channel: u8) -> u64 {
        self.send_next.get(channel).copied().unwrap_or(0)
    }

    /// Datagrams dropped by [`Session::open`], per reason.
    pub fn drop_counters(&self) -> &DropCounters {
        &self.drops
    }

    #[cfg(test)]
    pub(crate) fn set_next_counter(&mut self, channel: u8, counter: u64) {
        *self.send_next.get_or_default(channel) = counter;
    }

    #[cfg(test)]
    pub(crate) fn window_top(&self, channel: u8) -> Option<u64> {
        self.windows.get(channel).map(|w| w.top())
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("local_index", &self.local_index)
            .field("remote_index", &self.remote_index)
            .field("remote_static", &self.remote_static)
            .field("initiator", &self.initiator)
            .field("confirmed", &self.confirmed)
            .field("drops", &self.drops)
            .finish_non_exhaustive()
    }
}
