//! Latency objectives steer the channels (docs/congestion.md, "Latency objectives").
//!
//! While a stream with a latency bound ([`StreamConfig::latency_bound_ms`]) is active, the
//! session picks a few channels to carry it and keeps their queues short; the others run
//! their controllers untouched, so bulk data still fills them.
//!
//! - **Which channels.** Live channels whose base one-way delay leaves at least
//!   [`MIN_SLACK`] under the bound and whose average delivery rate is at least
//!   [`CARRY_FACTOR`] times the bound streams' allocation (one already chosen: the
//!   allocation once); of those, the [`BOUNDED_CHANNELS`] slowest. A bounded channel
//!   gives up part of its capacity, so the smallest cost the least; two, so that an
//!   outage of one leaves the other. The choice is reviewed every [`REVIEW`]: a member
//!   that died is replaced at once, one that no longer qualifies at the review, a
//!   healthy set only by one clearly cheaper ([`SWITCH_GAIN`]).
//! - **Their queue.** Each keeps a queue of `BUDGET_SHARE × (bound − base one-way delay)`
//!   of its rate (`channel::QueueBound` caps its bytes in flight). The rest of the slack
//!   absorbs a link that slows while that queue drains. A few slots past the cap stay
//!   open to the stream's ADUs alone (`channel::RESERVED_SLOTS`; the session takes back
//!   any the scheduler gave to bulk, [`LatencySteering::keep_reserved`]), so they do not
//!   wait for an ack to reopen a window bulk filled.
//! - **The stream's ADUs** go only on those channels. The session collects them first;
//!   after the scheduler and the fairness pass, [`LatencySteering::steer`] moves each
//!   onto the real slot of a bounded channel with the lowest expected one-way delay
//!   (base, the latest round trip's queue, and how long the link has been silent),
//!   displacing another stream's ADU, which takes its old slot; or, when no bounded
//!   channel has a slot this cycle, holds it for the next one. An ADU that has waited
//!   [`PATIENCE_SHARE`] of its bound takes the quickest real slot of any channel.
//! - **Quickest streams** (`StreamConfig::quickest`) are steered the same way with no
//!   bound: each ADU takes the real slot with the lowest expected one-way delay among all
//!   channels, if that channel's delay is within [`QUICK_SLACK_MS`] of the quickest
//!   channel's plus what the ADU has already waited; otherwise it waits for a slot of a
//!   quicker channel, since waiting longer than that a slower channel saves would be
//!   worse. The packing keeps it to such channels too.
//! - **Copies** (`StreamConfig::latency_copies = 2`). The recovery layer queues a copy
//!   of each ADU of such a stream after the ADU leaves; the copy goes on a bounded
//!   channel other than the one the ADU took, so the ADU arrives after the shorter of
//!   two queues. The queues may then be longer: while every active bound stream sends
//!   copies, the budget is [`COPIES_BUDGET_SHARE`] of the slack.
//!
//! [`StreamConfig::latency_bound_ms`]: crate::StreamConfig::latency_bound_ms

use std::time::Duration;

use horde_policy::{AduView, ChannelId, TxSlot};

use crate::channel::Channel;

/// A stream with a bound counts as active while it has ADUs queued or queued one this
/// recently: a talker's pause between words keeps the channels bounded.
pub(crate) const ACTIVE_HOLD: Duration = Duration::from_secs(1);
/// Channels bounded for the latency-bound streams.
const BOUNDED_CHANNELS: usize = 2;
/// A channel whose base one-way delay leaves less than this under the bound cannot
/// serve it: no queue short enough would.
const MIN_SLACK: Duration = Duration::from_millis(20);
/// Share of the slack (bound less the base one-way delay) a bounded channel may queue.
const BUDGET_SHARE: f64 = 0.5;
/// The same while every active bound stream sends each ADU on two channels: one of the
/// two queues running late no longer makes the ADU late.
const COPIES_BUDGET_SHARE: f64 = 0.9;
/// A channel carries the bound streams only if it delivers this many times their rate.
const CARRY_FACTOR: f64 = 4.0;
/// How often the choice of channels is reviewed.
const REVIEW: Duration = Duration::from_secs(2);
/// A healthy set of bounded channels is replaced only by one whose summed delivery rate
/// is below this share of its own: moving the bound drains one channel's queue and
/// refills another's, and voice waits meanwhile.
const SWITCH_GAIN: f64 = 0.4;
/// An ADU of a bound stream that has waited this share of its bound takes any slot.
const PATIENCE_SHARE: f64 = 0.5;
/// A channel within this of the quickest one's expected one-way delay counts as quick.
const QUICK_SLACK_MS: f64 = 5.0;

