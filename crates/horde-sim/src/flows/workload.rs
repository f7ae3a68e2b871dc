//! Flow workloads: what a scenario's `[[flow]]` entries declare, and the deterministic
//! list of flows they expand to under a seed. The simulator and the real-time client
//! both run exactly this list.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::protocol::HEADER_LEN;
use super::sizes::{TruncatedLogNormal, HTML_MAX_BYTES, HTML_MU, HTML_SIGMA};

/// Request size of a web flow (Table 6.1 of the CHAP dissertation: "Uniform (350 B)",
/// read as a constant 350 B; see docs/flows.md).
pub const WEB_REQUEST_BYTES: u64 = 350;
/// More flows than this in one plan is almost surely a typo in the load.
pub const MAX_FLOWS: usize = 100_000;

/// One `[[flow]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FlowSpec {
    /// Web-like downloads: heavy-tailed sizes, Poisson arrivals at a mean load.
    Web {
        #[serde(default)]
        name: Option<String>,
        /// Mean offered load as a fraction of `capacity_kbps`, in (0, 1].
        load: f64,
        /// The capacity the load refers to (the download link's mean rate).
        capacity_kbps: f64,
        #[serde(default = "html_mu")]
        mu: f64,
        #[serde(default = "html_sigma")]
        sigma: f64,
        #[serde(default = "html_max")]
        max_bytes: u64,
        #[serde(default = "web_request")]
        request_bytes: u64,
        #[serde(default)]
        start_s: f64,
        /// Last arrival time; the scenario's `duration_s` when absent.
        #[serde(default)]
        stop_s: Option<f64>,
    },
    /// `count` bulk transfers of `bytes`, all starting at `at_s`.
    Bulk {
        #[serde(default)]
        name: Option<String>,
        bytes: u64,
        #[serde(default)]
        at_s: f64,
        #[serde(default = "one")]
        count: u32,
        /// `down` (server to client, the default) or `up`.
        #[serde(default)]
        direction: Direction,
    },
    /// Request/response transactions, one connection each, Poisson arrivals.
    RequestResponse {
        #[serde(default)]
        name: Option<String>,
        request_bytes: u64,
        response_bytes: u64,
        rate_per_s: f64,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
    },
    /// Small periodic messages on one connection (a game, VoIP): every `interval_ms`
    /// the client sends `request_bytes` and the server answers `response_bytes`.
    Interactive {
        #[serde(default)]
        name: Option<String>,
        request_bytes: u64,
        response_bytes: u64,
        interval_ms: f64,
        count: u32,
        #[serde(default)]
        at_s: f64,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    Down,
    Up,
}

fn html_mu() -> f64 {
    HTML_MU
}
fn html_sigma() -> f64 {
    HTML_SIGMA
}
fn html_max() -> u64 {
    HTML_MAX_BYTES
}
fn web_request() -> u64 {
    WEB_REQUEST_BYTES
}
fn one() -> u32 {
    1
}

/// One request and its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Exchange {
    /// Request size, header included.
    pub up: u64,
    /// Answer size.
    pub down: u64,
}

/// One connection of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedFlow {
    pub id: u32,
    /// Index of the `[[flow]]` entry it comes from.
    pub class: usize,
    /// When the client starts connecting.
    pub start: Duration,
    /// Exchange `k` is sent at `start + k * interval` or once exchange `k - 1`'s
    /// request has been handed to TCP, whichever is later.
    pub interval: Duration,
    pub exchanges: Vec<Exchange>,
}

impl PlannedFlow {
    pub fn bytes_up(&self) -> u64 {
        self.exchanges.iter().map(|e| e.up).sum()
    }
    pub fn bytes_down(&self) -> u64 {
        self.exchanges.iter().map(|e| e.down).sum()
    }
}

