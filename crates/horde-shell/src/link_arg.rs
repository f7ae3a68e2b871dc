//! The `--link` argument of `horde shell`: comma-separated `key=value` pairs describing
//! one emulated link.
//!
//! Plain keys apply to both directions. `up=RATE` / `down=RATE` (`up=trace:FILE`,
//! `down=20mbit`) set one direction's rate only, and the keys after them still apply to
//! both, so Mahimahi-style `up=trace:A.up,down=trace:A.down,delay=40ms` delays both
//! ways. `up=KEY=VALUE` (`down=rate=20mbit,delay=40ms`) starts a section: the keys from
//! there on apply to that direction only.
//!
//! | key | value |
//! | --- | --- |
//! | `rate` | `10mbit`, `500kbit`, `1gbit`, `64000bps`, `trace:FILE` (Mahimahi), or `cdma1x` (docs/cdma.md) |
//! | `delay` | one-way delay: `20ms`, `1.5s`, `300us` |
//! | `jitter` | standard deviation of a Gaussian delay around `delay` |
//! | `buffer` | drop-tail buffer: `150kb` (1000 B), `64kib`, `1mb`, `3000b` |
//! | `loss` | `0.01` (Bernoulli) or `ge:P_GB:P_BG[:LOSS_GOOD[:LOSS_BAD]]` (Gilbert-Elliott) |
//! | `down_at` | outage of both directions: `START:LENGTH`, e.g. `5s:2s` (repeatable) |
//! | `rate_at` | scripted rate change: `START:RATE`, e.g. `5s:2mbit`, from a constant `rate` (repeatable) |
//! | `wifi` | an 802.11 sender instead of `rate`: `dot11g` or `dot11b`, optionally `:MBPS` (docs/links.md) |
//! | `distance` | with `wifi`: the receiver's distance, `10m` (shadowing model) |
//! | `fer` | with `wifi`: the receiver's frame error rate, `0.1` |
//! | `station` | with `wifi`: `PORT:VALUE` or `ADDR:VALUE`, packets to that destination port or address at a distance (`25m`) or FER (`0.3`) of their own (repeatable) |

use std::fmt;
use std::time::Duration;

use horde_emu::ScheduleStep;
use horde_links::{
    DelaySpec, LinkSpec, LossSpec, QdiscKind, RateSpec, RateStep, WifiPhy, WifiRate, WifiStation,
};

/// One parsed `--link`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkArg {
    /// Namespace → host.
    pub up: LinkSpec,
    /// Host → namespace.
    pub down: LinkSpec,
    /// Outages, as down/up steps.
    pub schedule: Vec<ScheduleStep>,
}

/// What is wrong with a `--link` value (the caller adds `--link N: `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkArgError(pub String);

impl fmt::Display for LinkArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(message: impl Into<String>) -> Result<T, LinkArgError> {
    Err(LinkArgError(message.into()))
}

#[derive(Clone, Copy)]
enum Section {
    Both,
    Up,
    Down,
}

/// A per-direction part of the spec that has not been combined yet.
#[derive(Default, Clone)]
struct Partial {
    rate: Option<RateSpec>,
    delay_ms: Option<f64>,
    jitter_ms: Option<f64>,
    buffer: Option<u64>,
    loss: Option<LossSpec>,
    /// `rate_at` changes, in the order given.
    rate_changes: Vec<RateStep>,
    qdisc: Option<QdiscKind>,
    /// `wifi=PHY[:MBPS]`.
    wifi: Option<(WifiPhy, Option<f64>)>,
    distance_m: Option<f64>,
    fer: Option<f64>,
    stations: Vec<WifiStation>,
}

impl Partial {
    fn merged_over(&self, base: &Partial) -> Partial {
        Partial {
            rate: self.rate.clone().or_else(|| base.rate.clone()),
            delay_ms: self.delay_ms.or(base.delay_ms),
            jitter_ms: self.jitter_ms.or(base.jitter_ms),
            buffer: self.buffer.or(base.buffer),
            loss: self.loss.clone().or_else(|| base.loss.clone()),
            rate_changes: if self.rate_changes.is_empty() {
                base.rate_changes.clone()
            } else {
                self.rate_changes.clone()
            },
            qdisc: self.qdisc.or(base.qdisc),
            wifi: self.wifi.or(base.wifi),
            distance_m: self.distance_m.or(base.distance_m),
            fer: self.fer.or(base.fer),
            stations: if self.stations.is_empty() {
                base.stations.clone()
            } else {
                self.stations.clone()
            },
        }
    }

