//! A recovery stream's sender: tunnel sequence numbers, W and r, and what each mode adds
//! (coded ADUs at spare opportunities, K% FEC, retransmissions, block parities).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use horde_policy::ChannelId;
use rand::RngCore;

use super::block;
use super::config::RecoveryMode;
use super::header;
use super::window::{Window, MAX_AGE};

/// Most reported losses OEC keeps waiting for a spare opportunity; the oldest go first.
const MAX_REPAIRS: usize = 1024;

/// What an ADU of a recovery stream is, by its session ADU id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The first copy of data ADU `seq` (its recovery sequence number).
    Data(u64),
    /// An XOR-coded ADU of this many constituents (its degree).
    Coded(usize),
    /// A second copy of data ADU `seq`, after the first was reported lost.
    Retransmit(u64),
    /// A parity shard of the block code.
    Parity,
    /// A report of the receiver's path estimates, going back to the peer.
    Report,
}

/// An ADU the recovery layer wants queued on its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// What it is, for the bookkeeping when it is sent and resolved.
    pub kind: Kind,
    /// The framed ADU (recovery header and payload).
    pub payload: Bytes,
}

#[derive(Debug)]
struct SealedBlock {
    first: u64,
    parity: Option<Vec<Vec<u8>>>,
    payloads: Vec<Bytes>,
    next_parity: usize,
    resolved: usize,
    sealed_at: Duration,
}

#[derive(Debug, Default)]
struct Blocks {
    open_first: u64,
    open: Vec<Bytes>,
    sealed: VecDeque<SealedBlock>,
}

/// The send side of a recovery stream: frames data ADUs with sequence numbers, tracks
/// the window W of those in flight, and decides what coded, parity or repeated ADUs to
/// add, as the stream's [`RecoveryMode`] says.
#[derive(Debug)]
pub struct Sender {
    mode: RecoveryMode,
    next_seq: u64,
    window: Window,
    /// FEC: data ADUs transmitted since the last coded one.
    fec_since: Vec<u64>,
    retransmitted: HashMap<u64, ()>,
    blocks: Blocks,
    /// Data ADUs first named by a coded ADU, and their summed waits (instrumentation,
    /// taken by the layer into its statistics).
    pub(crate) first_covered: (u64, Duration),
    /// OEC: data ADUs the peer reported lost, with their payloads and when they were
    /// queued, oldest first: the next spare opportunities carry them first.
    repairs: VecDeque<(u64, Bytes, Duration)>,
}

impl Sender {
    /// A sender for `mode`, starting at sequence number 0.
    pub fn new(mode: RecoveryMode) -> Self {
        Self {
            mode,
            next_seq: 0,
            window: Window::default(),
            fec_since: Vec::new(),
            retransmitted: HashMap::new(),
            blocks: Blocks::default(),
            first_covered: (0, Duration::ZERO),
            repairs: VecDeque::new(),
        }
    }

