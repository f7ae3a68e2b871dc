//! The OEC sender's window W and its presence probability r (PluriBus §4.2, §5.1).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::ChannelId;
use rand::RngCore;

use super::header::{MAX_DEGREE, MAX_SPAN};
use super::xor::xor_all;

/// Data ADUs older than this leave W even without feedback: the receiver's decode store
/// has forgotten what they would combine with (see `docs/recovery.md`).
pub(crate) const MAX_AGE: Duration = Duration::from_secs(1);
/// Most ADUs W holds; the oldest leave first.
pub(crate) const MAX_LEN: usize = 4096;
/// The least loss rate r assumes of a path. A loss estimate of 0 only says no loss was
/// seen yet; taken literally it makes r = 1, where no coded packet yields anything, and
/// OEC would never protect a path that has merely been lucky so far.
pub(crate) const MIN_LOSS: f64 = 0.01;
/// A coded packet is worth sending only while it is expected to rebuild at least this
/// fraction of a packet. The paper sends one at every spare opportunity, but as r nears
/// 1 each further one yields almost nothing and still costs the path a packet and the
/// reverse link an ack (`docs/recovery.md`, "How much OEC codes").
pub(crate) const MIN_YIELD: f64 = 0.01;

#[derive(Debug, Clone)]
struct Entry {
    payload: Bytes,
    /// Loss estimate of the path it went on, when it went; `None` until transmitted.
    p: Option<f64>,
    queued: Duration,
    /// Coded ADUs sent that named it (instrumentation: was a loss covered?).
    coded: u32,
    /// The packet that carried it, `(channel, packet sequence)`, once known: ADUs packed
    /// into one datagram are lost together.
    packet: Option<(ChannelId, u64)>,
}

/// A coded packet: the XOR of the data ADUs `seqs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coded {
    /// The constituents' sequence numbers, ascending.
    pub seqs: Vec<u64>,
    /// XOR of their payload lengths.
    pub len_xor: u16,
    /// XOR of their payloads, each zero-padded to the longest.
    pub payload: Vec<u8>,
}

/// W holds data ADUs sent and not yet acknowledged or declared lost. `r` is the sender's
/// estimate of the probability that any one of them is at the receiver.
#[derive(Debug, Clone, Default)]
pub struct Window {
    entries: BTreeMap<u64, Entry>,
    /// Number of entries with `p` set: only transmitted ADUs count in |W|.
    sent: usize,
    r: f64,
}

/// Expected number of new ADUs at the receiver from one XOR of `c` of them, each present
/// with probability `r` (Eq. 1): exactly one missing.
pub fn expected_yield(c: usize, r: f64) -> f64 {
    c as f64 * (1.0 - r) * r.powi(c as i32 - 1)
}

/// The widest XOR over `packets` packets of W: half of them, rounded up.
///
/// The paper's degree assumes independent losses, and with r near 1 it asks for more
/// ADUs than W holds; every coded ADU was then the XOR of all of W, identical to the
/// one before, and two losses in W (a burst, or one datagram carrying several ADUs)
/// left every one of them undecodable. Half of W keeps successive coded ADUs different,
/// so two losses fall into different ones often enough for peeling to rebuild both
/// (`docs/recovery.md`, "XOR width").
pub fn width_cap(packets: usize) -> usize {
    // Two or fewer: halving would leave a copy of one of them, covering the other never.
    if packets <= 2 {
        packets.max(1)
    } else {
        packets.div_ceil(2)
    }
}

/// `max(1, floor(-1/ln r))` (§4.2), capped at [`MAX_DEGREE`].
pub fn degree(r: f64) -> usize {
    if r.is_nan() || r <= 0.0 {
        return 1;
    }
    if r >= 1.0 {
        return MAX_DEGREE;
    }
    let c = (-1.0 / r.ln()).floor();
    (c as usize).clamp(1, MAX_DEGREE)
}

impl Window {
    /// `r`: the sender's estimate of the probability that any one ADU of W is at the
    /// receiver, in [0, 1].
    pub fn r(&self) -> f64 {
        self.r
    }

    /// |W|: ADUs transmitted and not yet resolved.
    pub fn len(&self) -> usize {
        self.sent
    }

    /// Whether no transmitted ADU awaits its fate.
    pub fn is_empty(&self) -> bool {
        self.sent == 0
    }

