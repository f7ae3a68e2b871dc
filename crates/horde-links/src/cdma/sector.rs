//! One CDMA2000 sector: the per-user base-station buffers and the scheduler that grants
//! each user a rate from its backlog, advanced lazily to the time the caller gives.
//!
//! Rates change only at scheduler decisions (every `decision_ms`) and at the end of SCH
//! bursts; between them every user's queue drains at a constant rate, so completion times
//! are exact. A packet completes when its last byte has been sent over the air and comes
//! out `delay` later; the delay is constant, so delivery is in order.

use std::collections::VecDeque;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::limiter::{ms, Limiter};
use super::params::CdmaParams;
use crate::{Delivery, LinkStats, Verdict};

const SECOND: Duration = Duration::from_secs(1);

/// One second of one user's channel, as the thesis's CAIT and PCMD logs give it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CdmaSecond {
    /// Start of the second, in whole seconds since the run began.
    pub second: u64,
    /// Time-average of the assigned rate over the second (kbit/s).
    pub assigned_kbps: f64,
    /// Bits offered to the base-station buffer, accepted or not (kbit/s).
    pub offered_kbps: f64,
    /// Bits whose transmission over the air completed (kbit/s).
    pub served_kbps: f64,
    /// Packets refused by the full buffer.
    pub drops: u32,
    /// Bytes in the buffer at the end of the second.
    pub backlog_bytes: u64,
    /// Pilot Ec/Io of the second (dB); generated, does not steer the scheduler.
    pub ecio_db: f64,
    /// Active calls in the sector; generated, does not steer the scheduler.
    pub calls: u32,
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    id: u64,
    size: u32,
}

#[derive(Debug, Clone, Copy)]
struct Out {
    at: Duration,
    id: u64,
    size: u32,
}

#[derive(Debug)]
struct User {
    queue: VecDeque<Queued>,
    /// Bytes of the head packet not yet sent.
    head_left: f64,
    queued_bytes: u64,
    rate_kbps: f64,
    /// Index into `sch_kbps` of the SCH held, and until when.
    sch: Option<(usize, Duration)>,
    limiter: Limiter,
    served_kbit_since_decision: f64,
    out: VecDeque<Out>,
    stats: LinkStats,
    /// Assigned rate integrated over the whole run (kbit), for the run's mean.
    total_rate_kbit: f64,
    // The second being accumulated.
    acc_rate_kbit: f64,
    acc_offered_bytes: u64,
    acc_served_bytes: u64,
    acc_drops: u32,
    series: Vec<CdmaSecond>,
}

/// A sector shared by `users` users, each with its own buffer and limiter.
#[derive(Debug)]
pub struct CdmaSector {
    p: CdmaParams,
    buffer_bytes: u64,
    delay: Duration,
    users: Vec<User>,
    rng: ChaCha8Rng,
    clock: Duration,
    last_decision: Duration,
    next_decision: Duration,
    next_second: Duration,
    record: bool,
    ecio_db: f64,
    calls: f64,
}

impl CdmaSector {
    /// A sector with `users` users; `params` must be valid ([`CdmaParams::validate`]).
    /// With `record`, a [`CdmaSecond`] per user per second is kept ([`CdmaSector::series`]).
    pub fn new(
        params: CdmaParams,
        users: usize,
        buffer_bytes: u64,
        delay: Duration,
        seed: u64,
        record: bool,
    ) -> CdmaSector {
        let fch = params.fch_kbps;
        let users = (0..users)
            .map(|_| User {
                queue: VecDeque::new(),
                head_left: 0.0,
                queued_bytes: 0,
                rate_kbps: fch,
                sch: None,
                limiter: Limiter::new(&params),
                served_kbit_since_decision: 0.0,
                out: VecDeque::new(),
                stats: LinkStats::default(),
                total_rate_kbit: 0.0,
                acc_rate_kbit: 0.0,
                acc_offered_bytes: 0,
                acc_served_bytes: 0,
                acc_drops: 0,
                series: Vec::new(),
            })
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(3);
        CdmaSector {
            ecio_db: params.ecio_mean_db,
            calls: params.calls_mean.round(),
            next_decision: Duration::ZERO,
            p: params,
            buffer_bytes,
            delay,
            users,
            rng,
            clock: Duration::ZERO,
            last_decision: Duration::ZERO,
            next_second: SECOND,
            record,
        }
    }

    /// Number of users.
    pub fn users(&self) -> usize {
        self.users.len()
    }

    /// The per-second log of `user` (empty unless built with `record`).
    pub fn series(&self, user: usize) -> &[CdmaSecond] {
        &self.users[user].series
    }

    /// How many times `user` was cut (long-term limiter) and capped (burst limiter).
    pub fn limiter_events(&self, user: usize) -> (u32, u32) {
        let l = &self.users[user].limiter;
        (l.denials, l.caps)
    }

