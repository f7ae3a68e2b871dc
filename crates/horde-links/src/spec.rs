//! `LinkSpec`: a serde (TOML-friendly) description of one link direction, and its builder.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bottleneck::{Bottleneck, Rate};
use crate::cdma::{CdmaLink, CdmaParams, CdmaSector};
use crate::delay::DelayProcess;
use crate::error::LinkError;
use crate::limits::{MAX_DELAY_MS, MAX_RATE_KBPS};
use crate::link::ModelLink;
use crate::loss::{self, BurstMarkov, GilbertElliott, LossProcess};
use crate::qdisc_link::{self, QdiscLink};
use crate::rate_steps::{RateStep, RateSteps};
use crate::trace::Trace;
use crate::wifi_rate::WifiRate;
use crate::{Link, QdiscKind};

/// One direction of a link: bottleneck rate and buffer, then loss, then delay.
///
/// Every part is optional: no `rate` is unlimited, no `buffer_bytes` is an unlimited
/// buffer, no `loss` loses nothing, no `delay` adds nothing.
///
/// ```toml
/// rate = { model = "constant", kbps = 120 }
/// buffer_bytes = 64000
/// loss = { model = "burst_markov", rate = 0.2, max_burst = 16 }
/// delay = { model = "gaussian", mean_ms = 300, sd_ms = 15 }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Bottleneck service rate; `None` is unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateSpec>,
    /// Drop-tail limit on bytes waiting for the bottleneck; `None` is unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_bytes: Option<u64>,
    /// Loss process applied as packets leave the bottleneck; `None` loses nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossSpec>,
    /// Delay added to surviving packets; `None` adds nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<DelaySpec>,
    /// Queue discipline at the bottleneck (`"fifo"`, `"spq"`, `"chap"`, `"fq_codel"`);
    /// `None` is FIFO drop-tail. See `docs/links.md`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc: Option<QdiscKind>,
}

/// The bottleneck's service rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum RateSpec {
    /// `{ model = "unlimited" }`: no bottleneck (same as leaving `rate` out).
    Unlimited {},
    /// `{ model = "constant", kbps = 120 }`: serialization at `kbps` kbit/s (1 kbit = 1000 bits).
    Constant {
        /// Rate in kbit/s; positive.
        kbps: f64,
    },
    /// `{ model = "trace", path = "traces/lte.up" }`: a Mahimahi trace, relative to the
    /// directory given to [`LinkSpec::build`].
    Trace {
        /// The trace file.
        path: PathBuf,
    },
    /// `{ model = "steps", steps = [{ at_s = 0, kbps = 10000 }, { at_s = 5, kbps = 2000 }] }`:
    /// scripted rate changes: each step's rate from its time (seconds since the start)
    /// until the next step's; the first step is at 0. A packet being serialized when
    /// the rate changes finishes at the new rate.
    Steps {
        /// Strictly increasing in `at_s`, starting at 0.
        steps: Vec<RateStep>,
    },
    /// `{ model = "cdma1x_rtt", fch_kbps = 9.6, ... }`: the demand-driven CDMA2000 1xRTT
    /// downlink (one user alone in its sector); see `docs/cdma.md`. Loses only by buffer
    /// overflow, so `loss` must be absent and `delay` constant.
    #[serde(rename = "cdma1x_rtt")]
    Cdma1xRtt(Box<CdmaParams>),
    /// `{ model = "wifi", phy = "dot11g", distance_m = 10 }`: an 802.11 sender; each
    /// packet takes its frame's airtime, retries and backoffs included, is charged that
    /// airtime by the queue discipline, and is lost if every attempt fails. See
    /// `docs/links.md`.
    Wifi(WifiRate),
}

