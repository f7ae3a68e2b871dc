//! A periodic cycle's plan: the packets it put in slots later in its period, held with
//! their ADUs until their send times. The session releases each one once its time has
//! come and its channel's congestion controller lets it go; the next cycle takes back
//! what is still held and schedules it afresh.

use std::time::Duration;

use horde_policy::{AduView, ChannelId, TxSlot};

use super::channels::ChannelSet;
use super::cycle::CycleContext;
use super::scratch::CycleScratch;
use super::sender::Sender;
use crate::stream::QueuedAdu;

/// One packet planned for a slot later in the period.
#[derive(Debug)]
pub(super) struct PlannedPacket {
    /// When the slot is due.
    pub(super) at: Duration,
    pub(super) slot: TxSlot,
    /// Its ADUs: `adus[first..first + count]`.
    pub(super) first: usize,
    pub(super) count: usize,
    /// Payload bytes, counted against the peer's credit.
    pub(super) bytes: u64,
    pub(super) sent: bool,
}

/// The packets a periodic cycle planned, in the order it planned them (not always in
/// time order on a channel), with their ADUs out of the stream queues. Buffers are reused from one
/// cycle to the next.
#[derive(Debug, Default)]
pub(super) struct SlotPlan {
    pub(super) packets: Vec<PlannedPacket>,
    /// (stream id, ADU); `None` once the ADU has been sent.
    pub(super) adus: Vec<Option<(u32, QueuedAdu)>>,
    /// Payload bytes of the packets not sent yet.
    pub(super) held_bytes: u64,
    /// Packets before this index are all sent.
    pub(super) head: usize,
}

impl SlotPlan {
    pub(super) fn is_empty(&self) -> bool {
        self.head >= self.packets.len()
    }

    /// Hold a packet for `slot`, due at `at`, carrying `adus`.
    pub(super) fn push(
        &mut self,
        at: Duration,
        slot: &TxSlot,
        adus: impl Iterator<Item = (u32, QueuedAdu)>,
    ) {
        let first = self.adus.len();
        let mut bytes = 0u64;
        for (stream, q) in adus {
            bytes += q.payload.len() as u64;
            self.adus.push(Some((stream, q)));
        }
        let count = self.adus.len() - first;
        if count == 0 {
            return;
        }
        self.held_bytes += bytes;
        self.packets.push(PlannedPacket {
            at,
            slot: slot.clone(),
            first,
            count,
            bytes,
            sent: false,
        });
    }

    /// Mark packet `i` sent: its ADUs leave the plan one by one through
    /// [`SlotPlan::take_adu`].
    pub(super) fn mark_sent(&mut self, i: usize) {
        let p = &mut self.packets[i];
        p.sent = true;
        self.held_bytes -= p.bytes;
        while self.packets.get(self.head).is_some_and(|p| p.sent) {
            self.head += 1;
        }
    }

    /// Whether channel `id` was given packets for later in the period and has sent them
    /// all.
    pub(super) fn exhausted(&self, id: ChannelId) -> bool {
        let mut given = false;
        for p in self.packets.iter().filter(|p| p.slot.channel == id) {
            if !p.sent {
                return false;
            }
            given = true;
        }
        given
    }

    /// An ADU of `stream` held in a packet not sent yet.
    pub(super) fn find_mut(&mut self, stream: u32, id: u64) -> Option<&mut QueuedAdu> {
        self.adus
            .iter_mut()
            .flatten()
            .find(|(s, q)| *s == stream && q.id == id)
            .map(|(_, q)| q)
    }

    /// How many ADUs of `stream` the plan holds, and their payload bytes: they are still
    /// queued as far as the application can tell.
    pub(super) fn held(&self, stream: u32) -> (usize, usize) {
        let from = self
            .packets
            .get(self.head)
            .map_or(self.adus.len(), |p| p.first);
        self.adus[from..]
            .iter()
            .flatten()
            .filter(|(s, _)| *s == stream)
            .fold((0, 0), |(n, b), (_, q)| (n + 1, b + q.payload.len()))
    }