/// How [`LatencySteering::pin`] treats the ADUs of one stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Steer {
    /// Left where the scheduler puts them.
    Free,
    /// A latency bound, ms: on a bounded channel while patient.
    Bound(f64),
    /// On the quickest real slot of any channel.
    Quickest,
}

/// Whether ADU `a` may take `channel` by its limit (`limit_ms`, per ADU, empty when none
/// is limited; `expected_ms`, per channel): a channel whose delay is not known yet
/// counts as quick.
pub(crate) fn within_limit(
    limit_ms: &[f64],
    expected_ms: &[(ChannelId, f64)],
    a: usize,
    channel: ChannelId,
) -> bool {
    let Some(&limit) = limit_ms.get(a).filter(|l| l.is_finite()) else {
        return true;
    };
    expected_ms
        .iter()
        .find(|(c, _)| *c == channel)
        .is_none_or(|&(_, ms)| ms <= limit)
}

/// What the choice of bounded channels knows of one channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    pub(crate) id: ChannelId,
    pub(crate) alive: bool,
    pub(crate) base_one_way: Option<Duration>,
    /// Delivery rate averaged over the last seconds, bytes/s (0 before any).
    pub(crate) rate: f64,
}

/// The queueing budget of a channel with base one-way delay `base` under `bound`, if
/// the slack is enough to be worth it.
pub(crate) fn budget(bound: Duration, base: Duration) -> Option<Duration> {
    budget_of_share(bound, base, BUDGET_SHARE)
}

fn budget_of_share(bound: Duration, base: Duration, share: f64) -> Option<Duration> {
    let slack = bound.checked_sub(base)?;
    (slack >= MIN_SLACK).then(|| slack.mul_f64(share))
}

/// What the active latency-bound streams ask of the channels this cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Objective {
    /// The tightest bound.
    pub(crate) bound: Duration,
    /// Their summed allocation, bytes/s.
    pub(crate) need: f64,
    /// Whether every one of them sends each ADU on two channels.
    pub(crate) copies: bool,
}

/// Whether channel `c` can serve streams with `bound` needing `need` bytes/s: alive,
/// with slack under the bound, and fast enough; a channel not yet chosen (`member`
/// false) must carry [`CARRY_FACTOR`] times the need, one chosen only the need itself,
/// so a slow spell does not make the choice flap.
fn qualifies(c: &Candidate, member: bool, bound: Duration, need: f64) -> bool {
    let factor = if member { 1.0 } else { CARRY_FACTOR };
    c.alive && c.base_one_way.is_some_and(|b| budget(bound, b).is_some()) && c.rate >= factor * need
}

/// The channels to bound for streams with the tightest `bound` needing `need` bytes/s,
/// given the `current` choice, into `out`.
pub(crate) fn choose(
    candidates: &[Candidate],
    current: &[ChannelId],
    bound: Duration,
    need: f64,
    out: &mut Vec<ChannelId>,
) {
    out.clear();
    let rate_of = |id: &ChannelId| {
        candidates
            .iter()
            .find(|c| c.id == *id)
            .map_or(0.0, |c| c.rate)
    };
    let mut ok: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| qualifies(c, current.contains(&c.id), bound, need))
        .collect();
    ok.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let n = BOUNDED_CHANNELS.min(ok.len());
    let healthy = current.len() == n && current.iter().all(|id| ok.iter().any(|c| c.id == *id));
    if healthy {
        let ideal: f64 = ok[..n].iter().map(|c| c.rate).sum();
        let now: f64 = current.iter().map(rate_of).sum();
        if ideal < SWITCH_GAIN * now {
            out.extend(ok[..n].iter().map(|c| c.id));
        } else {
            out.extend_from_slice(current);
        }
        return;
    }
    // Keep the members that still qualify, then add the cheapest others.
    out.extend(
        current
            .iter()
            .filter(|id| ok.iter().any(|c| c.id == **id))
            .take(n),
    );
    for c in &ok {
        if out.len() >= n {
            break;
        }
        if !out.contains(&c.id) {
            out.push(c.id);
        }
    }
}

