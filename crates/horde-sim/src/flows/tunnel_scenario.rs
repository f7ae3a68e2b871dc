//! Tunnel scenario files: the flow workload of a flow scenario carried through a Horde
//! tunnel over several links, and the sweep that compares recovery modes on it
//! (`horde-lab pluribus sim FILE`). Errors name `FILE:line:col`. See `docs/pluribus.md`.
//!
//! ```toml
//! name = "pluribus-a"
//! seed = 1
//! duration_s = 300
//! drain_s = 60
//! [tcp]                          # as in flow scenarios
//! [tunnel]
//! scheduler = "rrr"              # any scheduler name the simulator knows
//! session = { pack_adus = true } # a SessionConfig
//! capacity_fraction = 0.9        # default channels pace at this share of the link rate
//! acks = "reverse_path"          # default channels' ack policy ("fixed": the thesis's)
//! stream = { ordered = true }    # a StreamConfig: every stream option, recovery too
//! [[link]]
//! name = "wimax"
//! up = { rate = { model = "constant", kbps = 200 }, delay = { model = "constant", ms = 20 } }
//! down = { rate = { model = "constant", kbps = 1500 }, delay = { model = "constant", ms = 20 } }
//! # up_channel / down_channel: a ChannelConfig each; by default CBR at the link's
//! # constant rate with a 1500-byte MTU, so that any IP packet fits one slot.
//! [[flow]]
//! kind = "web"
//! load = 0.0573
//! capacity_kbps = 1500
//! [sweep]
//! loads = [1, 2, 4, 8]           # multiplies the web and request/response arrival rates
//! loss_in_bad = [0.1, 0.3]       # optional: every Gilbert-Elliott link's bad-state loss
//! direct = ["wimax"]             # single-path TCP baselines (default: every link)
//! [[sweep.mode]]
//! name = "oec"
//! stream = { recovery = { mode = "oec" } }   # merged over [tunnel] stream
//! ```

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use horde_config::checks;
use horde_links::{LinkSpec, LossSpec, RateSpec};
use horde_policy::registry::scheduler;
use horde_proto::{AckFrequency, CcConfig, ChannelConfig, ChannelId, SessionConfig, StreamConfig};
use serde::Deserialize;
use toml::Spanned;

use super::sim::TcpSettings;
use super::tunnel::{TunnelLink, TunnelSetup};
use super::workload::{plan, FlowSpec, PlannedFlow};
use crate::scenario::{Locator, ScenarioError, ScenarioFile};

/// The largest IP packet the hosts send.
pub const IP_MTU: u32 = 1500;
/// Bytes one slot of a tunnel channel carries: a whole IP packet and the largest
/// loss-recovery header in front of it.
pub const TUNNEL_MTU: u32 = IP_MTU + horde_proto::recovery::header::MAX_OVERHEAD as u32;

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
    #[serde(default)]
    tunnel: RawTunnel,
    #[serde(default, rename = "link")]
    links: Vec<Spanned<RawLink>>,
    #[serde(default, rename = "flow")]
    flows: Vec<Spanned<toml::Table>>,
    #[serde(default)]
    sweep: Option<Spanned<RawSweep>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTunnel {
    #[serde(default)]
    scheduler: Option<Spanned<String>>,
    #[serde(default)]
    session: Option<Spanned<toml::Table>>,
    #[serde(default)]
    stream: Option<Spanned<toml::Table>>,
    #[serde(default)]
    capacity_fraction: Option<Spanned<f64>>,
    /// How the default channels ack (`AckFrequency`); reverse-path acks by default.
    #[serde(default)]
    acks: Option<AckFrequency>,
}

