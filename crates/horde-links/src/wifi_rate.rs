//! The `wifi` rate model: a link served by an 802.11 sender ([`crate::wifi`]).
//!
//! Each packet is one frame. The time the link spends on it is the frame's airtime:
//! every attempt, the backoffs between them, and for a frame that fails every attempt
//! the time up to its last timeout. That same airtime is what the link's queue
//! discipline is charged (CHAP, seed 001 §4.3), and a frame that fails every attempt is
//! lost. Receivers are told apart by the packet's destination: `stations` give some
//! destinations their own distance or frame error rate, as an access point's downstream
//! queue serves stations near and far.

use std::net::IpAddr;

use horde_qdisc::FlowKey;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::LinkError;
use crate::wifi::{Channel, FrameOutcome, Phy, Shadowing, Transmitter};

/// The RNG stream of the link's seed that seeds the sender (1 and 2 are loss and delay).
const WIFI_STREAM: u64 = 3;

/// The 802.11 PHYs a link can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WifiPhy {
    /// 802.11g (ERP-OFDM), [`Phy::dot11g`]; 54 Mbit/s unless `mbps` says otherwise.
    Dot11g,
    /// 802.11b (HR-DSSS, long preamble), [`Phy::dot11b`]; 11 Mbit/s unless `mbps` says
    /// otherwise.
    Dot11b,
}

impl WifiPhy {
    /// The data rates the PHY defines, in Mbit/s.
    fn rates(self) -> &'static [f64] {
        match self {
            WifiPhy::Dot11g => &[6.0, 9.0, 12.0, 18.0, 24.0, 36.0, 48.0, 54.0],
            WifiPhy::Dot11b => &[1.0, 2.0, 5.5, 11.0],
        }
    }

    /// As configuration spells it: `dot11g`, `dot11b`.
    pub fn name(self) -> &'static str {
        match self {
            WifiPhy::Dot11g => "dot11g",
            WifiPhy::Dot11b => "dot11b",
        }
    }
}

/// `{ model = "wifi", phy = "dot11g", distance_m = 10 }`: see the module docs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WifiRate {
    /// The PHY and its timing constants.
    pub phy: WifiPhy,
    /// Data rate in Mbit/s, one the PHY defines; absent is its highest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps: Option<f64>,
    /// Receivers' distance from the sender in m; the frame error rate follows from the
    /// dissertation's shadowing model ([`Shadowing::dissertation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance_m: Option<f64>,
    /// Receivers' frame error rate, for each DATA and each ACK frame. Absent with
    /// `distance_m` absent: no frame is lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fer: Option<f64>,
    /// Destinations with a channel of their own; the first that matches a packet wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stations: Vec<WifiStation>,
}

/// Packets to `addr` and/or port `port` go to a receiver at `distance_m` or with frame
/// error rate `fer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WifiStation {
    /// Destination address to match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<IpAddr>,
    /// Destination port to match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The receiver's distance in m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance_m: Option<f64>,
    /// The receiver's frame error rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fer: Option<f64>,
}

impl WifiStation {
    fn matches(&self, flow: &FlowKey) -> bool {
        self.addr.is_none_or(|a| a == flow.dst) && self.port.is_none_or(|p| p == flow.dst_port)
    }
}

/// One receiver's channel from `distance_m` or `fer` (at most one; neither is loss-free).
/// `station` is the index in `stations`, named in errors; `None` is the top level.
fn channel(
    station: Option<usize>,
    distance_m: Option<f64>,
    fer: Option<f64>,
) -> Result<Channel, LinkError> {
    let (distance_key, fer_key) = match station {
        None => ("rate.distance_m", "rate.fer"),
        Some(_) => ("rate.stations.distance_m", "rate.stations.fer"),
    };
    let got = |v: String| match station {
        None => v,
        Some(i) => format!("{v} (station {})", i + 1),
    };
    match (distance_m, fer) {
        (Some(d), Some(f)) => Err(LinkError::invalid(
            distance_key,
            format!("absent when {fer_key} is given (one or the other)"),
            got(format!("{d} with fer {f}")),
        )),
        (Some(d), None) => {
            if !(d.is_finite() && d >= 0.0) {
                return Err(LinkError::invalid(
                    distance_key,
                    "a finite distance >= 0 m",
                    got(d.to_string()),
                ));
            }
            Channel::at_distance(d, &Shadowing::dissertation()).map_err(|e| {
                LinkError::invalid(distance_key, "a usable distance", got(e.to_string()))
            })
        }
        (None, Some(f)) => Channel::with_fer(f).map_err(|_| {
            LinkError::invalid(fer_key, "a probability in [0, 1]", got(f.to_string()))
        }),
        (None, None) => Channel::with_fer(0.0)
            .map_err(|e| LinkError::invalid(fer_key, "a probability in [0, 1]", e)),
    }
}

impl WifiRate {
    /// The PHY's constants at the chosen data rate.
    pub fn phy_constants(&self) -> Result<Phy, LinkError> {
        let rates = self.phy.rates();
        let mbps = self.mbps.unwrap_or(rates[rates.len() - 1]);
        if !rates.contains(&mbps) {
            return Err(LinkError::invalid(
                "rate.mbps",
                format!(
                    "a {} rate: {}",
                    self.phy.name(),
                    rates
                        .iter()
                        .map(f64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                mbps,
            ));
        }
        Ok(match self.phy {
            WifiPhy::Dot11g => Phy::dot11g(mbps),
            WifiPhy::Dot11b => Phy::dot11b(mbps),
        })
    }

    /// Checks every parameter, naming the bad one.
    pub fn validate(&self) -> Result<(), LinkError> {
        self.server(0).map(|_| ())
    }

    /// The channel of receivers no station matches.
    pub fn default_channel(&self) -> Result<Channel, LinkError> {
        channel(None, self.distance_m, self.fer)
    }

    pub(crate) fn server(&self, seed: u64) -> Result<AirtimeServer, LinkError> {
        let phy = self.phy_constants()?;
        let default = self.default_channel()?;
        let mut stations = Vec::with_capacity(self.stations.len());
        for (i, s) in self.stations.iter().enumerate() {
            if s.addr.is_none() && s.port.is_none() {
                return Err(LinkError::invalid(
                    "rate.stations",
                    "an addr or a port to match in every station",
                    format!("neither in station {}", i + 1),
                ));
            }
            stations.push((s.clone(), channel(Some(i), s.distance_m, s.fer)?));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(WIFI_STREAM);
        let tx = Transmitter::new(phy, rng.gen())
            .map_err(|e| LinkError::invalid("rate.wifi", "valid PHY constants", e))?;
        Ok(AirtimeServer {
            tx,
            default,
            stations,
        })
    }
}

/// Sends a link's packets as 802.11 frames, each to its destination's channel.
pub(crate) struct AirtimeServer {
    tx: Transmitter,
    default: Channel,
    stations: Vec<(WifiStation, Channel)>,
}

impl AirtimeServer {
    /// Sends one packet of `len` bytes of `flow`: its airtime and whether it got through.
    pub(crate) fn send(&mut self, flow: &FlowKey, len: u32) -> FrameOutcome {
        let channel = self
            .stations
            .iter()
            .find(|(s, _)| s.matches(flow))
            .map_or(self.default, |(_, c)| *c);
        self.tx.send(len, &channel)
    }

    /// Mean airtime of a full-size frame to the default receiver.
    pub(crate) fn expected_airtime(&self, len: u32) -> std::time::Duration {
        self.tx.phy().expected_airtime(len, &self.default)
    }
}
