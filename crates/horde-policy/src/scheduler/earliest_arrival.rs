//! Expected-arrival path selection (PluriBus §4.3, §5.3; Chebrolu and Rao): each ADU, in
//! queue order, takes the free slot where it would arrive first.
//!
//! The paper's estimate for path i is `size / capacity_i + Q_i + (d_i + δ)`. On Horde's
//! slots (`docs/recovery.md`, "Path selection"):
//! - `Q_i`, the time our packets already ahead need to drain, is the slot's `wait_ms`,
//!   raised to `k · period` for the k-th slot of a channel in this cycle (slots of one
//!   channel leave one after another, even the real ones offered together);
//! - `size / capacity_i` is the ADU's length over the channel's slot rate, `max_size`
//!   bytes per slot period; the period is the spacing of the channel's phantom slots,
//!   unknown (taken as 0) without look-ahead;
//! - `d_i + δ` is half the slot's expected RTT: Horde measures round trips, and the
//!   common clock offset δ cancels from the comparison anyway.
//!
//! An ADU whose best slot is a phantom stays queued for that better path.

use rand::RngCore;

use super::{Assignment, CycleStats, ScheduleInput, Scheduler};
use crate::ChannelId;

/// Expected-arrival path selection (PluriBus §4.3): each ADU, in queue order, takes the
/// free slot, real or phantom, where it would arrive first, counting the ADUs already
/// placed ahead of it on that channel. Needs no objectives.
#[derive(Debug, Default)]
pub struct EarliestArrival {
    /// Per slot: expected arrival before the ADU's own transmission time.
    base_ms: Vec<f64>,
    /// Per slot: ms per byte of its channel.
    ms_per_byte: Vec<f64>,
    used: Vec<bool>,
    /// Per channel: (slot index, wait) scratch.
    order: Vec<(ChannelId, f64, usize)>,
}

impl EarliestArrival {
    fn prepare(&mut self, input: &ScheduleInput<'_>) {
        let n = input.slots.len();
        self.base_ms.clear();
        self.base_ms.resize(n, 0.0);
        self.ms_per_byte.clear();
        self.ms_per_byte.resize(n, 0.0);
        self.used.clear();
        self.used.resize(n, false);
        self.order.clear();
        self.order.extend(
            input
                .slots
                .iter()
                .enumerate()
                .map(|(i, s)| (s.channel, s.wait_ms, i)),
        );
        self.order
            .sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut start = 0;
        while start < self.order.len() {
            let ch = self.order[start].0;
            let end = start + self.order[start..].iter().take_while(|e| e.0 == ch).count();
            // The channel's slot period: the smallest positive spacing of its slots.
            let period = self.order[start..end]
                .windows(2)
                .map(|w| w[1].1 - w[0].1)
                .filter(|d| *d > 1e-9)
                .fold(f64::INFINITY, f64::min);
            let period = if period.is_finite() { period } else { 0.0 };
            for (k, &(_, wait, i)) in self.order[start..end].iter().enumerate() {
                let s = &input.slots[i];
                let queue = wait.max(k as f64 * period);
                self.base_ms[i] = queue + s.expected_rtt_ms.max(0.0) / 2.0;
                self.ms_per_byte[i] = if s.max_size > 0 {
                    period / f64::from(s.max_size)
                } else {
                    0.0
                };
            }
            start = end;
        }
    }

    /// The expected arrival of an ADU of `len` bytes in slot `i`.
    pub fn arrival_ms(&self, i: usize, len: u32) -> f64 {
        self.base_ms[i] + f64::from(len) * self.ms_per_byte[i]
    }
}