/// The share of a link's rate its default channel paces at (see [`cbr_channel`]).
pub const DEFAULT_CAPACITY_FRACTION: f64 = 0.9;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: String,
    up: Spanned<LinkSpec>,
    #[serde(default)]
    down: Option<Spanned<LinkSpec>>,
    #[serde(default)]
    up_channel: Option<ChannelConfig>,
    #[serde(default)]
    down_channel: Option<ChannelConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    #[serde(default)]
    loads: Option<Vec<f64>>,
    #[serde(default)]
    loss_in_bad: Option<Vec<f64>>,
    #[serde(default)]
    direct: Option<Vec<String>>,
    #[serde(default, rename = "mode")]
    modes: Vec<Spanned<RawMode>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMode {
    name: String,
    #[serde(default)]
    stream: toml::Table,
    #[serde(default)]
    scheduler: Option<String>,
}

fn one() -> u64 {
    1
}

/// One configuration of the tunnel compared in a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Mode {
    pub name: String,
    pub stream: StreamConfig,
    pub scheduler: String,
}

/// A validated tunnel scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct TunnelScenario {
    pub name: String,
    pub seed: u64,
    pub duration_s: f64,
    pub drain_s: f64,
    pub tcp: TcpSettings,
    pub links: Vec<TunnelLink>,
    pub session: SessionConfig,
    /// How the default channels ack (`[tunnel] acks`).
    pub acks: AckFrequency,
    /// The `[tunnel]` configuration (what `flows`-style single runs use).
    pub base: Mode,
    pub flows: Vec<FlowSpec>,
    /// Load factors of the sweep (1 when absent).
    pub loads: Vec<f64>,
    /// Bad-state loss rates of the sweep, if it sweeps loss.
    pub loss_in_bad: Option<Vec<f64>>,
    /// Links to run single-path TCP over, directly, as baselines.
    pub direct: Vec<String>,
    /// The tunnel configurations the sweep compares ([`Self::base`] alone when absent).
    pub modes: Vec<Mode>,
    pub base_dir: PathBuf,
}

/// A channel config that paces at `fraction` of a link's constant rate. Below one, so
/// that the session's acknowledgements and probes, which its pacing does not count, and
/// the coded packets that fill every spare slot still leave the link's queue empty: the
/// estimate of usable capacity is kept conservative, as PluriBus's is (§5.2).
fn cbr_channel(spec: &LinkSpec, fraction: f64, acks: AckFrequency) -> Option<ChannelConfig> {
    match spec.rate {
        Some(RateSpec::Constant { kbps }) => Some(ChannelConfig {
            mtu: TUNNEL_MTU,
            congestion: CcConfig::Cbr {
                kbps: kbps * fraction,
                // One packet's worth: a spare slot is filled by at most one coded
                // packet, which is all that new data can find ahead of it (§4.1).
                burst_ms: f64::from(TUNNEL_MTU) * 8.0 / (kbps * fraction),
            },
            // The acks share the link with the data: the share holds only if they count.
            pace_acks: true,
            // Acks that fit the links' slow up directions (docs/recovery.md).
            acks,
            ..ChannelConfig::default()
        }),
        _ => None,
    }
}

/// `over` merged into `base`, key by key (tables one level deep are replaced whole).
fn merged(base: &toml::Table, over: &toml::Table) -> toml::Table {
    let mut t = base.clone();
    for (k, v) in over {
        t.insert(k.clone(), v.clone());
    }
    t
}

impl TunnelScenario {
    pub fn load(path: impl AsRef<Path>) -> Result<TunnelScenario, ScenarioError> {
        let f = ScenarioFile::read(path.as_ref())?;
        Self::parse(&f.text, &f.name, f.base)
    }

