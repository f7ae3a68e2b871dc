//! What one seed runs: links, streams and a fault schedule, all drawn from the seed.
//!
//! Drawing is the only place the seed's randomness is spent on the run's shape; the
//! world that executes the plan draws its packet-level coin flips from a second stream
//! derived from the same seed, so removing a fault from a plan (shrinking) leaves every
//! other part of the plan as it was.

use std::time::Duration;

use horde_links::{DelaySpec, LinkSpec, LossSpec, RateSpec};
use horde_proto::{CcConfig, InFlightPolicy, SessionConfig, StreamConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// One link: both directions and the congestion controller its channel runs.
#[derive(Debug, Clone)]
pub struct LinkPlan {
    /// Client to server.
    pub up: LinkSpec,
    /// Server to client.
    pub down: LinkSpec,
    /// The bottleneck rate of the up direction, kbit/s.
    pub up_kbps: f64,
    pub congestion: CcConfig,
}

/// What feeds a stream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Feed {
    /// One ADU of `size` bytes every `interval`.
    Cbr { size: u32, interval_ms: u64 },
    /// Keeps `depth` ADUs of `size` bytes waiting whenever the session is up.
    Bulk { size: u32, depth: usize },
}

#[derive(Debug, Clone)]
pub struct StreamPlan {
    pub id: u32,
    pub feed: Feed,
    pub config: StreamConfig,
}

/// One injected fault. Faults with a duration hold from `at` to `at + length`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultKind {
    /// The link carries nothing either way, then comes back.
    LinkDeath { link: usize },
    /// The client process dies (all its state is gone) and starts again after the fault.
    ClientCrash,
    /// The server process dies and starts again after the fault.
    ServerCrash,
    /// Every client interface gets a new public port, as after a NAT rebinding.
    NatRebind,
    /// Extra loss on a link (both directions), with probability `p` per packet.
    Loss { link: usize, p: f64 },
    /// Packets duplicated with probability `p`.
    Duplicate { link: usize, p: f64 },
    /// Packets held back `extra_ms` with probability `p`, so later ones overtake them.
    Reorder { link: usize, p: f64, extra_ms: u64 },
    /// One bit flipped with probability `p`.
    Corrupt { link: usize, p: f64 },
    /// Packets cut short with probability `p`.
    Truncate { link: usize, p: f64 },
    /// The host's clock jumps forward by `jump_ms` (host 0 is the client, 1 the server).
    ClockJump { host: usize, jump_ms: u64 },
    /// The receiving application stops reading.
    AppPause,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fault {
    #[serde(serialize_with = "as_ms")]
    pub at: Duration,
    #[serde(serialize_with = "as_ms")]
    pub length: Duration,
    pub kind: FaultKind,
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

impl Fault {
    pub fn end(&self) -> Duration {
        self.at + self.length
    }
}

/// Everything a seed runs.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub seed: u64,
    pub links: Vec<LinkPlan>,
    pub streams: Vec<StreamPlan>,
    pub faults: Vec<Fault>,
    pub session: SessionConfig,
    /// The receiver's buffer of delivered, unread payload bytes.
    pub recv_buffer: usize,
    /// No fault holds after this time.
    pub quiet_from: Duration,
    /// When the client closes; the run then drains until `end() + drain`.
    pub close_at: Duration,
}

/// Bounds of the random draw.
#[derive(Debug, Clone, Copy)]
pub struct DrawLimits {
    /// Faults start within `[1 s, fault_window]`.
    pub fault_window: Duration,
    /// Quiet time between the last fault's end and the close.
    pub quiet: Duration,
    pub max_faults: usize,
}

impl Default for DrawLimits {
    fn default() -> Self {
        Self {
            fault_window: Duration::from_secs(10),
            quiet: Duration::from_secs(10),
            max_faults: 8,
        }
    }
}

