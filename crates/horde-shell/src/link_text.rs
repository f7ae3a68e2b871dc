//! A scenario's link models written as one `horde shell --link` value, so the real-time
//! run emulates exactly the models the simulator used.

use std::path::Path;

use anyhow::{bail, Context, Result};
use horde_links::{DelaySpec, LinkSpec, LossSpec, QdiscKind, RateSpec};

/// `up=...,down=...` for `horde shell --link`; trace paths become absolute (the shell
/// resolves them against its working directory, the scenario against its own folder).
pub fn link_text(up: &LinkSpec, down: &LinkSpec, base_dir: &Path) -> Result<String> {
    Ok(format!(
        "up={},down={}",
        section(up, base_dir)?,
        section(down, base_dir)?
    ))
}

/// [`link_text`] for each named channel's `(name, up, down)`, an error naming the channel.
pub fn link_texts<'a>(
    channels: impl IntoIterator<Item = (&'a str, &'a LinkSpec, &'a LinkSpec)>,
    base_dir: &Path,
) -> Result<Vec<String>> {
    channels
        .into_iter()
        .map(|(name, up, down)| {
            link_text(up, down, base_dir).with_context(|| format!("channel {name}"))
        })
        .collect()
}

fn section(spec: &LinkSpec, base_dir: &Path) -> Result<String> {
    let mut keys = Vec::new();
    if let Some(kind) = spec.qdisc.filter(|k| *k != QdiscKind::Fifo) {
        keys.push(format!("qdisc={kind}"));
    }
    match &spec.rate {
        None | Some(RateSpec::Unlimited {}) => {}
        Some(RateSpec::Constant { kbps }) => keys.push(format!("rate={kbps}kbit")),
        Some(RateSpec::Steps { steps }) => {
            let Some((first, changes)) = steps.split_first() else {
                bail!("a rate schedule without steps");
            };
            keys.push(format!("rate={}kbit", first.kbps));
            for c in changes {
                keys.push(format!("rate_at={}s:{}kbit", c.at_s, c.kbps));
            }
        }
        Some(RateSpec::Trace { path }) => {
            let full = base_dir.join(path);
            let full = full.canonicalize().unwrap_or(full);
            let text = full.display().to_string();
            if text.contains(',') || text.contains('=') {
                bail!("trace path {text} contains ',' or '=', which --link cannot carry");
            }
            keys.push(format!("rate=trace:{text}"));
        }
        // `--link` names the CDMA2000 model with its defaults only.
        Some(RateSpec::Cdma1xRtt(p)) if **p == Default::default() => {
            keys.push("rate=cdma1x".into())
        }
        Some(RateSpec::Cdma1xRtt(_)) => {
            bail!("a CDMA2000 link with non-default parameters has no horde shell --link form")
        }
        Some(RateSpec::Wifi(w)) => {
            let mut phy = w.phy.name().to_string();
            if let Some(mbps) = w.mbps {
                phy.push_str(&format!(":{mbps}"));
            }
            keys.push(format!("wifi={phy}"));
            if let Some(d) = w.distance_m {
                keys.push(format!("distance={d}m"));
            }
            if let Some(f) = w.fer {
                keys.push(format!("fer={f}"));
            }
            for s in &w.stations {
                let target = match (s.addr, s.port) {
                    (Some(a), None) => a.to_string(),
                    (None, Some(p)) => p.to_string(),
                    _ => bail!("a wifi station matching both an address and a port has no horde shell --link form"),
                };
                match (s.distance_m, s.fer) {
                    (Some(d), _) => keys.push(format!("station={target}:{d}m")),
                    (None, f) => keys.push(format!("station={target}:{}", f.unwrap_or(0.0))),
                }
            }
        }
    }
    match &spec.delay {
        None => keys.push("delay=0ms".into()),
        Some(DelaySpec::Constant { ms }) => keys.push(format!("delay={ms}ms")),
        Some(DelaySpec::Gaussian { mean_ms, sd_ms }) => {
            keys.push(format!("delay={mean_ms}ms"));
            keys.push(format!("jitter={sd_ms}ms"));
        }
    }
    if let Some(b) = spec.buffer_bytes {
        keys.push(format!("buffer={b}b"));
    }
    match &spec.loss {
        None | Some(LossSpec::None {}) => {}
        Some(LossSpec::Bernoulli { p }) => keys.push(format!("loss={p}")),
        Some(LossSpec::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_in_good,
            loss_in_bad,
        }) => keys.push(format!(
            "loss=ge:{p_good_to_bad}:{p_bad_to_good}:{loss_in_good}:{loss_in_bad}"
        )),
        Some(other) => bail!("loss model {other:?} has no horde shell --link form"),
    }
    Ok(keys.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_link_arg;

    #[test]
    fn the_shell_reads_back_the_same_models() {
        let up = LinkSpec {
            rate: Some(RateSpec::Constant { kbps: 2500.5 }),
            buffer_bytes: Some(60_000),
            loss: Some(LossSpec::GilbertElliott {
                p_good_to_bad: 0.01,
                p_bad_to_good: 0.3,
                loss_in_good: 0.001,
                loss_in_bad: 0.6,
            }),
            delay: Some(DelaySpec::Gaussian {
                mean_ms: 40.0,
                sd_ms: 2.5,
            }),
            qdisc: None,
        };
        let down = LinkSpec {
            rate: Some(RateSpec::Trace {
                path: "cell-a.up".into(),
            }),
            buffer_bytes: None,
            loss: Some(LossSpec::Bernoulli { p: 0.02 }),
            delay: Some(DelaySpec::Constant { ms: 20.0 }),
            qdisc: None,
        };
        let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces");
        let text = link_text(&up, &down, &traces).unwrap();
        let (up2, down2) = parse_link_arg(&text).unwrap();
        assert_eq!(up2, up);
        assert_eq!(
            down2.rate,
            Some(RateSpec::Trace {
                path: traces.join("cell-a.up").canonicalize().unwrap()
            })
        );
        assert_eq!((down2.loss, down2.delay), (down.loss, down.delay));
        // Scripted rate changes, one direction only.
        let steps = LinkSpec {
            rate: Some(RateSpec::Steps {
                steps: vec![
                    horde_links::RateStep {
                        at_s: 0.0,
                        kbps: 8000.0,
                    },
                    horde_links::RateStep {
                        at_s: 2.5,
                        kbps: 500.0,
                    },
                ],
            }),
            ..LinkSpec::default()
        };
        let text = link_text(&steps, &LinkSpec::default(), &traces).unwrap();
        assert_eq!(parse_link_arg(&text).unwrap().0.rate, steps.rate);
        // A direction with nothing set still forms a section.
        let ideal = link_text(&LinkSpec::default(), &LinkSpec::default(), &traces).unwrap();
        assert_eq!(
            parse_link_arg(&ideal).unwrap().0.delay,
            Some(DelaySpec::Constant { ms: 0.0 })
        );
        let burst = LinkSpec {
            loss: Some(LossSpec::BurstMarkov {
                rate: 0.1,
                max_burst: 4,
            }),
            ..LinkSpec::default()
        };
        assert!(link_text(&burst, &burst, &traces).is_err());
        // A queue discipline goes through, and reads back as the same link.
        let chap = LinkSpec {
            rate: Some(RateSpec::Constant { kbps: 20000.0 }),
            qdisc: Some(QdiscKind::Chap),
            ..LinkSpec::default()
        };
        let text = link_text(&LinkSpec::default(), &chap, &traces).unwrap();
        assert!(text.contains("down=qdisc=chap,rate=20000kbit"), "{text}");
        let back = crate::link_arg::LinkArg::parse(&text).unwrap();
        assert_eq!(back.down.qdisc, Some(QdiscKind::Chap));
        assert_eq!(back.up.qdisc, None);
        let fifo = LinkSpec {
            qdisc: Some(QdiscKind::Fifo),
            ..LinkSpec::default()
        };
        assert!(link_text(&fifo, &fifo, &traces).is_ok());
        // The 802.11 airtime model and its stations read back as the same link.
        let wifi = LinkSpec {
            rate: Some(RateSpec::Wifi(horde_links::WifiRate {
                phy: horde_links::WifiPhy::Dot11b,
                mbps: Some(5.5),
                distance_m: Some(3.0),
                fer: None,
                stations: vec![
                    horde_links::WifiStation {
                        addr: None,
                        port: Some(5001),
                        distance_m: Some(20.0),
                        fer: None,
                    },
                    horde_links::WifiStation {
                        addr: Some("10.0.0.3".parse().unwrap()),
                        port: None,
                        distance_m: None,
                        fer: Some(0.25),
                    },
                ],
            })),
            qdisc: Some(QdiscKind::Chap),
            delay: Some(DelaySpec::Constant { ms: 2.0 }),
            ..LinkSpec::default()
        };
        let text = link_text(&wifi, &LinkSpec::default(), &traces).unwrap();
        assert_eq!(parse_link_arg(&text).unwrap().0, wifi, "{text}");
    }
}