/// The session's latency steering: which channels are bounded, and the per-cycle pass
/// that keeps the bound streams' ADUs on them.
#[derive(Debug, Default)]
pub(crate) struct LatencySteering {
    bounded: Vec<ChannelId>,
    next_review: Duration,
    candidates: Vec<Candidate>,
    chosen: Vec<ChannelId>,
    /// Per live channel: the one-way delay a packet sent on it now is expected to see,
    /// ms (its base plus the queue its latest round trip showed).
    expected_ms: Vec<(ChannelId, f64)>,
    /// Per real slot: the ADU in it.
    holder: Vec<Option<usize>>,
    /// Per ADU collected this cycle: whether it is steered (its stream has a latency
    /// bound and channels are bounded, or is quickest).
    steered: Vec<bool>,
    /// Per ADU collected this cycle: whether it must go on a bounded channel.
    pinned: Vec<bool>,
    /// Per stream that sends copies: the channel its latest ADU (not a copy) left on.
    last_sent: Vec<(u32, ChannelId)>,
    /// Per ADU collected this cycle: the channel it must not take (a copy's original's).
    avoid: Vec<Option<ChannelId>>,
    /// Per ADU collected this cycle (empty: none limited): the largest expected one-way
    /// delay, ms, of a channel it may take; infinite but for quickest streams' ADUs.
    limit_ms: Vec<f64>,
}

impl LatencySteering {
    /// The channels whose queues are bounded now.
    pub(crate) fn bounded(&self) -> &[ChannelId] {
        &self.bounded
    }

    /// Per ADU collected this cycle: whether it may go only on a bounded channel.
    pub(crate) fn pinned(&self) -> &[bool] {
        &self.pinned
    }

    /// Per ADU collected this cycle: whether it is steered (a latency-bound stream's
    /// while channels are bounded, or a quickest stream's).
    pub(crate) fn steered(&self) -> &[bool] {
        &self.steered
    }

    /// After [`Self::steer`]: a reserved slot (`reserved`, per real slot) keeps only a
    /// steered ADU; any other ADU the scheduler put there waits for a later cycle.
    pub(crate) fn keep_reserved(
        &self,
        reserved: &[bool],
        n_real: usize,
        assignment: &mut [Option<usize>],
    ) {
        for (a, slot) in assignment.iter_mut().enumerate() {
            let on_reserved = slot.is_some_and(|s| s < n_real && reserved[s]);
            if on_reserved && !self.steered.get(a).copied().unwrap_or(false) {
                *slot = None;
            }
        }
    }

    /// Per ADU collected this cycle: the channel it may not leave on.
    pub(crate) fn avoided(&self) -> &[Option<ChannelId>] {
        &self.avoid
    }

    /// Per ADU collected this cycle: the largest expected one-way delay, ms, of a channel
    /// it may take (empty: none limited).
    pub(crate) fn limits(&self) -> &[f64] {
        &self.limit_ms
    }

    /// Per live channel: the one-way delay a packet sent on it now is expected to see, ms.
    pub(crate) fn expected(&self) -> &[(ChannelId, f64)] {
        &self.expected_ms
    }

    /// An ADU of `stream`, a stream that sends copies, left on `channel` (not a copy).
    pub(crate) fn note_sent(&mut self, stream: u32, channel: ChannelId) {
        match self.last_sent.iter_mut().find(|(s, _)| *s == stream) {
            Some(entry) => entry.1 = channel,
            None => self.last_sent.push((stream, channel)),
        }
    }

