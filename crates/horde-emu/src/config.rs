//! The TOML configuration: channels, their link specs and schedules.
//!
//! Syntax and type errors come from the TOML parser with their position; semantic
//! errors (duplicate names, invalid link parameters, bad schedule times) are located by
//! a second, span-keeping parse, so every error reads `file:line:col: message`.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use horde_links::LinkSpec;
use serde::Deserialize;

use crate::channel_setup::ChannelSetup;
use crate::error::EmuError;
use crate::ideal::IdealLink;
use crate::schedule::ScheduleStep;
use crate::stats::Direction;
use crate::timer::TimerOptions;

/// The whole emulator configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmulatorConfig {
    /// Seed of every link's randomness (each link direction derives its own).
    #[serde(default)]
    pub seed: u64,
    /// Release-thread tuning.
    #[serde(default)]
    pub timer: TimerConfig,
    pub channels: Vec<ChannelConfig>,
    /// Directory that relative trace paths are resolved against: the directory of the
    /// configuration file.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// `[timer]`: optional release-thread tuning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimerConfig {
    /// Busy-wait before each deadline, in µs (default [`crate::DEFAULT_SPIN_US`]).
    pub spin_us: Option<u64>,
    /// `SCHED_FIFO` priority for the release thread (1..=99), when permitted; default
    /// [`crate::DEFAULT_REALTIME_PRIORITY`].
    pub realtime_priority: Option<i32>,
    /// Keep both threads as normal threads (`SCHED_OTHER`).
    #[serde(default)]
    pub no_realtime: bool,
}

impl TimerConfig {
    pub fn options(&self) -> TimerOptions {
        let mut o = TimerOptions::default();
        if let Some(us) = self.spin_us {
            o.spin = Duration::from_micros(us);
        }
        if let Some(p) = self.realtime_priority {
            o.realtime_priority = Some(p);
        }
        if self.no_realtime {
            o.realtime_priority = None;
        }
        o
    }
}

/// One `[[channels]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    pub name: String,
    /// Client-facing address (the Horde sender sends here); port 0 picks one.
    pub listen: SocketAddr,
    /// The real receiver's socket.
    pub forward_to: SocketAddr,
    /// Client → server link.
    pub up: LinkSpec,
    /// Server → client link; ideal (no delay, rate limit or loss) when left out.
    #[serde(default)]
    pub down: Option<LinkSpec>,
    #[serde(default)]
    pub schedule: Vec<ScheduleEntry>,
}

/// `{ at_s = 10, state = "down" }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleEntry {
    /// Seconds since the emulator started.
    pub at_s: f64,
    pub state: ChannelState,
}

/// A scheduled channel state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelState {
    Up,
    Down,
}

impl ScheduleEntry {
    pub fn step(&self) -> ScheduleStep {
        ScheduleStep {
            at: Duration::from_secs_f64(self.at_s),
            down: self.state == ChannelState::Down,
        }
    }
}

impl ChannelConfig {
    pub fn schedule_steps(&self) -> Vec<ScheduleStep> {
        self.schedule.iter().map(ScheduleEntry::step).collect()
    }
}

/// Where each validated item sits in the text.
#[derive(Deserialize)]
struct Spans {
    channels: Vec<ChannelSpans>,
}

#[derive(Deserialize)]
struct ChannelSpans {
    name: toml::Spanned<toml::Value>,
    forward_to: toml::Spanned<toml::Value>,
    up: toml::Spanned<toml::Value>,
    down: Option<toml::Spanned<toml::Value>>,
    #[serde(default)]
    schedule: Vec<toml::Spanned<toml::Value>>,
}

use horde_config::line_col;

struct Source<'a> {
    text: &'a str,
    file: &'a str,
}

impl Source<'_> {
    fn error(&self, span: Option<Range<usize>>, message: String) -> EmuError {
        let (line, col) = line_col(self.text, span.map_or(0, |s| s.start));
        EmuError::Config {
            file: self.file.to_string(),
            line,
            col,
            message,
        }
    }
}

/// Where a semantic problem sits.
enum Item {
    Top,
    Name(usize),
    ForwardTo(usize),
    Link(usize, Direction),
    Schedule(usize, usize),
}

