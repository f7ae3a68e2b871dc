//! Shared set-up for the end-to-end tests: keys, hosts, and an emulated path.

#![allow(dead_code)]

pub mod flood;
pub mod netns;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use horde_crypto::Keypair;
use horde_emu::{EmulatorConfig, EmulatorHandle, LinkSpec};
use horde_net::{
    ChannelTarget, ConnectConfig, Connection, Host, HostConfig, InterfaceConfig, Reconnect,
};
use horde_proto::{ChannelConfig, SessionConfig};

pub fn lo() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

pub struct Setup {
    pub client: Host,
    pub server: Host,
    pub conn: Connection,
    pub accepted: Connection,
    pub emu: Option<EmulatorHandle>,
    pub channel_names: Vec<String>,
}

/// Server with one socket, client with one socket per link; each link goes through the
/// emulator when `links` are given (name, up, down).
pub async fn setup(links: &[(&str, LinkSpec, LinkSpec)], channel: ChannelConfig) -> Setup {
    setup_with(links, channel, |_| {}).await
}

/// As [`setup`], with the client's host configured further by `client` (its scheduler,
/// its session's timers).
pub async fn setup_with(
    links: &[(&str, LinkSpec, LinkSpec)],
    channel: ChannelConfig,
    client: impl FnOnce(&mut HostConfig),
) -> Setup {
    let ck = Keypair::generate();
    let sk = Keypair::generate();
    let mut server_cfg = HostConfig::new(sk.clone(), vec![InterfaceConfig::new(lo())]);
    server_cfg.allowed_peers = vec![*ck.public()];
    let server = Host::bind(server_cfg).await.unwrap();
    let mut client_cfg = HostConfig::new(
        ck,
        links.iter().map(|_| InterfaceConfig::new(lo())).collect(),
    );
    client(&mut client_cfg);
    let client = Host::bind(client_cfg).await.unwrap();
    let server_addr = server.local_addrs()[0];
    let toml: String = links
        .iter()
        .map(|(name, _, _)| format!("[[channels]]\nname = \"{name}\"\nlisten = \"127.0.0.1:0\"\nforward_to = \"{server_addr}\"\nup = {{}}\n"))
        .collect();
    let mut emu_cfg =
        EmulatorConfig::from_toml(&format!("seed = 5\n{toml}"), "test", &PathBuf::from("."))
            .unwrap();
    for (c, (_, up, down)) in emu_cfg.channels.iter_mut().zip(links) {
        c.up = up.clone();
        c.down = Some(down.clone());
    }
    let emu = horde_emu::Emulator::start(&emu_cfg).unwrap();
    let remotes = links
        .iter()
        .map(|(name, _, _)| emu.client_addr(name).unwrap())
        .collect();
    let (conn, accepted) = connect_pair(&client, &server, *sk.public(), remotes, channel).await;
    Setup {
        client,
        server,
        conn,
        accepted,
        emu: Some(emu),
        channel_names: links.iter().map(|l| l.0.to_string()).collect(),
    }
}

/// Connect `client` to `server` (public key `peer`), one channel per entry of `remotes`
/// over the client's interface of the same index, and accept on the server side.
pub async fn connect_pair(
    client: &Host,
    server: &Host,
    peer: horde_crypto::PublicKey,
    remotes: Vec<SocketAddr>,
    channel: ChannelConfig,
) -> (Connection, Connection) {
    connect_pair_on(client, server, peer, remotes, channel, 3).await
}

/// As [`connect_pair`], for `service`: a host's second connection to the same peer
/// needs a service of its own (a new session to the same service replaces the old).
pub async fn connect_pair_on(
    client: &Host,
    server: &Host,
    peer: horde_crypto::PublicKey,
    remotes: Vec<SocketAddr>,
    channel: ChannelConfig,
    service: u32,
) -> (Connection, Connection) {
    let mut listener = server.listen(service);
    let conn = client
        .connect(ConnectConfig {
            peer,
            service,
            channels: remotes
                .into_iter()
                .enumerate()
                .map(|(interface, remote)| ChannelTarget {
                    interface,
                    remote,
                    config: channel.clone(),
                })
                .collect(),
            handshake_timeout: Duration::from_secs(5),
        })
        .await
        .unwrap();
    let accepted = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .unwrap()
        .unwrap();
    (conn, accepted)
}

/// A client host with two channels, each from a loopback socket of its own, both to
/// `remote`, over a persistent connection that notices a dead peer within a second
/// (800 ms idle timeout, 200 ms keep-alives).
pub async fn persistent_client(
    key: &Keypair,
    server_key: &Keypair,
    remote: SocketAddr,
    service: u32,
) -> (Host, Connection) {
    let mut cfg = HostConfig::new(
        key.clone(),
        vec![InterfaceConfig::new(lo()), InterfaceConfig::new(lo())],
    );
    cfg.session = SessionConfig {
        idle_timeout_ms: 800.0,
        keepalive_ms: 200.0,
        ..SessionConfig::default()
    };
    let host = Host::bind(cfg).await.unwrap();
    let target = ConnectConfig {
        peer: *server_key.public(),
        service,
        channels: (0..2)
            .map(|interface| ChannelTarget {
                interface,
                remote,
                config: ChannelConfig::default(),
            })
            .collect(),
        handshake_timeout: Duration::from_secs(5),
    };
    let conn = host
        .connect_persistent(target, Reconnect::default())
        .await
        .unwrap();
    (host, conn)
}

/// A host on a one-worker runtime of its own, so that dropping the runtime kills it as a
/// crash would: no Close, sockets gone. Each connection accepted for `service` goes to
/// `serve` on a task of its own. Returns the runtime and the host's first address.
pub fn host_process<F, Fut>(
    cfg: HostConfig,
    service: u32,
    serve: F,
) -> (tokio::runtime::Runtime, SocketAddr)
where
    F: Fn(Connection) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(async {
        let host = Host::bind(cfg).await.unwrap();
        let addr = host.local_addrs()[0];
        let mut listener = host.listen(service);
        tokio::spawn(async move {
            let _host = host;
            while let Some(conn) = listener.accept().await {
                tokio::spawn(serve(conn));
            }
        });
        addr
    });
    (rt, addr)
}

/// A link with constant rate, constant one-way delay and Bernoulli loss.
pub fn link(kbps: f64, delay_ms: f64, loss: f64) -> LinkSpec {
    let text = format!(
        "rate = {{ model = \"constant\", kbps = {kbps} }}\ndelay = {{ model = \"constant\", ms = {delay_ms} }}\nbuffer_bytes = 200000\n{}",
        if loss > 0.0 { format!("loss = {{ model = \"bernoulli\", p = {loss} }}\n") } else { String::new() }
    );
    toml::from_str(&text).unwrap()
}
