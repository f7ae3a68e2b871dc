//! The scheduling cycle (thesis §6.3): when a cycle is due, dividing the channels' rate
//! among streams, collecting ADUs for the slots, asking the scheduler, and handing the
//! chosen packets to transmit.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use horde_policy::{AduView, Demand, HistoryEntry, Outcome, ScheduleInput, TxSlot};

use super::channels::ChannelSet;
use super::flow::{Blocked, Flow, ZERO_WINDOW_PROBE};
use super::scratch::{CycleScratch, StreamCursor};
use super::sender::Sender;
use super::{ms, PendingAdu, Session, SessionConfig, SessionStats, State};
use crate::channel::{Channel, SentAdu};
use crate::event::Event;
use crate::fair_share::SlotChoice;
use crate::latency::Steer;
use crate::packing::{packed_capacity, Packer, PlanInput};
use crate::recovery::sender::Kind;
use crate::recovery::RecoveryLayer;
use crate::stream::{InFlightPolicy, QueuedAdu, SendStream};
use crate::wire::{FLAG_ORDERED, FLAG_RECOVERY, MAX_PACKED_ADUS, PACKED_ENTRY_LEN};

/// How far behind its allocation, in seconds of it, a stream may fall while a scheduler
/// keeps its ADUs for phantom slots, before the fairness pass puts them on real slots
/// regardless. Small against the 5 s windows over which each stream is promised 95% of
/// its allocation.
pub(super) const DEFERRAL_BUDGET_SECS: f64 = 0.15;

/// How long an event-driven session waits after a cycle that sent nothing before trying
/// again without news.
pub(super) const IDLE_CYCLE_RETRY: Duration = Duration::from_millis(1);

/// Whether a stream with ADUs waiting wants more than its allocation: min-max fairness
/// holds it at the fair-share level.
pub(super) fn at_fair_level(s: &SendStream) -> bool {
    !s.queue.is_empty()
        && match s.config.demand() {
            Demand::Elastic => true,
            Demand::MaxRate(r) => s.allocation < r * (1.0 - 1e-9),
        }
}

/// What a cycle reaches beyond the sender: the settings, the channels it hands packets
/// to, the peer's credit, the recovery layer that tracks what goes out, the in-flight
/// ADUs kept for a successor, and where events and counters go.
pub(super) struct CycleContext<'a> {
    pub(super) config: &'a SessionConfig,
    pub(super) channels: &'a mut ChannelSet,
    pub(super) flow: &'a mut Flow,
    pub(super) recovery: &'a mut RecoveryLayer,
    pub(super) resend: &'a mut HashMap<u64, (u32, QueuedAdu)>,
    pub(super) events: &'a mut VecDeque<Event>,
    pub(super) stats: &'a mut SessionStats,
    /// The time stamp of packets sent now.
    pub(super) send_ts: u32,
}

/// The peer's credit cannot take a packet of `need` payload bytes: stop scheduling data
/// until it can.
fn flow_block(cx: &mut CycleContext<'_>, now: Duration, need: u64) {
    let flow = &mut *cx.flow;
    if flow.blocked.is_none() {
        cx.events.push_back(Event::FlowBlocked);
    }
    let since = flow.blocked.map_or(now, |b| b.since);
    flow.blocked = Some(Blocked { since, need });
}

/// The channel index of real slot `slot` and the index of its channel's first slot (slots
/// are grouped by channel, `real_counts` of each).
fn slot_channel(real_counts: &[usize], slot: usize) -> (usize, usize) {
    let mut start = 0;
    for (c, &n) in real_counts.iter().enumerate() {
        if slot < start + n {
            return (c, start);
        }
        start += n;
    }
    (real_counts.len(), start)
}

