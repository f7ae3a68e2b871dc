//! From the file as written to a validated [`Scenario`].

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use horde_config::{checks, shown};
use horde_proto::{ChannelId, MTU_RANGE};
use toml::Spanned;

use super::error::Locator;
use super::raw::{RawChannel, RawScenario, RawStream};
use super::{
    ChannelSpec, HostSpec, Scenario, ScenarioError, SchedulerSpec, StreamRate, StreamSpec,
};
use crate::workload::burst_fits_the_queue;

type Result<T> = std::result::Result<T, ScenarioError>;

pub(crate) fn parse(text: &str, file: &str, base: Option<&Path>) -> Result<Scenario> {
    let loc = Locator { file, text };
    let raw: RawScenario = toml::from_str(text).map_err(|e| loc.toml(&e))?;
    Checker { loc, base }.scenario(raw)
}

struct Checker<'a> {
    loc: Locator<'a>,
    /// The scenario file's directory when loaded from a file.
    base: Option<&'a Path>,
}

/// Names end up in CSV headers and file names, so keep them plain.
fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn span<T>(s: &Spanned<T>) -> Range<usize> {
    s.span()
}

impl Checker<'_> {
    fn name(&self, what: &str, s: &Spanned<String>) -> Result<String> {
        if is_identifier(s.get_ref()) {
            Ok(s.get_ref().clone())
        } else {
            Err(self.loc.at(
                span(s),
                format!(
                    "{what} {:?} must be non-empty and use only letters, digits, '_', '-' and '.'",
                    s.get_ref()
                ),
            ))
        }
    }

    fn positive(&self, what: &str, v: &Spanned<f64>) -> Result<f64> {
        let x = *v.get_ref();
        if x.is_finite() && x > 0.0 {
            Ok(x)
        } else {
            Err(self.loc.at(
                span(v),
                format!("{what} must be a positive number, got {}", shown(x)),
            ))
        }
    }

    fn non_negative(&self, what: &str, v: &Spanned<f64>) -> Result<f64> {
        let x = *v.get_ref();
        if x.is_finite() && x >= 0.0 {
            Ok(x)
        } else {
            Err(self.loc.at(
                span(v),
                format!("{what} must be zero or positive, got {}", shown(x)),
            ))
        }
    }

    /// A time in ms, zero or more and at most [`horde_config::MAX_SECONDS`]: every time
    /// is added to the clock somewhere, so a slip such as `1e300` must not overflow it.
    fn time_ms(&self, what: &str, v: &Spanned<f64>) -> Result<f64> {
        let ms = self.non_negative(what, v)?;
        let max = horde_config::MAX_SECONDS * 1e3;
        if ms > max {
            return Err(self.loc.at(
                span(v),
                format!("{what} must be at most {max} (a year), got {}", shown(ms)),
            ));
        }
        Ok(ms)
    }

    fn scenario(&self, raw: RawScenario) -> Result<Scenario> {
        let name = self.name("scenario name", &raw.name)?;
        let (duration_s, _) = self.loc.run_length(&raw.duration_s, None, 0.0)?;
        let scheduler = self.scheduler(&raw)?;
        let hosts = self.hosts(&raw)?;
        if raw.channels.is_empty() {
            return Err(self
                .loc
                .nowhere("no [[channels]]: a scenario needs at least one"));
        }
        let mut channels: Vec<ChannelSpec> = Vec::with_capacity(raw.channels.len());
        let mut seen = BTreeMap::new();
        for c in &raw.channels {
            let ch = self.channel(c, &hosts)?;
            if seen.insert(ch.name.clone(), ()).is_some() {
                return Err(self.loc.at(
                    span(&c.name),
                    format!("duplicate channel name {:?}", ch.name),
                ));
            }
            channels.push(ch);
        }
        self.channel_counts(&channels, &raw.channels)?;
        if raw.streams.is_empty() {
            return Err(self
                .loc
                .nowhere("no [[streams]]: a scenario needs at least one"));
        }
        let mut streams: Vec<StreamSpec> = Vec::with_capacity(raw.streams.len());
        for s in &raw.streams {
            let st = self.stream(s, &hosts, &channels)?;
            if streams.iter().any(|o| o.id == st.id) {
                return Err(self
                    .loc
                    .at(span(&s.id), format!("duplicate stream id {}", st.id)));
            }
            streams.push(st);
        }
        Ok(Scenario {
            name,
            seed: raw.seed,
            duration_s,
            scheduler,
            hosts,
            channels,
            streams,
            base_dir: self
                .base
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        })
    }

    /// The channels joining each pair of hosts, which one session between them must be
    /// able to open: channel ids are one byte. The error points at the first too many.
    fn channel_counts(&self, channels: &[ChannelSpec], raw: &[RawChannel]) -> Result<()> {
        let mut per_pair: BTreeMap<[&str; 2], usize> = BTreeMap::new();
        for (ch, raw) in channels.iter().zip(raw) {
            let mut pair = [ch.between[0].as_str(), ch.between[1].as_str()];
            pair.sort_unstable();
            let count = per_pair.entry(pair).or_default();
            *count += 1;
            if *count > ChannelId::COUNT {
                let total = channels
                    .iter()
                    .filter(|c| c.joins(pair[0], pair[1]))
                    .count();
                return Err(self.loc.at(
                    span(&raw.name),
                    format!(
                        "{total} channels join hosts {:?} and {:?}: a session has at most {} channels (channel ids are one byte)",
                        pair[0],
                        pair[1],
                        ChannelId::COUNT
                    ),
                ));
            }
        }
        Ok(())
    }

    fn scheduler(&self, raw: &RawScenario) -> Result<SchedulerSpec> {
        let mut out = SchedulerSpec::default();
        let Some(s) = &raw.scheduler else {
            return Ok(out);
        };
        if let Some(kind) = &s.kind {
            out.kind = self.name("scheduler kind", kind)?;
        }
        if let Some(v) = &s.cycle_ms {
            out.cycle_ms = self.time_ms("scheduler.cycle_ms", v)?;
        }
        if let Some(v) = &s.lookahead_ms {
            out.lookahead_ms = self.time_ms("scheduler.lookahead_ms", v)?;
        }
        if let Some(k) = &s.k {
            if *k.get_ref() == 0 {
                return Err(self.loc.at(span(k), "scheduler.k must be at least 1"));
            }
            out.k = Some(*k.get_ref());
        }
        if let Some(p) = &s.pack_adus {
            out.pack_adus = *p.get_ref();
        }
        if let Some(v) = &s.phantom_wait_ms {
            out.phantom_wait_ms = self.time_ms("scheduler.phantom_wait_ms", v)?;
        }
        Ok(out)
    }

    fn hosts(&self, raw: &RawScenario) -> Result<Vec<HostSpec>> {
        let Some(list) = &raw.hosts else {
            return Ok(["a", "b"].map(|name| HostSpec { name: name.into() }).into());
        };
        if list.get_ref().len() < 2 {
            return Err(self.loc.at(
                span(list),
                format!(
                    "[[hosts]] lists {} host(s); a scenario needs at least two",
                    list.get_ref().len()
                ),
            ));
        }
        let mut hosts: Vec<HostSpec> = Vec::new();
        for h in list.get_ref() {
            let name = self.name("host name", &h.name)?;
            if hosts.iter().any(|o| o.name == name) {
                return Err(self
                    .loc
                    .at(span(&h.name), format!("duplicate host name {name:?}")));
            }
            hosts.push(HostSpec { name });
        }
        Ok(hosts)
    }

    fn host_ref(&self, what: &str, s: &Spanned<String>, hosts: &[HostSpec]) -> Result<String> {
        let name = s.get_ref();
        if hosts.iter().any(|h| &h.name == name) {
            Ok(name.clone())
        } else {
            let known: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
            Err(self.loc.at(
                span(s),
                format!(
                    "{what} names unknown host {name:?} (hosts: {})",
                    known.join(", ")
                ),
            ))
        }
    }

    fn channel(&self, c: &RawChannel, hosts: &[HostSpec]) -> Result<ChannelSpec> {
        let name = self.name("channel name", &c.name)?;
        let between = match &c.between {
            None if hosts.len() == 2 => [hosts[0].name.clone(), hosts[1].name.clone()],
            None => {
                return Err(self.loc.at(
                    span(&c.name),
                    format!(
                        "channel {name:?} needs `between = [\"host\", \"host\"]`: \
                         the scenario has {} hosts",
                        hosts.len()
                    ),
                ))
            }
            Some(list) => {
                let [a, b] = list.get_ref().as_slice() else {
                    return Err(self.loc.at(
                        span(list),
                        format!(
                            "`between` must name exactly two hosts, got {}",
                            list.get_ref().len()
                        ),
                    ));
                };
                let a = self.host_ref("`between`", a, hosts)?;
                let b_name = self.host_ref("`between`", b, hosts)?;
                if a == b_name {
                    return Err(self.loc.at(
                        span(b),
                        format!("`between` must name two different hosts, got {a:?} twice"),
                    ));
                }
                [a, b_name]
            }
        };
        let mtu = *c.mtu.get_ref();
        self.loc.checked(span(&c.mtu), |c| {
            c.count_in("mtu", "mtu", mtu.into(), checks::widened(&MTU_RANGE));
        })?;
        if let Some(cc) = &c.congestion {
            self.loc.checked(span(cc), |checks| {
                checks::congestion(checks, "congestion", cc.get_ref());
            })?;
        }
        let cost_per_kb = match &c.cost_per_kb {
            Some(v) => self.non_negative("cost_per_kb", v)?,
            None => 0.0,
        };
        if let Some(p) = &c.loss_prior {
            p.get_ref()
                .check()
                .map_err(|e| self.loc.at(span(p), e.to_string()))?;
        }
        let link = |which: &str, l: &Spanned<horde_links::LinkSpec>| {
            l.get_ref()
                .validate()
                .map(|()| l.get_ref().clone())
                .map_err(|e| self.loc.at(span(l), format!("{which}: {e}")))
        };
        Ok(ChannelSpec {
            name,
            between,
            mtu: *c.mtu.get_ref(),
            congestion: c
                .congestion
                .as_ref()
                .map(|cc| cc.get_ref().clone())
                .unwrap_or_default(),
            cost_per_kb,
            loss_correlation: c.loss_correlation,
            loss_prior: c.loss_prior.as_ref().map(|p| *p.get_ref()),
            up: link("up", &c.up)?,
            down: match &c.down {
                Some(d) => link("down", d)?,
                None => horde_links::LinkSpec::default(),
            },
        })
    }

    fn stream(
        &self,
        s: &RawStream,
        hosts: &[HostSpec],
        channels: &[ChannelSpec],
    ) -> Result<StreamSpec> {
        let id = *s.id.get_ref();
        let from = match &s.from {
            Some(f) => self.host_ref("`from`", f, hosts)?,
            None if hosts.len() == 2 => hosts[0].name.clone(),
            None => {
                return Err(self.loc.at(
                    span(&s.id),
                    format!(
                        "stream {id} needs `from`: the scenario has {} hosts",
                        hosts.len()
                    ),
                ))
            }
        };
        let to = match &s.to {
            Some(t) => self.host_ref("`to`", t, hosts)?,
            None if hosts.len() == 2 => hosts
                .iter()
                .find(|h| h.name != from)
                .map(|h| h.name.clone())
                .unwrap_or_default(),
            None => {
                return Err(self.loc.at(
                    span(&s.id),
                    format!(
                        "stream {id} needs `to`: the scenario has {} hosts",
                        hosts.len()
                    ),
                ))
            }
        };
        if from == to {
            let at = s.to.as_ref().or(s.from.as_ref()).map_or(span(&s.id), span);
            return Err(self
                .loc
                .at(at, format!("stream {id} goes from {from:?} to itself")));
        }
        if !channels.iter().any(|c| c.joins(&from, &to)) {
            return Err(self.loc.at(
                span(&s.id),
                format!("stream {id}: no channel joins {from:?} and {to:?}"),
            ));
        }
        let elastic = s.elastic.as_ref().is_some_and(|e| *e.get_ref());
        let rate = match (&s.max_kbps, elastic) {
            (Some(m), true) => {
                return Err(self.loc.at(
                    span(m),
                    format!("stream {id}: give `max_kbps` or `elastic = true`, not both"),
                ))
            }
            (Some(m), false) => {
                let kbps = self.positive("max_kbps", m)?;
                self.loc
                    .checked(span(m), |c| c.not_too_fast("", "max_kbps", kbps))?;
                StreamRate::MaxKbps(kbps)
            }
            (None, true) => StreamRate::Elastic,
            (None, false) => {
                return Err(self.loc.at(
                    span(&s.id),
                    format!("stream {id} needs `max_kbps = <kbit/s>` or `elastic = true`"),
                ))
            }
        };
        s.workload
            .get_ref()
            .validate()
            .map_err(|e| self.loc.at(span(&s.workload), format!("workload: {e}")))?;
        self.loc.checked(span(&s.workload), |c| {
            burst_fits_the_queue(c, "workload", s.workload.get_ref());
        })?;
        let latency_bound_ms = match &s.latency_bound_ms {
            Some(b) => {
                let ms = *b.get_ref();
                if !horde_proto::LATENCY_BOUND_MS.contains(&ms) {
                    return Err(self.loc.at(
                        span(b),
                        format!(
                            "stream {id}: latency_bound_ms must be 1 to 60000 ms, got {}",
                            shown(ms)
                        ),
                    ));
                }
                Some(ms)
            }
            None => None,
        };
        let latency_copies = match &s.latency_copies {
            Some(n) => {
                let bounded = latency_bound_ms.is_some() || s.latency_bound_from_objectives;
                self.latency_copies(id, n, bounded)?
            }
            None => 1,
        };
        let mut objectives = Vec::with_capacity(s.objectives.len());
        for o in &s.objectives {
            if o.get_ref().is_empty() {
                return Err(self.loc.at(span(o), "objective path is empty"));
            }
            let path = match self.base {
                Some(base) => {
                    let p = base.join(o.get_ref());
                    if !p.is_file() {
                        return Err(self
                            .loc
                            .at(span(o), format!("objective file {} not found", p.display())));
                    }
                    p
                }
                None => PathBuf::from(o.get_ref()),
            };
            objectives.push(path);
        }
        Ok(StreamSpec {
            id,
            from,
            to,
            rate,
            ordered: s.ordered,
            latency_bound_ms,
            latency_bound_from_objectives: s.latency_bound_from_objectives,
            latency_copies,
            quickest: s.quickest,
            workload: s.workload.get_ref().clone(),
            objectives,
        })
    }

    /// Stream `id`'s `latency_copies`: 1 or 2, and 2 only with a latency bound
    /// (`bounded`: its own or its objectives').
    fn latency_copies(&self, id: u32, n: &Spanned<i64>, bounded: bool) -> Result<u8> {
        let v = *n.get_ref();
        let range = horde_proto::LATENCY_COPIES;
        let Some(copies) = u8::try_from(v).ok().filter(|c| range.contains(c)) else {
            return Err(self.loc.at(
                span(n),
                format!("stream {id}: latency_copies must be 1 or 2, got {v}"),
            ));
        };
        if copies == 2 && !bounded {
            return Err(self.loc.at(
                span(n),
                format!(
                    "stream {id}: latency_copies = 2 needs a latency bound \
                     (latency_bound_ms or latency_bound_from_objectives)"
                ),
            ));
        }
        Ok(copies)
    }
}
