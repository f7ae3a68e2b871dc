//! The `horde tunnel client` and `horde tunnel server` files: keys and peers as `send`
//! and `recv` have them, the TUN device's name, addresses and routes, the tunnel
//! stream's [`StreamConfig`], the session and the scheduler. Every value is checked once
//! parsed, each error at its `file:line:col`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::Prefix;
use horde_config::checks::{channel_count, congestion, session, widened};
use horde_config::{Checks, Validate};
use horde_crypto::ServerId;
use horde_proto::{AckFrequency, CcConfig, RecoveryMode, SessionConfig, StreamConfig};
use horde_qdisc::QdiscKind;
use serde::Deserialize;

use crate::channels::{device, ChannelEntry};
use crate::deploy::UpConfig;
use crate::rekey::RekeyConfig;

/// Channel MTUs (largest ADU, hence largest tunnelled IP packet) a tunnel accepts: IPv4
/// needs 576 bytes end to end; more than 65,000 does not fit a UDP datagram.
const TUNNEL_MTU: std::ops::RangeInclusive<u32> = 576..=65_000;
/// IPv6 needs every link, the tunnel included, to carry 1280-byte packets (RFC 8200).
const IPV6_MIN_MTU: u32 = 1280;
/// Interface names are at most 15 bytes (`IFNAMSIZ` less the terminator).
const IFNAME_MAX: usize = 15;

fn default_service() -> u32 {
    1
}
/// The default channel MTU (largest ADU): a 1500-byte path less the IPv6 and UDP
/// headers (48), the secure layer's header and tag (32) and Horde's data header (35),
/// rounded down.
const DEFAULT_MTU: u32 = 1380;

/// Tunnels run over cellular links whose up directions are slow: their acks fit them.
fn default_acks() -> AckFrequency {
    AckFrequency::ReversePath
}

fn default_mtu() -> u32 {
    DEFAULT_MTU
}
fn default_tun_name() -> String {
    "horde0".into()
}

/// The TUN device of either end.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunConfig {
    #[serde(default = "default_tun_name")]
    pub name: String,
    /// This end's tunnel addresses with their prefix length (`10.77.0.2/24`,
    /// `fd77::2/64`); the prefix is routed into the tunnel.
    pub addresses: Vec<String>,
    /// More prefixes routed into the tunnel (e.g. `0.0.0.0/1` and `128.0.0.0/1` to
    /// send everything but the tunnel's own datagrams through it).
    #[serde(default)]
    pub routes: Vec<String>,
    /// TUN offloads (docs/tunnel.md, "Offloads"): on by default, used when the kernel
    /// has them; `false` reads and writes one plain packet at a time.
    #[serde(default = "default_offload")]
    pub offload: bool,
}

fn default_offload() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    pub key_file: PathBuf,
    /// The server's public key.
    pub peer_key: String,
    #[serde(default = "default_service")]
    pub service: u32,
    /// Scheduler name (see `horde sim --help`); randomized round-robin when absent.
    #[serde(default)]
    pub scheduler: Option<String>,
    #[serde(default)]
    pub session: SessionConfig,
    /// When the secure layer rotates its keys.
    #[serde(default)]
    pub rekey: RekeyConfig,
    /// The tunnel stream's settings (both directions use one stream each).
    #[serde(default)]
    pub stream: StreamConfig,
    /// How the channels ack: `reverse_path` (default: cellular up links are slow) or
    /// `fixed`; the server should use the same.
    #[serde(default = "default_acks")]
    pub acks: AckFrequency,
    /// The ingress queue for packets from the TUN device: `fifo` (the default: straight
    /// into the session's stream), `chap` or `fq_codel` (docs/tunnel.md, "Ingress queue").
    #[serde(default)]
    pub qdisc: Option<String>,
    /// What `horde up` sets up besides the TUN device (docs/deploy.md).
    #[serde(default)]
    pub up: UpConfig,
    pub tun: TunConfig,
    pub channels: Vec<ClientChannel>,
}