struct Problem {
    at: Item,
    message: String,
}

impl EmulatorConfig {
    /// Read and validate a configuration file; trace paths resolve against its directory.
    pub fn from_file(path: &Path) -> Result<Self, EmuError> {
        let text = horde_config::input::read_to_string(path, horde_config::input::Kind::CONFIG)
            .map_err(|source| EmuError::ReadConfig {
                path: path.to_path_buf(),
                source,
            })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_toml(&text, &path.display().to_string(), base)
    }

    /// Parse and validate configuration text; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str, base_dir: &Path) -> Result<Self, EmuError> {
        let src = Source { text, file };
        let mut config: EmulatorConfig =
            toml::from_str(text).map_err(|e| src.error(e.span(), e.message().to_string()))?;
        config.base_dir = base_dir.to_path_buf();
        if let Some(problem) = config.problem() {
            return Err(locate(&src, problem));
        }
        Ok(config)
    }

    /// Build every channel's links (reading trace files) for [`Emulator::start_with`].
    ///
    /// [`Emulator::start_with`]: crate::Emulator::start_with
    pub fn build_channels(&self) -> Result<Vec<ChannelSetup>, EmuError> {
        self.channels
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let build = |spec: &LinkSpec, dir: Direction| {
                    let seed = link_seed(self.seed, i, dir == Direction::Down);
                    spec.build(seed, &self.base_dir)
                        .map_err(|e| EmuError::BuildLink {
                            channel: c.name.clone(),
                            direction: dir.as_str(),
                            source: Box::new(e),
                        })
                };
                let up = build(&c.up, Direction::Up)?;
                let down = match &c.down {
                    Some(spec) => build(spec, Direction::Down)?,
                    None => Box::new(IdealLink::new()),
                };
                Ok(ChannelSetup {
                    name: c.name.clone(),
                    listen: c.listen,
                    forward_to: c.forward_to,
                    up,
                    down,
                    schedule: c.schedule_steps(),
                })
            })
            .collect()
    }

    fn problem(&self) -> Option<Problem> {
        let problem = |at, message| Some(Problem { at, message });
        if self.channels.is_empty() {
            return problem(Item::Top, "no [[channels]] configured".into());
        }
        for (i, c) in self.channels.iter().enumerate() {
            if c.name.is_empty() {
                return problem(Item::Name(i), "channel name must not be empty".into());
            }
            if self.channels[..i].iter().any(|o| o.name == c.name) {
                return problem(
                    Item::Name(i),
                    format!("duplicate channel name `{}`", c.name),
                );
            }
            if c.forward_to.port() == 0 || c.forward_to.ip().is_unspecified() {
                let msg = format!(
                    "channel `{}`: forward_to {} is not an address packets can be sent to",
                    c.name, c.forward_to
                );
                return problem(Item::ForwardTo(i), msg);
            }
            let links = [
                (Direction::Up, Some(&c.up)),
                (Direction::Down, c.down.as_ref()),
            ];
            for (dir, spec) in links {
                if let Some(Err(e)) = spec.map(LinkSpec::validate) {
                    let msg = format!("channel `{}` {dir} link: {e}", c.name);
                    return problem(Item::Link(i, dir), msg);
                }
            }
            for (k, s) in c.schedule.iter().enumerate() {
                if !(s.at_s.is_finite() && (0.0..1e12).contains(&s.at_s)) {
                    let msg = format!(
                        "channel `{}` schedule: at_s must be a non-negative number of seconds, got {}",
                        c.name, s.at_s
                    );
                    return problem(Item::Schedule(i, k), msg);
                }
            }
        }
        match self.timer.realtime_priority {
            Some(p) if !(1..=99).contains(&p) => problem(
                Item::Top,
                format!("timer.realtime_priority must be in 1..=99, got {p}"),
            ),
            _ => None,
        }
    }
}

