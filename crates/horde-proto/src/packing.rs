//! ADU packing: turn a cycle's assignment of ADUs to real slots into packets, several
//! small ADUs to a packet when they fit.
//!
//! A slot is a capability to send one packet of up to its channel's `mtu` ADU bytes plus
//! a data header. The scheduler (and the fairness pass after it) maps ADUs to slots one
//! to one, as in the thesis. Packing then fills each slot's byte capacity:
//!
//! 1. **Leads.** Every real slot that got an ADU starts a packet, in slot order.
//! 2. **Merge.** An ADU whose slot's channel already has an earlier packet with room
//!    joins that packet instead, leaving its own slot free. It leaves no later than it
//!    would have, on the channel the scheduler chose. Without objectives a scheduler's
//!    channel choice means nothing (randomized round-robin picks slots at random), so
//!    the ADU joins the earliest packet with room on any channel.
//! 3. **Fill.** The cycle's other ADUs, in the session's priority order (most owed stream
//!    first), join the first packet with room, or start a packet on a free real slot.
//!    ADUs the scheduler parked on a phantom slot and may wait for it stay parked. An ADU
//!    that fits nowhere stays queued, and so do the later ADUs of its stream, so packing
//!    never sends a stream's ADUs out of order within a cycle where it would not have.
//!
//! A packet with one ADU is a plain `Data` packet; with more, a `Packed` one, which is never
//! longer than a full `Data` packet. Packed ADUs share their packet's fate: one ack or one
//! loss covers them all. With packing off every slot carries one ADU (the thesis's mode),
//! and the plan is exactly the scheduler's assignment.

use horde_policy::{AduView, ChannelId, TxSlot};

use crate::wire::{DATA_HEADER_LEN, MAX_PACKED_ADUS, PACKED_ENTRY_LEN, PACKED_HEADER_LEN};

/// Entry bytes (entry headers and payloads) a packed packet in a slot of `max_size` ADU
/// bytes may carry: a packed packet is no longer than a full one-ADU data packet.
pub(crate) fn packed_capacity(max_size: u32) -> usize {
    max_size as usize + DATA_HEADER_LEN - PACKED_HEADER_LEN
}

/// Bytes on the wire of a data packet carrying ADUs of these lengths.
pub(crate) fn packet_size(lengths: impl Iterator<Item = usize>) -> usize {
    let (mut count, mut entries, mut first) = (0, 0, 0);
    for len in lengths {
        if count == 0 {
            first = len;
        }
        count += 1;
        entries += PACKED_ENTRY_LEN + len;
    }
    if count == 1 {
        DATA_HEADER_LEN + first
    } else {
        PACKED_HEADER_LEN + entries
    }
}

fn entry_cost(adu: &AduView) -> usize {
    PACKED_ENTRY_LEN + adu.length as usize
}

/// One planned packet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlannedPacket {
    /// The real slot it goes out in.
    pub slot: usize,
    channel: ChannelId,
    /// Entry bytes used so far (as if packed).
    used: usize,
    /// ADUs in it so far.
    count: usize,
}

/// Reusable working space for [`Packer::plan`]; after warm-up a plan allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Packer {
    packets: Vec<PlannedPacket>,
    /// (slot of the packet, join order, ADU) per ADU placed.
    members: Vec<(usize, usize, usize)>,
    /// Per real slot: the packet that uses it.
    slot_packet: Vec<Option<usize>>,
    placed: Vec<bool>,
    /// Streams with an ADU that found no room this cycle.
    stalled: Vec<u32>,
    /// `members` grouped by packet in slot order, as ADU indices, and where each packet's
    /// group starts.
    order: Vec<usize>,
    starts: Vec<usize>,
    /// Per real slot: the ADU the assignment put in it (`usize::MAX`: none).
    by_slot: Vec<usize>,
}