/// A channel of the tunnel's client.
pub type ClientChannel = ChannelEntry<DEFAULT_MTU>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub key_file: PathBuf,
    #[serde(default = "default_service")]
    pub service: u32,
    #[serde(default)]
    pub scheduler: Option<String>,
    #[serde(default)]
    pub session: SessionConfig,
    /// When the secure layer rotates its keys.
    #[serde(default)]
    pub rekey: RekeyConfig,
    #[serde(default)]
    pub stream: StreamConfig,
    /// The MTU of the channels clients open (the largest ADU this end sends), which is
    /// also this end's tunnel MTU.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    #[serde(default)]
    pub congestion: CcConfig,
    /// Per channel, by its place in the client's `[[channels]]`: a congestion control
    /// that replaces `congestion` (e.g. each link paced at its own rate).
    #[serde(default)]
    pub channel_congestion: Vec<CcConfig>,
    /// How the channels ack, as the client's `acks`.
    #[serde(default = "default_acks")]
    pub acks: AckFrequency,
    /// This server's id behind a UDP load balancer, `ID/BYTES` (e.g. `7/1`): the
    /// sessions it accepts get indices that carry it (docs/load-balancing.md).
    #[serde(default)]
    pub server_id: Option<String>,
    /// The ingress queue for packets from the TUN device: `fifo` (the default: straight
    /// into the session's stream), `chap` or `fq_codel` (docs/tunnel.md, "Ingress queue").
    #[serde(default)]
    pub qdisc: Option<String>,
    /// What `horde up` sets up besides the TUN device (docs/deploy.md).
    #[serde(default)]
    pub up: UpConfig,
    pub tun: TunConfig,
    pub interfaces: Vec<ServerInterface>,
    pub clients: Vec<ClientEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerInterface {
    pub bind: SocketAddr,
    #[serde(default)]
    pub device: Option<String>,
}

/// One vehicle: its key, and the tunnel addresses routed to it (its own and any
/// network behind it). Packets from it must come from these addresses.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientEntry {
    #[serde(default)]
    pub name: Option<String>,
    pub key: String,
    pub addresses: Vec<String>,
}

/// The largest ADU the tunnel stream takes over channels of `channel_mtu`: the channel's,
/// less the recovery layer's frame when the stream has recovery on.
fn stream_mtu(channel_mtu: u32, stream: &StreamConfig) -> u32 {
    if stream.recovery.mode == RecoveryMode::None {
        channel_mtu
    } else {
        channel_mtu.saturating_sub(horde_proto::recovery::header::MAX_OVERHEAD as u32)
    }
}

impl ClientConfig {
    /// The tunnel MTU: the tunnel stream's largest ADU over the smallest channel MTU, so
    /// that every packet fits every channel.
    pub fn tunnel_mtu(&self) -> u32 {
        let channel = self
            .channels
            .iter()
            .map(|c| c.mtu)
            .min()
            .unwrap_or_else(default_mtu);
        stream_mtu(channel, &self.stream)
    }
}

impl ServerConfig {
    /// The tunnel MTU: the tunnel stream's largest ADU over the channels' MTU.
    pub fn tunnel_mtu(&self) -> u32 {
        stream_mtu(self.mtu, &self.stream)
    }
}

impl ClientEntry {
    pub fn prefixes(&self) -> Vec<Prefix> {
        self.addresses
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect()
    }
}

impl TunConfig {
    pub fn addresses(&self) -> Vec<Prefix> {
        self.addresses
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect()
    }
    pub fn routes(&self) -> Vec<Prefix> {
        self.routes.iter().filter_map(|a| a.parse().ok()).collect()
    }

    fn check(&self, c: &mut Checks, mtu: u32) {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= IFNAME_MAX
            && !self
                .name
                .contains(|ch: char| ch == '/' || ch == ':' || ch.is_whitespace());
        if !name_ok {
            c.error(
                "tun.name",
                format!(
                    "tun.name \"{}\" must be 1 to {IFNAME_MAX} bytes without '/', ':' or spaces",
                    self.name
                ),
            );
        }
        if self.addresses.is_empty() {
            c.error(
                "tun.addresses",
                "tun.addresses needs at least one ADDRESS/LENGTH",
            );
        }
        let mut v6 = false;
        for (key, list) in [("addresses", &self.addresses), ("routes", &self.routes)] {
            for (i, a) in list.iter().enumerate() {
                match a.parse::<Prefix>() {
                    Ok(p) => v6 |= p.addr.is_ipv6(),
                    Err(e) => c.error(format!("tun.{key}[{i}]"), format!("tun.{key}[{i}]: {e}")),
                }
            }
        }
        if v6 && mtu < IPV6_MIN_MTU {
            c.error(
                "tun.addresses",
                format!("IPv6 needs a tunnel MTU of at least {IPV6_MIN_MTU}, but it is {mtu}"),
            );
        }
    }
}

