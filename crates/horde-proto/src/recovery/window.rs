//! The OEC sender's window W and its presence probability r (PluriBus §4.2, §5.1).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use rand::seq::index::sample;
use rand::RngCore;

use super::header::{MAX_DEGREE, MAX_SPAN};
use super::xor::xor_all;

/// Data ADUs older than this leave W even without feedback: the receiver's decode store
/// has forgotten what they would combine with (see `docs/recovery.md`).
pub const MAX_AGE: Duration = Duration::from_secs(1);
/// Most ADUs W holds; the oldest leave first.
pub const MAX_LEN: usize = 4096;

#[derive(Debug, Clone)]
struct Entry {
    payload: Bytes,
    /// Loss estimate of the path it went on, when it went; `None` until transmitted.
    p: Option<f64>,
    queued: Duration,
}

/// A coded packet: the XOR of the data ADUs `seqs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coded {
    pub seqs: Vec<u64>,
    pub len_xor: u16,
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
    pub fn r(&self) -> f64 {
        self.r
    }

    /// |W|: ADUs transmitted and not yet resolved.
    pub fn len(&self) -> usize {
        self.sent
    }

    pub fn is_empty(&self) -> bool {
        self.sent == 0
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.entries.contains_key(&seq)
    }

    /// Remember a data ADU queued for sending (it joins |W| when transmitted).
    pub fn queue(&mut self, now: Duration, seq: u64, payload: Bytes) {
        self.entries.insert(
            seq,
            Entry {
                payload,
                p: None,
                queued: now,
            },
        );
        while self.entries.len() > MAX_LEN {
            self.pop_oldest();
        }
    }

    /// Rule (i): a data ADU left on a path with loss estimate `p`.
    pub fn on_data_sent(&mut self, seq: u64, p: f64) {
        let Some(e) = self.entries.get_mut(&seq) else {
            return;
        };
        if e.p.is_some() {
            return; // a retransmission: already counted
        }
        e.p = Some(p.clamp(0.0, 1.0));
        self.sent += 1;
        let n = self.sent as f64;
        self.r = ((n - 1.0) * self.r + (1.0 - p.clamp(0.0, 1.0))) / n;
    }

    /// Rule (ii): a coded ADU over `c` data ADUs left on a path with loss estimate `p`.
    pub fn on_coded_sent(&mut self, c: usize, p: f64) {
        if self.sent == 0 {
            return;
        }
        let n = self.sent as f64;
        let y = expected_yield(c, self.r);
        self.r = ((n * self.r + (1.0 - p.clamp(0.0, 1.0)) * y) / n).clamp(0.0, 1.0);
    }

    /// Rule (iii): feedback resolved `seq` (acknowledged or declared lost). It leaves W,
    /// and r restarts from the paths' loss estimates of what is left: the mean of
    /// `1 - p` over the remaining ADUs (the paper's "reset r to p", read as a presence
    /// probability; `docs/recovery.md`).
    pub fn on_resolved(&mut self, seq: u64) {
        if let Some(e) = self.entries.remove(&seq) {
            if e.p.is_some() {
                self.sent -= 1;
                self.reset_r();
            }
        }
    }

    fn reset_r(&mut self) {
        let (sum, n) = self
            .entries
            .values()
            .filter_map(|e| e.p)
            .fold((0.0, 0usize), |(s, n), p| (s + 1.0 - p, n + 1));
        self.r = if n == 0 { 0.0 } else { sum / n as f64 };
    }

    fn pop_oldest(&mut self) {
        if let Some((_, e)) = self.entries.pop_first() {
            if e.p.is_some() {
                self.sent -= 1;
            }
        }
    }

    /// Drop what is too old to be decoded, and keep W's span within one XOR frame.
    pub fn expire(&mut self, now: Duration) {
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
            self.reset_r();
        }
    }

    /// The payload of a data ADU still in W (queued or sent).
    pub fn payload(&self, seq: u64) -> Option<&Bytes> {
        self.entries.get(&seq).map(|e| &e.payload)
    }

    /// An OEC coded packet: `degree(r)` ADUs drawn at random, without replacement, from
    /// the transmitted part of W. `None` when W is empty.
    pub fn code(&self, rng: &mut dyn RngCore) -> Option<Coded> {
        let sent: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| e.p.is_some())
            .map(|(&s, _)| s)
            .collect();
        if sent.is_empty() {
            return None;
        }
        let c = degree(self.r).min(sent.len());
        let mut seqs: Vec<u64> = sample(rng, sent.len(), c)
            .into_iter()
            .map(|i| sent[i])
            .collect();
        seqs.sort_unstable();
        Some(self.xor_of(seqs))
    }

    /// The XOR of the given ADUs of W (ascending, all present).
    pub fn xor_of(&self, seqs: Vec<u64>) -> Coded {
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
        w.on_data_sent(2, 0.0);
        let r3 = (2.0 * 0.8 + 1.0) / 3.0;
        assert!(close(w.r(), r3));
        // (ii): W unchanged, r grows by (1 - p) Y(c) / |W|.
        w.on_coded_sent(2, 0.5);
        let r4 = (3.0 * r3 + 0.5 * expected_yield(2, r3)) / 3.0;
        assert!(close(w.r(), r4));
        assert_eq!(w.len(), 3);
        // (iii): resolved ADUs leave, r restarts from what is left.
        w.on_resolved(0);
        assert_eq!(w.len(), 2);
        assert!(close(w.r(), (0.7 + 1.0) / 2.0));
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
            assert_eq!(c.seqs.len(), degree(0.95).min(20));
            assert!(c.seqs.windows(2).all(|p| p[0] < p[1]));
            assert!(c.seqs.iter().all(|&s| s < 20));
        }
    }

    #[test]
    fn old_adus_expire_from_w() {
        let mut w = Window::default();
        w.queue(Duration::ZERO, 0, Bytes::from_static(b"a"));
        w.on_data_sent(0, 0.0);
        w.queue(Duration::from_millis(900), 1, Bytes::from_static(b"b"));
        w.on_data_sent(1, 0.2);
        w.expire(Duration::from_millis(1500));
        assert!(!w.contains(0) && w.contains(1));
        assert!(close(w.r(), 0.8));
    }
}