/// What the session asks of a plan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlanInput<'a> {
    pub slots: &'a [TxSlot],
    pub n_real: usize,
    /// Every ADU collected this cycle, in priority order; the first `assignment.len()`
    /// were given to the scheduler.
    pub adus: &'a [AduView],
    pub assignment: &'a [Option<usize>],
    /// Per ADU given to the scheduler: whether it may wait for the phantom slot it is on.
    pub may_wait: &'a [bool],
    /// Several ADUs per packet; otherwise exactly one per slot.
    pub pack: bool,
    /// Merge only into packets of the channel the scheduler chose (objectives active).
    pub keep_channel: bool,
    /// Where among the packets the fill pass starts looking, so no channel is favoured.
    pub offset: usize,
    /// Per ADU (empty: none): it may go only on a channel of `bounded`, those whose
    /// queue a latency objective keeps short (`crate::latency`).
    pub pinned: &'a [bool],
    /// Per ADU (empty: none): whether it is steered by a latency objective
    /// (`crate::latency`); only those may take a reserved slot.
    pub steered: &'a [bool],
    /// Per real slot (empty: none): whether it is one of a bounded channel's reserved
    /// slots.
    pub reserved: &'a [bool],
    /// Per ADU (empty: none): a channel it may not go on (a copy's original's).
    pub avoid: &'a [Option<ChannelId>],
    pub bounded: &'a [ChannelId],
    /// Per ADU (empty: none): the largest expected one-way delay, ms, of a channel it may
    /// go on (a quickest stream's), by `expected`, per channel (`crate::latency`).
    pub limits: &'a [f64],
    pub expected: &'a [(ChannelId, f64)],
}

impl PlanInput<'_> {
    /// Whether ADU `a` may leave on `channel`.
    fn may_use(&self, a: usize, channel: ChannelId) -> bool {
        (!self.pinned.get(a).copied().unwrap_or(false) || self.bounded.contains(&channel))
            && self.avoid.get(a).is_none_or(|c| *c != Some(channel))
            && crate::latency::within_limit(self.limits, self.expected, a, channel)
    }

    /// Whether ADU `a` may leave in real slot `s`: on its channel, and in a reserved
    /// slot only if it is steered.
    fn may_take(&self, a: usize, s: usize) -> bool {
        self.may_use(a, self.slots[s].channel)
            && (!self.reserved.get(s).copied().unwrap_or(false)
                || self.steered.get(a).copied().unwrap_or(false))
    }
}

impl Packer {
    /// Plan the cycle's packets. Read them back with [`Packer::packets`].
    pub(crate) fn plan(&mut self, input: &PlanInput<'_>) {
        let PlanInput {
            slots,
            n_real,
            adus,
            assignment,
            ..
        } = *input;
        self.packets.clear();
        self.members.clear();
        self.stalled.clear();
        self.slot_packet.clear();
        self.slot_packet.resize(n_real, None);
        self.placed.clear();
        self.placed.resize(adus.len(), false);

        // Leads (and merges), in slot order so a channel's packets take consecutive
        // sequence numbers as its slots predicted.
        self.by_slot.clear();
        self.by_slot.resize(n_real, usize::MAX);
        for (a, s) in assignment.iter().enumerate() {
            if let Some(s) = s.filter(|&s| s < n_real) {
                if self.by_slot[s] == usize::MAX {
                    self.by_slot[s] = a;
                }
            }
        }
        for s in 0..n_real {
            let a = self.by_slot[s];
            if a == usize::MAX || slots[s].max_size < adus[a].length {
                continue; // a scheduler bug must not corrupt the session
            }
            if !input.may_take(a, s) {
                continue;
            }
            let channel = input.keep_channel.then_some(slots[s].channel);
            let merged = input.pack && self.join_channel(input, a, channel).is_some();
            if !merged {
                self.open(slots, adus, a, s);
            }
        }
        if input.pack {
            self.fill(input);
        }
        self.group();
    }