impl Scheduler for EarliestArrival {
    fn name(&self) -> &'static str {
        "earliest_arrival"
    }

    fn schedule(
        &mut self,
        input: &ScheduleInput<'_>,
        _rng: &mut dyn RngCore,
        out: &mut Assignment,
    ) -> CycleStats {
        out.clear();
        out.resize(input.adus.len(), None);
        self.prepare(input);
        for (a, adu) in input.adus.iter().enumerate() {
            let mut best: Option<(f64, f64, usize)> = None;
            for (i, s) in input.slots.iter().enumerate() {
                if self.used[i] || s.max_size < adu.length {
                    continue;
                }
                let key = (self.arrival_ms(i, adu.length), s.loss_probability, i);
                if best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
                    best = Some(key);
                }
            }
            if let Some((_, _, i)) = best {
                self.used[i] = true;
                // A phantom slot keeps the ADU queued for the faster path; the session
                // sends only what sits on real slots.
                out[a] = Some(i);
            }
        }
        CycleStats::default()
    }

    fn waits_without_objectives(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adu::{AduView, Fields};
    use crate::scheduler::assignment_is_valid;
    use crate::slot::{TxSlot, CORRELATION_SPAN};
    use crate::synth::{instance, Instance, Shape};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn slot(channel: u8, rtt: f64, wait: f64, phantom: bool) -> TxSlot {
        TxSlot {
            channel: ChannelId::new(channel),
            sequence: 0,
            loss_probability: 0.0,
            expected_rtt_ms: rtt,
            wait_ms: wait,
            max_size: 1000,
            cost_per_kb: 0.0,
            phantom: phantom.then_some(0.9),
            burst_correlation: [0.0; CORRELATION_SPAN],
        }
    }

    fn adu(id: u64, length: u32) -> AduView {
        AduView {
            id,
            stream_id: 0,
            stream_seq: id,
            length,
            queue_delay_ms: 0,
            fields: Fields::default(),
        }
    }

    fn schedule(inst: &Instance) -> Assignment {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut out = Vec::new();
        EarliestArrival::default().schedule(&inst.input(), &mut rng, &mut out);
        assert!(assignment_is_valid(&inst.input(), &out));
        out
    }

    #[test]
    fn traffic_fills_the_short_path_until_its_queue_reaches_the_long_one() {
        // Channel 0: 40 ms RTT, a slot every 10 ms; channel 1: 150 ms RTT, every 10 ms.
        let mut slots = Vec::new();
        for (ch, rtt) in [(0u8, 40.0), (1, 150.0)] {
            slots.push(slot(ch, rtt, 0.0, false));
            for k in 1..10 {
                slots.push(slot(ch, rtt, 10.0 * f64::from(k), true));
            }
        }
        // Short path, k-th slot: 10 k + 20 + 10 ms; the long path's real slot: 75 + 10.
        // ADUs 0..6 are best on the short path (the first one now, the rest wait for
        // it); the 7th arrives sooner on the long path, the 8th on the short one again.
        let out = schedule(&Instance::new(
            slots.clone(),
            (0..6).map(|i| adu(i, 1000)).collect(),
        ));
        // The ones that wait hold the short path's phantoms, in order.
        assert_eq!(
            out,
            vec![Some(0), Some(1), Some(2), Some(3), Some(4), Some(5)]
        );
        let out = schedule(&Instance::new(
            slots.clone(),
            (0..8).map(|i| adu(i, 1000)).collect(),
        ));
        assert_eq!(out[0], Some(0));
        assert_eq!(out[6], Some(10), "{out:?}");
        let real = out
            .iter()
            .flatten()
            .filter(|&&s| slots[s].is_real())
            .count();
        assert_eq!(real, 2, "{out:?}");
    }

    #[test]
    fn without_look_ahead_the_lowest_delay_real_slots_go_first() {
        let slots = vec![
            slot(1, 150.0, 0.0, false),
            slot(0, 40.0, 0.0, false),
            slot(0, 40.0, 0.0, false),
        ];
        let out = schedule(&Instance::new(slots, (0..3).map(|i| adu(i, 500)).collect()));
        assert_eq!(out, vec![Some(1), Some(2), Some(0)]);
    }

    #[test]
    fn assignments_are_valid_on_random_instances() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for _ in 0..50 {
            let inst = instance(&mut rng, &Shape::bench(), Vec::new());
            let out = schedule(&inst);
            assert!(out.iter().any(|s| s.is_some()));
        }
    }
}
