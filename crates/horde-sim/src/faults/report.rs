//! What a seed's run reports: its faults, its tallies, the invariants it broke, a digest
//! of everything that happened (two runs of a seed must agree on it), and the command
//! that replays it.

use serde::Serialize;

use super::ledger::Tally;
use super::net::NetStats;
use super::plan::Fault;
use super::violation::Violation;

/// Lifecycle counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Lifecycle {
    pub client_sessions: u32,
    pub reconnects: u32,
    pub server_sessions: u32,
    pub replaced: u32,
    pub flow_blocked: u32,
}

/// The stable window before the close (the allocation check's), in payload bytes/s
/// except where noted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WindowFigures {
    /// Sent to all streams.
    pub sent: f64,
    /// The streams' mean allocations, summed: the channels' estimated rate.
    pub allocated: f64,
    /// The links' up-direction rates, summed (wire bytes/s).
    pub links: f64,
    /// Seconds the client left open slots unused with data and credit.
    pub idle_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeedReport {
    pub seed: u64,
    pub links: usize,
    pub streams: usize,
    pub faults: Vec<Fault>,
    pub adus: Tally,
    pub net: NetStats,
    pub lifecycle: Lifecycle,
    /// FNV-1a over every datagram sent and every event reported, in order.
    pub digest: String,
    /// Simulated seconds.
    pub simulated_s: f64,
    /// Seconds from the last fault's end to the first delivery after it.
    pub resumed_after_s: Option<f64>,
    pub window: WindowFigures,
    pub violations: Vec<Violation>,
    /// The command that replays this run.
    pub replay: String,
}

impl SeedReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The one-line command that replays `seed`, with a fault subset when shrunk.
pub fn replay_command(seed: u64, keep: Option<&[usize]>) -> String {
    match keep {
        Some(k) => {
            let list: Vec<String> = k.iter().map(usize::to_string).collect();
            format!("horde vopr --seed {seed} --keep-faults {}", list.join(","))
        }
        None => format!("horde vopr --seed {seed}"),
    }
}

/// FNV-1a, 64-bit: a digest of the run that needs no dependency and never changes.
#[derive(Debug, Clone, Copy)]
pub struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    pub fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub fn add_u64(&mut self, x: u64) {
        self.add(&x.to_le_bytes());
    }

    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}