    /// The `wifi` rate model, if `wifi=` was given; its other keys need it.
    fn wifi_rate(&mut self) -> Result<Option<RateSpec>, LinkArgError> {
        let Some((phy, mbps)) = self.wifi else {
            if self.distance_m.is_some() || self.fer.is_some() || !self.stations.is_empty() {
                return err("distance, fer and station need wifi=dot11g or wifi=dot11b");
            }
            return Ok(None);
        };
        if self.rate.is_some() || !self.rate_changes.is_empty() {
            return err("wifi: the 802.11 sender sets the rate, so leave out rate and rate_at");
        }
        Ok(Some(RateSpec::Wifi(WifiRate {
            phy,
            mbps,
            distance_m: self.distance_m,
            fer: self.fer,
            stations: std::mem::take(&mut self.stations),
        })))
    }

    fn into_spec(mut self) -> Result<LinkSpec, LinkArgError> {
        if let Some(wifi) = self.wifi_rate()? {
            self.rate = Some(wifi);
        }
        let delay = match (self.delay_ms, self.jitter_ms) {
            (None, None) => None,
            (mean, None) => Some(DelaySpec::Constant {
                ms: mean.unwrap_or(0.0),
            }),
            (mean, Some(sd)) => Some(DelaySpec::Gaussian {
                mean_ms: mean.unwrap_or(0.0),
                sd_ms: sd,
            }),
        };
        let rate = match (self.rate, self.rate_changes.is_empty()) {
            (rate, true) => rate,
            (Some(RateSpec::Constant { kbps }), false) => {
                let mut steps = vec![RateStep { at_s: 0.0, kbps }];
                let mut changes = self.rate_changes;
                changes.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
                steps.extend(changes);
                Some(RateSpec::Steps { steps })
            }
            (_, false) => return err("rate_at: needs a constant rate=... to start from"),
        };
        Ok(LinkSpec {
            rate,
            buffer_bytes: self.buffer,
            loss: self.loss,
            delay,
            qdisc: self.qdisc,
        })
    }
}

impl LinkArg {
    /// Parse one `--link` value. Link parameters are checked too
    /// ([`LinkSpec::validate`]); trace files are only read when the link is built.
    pub fn parse(text: &str) -> Result<LinkArg, LinkArgError> {
        let mut parts = [Partial::default(), Partial::default(), Partial::default()];
        let mut schedule = Vec::new();
        let mut section = Section::Both;
        if text.trim().is_empty() {
            return err("empty link spec (try rate=10mbit,delay=20ms)");
        }
        for item in text.split(',') {
            let Some((key, value)) = item.split_once('=') else {
                return err(format!("expected key=value, got \"{item}\""));
            };
            let (key, value) = match key {
                "up" | "down" => {
                    let direction = if key == "up" {
                        Section::Up
                    } else {
                        Section::Down
                    };
                    match value.split_once('=') {
                        Some((k, v)) => {
                            section = direction;
                            (k, v)
                        }
                        None => {
                            parts[direction as usize].rate = Some(rate(value)?);
                            section = Section::Both;
                            continue;
                        }
                    }
                }
                _ => (key, value),
            };
            let part = &mut parts[section as usize];
            match key {
                "rate" => part.rate = Some(rate(value)?),
                "delay" => part.delay_ms = Some(millis(key, value)?),
                "jitter" => part.jitter_ms = Some(millis(key, value)?),
                "buffer" => part.buffer = Some(bytes(value)?),
                "loss" => part.loss = Some(loss(value)?),
                "qdisc" => {
                    part.qdisc = Some(value.parse().map_err(|e: horde_links::QdiscError| {
                        LinkArgError(format!("qdisc: {e}"))
                    })?)
                }
                "rate_at" => part.rate_changes.push(rate_change(value)?),
                "wifi" => part.wifi = Some(wifi(value)?),
                "distance" => part.distance_m = Some(metres("distance", value)?),
                "fer" => part.fer = Some(number("fer", value)?),
                "station" => part.stations.push(station(value)?),
                "down_at" => {
                    let (start, length) = outage(value)?;
                    schedule.push(ScheduleStep {
                        at: start,
                        down: true,
                    });
                    schedule.push(ScheduleStep {
                        at: start + length,
                        down: false,
                    });
                }
                _ => {
                    return err(format!(
                        "unknown key \"{key}\" (expected rate, delay, jitter, buffer, loss, qdisc, wifi, distance, fer, station, down_at, rate_at, up or down)"
                    ))
                }
            }
        }
        let [both, up, down] = parts;
        let arg = LinkArg {
            up: up.merged_over(&both).into_spec()?,
            down: down.merged_over(&both).into_spec()?,
            schedule,
        };
        for (name, spec) in [("up", &arg.up), ("down", &arg.down)] {
            spec.validate()
                .map_err(|e| LinkArgError(format!("{name}: {e}")))?;
        }
        Ok(arg)
    }
}