fn mtu(c: &mut Checks, at: &str, mtu: u32) {
    c.count_in(at, "mtu", mtu.into(), widened(&TUNNEL_MTU));
}

fn common(
    c: &mut Checks,
    key_file: &Path,
    scheduler: Option<&str>,
    s: &SessionConfig,
    stream: &StreamConfig,
    qdisc: Option<&str>,
) {
    if key_file.as_os_str().is_empty() {
        c.error(
            "key_file",
            "key_file must name a key file (see `horde keygen`)",
        );
    }
    if let Some(name) = scheduler {
        if let Err(e) = horde_policy::registry::scheduler(name, None) {
            c.error("scheduler", format!("{e:#}"));
        }
    }
    session(c, s);
    horde_config::checks::stream(c, "stream", stream);
    if let Err(e) = ingress_qdisc(qdisc) {
        c.error("qdisc", e);
    }
}

/// The ingress discipline `qdisc` names: `None` for FIFO, the direct path.
pub fn ingress_qdisc(qdisc: Option<&str>) -> Result<Option<QdiscKind>, String> {
    let Some(name) = qdisc else {
        return Ok(None);
    };
    match name.parse::<QdiscKind>() {
        Ok(QdiscKind::Fifo) => Ok(None),
        Ok(QdiscKind::Spq) => Err(
            "qdisc = \"spq\" needs traffic classes, which a tunnel file does not describe; \
             use fifo, chap or fq_codel"
                .into(),
        ),
        Ok(kind) => Ok(Some(kind)),
        Err(_) => Err(format!(
            "qdisc must be fifo, chap or fq_codel, not {name:?}"
        )),
    }
}

impl Validate for ClientConfig {
    fn validate(&self, c: &mut Checks) {
        common(
            c,
            &self.key_file,
            self.scheduler.as_deref(),
            &self.session,
            &self.stream,
            self.qdisc.as_deref(),
        );
        self.rekey.check(c);
        if let Err(e) = self.peer_key.trim().parse::<horde_crypto::PublicKey>() {
            c.error("peer_key", format!("peer_key: {e}"));
        }
        self.tun.check(c, self.tunnel_mtu());
        ClientChannel::check_all(c, &self.channels, TUNNEL_MTU);
    }
}

impl Validate for ServerConfig {
    fn validate(&self, c: &mut Checks) {
        common(
            c,
            &self.key_file,
            self.scheduler.as_deref(),
            &self.session,
            &self.stream,
            self.qdisc.as_deref(),
        );
        self.rekey.check(c);
        mtu(c, "mtu", self.mtu);
        congestion(c, "congestion", &self.congestion);
        channel_count(
            c,
            "channel_congestion",
            "channel_congestion entries",
            self.channel_congestion.len(),
        );
        for (i, cc) in self.channel_congestion.iter().enumerate() {
            congestion(c, &format!("channel_congestion[{i}]"), cc);
        }
        self.tun.check(c, self.tunnel_mtu());
        if let Some(Err(e)) = self.server_id.as_deref().map(str::parse::<ServerId>) {
            c.error("server_id", format!("server_id: {e}"));
        }
        if self.interfaces.is_empty() {
            c.error("", "at least one [[interfaces]] entry is needed");
        }
        for (i, itf) in self.interfaces.iter().enumerate() {
            if let Some(dev) = &itf.device {
                device(c, &format!("interfaces[{i}].device"), dev);
            }
        }
        if self.clients.is_empty() {
            c.error("", "at least one [[clients]] entry is needed");
        }
        let mut seen: Vec<(usize, Prefix)> = Vec::new();
        for (i, cl) in self.clients.iter().enumerate() {
            let at = |k: &str| format!("clients[{i}].{k}");
            match cl.key.trim().parse::<horde_crypto::PublicKey>() {
                Err(e) => c.error(at("key"), format!("clients[{i}].key: {e}")),
                Ok(k) => {
                    let dup = self.clients[..i]
                        .iter()
                        .position(|o| o.key.trim().parse::<horde_crypto::PublicKey>() == Ok(k));
                    if let Some(j) = dup {
                        c.error(at("key"), format!("clients[{j}] has the same key"));
                    }
                }
            }
            if cl.addresses.is_empty() {
                c.error(
                    at("addresses"),
                    "a client needs at least one tunnel address (ADDRESS/LENGTH)",
                );
            }
            for (k, a) in cl.addresses.iter().enumerate() {
                let here = format!("clients[{i}].addresses[{k}]");
                match a.parse::<Prefix>() {
                    Err(e) => c.error(&here, format!("{here}: {e}")),
                    Ok(p) => {
                        if let Some((j, q)) = seen.iter().find(|(j, q)| *j != i && q.overlaps(&p)) {
                            c.error(
                                &here,
                                format!(
                                    "{p} overlaps clients[{j}]'s {q}: a packet could go to either"
                                ),
                            );
                        }
                        seen.push((i, p));
                    }
                }
            }
        }
    }
}