    /// After [`Self::pin`]: each pinned copy (`is_copy`) of an ADU of its stream must avoid
    /// the channel that ADU left on. One that has waited out its patience may go anywhere.
    pub(crate) fn mark_copies(&mut self, adus: &[AduView], is_copy: impl Fn(&AduView) -> bool) {
        self.avoid.clear();
        if self.pinned.is_empty() || self.last_sent.is_empty() {
            return;
        }
        for (a, pinned) in adus.iter().zip(&self.pinned) {
            let avoid = if *pinned && is_copy(a) {
                self.last_sent
                    .iter()
                    .find(|(s, _)| *s == a.stream_id)
                    .map(|&(_, c)| c)
            } else {
                None
            };
            self.avoid.push(avoid);
        }
    }

    /// Once a cycle, before the slots are counted: what the active latency-bound streams
    /// ask, `None` when there is none. Bounds or frees the channels accordingly.
    pub(crate) fn update(
        &mut self,
        now: Duration,
        objective: Option<Objective>,
        channels: &mut [Channel],
    ) {
        self.expected_ms.clear();
        for c in channels.iter().filter(|c| c.is_alive()) {
            if let Some(base) = c.base_one_way() {
                let ms = (base + c.queue_delay() + c.stall(now)).as_secs_f64() * 1e3;
                self.expected_ms.push((c.id, ms));
            }
        }
        let Some(Objective {
            bound,
            need,
            copies,
        }) = objective
        else {
            if !self.bounded.is_empty() {
                self.bounded.clear();
                for c in channels.iter_mut() {
                    c.set_queue_budget(None);
                }
            }
            return;
        };
        let failed = self
            .bounded
            .iter()
            .any(|id| !channels.iter().any(|c| c.id == *id && c.is_alive()));
        if now >= self.next_review || failed || self.bounded.is_empty() {
            self.candidates.clear();
            self.candidates.extend(channels.iter().map(|c| Candidate {
                id: c.id,
                alive: c.is_alive(),
                base_one_way: c.base_one_way(),
                rate: c.average_delivery_rate().unwrap_or(0.0),
            }));
            choose(
                &self.candidates,
                &self.bounded,
                bound,
                need,
                &mut self.chosen,
            );
            std::mem::swap(&mut self.bounded, &mut self.chosen);
            self.next_review = now + REVIEW;
        }
        let share = if copies {
            COPIES_BUDGET_SHARE
        } else {
            BUDGET_SHARE
        };
        for c in channels.iter_mut() {
            let b = if self.bounded.contains(&c.id) {
                c.base_one_way()
                    .and_then(|base| budget_of_share(bound, base, share))
            } else {
                None
            };
            c.set_queue_budget(b);
        }
    }

    /// Mark the cycle's steered ADUs (`steer` of their stream id): those of quickest
    /// streams, and, while channels are bounded, those of streams with a bound; and among
    /// the latter the ones that must go on a bounded channel: the ones that have waited
    /// less than their patience. `any_quickest`: some stream of the cycle is quickest.
    pub(crate) fn pin(
        &mut self,
        adus: &[AduView],
        any_quickest: bool,
        steer: impl Fn(u32) -> Steer,
    ) {
        self.steered.clear();
        self.pinned.clear();
        self.limit_ms.clear();
        if self.bounded.is_empty() && !any_quickest {
            return;
        }
        let quickest = self
            .expected_ms
            .iter()
            .map(|&(_, ms)| ms)
            .reduce(f64::min)
            .unwrap_or(f64::INFINITY);
        for a in adus {
            let waited = a.queue_delay_ms as f64;
            let (steered, pinned, limit) = match steer(a.stream_id) {
                Steer::Bound(b) if !self.bounded.is_empty() => {
                    (true, waited < PATIENCE_SHARE * b, f64::INFINITY)
                }
                Steer::Quickest => (true, false, quickest + QUICK_SLACK_MS + waited),
                _ => (false, false, f64::INFINITY),
            };
            self.steered.push(steered);
            self.pinned.push(pinned);
            self.limit_ms.push(limit);
        }
    }