/// The delay added to each packet after the bottleneck.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum DelaySpec {
    /// `{ model = "constant", ms = 20 }`.
    Constant {
        /// Delay in ms; non-negative.
        ms: f64,
    },
    /// `{ model = "gaussian", mean_ms = 300, sd_ms = 15 }`: normal, clipped at 0, so
    /// packets may be reordered.
    Gaussian {
        /// Mean delay in ms; non-negative.
        mean_ms: f64,
        /// Standard deviation in ms (before clipping); non-negative.
        sd_ms: f64,
    },
}

/// The loss process applied to packets leaving the bottleneck.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum LossSpec {
    /// `{ model = "none" }` (same as leaving `loss` out).
    None {},
    /// `{ model = "bernoulli", p = 0.01 }`: each packet lost independently.
    Bernoulli {
        /// Loss probability per packet.
        p: f64,
    },
    /// `{ model = "gilbert_elliott", p_good_to_bad = 0.01, p_bad_to_good = 0.3 }`: two-state
    /// chain starting in the good state; `loss_in_good` defaults to 0 and `loss_in_bad` to 1.
    GilbertElliott {
        /// Probability of moving from the good to the bad state after a packet.
        p_good_to_bad: f64,
        /// Probability of moving from the bad to the good state after a packet.
        p_bad_to_good: f64,
        /// Loss probability in the good state (default 0).
        #[serde(default)]
        loss_in_good: f64,
        /// Loss probability in the bad state (default 1).
        #[serde(default = "one")]
        loss_in_bad: f64,
    },
    /// `{ model = "burst_markov", rate = 0.2, max_burst = 16 }`: the thesis's burst chain,
    /// with `q` solved from the target long-run loss `rate`. `max_burst` is a power of two.
    BurstMarkov {
        /// Target long-run loss rate, at most `E[B] / (1 + E[B])` (0.569 for max_burst 16).
        rate: f64,
        /// Largest burst, a power of two.
        max_burst: u32,
    },
    /// `{ model = "burst_markov_q", q = 0.15, max_burst = 16 }`: the same chain with the
    /// burst-start probability `q` given directly.
    BurstMarkovQ {
        /// Probability of starting a burst after a delivered packet.
        q: f64,
        /// Largest burst, a power of two.
        max_burst: u32,
    },
}

fn one() -> f64 {
    1.0
}

impl LinkSpec {
    /// The thesis's simulated channel (§7.2.1, Fig. 7-5): constant rate, Gaussian delay,
    /// burst-Markov loss calibrated to `loss_rate`, unlimited buffer. For example `cdma2`
    /// is `thesis_channel(120.0, 300.0, 15.0, 0.2, 16)`.
    ///
    /// The thesis gives round-trip latency; the delay here applies to this direction only,
    /// so split the RTT between the two directions, or put all of it on one.
    pub fn thesis_channel(
        rate_kbps: f64,
        delay_mean_ms: f64,
        delay_sd_ms: f64,
        loss_rate: f64,
        max_burst: u32,
    ) -> LinkSpec {
        LinkSpec {
            rate: Some(RateSpec::Constant { kbps: rate_kbps }),
            buffer_bytes: None,
            loss: Some(LossSpec::BurstMarkov {
                rate: loss_rate,
                max_burst,
            }),
            delay: Some(DelaySpec::Gaussian {
                mean_ms: delay_mean_ms,
                sd_ms: delay_sd_ms,
            }),
            qdisc: None,
        }
    }

    /// The queue discipline, if it is one that picks among flows (not FIFO).
    fn flow_qdisc(&self) -> Option<QdiscKind> {
        self.qdisc.filter(|k| *k != QdiscKind::Fifo)
    }

