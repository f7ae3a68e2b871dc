//! Flow scenario files: one path (a link per direction), TCP settings, and the
//! `[[flow]]` workload entries. Errors name `FILE:line:col`.
//!
//! ```toml
//! name = "web-10mbit"
//! seed = 1
//! duration_s = 60          # arrivals stop here
//! drain_s = 60             # flows may finish until duration_s + drain_s (default 60)
//! [tcp]                    # simulator only; optional
//! congestion = "cubic"     # cubic, reno or none
//! buffer_bytes = 1048576
//! [link]
//! up = { rate = { model = "constant", kbps = 10000 }, delay = { model = "constant", ms = 20 } }
//! down = { rate = { model = "constant", kbps = 10000 }, delay = { model = "constant", ms = 20 } }
//! [[flow]]
//! kind = "web"             # web, bulk, request_response, interactive
//! load = 0.3
//! capacity_kbps = 10000
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use horde_links::{Link, LinkSpec};
use serde::Deserialize;
use toml::Spanned;

use super::sim::TcpSettings;
use super::workload::{plan, FlowSpec, PlannedFlow};
use crate::scenario::{Locator, ScenarioError, ScenarioFile};

/// Link seeds derive from the scenario's seed through these stream numbers.
const UP_LINK: u64 = 0x11_0001;
const DOWN_LINK: u64 = 0x11_0002;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    #[serde(default)]
    name: Option<String>,
    #[serde(default = "one")]
    seed: u64,
    duration_s: Spanned<f64>,
    #[serde(default)]
    drain_s: Option<Spanned<f64>>,
    #[serde(default)]
    tcp: TcpSettings,
    link: Spanned<RawLink>,
    /// Read as plain tables first, so that an error inside one entry points at it.
    #[serde(default, rename = "flow")]
    flows: Vec<Spanned<toml::Table>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    up: Spanned<LinkSpec>,
    /// The `up` model when absent.
    #[serde(default)]
    down: Option<Spanned<LinkSpec>>,
}

fn one() -> u64 {
    1
}

/// The built `up` and `down` models.
pub type LinkPair = (Box<dyn Link>, Box<dyn Link>);

/// A validated flow scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowScenario {
    pub name: String,
    pub seed: u64,
    pub duration_s: f64,
    pub drain_s: f64,
    pub tcp: TcpSettings,
    /// Client to server.
    pub up: LinkSpec,
    /// Server to client.
    pub down: LinkSpec,
    pub flows: Vec<FlowSpec>,
    /// Where relative trace paths are resolved.
    pub base_dir: PathBuf,
}

impl Locator<'_> {
    /// The `[[flow]]` entries, each checked against the scenario's `duration_s`.
    pub fn flows(
        &self,
        entries: &[Spanned<toml::Table>],
        duration_s: f64,
    ) -> Result<Vec<FlowSpec>, ScenarioError> {
        let mut flows = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let f = FlowSpec::deserialize(toml::Value::Table(entry.get_ref().clone()))
                .map_err(|e| self.at(entry.span(), format!("flow {}: {}", i + 1, e.message())))?;
            f.validate(duration_s).map_err(|m| {
                self.at(entry.span(), format!("flow {} ({}): {m}", i + 1, f.kind()))
            })?;
            flows.push(f);
        }
        Ok(flows)
    }
}

impl FlowScenario {
    pub fn load(path: impl AsRef<Path>) -> Result<FlowScenario, ScenarioError> {
        let f = ScenarioFile::read(path.as_ref())?;
        Self::parse(&f.text, &f.name, f.base)
    }