    /// The rate `user` is assigned now (kbit/s).
    pub fn assigned_kbps(&self, user: usize) -> f64 {
        self.users[user].rate_kbps
    }

    /// The mean rate `user` was assigned from time zero to the sector's clock (kbit/s),
    /// FCH periods included; `None` before the sector has run. This is what a trace of
    /// the assigned channel rate averages to (seed 003's CAIT average, §7.1.2).
    pub fn mean_assigned_kbps(&self, user: usize) -> Option<f64> {
        let t = self.clock.as_secs_f64();
        (t > 0.0).then(|| self.users[user].total_rate_kbit / t)
    }

    pub(crate) fn stats(&self, user: usize) -> LinkStats {
        self.users[user].stats
    }

    /// Offer a packet to `user`'s buffer at `now`.
    pub fn enqueue(&mut self, user: usize, now: Duration, id: u64, size: u32) -> Verdict {
        self.advance(now);
        let buffer = self.buffer_bytes;
        let u = &mut self.users[user];
        u.stats.offered += 1;
        u.acc_offered_bytes += u64::from(size);
        if u.queued_bytes + u64::from(size) > buffer {
            u.stats.queue_drops += 1;
            u.acc_drops += 1;
            return Verdict::QueueFull;
        }
        if u.queue.is_empty() {
            u.head_left = f64::from(size);
        }
        u.queue.push_back(Queued { id, size });
        u.queued_bytes += u64::from(size);
        Verdict::Queued
    }