    /// The window W of data ADUs in flight (OEC's coding decisions read it).
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// Number and frame a data ADU queued at `now`.
    pub fn frame_data(&mut self, now: Duration, payload: Bytes) -> (u64, Bytes) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let framed = header::encode_data(seq, &payload);
        if let RecoveryMode::Block { data } = self.mode {
            self.blocks.open.push(payload.clone());
            if self.blocks.open.len() >= data {
                self.seal(now);
            }
        }
        self.window.queue(now, seq, payload);
        (seq, framed)
    }

    /// Data `seq`, just framed, is a copy of a data ADU already declared lost to the
    /// application (a retransmission carried over from an earlier session): a loss of it
    /// asks for no further copy.
    pub fn mark_retransmitted(&mut self, seq: u64) {
        self.retransmitted.insert(seq, ());
    }

    /// Data ADU `seq` left in packet `packet` (`(channel, packet sequence)`).
    pub(crate) fn note_packet(&mut self, seq: u64, packet: (ChannelId, u64)) {
        self.window.set_packet(seq, packet);
    }

    /// An ADU of this stream left on a path whose loss estimate is `p`. May ask for a
    /// K% FEC coded ADU.
    pub fn on_transmit(&mut self, kind: Kind, p: f64, out: &mut Vec<Outgoing>) {
        match kind {
            Kind::Data(seq) => {
                self.window.on_data_sent(seq, p);
                if let RecoveryMode::Fec { percent } = self.mode {
                    self.fec_since.push(seq);
                    let every = (100.0 / percent).round().max(1.0) as usize;
                    if self.fec_since.len() >= every {
                        self.fec_coded(out);
                    }
                }
            }
            // OEC's rule (ii) was applied when the coded ADU was made (see `spare`).
            Kind::Coded(_) | Kind::Retransmit(_) | Kind::Parity | Kind::Report => {}
        }
    }

    /// The XOR of the data sent since the last coded ADU that are still unresolved.
    fn fec_coded(&mut self, out: &mut Vec<Outgoing>) {
        let mut seqs: Vec<u64> = self
            .fec_since
            .drain(..)
            .filter(|&s| self.window.contains(s))
            .collect();
        seqs.sort_unstable();
        // At most one frame's worth, the newest.
        let skip = seqs.len().saturating_sub(header::MAX_DEGREE);
        let seqs: Vec<u64> = seqs[skip..].to_vec();
        if seqs.is_empty() || seqs[seqs.len() - 1] - seqs[0] > header::MAX_SPAN {
            return;
        }
        let c = self.window.xor_of(seqs);
        out.push(Outgoing {
            kind: Kind::Coded(c.seqs.len()),
            payload: header::encode_xor(&c.seqs, c.len_xor, &c.payload),
        });
    }

    /// Feedback: the ADU was acknowledged or declared lost. Retransmission mode resends
    /// a lost data ADU once.
    pub(crate) fn on_resolved(&mut self, kind: Kind, acked: bool, out: &mut Vec<Outgoing>) {
        let seq = match kind {
            Kind::Data(seq) | Kind::Retransmit(seq) => seq,
            Kind::Coded(_) | Kind::Parity | Kind::Report => return,
        };
        if self.mode == RecoveryMode::Retransmit
            && !acked
            && self.retransmitted.insert(seq, ()).is_none()
        {
            if let Some(p) = self.window.payload(seq) {
                out.push(Outgoing {
                    kind: Kind::Retransmit(seq),
                    payload: header::encode_data(seq, p),
                });
                return; // stays in W until the copy is resolved
            }
        }
        if self.mode == RecoveryMode::Oec && !acked && matches!(kind, Kind::Data(_)) {
            // A reported loss is an ADU whose presence probability is 0. The greedy
            // encoding's best coded packet is then that ADU alone (degree 1, expected
            // yield 1 - p, no XOR with ADUs the receiver may already hold), and it still
            // goes only into spare capacity (`docs/recovery.md`, "Known losses").
            if let (Some(p), Some(at)) = (self.window.payload(seq), self.window.queued_at(seq)) {
                // Without spare capacity nothing takes them: keep only what the receiver
                // could still use (queued within MAX_AGE of this one), and a bounded number.
                let horizon = at.saturating_sub(MAX_AGE);
                self.repairs.retain(|(_, _, t)| *t >= horizon);
                if self.repairs.len() >= MAX_REPAIRS {
                    self.repairs.pop_front();
                }
                self.repairs.push_back((seq, p.clone(), at));
            }
        }
        self.retransmitted.remove(&seq);
        self.window.on_resolved(seq);
        if let Some(b) = self
            .blocks
            .sealed
            .iter_mut()
            .find(|b| (b.first..b.first + b.payloads.len() as u64).contains(&seq))
        {
            b.resolved += 1;
        }
    }

    fn seal(&mut self, now: Duration) {
        if self.blocks.open.is_empty() {
            return;
        }
        let payloads = std::mem::take(&mut self.blocks.open);
        let first = self.blocks.open_first;
        self.blocks.open_first = first + payloads.len() as u64;
        self.blocks.sealed.push_back(SealedBlock {
            first,
            parity: None,
            payloads,
            next_parity: 0,
            resolved: 0,
            sealed_at: now,
        });
    }

    /// Whether this mode's coded ADUs go into spare capacity (and so defer to data).
    pub(crate) fn codes_into_spare(&self) -> bool {
        matches!(self.mode, RecoveryMode::Oec | RecoveryMode::Block { .. })
    }

    /// Whether a spare transmission opportunity would be used: for OEC, while W holds
    /// data and a coded packet is still expected to rebuild something.
    pub(crate) fn wants_spare(&self) -> bool {
        match self.mode {
            RecoveryMode::Oec => !self.repairs.is_empty() || self.window.worth_coding(),
            RecoveryMode::Block { .. } => {
                !self.blocks.open.is_empty()
                    || self
                        .blocks
                        .sealed
                        .iter()
                        .any(|b| b.next_parity < b.payloads.len() && b.resolved < b.payloads.len())
            }
            _ => false,
        }
    }

    /// Fill `budget` bytes of spare capacity with OEC coded ADUs or block parities, each
    /// costing its frame plus `per_adu` bytes of packet header. One more is made while
    /// any budget is left (the paper's rule: a coded packet goes when the queue is
    /// empty, whatever its size).
    ///
    /// OEC applies rule (ii) to r as it makes each coded ADU, with W's mean path loss
    /// for `p` (the path is the scheduler's choice, made later), and stops once a
    /// further one is not worth sending ([`Window::worth_coding`]).
    pub(crate) fn spare(
        &mut self,
        now: Duration,
        budget: usize,
        per_adu: usize,
        rng: &mut dyn RngCore,
        out: &mut Vec<Outgoing>,
    ) {
        self.window.expire(now);
        let mut left = budget;
        match self.mode {
            RecoveryMode::Oec => {
                // Repairs of reported losses first, while the receiver can still use them.
                self.repairs
                    .retain(|(_, _, at)| now.saturating_sub(*at) <= MAX_AGE);
                while left > 0 {
                    let Some((seq, p, _)) = self.repairs.pop_front() else {
                        break;
                    };
                    let payload = header::encode_xor(&[seq], p.len() as u16, &p);
                    left = left.saturating_sub(payload.len() + per_adu);
                    out.push(Outgoing {
                        kind: Kind::Coded(1),
                        payload,
                    });
                }
                while left > 0 && self.window.worth_coding() {
                    let p = self.window.mean_p();
                    let Some(c) = self.window.code(rng) else {
                        break;
                    };
                    self.window.on_coded_sent(c.seqs.len(), p);
                    let (n, wait) = self.window.note_coded(now, &c.seqs);
                    self.first_covered.0 += n;
                    self.first_covered.1 += wait;
                    let payload = header::encode_xor(&c.seqs, c.len_xor, &c.payload);
                    left = left.saturating_sub(payload.len() + per_adu);
                    out.push(Outgoing {
                        kind: Kind::Coded(c.seqs.len()),
                        payload,
                    });
                }
            }
            RecoveryMode::Block { .. } => {
                self.seal(now);
                while left > 0 {
                    let Some(p) = self.next_parity(now) else {
                        break;
                    };
                    left = left.saturating_sub(p.len() + per_adu);
                    out.push(Outgoing {
                        kind: Kind::Parity,
                        payload: p,
                    });
                }
            }
            _ => {}
        }
    }

    fn next_parity(&mut self, now: Duration) -> Option<Bytes> {
        let sealed = &mut self.blocks.sealed;
        sealed.retain(|b| {
            now.saturating_sub(b.sealed_at) <= MAX_AGE && b.resolved < b.payloads.len()
        });
        let b = sealed
            .iter_mut()
            .find(|b| b.next_parity < b.payloads.len())?;
        let n = b.payloads.len();
        if b.parity.is_none() {
            let refs: Vec<&[u8]> = b.payloads.iter().map(|p| &p[..]).collect();
            b.parity = Some(block::encode(&refs, n)?);
        }
        let i = b.next_parity;
        b.next_parity += 1;
        let shard = &b.parity.as_ref().expect("encoded")[i];
        Some(header::encode_parity(
            b.first, n as u8, n as u8, i as u8, shard,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::decoder::Decoder;
    use crate::recovery::window::MIN_YIELD;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    const T: Duration = Duration::ZERO;

    #[test]
    fn fec_codes_once_per_hundred_over_k_data_adus() {
        for (percent, every) in [(10.0, 10usize), (100.0, 1), (25.0, 4)] {
            let mut s = Sender::new(RecoveryMode::Fec { percent });
            let mut out = Vec::new();
            for i in 0..40u64 {
                let (seq, _) = s.frame_data(T, Bytes::from(vec![i as u8; 5]));
                s.on_transmit(Kind::Data(seq), 0.0, &mut out);
            }
            assert_eq!(out.len(), 40 / every, "{percent}%");
            assert!(out.iter().all(|o| o.kind == Kind::Coded(every)));
        }
    }

    #[test]
    fn retransmission_resends_a_lost_adu_once() {
        let mut s = Sender::new(RecoveryMode::Retransmit);
        let mut out = Vec::new();
        let (seq, framed) = s.frame_data(T, Bytes::from_static(b"abc"));
        s.on_transmit(Kind::Data(seq), 0.1, &mut out);
        s.on_resolved(Kind::Data(seq), false, &mut out);
        assert_eq!(
            out,
            vec![Outgoing {
                kind: Kind::Retransmit(seq),
                payload: framed
            }]
        );
        s.on_resolved(Kind::Retransmit(seq), false, &mut out);
        assert_eq!(out.len(), 1, "only once");
        assert!(s.window().is_empty());
    }

    #[test]
    fn oec_repairs_a_reported_loss_alone_at_the_next_spare_opportunity() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut s = Sender::new(RecoveryMode::Oec);
        let mut out = Vec::new();
        let payloads: Vec<Bytes> = (0..4u8)
            .map(|i| Bytes::from(vec![i + 1; 50 + usize::from(i)]))
            .collect();
        let mut framed = Vec::new();
        for p in &payloads {
            let (seq, f) = s.frame_data(T, p.clone());
            s.on_transmit(Kind::Data(seq), 0.05, &mut out);
            framed.push(f);
        }
        // Code W until a further coded ADU is not worth it.
        s.spare(T, 1 << 30, 40, &mut rng, &mut out);
        assert!(!s.wants_spare());
        out.clear();
        for seq in [0, 1, 3] {
            s.on_resolved(Kind::Data(seq), true, &mut out);
        }
        assert!(!s.wants_spare(), "acks ask for nothing");
        s.on_resolved(Kind::Data(2), false, &mut out);
        assert!(out.is_empty(), "a repair waits for spare capacity");
        assert!(s.wants_spare(), "a reported loss asks for spare capacity");
        // A budget of one byte lets the repair go, alone.
        s.spare(Duration::from_millis(100), 1, 40, &mut rng, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].kind, Kind::Coded(1));
        // The receiver holds 0, 1 and 3 and rebuilds 2 from the repair.
        let mut d = Decoder::default();
        for i in [0, 1, 3] {
            d.on_frame(T, header::decode(&framed[i]).unwrap());
        }
        let got = d.on_frame(T, header::decode(&out[0].payload).unwrap()).new;
        assert_eq!(got, vec![(2, payloads[2].clone(), true)]);
        assert!(!s.wants_spare(), "one repair per reported loss");
    }

    #[test]
    fn a_repair_the_receiver_could_no_longer_use_is_not_sent() {
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let mut s = Sender::new(RecoveryMode::Oec);
        let mut out = Vec::new();
        let (seq, _) = s.frame_data(T, Bytes::from_static(b"late"));
        s.on_transmit(Kind::Data(seq), 0.05, &mut out);
        s.on_resolved(Kind::Data(seq), false, &mut out);
        assert!(s.wants_spare());
        let later = MAX_AGE + Duration::from_millis(1);
        s.spare(later, 1 << 20, 40, &mut rng, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert!(!s.wants_spare());
    }

    #[test]
    fn repairs_waiting_without_spare_capacity_stay_bounded() {
        let mut s = Sender::new(RecoveryMode::Oec);
        let mut out = Vec::new();
        let lose = |s: &mut Sender, at: Duration, out: &mut Vec<Outgoing>| {
            let (seq, _) = s.frame_data(at, Bytes::from_static(b"x"));
            s.on_transmit(Kind::Data(seq), 0.05, out);
            s.on_resolved(Kind::Data(seq), false, out);
        };
        for _ in 0..(MAX_REPAIRS + 100) {
            lose(&mut s, T, &mut out);
        }
        assert_eq!(s.repairs.len(), MAX_REPAIRS);
        assert_eq!(s.repairs.front().unwrap().0, 100, "the oldest went first");
        // A loss more than MAX_AGE after them leaves only itself.
        lose(&mut s, MAX_AGE + Duration::from_millis(1), &mut out);
        assert_eq!(s.repairs.len(), 1);
    }

    #[test]
    fn oec_uses_spare_bytes_only_while_w_holds_data() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut s = Sender::new(RecoveryMode::Oec);
        let mut out = Vec::new();
        assert!(!s.wants_spare());
        let (a, _) = s.frame_data(T, Bytes::from_static(b"one"));
        let (b, _) = s.frame_data(T, Bytes::from_static(b"two!"));
        s.on_transmit(Kind::Data(a), 0.3, &mut out);
        s.on_transmit(Kind::Data(b), 0.3, &mut out);
        assert!(out.is_empty());
        assert!(s.wants_spare());
        // A budget of one byte still lets one coded ADU go (the queue is empty).
        s.spare(T, 1, 40, &mut rng, &mut out);
        assert_eq!(out.len(), 1);
        s.on_resolved(Kind::Data(a), true, &mut out);
        s.on_resolved(Kind::Data(b), true, &mut out);
        assert!(!s.wants_spare());
        out.clear();
        s.spare(T, 10_000, 40, &mut rng, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn oec_stops_coding_once_a_coded_adu_would_yield_too_little() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for (n, p) in [(1usize, 0.05), (10, 0.05), (30, 0.2), (5, 0.5)] {
            let mut s = Sender::new(RecoveryMode::Oec);
            let mut out = Vec::new();
            for i in 0..n {
                let (seq, _) = s.frame_data(T, Bytes::from(vec![i as u8; 100]));
                s.on_transmit(Kind::Data(seq), p, &mut out);
            }
            // A budget far above what coding needs: the yield, not the budget, stops it.
            s.spare(T, 1 << 30, 40, &mut rng, &mut out);
            let coded = out.len();
            assert!(coded >= 1, "n {n} p {p}");
            assert!(!s.wants_spare(), "n {n} p {p}");
            assert!(s.window().next_yield(p) < MIN_YIELD, "n {n} p {p}");
            // Every coded ADU but the last was worth at least MIN_YIELD, so the count
            // is bounded by the expected losses over MIN_YIELD, far below the budget.
            assert!(
                (coded as f64) < 1.0 + n as f64 * p / MIN_YIELD,
                "n {n} p {p}: {coded} coded"
            );
            // Unacknowledged ADUs in W keep their credit: one ack does not restart coding.
            let before = s.window().r();
            s.on_resolved(Kind::Data(0), true, &mut out);
            if n > 1 {
                assert_eq!(s.window().r(), before);
                assert!(!s.wants_spare(), "n {n} p {p}");
            }
        }
    }

    /// Send `n` data ADUs, `per_packet` to a datagram, with r driven near 1 (the paths'
    /// reported loss small), lose the datagrams in `lost`, then let `coded` coded ADUs
    /// through: how many of the lost ADUs the receiver rebuilds.
    fn rebuilt_after_losing(n: u64, per_packet: u64, lost: &[u64], coded: usize) -> usize {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut s = Sender::new(RecoveryMode::Oec);
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for i in 0..n {
            let (seq, framed) = s.frame_data(T, Bytes::from(vec![i as u8 + 1; 20 + i as usize]));
            let packet = seq / per_packet;
            s.note_packet(seq, (ChannelId::new(0), packet));
            s.on_transmit(Kind::Data(seq), 0.001, &mut out);
            if !lost.contains(&packet) {
                d.on_frame(T, header::decode(&framed).unwrap());
            }
        }
        let mut rebuilt = 0;
        for _ in 0..coded {
            let c = s.window().code(&mut rng).unwrap();
            s.window.on_coded_sent(c.seqs.len(), 0.001);
            s.window.note_coded(T, &c.seqs);
            let f = header::encode_xor(&c.seqs, c.len_xor, &c.payload);
            rebuilt += d.on_frame(T, header::decode(&f).unwrap()).new.len();
        }
        rebuilt
    }

    #[test]
    fn one_lost_datagram_of_packed_adus_is_rebuilt_whole() {
        // Eight ADUs in two datagrams of four; the first is lost. Each coded ADU takes at
        // most one ADU of a datagram, so every one of them has one constituent missing.
        assert_eq!(rebuilt_after_losing(8, 4, &[0], 12), 4);
    }

    #[test]
    fn two_losses_in_a_small_window_are_both_rebuilt() {
        // Eight datagrams of one ADU, two lost in a burst: XORs of all of W (identical,
        // two missing each) rebuild nothing; half-width ones peel both.
        assert_eq!(rebuilt_after_losing(8, 1, &[2, 3], 12), 2);
    }

    #[test]
    fn coded_adus_take_at_most_one_adu_of_a_datagram() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut s = Sender::new(RecoveryMode::Oec);
        let mut out = Vec::new();
        for i in 0..30u64 {
            let (seq, _) = s.frame_data(T, Bytes::from(vec![i as u8; 10]));
            s.note_packet(seq, (ChannelId::new((i % 2) as u8), i / 6));
            s.on_transmit(Kind::Data(seq), 0.001, &mut out);
        }
        for _ in 0..50 {
            let c = s.window().code(&mut rng).unwrap();
            let mut packets: Vec<(u64, u64)> = c.seqs.iter().map(|&q| (q % 2, q / 6)).collect();
            let n = packets.len();
            packets.sort_unstable();
            packets.dedup();
            assert_eq!(packets.len(), n, "{:?}", c.seqs);
            // 10 datagrams (5 packet numbers on each of 2 channels): at most 5 wide.
            assert!((1..=5).contains(&n), "{n}");
        }
    }

    #[test]
    fn oec_spends_the_budget_in_frame_bytes() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut s = Sender::new(RecoveryMode::Oec);
        let mut out = Vec::new();
        // Heavy loss keeps every coded ADU worth sending, so only the budget stops it.
        for i in 0..4u8 {
            let (seq, _) = s.frame_data(T, Bytes::from(vec![i; 200]));
            s.on_transmit(Kind::Data(seq), 0.9, &mut out);
        }
        s.spare(T, 1000, 40, &mut rng, &mut out);
        let spent: usize = out.iter().map(|o| o.payload.len() + 40).sum();
        assert!(out.len() >= 2, "{}", out.len());
        let last = out.last().unwrap().payload.len() + 40;
        assert!(spent >= 1000 && spent - last < 1000, "spent {spent}");
    }

    #[test]
    fn block_parities_at_spare_slots_recover_a_block() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut s = Sender::new(RecoveryMode::Block { data: 4 });
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let mut frames = Vec::new();
        for i in 0..6u8 {
            let (seq, f) = s.frame_data(T, Bytes::from(vec![i; 3 + usize::from(i)]));
            s.on_transmit(Kind::Data(seq), 0.0, &mut out);
            frames.push(f);
        }
        // A full block (0..4) and an open one (4..6) sealed by the opportunity.
        s.spare(T, 1 << 20, 40, &mut rng, &mut out);
        assert_eq!(out.len(), 6);
        // Lose 1, 2 and 5; two parities of the first block and one of the second suffice.
        for (i, f) in frames.iter().enumerate() {
            if ![1, 2, 5].contains(&i) {
                d.on_frame(T, header::decode(f).unwrap());
            }
        }
        let mut got = Vec::new();
        for o in [&out[0], &out[2], &out[4]] {
            got.extend(d.on_frame(T, header::decode(&o.payload).unwrap()).new);
        }
        let seqs: Vec<u64> = got.iter().map(|(s, _, _)| *s).collect();
        assert_eq!(seqs.len(), 3);
        for s in [1u64, 2, 5] {
            let (_, p, rec) = got.iter().find(|(q, _, _)| *q == s).unwrap();
            assert!(rec);
            assert_eq!(p[..], vec![s as u8; 3 + s as usize][..]);
        }
    }
}