/// The session settings every seed uses: lifecycle timers short enough that a dead
/// session is noticed, and replaced, well inside one run.
pub fn vopr_session(seed: u64) -> SessionConfig {
    SessionConfig {
        seed,
        idle_timeout_ms: 3_000.0,
        keepalive_ms: 500.0,
        hello_interval_ms: 250.0,
        close_timeout_ms: 1_000.0,
        close_retry_ms: 100.0,
        ..SessionConfig::default()
    }
}

fn draw_link(rng: &mut ChaCha8Rng) -> LinkPlan {
    let up_kbps = f64::from(rng.gen_range(200u32..=1500));
    let down_kbps = f64::from(rng.gen_range(200u32..=1500));
    let delay_ms = f64::from(rng.gen_range(10u32..=120));
    let delay = if rng.gen_bool(0.5) {
        DelaySpec::Constant { ms: delay_ms }
    } else {
        DelaySpec::Gaussian {
            mean_ms: delay_ms,
            sd_ms: f64::from(rng.gen_range(1u32..=15)),
        }
    };
    let loss = match rng.gen_range(0..3) {
        0 => None,
        1 => Some(LossSpec::Bernoulli {
            p: rng.gen_range(0.0..0.03),
        }),
        _ => Some(LossSpec::GilbertElliott {
            p_good_to_bad: rng.gen_range(0.001..0.01),
            p_bad_to_good: rng.gen_range(0.2..0.6),
            loss_in_good: 0.0,
            loss_in_bad: 1.0,
        }),
    };
    // About 200 ms of the bottleneck, and never less than a few packets.
    let buffer = |kbps: f64| Some(((kbps * 1000.0 / 8.0 * 0.2) as u64).max(8_000));
    let spec = |kbps: f64| LinkSpec {
        rate: Some(RateSpec::Constant { kbps }),
        buffer_bytes: buffer(kbps),
        loss: loss.clone(),
        delay: Some(delay.clone()),
        qdisc: None,
    };
    let congestion = match rng.gen_range(0..3) {
        0 => CcConfig::with_defaults("cubic"),
        1 => CcConfig::with_defaults("bbr"),
        _ => Some(CcConfig::Cbr {
            kbps: up_kbps * rng.gen_range(0.5..0.9),
            burst_ms: 20.0,
        }),
    }
    .unwrap_or_default();
    LinkPlan {
        up: spec(up_kbps),
        down: spec(down_kbps),
        up_kbps,
        congestion,
    }
}

fn draw_stream(rng: &mut ChaCha8Rng, id: u32) -> StreamPlan {
    let feed = if rng.gen_bool(0.4) {
        Feed::Bulk {
            size: rng.gen_range(200..=1100),
            depth: 16,
        }
    } else {
        Feed::Cbr {
            size: rng.gen_range(40..=1100),
            interval_ms: rng.gen_range(10..=100),
        }
    };
    let config = StreamConfig {
        ordered: rng.gen_bool(0.3),
        on_reconnect: if rng.gen_bool(0.5) {
            InFlightPolicy::Resend
        } else {
            InFlightPolicy::Nack
        },
        max_queue_bytes: rng.gen_range(16_000..=128_000),
        ..StreamConfig::default()
    };
    StreamPlan { id, feed, config }
}