impl FlowSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            FlowSpec::Web { .. } => "web",
            FlowSpec::Bulk { .. } => "bulk",
            FlowSpec::RequestResponse { .. } => "request_response",
            FlowSpec::Interactive { .. } => "interactive",
        }
    }

    /// The entry's label in reports: its `name`, or `KIND-INDEX`.
    pub fn label(&self, index: usize) -> String {
        let name = match self {
            FlowSpec::Web { name, .. }
            | FlowSpec::Bulk { name, .. }
            | FlowSpec::RequestResponse { name, .. }
            | FlowSpec::Interactive { name, .. } => name,
        };
        name.clone()
            .unwrap_or_else(|| format!("{}-{}", self.kind(), index + 1))
    }

    fn sizes(&self) -> Option<TruncatedLogNormal> {
        match *self {
            FlowSpec::Web {
                mu,
                sigma,
                max_bytes,
                ..
            } => Some(TruncatedLogNormal {
                mu,
                sigma,
                max_bytes,
            }),
            _ => None,
        }
    }

    /// Check the entry's numbers; `duration_s` is the scenario's.
    pub fn validate(&self, duration_s: f64) -> Result<(), String> {
        let time = |what: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(format!(
                    "{what} must be a non-negative number of seconds, got {}",
                    horde_config::shown(v)
                ))
            }
        };
        let request = |v: u64| {
            if v >= HEADER_LEN as u64 {
                Ok(())
            } else {
                Err(format!(
                    "request_bytes must be at least {HEADER_LEN} (the request header), got {v}"
                ))
            }
        };
        let window = |start_s: f64, stop_s: Option<f64>| {
            time("start_s", start_s)?;
            let stop = stop_s.unwrap_or(duration_s);
            time("stop_s", stop)?;
            if stop < start_s {
                return Err(format!("stop_s {stop} is before start_s {start_s}"));
            }
            Ok(())
        };
        match *self {
            FlowSpec::Web {
                load,
                capacity_kbps,
                request_bytes,
                start_s,
                stop_s,
                ..
            } => {
                if !(load > 0.0 && load <= 1.0) {
                    return Err(format!(
                        "load must be in (0, 1], got {}",
                        horde_config::shown(load)
                    ));
                }
                if !(capacity_kbps.is_finite() && capacity_kbps > 0.0) {
                    return Err(format!(
                        "capacity_kbps must be a positive number, got {}",
                        horde_config::shown(capacity_kbps)
                    ));
                }
                self.sizes().expect("web").validate()?;
                request(request_bytes)?;
                window(start_s, stop_s)
            }
            FlowSpec::Bulk {
                bytes, at_s, count, ..
            } => {
                if bytes == 0 || count == 0 {
                    return Err(format!(
                        "bytes and count must be positive, got {bytes} and {count}"
                    ));
                }
                time("at_s", at_s)
            }
            FlowSpec::RequestResponse {
                request_bytes,
                rate_per_s,
                start_s,
                stop_s,
                ..
            } => {
                request(request_bytes)?;
                if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
                    return Err(format!(
                        "rate_per_s must be positive, got {}",
                        horde_config::shown(rate_per_s)
                    ));
                }
                window(start_s, stop_s)
            }
            FlowSpec::Interactive {
                request_bytes,
                interval_ms,
                count,
                at_s,
                ..
            } => {
                request(request_bytes)?;
                if !(interval_ms.is_finite() && interval_ms > 0.0) {
                    return Err(format!(
                        "interval_ms must be positive, got {}",
                        horde_config::shown(interval_ms)
                    ));
                }
                if count == 0 {
                    return Err("count must be positive".into());
                }
                time("at_s", at_s)
            }
        }
    }

    /// Flows per second of a Poisson entry.
    fn arrival_rate(&self) -> f64 {
        match *self {
            FlowSpec::Web {
                load,
                capacity_kbps,
                ..
            } => load * capacity_kbps * 1000.0 / 8.0 / self.sizes().expect("web").mean(),
            FlowSpec::RequestResponse { rate_per_s, .. } => rate_per_s,
            _ => 0.0,
        }
    }
}

/// Poisson arrival times in `[start_s, stop_s)` at `rate` per second.
fn poisson(rng: &mut ChaCha8Rng, rate: f64, start_s: f64, stop_s: f64) -> Vec<f64> {
    let mut t = start_s;
    let mut out = Vec::new();
    loop {
        // 1 - U is in (0, 1], so the logarithm is finite.
        t += -(1.0 - rng.gen::<f64>()).ln() / rate;
        if t >= stop_s || out.len() > MAX_FLOWS {
            return out;
        }
        out.push(t);
    }
}

