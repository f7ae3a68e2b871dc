//! The receiver's decoder: a store of recent data ADUs, XOR decoding by peeling (a coded
//! ADU with exactly one constituent missing yields it, and each ADU so recovered may make
//! another waiting coded ADU decodable), and Reed-Solomon blocks.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;

use super::block;
use super::config::MAX_BLOCK_DATA;
use super::header::Frame;
use super::xor::xor_into;

/// How long received and recovered data ADUs stay available for decoding, and how long
/// an undecodable coded ADU waits for more of its constituents.
pub const DECODE_WINDOW: Duration = Duration::from_secs(1);
/// Most data ADUs kept for decoding.
const MAX_STORED: usize = 8192;
/// Most coded ADUs waiting (XOR frames and block parities together).
const MAX_WAITING: usize = 512;

#[derive(Debug, Clone)]
struct Waiting {
    seqs: Vec<u64>,
    len_xor: u16,
    payload: Bytes,
    at: Duration,
}

#[derive(Debug, Clone)]
struct Block {
    data: u8,
    parity: u8,
    shards: BTreeMap<u8, Bytes>,
    at: Duration,
}

/// What one frame did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decoded {
    /// ADUs newly available: `(seq, payload, recovered)`; `recovered` is false for the
    /// frame's own data ADU.
    pub new: Vec<(u64, Bytes, bool)>,
    /// A data frame whose ADU was already here (a retransmission or a recovered one).
    pub duplicate: bool,
}

/// The receive side of a recovery stream: keeps recent data ADUs for a short while
/// ([`DECODE_WINDOW`]), and rebuilds a missing one from an XOR frame or a block's parity
/// shards when enough of the rest is here.
#[derive(Debug, Default)]
pub struct Decoder {
    store: HashMap<u64, Bytes>,
    order: VecDeque<(Duration, u64)>,
    waiting: Vec<Waiting>,
    /// By first sequence number, so the blocks covering one ADU are a range.
    blocks: BTreeMap<u64, Block>,
    /// The highest sequence number that has left the store. At or below it the decoder
    /// cannot tell an ADU that never came from one it delivered and forgot, so nothing
    /// there is recovered: a coded ADU that arrives late (behind a long queue, or over
    /// a slower path) would otherwise hand the application a second copy.
    forgotten: Option<u64>,
    /// Coded ADUs that left undecoded with two or more constituents missing.
    pub undecodable: u64,
}

impl Decoder {
    /// Whether data ADU `seq` is in the store (arrived or recovered, not yet expired).
    pub fn has(&self, seq: u64) -> bool {
        self.store.contains_key(&seq)
    }

    /// Whether `seq` is missing from the store and past the point where the decoder
    /// could still tell whether it was delivered.
    fn is_forgotten(&self, seq: u64) -> bool {
        self.forgotten.is_some_and(|f| seq <= f) && !self.store.contains_key(&seq)
    }

    fn forget(&mut self, seq: u64) {
        self.store.remove(&seq);
        self.forgotten = Some(self.forgotten.map_or(seq, |f| f.max(seq)));
    }

    /// Take one frame at `now`.
    pub fn on_frame(&mut self, now: Duration, frame: Frame) -> Decoded {
        self.expire(now);
        let mut d = Decoded::default();
        // The block this frame added a shard to, if any: the only block besides those
        // covering a newly available ADU that can have become decodable.
        let mut touched_block = None;
        match frame {
            Frame::Data { seq, payload } => {
                if self.has(seq) {
                    d.duplicate = true;
                    return d;
                }
                self.insert(now, seq, payload.clone());
                d.new.push((seq, payload, false));
            }
            Frame::Xor {
                seqs,
                len_xor,
                payload,
            } => {
                if self.waiting.len() >= MAX_WAITING {
                    self.waiting.remove(0);
                }
                self.waiting.push(Waiting {
                    seqs,
                    len_xor,
                    payload,
                    at: now,
                });
            }
            // Reports are the layer's business, not the decoder's.
            Frame::Report(_) => return d,
            Frame::Parity {
                first,
                data,
                parity,
                index,
                shard,
            } => {
                let b = self.blocks.entry(first).or_insert_with(|| Block {
                    data,
                    parity,
                    shards: BTreeMap::new(),
                    at: now,
                });
                // Parities that disagree on the block's shape or size are foreign.
                let same_size = b
                    .shards
                    .values()
                    .next()
                    .is_none_or(|s| s.len() == shard.len());
                if b.data == data && b.parity == parity && same_size {
                    b.shards.insert(index, shard);
                    touched_block = Some(first);
                }
                if self.blocks.len() > MAX_WAITING {
                    if let Some(&oldest) =
                        self.blocks.iter().min_by_key(|(_, b)| b.at).map(|(k, _)| k)
                    {
                        self.blocks.remove(&oldest);
                    }
                }
            }
        }
        self.settle(now, &mut d, touched_block);
        d
    }