fn draw_fault(rng: &mut ChaCha8Rng, links: usize, window: Duration) -> Fault {
    let at = Duration::from_millis(rng.gen_range(1_000..=window.as_millis().max(1_001) as u64));
    let ms = |rng: &mut ChaCha8Rng, lo: u64, hi: u64| Duration::from_millis(rng.gen_range(lo..=hi));
    let link = rng.gen_range(0..links);
    let (kind, length) = match rng.gen_range(0..11) {
        0 => (FaultKind::LinkDeath { link }, ms(rng, 200, 5_000)),
        1 => (FaultKind::ClientCrash, ms(rng, 50, 2_000)),
        2 => (FaultKind::ServerCrash, ms(rng, 50, 2_000)),
        3 => (FaultKind::NatRebind, Duration::ZERO),
        4 => (
            FaultKind::Loss {
                link,
                p: rng.gen_range(0.05..0.5),
            },
            ms(rng, 200, 4_000),
        ),
        5 => (
            FaultKind::Duplicate {
                link,
                p: rng.gen_range(0.05..0.5),
            },
            ms(rng, 200, 4_000),
        ),
        6 => (
            FaultKind::Reorder {
                link,
                p: rng.gen_range(0.05..0.5),
                extra_ms: rng.gen_range(5..=300),
            },
            ms(rng, 200, 4_000),
        ),
        7 => (
            FaultKind::Corrupt {
                link,
                p: rng.gen_range(0.05..0.5),
            },
            ms(rng, 200, 4_000),
        ),
        8 => (
            FaultKind::Truncate {
                link,
                p: rng.gen_range(0.05..0.5),
            },
            ms(rng, 200, 4_000),
        ),
        9 => (
            FaultKind::ClockJump {
                host: rng.gen_range(0..2),
                jump_ms: rng.gen_range(100..=8_000),
            },
            Duration::ZERO,
        ),
        _ => (FaultKind::AppPause, ms(rng, 200, 5_000)),
    };
    Fault { at, length, kind }
}

impl RunPlan {
    /// The run seed `seed` draws.
    pub fn draw(seed: u64, limits: DrawLimits) -> RunPlan {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let links: Vec<LinkPlan> = (0..rng.gen_range(2..=4))
            .map(|_| draw_link(&mut rng))
            .collect();
        let streams = (0..rng.gen_range(1..=3))
            .map(|i| draw_stream(&mut rng, i + 1))
            .collect();
        let mut faults: Vec<Fault> = (0..rng.gen_range(1..=limits.max_faults.max(1)))
            .map(|_| draw_fault(&mut rng, links.len(), limits.fault_window))
            .collect();
        faults.sort_by_key(|f| f.at);
        let recv_buffer = rng.gen_range(32_000..=256_000);
        let mut plan = RunPlan {
            seed,
            links,
            streams,
            faults,
            session: vopr_session(seed ^ 0x5E55_1011),
            recv_buffer,
            quiet_from: Duration::ZERO,
            close_at: Duration::ZERO,
        };
        plan.set_quiet(limits.quiet);
        plan
    }

    /// Recompute when the faults end and when the client closes, `quiet` later.
    pub fn set_quiet(&mut self, quiet: Duration) {
        self.quiet_from = self
            .faults
            .iter()
            .map(Fault::end)
            .max()
            .unwrap_or(Duration::from_secs(1));
        self.close_at = self.quiet_from + quiet;
    }

    /// Keep only the faults at the given indices (for shrinking a failing seed).
    pub fn keep_faults(&mut self, keep: &[usize], quiet: Duration) {
        let mut i = 0;
        self.faults.retain(|_| {
            let k = keep.contains(&i);
            i += 1;
            k
        });
        self.set_quiet(quiet);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_plan_and_others_differ() {
        let a = RunPlan::draw(7, DrawLimits::default());
        let b = RunPlan::draw(7, DrawLimits::default());
        assert_eq!(a.faults, b.faults);
        assert_eq!(a.links.len(), b.links.len());
        let differs = (8..20).any(|s| RunPlan::draw(s, DrawLimits::default()).faults != a.faults);
        assert!(differs);
    }

    #[test]
    fn every_fault_kind_is_drawn_and_faults_end_before_the_quiet_time() {
        let mut kinds = std::collections::HashSet::new();
        for seed in 0..200 {
            let p = RunPlan::draw(seed, DrawLimits::default());
            assert!((2..=4).contains(&p.links.len()));
            for f in &p.faults {
                assert!(f.end() <= p.quiet_from);
                kinds.insert(std::mem::discriminant(&f.kind));
            }
            assert!(p.close_at >= p.quiet_from + Duration::from_secs(10));
        }
        assert_eq!(kinds.len(), 11);
    }
}