    /// Put every steered ADU (among the first `assignment.len()` of `adus`) on
    /// the real slot with the lowest expected one-way delay, of a bounded channel if it
    /// is pinned: its own, an empty one, or one held by an ADU of another stream, which
    /// then takes the moved ADU's old slot. A pinned ADU on another channel's real slot
    /// with no bounded slot for it is held back, and its slot goes to an ADU of another
    /// stream left without a real one. Returns how many ADUs were moved or held.
    pub(crate) fn steer(
        &mut self,
        slots: &[TxSlot],
        n_real: usize,
        adus: &[AduView],
        assignment: &mut [Option<usize>],
    ) -> usize {
        if !self.steered.contains(&true) {
            return 0;
        }
        let bounded = &self.bounded;
        let (steered, pinned, avoid) = (&self.steered, &self.pinned, &self.avoid);
        let limit = &self.limit_ms;
        // A pinned ADU, or a quickest stream's, waits rather than take another slot.
        let held = |a: usize| pinned[a] || limit.get(a).is_some_and(|l| l.is_finite());
        let expected = &self.expected_ms;
        // The slot's expected one-way delay: its channel's estimate, or half the
        // slot's expected round trip.
        let delay = |s: usize| {
            expected
                .iter()
                .find(|(c, _)| *c == slots[s].channel)
                .map_or(slots[s].expected_rtt_ms / 2.0, |&(_, ms)| ms)
        };
        let holder = &mut self.holder;
        holder.clear();
        holder.resize(n_real, None);
        for (a, s) in assignment.iter().enumerate() {
            if let Some(s) = s.filter(|&s| s < n_real) {
                holder[s] = Some(a);
            }
        }
        let on_bounded = |s: usize| bounded.contains(&slots[s].channel);
        let mut moved = 0;
        for a in 0..assignment.len() {
            if !steered[a] {
                continue;
            }
            let current = assignment[a];
            let on_real = current.filter(|&s| s < n_real);
            // Rank 0: where it is; 1: an empty slot; 2: one another stream holds.
            let best = (0..n_real)
                .filter(|&s| (!pinned[a] || on_bounded(s)) && slots[s].max_size >= adus[a].length)
                .filter(|&s| avoid.get(a).is_none_or(|c| *c != Some(slots[s].channel)))
                .filter(|&s| within_limit(limit, expected, a, slots[s].channel))
                .filter_map(|s| match holder[s] {
                    Some(h) if h == a => Some((0u8, s)),
                    None => Some((1, s)),
                    Some(h) if !steered[h] => Some((2, s)),
                    Some(_) => None,
                })
                .min_by(|x, y| delay(x.1).total_cmp(&delay(y.1)).then(x.0.cmp(&y.0)));
            match best {
                Some((0, _)) => {}
                Some((_, s)) => {
                    if let Some(p) = on_real {
                        holder[p] = None;
                    }
                    if let Some(d) = holder[s] {
                        assignment[d] = current.filter(|&p| slots[p].max_size >= adus[d].length);
                        if let (Some(p), Some(_)) = (on_real, assignment[d]) {
                            holder[p] = Some(d);
                        }
                    }
                    assignment[a] = Some(s);
                    holder[s] = Some(a);
                    moved += 1;
                }
                None => {
                    let Some(p) = on_real.filter(|_| held(a)) else {
                        continue;
                    };
                    assignment[a] = None;
                    holder[p] = None;
                    let taker = (0..assignment.len()).find(|&d| {
                        !steered[d]
                            && assignment[d].is_none_or(|s| s >= n_real)
                            && slots[p].max_size >= adus[d].length
                    });
                    if let Some(d) = taker {
                        assignment[d] = Some(p);
                        holder[p] = Some(d);
                    }
                    moved += 1;
                }
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests;