    fn insert(&mut self, now: Duration, seq: u64, payload: Bytes) {
        self.store.insert(seq, payload);
        self.order.push_back((now, seq));
        while self.order.len() > MAX_STORED {
            if let Some((_, s)) = self.order.pop_front() {
                self.forget(s);
            }
        }
    }

    /// Decode until nothing more comes out: XOR frames with one constituent missing,
    /// then blocks with as many parities as missing data ADUs; repeat while either
    /// recovers something.
    ///
    /// A block's decodability changes only when it gets a shard (`touched_block`) or
    /// when an ADU it covers becomes available, so only those blocks are tried: trying
    /// every waiting block on every frame made each frame cost blocks × block length.
    fn settle(&mut self, now: Duration, d: &mut Decoded, touched_block: Option<u64>) {
        let mut candidates: BTreeSet<u64> = touched_block.into_iter().collect();
        let mut seen = 0;
        loop {
            let mut progress = false;
            let mut i = 0;
            while i < self.waiting.len() {
                let w = &self.waiting[i];
                if w.seqs.iter().any(|&s| self.is_forgotten(s)) {
                    // One of its constituents can no longer be told apart: useless.
                    self.waiting.swap_remove(i);
                    continue;
                }
                let mut missing = w.seqs.iter().filter(|s| !self.store.contains_key(s));
                let (first, second) = (missing.next().copied(), missing.next());
                match (first, second) {
                    (None, _) => {
                        self.waiting.swap_remove(i);
                    }
                    (Some(gone), None) => {
                        let w = self.waiting.swap_remove(i);
                        if let Some(p) = self.peel(&w, gone) {
                            self.insert(now, gone, p.clone());
                            d.new.push((gone, p, true));
                            progress = true;
                        }
                    }
                    _ => i += 1,
                }
            }
            for &(seq, _, _) in &d.new[seen..] {
                let lowest = seq.saturating_sub(MAX_BLOCK_DATA as u64 - 1);
                candidates.extend(self.blocks.range(lowest..=seq).map(|(&first, _)| first));
            }
            seen = d.new.len();
            for first in std::mem::take(&mut candidates) {
                for (seq, p) in self.try_block(first) {
                    if !self.store.contains_key(&seq) && !self.is_forgotten(seq) {
                        self.insert(now, seq, p.clone());
                        d.new.push((seq, p, true));
                        progress = true;
                    }
                }
            }
            if !progress {
                break;
            }
        }
    }

    /// The one missing constituent of `w`, or `None` if the frame is inconsistent.
    fn peel(&self, w: &Waiting, gone: u64) -> Option<Bytes> {
        let mut acc = w.payload.to_vec();
        let mut len = w.len_xor;
        for s in w.seqs.iter().filter(|&&s| s != gone) {
            let p = &self.store[s];
            if p.len() > acc.len() {
                return None;
            }
            xor_into(&mut acc, p);
            len ^= p.len() as u16;
        }
        let len = usize::from(len);
        if len > acc.len() {
            return None;
        }
        acc.truncate(len);
        Some(acc.into())
    }

    /// Recover a block's missing data ADUs if enough parities are here. A block that is
    /// complete or decoded is forgotten.
    fn try_block(&mut self, first: u64) -> Vec<(u64, Bytes)> {
        let Some(b) = self.blocks.get(&first) else {
            return Vec::new();
        };
        let seqs = first..first.saturating_add(u64::from(b.data));
        let missing = seqs.clone().filter(|s| !self.store.contains_key(s)).count();
        if missing == 0 {
            self.blocks.remove(&first);
            return Vec::new();
        }
        if b.shards.len() < missing {
            return Vec::new();
        }
        let b = self.blocks.remove(&first).expect("present");
        let present: Vec<(usize, &Bytes)> = seqs
            .enumerate()
            .filter_map(|(i, s)| self.store.get(&s).map(|p| (i, p)))
            .collect();
        block::decode(first, b.data, b.parity, &present, &b.shards).unwrap_or_default()
    }