    /// Parse and validate `text`; `file` names it in errors, traces are read relative
    /// to `base_dir`.
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<TunnelScenario, ScenarioError> {
        let loc = Locator { file, text };
        let raw: RawScenario = toml::from_str(text).map_err(|e| loc.toml(&e))?;
        let plain = |message: String| ScenarioError {
            file: file.to_string(),
            at: None,
            message,
        };
        let (duration_s, drain_s) = loc.run_length(&raw.duration_s, raw.drain_s.as_ref(), 60.0)?;
        if raw.tcp.buffer_bytes < 4096 {
            return Err(plain(format!(
                "tcp.buffer_bytes must be at least 4096, got {}",
                raw.tcp.buffer_bytes
            )));
        }
        let fraction = match &raw.tunnel.capacity_fraction {
            Some(f) if !(*f.get_ref() > 0.0 && *f.get_ref() <= 1.0) => {
                return Err(loc.at(
                    f.span(),
                    format!("capacity_fraction must be in (0, 1], got {}", f.get_ref()),
                ))
            }
            Some(f) => *f.get_ref(),
            None => DEFAULT_CAPACITY_FRACTION,
        };
        if raw.links.is_empty() {
            return Err(plain(
                "no [[link]] entries: a tunnel needs at least one".into(),
            ));
        }
        // Each link is one channel of the tunnel's session, whose channel ids are one byte.
        if let Some(extra) = raw.links.get(ChannelId::COUNT) {
            return Err(loc.at(
                extra.span(),
                format!(
                    "{} [[link]] entries: the tunnel's session has at most {} channels (channel ids are one byte)",
                    raw.links.len(),
                    ChannelId::COUNT
                ),
            ));
        }
        let acks = raw.tunnel.acks.unwrap_or(AckFrequency::ReversePath);
        let mut links: Vec<TunnelLink> = Vec::new();
        for l in &raw.links {
            let r = l.get_ref();
            if links.iter().any(|x| x.name == r.name) {
                return Err(loc.at(l.span(), format!("link \"{}\" appears twice", r.name)));
            }
            let down = r.down.as_ref().unwrap_or(&r.up);
            for (dir, spec) in [("up", &r.up), ("down", down)] {
                if let Err(e) = spec.get_ref().build(0, base_dir) {
                    return Err(loc.at(spec.span(), format!("link {}.{dir}: {e}", r.name)));
                }
            }
            let channel = |given: &Option<ChannelConfig>, spec: &Spanned<LinkSpec>, dir| {
                if let Some(config) = given {
                    loc.checked(l.span(), |c| checks::channel(c, "", config))
                        .map_err(|mut e| {
                            e.message = format!("link {}.{dir}_channel: {}", r.name, e.message);
                            e
                        })?;
                }
                given
                    .clone()
                    .or_else(|| cbr_channel(spec.get_ref(), fraction, acks))
                    .ok_or_else(|| {
                        loc.at(
                            spec.span(),
                            format!(
                                "link {}.{dir}: not a constant rate, so give {dir}_channel \
                                 (a channel config with its congestion control)",
                                r.name
                            ),
                        )
                    })
            };
            links.push(TunnelLink {
                name: r.name.clone(),
                up_channel: channel(&r.up_channel, &r.up, "up")?,
                down_channel: channel(&r.down_channel, down, "down")?,
                up: r.up.get_ref().clone(),
                down: down.get_ref().clone(),
            });
        }
        let session = match &raw.tunnel.session {
            Some(t) => {
                let session = SessionConfig::deserialize(toml::Value::Table(t.get_ref().clone()))
                    .map_err(|e| {
                    loc.at(t.span(), format!("tunnel.session: {}", e.message()))
                })?;
                loc.checked(t.span(), |c| checks::session(c, &session))?;
                session
            }
            None => SessionConfig::default(),
        };
        let base_stream = raw
            .tunnel
            .stream
            .as_ref()
            .map(|t| t.get_ref().clone())
            .unwrap_or_default();
        let stream_span = raw.tunnel.stream.as_ref().map_or(0..0, |t| t.span());
        let stream = |table: &toml::Table, span: Range<usize>, what: &str| {
            let config = StreamConfig::deserialize(toml::Value::Table(table.clone()))
                .map_err(|e| loc.at(span.clone(), format!("{what}: {}", e.message())))?;
            loc.checked(span, |c| checks::stream(c, what, &config))?;
            Ok::<_, ScenarioError>(config)
        };
        let sched = raw
            .tunnel
            .scheduler
            .as_ref()
            .map_or("rrr".to_string(), |s| s.get_ref().clone());
        let known = |name: &str, span| {
            scheduler(name, None)
                .map(|_| ())
                .map_err(|e| loc.at(span, e.to_string()))
        };
        known(
            &sched,
            raw.tunnel.scheduler.as_ref().map_or(0..0, |s| s.span()),
        )?;
        let base = Mode {
            name: "tunnel".into(),
            stream: stream(&base_stream, stream_span, "tunnel.stream")?,
            scheduler: sched,
        };
        if raw.flows.is_empty() {
            return Err(plain("no [[flow]] entries: nothing to run".into()));
        }
        let flows = loc.flows(&raw.flows, duration_s)?;

        let (mut loads, mut loss_in_bad, mut direct, mut modes) =
            (vec![1.0], None, None, Vec::new());
        if let Some(sw) = &raw.sweep {
            let span = sw.span();
            let sw = sw.get_ref();
            if let Some(l) = &sw.loads {
                if l.is_empty() || l.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
                    return Err(loc.at(span, "sweep.loads must be positive numbers"));
                }
                loads = l.clone();
            }
            if let Some(l) = &sw.loss_in_bad {
                if l.is_empty() || l.iter().any(|x| !(0.0..=1.0).contains(x)) {
                    return Err(loc.at(span, "sweep.loss_in_bad must be probabilities in [0, 1]"));
                }
                if !links
                    .iter()
                    .any(|k| has_gilbert_elliott(&k.up) || has_gilbert_elliott(&k.down))
                {
                    return Err(loc.at(
                        span,
                        "sweep.loss_in_bad needs a link with Gilbert-Elliott loss",
                    ));
                }
                loss_in_bad = Some(l.clone());
            }
            if let Some(d) = &sw.direct {
                if let Some(bad) = d.iter().find(|n| !links.iter().any(|l| &&l.name == n)) {
                    return Err(loc.at(span, format!("sweep.direct: no link \"{bad}\"")));
                }
                direct = Some(d.clone());
            }
            for m in &sw.modes {
                let r = m.get_ref();
                if modes.iter().any(|x: &Mode| x.name == r.name) {
                    return Err(loc.at(m.span(), format!("mode \"{}\" appears twice", r.name)));
                }
                let sched = r
                    .scheduler
                    .clone()
                    .unwrap_or_else(|| base.scheduler.clone());
                known(&sched, m.span())?;
                modes.push(Mode {
                    name: r.name.clone(),
                    stream: stream(
                        &merged(&base_stream, &r.stream),
                        m.span(),
                        &format!("mode {}: stream", r.name),
                    )?,
                    scheduler: sched,
                });
            }
        }
        if modes.is_empty() {
            modes.push(base.clone());
        }
        let scenario = TunnelScenario {
            name: raw.name.unwrap_or_else(|| {
                Path::new(file)
                    .file_stem()
                    .map_or("tunnel".into(), |s| s.to_string_lossy().into_owned())
            }),
            seed: raw.seed,
            duration_s,
            drain_s,
            tcp: raw.tcp,
            direct: direct.unwrap_or_else(|| links.iter().map(|l| l.name.clone()).collect()),
            links,
            acks,
            session,
            base,
            flows,
            loads,
            loss_in_bad,
            modes,
            base_dir: base_dir.to_path_buf(),
        };
        for &f in &scenario.loads {
            scenario
                .plan(f)
                .map_err(|m| plain(format!("at load {f}x: {m}")))?;
        }
        Ok(scenario)
    }

    /// The flows at `factor` times the scenario's load.
    pub fn scaled_flows(&self, factor: f64) -> Vec<FlowSpec> {
        self.flows.iter().map(|f| scaled(f, factor)).collect()
    }

    /// The flows the run at `factor` times the load starts, in order.
    pub fn plan(&self, factor: f64) -> Result<Vec<PlannedFlow>, String> {
        let flows = self.scaled_flows(factor);
        for (i, f) in flows.iter().enumerate() {
            f.validate(self.duration_s)
                .map_err(|m| format!("flow {} ({}): {m}", i + 1, f.kind()))?;
        }
        plan(&flows, self.duration_s, self.seed)
    }

    /// When a run stops waiting for flows.
    pub fn end(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s + self.drain_s)
    }

    /// The links with every Gilbert-Elliott process set to lose `loss_in_bad` in its
    /// bad state (when given).
    pub fn links_at(&self, loss_in_bad: Option<f64>) -> Vec<TunnelLink> {
        let mut links = self.links.clone();
        if let Some(p) = loss_in_bad {
            for l in &mut links {
                set_loss_in_bad(&mut l.up, p);
                set_loss_in_bad(&mut l.down, p);
            }
        }
        links
    }

    /// The tunnel for one mode over `links`.
    pub fn setup(&self, mode: &Mode, links: Vec<TunnelLink>) -> TunnelSetup {
        TunnelSetup {
            links,
            session: self.session.clone(),
            stream: mode.stream.clone(),
            scheduler: scheduler(&mode.scheduler, None).expect("checked when parsed"),
            seed: self.seed,
            base_dir: self.base_dir.clone(),
        }
    }
}