    /// Join ADU `a` to the first packet with room, on `channel` if given.
    fn join_channel(
        &mut self,
        input: &PlanInput<'_>,
        a: usize,
        channel: Option<ChannelId>,
    ) -> Option<usize> {
        let (slots, adus) = (input.slots, input.adus);
        let cost = entry_cost(&adus[a]);
        let p = self.packets.iter().position(|p| {
            channel.is_none_or(|c| p.channel == c)
                && input.may_take(a, p.slot)
                && p.count < MAX_PACKED_ADUS
                && p.used + cost <= packed_capacity(slots[p.slot].max_size)
        })?;
        self.join(p, a, cost);
        Some(p)
    }

    fn join(&mut self, p: usize, a: usize, cost: usize) {
        self.packets[p].used += cost;
        self.packets[p].count += 1;
        let joined = self.members.len();
        self.members.push((self.packets[p].slot, joined, a));
        self.placed[a] = true;
    }

    fn open(&mut self, slots: &[TxSlot], adus: &[AduView], a: usize, s: usize) {
        let p = self.packets.len();
        self.packets.push(PlannedPacket {
            slot: s,
            channel: slots[s].channel,
            used: 0,
            count: 0,
        });
        self.slot_packet[s] = Some(p);
        self.join(p, a, entry_cost(&adus[a]));
    }

    /// Put the cycle's other ADUs into packets with room, or onto free real slots.
    fn fill(&mut self, input: &PlanInput<'_>) {
        let PlanInput {
            slots,
            n_real,
            adus,
            assignment,
            may_wait,
            offset,
            ..
        } = *input;
        for a in 0..adus.len() {
            if self.placed[a] {
                continue;
            }
            // Parked on a phantom on purpose (an objective prefers a slot to come).
            let parked = assignment.get(a).copied().flatten().is_some();
            if parked && may_wait.get(a).copied().unwrap_or(false) {
                continue;
            }
            let stream = adus[a].stream_id;
            if self.stalled.contains(&stream) {
                continue;
            }
            let cost = entry_cost(&adus[a]);
            let n = self.packets.len();
            let room = (0..n).map(|k| (k + offset) % n).find(|&p| {
                let pk = &self.packets[p];
                input.may_take(a, pk.slot)
                    && pk.count < MAX_PACKED_ADUS
                    && pk.used + cost <= packed_capacity(slots[pk.slot].max_size)
            });
            if let Some(p) = room {
                self.join(p, a, cost);
                continue;
            }
            let free = (0..n_real)
                .map(|k| (k + offset) % n_real.max(1))
                .find(|&s| {
                    self.slot_packet[s].is_none()
                        && slots[s].max_size >= adus[a].length
                        && input.may_take(a, s)
                });
            match free {
                Some(s) => self.open(slots, adus, a, s),
                None => self.stalled.push(stream),
            }
        }
    }

    /// Group members by packet, packets in slot order, each packet's ADUs in the order
    /// they joined.
    fn group(&mut self) {
        self.packets.sort_unstable_by_key(|p| p.slot);
        self.members
            .sort_unstable_by_key(|&(slot, joined, _)| (slot, joined));
        self.order.clear();
        self.order.extend(self.members.iter().map(|&(_, _, a)| a));
        self.starts.clear();
        let mut at = 0;
        for p in &self.packets {
            self.starts.push(at);
            at += p.count;
        }
        self.starts.push(at);
    }

