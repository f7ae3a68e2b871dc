//! The `horde tunnel` files of one live run, made from the tunnel scenario: the
//! scenario's session, scheduler and the mode's stream on both ends, and each link's
//! channel paced as in the simulator (CBR at a share of the link's rate, one rate per
//! direction). The client's file is a template: the vehicle fills in each channel's
//! remote address, which only the shell knows.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use horde_crypto::Keypair;
use horde_sim::flows::tunnel::TunnelLink;
use horde_sim::flows::tunnel_scenario::Mode;
use horde_sim::flows::tunnel_scenario::TunnelScenario;
use toml::{Table, Value};

/// The TUN device of both ends.
pub const TUN_NAME: &str = "plb0";
/// The server's tunnel address (the flow server answers on it).
pub const SERVER_TUN_ADDR: [u8; 4] = [10, 78, 0, 1];
const CLIENT_TUN: &str = "10.78.0.2";
/// The server's UDP port on every link.
pub const TUNNEL_PORT: u16 = 7700;
/// Channel MTU (largest ADU): the tunnel's default, which fits a 1500-byte link.
const CHANNEL_MTU: u32 = 1380;

/// Both ends' public keys; the key pairs are in `server.key` and `client.key`.
pub struct Keys {
    pub server: String,
    pub client: String,
    /// The folder that holds the key files.
    pub dir: PathBuf,
}

/// Fresh key pairs for both ends, written into `dir`.
pub fn write_keys(dir: &Path) -> Result<Keys> {
    let (server, client) = (Keypair::generate(), Keypair::generate());
    for (key, name) in [(&server, "server.key"), (&client, "client.key")] {
        let path = dir.join(name);
        key.write_file(&path)
            .with_context(|| format!("create {}", path.display()))?;
    }
    Ok(Keys {
        server: server.public().to_string(),
        client: client.public().to_string(),
        dir: dir.to_path_buf(),
    })
}

fn value<T: serde::Serialize>(what: &str, x: &T) -> Result<Value> {
    Value::try_from(x).with_context(|| format!("write the tunnel's {what} as TOML"))
}

/// What both files share.
fn common(s: &TunnelScenario, mode: &Mode, keys: &Keys, key: &str) -> Result<Table> {
    let mut t = Table::new();
    t.insert(
        "key_file".into(),
        Value::String(keys.dir.join(key).display().to_string()),
    );
    t.insert("scheduler".into(), Value::String(mode.scheduler.clone()));
    t.insert("session".into(), value("session", &s.session)?);
    t.insert("stream".into(), value("stream", &mode.stream)?);
    t.insert("acks".into(), value("acks", &s.acks)?);
    Ok(t)
}

fn tun(address: String) -> Value {
    let mut t = Table::new();
    t.insert("name".into(), Value::String(TUN_NAME.into()));
    t.insert(
        "addresses".into(),
        Value::Array(vec![Value::String(address)]),
    );
    Value::Table(t)
}

/// `server.toml` in `dir`.
pub fn server_file(
    s: &TunnelScenario,
    mode: &Mode,
    links: &[TunnelLink],
    dir: &Path,
    keys: &Keys,
) -> Result<PathBuf> {
    let mut t = common(s, mode, keys, "server.key")?;
    t.insert("mtu".into(), Value::Integer(CHANNEL_MTU.into()));
    let per_link = links
        .iter()
        .map(|l| value("channel congestion", &l.down_channel.congestion))
        .collect::<Result<Vec<_>>>()?;
    t.insert("channel_congestion".into(), Value::Array(per_link));
    let [a, b, c, d] = SERVER_TUN_ADDR;
    t.insert("tun".into(), tun(format!("{a}.{b}.{c}.{d}/24")));
    let mut iface = Table::new();
    iface.insert(
        "bind".into(),
        Value::String(format!("0.0.0.0:{TUNNEL_PORT}")),
    );
    t.insert("interfaces".into(), Value::Array(vec![Value::Table(iface)]));
    let mut client = Table::new();
    client.insert("key".into(), Value::String(keys.client.clone()));
    client.insert(
        "addresses".into(),
        Value::Array(vec![Value::String(format!("{CLIENT_TUN}/32"))]),
    );
    t.insert("clients".into(), Value::Array(vec![Value::Table(client)]));
    let path = dir.join("server.toml");
    std::fs::write(&path, toml::to_string(&t)?)
        .with_context(|| format!("write {}", path.display()))?;
    Ok(path)
}

/// `client-template.toml` in `dir`: one channel per link, on `link{i}`, without remotes.
pub fn client_template(
    s: &TunnelScenario,
    mode: &Mode,
    links: &[TunnelLink],
    dir: &Path,
    keys: &Keys,
) -> Result<PathBuf> {
    let mut t = common(s, mode, keys, "client.key")?;
    t.insert("peer_key".into(), Value::String(keys.server.clone()));
    t.insert("tun".into(), tun(format!("{CLIENT_TUN}/24")));
    let channels = links
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut c = Table::new();
            c.insert("name".into(), Value::String(l.name.clone()));
            c.insert("bind".into(), Value::String("0.0.0.0:0".into()));
            c.insert("device".into(), Value::String(format!("link{i}")));
            c.insert("mtu".into(), Value::Integer(CHANNEL_MTU.into()));
            c.insert(
                "congestion".into(),
                value("channel congestion", &l.up_channel.congestion)?,
            );
            Ok(Value::Table(c))
        })
        .collect::<Result<Vec<_>>>()?;
    t.insert("channels".into(), Value::Array(channels));
    let path = dir.join("client-template.toml");
    std::fs::write(&path, toml::to_string(&t)?)
        .with_context(|| format!("write {}", path.display()))?;
    Ok(path)
}

/// The client's file from its template: channel `i` goes to the host side of link `i`
/// (`hosts[i]`) at the tunnel port.
pub fn fill_client(template: &Path, hosts: &[std::net::Ipv4Addr], out: &Path) -> Result<()> {
    let text = std::fs::read_to_string(template)
        .with_context(|| format!("read {}", template.display()))?;
    let mut t: Table =
        toml::from_str(&text).with_context(|| format!("parse {}", template.display()))?;
    let Some(Value::Array(channels)) = t.get_mut("channels") else {
        anyhow::bail!("{}: no channels", template.display());
    };
    anyhow::ensure!(
        channels.len() <= hosts.len(),
        "the tunnel has {} channels but the shell {} links",
        channels.len(),
        hosts.len()
    );
    for (c, host) in channels.iter_mut().zip(hosts) {
        if let Value::Table(c) = c {
            c.insert(
                "remote".into(),
                Value::String(format!("{host}:{TUNNEL_PORT}")),
            );
        }
    }
    std::fs::write(out, toml::to_string(&t)?).with_context(|| format!("write {}", out.display()))
}
