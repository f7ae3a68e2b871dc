//! Scenario files: what to simulate (hosts, channels, streams, scheduler), in TOML.
//!
//! ```toml
//! name = "fig7-5"
//! seed = 1
//! duration_s = 600
//! [scheduler]                # optional
//! kind = "rrr"               # checked by the driver, not here
//! cycle_ms = 100             # default 0: a cycle whenever a channel may send
//! lookahead_ms = 300         # default 0
//! pack_adus = false          # default true; false sends one ADU per slot (thesis)
//! phantom_wait_ms = 100      # default 0: no limit on one ADU's wait for phantom slots
//! [[hosts]]                  # optional; default two hosts "a" and "b"
//! name = "ambulance"
//! [[channels]]
//! name = "cdma1"
//! between = ["ambulance", "hospital"]   # optional with exactly two hosts
//! mtu = 768
//! congestion = { kind = "cbr", kbps = 120 }   # or aimd, cubic, bbr, copa
//! cost_per_kb = 0                       # default 0
//! loss_correlation = "measured"          # or "thesis"; default "measured"
//! loss_prior = { rate = 0.05, packets = 100 }  # optional; default none (0% until measured)
//! up = { rate = { model = "constant", kbps = 120 } }  # a horde_links::LinkSpec
//! down = { }                            # optional, default ideal
//! [[streams]]
//! id = 0
//! from = "ambulance"        # optional with two hosts: the first host
//! to = "hospital"           # optional with two hosts: the other host
//! max_kbps = 80             # or elastic = true
//! ordered = false           # default false
//! workload = { kind = "cbr", kbps = 80, adu_bytes = 768 }
//! objectives = ["objectives/x1.hose"]   # optional, relative to the scenario file
//! ```
//!
//! Unknown keys are errors, and every error names the file and the line and column of
//! the offending value (`FILE:line:col: message`). The format is documented in
//! `docs/scenarios.md`.

mod error;
mod raw;
mod validate;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use horde_config::input::Kind;
use horde_links::LinkSpec;
pub use horde_proto::{LossCorrelation, LossPrior};

use crate::workload::WorkloadSpec;

pub(crate) use error::Locator;
pub use error::ScenarioError;

/// The scenario `Scenario::builtin` returns: the telemedicine setup.
const BUILTIN: &str = include_str!("../../../../scenarios/telemedicine.toml");

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    /// Seeds every random process of the run (see [`crate::workload::stream_seed`]).
    pub seed: u64,
    /// Simulated time, > 0.
    pub duration_s: f64,
    pub scheduler: SchedulerSpec,
    /// At least two, unique names.
    pub hosts: Vec<HostSpec>,
    /// At least one, unique names.
    pub channels: Vec<ChannelSpec>,
    /// At least one, unique ids.
    pub streams: Vec<StreamSpec>,
    /// The scenario file's directory (`.` for [`Scenario::from_str`]): relative paths
    /// inside link specs (trace files) are relative to it.
    pub base_dir: PathBuf,
}

/// The `[scheduler]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerSpec {
    /// e.g. `"rrr"`, `"random-walk"`, `"directed"`; the driver decides which exist.
    pub kind: String,
    /// Scheduling cycle period T, >= 0. 0 (the default, as in the runtime) runs a
    /// cycle whenever a channel may send; the thesis's scenarios use 100.
    pub cycle_ms: f64,
    /// Look-ahead horizon for phantom slots, >= 0.
    pub lookahead_ms: f64,
    /// Candidate schedules per cycle for randomised schedulers (thesis random-walk: 25).
    pub k: Option<u32>,
    /// Several small ADUs per packet (default, as in the runtime); `false` is the
    /// thesis's one ADU per slot, which its reproductions use.
    pub pack_adus: bool,
    /// Longest one ADU may wait for phantom slots, ms (`SessionConfig::phantom_wait_ms`);
    /// 0, the default and the thesis's, sets no limit.
    pub phantom_wait_ms: f64,
}

impl Default for SchedulerSpec {
    fn default() -> Self {
        SchedulerSpec {
            kind: "rrr".into(),
            cycle_ms: 0.0,
            lookahead_ms: 0.0,
            k: None,
            pack_adus: true,
            phantom_wait_ms: 0.0,
        }
    }
}

/// One `[[hosts]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
}

/// A channel's congestion control, as in the runtime's configuration, e.g.
/// `{ kind = "cbr", kbps = 120 }` or `{ kind = "aimd" }`; a channel without the key gets
/// [`CcConfig::default`]. In the simulator a CBR channel banks at most one scheduling
/// cycle plus one slot of tokens, whatever its `burst_ms`: a cycle then sees the slots
/// that came due since the last one and no more (thesis §7.2.1).
pub type Congestion = horde_proto::CcConfig;

/// Which way data crosses a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From `between[0]` to `between[1]`, over the `up` link.
    Up,
    /// From `between[1]` to `between[0]`, over the `down` link.
    Down,
}