    pub(super) fn take_adu(&mut self, k: usize) -> Option<(u32, QueuedAdu)> {
        self.adus.get_mut(k).and_then(Option::take)
    }

    /// Empty the plan, handing every ADU not sent to `put_back`.
    pub(super) fn drain_held(&mut self, mut put_back: impl FnMut(u32, QueuedAdu)) {
        for (stream, q) in self.adus.drain(..).flatten() {
            put_back(stream, q);
        }
        self.packets.clear();
        self.held_bytes = 0;
        self.head = 0;
    }
}

impl Sender {
    /// Hold the packet of the collected ADUs `members` (indices into `cy.adus`) for
    /// `cy.slots[slot]`, due at `at`: the ADUs leave their queues now, so no later cycle
    /// collects them again.
    pub(super) fn plan_packet(
        &mut self,
        at: Duration,
        slot: usize,
        members: &[usize],
        cy: &CycleScratch,
    ) {
        let streams = &mut self.streams;
        let adus = members.iter().filter_map(|&a| {
            let view = &cy.adus[a];
            let q = streams.get_mut(&view.stream_id)?.take(view.id)?;
            Some((view.stream_id, q))
        });
        self.plan.push(at, &cy.slots[slot], adus);
    }

    /// Put the ADUs of every packet still held back in their streams' queues.
    pub(super) fn take_back_plan(&mut self) {
        if self.plan.packets.is_empty() {
            return;
        }
        let streams = &mut self.streams;
        self.plan.drain_held(|stream, q| {
            if let Some(s) = streams.get_mut(&stream) {
                s.put_back(q);
            }
        });
    }

    /// Send every held packet whose time has come and whose channel may send now.
    pub(super) fn release_planned(&mut self, now: Duration, cx: &mut CycleContext<'_>) {
        let mut cy = std::mem::take(&mut self.cycle);
        for i in self.plan.head..self.plan.packets.len() {
            let p = &self.plan.packets[i];
            if p.sent || p.at > now {
                continue;
            }
            let Some(idx) = cx.channels.index(p.slot.channel) else {
                continue;
            };
            if cx.channels[idx].real_slot_count(now) == 0 {
                continue;
            }
            let (first, count) = (p.first, p.count);
            // A slot holds no heap data: this copy is free of allocation.
            let slot = p.slot.clone();
            self.plan.mark_sent(i);
            cy.sent_adus.clear();
            cy.packet_adus.clear();
            let seq_peek = cx.channels[idx].next_seq_peek();
            for k in first..first + count {
                let Some((stream_id, q)) = self.plan.take_adu(k) else {
                    continue;
                };
                let view = AduView {
                    id: q.id,
                    stream_id,
                    stream_seq: q.seq,
                    length: q.payload.len() as u32,
                    queue_delay_ms: now.saturating_sub(q.inserted).as_millis() as i64,
                    fields: q.fields.clone(),
                };
                let out = (&mut cy.sent_adus, &mut cy.packet_adus);
                self.add_to_packet(&view, q, &slot, seq_peek, cx, out);
            }
            self.send_packet(idx, now, cx, &mut cy);
        }
        self.cycle = cy;
    }

    /// When the next held packet can go: its time, or later if its channel's controller
    /// holds it back (`None` from a channel that waits for an ack, which wakes the
    /// session anyway). A cycle may plan a channel's slots out of time order, so every
    /// held packet counts; a channel's controller is asked once per run of its packets.
    pub(super) fn next_release(&self, channels: &ChannelSet, now: Duration) -> Option<Duration> {
        let mut next: Option<Duration> = None;
        let mut run: Option<(ChannelId, Option<Duration>)> = None;
        for p in &self.plan.packets[self.plan.head.min(self.plan.packets.len())..] {
            if p.sent {
                continue;
            }
            let may_send = match run {
                Some((channel, at)) if channel == p.slot.channel => at,
                _ => {
                    let at = channels
                        .index(p.slot.channel)
                        .and_then(|idx| channels[idx].next_send_at(now));
                    run = Some((p.slot.channel, at));
                    at
                }
            };
            if let Some(t) = may_send.map(|t| t.max(p.at)) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        next
    }
}
