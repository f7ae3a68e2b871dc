//! Counters and release-time error statistics, per channel and direction.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use crate::histogram::Histogram;

/// One direction of a channel: `Up` is client → server, `Down` is server → client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Up,
    Down,
}

impl Direction {
    pub const BOTH: [Direction; 2] = [Direction::Up, Direction::Down];

    pub(crate) fn index(self) -> usize {
        match self {
            Direction::Up => 0,
            Direction::Down => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Counters of one direction of one channel.
///
/// Every offered packet is delivered, dropped, or still inside the link:
/// `offered = delivered + dropped_queue + dropped_loss + dropped_down + dropped_other +
/// in_flight`. `dropped_loss` is the link model's own count, which it updates when a
/// lost packet's departure time has passed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectionStats {
    /// Packets received from the sending side.
    pub offered: u64,
    pub offered_bytes: u64,
    /// Packets sent out of the emulator.
    pub delivered: u64,
    pub delivered_bytes: u64,
    /// Tail drops: the link's buffer was full.
    pub dropped_queue: u64,
    /// Dropped by the link model's loss process.
    pub dropped_loss: u64,
    /// Dropped because the channel was down on arrival or at release.
    pub dropped_down: u64,
    /// Dropped for another reason: no client address known yet for a reply, a failed
    /// send, or a payload held longer than the emulator keeps payloads.
    pub dropped_other: u64,
    /// Packets inside the link model (queued, serializing or propagating).
    pub in_flight: u64,
    /// Actual send time minus the model's scheduled delivery time.
    pub release_error: Histogram,
    /// Per-packet one-way delay through the link model (queueing, serialization and
    /// propagation): scheduled delivery time minus arrival.
    pub transit: Histogram,
    /// For a link whose scheduler sets the rate (the CDMA model), the mean rate it
    /// assigned so far, kbit/s.
    pub assigned_kbps: Option<f64>,
}

/// Stats of one channel.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelStats {
    pub name: String,
    /// The client-facing address of the channel.
    pub client_addr: SocketAddr,
    /// Whether the channel is down at the time of the snapshot.
    pub link_down: bool,
    pub up: DirectionStats,
    pub down: DirectionStats,
}

impl DirectionStats {
    /// Every packet accounted for: delivered, dropped, or in flight.
    pub fn accounted(&self) -> u64 {
        self.delivered
            + self.dropped_queue
            + self.dropped_loss
            + self.dropped_down
            + self.dropped_other
            + self.in_flight
    }
}

impl ChannelStats {
    pub fn direction(&self, dir: Direction) -> &DirectionStats {
        match dir {
            Direction::Up => &self.up,
            Direction::Down => &self.down,
        }
    }
}

/// A snapshot of every channel.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Time since the emulator started.
    pub elapsed: Duration,
    pub channels: Vec<ChannelStats>,
}

impl Stats {
    pub fn channel(&self, name: &str) -> Option<&ChannelStats> {
        self.channels.iter().find(|c| c.name == name)
    }

    /// Release-time error over every channel and direction.
    pub fn release_error(&self) -> Histogram {
        let mut all = Histogram::new();
        for c in &self.channels {
            all.merge(&c.up.release_error);
            all.merge(&c.down.release_error);
        }
        all
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "t = {:.1} s", self.elapsed.as_secs_f64())?;
        writeln!(
            f,
            "{:<12} {:<4} {:<5} {:>9} {:>9} {:>10} {:>7} {:>7} {:>7} {:>7} {:>6} {:>8} {:>8} {:>8}",
            "channel",
            "dir",
            "state",
            "offered",
            "delivered",
            "MB out",
            "q-drop",
            "loss",
            "down",
            "other",
            "in-fl",
            "p50 us",
            "p99 us",
            "max us"
        )?;
        for c in &self.channels {
            let state = if c.link_down { "DOWN" } else { "up" };
            for dir in Direction::BOTH {
                let d = c.direction(dir);
                let h = &d.release_error;
                writeln!(
                    f,
                    "{:<12} {:<4} {:<5} {:>9} {:>9} {:>10.3} {:>7} {:>7} {:>7} {:>7} {:>6} {:>8.1} {:>8.1} {:>8.1}",
                    c.name,
                    dir.as_str(),
                    state,
                    d.offered,
                    d.delivered,
                    d.delivered_bytes as f64 / 1e6,
                    d.dropped_queue,
                    d.dropped_loss,
                    d.dropped_down,
                    d.dropped_other,
                    d.in_flight,
                    us(h.quantile(0.5)),
                    us(h.quantile(0.99)),
                    us(h.max()),
                )?;
            }
        }
        for c in &self.channels {
            for dir in Direction::BOTH {
                if let Some(kbps) = c.direction(dir).assigned_kbps {
                    writeln!(
                        f,
                        "{} {}: mean assigned rate {kbps:.1} kbit/s",
                        c.name,
                        dir.as_str()
                    )?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_every_channel_direction() {
        let mut up = DirectionStats {
            offered: 10,
            delivered: 9,
            dropped_loss: 1,
            ..Default::default()
        };
        up.release_error.record(Duration::from_micros(40));
        let stats = Stats {
            elapsed: Duration::from_secs(2),
            channels: vec![ChannelStats {
                name: "lte1".into(),
                client_addr: "127.0.0.1:9".parse().unwrap(),
                link_down: true,
                up,
                down: DirectionStats::default(),
            }],
        };
        let text = stats.to_string();
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("lte1")).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(
            rows[0].contains("DOWN") && rows[0].contains("40.0"),
            "{text}"
        );
        assert_eq!(stats.release_error().count(), 1);
        assert!(stats.channel("lte1").is_some() && stats.channel("x").is_none());
    }
}
