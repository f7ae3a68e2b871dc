//! What `horde up` changes in the host's network besides the TUN device, as a list of
//! commands, each with the commands that undo it (docs/deploy.md).
//!
//! - **Client:** each `[[channels]]` entry with a `device` gets a routing table of its
//!   own, holding a default route through that interface's gateway, and a rule sending
//!   whatever leaves through the interface (a channel's socket is bound to it) to that
//!   table. So each channel goes out through its own modem, whatever the main table's
//!   default route is, and the tunnel's own routes never catch the channels' datagrams.
//! - **Server:** with `[up] masquerade_out`, forwarding on (IPv4, and IPv6 when a client
//!   has an IPv6 prefix) and an nftables table that masquerades the clients' prefixes,
//!   both families, out of that interface.
//!
//! A client's reload adds a table for each device it does not route yet ([`reload_plan`]).
//!
//! The plan is computed from the file and the interfaces' gateways (passed in), so it is
//! testable without touching the host.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::config::{ClientConfig, ServerConfig};
use crate::Prefix;

/// The `[up]` table of a tunnel file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpConfig {
    /// The first of the client's per-channel routing tables (one per channel with a
    /// device, in order) and the priority of the first rule.
    #[serde(default = "default_table")]
    pub table: u32,
    /// Server: masquerade the clients' prefixes (IPv4 and IPv6) out of this interface,
    /// with forwarding on.
    #[serde(default)]
    pub masquerade_out: Option<String>,
}

impl Default for UpConfig {
    fn default() -> Self {
        Self {
            table: default_table(),
            masquerade_out: None,
        }
    }
}

fn default_table() -> u32 {
    7700
}

/// One change and how to undo it; each is an argument vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// What it is for, for the log.
    pub what: String,
    pub apply: Vec<Vec<String>>,
    pub undo: Vec<Vec<String>>,
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// A channel's link: its device, the family of its remote, its gateway if the device
/// has one (a point-to-point modem has none: the route is on-link), and whether the
/// device exists yet.
#[derive(Debug, Clone)]
pub struct LinkRoute {
    pub device: String,
    pub v6: bool,
    pub gateway: Option<IpAddr>,
    pub present: bool,
}

/// The client's links, in the order of its channels that name a device.
pub fn client_links(
    cfg: &ClientConfig,
    gateway: impl Fn(&str, bool) -> Option<IpAddr>,
    present: impl Fn(&str) -> bool,
) -> Vec<LinkRoute> {
    cfg.channels
        .iter()
        .filter_map(|c| {
            let device = c.device.clone()?;
            let v6 = c.remote.is_ipv6();
            let gateway = gateway(&device, v6);
            let present = present(&device);
            Some(LinkRoute {
                device,
                v6,
                gateway,
                present,
            })
        })
        .collect()
}

/// The route of link `i` in its own table: what `horde up` adds, and adds again when
/// the link comes back (the kernel drops a device's routes when it goes down).
pub fn link_route(up: &UpConfig, i: usize, link: &LinkRoute) -> Vec<String> {
    let table = (up.table + i as u32).to_string();
    let mut route = argv(&[
        "ip",
        if link.v6 { "-6" } else { "-4" },
        "route",
        "replace",
        "default",
    ]);
    if let Some(g) = link.gateway {
        route.extend(argv(&["via", &g.to_string()]));
    }
    route.extend(argv(&["dev", &link.device, "table", &table]));
    route
}

/// The client's steps: per link, its table's default route and the rule that sends
/// the link's traffic there. A device that does not exist yet gets only its rule; its
/// route is added when it appears (`horde up` checks each table every second).
pub fn client_plan(up: &UpConfig, links: &[LinkRoute]) -> Vec<Step> {
    links
        .iter()
        .enumerate()
        .map(|(i, link)| link_step(up, i, link))
        .collect()
}