    /// Whether data ADU `seq` is in W or queued to join it.
    pub fn contains(&self, seq: u64) -> bool {
        self.entries.contains_key(&seq)
    }

    /// Remember a data ADU queued for sending (it joins |W| when transmitted).
    pub(crate) fn queue(&mut self, now: Duration, seq: u64, payload: Bytes) {
        self.entries.insert(
            seq,
            Entry {
                payload,
                p: None,
                queued: now,
                coded: 0,
                packet: None,
            },
        );
        while self.entries.len() > MAX_LEN {
            self.pop_oldest();
        }
    }

    /// Rule (i): a data ADU left on a path with loss estimate `p`.
    pub(crate) fn on_data_sent(&mut self, seq: u64, p: f64) {
        let Some(e) = self.entries.get_mut(&seq) else {
            return;
        };
        if e.p.is_some() {
            return; // a retransmission: already counted
        }
        let p = p.clamp(MIN_LOSS, 1.0);
        e.p = Some(p);
        self.sent += 1;
        let n = self.sent as f64;
        self.r = ((n - 1.0) * self.r + (1.0 - p)) / n;
    }

    /// Rule (ii): a coded ADU over `c` data ADUs left on a path with loss estimate `p`.
    pub(crate) fn on_coded_sent(&mut self, c: usize, p: f64) {
        if self.sent == 0 {
            return;
        }
        let n = self.sent as f64;
        let y = expected_yield(c, self.r);
        self.r = ((n * self.r + (1.0 - p.clamp(0.0, 1.0)) * y) / n).clamp(0.0, 1.0);
    }

    /// Data ADU `seq` left in packet `packet` (`(channel, packet sequence)`).
    pub(crate) fn set_packet(&mut self, seq: u64, packet: (ChannelId, u64)) {
        if let Some(e) = self.entries.get_mut(&seq) {
            e.packet.get_or_insert(packet);
        }
    }

    /// The transmitted ADUs of W grouped by the packet that carried them (an ADU whose
    /// packet is unknown is a group of its own), in sequence order within a group.
    fn loss_groups(&self) -> Vec<Vec<u64>> {
        // Packets in (channel, sequence) order, then the ADUs of unknown packet by
        // sequence number (`Ok` sorts before `Err`).
        let mut groups: BTreeMap<Result<(ChannelId, u64), u64>, Vec<u64>> = BTreeMap::new();
        for (&seq, e) in self.entries.iter().filter(|(_, e)| e.p.is_some()) {
            let key = e.packet.ok_or(seq);
            groups.entry(key).or_default().push(seq);
        }
        groups.into_values().collect()
    }

    /// Count one coded ADU made at `now` over `seqs` against each of them. Returns how
    /// many it named for the first time and their summed wait since queueing
    /// (instrumentation: how soon protection follows the data).
    pub(crate) fn note_coded(&mut self, now: Duration, seqs: &[u64]) -> (u64, Duration) {
        let (mut first, mut wait) = (0, Duration::ZERO);
        for s in seqs {
            if let Some(e) = self.entries.get_mut(s) {
                if e.coded == 0 {
                    first += 1;
                    wait += now.saturating_sub(e.queued);
                }
                e.coded = e.coded.saturating_add(1);
            }
        }
        (first, wait)
    }

    /// How many coded ADUs sent so far named data ADU `seq`, while it is in W.
    pub fn coverage(&self, seq: u64) -> Option<u32> {
        self.entries.get(&seq).map(|e| e.coded)
    }

    /// Rule (iii): feedback resolved `seq` (acknowledged or declared lost); it leaves W.
    ///
    /// r is the presence probability of each ADU still in W, and news of one ADU says
    /// nothing new about the others under the paper's equal-probability model, so r
    /// stays as it is; it returns to 0 when W empties. (The paper's "reset r to p" after
    /// its cumulative purge, applied to every per-ADU ack, would throw away the credit of
    /// the coded packets already sent and code the same ADUs again after each ack;
    /// `docs/recovery.md`.)
    pub(crate) fn on_resolved(&mut self, seq: u64) {
        if let Some(e) = self.entries.remove(&seq) {
            if e.p.is_some() {
                self.sent -= 1;
                self.reset_if_empty();
            }
        }
    }

    fn reset_if_empty(&mut self) {
        if self.sent == 0 {
            self.r = 0.0;
        }
    }