    /// Check every parameter (trace files are only read by [`LinkSpec::build`]).
    pub fn validate(&self) -> Result<(), LinkError> {
        if let Some(RateSpec::Cdma1xRtt(p)) = &self.rate {
            p.validate()?;
            if !matches!(self.loss, None | Some(LossSpec::None {})) {
                return Err(LinkError::invalid(
                    "loss",
                    "absent for the cdma1x_rtt model (it loses only by buffer overflow)",
                    "a loss model",
                ));
            }
            if matches!(self.delay, Some(DelaySpec::Gaussian { .. })) {
                return Err(LinkError::invalid(
                    "delay",
                    "constant for the cdma1x_rtt model (it delivers in order)",
                    "gaussian",
                ));
            }
        }
        if let Some(RateSpec::Wifi(w)) = &self.rate {
            w.validate()?;
        }
        self.rate_model(None)?;
        self.loss_model()?;
        self.delay_model()?;
        if self.buffer_bytes == Some(0) {
            return Err(LinkError::invalid("buffer_bytes", "at least 1", 0));
        }
        if let Some(kind) = self.flow_qdisc() {
            if matches!(
                self.rate,
                Some(RateSpec::Trace { .. } | RateSpec::Cdma1xRtt(_))
            ) {
                return Err(LinkError::invalid(
                    "qdisc",
                    "fifo with a trace or cdma1x_rtt rate (other disciplines need a constant or stepped rate)",
                    kind,
                ));
            }
        }
        Ok(())
    }

    /// Build the link. All randomness comes from `seed`; trace paths are relative to
    /// `base_dir` (absolute paths are used as they are).
    pub fn build(&self, seed: u64, base_dir: &Path) -> Result<Box<dyn Link>, LinkError> {
        self.validate()?;
        if let Some(RateSpec::Cdma1xRtt(p)) = &self.rate {
            let delay = match self.delay {
                Some(DelaySpec::Constant { ms }) => Duration::from_secs_f64(ms / 1e3),
                _ => Duration::ZERO,
            };
            let buffer = self.buffer_bytes.unwrap_or(u64::MAX);
            let sector = CdmaSector::new((**p).clone(), 1, buffer, delay, seed, false);
            let link = CdmaLink::for_each_user(sector).remove(0);
            return Ok(Box::new(link));
        }
        if let Some(RateSpec::Wifi(w)) = &self.rate {
            // The sender serves one frame at a time in the discipline's order, FIFO too.
            let kind = self.qdisc.unwrap_or(QdiscKind::Fifo);
            return Ok(Box::new(
                QdiscLink::new(
                    qdisc_link::build_qdisc(kind, self.buffer_bytes)?,
                    Rate::Unlimited,
                    self.loss_model()?,
                    self.delay_model()?,
                    seed,
                )
                .with_airtime(w.server(seed)?),
            ));
        }
        let rate = self.rate_model(Some(base_dir))?;
        if let Some(kind) = self.flow_qdisc() {
            return Ok(Box::new(QdiscLink::new(
                qdisc_link::build_qdisc(kind, self.buffer_bytes)?,
                rate,
                self.loss_model()?,
                self.delay_model()?,
                seed,
            )));
        }
        Ok(Box::new(ModelLink::new(
            Bottleneck::new(rate, self.buffer_bytes),
            self.loss_model()?,
            self.delay_model()?,
            seed,
        )))
    }

    /// Bytes the bottleneck can serve in the first `duration` (from a trace's start), or
    /// `None` for an unlimited link. Traces are read relative to `base_dir`.
    pub fn capacity_bytes(
        &self,
        duration: Duration,
        base_dir: &Path,
    ) -> Result<Option<u64>, LinkError> {
        if let Some(RateSpec::Cdma1xRtt(p)) = &self.rate {
            // What the long-term limiter lets one user keep up.
            return Ok(Some(
                (p.sustained_kbps * 125.0 * duration.as_secs_f64()) as u64,
            ));
        }
        if let Some(RateSpec::Wifi(w)) = &self.rate {
            // Full-size frames back to back at the default receiver's mean airtime.
            let frame = w.server(0)?.expected_airtime(1500);
            let frames = duration.as_nanos() as f64 / frame.as_nanos().max(1) as f64;
            return Ok(Some((frames * 1500.0) as u64));
        }
        Ok(match self.rate_model(Some(base_dir))? {
            Rate::Unlimited => None,
            Rate::Trace(trace) => Some(trace.capacity_bytes_until(duration)),
            Rate::Constant { ns_per_byte } => {
                Some((duration.as_nanos() as f64 / ns_per_byte) as u64)
            }
            Rate::Steps(steps) => Some(steps.capacity_bytes_until(duration)),
        })
    }