fn has_gilbert_elliott(spec: &LinkSpec) -> bool {
    matches!(spec.loss, Some(LossSpec::GilbertElliott { .. }))
}

fn set_loss_in_bad(spec: &mut LinkSpec, p: f64) {
    if let Some(LossSpec::GilbertElliott { loss_in_bad, .. }) = &mut spec.loss {
        *loss_in_bad = p;
    }
}

/// A flow entry at `factor` times its arrival rate (sizes unchanged, as PluriBus scales
/// its workload by dividing inter-arrival times).
fn scaled(f: &FlowSpec, factor: f64) -> FlowSpec {
    let mut f = f.clone();
    match &mut f {
        FlowSpec::Web { load, .. } => *load *= factor,
        FlowSpec::RequestResponse { rate_per_s, .. } => *rate_per_s *= factor,
        FlowSpec::Bulk { .. } | FlowSpec::Interactive { .. } => {}
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
duration_s = 10
[tunnel]
stream = { ordered = true }
[[link]]
name = "a"
up = { rate = { model = "constant", kbps = 200 }, delay = { model = "constant", ms = 20 } }
down = { rate = { model = "constant", kbps = 1500 }, delay = { model = "constant", ms = 20 }, loss = { model = "gilbert_elliott", p_good_to_bad = 0.5, p_bad_to_good = 0.5, loss_in_bad = 0.1 } }
[[flow]]
kind = "web"
load = 0.1
capacity_kbps = 1000
[sweep]
loads = [1, 4]
loss_in_bad = [0.2]
[[sweep.mode]]
name = "none"
[[sweep.mode]]
name = "fast"
stream = { max_queue_bytes = 5000 }
"#;

    fn parse(text: &str) -> Result<TunnelScenario, String> {
        TunnelScenario::parse(text, "t.toml", Path::new(".")).map_err(|e| e.to_string())
    }

    #[test]
    fn more_links_than_a_session_has_channels_are_refused_at_the_first_too_many() {
        let with_links = |n: usize| {
            let mut text = GOOD.to_string();
            for i in 1..n {
                text += &format!(
                    "[[link]]\nname = \"l{i}\"\nup = {{ rate = {{ model = \"constant\", kbps = 200 }} }}\n"
                );
            }
            text
        };
        assert_eq!(parse(&with_links(256)).unwrap().links.len(), 256);
        let text = with_links(257);
        let e = parse(&text).unwrap_err();
        let line = text.lines().position(|l| l == "name = \"l256\"").unwrap();
        assert!(e.starts_with(&format!("t.toml:{line}:")), "{e}");
        assert!(
            e.ends_with("257 [[link]] entries: the tunnel's session has at most 256 channels (channel ids are one byte)"),
            "{e}"
        );
    }

    #[test]
    fn modes_overlay_the_tunnel_stream_and_channels_follow_the_links() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.modes.len(), 2);
        assert!(s.modes[1].stream.ordered, "base option kept");
        assert_eq!(s.modes[1].stream.max_queue_bytes, 5000);
        assert_eq!(
            s.modes[0].stream.max_queue_bytes,
            StreamConfig::default().max_queue_bytes
        );
        assert!(matches!(
            s.links[0].down_channel.congestion,
            CcConfig::Cbr { kbps, .. } if kbps == 1500.0 * DEFAULT_CAPACITY_FRACTION
        ));
        assert_eq!(s.direct, vec!["a".to_string()]);
        let four = s.plan(4.0).unwrap().len();
        let one = s.plan(1.0).unwrap().len();
        assert!(four > 2 * one, "4x load: {four} flows against {one}");
        let l = s.links_at(Some(0.2));
        assert!(
            matches!(l[0].down.loss, Some(LossSpec::GilbertElliott { loss_in_bad, .. }) if loss_in_bad == 0.2)
        );
    }

    #[test]
    fn errors_point_at_the_offending_place() {
        let e = parse(&GOOD.replace("max_queue_bytes", "max_queue_byte")).unwrap_err();
        assert!(
            e.starts_with("t.toml:18:1:") && e.contains("mode fast"),
            "{e}"
        );
        let e = parse(&GOOD.replace("stream = { ordered = true }", "scheduler = \"nope\""))
            .unwrap_err();
        assert!(
            e.starts_with("t.toml:4:13:") && e.contains("unknown scheduler"),
            "{e}"
        );
        let e = parse(&GOOD.replace("loads = [1, 4]", "loads = [1, 40]")).unwrap_err();
        assert!(
            e.contains("at load 40x") && e.contains("load must be"),
            "{e}"
        );
        let trace = GOOD.replace(
            "rate = { model = \"constant\", kbps = 200 }",
            "rate = { model = \"trace\", path = \"no/such\" }",
        );
        let e = parse(&trace).unwrap_err();
        assert!(e.starts_with("t.toml:7:") && e.contains("link a.up"), "{e}");
        let e = parse(&GOOD.replace("[tunnel]", "[tunnel]\nacks = \"often\"")).unwrap_err();
        assert!(e.starts_with("t.toml:4:8:") && e.contains("often"), "{e}");
    }

    #[test]
    fn session_stream_and_channel_values_are_checked_where_written() {
        let cases = [
            ("stream = { ordered = true }", "stream = { ordered = true }\nsession = { lookahead_ms = 1e300 }", "t.toml:5:11: lookahead_ms must be at most 31536000000 (a year), got 1e300"),
            ("stream = { ordered = true }", "stream = { max_queue_bytes = 0 }", "t.toml:4:10: tunnel.stream.max_queue_bytes must be above 0"),
            ("stream = { max_queue_bytes = 5000 }", "stream = { max_kbps = 1e30 }", "t.toml:18:1: mode fast: stream.max_kbps must be at most 100000000 kbit/s (100 Gbit/s), got 1e30"),
            ("duration_s = 10", "duration_s = 10\ndrain_s = 1e20", "t.toml:3:11: drain_s must be at most 31536000 (a year), got 1e20"),
            ("name = \"a\"", "name = \"a\"\nup_channel = { mtu = 10 }", "t.toml:5:1: link a.up_channel: mtu must be in 64..=65000, got 10"),
            ("name = \"a\"", "name = \"a\"\ndown_channel = { congestion = { kind = \"cubic\", beta = 3 } }", "t.toml:5:1: link a.down_channel: cubic beta must be in 0.1..=0.95, got 3"),
        ];
        for (from, to, want) in cases {
            let text = GOOD.replace(from, to);
            assert_ne!(text, GOOD, "{from}");
            assert_eq!(parse(&text).unwrap_err(), want);
        }
    }

    #[test]
    fn default_channels_ack_by_the_reverse_path_unless_told_otherwise() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.acks, AckFrequency::ReversePath);
        assert_eq!(s.links[0].up_channel.acks, AckFrequency::ReversePath);
        assert_eq!(s.links[0].down_channel.acks, AckFrequency::ReversePath);
        let s = parse(&GOOD.replace("[tunnel]", "[tunnel]\nacks = \"fixed\"")).unwrap();
        assert_eq!(s.acks, AckFrequency::Fixed);
        assert_eq!(s.links[0].up_channel.acks, AckFrequency::Fixed);
        assert_eq!(s.links[0].down_channel.acks, AckFrequency::Fixed);
    }
}