/// Expand validated entries into flows sorted by start time (ties by entry order).
/// Entry `i` draws from its own RNG stream, so adding an entry leaves the others' flows
/// unchanged.
pub fn plan(specs: &[FlowSpec], duration_s: f64, seed: u64) -> Result<Vec<PlannedFlow>, String> {
    let mut flows: Vec<PlannedFlow> = Vec::new();
    for (class, spec) in specs.iter().enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(class as u64 + 1);
        let at = Duration::from_secs_f64;
        let mut push = |start: f64, interval: Duration, exchanges: Vec<Exchange>| {
            flows.push(PlannedFlow {
                id: 0,
                class,
                start: at(start),
                interval,
                exchanges,
            })
        };
        match *spec {
            FlowSpec::Web {
                request_bytes,
                start_s,
                stop_s,
                ..
            } => {
                let sizes = spec.sizes().expect("web");
                let stop = stop_s.unwrap_or(duration_s);
                for t in poisson(&mut rng, spec.arrival_rate(), start_s, stop) {
                    let down = sizes.sample(&mut rng);
                    let up = request_bytes;
                    push(t, Duration::ZERO, vec![Exchange { up, down }]);
                }
            }
            FlowSpec::Bulk {
                bytes,
                at_s,
                count,
                direction,
                ..
            } => {
                let e = match direction {
                    Direction::Down => Exchange {
                        up: HEADER_LEN as u64,
                        down: bytes,
                    },
                    Direction::Up => Exchange {
                        up: bytes.max(HEADER_LEN as u64),
                        down: 1,
                    },
                };
                for _ in 0..count {
                    push(at_s, Duration::ZERO, vec![e]);
                }
            }
            FlowSpec::RequestResponse {
                request_bytes,
                response_bytes,
                start_s,
                stop_s,
                ..
            } => {
                let stop = stop_s.unwrap_or(duration_s);
                let e = Exchange {
                    up: request_bytes,
                    down: response_bytes,
                };
                for t in poisson(&mut rng, spec.arrival_rate(), start_s, stop) {
                    push(t, Duration::ZERO, vec![e]);
                }
            }
            FlowSpec::Interactive {
                request_bytes,
                response_bytes,
                interval_ms,
                count,
                at_s,
                ..
            } => {
                let e = Exchange {
                    up: request_bytes,
                    down: response_bytes,
                };
                push(
                    at_s,
                    Duration::from_secs_f64(interval_ms / 1000.0),
                    vec![e; count as usize],
                );
            }
        }
        if flows.len() > MAX_FLOWS {
            return Err(format!(
                "{} expands to more than {MAX_FLOWS} flows; lower its load or rate",
                spec.label(class)
            ));
        }
    }
    // Stable: equal start times keep entry order.
    flows.sort_by_key(|f| f.start);
    for (i, f) in flows.iter_mut().enumerate() {
        f.id = i as u32;
    }
    Ok(flows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn web(load: f64) -> FlowSpec {
        FlowSpec::Web {
            name: None,
            load,
            capacity_kbps: 10_000.0,
            mu: HTML_MU,
            sigma: HTML_SIGMA,
            max_bytes: HTML_MAX_BYTES,
            request_bytes: WEB_REQUEST_BYTES,
            start_s: 0.0,
            stop_s: None,
        }
    }

    #[test]
    fn web_arrivals_offer_the_requested_load() {
        let flows = plan(&[web(0.5)], 2_000.0, 3).unwrap();
        let bytes: u64 = flows.iter().map(PlannedFlow::bytes_down).sum();
        let offered_kbps = bytes as f64 * 8.0 / 2_000.0 / 1000.0;
        // Heavy tails make the realised load noisy; 2000 s of arrivals keep it near 0.5.
        assert!(
            (offered_kbps / 10_000.0 - 0.5).abs() < 0.08,
            "{offered_kbps}"
        );
        assert!(flows.windows(2).all(|w| w[0].start <= w[1].start));
        assert!(flows.iter().enumerate().all(|(i, f)| f.id == i as u32));
    }

    #[test]
    fn plans_are_deterministic_and_entries_independent() {
        let rr = FlowSpec::RequestResponse {
            name: None,
            request_bytes: 100,
            response_bytes: 1000,
            rate_per_s: 3.0,
            start_s: 0.0,
            stop_s: None,
        };
        let a = plan(&[web(0.2), rr.clone()], 50.0, 9).unwrap();
        assert_eq!(a, plan(&[web(0.2), rr.clone()], 50.0, 9).unwrap());
        assert_ne!(a, plan(&[web(0.2), rr.clone()], 50.0, 10).unwrap());
        let web_only: Vec<_> = plan(&[web(0.2)], 50.0, 9).unwrap();
        let from_pair: Vec<_> = a.iter().filter(|f| f.class == 0).collect();
        assert_eq!(web_only.len(), from_pair.len());
        for (x, y) in web_only.iter().zip(from_pair) {
            assert_eq!((x.start, &x.exchanges), (y.start, &y.exchanges));
        }
    }

    #[test]
    fn interactive_and_bulk_expand_as_declared() {
        let game = FlowSpec::Interactive {
            name: Some("game".into()),
            request_bytes: 44,
            response_bytes: 72,
            interval_ms: 40.0,
            count: 25,
            at_s: 1.0,
        };
        let bulk = FlowSpec::Bulk {
            name: None,
            bytes: 1_000_000,
            at_s: 0.5,
            count: 2,
            direction: Direction::Up,
        };
        let flows = plan(&[game.clone(), bulk.clone()], 10.0, 1).unwrap();
        assert_eq!(flows.len(), 3);
        assert_eq!(flows[0].bytes_up(), 1_000_000);
        assert_eq!(flows[2].exchanges.len(), 25);
        assert_eq!(flows[2].interval, Duration::from_millis(40));
        assert_eq!(flows[2].start, Duration::from_secs(1));
        assert_eq!(game.label(0), "game");
        assert_eq!(bulk.label(1), "bulk-2");
    }

    #[test]
    fn validation_names_the_problem() {
        assert!(web(0.0).validate(10.0).unwrap_err().contains("load"));
        let rr = FlowSpec::RequestResponse {
            name: None,
            request_bytes: 10,
            response_bytes: 10,
            rate_per_s: 1.0,
            start_s: 0.0,
            stop_s: None,
        };
        assert!(rr.validate(10.0).unwrap_err().contains("request_bytes"));
        let late = FlowSpec::RequestResponse {
            name: None,
            request_bytes: 100,
            response_bytes: 10,
            rate_per_s: 1.0,
            start_s: 20.0,
            stop_s: None,
        };
        assert!(late.validate(10.0).unwrap_err().contains("before start_s"));
    }
}