    /// The rate model; traces are read only when `base_dir` is given.
    fn rate_model(&self, base_dir: Option<&Path>) -> Result<Rate, LinkError> {
        Ok(match &self.rate {
            None | Some(RateSpec::Unlimited {}) => Rate::Unlimited,
            Some(RateSpec::Constant { kbps }) => {
                if !(kbps.is_finite() && *kbps > 0.0) {
                    return Err(LinkError::invalid(
                        "rate.kbps",
                        "a positive number of kbit/s",
                        kbps,
                    ));
                }
                if *kbps > MAX_RATE_KBPS {
                    return Err(LinkError::invalid(
                        "rate.kbps",
                        "at most 100000000 kbit/s (100 Gbit/s)",
                        kbps,
                    ));
                }
                Rate::constant_kbps(*kbps)
            }
            Some(RateSpec::Steps { steps }) => Rate::Steps(RateSteps::new(steps)?),
            Some(RateSpec::Trace { path }) => match base_dir {
                Some(dir) => Rate::Trace(Trace::from_path(&dir.join(path))?),
                None => Rate::Unlimited,
            },
            // Served by its own sector model, not by the bottleneck.
            Some(RateSpec::Cdma1xRtt(_)) => Rate::Unlimited,
            // Served by the 802.11 sender, frame by frame.
            Some(RateSpec::Wifi(_)) => Rate::Unlimited,
        })
    }

    fn loss_model(&self) -> Result<LossProcess, LinkError> {
        Ok(match self.loss {
            None | Some(LossSpec::None {}) => LossProcess::None,
            Some(LossSpec::Bernoulli { p }) => LossProcess::Bernoulli(probability("loss.p", p)?),
            Some(LossSpec::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            }) => LossProcess::GilbertElliott(GilbertElliott {
                p_good_to_bad: probability("loss.p_good_to_bad", p_good_to_bad)?,
                p_bad_to_good: probability("loss.p_bad_to_good", p_bad_to_good)?,
                loss_in_good: probability("loss.loss_in_good", loss_in_good)?,
                loss_in_bad: probability("loss.loss_in_bad", loss_in_bad)?,
                bad: false,
            }),
            Some(LossSpec::BurstMarkov { rate, max_burst }) => {
                let max_burst = power_of_two("loss.max_burst", max_burst)?;
                let highest = loss::max_burst_markov_loss_rate(max_burst);
                if !(0.0..=highest).contains(&rate) {
                    return Err(LinkError::invalid(
                        "loss.rate",
                        format!(
                            "in [0, {highest:.4}] for max_burst = {max_burst} \
                             (every burst is followed by a delivered packet)"
                        ),
                        rate,
                    ));
                }
                let q = loss::burst_markov_q(rate, max_burst).min(1.0);
                LossProcess::BurstMarkov(BurstMarkov::new(q, max_burst))
            }
            Some(LossSpec::BurstMarkovQ { q, max_burst }) => {
                LossProcess::BurstMarkov(BurstMarkov::new(
                    probability("loss.q", q)?,
                    power_of_two("loss.max_burst", max_burst)?,
                ))
            }
        })
    }

    fn delay_model(&self) -> Result<DelayProcess, LinkError> {
        Ok(match self.delay {
            None => DelayProcess::constant_ms(0.0),
            Some(DelaySpec::Constant { ms }) => {
                DelayProcess::constant_ms(non_negative("delay.ms", ms)?)
            }
            Some(DelaySpec::Gaussian { mean_ms, sd_ms }) => DelayProcess::gaussian_ms(
                non_negative("delay.mean_ms", mean_ms)?,
                non_negative("delay.sd_ms", sd_ms)?,
            ),
        })
    }
}