/// What a reload adds to the links already routed (`routed`, table `up.table + i` for
/// the `i`th): a table of its own, the next free one, for each device and family in
/// `wanted` that no routed link has yet, each once. A routed link that `wanted` no
/// longer names is left as it is: its rule concerns only datagrams that leave through
/// its device, and a channel that names the device again finds its table ready.
pub fn reload_plan(
    up: &UpConfig,
    routed: &[LinkRoute],
    wanted: &[LinkRoute],
) -> Vec<(LinkRoute, Step)> {
    let mut known: Vec<(String, bool)> = routed.iter().map(|l| (l.device.clone(), l.v6)).collect();
    let mut added = Vec::new();
    for link in wanted {
        let key = (link.device.clone(), link.v6);
        if known.contains(&key) {
            continue;
        }
        known.push(key);
        let step = link_step(up, routed.len() + added.len(), link);
        added.push((link.clone(), step));
    }
    added
}

/// The step of link `i`: its table's default route (if its device is there) and its rule.
fn link_step(up: &UpConfig, i: usize, link: &LinkRoute) -> Step {
    let table = (up.table + i as u32).to_string();
    let family = if link.v6 { "-6" } else { "-4" };
    let rule = |verb: &str| {
        argv(&[
            "ip",
            family,
            "rule",
            verb,
            "oif",
            &link.device,
            "lookup",
            &table,
            "priority",
            &table,
        ])
    };
    let (what, apply) = if link.present {
        (
            format!("channel {i}: out through {} (table {table})", link.device),
            vec![link_route(up, i, link), rule("add")],
        )
    } else {
        (
            format!(
                "channel {i}: out through {} (table {table}) once it appears",
                link.device
            ),
            vec![rule("add")],
        )
    };
    Step {
        what,
        apply,
        undo: vec![
            rule("del"),
            argv(&["ip", family, "route", "flush", "table", &table]),
        ],
    }
}

/// The nftables table a server's masquerade lives in: one per TUN device.
pub fn nft_table(tun: &str) -> String {
    let name: String = tun
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("horde_{name}")
}

/// What forwarding was before `horde up` turned it on, which the undo puts back: the
/// contents of `/proc/sys/net/ipv4/ip_forward` and `/proc/sys/net/ipv6/conf/all/forwarding`.
#[derive(Debug, Clone)]
pub struct ForwardingWas {
    pub ipv4: String,
    pub ipv6: String,
}

