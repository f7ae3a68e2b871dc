//! The host's bandwidth estimate across all channels (ATP's Fig. 3, with the fixes written
//! in `docs/messages.md`), and the one-shot range notifications built on it.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use super::MessageError;

/// Settings of the estimator.
#[derive(Debug, Clone, PartialEq)]
pub struct EstimatorConfig {
    /// How often a sample is taken (ATP: 1 s).
    pub tick: Duration,
    /// Samples in the smoothing window (ATP: 5).
    pub window: usize,
    /// Bytes queued across the channels' send queues above which a lower usage is a real
    /// drop (ATP: 10 packets; here 10 × 1500 bytes).
    pub max_backlog_bytes: u64,
    /// The send queues' capacity in bytes (ATP: 50 packets; here 50 × 1500 bytes).
    pub queue_capacity_bytes: u64,
    /// ATP's `polldelay`, in ticks (at least 1): the probe grows by one probe per this many
    /// under-used ticks.
    pub poll_delay: u32,
    /// The floor of the probe base, bytes per second, so that an idle host still probes up
    /// from zero (ATP used a packet-pair poll there).
    pub min_probe: f64,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        Self {
            tick: Duration::from_secs(1),
            window: 5,
            max_backlog_bytes: 10 * 1500,
            queue_capacity_bytes: 50 * 1500,
            poll_delay: 1,
            min_probe: 1500.0,
        }
    }
}

/// What the driver measured over one tick, summed over all channels of the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UsageSample {
    /// Bytes the channels sent during the tick.
    pub sent_bytes: u64,
    /// Bytes waiting in the channels' send queues at the end of the tick.
    pub backlog_bytes: u64,
    /// The sum of the channels' own rate estimates (bytes per second), if known: the
    /// advertised value never exceeds it.
    pub capacity: Option<f64>,
}

/// The estimator's output, bytes per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandwidthEstimate {
    /// ATP's `curbw`: what the host allows itself over the next tick; the lower of the two
    /// when the send queues hold a backlog.
    pub budget: f64,
    /// ATP's `available`: what the application is told; higher than `budget` while probing.
    pub available: f64,
}

/// The per-host estimator. Call [`on_tick`](Self::on_tick) once per `tick`.
#[derive(Debug, Clone)]
pub struct BandwidthEstimator {
    config: EstimatorConfig,
    history: VecDeque<f64>,
    budget: f64,
    staleness: u32,
    last: Option<BandwidthEstimate>,
}

impl BandwidthEstimator {
    /// A new estimator with a budget of zero.
    pub fn new(config: EstimatorConfig) -> Result<Self, MessageError> {
        let invalid = |what, why: &str| {
            Err(MessageError::InvalidConfig {
                what,
                why: why.to_owned(),
            })
        };
        if config.tick.is_zero() {
            return invalid("estimator tick", "must be positive");
        }
        if config.window == 0 {
            return invalid("estimator window", "must hold at least 1 sample");
        }
        if config.poll_delay == 0 {
            return invalid("poll_delay", "must be at least 1 tick");
        }
        if !config.min_probe.is_finite() || config.min_probe < 0.0 {
            return invalid("min_probe", "must be a finite rate >= 0");
        }
        Ok(Self {
            config,
            history: VecDeque::new(),
            budget: 0.0,
            staleness: 0,
            last: None,
        })
    }

    /// The last estimate.
    pub fn current(&self) -> Option<BandwidthEstimate> {
        self.last
    }

    /// Takes one tick's sample and returns the new estimate.
    pub fn on_tick(&mut self, sample: UsageSample) -> BandwidthEstimate {
        let tick = self.config.tick.as_secs_f64();
        let raw = sample.sent_bytes as f64 / tick;
        self.history.push_back(raw);
        if self.history.len() > self.config.window {
            self.history.pop_front();
        }
        let mean = self.history.iter().sum::<f64>() / self.history.len() as f64;
        // Rises show at once, falls are smoothed.
        let used = raw.max(mean);
        let probe = 0.5
            * (self.config.queue_capacity_bytes as f64 / tick)
                .min(self.budget.max(self.config.min_probe));
        let mut estimate = if sample.backlog_bytes > self.config.max_backlog_bytes {
            // A real drop: send only what the link took, less what must drain first.
            self.staleness = 0;
            self.budget = (used - sample.backlog_bytes as f64 / tick).max(0.0);
            BandwidthEstimate {
                budget: self.budget,
                available: used,
            }
        } else if used < self.budget || used == 0.0 {
            // The host sent less than it could: no evidence of less capacity, so the budget
            // stays, and the advertised value probes higher with every stale tick.
            self.staleness += 1;
            let stale = f64::from(self.staleness) / f64::from(self.config.poll_delay);
            BandwidthEstimate {
                budget: self.budget,
                available: self.budget.max(used) + probe * stale,
            }
        } else {
            // Saturated: the budget grows by one probe per tick.
            self.staleness = 0;
            self.budget = used + probe;
            BandwidthEstimate {
                budget: self.budget,
                available: self.budget,
            }
        };
        if let Some(capacity) = sample.capacity.filter(|c| c.is_finite() && *c >= 0.0) {
            estimate.available = estimate.available.min(capacity);
        }
        self.last = Some(estimate);
        estimate
    }
}

/// A registered range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RangeId(pub u64);

impl fmt::Display for RangeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "range {}", self.0)
    }
}

/// The estimate left a registered range; the registration is gone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandwidthEvent {
    /// The registration.
    pub range: RangeId,
    /// Its lower bound, bytes per second.
    pub min: f64,
    /// Its upper bound, bytes per second.
    pub max: f64,
    /// The advertised estimate that left it.
    pub available: f64,
}

/// One-shot bandwidth ranges: each fires once, when the advertised estimate leaves it; the
/// application registers a new range around the new value.
#[derive(Debug, Default)]
pub struct BandwidthNotifier {
    ranges: BTreeMap<RangeId, (f64, f64)>,
    next: u64,
    events: VecDeque<BandwidthEvent>,
}

impl BandwidthNotifier {
    /// No registrations.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `[min, max]`, bytes per second.
    pub fn register(&mut self, min: f64, max: f64) -> Result<RangeId, MessageError> {
        if !(min.is_finite() && max.is_finite() && min >= 0.0 && min <= max) {
            return Err(MessageError::InvalidRange { min, max });
        }
        let id = RangeId(self.next);
        self.next += 1;
        self.ranges.insert(id, (min, max));
        Ok(id)
    }

    /// Drops a registration; false if it had fired or never existed.
    pub fn unregister(&mut self, range: RangeId) -> bool {
        self.ranges.remove(&range).is_some()
    }

    /// Registrations waiting.
    pub fn registered(&self) -> usize {
        self.ranges.len()
    }

    /// Compares a new estimate with every range; those it left fire.
    pub fn on_estimate(&mut self, estimate: &BandwidthEstimate) {
        let available = estimate.available;
        let left: Vec<RangeId> = self
            .ranges
            .iter()
            .filter(|(_, (min, max))| available < *min || available > *max)
            .map(|(id, _)| *id)
            .collect();
        for range in left {
            let (min, max) = self.ranges.remove(&range).expect("listed");
            self.events.push_back(BandwidthEvent {
                range,
                min,
                max,
                available,
            });
        }
    }

    /// The next notification.
    pub fn poll_event(&mut self) -> Option<BandwidthEvent> {
        self.events.pop_front()
    }
}