    /// Parse and validate `text`; `file` names it in errors, traces are read relative
    /// to `base_dir`.
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<FlowScenario, ScenarioError> {
        let loc = Locator { file, text };
        let raw: RawScenario = toml::from_str(text).map_err(|e| loc.toml(&e))?;
        let (duration_s, drain_s) = loc.run_length(&raw.duration_s, raw.drain_s.as_ref(), 60.0)?;
        if raw.tcp.buffer_bytes < 4096 {
            return Err(ScenarioError {
                file: file.to_string(),
                at: None,
                message: format!(
                    "tcp.buffer_bytes must be at least 4096, got {}",
                    raw.tcp.buffer_bytes
                ),
            });
        }
        let up = raw.link.get_ref().up.clone();
        let down = raw
            .link
            .get_ref()
            .down
            .clone()
            .unwrap_or_else(|| up.clone());
        for (dir, spec) in [("up", &up), ("down", &down)] {
            if let Err(e) = spec.get_ref().build(0, base_dir) {
                return Err(loc.at(spec.span(), format!("link.{dir}: {e}")));
            }
        }
        if raw.flows.is_empty() {
            return Err(loc.at(raw.link.span(), "no [[flow]] entries: nothing to run"));
        }
        let flows = loc.flows(&raw.flows, duration_s)?;
        let scenario = FlowScenario {
            name: raw.name.unwrap_or_else(|| {
                Path::new(file)
                    .file_stem()
                    .map_or("flows".into(), |s| s.to_string_lossy().into_owned())
            }),
            seed: raw.seed,
            duration_s,
            drain_s,
            tcp: raw.tcp,
            up: up.into_inner(),
            down: down.into_inner(),
            flows,
            base_dir: base_dir.to_path_buf(),
        };
        scenario.plan().map_err(|m| ScenarioError {
            file: file.to_string(),
            at: None,
            message: m,
        })?;
        Ok(scenario)
    }

    /// The flows this scenario runs, in start order.
    pub fn plan(&self) -> Result<Vec<PlannedFlow>, String> {
        plan(&self.flows, self.duration_s, self.seed)
    }

    /// When the run stops waiting for flows.
    pub fn end(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s + self.drain_s)
    }

    /// The two link models, seeded from the scenario's seed.
    pub fn links(&self) -> Result<LinkPair, horde_links::LinkError> {
        let seed = |k: u64| crate::workload::stream_seed(self.seed ^ k, 0);
        Ok((
            self.up.build(seed(UP_LINK), &self.base_dir)?,
            self.down.build(seed(DOWN_LINK), &self.base_dir)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
duration_s = 10
[link]
up = { rate = { model = "constant", kbps = 1000 }, delay = { model = "constant", ms = 10 } }
[[flow]]
kind = "bulk"
bytes = 1000
"#;

    fn parse(text: &str) -> Result<FlowScenario, String> {
        FlowScenario::parse(text, "s.toml", Path::new(".")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_good_file_parses_with_defaults() {
        let s = parse(GOOD).unwrap();
        assert_eq!((s.seed, s.drain_s), (1, 60.0));
        assert_eq!(s.down, s.up);
        assert_eq!(s.plan().unwrap().len(), 1);
    }

    #[test]
    fn errors_point_at_the_offending_place() {
        let unknown = GOOD.replace("bytes = 1000", "bytes = 1000\nsize = 3");
        assert!(
            parse(&unknown).unwrap_err().starts_with("s.toml:6:1:"),
            "{}",
            parse(&unknown).unwrap_err()
        );
        let zero = GOOD.replace("bytes = 1000", "bytes = 0");
        let e = parse(&zero).unwrap_err();
        assert!(
            e.starts_with("s.toml:6:") && e.contains("flow 1 (bulk)"),
            "{e}"
        );
        let typo = GOOD.replace("\"bulk\"", "\"bluk\"");
        let e = parse(&typo).unwrap_err();
        assert!(
            e.starts_with("s.toml:6:1: flow 1: unknown variant `bluk`"),
            "{e}"
        );
        let dur = GOOD.replace("duration_s = 10", "duration_s = -1");
        assert!(
            parse(&dur).unwrap_err().starts_with("s.toml:3:14:"),
            "{}",
            parse(&dur).unwrap_err()
        );
        let trace = GOOD.replace(
            "rate = { model = \"constant\", kbps = 1000 }",
            "rate = { model = \"trace\", path = \"no/such.trace\" }",
        );
        let e = parse(&trace).unwrap_err();
        assert!(e.starts_with("s.toml:5:6:") && e.contains("link.up"), "{e}");
        let none = GOOD.split("[[flow]]").next().unwrap().to_string();
        assert!(parse(&none).unwrap_err().contains("no [[flow]]"));
        let drain = GOOD.replace("duration_s = 10", "duration_s = 10\ndrain_s = 1e300");
        assert_eq!(
            parse(&drain).unwrap_err(),
            "s.toml:4:11: drain_s must be at most 31536000 (a year), got 1e300"
        );
    }
}
