//! One bandwidth estimate for a host with several connections: each connection's
//! message endpoint reports its own channels' usage once per tick, and the host's
//! estimator takes the sum of a round of reports as one sample.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{BandwidthEstimate, BandwidthEstimator, EstimatorConfig, MessageError, UsageSample};

/// A member of the pool: one connection's endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemberId(u64);

/// The estimator of a host's channels, fed by several members that tick on their own
/// clocks. A round of reports becomes one sample when every member has reported, or at
/// the first report a tick after the round began (a member that stalls or left without
/// leaving must not stop the estimate); a member that reports twice closes the round
/// with what it has.
#[derive(Debug)]
pub struct PooledEstimator {
    estimator: BandwidthEstimator,
    tick: Duration,
    members: BTreeSet<MemberId>,
    next_member: u64,
    /// The round being gathered: when its first report came, who reported, their sum.
    round_start: Duration,
    reported: BTreeSet<MemberId>,
    sum: Option<UsageSample>,
    /// How many estimates there have been: a member compares it with the last it read.
    estimates: u64,
}

impl PooledEstimator {
    /// No member yet; `config` as [`BandwidthEstimator::new`]'s.
    pub fn new(config: EstimatorConfig) -> Result<Self, MessageError> {
        let tick = config.tick;
        Ok(Self {
            estimator: BandwidthEstimator::new(config)?,
            tick,
            members: BTreeSet::new(),
            next_member: 0,
            round_start: Duration::ZERO,
            reported: BTreeSet::new(),
            sum: None,
            estimates: 0,
        })
    }

    /// How often members report.
    pub fn tick(&self) -> Duration {
        self.tick
    }

    /// A new member, expected in every round from now on.
    pub fn join(&mut self) -> MemberId {
        let id = MemberId(self.next_member);
        self.next_member += 1;
        self.members.insert(id);
        id
    }

    /// A member that leaves: a round waiting only for it closes.
    pub fn leave(&mut self, member: MemberId) {
        self.members.remove(&member);
        self.close_if_complete();
    }

    /// `member`'s channels' usage over its last tick, at `now`.
    pub fn report(&mut self, now: Duration, member: MemberId, sample: UsageSample) {
        let late = now.saturating_sub(self.round_start) >= self.tick;
        if self.sum.is_some() && (self.reported.contains(&member) || late) {
            self.close();
        }
        let sum = match self.sum.take() {
            None => {
                self.round_start = now;
                sample
            }
            Some(s) => UsageSample {
                sent_bytes: s.sent_bytes + sample.sent_bytes,
                backlog_bytes: s.backlog_bytes + sample.backlog_bytes,
                capacity: match (s.capacity, sample.capacity) {
                    (Some(a), Some(b)) => Some(a + b),
                    (a, b) => a.or(b),
                },
            },
        };
        self.sum = Some(sum);
        self.reported.insert(member);
        self.close_if_complete();
    }

    /// The latest estimate and its number (1 for the first).
    pub fn current(&self) -> Option<(u64, BandwidthEstimate)> {
        Some((self.estimates, self.estimator.current()?))
    }

    fn close_if_complete(&mut self) {
        if self.sum.is_some() && self.members.iter().all(|m| self.reported.contains(m)) {
            self.close();
        }
    }

    fn close(&mut self) {
        if let Some(sample) = self.sum.take() {
            self.estimator.on_tick(sample);
            self.estimates += 1;
        }
        self.reported.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sent_bytes: u64) -> UsageSample {
        UsageSample {
            sent_bytes,
            backlog_bytes: 0,
            capacity: Some(1e9),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_round_is_one_sample_of_every_member_s_usage() {
        let mut pool = PooledEstimator::new(EstimatorConfig::default()).unwrap();
        let (a, b) = (pool.join(), pool.join());
        pool.report(ms(1_000), a, sample(100_000));
        assert!(pool.current().is_none(), "b has not reported");
        pool.report(ms(1_300), b, sample(50_000));
        let (n, first) = pool.current().unwrap();
        assert_eq!(n, 1);
        // One estimator alone, fed the sum, says the same.
        let mut alone = BandwidthEstimator::new(EstimatorConfig::default()).unwrap();
        assert_eq!(first, alone.on_tick(sample(150_000)));
        assert!(first.available >= 150_000.0, "{first:?}");
    }

    #[test]
    fn a_silent_member_delays_a_round_by_a_tick_at_most_and_leaving_releases_it() {
        let mut pool = PooledEstimator::new(EstimatorConfig::default()).unwrap();
        let (a, b) = (pool.join(), pool.join());
        pool.report(ms(1_000), a, sample(100_000));
        // a reports again a tick later: the round closes with a's usage alone.
        pool.report(ms(2_000), a, sample(100_000));
        assert_eq!(pool.current().unwrap().0, 1);
        // b leaves: the round that waited for it closes at once.
        pool.leave(b);
        assert_eq!(pool.current().unwrap().0, 2);
        pool.report(ms(3_000), a, sample(100_000));
        assert_eq!(pool.current().unwrap().0, 3, "a alone completes each round");
    }
}