/// One `[[channels]]` entry: a bidirectional channel between two hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelSpec {
    pub name: String,
    /// The two hosts; `up` carries packets from the first to the second.
    pub between: [String; 2],
    /// Largest packet payload, i.e. slot size in bytes.
    pub mtu: u32,
    pub congestion: Congestion,
    /// Cost of 1000 bytes sent, in the scenario's cost unit; >= 0.
    pub cost_per_kb: f64,
    /// How the sender estimates the loss correlation of two slots of this channel:
    /// `"measured"` (default) or `"thesis"` (the thesis simulations' fixed model).
    pub loss_correlation: LossCorrelation,
    /// The loss rate the sender believes before it has measured the channel, if any.
    pub loss_prior: Option<LossPrior>,
    pub up: LinkSpec,
    /// `LinkSpec::default()` (ideal: no rate limit, loss or delay) when not given.
    pub down: LinkSpec,
}

impl ChannelSpec {
    /// The direction a packet sent by `host` travels, if `host` is on this channel.
    pub fn direction_from(&self, host: &str) -> Option<Direction> {
        if self.between[0] == host {
            Some(Direction::Up)
        } else if self.between[1] == host {
            Some(Direction::Down)
        } else {
            None
        }
    }

    /// The link model for one direction.
    pub fn link(&self, dir: Direction) -> &LinkSpec {
        match dir {
            Direction::Up => &self.up,
            Direction::Down => &self.down,
        }
    }

    /// Whether this channel joins hosts `a` and `b` (either way round).
    pub fn joins(&self, a: &str, b: &str) -> bool {
        (self.between[0] == a && self.between[1] == b)
            || (self.between[0] == b && self.between[1] == a)
    }
}

/// How much bandwidth a stream asks the allocator for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StreamRate {
    /// At most this many kbit/s.
    MaxKbps(f64),
    /// As much as it can get (treated as infinite demand, thesis §3.2.3).
    Elastic,
}

/// One `[[streams]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSpec {
    pub id: u32,
    pub from: String,
    pub to: String,
    pub rate: StreamRate,
    /// Whether the receiver delivers in stream order.
    pub ordered: bool,
    /// The stream's latency objective: the one-way delay its ADUs should arrive within,
    /// ms (`horde_proto::StreamConfig::latency_bound_ms`).
    pub latency_bound_ms: Option<f64>,
    /// Without `latency_bound_ms`, take the bound the session's objectives imply for
    /// this stream (`horde_hose::latency_bound_ms`; docs/hose.md, "Latency bounds").
    pub latency_bound_from_objectives: bool,
    /// Copies of each ADU on two bounded channels (1 or 2;
    /// `horde_proto::StreamConfig::latency_copies`). 2 needs a latency bound.
    pub latency_copies: u8,
    /// Each ADU on the quickest channel's slot (`horde_proto::StreamConfig::quickest`).
    pub quickest: bool,
    pub workload: WorkloadSpec,
    /// hose objective files, resolved against the scenario file's directory by
    /// [`Scenario::load`] (left as written by [`Scenario::from_str`]).
    pub objectives: Vec<PathBuf>,
}

impl Scenario {
    /// Read, parse and validate a scenario file. Objective paths are resolved against
    /// the file's directory and must exist.
    pub fn load(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        let f = ScenarioFile::read(path.as_ref())?;
        validate::parse(&f.text, &f.name, Some(f.base))
    }

    /// Parse and validate scenario text; `name` stands for the file in error messages.
    /// Paths stay as written and objective files are not checked.
    pub fn from_str(text: &str, name: &str) -> Result<Scenario, ScenarioError> {
        validate::parse(text, name, None)
    }

    /// The default scenario: `scenarios/telemedicine.toml`, compiled in.
    pub fn builtin() -> Scenario {
        Scenario::from_str(BUILTIN, "scenarios/telemedicine.toml")
            .expect("the built-in scenario is valid (checked by a test)")
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s)
    }

    pub fn host(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    pub fn channel(&self, name: &str) -> Option<usize> {
        self.channels.iter().position(|c| c.name == name)
    }

    /// Indices of the channels a stream can use: those joining its two hosts.
    pub fn stream_channels(&self, stream: &StreamSpec) -> Vec<usize> {
        (0..self.channels.len())
            .filter(|&i| self.channels[i].joins(&stream.from, &stream.to))
            .collect()
    }

    /// The largest ADU a stream's workload should produce: the smallest MTU among its
    /// channels, so any ADU fits any slot (the thesis never fragments ADUs, §3.2.2).
    pub fn max_adu(&self, stream: &StreamSpec) -> u32 {
        self.stream_channels(stream)
            .into_iter()
            .map(|i| self.channels[i].mtu)
            .min()
            .unwrap_or(1)
    }
}

/// A scenario file's text, the name errors give it, and the folder its relative paths
/// (objectives, traces) are resolved against.
pub(crate) struct ScenarioFile<'a> {
    pub(crate) text: String,
    pub(crate) name: String,
    pub(crate) base: &'a Path,
}

impl<'a> ScenarioFile<'a> {
    pub(crate) fn read(path: &'a Path) -> Result<Self, ScenarioError> {
        let name = path.display().to_string();
        let text = horde_config::input::read_to_string(path, Kind::SCENARIO).map_err(|e| {
            ScenarioError {
                file: name.clone(),
                at: None,
                message: format!("cannot read: {e}"),
            }
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Ok(Self { text, name, base })
    }
}