    /// Mean loss estimate of the paths W's transmitted ADUs went on.
    pub(crate) fn mean_p(&self) -> f64 {
        let (sum, n) = self
            .entries
            .values()
            .filter_map(|e| e.p)
            .fold((0.0, 0usize), |(s, n), p| (s + p, n + 1));
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    }

    /// The degree the next coded packet would have: `degree(r)`, at most
    /// [`width_cap`] of the packets W's ADUs went in.
    pub(crate) fn next_degree(&self) -> usize {
        self.degree_over(self.loss_groups().len())
    }

    /// `degree(r)` over W's ADUs sent in `packets` packets.
    fn degree_over(&self, packets: usize) -> usize {
        degree(self.r).min(width_cap(packets)).max(1)
    }

    /// Expected new ADUs at the receiver from the next coded packet, if it crosses a
    /// path with loss `p`: `(1 - p) Y(c)`.
    pub(crate) fn next_yield(&self, p: f64) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        (1.0 - p.clamp(0.0, 1.0)) * expected_yield(self.next_degree(), self.r)
    }

    /// Whether a coded packet now is expected to rebuild at least [`MIN_YIELD`] of a
    /// packet, judged with W's mean path loss.
    pub(crate) fn worth_coding(&self) -> bool {
        self.next_yield(self.mean_p()) >= MIN_YIELD
    }

    fn pop_oldest(&mut self) {
        if let Some((_, e)) = self.entries.pop_first() {
            if e.p.is_some() {
                self.sent -= 1;
            }
        }
    }

    /// Drop what is too old to be decoded, and keep W's span within one XOR frame.
    pub(crate) fn expire(&mut self, now: Duration) {
        let mut changed = false;
        while let Some((&first, e)) = self.entries.first_key_value() {
            let last = *self.entries.keys().next_back().expect("non-empty");
            if now.saturating_sub(e.queued) <= MAX_AGE && last - first <= MAX_SPAN {
                break;
            }
            self.pop_oldest();
            changed = true;
        }
        if changed {
            self.reset_if_empty();
        }
    }

    /// When data ADU `seq` of W was queued.
    pub(crate) fn queued_at(&self, seq: u64) -> Option<Duration> {
        self.entries.get(&seq).map(|e| e.queued)
    }

    /// The payload of a data ADU still in W (queued or sent).
    pub(crate) fn payload(&self, seq: u64) -> Option<&Bytes> {
        self.entries.get(&seq).map(|e| &e.payload)
    }

    /// An OEC coded packet over `degree(r)` ADUs of the transmitted part of W, each from
    /// a different packet (at most one ADU of any datagram, so the loss of one datagram
    /// leaves at most one constituent missing). `None` when W is empty.
    ///
    /// The paper draws the constituents uniformly, as every ADU of W is equally likely
    /// present under its model. Here an ADU that fewer coded ADUs have named is less
    /// likely to be at the receiver or recoverable there, so the least-covered packets go
    /// first, at random among equals: a data ADU's first coded ADU is the next one made,
    /// not a draw that may pass it over for several rounds (`docs/recovery.md`,
    /// "Which ADUs a coded ADU covers").
    pub fn code(&self, rng: &mut dyn RngCore) -> Option<Coded> {
        let groups = self.loss_groups();
        if groups.is_empty() {
            return None;
        }
        let c = self.degree_over(groups.len());
        // Each packet offers its least-covered ADU, ranked by that coverage, then by a
        // random draw.
        let mut ranked: Vec<(u32, u32, u64)> = groups
            .iter()
            .map(|members| {
                let seq = *members
                    .iter()
                    .min_by_key(|s| (self.entries[s].coded, rng.next_u32()))
                    .expect("groups are non-empty");
                (self.entries[&seq].coded, rng.next_u32(), seq)
            })
            .collect();
        ranked.sort_unstable();
        let mut seqs: Vec<u64> = ranked[..c].iter().map(|&(_, _, s)| s).collect();
        seqs.sort_unstable();
        Some(self.xor_of(seqs))
    }

    /// The XOR of the given ADUs of W (ascending, all present).
    pub(crate) fn xor_of(&self, seqs: Vec<u64>) -> Coded {
        let (payload, len_xor) = xor_all(seqs.iter().map(|s| &self.entries[s].payload[..]));
        Coded {
            seqs,
            len_xor,
            payload,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn degree_follows_the_rule_and_its_edges() {
        assert_eq!(degree(0.0), 1);
        assert_eq!(degree(0.5), 1);
        assert_eq!(degree(0.6), 1);
        assert_eq!(degree(0.61), 2);
        assert_eq!(degree(0.7), 2);
        assert_eq!(degree(0.8), 4);
        assert_eq!(degree(0.9), 9);
        assert_eq!(degree(0.95), 19);
        assert_eq!(degree(0.999), MAX_DEGREE);
        assert_eq!(degree(1.0), MAX_DEGREE);
        assert_eq!(degree(f64::NAN), 1);
    }

    #[test]
    fn the_degree_is_within_a_hair_of_the_best_yield() {
        for r in [0.65, 0.75, 0.85, 0.9, 0.95] {
            let best = (1..=60).map(|k| expected_yield(k, r)).fold(0.0, f64::max);
            let y = expected_yield(degree(r), r);
            assert!(
                y > best - 0.01 && y <= best + 1e-12,
                "r {r}: {y} against {best}"
            );
        }
        assert!(expected_yield(degree(0.9), 0.9) > expected_yield(3, 0.9) + 0.05);
    }

    #[test]
    fn r_follows_the_three_rules() {
        let mut w = Window::default();
        assert_eq!(w.r(), 0.0);
        for s in 0..3 {
            w.queue(Duration::ZERO, s, Bytes::from(vec![s as u8; 4]));
        }
        w.on_data_sent(0, 0.1);
        assert!(close(w.r(), 0.9));
        w.on_data_sent(1, 0.3);
        assert!(close(w.r(), (0.9 + 0.7) / 2.0));
        // A path that has shown no loss yet is taken to lose MIN_LOSS.
        w.on_data_sent(2, 0.0);
        let r3 = (2.0 * 0.8 + 1.0 - MIN_LOSS) / 3.0;
        assert!(close(w.r(), r3));
        // (ii): W unchanged, r grows by (1 - p) Y(c) / |W|.
        w.on_coded_sent(2, 0.5);
        let r4 = (3.0 * r3 + 0.5 * expected_yield(2, r3)) / 3.0;
        assert!(close(w.r(), r4));
        assert_eq!(w.len(), 3);
        // (iii): resolved ADUs leave; the others keep their presence probability.
        w.on_resolved(0);
        assert_eq!(w.len(), 2);
        assert!(close(w.r(), r4));
        w.on_resolved(1);
        w.on_resolved(2);
        assert!(w.is_empty());
        assert_eq!(w.r(), 0.0);
    }

    #[test]
    fn coded_packets_draw_from_transmitted_adus_only() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut w = Window::default();
        assert!(w.code(&mut rng).is_none());
        for s in 0..40 {
            w.queue(Duration::ZERO, s, Bytes::from(vec![s as u8; 8]));
        }
        assert!(w.code(&mut rng).is_none(), "nothing transmitted yet");
        for s in 0..20 {
            w.on_data_sent(s, 0.05);
        }
        for _ in 0..50 {
            let c = w.code(&mut rng).unwrap();
            // degree(0.95) = 19, capped at half of 20 packets (each ADU its own).
            assert_eq!(c.seqs.len(), degree(0.95).min(width_cap(20)));
            assert_eq!(c.seqs.len(), 10);
            assert!(c.seqs.windows(2).all(|p| p[0] < p[1]));
            assert!(c.seqs.iter().all(|&s| s < 20));
        }
    }

    #[test]
    fn coded_adus_cover_the_least_covered_packets_first() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut w = Window::default();
        for s in 0..10 {
            w.queue(Duration::ZERO, s, Bytes::from(vec![s as u8; 8]));
            w.on_data_sent(s, 0.1);
        }
        // degree(0.9) = 9, capped at half of 10 packets: 5 ADUs per coded ADU.
        let first = w.code(&mut rng).unwrap();
        assert_eq!(first.seqs.len(), 5);
        w.note_coded(Duration::ZERO, &first.seqs);
        let second = w.code(&mut rng).unwrap();
        w.note_coded(Duration::ZERO, &second.seqs);
        // The second names the five the first left out: every ADU is named once before
        // any is named twice.
        let mut both: Vec<u64> = first.seqs.iter().chain(&second.seqs).copied().collect();
        both.sort_unstable();
        assert_eq!(both, (0..10).collect::<Vec<u64>>());
        // A new ADU is named by the very next coded ADU.
        w.queue(Duration::ZERO, 10, Bytes::from_static(b"new"));
        w.on_data_sent(10, 0.1);
        let third = w.code(&mut rng).unwrap();
        assert!(third.seqs.contains(&10), "{:?}", third.seqs);
    }

    #[test]
    fn the_first_cover_wait_counts_each_adu_once() {
        let mut w = Window::default();
        w.queue(Duration::from_millis(10), 0, Bytes::from_static(b"a"));
        w.queue(Duration::from_millis(20), 1, Bytes::from_static(b"b"));
        let ms = Duration::from_millis;
        assert_eq!(w.note_coded(ms(30), &[0, 1]), (2, ms(20) + ms(10)));
        assert_eq!(w.note_coded(ms(40), &[0, 1]), (0, Duration::ZERO));
        assert_eq!(w.coverage(0), Some(2));
    }

    #[test]
    fn old_adus_expire_from_w() {
        let mut w = Window::default();
        w.queue(Duration::ZERO, 0, Bytes::from_static(b"a"));
        w.on_data_sent(0, 0.0);
        w.queue(Duration::from_millis(900), 1, Bytes::from_static(b"b"));
        w.on_data_sent(1, 0.2);
        let r = w.r();
        w.expire(Duration::from_millis(1500));
        assert!(!w.contains(0) && w.contains(1));
        assert!(close(w.r(), r));
        w.expire(Duration::from_millis(2500));
        assert!(w.is_empty());
        assert_eq!(w.r(), 0.0, "an empty W starts over");
    }

    #[test]
    fn the_next_yield_is_the_expected_gain_of_the_next_coded_packet() {
        let mut w = Window::default();
        assert_eq!(w.next_yield(0.0), 0.0);
        assert!(!w.worth_coding(), "nothing to code");
        for s in 0..3 {
            w.queue(Duration::ZERO, s, Bytes::from_static(b"x"));
            w.on_data_sent(s, 0.1);
        }
        // r = 0.9, degree(0.9) = 9 but only 3 ADUs in 3 packets: c = 2 (half, rounded up).
        assert_eq!(w.next_degree(), 2);
        assert!(close(w.mean_p(), 0.1));
        assert!(close(w.next_yield(0.1), 0.9 * expected_yield(2, 0.9)));
        assert!(w.worth_coding());
        // Coding drives r up and the yield down until it is not worth it.
        let mut n = 0;
        while w.worth_coding() {
            w.on_coded_sent(w.next_degree(), w.mean_p());
            n += 1;
            assert!(n < 100, "coding never stops");
        }
        assert!(w.r() > 0.99 && w.r() < 1.0, "r {}", w.r());
        assert!(w.next_yield(0.1) < MIN_YIELD);
    }

    proptest::proptest! {
        /// Whatever the order of sends, codes and resolutions: r stays a probability,
        /// |W| counts the transmitted ADUs still unresolved, r is 0 exactly when nothing
        /// is left, and coding over a non-empty W stops after finitely many packets.
        #[test]
        fn window_invariants(ops in proptest::collection::vec((0u8..4, 0u64..24, 0.0f64..0.9), 1..200)) {
            let mut w = Window::default();
            let mut live = std::collections::BTreeSet::new();
            let mut next = 0u64;
            for (op, k, p) in ops {
                match op {
                    0 => {
                        w.queue(Duration::ZERO, next, Bytes::from(vec![1u8; 1 + k as usize]));
                        w.on_data_sent(next, p);
                        live.insert(next);
                        next += 1;
                    }
                    1 if !w.is_empty() => w.on_coded_sent(w.next_degree(), p),
                    2 => {
                        let seq = k % next.max(1);
                        w.on_resolved(seq);
                        live.remove(&seq);
                    }
                    _ => {
                        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(k);
                        if let Some(c) = w.code(&mut rng) {
                            proptest::prop_assert!(c.seqs.iter().all(|s| live.contains(s)));
                            proptest::prop_assert_eq!(c.seqs.len(), w.next_degree());
                        } else {
                            proptest::prop_assert!(live.is_empty());
                        }
                    }
                }
                proptest::prop_assert!((0.0..=1.0).contains(&w.r()));
                proptest::prop_assert_eq!(w.len(), live.len());
                if live.is_empty() {
                    proptest::prop_assert_eq!(w.r(), 0.0);
                }
            }
            let mut n = 0;
            while w.worth_coding() {
                w.on_coded_sent(w.next_degree(), w.mean_p());
                n += 1;
                proptest::prop_assert!(n < 10_000);
            }
        }
    }
}