    fn expire(&mut self, now: Duration) {
        let old = |at: Duration| now.saturating_sub(at) > DECODE_WINDOW;
        while self.order.front().is_some_and(|&(at, _)| old(at)) {
            if let Some((_, s)) = self.order.pop_front() {
                self.forget(s);
            }
        }
        let store = &self.store;
        let mut undecodable = 0;
        self.waiting.retain(|w| {
            let keep = !old(w.at);
            if !keep && w.seqs.iter().filter(|s| !store.contains_key(s)).count() >= 2 {
                undecodable += 1;
            }
            keep
        });
        self.undecodable += undecodable;
        self.blocks.retain(|_, b| !old(b.at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::xor::xor_all;
    use proptest::prelude::*;

    fn payload(seq: u64) -> Bytes {
        Bytes::from(vec![seq as u8 ^ 0x5a; 1 + (seq as usize * 7) % 40])
    }

    fn xor_frame(seqs: &[u64]) -> Frame {
        let (p, len_xor) = xor_all(
            seqs.iter()
                .map(|&s| payload(s))
                .collect::<Vec<_>>()
                .iter()
                .map(|b| &b[..]),
        );
        Frame::Xor {
            seqs: seqs.to_vec(),
            len_xor,
            payload: p.into(),
        }
    }

    fn data(seq: u64) -> Frame {
        Frame::Data {
            seq,
            payload: payload(seq),
        }
    }

    #[test]
    fn a_chain_of_decodes_recovers_every_link() {
        // 1 and 2 lost: {1,2} waits, {0,1} yields 1, which unlocks {1,2} for 2.
        let mut d = Decoder::default();
        let t = Duration::ZERO;
        d.on_frame(t, data(0));
        d.on_frame(t, data(3));
        assert!(d.on_frame(t, xor_frame(&[1, 2])).new.is_empty());
        let out = d.on_frame(t, xor_frame(&[0, 1]));
        let got: Vec<(u64, Bytes)> = out
            .new
            .into_iter()
            .map(|(s, p, r)| {
                assert!(r);
                (s, p)
            })
            .collect();
        assert_eq!(got, vec![(1, payload(1)), (2, payload(2))]);
        assert!(d.on_frame(t, data(2)).duplicate);
    }

    #[test]
    fn a_coded_adu_with_two_missing_waits_then_expires() {
        let mut d = Decoder::default();
        d.on_frame(Duration::ZERO, xor_frame(&[4, 5]));
        let late = DECODE_WINDOW + Duration::from_millis(1);
        assert!(d
            .on_frame(late, data(4))
            .new
            .iter()
            .all(|(s, _, _)| *s == 4));
        assert!(!d.has(5));
    }

    #[test]
    fn a_late_coded_adu_does_not_deliver_a_forgotten_adu_again() {
        // 0 and 1 arrive and are delivered; 1 s later they have left the store, and a
        // coded ADU over {0, 1, 2} comes in behind a long queue with 2 already here.
        let mut d = Decoder::default();
        assert_eq!(d.on_frame(Duration::ZERO, data(0)).new.len(), 1);
        assert_eq!(d.on_frame(Duration::ZERO, data(1)).new.len(), 1);
        let late = DECODE_WINDOW + Duration::from_millis(5);
        assert_eq!(d.on_frame(late, data(2)).new.len(), 1);
        assert!(!d.has(0) && !d.has(1));
        let out = d.on_frame(late, xor_frame(&[1, 2]));
        assert!(out.new.is_empty(), "{:?}", out.new);
        // Newer losses are still recovered.
        let out = d.on_frame(late, xor_frame(&[2, 3]));
        let got: Vec<u64> = out.new.iter().map(|(s, _, _)| *s).collect();
        assert_eq!(got, [3]);
    }

    #[test]
    fn an_inconsistent_coded_adu_recovers_nothing() {
        let mut d = Decoder::default();
        d.on_frame(Duration::ZERO, data(0));
        let bad = Frame::Xor {
            seqs: vec![0, 1],
            len_xor: 0xffff,
            payload: Bytes::from_static(b"xyz"),
        };
        assert_eq!(d.on_frame(Duration::ZERO, bad).new.len(), 0);
        assert!(!d.has(1));
    }

    /// The parity frames of the block of `data` ADUs from `first`.
    fn parity_frames(first: u64, data: u8, parity: u8) -> Vec<Frame> {
        let payloads: Vec<Bytes> = (first..first + u64::from(data)).map(payload).collect();
        let refs: Vec<&[u8]> = payloads.iter().map(|p| &p[..]).collect();
        block::encode(&refs, usize::from(parity))
            .expect("encodable")
            .into_iter()
            .enumerate()
            .map(|(i, shard)| Frame::Parity {
                first,
                data,
                parity,
                index: i as u8,
                shard: shard.into(),
            })
            .collect()
    }

    fn recovered(d: Decoded) -> Vec<(u64, Bytes)> {
        d.new
            .into_iter()
            .filter(|(_, _, r)| *r)
            .map(|(s, p, _)| (s, p))
            .collect()
    }

    #[test]
    fn a_block_waiting_on_too_many_losses_decodes_when_a_data_adu_arrives() {
        // Block 10..14 with one parity: 12 and 13 missing is one too many, until 12 comes.
        let mut d = Decoder::default();
        let t = Duration::ZERO;
        d.on_frame(t, data(10));
        d.on_frame(t, data(11));
        let [shard] = parity_frames(10, 4, 1).try_into().expect("one shard");
        assert!(d.on_frame(t, shard).new.is_empty());
        assert_eq!(recovered(d.on_frame(t, data(12))), vec![(13, payload(13))]);
    }

    #[test]
    fn an_adu_rebuilt_from_an_xor_completes_a_block_in_the_same_frame() {
        // Block 0..4 with one parity, 2 and 3 missing; the XOR of {1, 2} gives 2, which
        // leaves the block one short: it yields 3.
        let mut d = Decoder::default();
        let t = Duration::ZERO;
        d.on_frame(t, data(0));
        d.on_frame(t, data(1));
        let [shard] = parity_frames(0, 4, 1).try_into().expect("one shard");
        assert!(d.on_frame(t, shard).new.is_empty());
        let got = recovered(d.on_frame(t, xor_frame(&[1, 2])));
        assert_eq!(got, vec![(2, payload(2)), (3, payload(3))]);
    }

    #[test]
    fn a_block_far_from_the_new_adu_is_left_alone_but_still_decodes_later() {
        // Many undecodable blocks ahead of a decodable one: the decodable one is found
        // when its own ADU arrives, and the others stay undecoded.
        let mut d = Decoder::default();
        let t = Duration::ZERO;
        for first in (1000..1000 + 64 * 200).step_by(200) {
            let [shard] = parity_frames(first, 64, 1).try_into().expect("one shard");
            assert!(d.on_frame(t, shard).new.is_empty());
        }
        let [shard] = parity_frames(0, 2, 1).try_into().expect("one shard");
        assert!(d.on_frame(t, shard).new.is_empty());
        assert_eq!(recovered(d.on_frame(t, data(1))), vec![(0, payload(0))]);
        assert!(!d.has(1000));
    }

    proptest! {
        /// Random losses over random coded ADUs: whatever a peeling decoder can recover
        /// (computed independently here, by repeated passes over all coded ADUs) is
        /// recovered, byte for byte, whatever the arrival order.
        #[test]
        fn everything_peelable_is_recovered(
            lost in proptest::collection::vec(any::<bool>(), 24),
            codes in proptest::collection::vec(proptest::collection::btree_set(0u64..24, 1..5), 1..20),
            coded_first in any::<bool>(),
        ) {
            let mut have: std::collections::BTreeSet<u64> =
                (0..24).filter(|&s| !lost[s as usize]).collect();
            loop {
                let before = have.len();
                for c in &codes {
                    let missing: Vec<_> = c.iter().filter(|s| !have.contains(s)).collect();
                    if missing.len() == 1 {
                        have.insert(*missing[0]);
                    }
                }
                if have.len() == before { break; }
            }
            let mut d = Decoder::default();
            let t = Duration::ZERO;
            let mut frames: Vec<Frame> = codes.iter().map(|c| xor_frame(&c.iter().copied().collect::<Vec<_>>())).collect();
            let datas: Vec<Frame> = (0..24).filter(|&s| !lost[s as usize]).map(data).collect();
            if coded_first { frames.extend(datas); } else { frames.splice(0..0, datas); }
            let mut got = std::collections::BTreeMap::new();
            for f in frames {
                for (s, p, _) in d.on_frame(t, f).new {
                    prop_assert!(got.insert(s, p).is_none(), "{} twice", s);
                }
            }
            prop_assert_eq!(got.keys().copied().collect::<std::collections::BTreeSet<_>>(), have);
            for (s, p) in got {
                prop_assert_eq!(p, payload(s));
            }
        }
    }
}