fn probability(what: &'static str, p: f64) -> Result<f64, LinkError> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(LinkError::invalid(what, "a probability in [0, 1]", p))
    }
}

fn non_negative(what: &'static str, ms: f64) -> Result<f64, LinkError> {
    if !(ms.is_finite() && ms >= 0.0) {
        Err(LinkError::invalid(what, "a non-negative number of ms", ms))
    } else if ms > MAX_DELAY_MS {
        Err(LinkError::invalid(what, "at most 60000 ms (a minute)", ms))
    } else {
        Ok(ms)
    }
}

fn power_of_two(what: &'static str, n: u32) -> Result<u32, LinkError> {
    if n.is_power_of_two() {
        Ok(n)
    } else {
        Err(LinkError::invalid(
            what,
            "a power of two (1, 2, 4, 8, ...)",
            n,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Delivery;

    fn from_toml(text: &str) -> Result<LinkSpec, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn capacity_of_constant_trace_and_unlimited_links() {
        let dir = std::env::temp_dir().join(format!("horde-capacity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("t.up"), "5\n10\n").unwrap();
        let ten_s = Duration::from_secs(10);
        let cap = |text: &str| {
            from_toml(text)
                .unwrap()
                .capacity_bytes(ten_s, &dir)
                .unwrap()
        };
        assert_eq!(
            cap("rate = { model = \"constant\", kbps = 800 }"),
            Some(1_000_000)
        );
        // Two 1500 B opportunities every 10 ms for 10 s.
        assert_eq!(
            cap("rate = { model = \"trace\", path = \"t.up\" }"),
            Some(3_000_000)
        );
        assert_eq!(cap(""), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn err(spec: &LinkSpec) -> String {
        spec.validate().unwrap_err().to_string()
    }

    #[test]
    fn parses_the_documented_examples() {
        let spec = from_toml(
            r#"
            rate = { model = "constant", kbps = 120 }
            delay = { model = "gaussian", mean_ms = 300, sd_ms = 15 }
            loss = { model = "burst_markov", rate = 0.2, max_burst = 16 }
            buffer_bytes = 64000
            "#,
        )
        .unwrap();
        assert_eq!(
            spec,
            LinkSpec {
                buffer_bytes: Some(64_000),
                ..LinkSpec::thesis_channel(120.0, 300.0, 15.0, 0.2, 16)
            }
        );
        let spec = from_toml(
            r#"
            rate = { model = "trace", path = "traces/lte.up" }
            delay = { model = "constant", ms = 20 }
            loss = { model = "gilbert_elliott", p_good_to_bad = 0.01, p_bad_to_good = 0.5 }
            "#,
        )
        .unwrap();
        assert_eq!(
            spec.rate,
            Some(RateSpec::Trace {
                path: "traces/lte.up".into()
            })
        );
        assert_eq!(spec.delay, Some(DelaySpec::Constant { ms: 20.0 }));
        assert_eq!(
            spec.loss,
            Some(LossSpec::GilbertElliott {
                p_good_to_bad: 0.01,
                p_bad_to_good: 0.5,
                loss_in_good: 0.0,
                loss_in_bad: 1.0
            })
        );
        for (text, loss) in [
            (r#"loss = { model = "none" }"#, LossSpec::None {}),
            (
                r#"loss = { model = "bernoulli", p = 0.25 }"#,
                LossSpec::Bernoulli { p: 0.25 },
            ),
            (
                r#"loss = { model = "burst_markov_q", q = 0.1, max_burst = 4 }"#,
                LossSpec::BurstMarkovQ {
                    q: 0.1,
                    max_burst: 4,
                },
            ),
        ] {
            assert_eq!(from_toml(text).unwrap().loss, Some(loss));
        }
        assert_eq!(from_toml("").unwrap(), LinkSpec::default());
        assert_eq!(
            from_toml(r#"rate = { model = "unlimited" }"#).unwrap().rate,
            Some(RateSpec::Unlimited {})
        );
    }

    #[test]
    fn rejects_unknown_fields_and_models() {
        for bad in [
            "bufer_bytes = 10",
            r#"rate = { model = "constant", kbps = 1, burst = 3 }"#,
            r#"loss = { model = "bernoulli", p = 0.1, q = 0.2 }"#,
            r#"delay = { model = "gaussian", mean_ms = 1, sd = 2 }"#,
            r#"delay = { model = "uniform", ms = 1 }"#,
            r#"rate = { kbps = 1 }"#,
            r#"loss = { model = "none", p = 0.1 }"#,
            r#"rate = { model = "unlimited", kbps = 10 }"#,
        ] {
            assert!(from_toml(bad).is_err(), "accepted: {bad}");
        }
        let msg = from_toml("bufer_bytes = 10").unwrap_err().to_string();
        assert!(msg.contains("bufer_bytes"), "{msg}");
    }

    #[test]
    fn toml_round_trip() {
        let spec = LinkSpec {
            buffer_bytes: Some(3000),
            ..LinkSpec::thesis_channel(22.0, 900.0, 100.0, 0.03, 4)
        };
        let text = toml::to_string(&spec).unwrap();
        assert_eq!(from_toml(&text).unwrap(), spec);
    }

    #[test]
    fn validation_messages() {
        let rate = |kbps| LinkSpec {
            rate: Some(RateSpec::Constant { kbps }),
            ..LinkSpec::default()
        };
        assert_eq!(
            err(&rate(-5.0)),
            "rate.kbps must be a positive number of kbit/s, got -5"
        );
        assert!(rate(0.0).validate().is_err());
        assert!(rate(MAX_RATE_KBPS).validate().is_ok());
        assert!(rate(MAX_RATE_KBPS * 1.01).validate().is_err());
        assert!(rate(f64::INFINITY).validate().is_err());
        assert!(rate(f64::NAN).validate().is_err());
        let loss = |loss| LinkSpec {
            loss: Some(loss),
            ..LinkSpec::default()
        };
        assert_eq!(
            err(&loss(LossSpec::Bernoulli { p: 1.5 })),
            "loss.p must be a probability in [0, 1], got 1.5"
        );
        assert!(loss(LossSpec::Bernoulli { p: f64::NAN })
            .validate()
            .is_err());
        assert_eq!(
            err(&loss(LossSpec::GilbertElliott {
                p_good_to_bad: 0.1,
                p_bad_to_good: -0.1,
                loss_in_good: 0.0,
                loss_in_bad: 1.0
            })),
            "loss.p_bad_to_good must be a probability in [0, 1], got -0.1"
        );
        assert_eq!(
            err(&loss(LossSpec::BurstMarkov {
                rate: 0.2,
                max_burst: 12
            })),
            "loss.max_burst must be a power of two (1, 2, 4, 8, ...), got 12"
        );
        assert!(loss(LossSpec::BurstMarkovQ {
            q: 0.1,
            max_burst: 0
        })
        .validate()
        .is_err());
        assert_eq!(
            err(&loss(LossSpec::BurstMarkov {
                rate: 0.6,
                max_burst: 16
            })),
            "loss.rate must be in [0, 0.5690] for max_burst = 16 \
             (every burst is followed by a delivered packet), got 0.6"
        );
        assert!(loss(LossSpec::BurstMarkov {
            rate: 0.568,
            max_burst: 16
        })
        .validate()
        .is_ok());
        let delay = |delay| LinkSpec {
            delay: Some(delay),
            ..LinkSpec::default()
        };
        assert_eq!(
            err(&delay(DelaySpec::Gaussian {
                mean_ms: 10.0,
                sd_ms: -1.0
            })),
            "delay.sd_ms must be a non-negative number of ms, got -1"
        );
        assert!(delay(DelaySpec::Constant { ms: -0.5 }).validate().is_err());
        assert_eq!(
            err(&LinkSpec {
                buffer_bytes: Some(0),
                ..LinkSpec::default()
            }),
            "buffer_bytes must be at least 1, got 0"
        );
        // build() validates too.
        assert!(rate(-1.0).build(0, Path::new(".")).is_err());
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("horde-links-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("traces")).unwrap();
        dir
    }

    #[test]
    fn builds_trace_links_relative_to_base_dir() {
        let dir = temp_dir("spec");
        std::fs::write(dir.join("traces/ok.up"), "1\n2\n").unwrap();
        std::fs::write(dir.join("traces/bad.up"), "1\n2\nx\n").unwrap();
        let trace = |path: &str| LinkSpec {
            rate: Some(RateSpec::Trace { path: path.into() }),
            ..LinkSpec::default()
        };
        let mut link = trace("traces/ok.up").build(1, &dir).unwrap();
        for id in 0..3 {
            assert_eq!(
                link.enqueue(Duration::ZERO, id, 1500),
                crate::Verdict::Queued
            );
        }
        let mut out = Vec::new();
        link.deliver(Duration::from_secs(1), &mut out);
        let ms = |v| Duration::from_millis(v);
        assert_eq!(
            out,
            [(0, 1), (1, 2), (2, 3)].map(|(id, t)| Delivery { id, at: ms(t) })
        );
        let bad = trace("traces/bad.up")
            .build(1, &dir)
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            bad,
            format!(
                "{}:3: expected a millisecond timestamp, found \"x\"",
                dir.join("traces/bad.up").display()
            )
        );
        let missing = trace("traces/none.up").build(1, &dir).err().unwrap();
        assert!(matches!(missing, LinkError::Trace(_)), "{missing}");
        // validate() does not read files.
        assert!(trace("traces/none.up").validate().is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Drive a thesis channel at CBR with 768-byte packets, as the thesis's slots.
    #[test]
    fn thesis_channel_end_to_end() {
        // cdma2: 120 kbit/s, 300 ± 15 ms, 20% loss in bursts up to 16.
        let spec = LinkSpec::thesis_channel(120.0, 300.0, 15.0, 0.2, 16);
        let mut link = spec.build(2005, Path::new(".")).unwrap();
        let n = 60_000u64;
        // Offer exactly the capacity: one 768 B packet per 51.2 ms.
        let gap = Duration::from_micros(51_200);
        let mut out = Vec::new();
        let mut sent_at = Vec::new();
        for i in 0..n {
            let now = gap * i as u32;
            link.deliver(now, &mut out);
            link.enqueue(now, i, 768);
            sent_at.push(now);
        }
        link.deliver(Duration::MAX, &mut out);
        let s = link.stats();
        assert_eq!(s.queue_drops, 0);
        assert_eq!(s.lost + s.delivered, n);
        let loss = s.lost as f64 / n as f64;
        assert!((loss - 0.2).abs() < 0.01, "loss {loss}");
        // Each packet is serialized for 51.2 ms, then delayed N(300, 15).
        let delays: Vec<f64> = out
            .iter()
            .map(|d| (d.at - sent_at[d.id as usize]).as_secs_f64() * 1e3 - 51.2)
            .collect();
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        let sd = (delays.iter().map(|x| (x - mean).powi(2)).sum::<f64>()
            / (delays.len() - 1) as f64)
            .sqrt();
        assert!((mean - 300.0).abs() < 0.5, "mean {mean}");
        assert!((sd - 15.0).abs() < 0.4, "sd {sd}");
        // Throughput of the survivors: 80% of 120 kbit/s.
        let span = out.last().unwrap().at.as_secs_f64();
        let kbps = s.bytes_delivered as f64 * 8.0 / span / 1e3;
        assert!((kbps - 96.0).abs() < 2.0, "{kbps}");
    }
}