fn number(what: &str, text: &str) -> Result<f64, LinkArgError> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => err(format!("{what}: \"{text}\" is not a non-negative number")),
    }
}

/// Split `20ms` into (`20`, `ms`).
fn split_unit(text: &str) -> (&str, &str) {
    let at = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    (&text[..at], &text[at..])
}

fn rate(text: &str) -> Result<RateSpec, LinkArgError> {
    if text == "cdma1x" {
        // The CDMA2000 demand-driven model with its defaults (docs/cdma.md).
        return Ok(RateSpec::Cdma1xRtt(Box::default()));
    }
    if let Some(path) = text.strip_prefix("trace:") {
        if path.is_empty() {
            return err("rate: trace: needs a file, e.g. trace:traces/cell-a.up");
        }
        return Ok(RateSpec::Trace { path: path.into() });
    }
    let (value, unit) = split_unit(text);
    let scale = match unit.to_ascii_lowercase().as_str() {
        "bps" | "bit" => 1e-3,
        "kbit" | "kbps" => 1.0,
        "mbit" | "mbps" => 1e3,
        "gbit" | "gbps" => 1e6,
        _ => {
            return err(format!(
                "rate: \"{text}\" needs a unit: bps, kbit, mbit, gbit (or trace:FILE)"
            ))
        }
    };
    Ok(RateSpec::Constant {
        kbps: number("rate", value)? * scale,
    })
}

fn duration(what: &str, text: &str) -> Result<Duration, LinkArgError> {
    let (value, unit) = split_unit(text);
    let scale = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return err(format!("{what}: \"{text}\" needs a unit: us, ms or s")),
    };
    let seconds = number(what, value)? * scale;
    match Duration::try_from_secs_f64(seconds) {
        Ok(d) if d <= MAX_TIME => Ok(d),
        _ => err(format!("{what}: \"{text}\" is longer than a year")),
    }
}

/// The longest time a `--link` value may name (outage starts and lengths, delays):
/// beyond it the figure is a typo, and `Duration` arithmetic would overflow.
const MAX_TIME: Duration = Duration::from_secs(365 * 24 * 3600);

fn millis(what: &str, text: &str) -> Result<f64, LinkArgError> {
    Ok(duration(what, text)?.as_secs_f64() * 1e3)
}

fn bytes(text: &str) -> Result<u64, LinkArgError> {
    let (value, unit) = split_unit(text);
    let scale = match unit.to_ascii_lowercase().as_str() {
        "b" => 1.0,
        "kb" => 1e3,
        "kib" => 1024.0,
        "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        _ => {
            return err(format!(
                "buffer: \"{text}\" needs a unit: b, kb, kib, mb, mib"
            ))
        }
    };
    Ok((number("buffer", value)? * scale).round() as u64)
}

