//! The `[[channels]]` table of an end that connects (`horde send`, `horde tunnel
//! client`): its fields, its checks, and what the host is given from it; and the check
//! of a network device named in a file.

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::Path;
use std::time::Duration;

use horde_config::checks::{channel_count, congestion, widened};
use horde_config::Checks;
use horde_crypto::PublicKey;
use horde_net::{ChannelTarget, ConnectConfig, InterfaceConfig};
use horde_proto::{CcConfig, ChannelConfig};
use serde::Deserialize;

/// One channel: a local socket (or device) and the peer's address it sends to. The
/// MTU's default is the end's own (`DEFAULT_MTU`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelEntry<const DEFAULT_MTU: u32> {
    /// Label in reports (default `ch0`, `ch1`, ... by position).
    #[serde(default)]
    pub name: Option<String>,
    /// Local address; `0.0.0.0:0` with a `device` follows the device's address as it
    /// changes.
    pub bind: SocketAddr,
    #[serde(default)]
    pub device: Option<String>,
    pub remote: SocketAddr,
    #[serde(default = "default_mtu::<DEFAULT_MTU>")]
    pub mtu: u32,
    #[serde(default)]
    pub congestion: CcConfig,
    #[serde(default)]
    pub cost_per_kb: f64,
}

fn default_mtu<const M: u32>() -> u32 {
    M
}

impl<const M: u32> ChannelEntry<M> {
    /// Checks every entry: at least one, names unique and not blank, the MTU in
    /// `mtus`, a remote one can send to, the device, cost and congestion control.
    pub fn check_all(c: &mut Checks, channels: &[Self], mtus: RangeInclusive<u32>) {
        if channels.is_empty() {
            c.error("", "at least one [[channels]] entry is needed");
        }
        channel_count(c, "channels", "[[channels]] entries", channels.len());
        for (i, ch) in channels.iter().enumerate() {
            let at = |k: &str| format!("channels[{i}].{k}");
            if let Some(n) = &ch.name {
                if n.trim().is_empty() {
                    c.error(at("name"), "channel name must not be empty");
                } else if channels[..i].iter().any(|o| o.name.as_ref() == Some(n)) {
                    c.error(at("name"), format!("two [[channels]] are named \"{n}\""));
                }
            }
            c.count_in(at("mtu"), "mtu", ch.mtu.into(), widened(&mtus));
            if ch.remote.port() == 0 || ch.remote.ip().is_unspecified() {
                c.error(
                    at("remote"),
                    format!("remote {} is not an address one can send to", ch.remote),
                );
            }
            if let Some(dev) = &ch.device {
                device(c, &at("device"), dev);
            }
            c.non_negative(at("cost_per_kb"), "cost_per_kb", ch.cost_per_kb);
            congestion(c, &at("congestion"), &ch.congestion);
        }
    }

    /// The host's interfaces, one per channel, in order.
    pub fn interfaces(channels: &[Self]) -> Vec<InterfaceConfig> {
        channels.iter().map(Self::interface).collect()
    }

    /// The entry's name, or `ch{position}` when it has none.
    pub fn label(&self, position: usize) -> String {
        self.name.clone().unwrap_or_else(|| format!("ch{position}"))
    }

    /// The host interface this channel sends from.
    pub fn interface(&self) -> InterfaceConfig {
        InterfaceConfig {
            bind: self.bind,
            device: self.device.clone(),
        }
    }

    /// This channel over the host's interface `interface`.
    pub fn target(&self, interface: usize) -> ChannelTarget {
        ChannelTarget {
            interface,
            remote: self.remote,
            config: ChannelConfig {
                mtu: self.mtu,
                congestion: self.congestion.clone(),
                cost_per_kb: self.cost_per_kb,
                datagram_overhead: datagram_overhead(&self.remote),
                pace_acks: true,
                ..ChannelConfig::default()
            },
        }
    }

    /// Whom to connect to and over which channels: channel `i` on interface `i`.
    pub fn connect_config(
        channels: &[Self],
        peer: PublicKey,
        service: u32,
        handshake_timeout: Duration,
    ) -> ConnectConfig {
        ConnectConfig {
            peer,
            service,
            channels: channels
                .iter()
                .enumerate()
                .map(|(i, c)| c.target(i))
                .collect(),
            handshake_timeout,
        }
    }
}

/// What a sealed datagram to `remote` takes on the link beyond the session's bytes: the
/// secure layer's header and tag, and the UDP and IP headers. The channel's pacing
/// counts it, so a rate set to a share of the link's holds to that share.
pub fn datagram_overhead(remote: &SocketAddr) -> u32 {
    let ip_udp = if remote.is_ipv4() { 20 + 8 } else { 40 + 8 };
    (horde_crypto::TRANSPORT_OVERHEAD + ip_udp) as u32
}

/// A network device named in a file must exist on this host.
pub fn device(c: &mut Checks, at: &str, dev: &str) {
    // Linux names: 1 to 15 bytes (IFNAMSIZ less its NUL), no '/', no whitespace.
    let valid = (1..=15).contains(&dev.len())
        && !dev.contains('/')
        && !dev.chars().any(char::is_whitespace)
        && dev != "."
        && dev != "..";
    if !valid {
        c.error(at, format!("\"{dev}\" is not a network interface name"));
    } else if !Path::new("/sys/class/net").join(dev).exists() {
        // A modem that enumerates after boot: the host starts its interface down and
        // brings it up when the device appears.
        c.warn(
            at,
            format!("no network interface named \"{dev}\" on this host yet: its channels wait until it appears"),
        );
    }
}