    /// The planned packets in slot order: each packet's real slot and the indices (into
    /// the plan's `adus`) of the ADUs it carries, in the order they joined.
    pub(crate) fn packets(&self) -> impl Iterator<Item = (usize, &[usize])> + '_ {
        self.packets
            .iter()
            .enumerate()
            .map(|(k, p)| (p.slot, &self.order[self.starts[k]..self.starts[k + 1]]))
    }

    /// Whether every ADU of the plan went into a packet.
    pub(crate) fn all_placed(&self) -> bool {
        self.placed.iter().all(|&p| p)
    }

    /// How many packets the plan sends.
    pub(crate) fn len(&self) -> usize {
        self.packets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_policy::Fields;

    fn slot(channel: u8, phantom: bool) -> TxSlot {
        TxSlot {
            channel: ChannelId::new(channel),
            sequence: 0,
            loss_probability: 0.0,
            expected_rtt_ms: 100.0,
            wait_ms: if phantom { 50.0 } else { 0.0 },
            max_size: 200,
            cost_per_kb: 0.0,
            phantom: phantom.then_some(0.9),
            burst_correlation: [0.0; 8],
        }
    }

    fn adu(id: u64, stream: u32, length: u32) -> AduView {
        AduView {
            id,
            stream_id: stream,
            stream_seq: id,
            length,
            queue_delay_ms: 0,
            fields: Fields::default(),
        }
    }

    fn plan(input: &PlanInput<'_>) -> Vec<(usize, Vec<usize>)> {
        let mut p = Packer::default();
        p.plan(input);
        p.packets().map(|(s, m)| (s, m.to_vec())).collect()
    }

    /// Real slots 0, 1 (channel 0) and 2 (channel 1), a phantom 3 (channel 1).
    fn slots() -> Vec<TxSlot> {
        vec![
            slot(0, false),
            slot(0, false),
            slot(1, false),
            slot(1, true),
        ]
    }

    /// Packing over the three real slots of [`slots`], the channel free, nothing pinned,
    /// avoided or limited.
    fn packing<'a>(
        slots: &'a [TxSlot],
        adus: &'a [AduView],
        assignment: &'a [Option<usize>],
    ) -> PlanInput<'a> {
        PlanInput {
            slots,
            n_real: 3,
            adus,
            assignment,
            may_wait: &[],
            pack: true,
            keep_channel: false,
            offset: 0,
            pinned: &[],
            steered: &[],
            reserved: &[],
            avoid: &[],
            bounded: &[],
            limits: &[],
            expected: &[],
        }
    }

    #[test]
    fn without_packing_the_plan_is_the_assignment() {
        let slots = slots();
        let adus: Vec<_> = (0..4).map(|i| adu(i, 1, 20)).collect();
        let assignment = [Some(2), Some(0), Some(3), None];
        let input = PlanInput {
            pack: false,
            keep_channel: true,
            ..packing(&slots, &adus, &assignment)
        };
        assert_eq!(plan(&input), vec![(0, vec![1]), (2, vec![0])]);
    }

    #[test]
    fn small_adus_merge_per_channel_fill_spare_bytes_and_respect_the_slot() {
        let slots = slots();
        // ADUs 0-3 were scheduled (one per slot); 4-7 are extras in priority order.
        // ADU 5 (stream 2) is larger than any slot, so ADU 6 of stream 2 must wait too.
        let adus = vec![
            adu(0, 1, 40),
            adu(1, 1, 40),
            adu(2, 1, 40),
            adu(3, 1, 40),
            adu(4, 1, 40),
            adu(5, 2, 205),
            adu(6, 2, 10),
            adu(7, 3, 10),
        ];
        // 0 and 1 on channel 0's real slots, 2 on channel 1's, 3 parked on the phantom
        // and allowed to wait there.
        let assignment = [Some(0), Some(1), Some(2), Some(3)];
        let may_wait = [false, false, false, true];
        let input = PlanInput {
            may_wait: &may_wait,
            keep_channel: true,
            ..packing(&slots, &adus, &assignment)
        };
        let got = plan(&input);
        // Slot 1's ADU merged into slot 0's packet (same channel); 3 stays parked; 4 and
        // 7 fill its room (3 x 55 + 25 of 212 bytes); 5 fits nowhere and holds back 6.
        assert_eq!(got, vec![(0, vec![0, 1, 4, 7]), (2, vec![2])]);
        for (s, members) in &got {
            let size = packet_size(members.iter().map(|&a| adus[a].length as usize));
            assert!(size <= slots[*s].max_size as usize + DATA_HEADER_LEN);
        }
        // Without objectives the channel does not matter: slot 2's ADU joins too, and 4,
        // finding no room, takes the real slot the merges freed.
        let any = PlanInput {
            keep_channel: false,
            ..input
        };
        assert_eq!(plan(&any), vec![(0, vec![0, 1, 2, 7]), (1, vec![4])]);
    }

    #[test]
    fn pinned_adus_leave_only_on_bounded_channels() {
        let slots = slots();
        // ADU 0 (stream 1) leads on channel 0; ADU 1 (stream 2, pinned to channel 1) was
        // scheduled onto channel 0 too, and extras 2 (pinned) and 3 (free) follow.
        let adus = vec![adu(0, 1, 40), adu(1, 2, 40), adu(2, 2, 40), adu(3, 1, 40)];
        let assignment = [Some(0), Some(1)];
        let bounded = [ChannelId::new(1)];
        let input = PlanInput {
            pinned: &[false, true, true, false],
            bounded: &bounded,
            ..packing(&slots, &adus, &assignment)
        };
        // The pinned ADUs neither lead nor join on channel 0: they open channel 1's slot.
        assert_eq!(plan(&input), vec![(0, vec![0, 3]), (2, vec![1, 2])]);
        // Unpinned, they would have filled channel 0's first packet.
        let free = PlanInput {
            pinned: &[],
            avoid: &[],
            ..input
        };
        assert_eq!(plan(&free), vec![(0, vec![0, 1, 2]), (1, vec![3])]);
    }

    #[test]
    fn a_reserved_slot_carries_only_steered_adus() {
        let slots = slots();
        // ADU 0 fills channel 0's first slot; ADU 1 (steered) is in slot 2, reserved;
        // ADUs 2 and 3 (not steered) are left over, and ADU 3 was even scheduled there.
        let adus = vec![adu(0, 1, 190), adu(1, 2, 40), adu(2, 1, 40), adu(3, 1, 40)];
        let assignment = [Some(0), Some(2), None, Some(2)];
        let input = PlanInput {
            steered: &[false, true, false, false],
            reserved: &[false, false, true],
            ..packing(&slots, &adus, &assignment)
        };
        // Neither joins the steered ADU's packet: they open channel 0's second slot.
        assert_eq!(
            plan(&input),
            vec![(0, vec![0]), (1, vec![2, 3]), (2, vec![1])]
        );
        // Unreserved, they would have joined it.
        let open = PlanInput {
            reserved: &[],
            ..input
        };
        assert_eq!(plan(&open), vec![(0, vec![0]), (2, vec![1, 2, 3])]);
    }

    #[test]
    fn limited_adus_leave_only_on_channels_quick_enough() {
        let slots = slots();
        // Channel 0 is expected at 300 ms one way, channel 1 at 40 ms. ADUs 1 and 2 may
        // take only channels within 50 ms; 1 was scheduled onto channel 0.
        let adus = vec![adu(0, 1, 40), adu(1, 2, 40), adu(2, 2, 40), adu(3, 1, 40)];
        let assignment = [Some(0), Some(1)];
        let expected = [(ChannelId::new(0), 300.0), (ChannelId::new(1), 40.0)];
        let limits = [f64::INFINITY, 50.0, 50.0, f64::INFINITY];
        let input = PlanInput {
            limits: &limits,
            expected: &expected,
            ..packing(&slots, &adus, &assignment)
        };
        assert_eq!(plan(&input), vec![(0, vec![0, 3]), (2, vec![1, 2])]);
        // A limit every channel meets changes nothing.
        let loose = [f64::INFINITY, 500.0, 500.0, f64::INFINITY];
        let any = PlanInput {
            limits: &loose,
            ..input
        };
        assert_eq!(plan(&any), vec![(0, vec![0, 1, 2]), (1, vec![3])]);
    }

    #[test]
    fn one_adu_is_a_data_packet_and_more_are_packed() {
        assert_eq!(packet_size([100].into_iter()), DATA_HEADER_LEN + 100);
        assert_eq!(
            packet_size([100, 20].into_iter()),
            PACKED_HEADER_LEN + 2 * PACKED_ENTRY_LEN + 120
        );
        // A full packed slot is no longer than a full data packet.
        assert_eq!(
            PACKED_HEADER_LEN + packed_capacity(1200),
            DATA_HEADER_LEN + 1200
        );
    }
}