fn loss(text: &str) -> Result<LossSpec, LinkArgError> {
    let Some(params) = text.strip_prefix("ge:") else {
        return Ok(LossSpec::Bernoulli {
            p: number("loss", text)?,
        });
    };
    let values = params
        .split(':')
        .map(|v| number("loss", v))
        .collect::<Result<Vec<_>, _>>()?;
    match values[..] {
        [p_good_to_bad, p_bad_to_good] => Ok(LossSpec::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_in_good: 0.0,
            loss_in_bad: 1.0,
        }),
        [p_good_to_bad, p_bad_to_good, loss_in_good] => Ok(LossSpec::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_in_good,
            loss_in_bad: 1.0,
        }),
        [p_good_to_bad, p_bad_to_good, loss_in_good, loss_in_bad] => Ok(LossSpec::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_in_good,
            loss_in_bad,
        }),
        _ => err(format!(
            "loss: \"{text}\": expected ge:P_GOOD_TO_BAD:P_BAD_TO_GOOD[:LOSS_IN_GOOD[:LOSS_IN_BAD]]"
        )),
    }
}

fn wifi(text: &str) -> Result<(WifiPhy, Option<f64>), LinkArgError> {
    let (phy, mbps) = match text.split_once(':') {
        Some((phy, mbps)) => (phy, Some(number("wifi", mbps)?)),
        None => (text, None),
    };
    let phy = match phy {
        "dot11g" => WifiPhy::Dot11g,
        "dot11b" => WifiPhy::Dot11b,
        _ => {
            return err(format!(
                "wifi: \"{text}\": expected dot11g or dot11b, optionally with :MBPS (dot11g:24)"
            ))
        }
    };
    Ok((phy, mbps))
}

fn metres(what: &str, text: &str) -> Result<f64, LinkArgError> {
    let Some(value) = text.strip_suffix('m') else {
        return err(format!("{what}: \"{text}\" needs the unit m, e.g. 10m"));
    };
    number(what, value)
}

/// `PORT:VALUE` or `ADDR:VALUE`, VALUE a distance (`25m`) or a frame error rate.
fn station(text: &str) -> Result<WifiStation, LinkArgError> {
    let usage = || {
        LinkArgError(format!(
            "station: \"{text}\": expected PORT:VALUE or ADDR:VALUE, VALUE a distance (25m) or a frame error rate (0.3)"
        ))
    };
    let (target, value) = text.rsplit_once(':').ok_or_else(usage)?;
    let mut s = WifiStation {
        addr: None,
        port: None,
        distance_m: None,
        fer: None,
    };
    if let Ok(port) = target.parse::<u16>() {
        s.port = Some(port);
    } else {
        s.addr = Some(target.parse().map_err(|_| usage())?);
    }
    if value.ends_with('m') {
        s.distance_m = Some(metres("station", value)?);
    } else {
        s.fer = Some(number("station", value)?);
    }
    Ok(s)
}

fn rate_change(text: &str) -> Result<RateStep, LinkArgError> {
    let Some((start, to)) = text.split_once(':') else {
        return err(format!(
            "rate_at: \"{text}\": expected START:RATE, e.g. 5s:2mbit"
        ));
    };
    let kbps = match rate(to)? {
        RateSpec::Constant { kbps } => kbps,
        _ => return err(format!("rate_at: \"{to}\" must be a constant rate")),
    };
    Ok(RateStep {
        at_s: duration("rate_at", start)?.as_secs_f64(),
        kbps,
    })
}