    /// The earliest time something may come out for `user` (a lower bound while its
    /// buffer is not empty: the next scheduler decision may change its rate).
    pub fn next_delivery(&self, user: usize) -> Option<Duration> {
        let u = &self.users[user];
        let queued = if u.queue.is_empty() {
            None
        } else {
            let boundary = self.next_decision.min(self.next_second);
            let finish = if u.rate_kbps > 0.0 {
                let t =
                    self.clock + Duration::from_secs_f64(u.head_left * 8.0 / (u.rate_kbps * 1e3));
                t.min(boundary)
            } else {
                boundary
            };
            Some(finish.max(self.clock) + self.delay)
        };
        match (u.out.front().map(|o| o.at), queued) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Move `user`'s packets due by `now` into `out`.
    pub fn deliver(&mut self, user: usize, now: Duration, out: &mut Vec<Delivery>) {
        self.advance(now);
        let u = &mut self.users[user];
        while let Some(o) = u.out.front() {
            if o.at > now {
                break;
            }
            let o = *o;
            u.out.pop_front();
            u.stats.delivered += 1;
            u.stats.bytes_delivered += u64::from(o.size);
            out.push(Delivery { id: o.id, at: o.at });
        }
    }

    /// Run the sector up to `now` (earlier times are ignored: the sector never goes back).
    pub fn advance(&mut self, now: Duration) {
        loop {
            if self.clock >= self.next_second {
                self.close_second();
                continue;
            }
            if self.clock >= self.next_decision {
                self.decide();
                continue;
            }
            if self.clock >= now {
                return;
            }
            let end = now.min(self.next_decision).min(self.next_second);
            self.serve(end);
        }
    }

    /// Drain every queue from `clock` to `end` at the current rates.
    fn serve(&mut self, end: Duration) {
        let start = self.clock;
        let dt = (end - start).as_secs_f64();
        for u in &mut self.users {
            u.acc_rate_kbit += u.rate_kbps * dt;
            u.total_rate_kbit += u.rate_kbps * dt;
            if u.rate_kbps <= 0.0 {
                continue;
            }
            let bytes_per_s = u.rate_kbps * 125.0;
            let mut budget = bytes_per_s * dt;
            let mut used = 0.0;
            while let Some(&head) = u.queue.front() {
                if u.head_left > budget + 1e-9 {
                    u.head_left -= budget;
                    used += budget;
                    break;
                }
                used += u.head_left;
                budget -= u.head_left;
                let done = start + Duration::from_secs_f64(used / bytes_per_s);
                u.out.push_back(Out {
                    at: done.min(end) + self.delay,
                    id: head.id,
                    size: head.size,
                });
                u.queue.pop_front();
                u.queued_bytes -= u64::from(head.size);
                u.acc_served_bytes += u64::from(head.size);
                u.head_left = u.queue.front().map_or(0.0, |q| f64::from(q.size));
            }
            u.served_kbit_since_decision += used * 8.0 / 1e3;
        }
        self.clock = end;
    }

    /// A scheduler decision at `clock`: charge the limiters, end expired bursts, and
    /// grant SCH rates to backlogged users in priority order.
    fn decide(&mut self) {
        let now = self.clock;
        let params = self.p.clone();
        let p = &params;
        let dt = (now - self.last_decision).as_secs_f64();
        self.last_decision = now;
        self.next_decision = now + ms(p.decision_ms);
        let levels = p.sch_levels_allowed();
        for u in &mut self.users {
            u.limiter.charge(
                p,
                now,
                dt,
                std::mem::take(&mut u.served_kbit_since_decision),
            );
            let ceiling = u.limiter.ceiling_kbps(p, now);
            if let Some((level, until)) = u.sch {
                let over = ceiling.is_some_and(|c| p.sch_kbps[level] > c);
                if until <= now || over || level >= levels {
                    u.sch = None;
                }
            }
        }
        // Grants in priority order: the user who joined the sector first wins, and may
        // take back SCH rates held by later users (the thesis saw one user dominate).
        for i in 0..self.users.len() {
            let u = &self.users[i];
            let ceiling = u.limiter.ceiling_kbps(p, now);
            if u.sch.is_some() || u.queued_bytes == 0 {
                continue;
            }
            let demand = u.queued_bytes as f64 * 8.0 / p.drain_horizon_ms; // kbit/s
            if demand <= p.fch_kbps {
                continue;
            }
            let want = p
                .sch_kbps
                .iter()
                .position(|&r| r >= demand)
                .unwrap_or(p.sch_kbps.len() - 1)
                .min(levels - 1);
            for l in (0..=want).rev() {
                if ceiling.is_some_and(|c| p.sch_kbps[l] > c) {
                    continue;
                }
                if self.make_room(i, l) {
                    let len = self.rng.gen_range(p.burst_min_ms..=p.burst_max_ms);
                    self.users[i].sch = Some((l, now + ms(len)));
                    break;
                }
            }
        }
        for u in &mut self.users {
            let ceiling = u.limiter.ceiling_kbps(p, now);
            u.rate_kbps = match (u.sch, ceiling) {
                (Some((l, _)), _) => p.sch_kbps[l],
                (None, Some(c)) => c.min(p.fch_kbps),
                (None, None) => p.fch_kbps,
            };
            if let Some((_, until)) = u.sch {
                // The burst's end is a decision point of its own.
                self.next_decision = self.next_decision.min(until);
            }
        }
    }

    /// Whether user `i` can get SCH level `l`, revoking grants of users after it
    /// (latest first) if the sector's holder caps or power budget are in the way.
    fn make_room(&mut self, i: usize, l: usize) -> bool {
        let p = &self.p;
        loop {
            let holders = self
                .users
                .iter()
                .filter(|u| u.sch.is_some_and(|(x, _)| x == l))
                .count() as u32;
            let used: f64 = self
                .users
                .iter()
                .filter_map(|u| u.sch.map(|(x, _)| p.sch_kbps[x]))
                .sum();
            if holders < p.sch_holders[l] && used + p.sch_kbps[l] <= p.sector_sch_kbps + 1e-9 {
                return true;
            }
            match (i + 1..self.users.len())
                .rev()
                .find(|&j| self.users[j].sch.is_some())
            {
                Some(j) => self.users[j].sch = None,
                None => return false,
            }
        }
    }

    /// Close the second that ends at `clock`: log it and draw the next Ec/Io and load.
    fn close_second(&mut self) {
        let second = self.next_second.as_secs() - 1;
        self.next_second += SECOND;
        let p = &self.p;
        let noise: f64 = StandardNormal.sample(&mut self.rng);
        self.ecio_db = p.ecio_mean_db
            + p.ecio_rho * (self.ecio_db - p.ecio_mean_db)
            + p.ecio_sd_db * (1.0 - p.ecio_rho * p.ecio_rho).sqrt() * noise;
        // A slow birth-death walk of calls around the long-run mean.
        let step: f64 = self.rng.gen();
        let up = 0.05 * (1.0 + (p.calls_mean - self.calls) / (p.calls_mean + 1.0)).clamp(0.0, 2.0);
        if step < up {
            self.calls += 1.0;
        } else if step < 0.1 {
            self.calls -= 1.0;
        }
        self.calls = self.calls.clamp(0.0, f64::from(p.calls_max));
        for u in &mut self.users {
            if self.record {
                u.series.push(CdmaSecond {
                    second,
                    assigned_kbps: u.acc_rate_kbit,
                    offered_kbps: u.acc_offered_bytes as f64 * 8.0 / 1e3,
                    served_kbps: u.acc_served_bytes as f64 * 8.0 / 1e3,
                    drops: u.acc_drops,
                    backlog_bytes: u.queued_bytes,
                    ecio_db: self.ecio_db,
                    calls: self.calls as u32,
                });
            }
            u.acc_rate_kbit = 0.0;
            u.acc_offered_bytes = 0;
            u.acc_served_bytes = 0;
            u.acc_drops = 0;
        }
    }
}