fn locate(src: &Source<'_>, problem: Problem) -> EmuError {
    let spans: Option<Spans> = toml::from_str(src.text).ok();
    let channel = |i: usize| spans.as_ref().and_then(|s| s.channels.get(i));
    let span = match problem.at {
        Item::Top => None,
        Item::Name(i) => channel(i).map(|c| c.name.span()),
        Item::ForwardTo(i) => channel(i).map(|c| c.forward_to.span()),
        Item::Link(i, Direction::Up) => channel(i).map(|c| c.up.span()),
        Item::Link(i, Direction::Down) => {
            channel(i).and_then(|c| c.down.as_ref()).map(|d| d.span())
        }
        Item::Schedule(i, k) => channel(i).and_then(|c| c.schedule.get(k)).map(|s| s.span()),
    };
    src.error(span, problem.message)
}

/// The seed of one link direction, derived from the configuration seed (SplitMix64).
pub fn link_seed(seed: u64, channel: usize, down: bool) -> u64 {
    let mut z = seed.wrapping_add(
        0x9E37_79B9_7F4A_7C15u64.wrapping_mul(2 * channel as u64 + u64::from(down) + 1),
    );
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
seed = 7
[[channels]]
name = "lte1"
listen = "127.0.0.1:0"
forward_to = "127.0.0.1:7001"
up = { rate = { model = "constant", kbps = 120 }, delay = { model = "gaussian", mean_ms = 300, sd_ms = 15 }, loss = { model = "bernoulli", p = 0.01 }, buffer_bytes = 64000 }
schedule = [ { at_s = 10, state = "down" }, { at_s = 15.5, state = "up" } ]

[[channels]]
name = "lte2"
listen = "127.0.0.1:0"
forward_to = "127.0.0.1:7002"
up = {}
down = { delay = { model = "constant", ms = 20 } }
"#;

    fn parse(text: &str) -> Result<EmulatorConfig, EmuError> {
        EmulatorConfig::from_toml(text, "emu.toml", Path::new("/cfg"))
    }

    fn err(text: &str) -> String {
        parse(text).expect_err("should be rejected").to_string()
    }

    #[test]
    fn parses_the_documented_example() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.seed, 7);
        assert_eq!(c.base_dir, Path::new("/cfg"));
        assert_eq!(c.channels.len(), 2);
        let lte1 = &c.channels[0];
        assert_eq!(lte1.forward_to, "127.0.0.1:7001".parse().unwrap());
        assert_eq!(lte1.up.buffer_bytes, Some(64_000));
        assert!(lte1.down.is_none());
        assert_eq!(
            lte1.schedule_steps(),
            vec![
                ScheduleStep {
                    at: Duration::from_secs(10),
                    down: true
                },
                ScheduleStep {
                    at: Duration::from_millis(15_500),
                    down: false
                },
            ]
        );
        assert_eq!(c.channels[1].up, LinkSpec::default());
        assert!(c.channels[1].down.is_some());
        assert_eq!(c.timer.options(), TimerOptions::default());
    }

    #[test]
    fn unknown_fields_are_rejected_with_position() {
        let text = GOOD.replace("seed = 7", "seed = 7\nsede = 1");
        let e = err(&text);
        assert!(e.starts_with("emu.toml:3:1:"), "{e}");
        assert!(e.contains("sede"), "{e}");
        let text = GOOD.replace("name = \"lte2\"", "name = \"lte2\"\nlisten_on = 3");
        let e = err(&text);
        assert!(e.starts_with("emu.toml:12:"), "{e}");
    }

    #[test]
    fn type_errors_name_line_and_column() {
        let text = GOOD.replace(
            "forward_to = \"127.0.0.1:7002\"",
            "forward_to = \"nowhere\"",
        );
        let e = err(&text);
        assert!(e.starts_with("emu.toml:13:14:"), "{e}");
    }

    #[test]
    fn semantic_errors_are_located() {
        let text = GOOD.replace("name = \"lte2\"", "name = \"lte1\"");
        assert!(err(&text).starts_with("emu.toml:11:8: duplicate channel name `lte1`"));

        let text = GOOD.replace("p = 0.01", "p = 1.5");
        let e = err(&text);
        assert!(e.starts_with("emu.toml:7:6:"), "{e}");
        assert!(e.contains("loss.p") && e.contains("1.5"), "{e}");

        let text = GOOD.replace("ms = 20", "ms = -1");
        let e = err(&text);
        assert!(
            e.starts_with("emu.toml:15:8:") && e.contains("down link"),
            "{e}"
        );

        let text = GOOD.replace("at_s = 10,", "at_s = -2,");
        let e = err(&text);
        assert!(e.starts_with("emu.toml:8:14:") && e.contains("at_s"), "{e}");

        let e = err("seed = 1\nchannels = []\n");
        assert!(e.starts_with("emu.toml:1:1: no [[channels]]"), "{e}");

        let e = err(&format!("[timer]\nrealtime_priority = 0\n{GOOD}").replace("seed = 7", ""));
        assert!(e.contains("realtime_priority"), "{e}");
    }

    /// One row per bad value: (edit of the documented example, expected
    /// `file:line:col: ` and part of the message).
    #[test]
    fn every_bad_value_is_named_at_its_position() {
        let rows: &[(&str, &str, &str, &str)] = &[
            ("kbps = 120", "kbps = -100", "emu.toml:7:6:", "rate"),
            ("kbps = 120", "kbps = 0", "emu.toml:7:6:", "rate"),
            (
                "mean_ms = 300",
                "mean_ms = -300",
                "emu.toml:7:6:",
                "mean_ms",
            ),
            ("sd_ms = 15", "sd_ms = -1", "emu.toml:7:6:", "sd_ms"),
            ("p = 0.01", "p = -0.5", "emu.toml:7:6:", "loss.p"),
            (
                "buffer_bytes = 64000",
                "buffer_bytes = 0",
                "emu.toml:7:6:",
                "buffer_bytes",
            ),
            ("ms = 20", "ms = -1", "emu.toml:15:8:", "down link"),
            ("at_s = 15.5", "at_s = -15.5", "emu.toml:8:45:", "at_s"),
            (
                "state = \"down\"",
                "state = \"sideways\"",
                "emu.toml:8:",
                "unknown variant",
            ),
            (
                "forward_to = \"127.0.0.1:7001\"",
                "forward_to = \"127.0.0.1:0\"",
                "emu.toml:6:14:",
                "forward_to",
            ),
            (
                "forward_to = \"127.0.0.1:7002\"",
                "forward_to = \"0.0.0.0:7002\"",
                "emu.toml:13:14:",
                "forward_to",
            ),
            (
                "listen = \"127.0.0.1:0\"\nforward_to = \"127.0.0.1:7001\"",
                "listen = \"localhost\"\nforward_to = \"127.0.0.1:7001\"",
                "emu.toml:5:10:",
                "invalid socket address",
            ),
            (
                "name = \"lte2\"",
                "name = \"\"",
                "emu.toml:11:8:",
                "must not be empty",
            ),
            ("seed = 7", "seed = -7", "emu.toml:2:8:", ""),
        ];
        let mut wrong = Vec::new();
        for (from, to, at, message) in rows {
            assert!(
                GOOD.contains(from),
                "row {to:?}: {from:?} not in the example"
            );
            match parse(&GOOD.replacen(from, to, 1)) {
                Ok(_) => wrong.push(format!("{to:?} was accepted")),
                Err(e) if !(e.to_string().starts_with(at) && e.to_string().contains(message)) => {
                    wrong.push(format!("{to:?}: got {e}"))
                }
                Err(_) => {}
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn shipped_example_loads_and_builds() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/example.toml");
        let c = EmulatorConfig::from_file(&path).unwrap();
        let names: Vec<_> = c.channels.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["lte1", "cdma2", "wifi"]);
        assert_eq!(c.build_channels().unwrap().len(), 3);
    }

    #[test]
    fn reading_a_missing_file_names_it() {
        let e = EmulatorConfig::from_file(Path::new("/nonexistent/emu.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/emu.toml"), "{e}");
    }

    #[test]
    fn link_seeds_differ_per_direction_and_channel() {
        let seeds = [
            link_seed(1, 0, false),
            link_seed(1, 0, true),
            link_seed(1, 1, false),
            link_seed(2, 0, false),
        ];
        for i in 0..seeds.len() {
            for j in 0..i {
                assert_ne!(seeds[i], seeds[j]);
            }
        }
        assert_eq!(link_seed(1, 0, false), link_seed(1, 0, false));
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncé", 0), (1, 1));
        assert_eq!(line_col("ab\ncé", 3), (2, 1));
        assert_eq!(line_col("ab\ncéx", 6), (2, 3));
    }
}