/// Read, parse and check a file; the caller shows its warnings.
pub fn load<T: serde::de::DeserializeOwned + Validate>(
    path: &Path,
) -> Result<horde_config::Checked<T>, horde_config::ConfigError> {
    horde_config::load_checked(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_config::parse_checked;

    const KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    const KEY2: &str = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

    fn client() -> String {
        format!(
            r#"key_file = "client.key"
peer_key = "{KEY}"

[tun]
name = "horde0"
addresses = ["10.77.0.2/24", "fd77::2/64"]
routes = ["10.78.0.0/16"]

[stream]
max_queue_bytes = 262144

[[channels]]
bind = "0.0.0.0:0"
remote = "192.0.2.1:7700"
mtu = 1380

[[channels]]
bind = "0.0.0.0:0"
remote = "198.51.100.1:7700"
mtu = 1300
"#
        )
    }

    fn server() -> String {
        format!(
            r#"key_file = "server.key"
mtu = 1380

[tun]
addresses = ["10.77.0.1/24", "fd77::1/64"]

[[interfaces]]
bind = "0.0.0.0:7700"

[[clients]]
name = "bus-1"
key = "{KEY}"
addresses = ["10.77.0.2/32", "fd77::2/128"]

[[clients]]
name = "bus-2"
key = "{KEY2}"
addresses = ["10.77.0.3/32", "10.78.3.0/24"]
"#
        )
    }

    #[test]
    fn the_good_files_pass_and_the_mtu_is_the_smallest_channels() {
        let c = parse_checked::<ClientConfig>(&client(), "c.toml")
            .unwrap()
            .value;
        assert_eq!(c.tunnel_mtu(), 1300);
        assert_eq!(c.tun.addresses().len(), 2);
        assert_eq!(c.tun.routes()[0].to_string(), "10.78.0.0/16");
        let s = parse_checked::<ServerConfig>(&server(), "s.toml")
            .unwrap()
            .value;
        assert_eq!(s.clients[1].prefixes().len(), 2);
    }

    #[test]
    fn loss_recovery_takes_its_frame_off_the_tunnel_mtu() {
        let frame = horde_proto::recovery::header::MAX_OVERHEAD as u32;
        let oec = client().replace(
            "max_queue_bytes = 262144",
            "max_queue_bytes = 262144\n[stream.recovery]\nmode = \"oec\"",
        );
        let text = oec.replace("mtu = 1300", "mtu = 1400");
        let c = parse_checked::<ClientConfig>(&text, "c.toml")
            .unwrap()
            .value;
        assert_eq!(c.tunnel_mtu(), 1380 - frame);
        let s = parse_checked::<ServerConfig>(&server(), "s.toml")
            .unwrap()
            .value;
        assert_eq!(s.tunnel_mtu(), 1380);
        // 1300 less the frame is below what IPv6 needs.
        let e = parse_checked::<ClientConfig>(&oec, "c.toml").unwrap_err();
        assert!(e.message.contains("IPv6 needs a tunnel MTU"), "{e}");
    }

    #[test]
    fn the_server_paces_each_channel_at_its_own_rate_when_told() {
        let text = server().replace(
            "mtu = 1380\n",
            "mtu = 1380\nchannel_congestion = [{ kind = \"cbr\", kbps = 1350 }, { kind = \"cbr\", kbps = 720 }]\n",
        );
        let s = parse_checked::<ServerConfig>(&text, "s.toml")
            .unwrap()
            .value;
        assert_eq!(s.channel_congestion.len(), 2);
        assert!(matches!(s.channel_congestion[1], CcConfig::Cbr { kbps, .. } if kbps == 720.0));
        let bad = text.replace("kbps = 720", "kbps = -720");
        let e = parse_checked::<ServerConfig>(&bad, "s.toml").unwrap_err();
        // The error points at the value inside the list.
        assert!(e.to_string().starts_with("s.toml:3:77: "), "{e}");
        assert!(e.message.contains("cbr kbps"), "{e}");
    }

    /// One row per bad value: (edit, expected `file:line:col: `, part of the message).
    #[test]
    fn every_bad_value_is_named_at_its_position() {
        let mut wrong = Vec::new();
        let rows: &[(bool, &str, &str, &str, &str)] = &[
            (
                true,
                "\"10.77.0.2/24\"",
                "\"10.77.0.2\"",
                "c.toml:6:14: ",
                "ADDRESS/LENGTH",
            ),
            (
                true,
                "\"fd77::2/64\"",
                "\"fd77::2/129\"",
                "c.toml:6:30: ",
                "above 128",
            ),
            (
                true,
                "\"10.78.0.0/16\"",
                "\"ten/16\"",
                "c.toml:7:11: ",
                "not an IP address",
            ),
            (
                true,
                "name = \"horde0\"",
                "name = \"a/b\"",
                "c.toml:5:8: ",
                "tun.name",
            ),
            (
                true,
                "mtu = 1300",
                "mtu = 1200",
                "c.toml:6:13: ",
                "IPv6 needs a tunnel MTU of at least 1280",
            ),
            (
                true,
                "mtu = 1380",
                "mtu = 70000",
                "c.toml:15:7: ",
                "mtu must be in 576..=65000",
            ),
            (
                true,
                "\"198.51.100.1:7700\"",
                "\"0.0.0.0:7700\"",
                "c.toml:19:10: ",
                "not an address",
            ),
            (
                true,
                "remote = \"192.0.2.1:7700\"",
                "name = \" \"\nremote = \"192.0.2.1:7700\"",
                "c.toml:14:8: ",
                "channel name must not be empty",
            ),
            (
                true,
                "max_queue_bytes = 262144",
                "max_queue_bytes = 0",
                "c.toml:10:19: ",
                "max_queue_bytes",
            ),
            (
                true,
                "max_queue_bytes = 262144",
                "max_queue_bytes = 262144\nmax_kbps = 1e30",
                "c.toml:11:12: ",
                "stream.max_kbps must be at most 100000000 kbit/s (100 Gbit/s), got 1e30",
            ),
            (
                true,
                "max_queue_bytes = 262144",
                "max_queue = 1",
                "c.toml:10:1: ",
                "unknown field",
            ),
            (
                true,
                "peer_key = \"",
                "peer_key = \"x",
                "c.toml:2:12: ",
                "peer_key",
            ),
            (
                true,
                "bind = \"0.0.0.0:0\"\nremote = \"192",
                "bind = \"0.0.0.0:0\"\ndevice = \"eth0/1\"\nremote = \"192",
                "c.toml:14:10: ",
                "\"eth0/1\" is not a network interface name",
            ),
            (
                false,
                "mtu = 1380",
                "mtu = 70000",
                "s.toml:2:7: ",
                "mtu must be in",
            ),
            (
                false,
                "mtu = 1380",
                "mtu = 1380\nserver_id = \"70000/2\"",
                "s.toml:3:13: ",
                "server id 70000 does not fit in 2 byte(s)",
            ),
            (
                false,
                "mtu = 1380",
                "mtu = 1380\nqdisc = \"spq\"",
                "s.toml:3:9: ",
                "needs traffic classes",
            ),
            (
                false,
                "mtu = 1380",
                "mtu = 1380\nqdisc = \"red\"",
                "s.toml:3:9: ",
                "qdisc must be fifo, chap or fq_codel, not \"red\"",
            ),
            (
                false,
                "\"10.78.3.0/24\"",
                "\"10.77.0.0/24\"",
                "s.toml:18:30: ",
                "overlaps clients[0]'s 10.77.0.2/32",
            ),
            (
                false,
                &format!("key = \"{KEY2}\""),
                &format!("key = \"{KEY}\""),
                "s.toml:17:7: ",
                "clients[0] has the same key",
            ),
            (
                false,
                "addresses = [\"10.77.0.3/32\", \"10.78.3.0/24\"]",
                "addresses = []",
                "s.toml:18:13: ",
                "at least one tunnel address",
            ),
            (
                false,
                "key = \"AAAA",
                "key = \"zz",
                "s.toml:12:7: ",
                "clients[0].key",
            ),
        ];
        for (is_client, from, to, at, message) in rows {
            let text = if *is_client { client() } else { server() };
            assert!(text.contains(from), "row {to:?}: {from:?} not in the file");
            let text = text.replacen(from, to, 1);
            let got = if *is_client {
                parse_checked::<ClientConfig>(&text, "c.toml").map(|_| ())
            } else {
                parse_checked::<ServerConfig>(&text, "s.toml").map(|_| ())
            };
            match got {
                Ok(()) => wrong.push(format!("{to:?} was accepted")),
                Err(e) if !(e.to_string().starts_with(at) && e.message.contains(message)) => {
                    wrong.push(format!("{to:?}: got {e}"))
                }
                Err(_) => {}
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn the_shipped_example_files_parse() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        for (file, client) in [("tunnel-client.toml", true), ("tunnel-server.toml", false)] {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            let text = text.replace("REPLACE with the server's public key", KEY);
            let text = text.replace("REPLACE with the client's public key", KEY);
            let r = if client {
                parse_checked::<ClientConfig>(&text, file).map(|_| ())
            } else {
                parse_checked::<ServerConfig>(&text, file).map(|_| ())
            };
            assert!(r.is_ok(), "{file}: {r:?}");
        }
    }
}

#[cfg(test)]
mod rekey_tests {
    use std::time::Duration;

    use horde_config::parse_checked;

    use super::*;

    fn server_with(rekey: &str) -> String {
        format!(
            "key_file = \"s.key\"\n[tun]\naddresses = [\"10.77.0.1/24\"]\n\
             [[interfaces]]\nbind = \"0.0.0.0:7700\"\n\
             [[clients]]\nkey = \"{}\"\naddresses = [\"10.77.0.2/32\"]\n{rekey}",
            horde_crypto::Keypair::generate().public()
        )
    }

    #[test]
    fn rekey_sets_the_policy_and_bad_values_are_named_at_their_place() {
        let s = parse_checked::<ServerConfig>(
            &server_with("[rekey]\nafter_s = 2.5\nafter_messages = 1000\n"),
            "s.toml",
        )
        .unwrap()
        .value;
        let policy = s.rekey.policy();
        assert_eq!(policy.rekey_after_time, Duration::from_millis(2500));
        assert_eq!(policy.reject_after_time, Duration::from_millis(3750));
        assert_eq!(policy.rekey_after_messages, 1000);
        // Absent: WireGuard's thresholds.
        let s = parse_checked::<ServerConfig>(&server_with(""), "s.toml")
            .unwrap()
            .value;
        assert_eq!(s.rekey.policy(), horde_crypto::RekeyPolicy::default());

        let e = parse_checked::<ServerConfig>(&server_with("[rekey]\nafter_s = 0\n"), "s.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("s.toml:10:11: "), "{e}");
        assert!(e.contains("rekey.after_s must be in 0.1..=86400"), "{e}");
        let e = parse_checked::<ServerConfig>(
            &server_with("[rekey]\nafter_messages = 256\n"),
            "s.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("rekey.after_messages must be above 256"), "{e}");
        assert!(
            parse_checked::<ServerConfig>(&server_with("[rekey]\nafter = 1\n"), "s.toml").is_err()
        );
    }
}