/// The server's steps: forwarding on for each family its clients' prefixes use, and
/// masquerading those prefixes out of `up.masquerade_out` (one nftables `inet` table,
/// IPv4 and IPv6 alike).
pub fn server_plan(up: &UpConfig, cfg: &ServerConfig, was: &ForwardingWas) -> Vec<Step> {
    let Some(out) = &up.masquerade_out else {
        return Vec::new();
    };
    let table = nft_table(&cfg.tun.name);
    let prefixes: Vec<Prefix> = cfg.clients.iter().flat_map(|c| c.prefixes()).collect();
    let mut apply = vec![
        argv(&["nft", "add", "table", "inet", &table]),
        argv(&[
            "nft",
            "add",
            "chain",
            "inet",
            &table,
            "postrouting",
            "{ type nat hook postrouting priority srcnat; }",
        ]),
    ];
    for p in &prefixes {
        let family = if p.addr.is_ipv4() { "ip" } else { "ip6" };
        apply.push(argv(&[
            "nft",
            "add",
            "rule",
            "inet",
            &table,
            "postrouting",
            "oifname",
            out,
            family,
            "saddr",
            &p.to_string(),
            "masquerade",
        ]));
    }
    let forwarding = |what: &str, key: &str, before: &str| Step {
        what: what.into(),
        apply: vec![argv(&["sysctl", "-q", "-w", &format!("{key}=1")])],
        undo: vec![argv(&[
            "sysctl",
            "-q",
            "-w",
            &format!("{key}={}", before.trim()),
        ])],
    };
    let mut steps = vec![forwarding(
        "IPv4 forwarding on",
        "net.ipv4.ip_forward",
        &was.ipv4,
    )];
    if prefixes.iter().any(|p| !p.addr.is_ipv4()) {
        steps.push(forwarding(
            "IPv6 forwarding on",
            "net.ipv6.conf.all.forwarding",
            &was.ipv6,
        ));
    }
    steps.push(Step {
        what: format!(
            "masquerade the clients' prefixes out of {out} (nftables table inet {table})"
        ),
        apply,
        undo: vec![argv(&["nft", "delete", "table", "inet", &table])],
    });
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_config::{parse, parse_checked};

    const KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

    /// Parsed only: the devices it names do not exist here.
    fn parse_client(text: &str) -> ClientConfig {
        parse::<ClientConfig>(text, "c.toml").unwrap()
    }

    fn parse_checked_server(text: &str) -> ServerConfig {
        parse_checked::<ServerConfig>(text, "s.toml").unwrap().value
    }

    #[test]
    fn each_channel_with_a_device_gets_a_table_and_a_rule() {
        let cfg = parse_client(&format!(
            "key_file = \"c.key\"\npeer_key = \"{KEY}\"\n[tun]\naddresses = [\"10.77.0.2/24\"]\n\
             [[channels]]\nbind = \"0.0.0.0:0\"\ndevice = \"wwan0\"\nremote = \"198.51.100.1:7700\"\n\
             [[channels]]\nbind = \"0.0.0.0:0\"\nremote = \"198.51.100.1:7700\"\n\
             [[channels]]\nbind = \"0.0.0.0:0\"\ndevice = \"wwan1\"\nremote = \"198.51.100.1:7700\"\n"
        ));
        let links = client_links(
            &cfg,
            |dev, _| (dev == "wwan0").then(|| "192.0.2.1".parse().unwrap()),
            |_| true,
        );
        let up = UpConfig::default();
        let plan = client_plan(&up, &links);
        assert_eq!(plan.len(), 2, "the channel without a device is left alone");
        assert_eq!(
            plan[0].apply[0].join(" "),
            "ip -4 route replace default via 192.0.2.1 dev wwan0 table 7700"
        );
        assert_eq!(
            plan[0].apply[1].join(" "),
            "ip -4 rule add oif wwan0 lookup 7700 priority 7700"
        );
        // A modem without a gateway (point to point) gets an on-link route.
        assert_eq!(
            plan[1].apply[0].join(" "),
            "ip -4 route replace default dev wwan1 table 7701"
        );
        assert_eq!(
            plan[1].undo,
            vec![
                argv(&[
                    "ip", "-4", "rule", "del", "oif", "wwan1", "lookup", "7701", "priority", "7701"
                ]),
                argv(&["ip", "-4", "route", "flush", "table", "7701"]),
            ]
        );
    }

    #[test]
    fn a_device_not_there_yet_gets_its_rule_and_no_route() {
        let cfg = parse_client(&format!(
            "key_file = \"c.key\"\npeer_key = \"{KEY}\"\n[tun]\naddresses = [\"10.77.0.2/24\"]\n\
             [[channels]]\nbind = \"0.0.0.0:0\"\ndevice = \"wwan0\"\nremote = \"198.51.100.1:7700\"\n\
             [[channels]]\nbind = \"0.0.0.0:0\"\ndevice = \"wwan1\"\nremote = \"198.51.100.1:7700\"\n"
        ));
        let links = client_links(&cfg, |_, _| None, |dev| dev == "wwan0");
        let plan = client_plan(&UpConfig::default(), &links);
        assert_eq!(plan[0].apply.len(), 2);
        assert_eq!(
            plan[1].apply,
            vec![argv(&[
                "ip", "-4", "rule", "add", "oif", "wwan1", "lookup", "7701", "priority", "7701"
            ])]
        );
        assert!(
            plan[1].what.ends_with("once it appears"),
            "{}",
            plan[1].what
        );
        // Its undo is the same: the route, if it came, is flushed with its table.
        assert_eq!(plan[1].undo.len(), 2);
    }

    #[test]
    fn a_reload_gives_each_new_device_the_next_free_table_once() {
        let link = |device: &str, v6: bool| LinkRoute {
            device: device.into(),
            v6,
            gateway: None,
            present: true,
        };
        let up = UpConfig::default();
        let routed = [link("wwan0", false), link("wwan1", false)];
        let wanted = [
            link("wwan1", false),
            link("wwan2", false),
            link("wwan2", false),
            link("wwan0", true),
        ];
        let added = reload_plan(&up, &routed, &wanted);
        let devices: Vec<(&str, bool)> = added
            .iter()
            .map(|(l, _)| (l.device.as_str(), l.v6))
            .collect();
        assert_eq!(
            devices,
            [("wwan2", false), ("wwan0", true)],
            "a device already routed in that family is not routed again"
        );
        assert_eq!(
            added[0].1.apply,
            vec![
                argv(&["ip", "-4", "route", "replace", "default", "dev", "wwan2", "table", "7702"]),
                argv(&[
                    "ip", "-4", "rule", "add", "oif", "wwan2", "lookup", "7702", "priority", "7702"
                ]),
            ]
        );
        assert_eq!(
            added[1].1.undo[0].join(" "),
            "ip -6 rule del oif wwan0 lookup 7703 priority 7703"
        );
        // A reload that names only routed devices, or fewer of them, adds nothing.
        assert!(reload_plan(&up, &routed, &routed[..1]).is_empty());
    }

    #[test]
    fn a_server_masquerades_its_clients_prefixes_and_restores_forwarding() {
        let cfg = parse_checked_server(&format!(
            "key_file = \"s.key\"\n[up]\nmasquerade_out = \"eth0\"\n[tun]\nname = \"hd-0\"\naddresses = [\"10.77.0.1/24\"]\n\
             [[interfaces]]\nbind = \"0.0.0.0:7700\"\n\
             [[clients]]\nkey = \"{KEY}\"\naddresses = [\"10.77.0.2/32\", \"fd77::2/128\", \"10.78.0.0/24\"]\n"
        ));
        let up = cfg.up.clone();
        let was = ForwardingWas {
            ipv4: "0\n".into(),
            ipv6: "1\n".into(),
        };
        let plan = server_plan(&up, &cfg, &was);
        assert_eq!(plan.len(), 3);
        assert_eq!(
            plan[0].undo[0].join(" "),
            "sysctl -q -w net.ipv4.ip_forward=0"
        );
        assert_eq!(
            plan[1].apply[0].join(" "),
            "sysctl -q -w net.ipv6.conf.all.forwarding=1"
        );
        assert_eq!(
            plan[1].undo[0].join(" "),
            "sysctl -q -w net.ipv6.conf.all.forwarding=1"
        );
        let rules: Vec<String> = plan[2].apply.iter().map(|a| a.join(" ")).collect();
        assert_eq!(rules[0], "nft add table inet horde_hd_0");
        assert_eq!(
            rules[2..],
            [
                "nft add rule inet horde_hd_0 postrouting oifname eth0 ip saddr 10.77.0.2/32 masquerade",
                "nft add rule inet horde_hd_0 postrouting oifname eth0 ip6 saddr fd77::2/128 masquerade",
                "nft add rule inet horde_hd_0 postrouting oifname eth0 ip saddr 10.78.0.0/24 masquerade",
            ]
        );
        assert_eq!(
            plan[2].undo[0].join(" "),
            "nft delete table inet horde_hd_0"
        );
        // IPv4 clients only: IPv6 forwarding is left as it is.
        let v4_only = parse_checked_server(&format!(
            "key_file = \"s.key\"\n[up]\nmasquerade_out = \"eth0\"\n[tun]\nname = \"hd-0\"\naddresses = [\"10.77.0.1/24\"]\n\
             [[interfaces]]\nbind = \"0.0.0.0:7700\"\n\
             [[clients]]\nkey = \"{KEY}\"\naddresses = [\"10.77.0.2/32\"]\n"
        ));
        let steps = server_plan(&up, &v4_only, &was);
        assert!(steps.iter().all(|s| !s.what.contains("IPv6")), "{steps:?}");
        // Without masquerade_out a server changes nothing.
        assert!(server_plan(&UpConfig::default(), &cfg, &was).is_empty());
    }
}