/// Which of its channel's slot times each packet of a periodic cycle takes: its rank
/// among the channel's packets by collection order (the order in which the streams are
/// owed), not by the slot the scheduler chose. An objective puts the streams it favours
/// in the earliest slots, and the last slots of a period are those a window may not open
/// in time; ranking by collection order spreads that risk over the streams as their
/// shares do. Fills `cy.ranks` with one entry per packet, in the packer's order.
fn rank_packets(cy: &mut CycleScratch, packer: &Packer) {
    cy.order.clear();
    for (k, (slot, members)) in packer.packets().enumerate() {
        let (c, _) = slot_channel(&cy.real_counts, slot);
        let first = members.iter().copied().min().unwrap_or(usize::MAX);
        cy.order.push((c, first, k));
    }
    cy.order.sort_unstable();
    cy.ranks.clear();
    cy.ranks.resize(cy.order.len(), 0);
    let mut last = None;
    let mut rank = 0;
    for &(c, _, k) in &cy.order {
        if last != Some(c) {
            last = Some(c);
            rank = 0;
        }
        cy.ranks[k] = rank;
        rank += 1;
    }
}

/// When packet `k` (of real slot `slot`) is due: `None` if its rank falls on one of its
/// channel's open slots (send now), else the wait in ms of the slot of its rank (due
/// then, and only if the channel's controller allows a send). The first `open_counts`
/// of a channel's slots are open.
fn packet_wait(cy: &CycleScratch, k: usize, slot: usize) -> Option<f64> {
    let (c, start) = slot_channel(&cy.real_counts, slot);
    let n = *cy.real_counts.get(c)?;
    let rank = cy.ranks[k].min(n - 1);
    (rank >= cy.open_counts[c]).then(|| cy.slots[start + rank].wait_ms)
}

/// When channel `c` next offers a slot to what waits: its next send, or now while an
/// ADU of a latency-bound stream waits (`bound_waiting`) and its reserved slots are open.
pub(super) fn slot_open_at(c: &Channel, now: Duration, bound_waiting: bool) -> Option<Duration> {
    if bound_waiting && c.reserved_slot_count(now) > 0 {
        return Some(now);
    }
    c.next_send_at(now)
}

impl Session {
    /// News (an ADU, an ack) ends an event-driven session's wait after an empty cycle.
    pub(super) fn wake_cycle(&mut self, now: Duration) {
        if self.config.cycle_ms <= 0.0 {
            self.sender.next_cycle = self.sender.next_cycle.min(now);
        }
    }

    pub(super) fn cycle_due(&self, now: Duration) -> bool {
        if self.life.state != State::Connected
            || !self.sender.has_queued()
            || !self.receiver.flow.may_send()
        {
            return false;
        }
        let bound_waiting = self.sender.bound_waiting();
        let ready = self
            .channels
            .iter()
            .filter(|c| slot_open_at(c, now, bound_waiting).is_some_and(|t| t <= now))
            .count();
        if ready == 0 {
            return false;
        }
        if now >= self.sender.next_cycle {
            return true;
        }
        if self.refill_due(now) {
            return true;
        }
        self.config.early_cycle_slots.is_some_and(|m| {
            let n: usize = self.channels.iter().map(|c| c.real_slot_count(now)).sum();
            n >= m
        })
    }

    /// A periodic cycle's channel that was given packets for later in the period, has
    /// sent them all and may send more (its window opened faster than the period's slots
    /// foresaw) starts a cycle early rather than stand idle until the period ends. A
    /// channel the cycle gave nothing to later in the period waits for the next one.
    fn refill_due(&self, now: Duration) -> bool {
        self.config.cycle_ms > 0.0
            && now >= self.sender.refill_after
            && self.channels.iter().any(|c| {
                c.next_send_at(now).is_some_and(|t| t <= now) && self.sender.plan.exhausted(c.id)
            })
    }

    /// When [`Session::refill_due`] may next hold, as far as the channels' controllers
    /// tell.
    pub(super) fn next_refill(&self, now: Duration) -> Option<Duration> {
        if self.config.cycle_ms <= 0.0 {
            return None;
        }
        self.channels
            .iter()
            .filter(|c| self.sender.plan.exhausted(c.id))
            .filter_map(|c| c.next_send_at(now))
            .min()
            .map(|t| t.max(self.sender.refill_after))
    }

    /// Run one scheduling cycle over the session's parts.
    pub(super) fn run_cycle(&mut self, now: Duration) {
        self.with_sender(now, |sender, cx| sender.run_cycle(now, cx));
        // The peer's credit may have run out in the cycle: probe for a lost update.
        let probe = self
            .receiver
            .flow
            .blocked
            .map(|b| b.since + ZERO_WINDOW_PROBE);
        self.life.zero_window_probe_at(probe);
    }