fn outage(text: &str) -> Result<(Duration, Duration), LinkArgError> {
    let Some((start, length)) = text.split_once(':') else {
        return err(format!(
            "down_at: \"{text}\": expected START:LENGTH, e.g. 5s:2s"
        ));
    };
    Ok((duration("down_at", start)?, duration("down_at", length)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(text: &str) -> String {
        LinkArg::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn shared_keys_apply_to_both_directions() {
        let l = LinkArg::parse("rate=10mbit,delay=20ms").unwrap();
        assert_eq!(l.up, l.down);
        assert_eq!(l.up.rate, Some(RateSpec::Constant { kbps: 10_000.0 }));
        assert_eq!(l.up.delay, Some(DelaySpec::Constant { ms: 20.0 }));
        assert!(l.schedule.is_empty());
    }

    #[test]
    fn cdma1x_names_the_demand_driven_model() {
        let l = LinkArg::parse("delay=250ms,buffer=30kb,up=cdma1x").unwrap();
        assert_eq!(l.up.rate, Some(RateSpec::Cdma1xRtt(Box::default())));
        assert_eq!(l.down.rate, None);
        assert!(l.up.validate().is_ok());
    }

    #[test]
    fn sections_override_per_direction() {
        let l = LinkArg::parse(
            "delay=30ms,buffer=150kb,up=trace:traces/cell-a.up,down=rate=20mbit,delay=40ms,loss=ge:0.01:0.3,down_at=5s:2s",
        )
        .unwrap();
        assert_eq!(
            l.up.rate,
            Some(RateSpec::Trace {
                path: "traces/cell-a.up".into()
            })
        );
        assert_eq!(l.up.delay, Some(DelaySpec::Constant { ms: 30.0 }));
        assert_eq!(l.up.buffer_bytes, Some(150_000));
        assert_eq!(l.up.loss, None);
        assert_eq!(l.down.rate, Some(RateSpec::Constant { kbps: 20_000.0 }));
        assert_eq!(l.down.delay, Some(DelaySpec::Constant { ms: 40.0 }));
        assert_eq!(l.down.buffer_bytes, Some(150_000));
        assert!(matches!(
            l.down.loss,
            Some(LossSpec::GilbertElliott { p_good_to_bad, .. }) if p_good_to_bad == 0.01
        ));
        assert_eq!(
            l.schedule,
            vec![
                ScheduleStep {
                    at: Duration::from_secs(5),
                    down: true
                },
                ScheduleStep {
                    at: Duration::from_secs(7),
                    down: false
                }
            ]
        );
        let l = LinkArg::parse("loss=0.01,jitter=2ms,delay=10ms").unwrap();
        assert_eq!(l.up.loss, Some(LossSpec::Bernoulli { p: 0.01 }));
        assert_eq!(
            l.up.delay,
            Some(DelaySpec::Gaussian {
                mean_ms: 10.0,
                sd_ms: 2.0
            })
        );
    }

    #[test]
    fn a_bare_rate_sets_one_direction_and_later_keys_apply_to_both() {
        let l = LinkArg::parse("up=trace:A.up,down=trace:A.down,delay=40ms").unwrap();
        assert_eq!(
            l.up.rate,
            Some(RateSpec::Trace {
                path: "A.up".into()
            })
        );
        assert_eq!(
            l.down.rate,
            Some(RateSpec::Trace {
                path: "A.down".into()
            })
        );
        assert_eq!(l.up.delay, Some(DelaySpec::Constant { ms: 40.0 }));
        assert_eq!(l.down.delay, Some(DelaySpec::Constant { ms: 40.0 }));
        // A key=value section still binds what follows to its direction.
        let l = LinkArg::parse("up=20mbit,down=rate=5mbit,delay=40ms").unwrap();
        assert_eq!(l.up.rate, Some(RateSpec::Constant { kbps: 20_000.0 }));
        assert_eq!(l.up.delay, None);
        assert_eq!(l.down.delay, Some(DelaySpec::Constant { ms: 40.0 }));
        assert!(e("up=10").contains("needs a unit"));
    }

    #[test]
    fn rate_at_scripts_rate_changes() {
        let l =
            LinkArg::parse("rate=10mbit,rate_at=10s:10mbit,rate_at=5s:2mbit,delay=20ms").unwrap();
        let step = |at_s, kbps| RateStep { at_s, kbps };
        let want = Some(RateSpec::Steps {
            steps: vec![
                step(0.0, 10_000.0),
                step(5.0, 2_000.0),
                step(10.0, 10_000.0),
            ],
        });
        assert_eq!(l.up.rate, want);
        assert_eq!(l.down.rate, want);
        let l = LinkArg::parse("rate=10mbit,down=rate_at=1s:1mbit").unwrap();
        assert_eq!(l.up.rate, Some(RateSpec::Constant { kbps: 10_000.0 }));
        assert!(matches!(l.down.rate, Some(RateSpec::Steps { .. })));
        assert!(e("rate_at=5s:2mbit").contains("needs a constant rate"));
        assert!(e("rate=1mbit,rate_at=5s").contains("START:RATE"));
        assert!(e("rate=1mbit,rate_at=5s:trace:x").contains("must be a constant rate"));
        assert!(e("rate=1mbit,rate_at=0s:2mbit").contains("strictly increasing"));
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        assert!(e("rat=10mbit").starts_with("unknown key \"rat\""));
        assert!(e("rate=10").contains("needs a unit"));
        assert!(e("delay=-5ms").contains("not a non-negative number"));
        assert!(e("delay=abcms").contains("needs a unit"));
        assert!(e("rate").contains("expected key=value"));
        assert!(e("loss=1.5").contains("loss.p"));
        assert!(e("loss=ge:0.1").contains("expected ge:"));
        assert!(e("down_at=5s").contains("START:LENGTH"));
        assert!(e("buffer=0b").contains("buffer_bytes"));
        assert!(e("").contains("empty"));
    }

    #[test]
    fn wifi_builds_the_airtime_model_and_refuses_bad_values() {
        let l = LinkArg::parse(
            "wifi=dot11g,distance=5m,station=5001:25m,station=10.0.0.9:0.3,qdisc=chap",
        )
        .unwrap();
        let Some(RateSpec::Wifi(w)) = &l.up.rate else {
            panic!("{:?}", l.up.rate)
        };
        assert_eq!(w.phy, WifiPhy::Dot11g);
        assert_eq!((w.mbps, w.distance_m, w.fer), (None, Some(5.0), None));
        assert_eq!(w.stations.len(), 2);
        assert_eq!(
            (w.stations[0].port, w.stations[0].distance_m),
            (Some(5001), Some(25.0))
        );
        assert_eq!(w.stations[1].addr, Some("10.0.0.9".parse().unwrap()));
        assert_eq!(w.stations[1].fer, Some(0.3));
        assert_eq!(l.up, l.down);
        let l = LinkArg::parse("down=wifi=dot11b:5.5,fer=0.1").unwrap();
        assert!(
            matches!(&l.down.rate, Some(RateSpec::Wifi(w)) if w.mbps == Some(5.5) && w.fer == Some(0.1))
        );
        assert_eq!(l.up.rate, None);

        assert!(e("wifi=dot11n").contains("expected dot11g or dot11b"));
        assert!(e("wifi=dot11g:50").contains("rate.mbps must be a dot11g rate"));
        assert!(
            e("wifi=dot11g,fer=1.5").contains("rate.fer must be a probability in [0, 1], got 1.5")
        );
        assert!(e("wifi=dot11g,distance=10").contains("needs the unit m"));
        assert!(e("wifi=dot11g,distance=10m,fer=0.1")
            .contains("rate.distance_m must be absent when rate.fer is given"));
        assert!(e("wifi=dot11g,station=5001").contains("expected PORT:VALUE"));
        assert!(e("wifi=dot11g,station=nowhere:5m").contains("expected PORT:VALUE"));
        assert!(e("wifi=dot11g,station=5001:2")
            .contains("rate.stations.fer must be a probability in [0, 1], got 2 (station 1)"));
        assert!(e("fer=0.1").contains("need wifi="));
        assert!(e("rate=10mbit,wifi=dot11g").contains("leave out rate"));
    }

    #[test]
    fn absurd_figures_are_refused_not_emulated() {
        assert!(e("rate=99999999gbit").contains("at most 100000000 kbit/s"));
        assert!(
            LinkArg::parse("rate=100gbit,delay=60000ms").is_ok(),
            "the limits pass"
        );
        assert!(e("delay=100000000s").contains("longer than a year"));
        assert!(e("delay=61s").contains("at most 60000 ms"));
        assert!(e("jitter=2000s").contains("delay.sd_ms"));
        assert!(e("rate=1mbit,rate_at=5s:99999999gbit").contains("(100 Gbit/s)"));
        assert!(e("down_at=5s:99999999s").contains("longer than a year"));
    }
}