    /// Send the packets a periodic cycle planned whose time has come.
    pub(super) fn release_planned(&mut self, now: Duration) {
        if self.sender.plan.is_empty() {
            return;
        }
        self.with_sender(now, |sender, cx| sender.release_planned(now, cx));
    }

    /// Run `f` on the sender with the session's other parts it works on.
    fn with_sender(&mut self, now: Duration, f: impl FnOnce(&mut Sender, &mut CycleContext<'_>)) {
        let mut cx = CycleContext {
            send_ts: self.send_ts(now),
            config: &self.config,
            channels: &mut self.channels,
            flow: &mut self.receiver.flow,
            recovery: &mut self.recovery,
            resend: &mut self.life.resend,
            events: &mut self.events,
            stats: &mut self.stats,
        };
        f(&mut self.sender, &mut cx);
    }
}

impl Sender {
    /// One scheduling cycle (thesis §6.3): collect slots and ADUs, schedule, pack the
    /// ADUs mapped to real slots into packets and transmit them, forget the phantom
    /// assignments. Works in `self.cycle`'s reused buffers: no allocation at steady state.
    pub(super) fn run_cycle(&mut self, now: Duration, cx: &mut CycleContext<'_>) {
        cx.stats.cycles += 1;
        // A periodic cycle issues the slots of its whole period, each with its time; an
        // event-driven one only those open now.
        let period = if cx.config.cycle_ms > 0.0 {
            let period = ms(cx.config.cycle_ms);
            // A refill cycle before the period ends keeps the cycles' clock.
            if now >= self.next_cycle {
                self.next_cycle = (self.next_cycle + period).max(now);
            }
            self.refill_after = now + IDLE_CYCLE_RETRY;
            period
        } else {
            Duration::ZERO
        };
        // What the last period's plan still holds is scheduled afresh.
        self.take_back_plan();
        let mut cy = std::mem::take(&mut self.cycle);
        self.update_allocations(now, cx, &mut cy);
        let objective = self.latency_objective(now);
        self.latency.update(now, objective, cx.channels);

        let reserve = self.bound_waiting();
        cy.slots.clear();
        cy.reserved.clear();
        cy.real_counts.clear();
        cy.open_counts.clear();
        cy.phantom_starts.clear();
        for c in cx.channels.iter() {
            let p = c.period_slots(now, period, reserve, &mut cy.slots);
            let plain = p.open - p.reserved;
            cy.reserved
                .extend((0..p.total).map(|k| k >= plain && k < p.open));
            cy.real_counts.push(p.total);
            cy.open_counts.push(p.open);
            cy.phantom_starts.push(p.phantom_start);
        }
        let n_real = cy.slots.len();
        if n_real == 0 {
            self.cycle = cy;
            return;
        }
        let lookahead = ms(cx.config.lookahead_ms);
        if !lookahead.is_zero() {
            // Phantoms look `lookahead` beyond the slots the cycle issues.
            let counts = cy.real_counts.iter().zip(&cy.phantom_starts);
            for (c, (&real, &start)) in cx.channels.iter().zip(counts) {
                let horizon = lookahead
                    + if start.is_some() {
                        period
                    } else {
                        Duration::ZERO
                    };
                c.phantom_slots(now, horizon, real, start, &mut cy.slots);
            }
        }

        // One ADU per slot for the scheduler; with packing, more after them, as many as
        // the real slots' byte capacity could carry besides the first n_real.
        let n_sched = cy.slots.len();
        self.collect_adus(now, n_sched, cx, &mut cy);
        if cx.config.pack_adus && cy.adus.len() == n_sched {
            let capacity: usize = cy.slots[..n_real]
                .iter()
                .map(|s| packed_capacity(s.max_size))
                .sum();
            let leads: usize = cy.adus[..n_real.min(cy.adus.len())]
                .iter()
                .map(|a| PACKED_ENTRY_LEN + a.length as usize)
                .sum();
            if capacity > leads {
                self.take_adus(
                    now,
                    cx.config,
                    n_sched,
                    n_real * MAX_PACKED_ADUS,
                    capacity - leads,
                    &mut cy,
                );
            }
        }
        let n_sched = n_sched.min(cy.adus.len());
        let streams = &self.streams;
        let any_quickest = cy
            .cursors
            .iter()
            .any(|c| streams.get(&c.id).is_some_and(|s| s.config.quickest));
        self.latency.pin(&cy.adus, any_quickest, |id| {
            streams.get(&id).map_or(Steer::Free, |s| s.config.steer())
        });
        let recovery = &*cx.recovery;
        self.latency.mark_copies(&cy.adus, |a| {
            streams
                .get(&a.stream_id)
                .is_some_and(|s| s.config.latency_copies == 2)
                && matches!(recovery.kind(a.stream_id, a.id), Some(Kind::Coded(_)))
        });
        cy.streams.clear();
        cy.streams.extend(self.streams.values().map(|s| s.stats()));
        let history = self.history.make_contiguous();
        let input = ScheduleInput {
            slots: &cy.slots,
            adus: &cy.adus[..n_sched],
            history,
            streams: &cy.streams,
            objectives: &self.objectives,
        };
        let cs = self
            .scheduler
            .schedule(&input, &mut self.rng, &mut cy.assignment);
        cx.stats.objective_evaluations += cs.evaluations;
        cy.assignment.resize(n_sched, None);
        let choice = SlotChoice {
            keep_channel: !self.objectives.is_empty(),
            // A hash of the cycle number: a plain counter would fall into step with
            // periodic sources and slot clocks and favour one channel for them.
            offset: (cx.stats.cycles.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize,
        };
        if period.is_zero() {
            self.fair_share.enforce(
                &cy.slots,
                n_real,
                &cy.adus[..n_sched],
                &cy.may_wait[..n_sched],
                &mut cy.assignment,
                choice,
            );
        } else {
            self.enforce_on_open_slots(n_sched, choice, &mut cy);
        }
        self.latency
            .steer(&cy.slots, n_real, &cy.adus[..n_sched], &mut cy.assignment);
        self.latency
            .keep_reserved(&cy.reserved, n_real, &mut cy.assignment);
        if cx.config.phantom_wait_ms > 0.0 {
            self.note_deferrals(now, n_real, &cy.adus[..n_sched], &cy.assignment);
        }

        // Send in slot order so consecutive real slots of a channel get consecutive
        // sequence numbers, as the slots predicted.
        cy.packer.plan(&PlanInput {
            slots: &cy.slots,
            n_real,
            adus: &cy.adus,
            assignment: &cy.assignment,
            may_wait: &cy.may_wait,
            pack: cx.config.pack_adus,
            keep_channel: choice.keep_channel,
            offset: choice.offset,
            pinned: self.latency.pinned(),
            steered: self.latency.steered(),
            reserved: &cy.reserved,
            avoid: self.latency.avoided(),
            bounded: self.latency.bounded(),
            limits: self.latency.limits(),
            expected: self.latency.expected(),
        });
        let packer = std::mem::take(&mut cy.packer);
        if !period.is_zero() {
            rank_packets(&mut cy, &packer);
        }
        for (k, (slot, members)) in packer.packets().enumerate() {
            // The peer's credit bounds what may be out toward it; the first packet
            // that does not fit stops the cycle, so a stream is never reordered.
            let bytes: u64 = members.iter().map(|&a| u64::from(cy.adus[a].length)).sum();
            if !cx.flow.allows(bytes + self.plan.held_bytes) {
                flow_block(cx, now, bytes);
                break;
            }
            // A channel's packets go out in its slots' order, each at the time of the
            // next slot of the channel: slots the scheduler left empty leave no gaps.
            // A slot that is not open now waits in the plan even when it is due at once:
            // the plan sends it only when the controller allows.
            let wait = if period.is_zero() {
                None
            } else {
                packet_wait(&cy, k, slot)
            };
            if let Some(wait) = wait {
                let at = now + Duration::from_secs_f64(wait / 1e3);
                self.plan_packet(at, slot, members, &cy);
                continue;
            }
            let slot = cy.slots[slot].clone();
            self.transmit_packet(now, &slot, members, cx, &mut cy);
        }
        // A channel left with real slots it had no ADU for is application-limited.
        let n_plain = n_real - cy.reserved.iter().filter(|&&r| r).count();
        let app_limited = if cx.config.pack_adus {
            packer.len() < n_plain && packer.all_placed()
        } else {
            cy.adus.len() < n_plain
        };
        if app_limited {
            cx.channels.mark_idle_app_limited(now);
        }

        // Event-driven cycles: one that sent nothing (every waiting stream over its rate,
        // say) would otherwise run again at once, forever; wait for news or a moment.
        if cx.config.cycle_ms <= 0.0 && packer.len() == 0 {
            self.next_cycle = now + IDLE_CYCLE_RETRY;
        }
        cy.packer = packer;
        self.cycle = cy;
    }

    /// The fairness pass for a periodic cycle. Only the slots open now are sure to be
    /// sent: a slot later in the period goes out only if its channel's window opens in
    /// time, else its ADU is taken back at the next cycle. So the fair set is owed the
    /// open slots, and the slots due later count as the ones to come: an owed ADU the
    /// scheduler put there may stay while its stream may wait, as on a phantom. Without
    /// this, an objective that keeps sending some streams to the later slots of a slow
    /// channel leaves those streams short cycle after cycle.
    fn enforce_on_open_slots(&mut self, n_sched: usize, choice: SlotChoice, cy: &mut CycleScratch) {
        cy.fair_order.clear();
        let mut first = 0;
        for (&total, &open) in cy.real_counts.iter().zip(&cy.open_counts) {
            cy.fair_order.extend(first..first + open);
            first += total;
        }
        let n_open = cy.fair_order.len();
        let mut first = 0;
        for (&total, &open) in cy.real_counts.iter().zip(&cy.open_counts) {
            cy.fair_order.extend(first + open..first + total);
            first += total;
        }
        cy.fair_order.extend(first..cy.slots.len());
        cy.fair_position.clear();
        cy.fair_position.resize(cy.slots.len(), 0);
        for (at, &s) in cy.fair_order.iter().enumerate() {
            cy.fair_position[s] = at;
        }
        cy.fair_slots.clear();
        cy.fair_slots
            .extend(cy.fair_order.iter().map(|&s| cy.slots[s].clone()));
        cy.fair_assignment.clear();
        cy.fair_assignment
            .extend(cy.assignment.iter().map(|s| s.map(|s| cy.fair_position[s])));
        self.fair_share.enforce(
            &cy.fair_slots,
            n_open,
            &cy.adus[..n_sched],
            &cy.may_wait[..n_sched],
            &mut cy.fair_assignment,
            choice,
        );
        for (a, s) in cy.assignment.iter_mut().zip(&cy.fair_assignment) {
            *a = s.map(|s| cy.fair_order[s]);
        }
    }

    /// Start the patience clock of each ADU left on a phantom slot for the first time
    /// (see [`QueuedAdu::deferred_since`](crate::stream::QueuedAdu::deferred_since)).
    fn note_deferrals(
        &mut self,
        now: Duration,
        n_real: usize,
        adus: &[AduView],
        assignment: &[Option<usize>],
    ) {
        for (a, slot) in adus.iter().zip(assignment) {
            if slot.is_none_or(|s| s < n_real) {
                continue;
            }
            let queued = self
                .streams
                .get_mut(&a.stream_id)
                .and_then(|s| s.find_mut(a.id));
            if let Some(q) = queued {
                q.deferred_since.get_or_insert(now);
            }
        }
    }

    /// Re-divide the channels' aggregate rate among streams (min-max fair), refill each
    /// stream's credit, and tell streams whose allocation moved by more than 10%.
    pub(super) fn update_allocations(
        &mut self,
        now: Duration,
        cx: &mut CycleContext<'_>,
        cy: &mut CycleScratch,
    ) {
        // Allocations and credit are in ADU payload bytes, like streams' `max_kbps`, so
        // divide the payload the channels carry: a channel's rate counts headers too.
        let total: f64 = cx.channels.iter().map(|c| c.payload_rate()).sum();
        cy.demands.clear();
        cy.demands
            .extend(self.streams.values().map(|s| s.config.demand()));
        cy.allocator
            .allocate_into(total, &cy.demands, &mut cy.allocations);
        let dt = now.saturating_sub(self.last_refill);
        self.last_refill = now;
        let mtu = f64::from(cx.channels.max_adu());
        for (s, &a) in self.streams.values_mut().zip(&cy.allocations) {
            s.allocation = a;
            s.refill(dt, mtu);
            let moved = s.announced.is_nan() || (a - s.announced).abs() > 0.1 * s.announced;
            if moved {
                s.announced = a;
                cx.events.push_back(Event::Throttle {
                    stream: s.id,
                    rate: a,
                });
            }
        }
        self.track_debt(dt);
    }

    /// Streams with ADUs waiting fall behind by their allocation; idle ones owe and are
    /// owed nothing. The capacity the allocator counts is not all carried (slots lost to
    /// pacing, partly filled slots): min-max fairness over what is carried takes that
    /// shortfall from the streams at the fair-share level (those that want more than
    /// their allocation) alike, and none from streams that asked for less, so when all
    /// of the former are behind, the common part of their debt is forgiven.
    pub(super) fn track_debt(&mut self, dt: Duration) {
        let mut floor = f64::INFINITY;
        for s in self.streams.values() {
            let d = self.debt.entry(s.id).or_insert(0.0);
            if s.queue.is_empty() {
                *d = 0.0;
                continue;
            }
            *d += s.allocation * dt.as_secs_f64();
            if at_fair_level(s) {
                floor = floor.min(*d / s.allocation.max(1.0));
            }
        }
        if floor.is_finite() && floor > 0.0 {
            for s in self.streams.values().filter(|s| at_fair_level(s)) {
                if let Some(d) = self.debt.get_mut(&s.id) {
                    *d -= floor * s.allocation.max(1.0);
                }
            }
        }
    }

    /// What every stream at the fair-share level is owed alike, in seconds of its own
    /// allocation: the capacity the allocator counted and the channels did not carry
    /// (see [`Self::track_debt`]). Nobody owes it, so ranking by credit forgives it:
    /// otherwise a stream held below the fair share (voice at its `max_kbps`) would
    /// queue until its own credit matched that shortfall, up to the credit horizon,
    /// before it ranked level with a bulk stream.
    fn shared_shortfall_secs(&self) -> f64 {
        let floor = self
            .streams
            .values()
            .filter(|s| at_fair_level(s))
            .map(SendStream::owed_secs)
            .fold(f64::INFINITY, f64::min);
        if floor.is_finite() {
            floor.max(0.0)
        } else {
            0.0
        }
    }

    /// Pick up to `want` ADUs (one per slot, real or phantom: thesis Fig. 6-4) from the
    /// stream queues in FIFO order per stream, round-robin, most owed stream first (the
    /// thesis's starved-stream priority), in three passes:
    ///
    /// 1. streams with credit, each up to its credit;
    /// 2. the same streams beyond their credit;
    /// 3. any stream.
    ///
    /// Filling every slot, not just the real ones, keeps real slots from going empty when
    /// a scheduler defers some ADUs to phantoms. The order is the priority: the first
    /// ADUs, one per real slot, are what a cycle without look-ahead would send, and the
    /// fairness pass (`fair_share`) keeps them on real slots unless `may_wait` says their
    /// stream may wait for a better slot to come: only while objectives are active or the
    /// scheduler has a reason of its own (`waits_without_objectives`: earliest arrival's
    /// path delays; otherwise no objective, no reason to wait) and the stream's `debt` is less than
    /// [`DEFERRAL_BUDGET_SECS`] of its allocation, and (with
    /// [`SessionConfig::phantom_wait_ms`](super::SessionConfig::phantom_wait_ms)) for each
    /// ADU no longer than that after a scheduler first left it on a phantom. The stream's
    /// budget alone does not bound one ADU's wait: a stream whose other ADUs flow is never
    /// behind.
    pub(super) fn collect_adus(
        &mut self,
        now: Duration,
        want: usize,
        cx: &CycleContext<'_>,
        cy: &mut CycleScratch,
    ) {
        cy.adus.clear();
        cy.may_wait.clear();
        let cursors = &mut cy.cursors;
        cursors.clear();
        let objectives = !self.objectives.is_empty() || self.scheduler.waits_without_objectives();
        // Where ADUs may wait for better slots, a deferred stream is owed for real and
        // the ranking stays nominal: forgiving there cost a deferred video stream 1-2
        // points of its allocation in `horde-sim`'s overload test, under its 95% floor.
        let shortfall = if objectives {
            0.0
        } else {
            self.shared_shortfall_secs()
        };
        for (index, s) in self
            .streams
            .values()
            .filter(|s| !s.queue.is_empty())
            .enumerate()
        {
            let debt = self.debt.get(&s.id).copied().unwrap_or(0.0);
            let forgiven = if at_fair_level(s) { shortfall } else { 0.0 };
            cursors.push(StreamCursor {
                id: s.id,
                index,
                owed_secs: s.owed_secs() - forgiven,
                taken: 0,
                credit: s.credit,
                owed: s.credit > 0.0,
                patient: objectives && debt < DEFERRAL_BUDGET_SECS * s.allocation,
            });
        }
        // Most owed first, in seconds of the stream's own allocation, so a small stream
        // is not outranked by a big one merely because its byte credit is smaller.
        // Ties (common when every stream's credit sits at its cap, e.g. while the
        // channels' estimated rate exceeds what they carry) go to each stream in turn,
        // not always to the lowest id. Every key differs, so an unstable sort (which
        // needs no buffer) gives the one order.
        let n = cursors.len().max(1);
        let turn = (cx.stats.cycles % n as u64) as usize;
        cursors.sort_unstable_by(|a, b| {
            b.owed_secs
                .total_cmp(&a.owed_secs)
                .then(((a.index + n - turn) % n).cmp(&((b.index + n - turn) % n)))
        });
        let streams = &self.streams;
        let bounded = !self.latency.bounded().is_empty();
        if bounded || cursors.iter().any(|c| streams[&c.id].config.quickest) {
            // Steered streams first, so that a bounded or quick channel's slot finds
            // their ADUs in the cycle: a bound holds them to a few ADUs anyway, their
            // allocation to their rate, and a quickest stream carries few by its nature.
            cursors.sort_by_key(|c| {
                let config = &streams[&c.id].config;
                !(config.quickest || bounded && config.latency_bound_ms.is_some())
            });
        }
        self.take_adus(now, cx.config, want, 0, 0, cy);
    }

    /// Take ADUs from the streams in `cy.cursors`' order, where the cursors stand, until
    /// `cy.adus` holds `want`, then (for packing) at most `extra_count` more and until
    /// those would take `extra_bytes` of packed entries.
    pub(super) fn take_adus(
        &self,
        now: Duration,
        config: &SessionConfig,
        want: usize,
        extra_count: usize,
        extra_bytes: usize,
        cy: &mut CycleScratch,
    ) {
        let out = &mut cy.adus;
        let may_wait = &mut cy.may_wait;
        let cursors = &mut cy.cursors;
        let limit = want + extra_count;
        let patience = (config.phantom_wait_ms > 0.0).then(|| ms(config.phantom_wait_ms));
        let mut extra_used = 0usize;
        let full = |len: usize, extra_used: usize| {
            len >= limit || (len >= want && extra_used >= extra_bytes)
        };
        for pass in 0..3 {
            loop {
                let mut progressed = false;
                for c in cursors.iter_mut() {
                    if full(out.len(), extra_used) {
                        break;
                    }
                    let Some(s) = self.streams.get(&c.id) else {
                        continue;
                    };
                    let Some(q) = s.queue.get(c.taken) else {
                        continue;
                    };
                    if (pass == 0 && c.credit <= 0.0) || (pass == 1 && !c.owed) {
                        continue;
                    }
                    if out.len() >= want {
                        extra_used += PACKED_ENTRY_LEN + q.payload.len();
                    }
                    c.credit -= s.charge(q);
                    c.taken += 1;
                    progressed = true;
                    let waited = q.deferred_since.map(|t| now.saturating_sub(t));
                    let expired = patience.zip(waited).is_some_and(|(p, w)| w >= p);
                    may_wait.push(c.patient && !expired);
                    out.push(AduView {
                        id: q.id,
                        stream_id: s.id,
                        stream_seq: q.seq,
                        length: q.payload.len() as u32,
                        queue_delay_ms: now.saturating_sub(q.inserted).as_millis() as i64,
                        fields: q.fields.clone(),
                    });
                }
                if !progressed || full(out.len(), extra_used) {
                    break;
                }
            }
        }
    }

    /// Send one packet in `slot` carrying the collected ADUs `members` (indices into
    /// `cy.adus`): one ADU as a `Data` packet, several as a `Packed` one.
    pub(super) fn transmit_packet(
        &mut self,
        now: Duration,
        slot: &TxSlot,
        members: &[usize],
        cx: &mut CycleContext<'_>,
        cy: &mut CycleScratch,
    ) {
        let Some(idx) = cx.channels.index(slot.channel) else {
            return;
        };
        cy.sent_adus.clear();
        cy.packet_adus.clear();
        let seq_peek = cx.channels[idx].next_seq_peek();
        for &a in members {
            let view = &cy.adus[a];
            let Some(stream) = self.streams.get_mut(&view.stream_id) else {
                continue;
            };
            let Some(q) = stream.take(view.id) else {
                continue;
            };
            let out = (&mut cy.sent_adus, &mut cy.packet_adus);
            self.add_to_packet(view, q, slot, seq_peek, cx, out);
        }
        self.send_packet(idx, now, cx, cy);
    }

    /// Account for ADU `q` (seen by the scheduler as `view`) going out in `slot` as packet
    /// `seq_peek`, and add it to the packet being built in `out`.
    pub(super) fn add_to_packet(
        &mut self,
        view: &AduView,
        q: QueuedAdu,
        slot: &TxSlot,
        seq_peek: u64,
        cx: &mut CycleContext<'_>,
        out: (&mut Vec<SentAdu>, &mut Vec<PendingAdu>),
    ) {
        let Some(stream) = self.streams.get_mut(&view.stream_id) else {
            return;
        };
        let (ch, p) = (slot.channel, slot.loss_probability);
        cx.recovery
            .on_transmit(view.stream_id, q.id, (ch, seq_peek), p, q.payload.len());
        if stream.config.latency_copies == 2
            && matches!(cx.recovery.kind(view.stream_id, q.id), Some(Kind::Data(_)))
        {
            // Its copy, queued just now, is to take another channel.
            self.latency.note_sent(view.stream_id, ch);
        }
        let charge = stream.charge(&q);
        stream.credit -= charge;
        if let Some(d) = self.debt.get_mut(&view.stream_id) {
            *d -= charge;
        }
        if stream.config.on_reconnect == InFlightPolicy::Resend {
            cx.resend.insert(q.id, (view.stream_id, q.clone()));
        }
        let mut flags = if stream.config.ordered {
            FLAG_ORDERED
        } else {
            0
        };
        if stream.config.recovery.is_on() {
            flags |= FLAG_RECOVERY;
        }
        let history = if self.objectives.is_empty() {
            None
        } else {
            let h = self.history_base + self.history.len() as u64;
            let mut s = slot.clone();
            s.sequence = seq_peek;
            self.history.push_back(HistoryEntry {
                adu: view.clone(),
                slot: s,
                outcome: Outcome::Pending,
            });
            while self.history.len() > cx.config.history_len {
                self.history.pop_front();
                self.history_base += 1;
            }
            Some(h)
        };
        out.0.push(SentAdu {
            adu: q.id,
            stream: view.stream_id,
            stream_seq: q.seq,
            inserted: q.inserted,
            history,
            payload: q.payload.len() as u32,
        });
        out.1.push(PendingAdu {
            id: q.id,
            flags,
            stream: view.stream_id,
            stream_seq: q.seq,
            payload: q.payload,
        });
    }

    /// Hand the packet built in `cy` to the channel at `idx`.
    pub(super) fn send_packet(
        &mut self,
        idx: usize,
        now: Duration,
        cx: &mut CycleContext<'_>,
        cy: &mut CycleScratch,
    ) {
        if cy.packet_adus.is_empty() {
            return;
        }
        let payload: usize = cy.packet_adus.iter().map(|a| a.payload.len()).sum();
        cx.flow.sent += payload as u64;
        cx.stats.adus_sent += cy.packet_adus.len() as u64;
        let send_ts = cx.send_ts;
        cx.channels
            .send_packet(idx, now, send_ts, &cy.sent_adus, &mut cy.packet_adus);
    }
}
