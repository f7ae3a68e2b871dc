//! A neighbour behind the client's own address cannot lock it out.
//!
//! Two network namespaces joined by a veth pair: A holds the client *and* the attacker,
//! sharing 192.0.2.1 (as behind a carrier-grade NAT), B the receiver at 192.0.2.2. The
//! client connects once, as in an earlier run. Then the attacker floods the receiver at
//! 10,000 datagrams/s from 64 ports of the shared address with old initiations of the
//! client's own key (replays, built with the crypto crate as a capture would be), valid
//! initiations of keys that are not allowed, and random bytes. While the flood runs, the
//! client connects again three times from new ports; each must connect within 100 ms.
//!
//! Needs root; cleans up its namespaces (and the veth pair in them) even on failure.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use common::netns::{enter, in_netns, may_run, Pair};
use horde_crypto::{DropReason, Initiator, Keypair, PublicKey, INITIATION_LEN, TYPE_INITIATION};
use horde_net::{ChannelTarget, ConnectConfig, Host, HostConfig, HostStats, InterfaceConfig};
use horde_proto::ChannelConfig;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

const SERVICE: u32 = 21;
const SERVER: &str = "192.0.2.2:7100";
const SHARED_IP: &str = "192.0.2.1";
const FLOOD_RATE: u64 = 10_000;
const FLOOD_PORTS: usize = 64;
const FLOOD_TIME: Duration = Duration::from_secs(3);
/// The target: a client behind the attacker's address connects within this.
const CONNECT_TARGET: Duration = Duration::from_millis(100);

/// Connects from a fresh host on the shared address; how long `connect` took.
async fn connect_once(key: Keypair, server: PublicKey) -> Result<Duration, String> {
    let bind: SocketAddr = format!("{SHARED_IP}:0").parse().unwrap();
    let host = Host::bind(HostConfig::new(key, vec![InterfaceConfig::new(bind)]))
        .await
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let result = host
        .connect(ConnectConfig {
            peer: server,
            service: SERVICE,
            channels: vec![ChannelTarget {
                interface: 0,
                remote: SERVER.parse().unwrap(),
                config: ChannelConfig::default(),
            }],
            handshake_timeout: Duration::from_secs(5),
        })
        .await;
    let took = started.elapsed();
    host.shutdown().await;
    result.map(|_| took).map_err(|e| e.to_string())
}

/// The attacker's datagrams: old initiations of the client's key, initiations of keys
/// that are not allowed, and random bytes, in turn.
fn attack_datagrams(client: &Keypair, server: &PublicKey) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(0x0BAD_BEEF);
    let mut out = Vec::new();
    for i in 0..16u64 {
        // Timestamps 1.. are older than any real handshake: captures of earlier runs.
        let replay = Initiator::new(client, server, rng.next_u32(), 1 + i, &mut rng);
        out.push(replay.initiation().to_vec());
        let stranger = Keypair::generate_with(&mut rng);
        let forged = Initiator::new(&stranger, server, rng.next_u32(), 1 + i, &mut rng);
        out.push(forged.initiation().to_vec());
        let mut random = vec![0u8; INITIATION_LEN];
        rng.fill_bytes(&mut random);
        random[0] = TYPE_INITIATION;
        out.push(random);
    }
    out
}

/// Floods `SERVER` from `FLOOD_PORTS` ports of the shared address for `FLOOD_TIME`, paced
/// in 1 ms steps; returns how many datagrams it sent.
fn flood(ns: String, datagrams: Vec<Vec<u8>>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        enter(&ns);
        let target: SocketAddr = SERVER.parse().unwrap();
        let sockets: Vec<UdpSocket> = (0..FLOOD_PORTS)
            .map(|_| {
                let s = UdpSocket::bind(format!("{SHARED_IP}:0")).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect();
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < FLOOD_TIME {
            let due = (start.elapsed().as_secs_f64() * FLOOD_RATE as f64) as u64;
            while sent < due {
                let i = sent as usize;
                let socket = &sockets[i % sockets.len()];
                // Cookie replies to the attacker's ports are read and ignored.
                let mut sink = [0u8; 128];
                while socket.recv_from(&mut sink).is_ok() {}
                let _ = socket.send_to(&datagrams[(i / 7) % datagrams.len()], target);
                sent += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        sent
    })
}

#[test]
fn a_neighbour_flooding_from_the_clients_address_does_not_lock_it_out() {
    if !may_run("neighbour") {
        return;
    }
    let pair = Pair::new("nbr", "192.0.2.1/30", "192.0.2.2/30");
    let client_key = Keypair::generate();
    let server_key = Keypair::generate();
    let server_public = *server_key.public();
    let client_public = *client_key.public();

    let (ready_tx, ready_rx) = std_mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = in_netns(&pair.b, move || async move {
        let mut cfg = HostConfig::new(
            server_key,
            vec![InterfaceConfig::new(SERVER.parse().unwrap())],
        );
        cfg.allowed_peers = vec![client_public];
        let host = Host::bind(cfg).await.unwrap();
        let mut listener = host.listen(SERVICE);
        ready_tx.send(()).unwrap();
        // Accept (and drop) whatever connects, until told to stop.
        let mut stop = stop_rx;
        loop {
            tokio::select! {
                _ = &mut stop => break,
                c = listener.accept() => if c.is_none() { break },
            }
        }
        let stats: HostStats = host.stats().await.unwrap();
        host.shutdown().await;
        stats
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the receiver starts");

    // An earlier run: the receiver now knows the client's key and its last timestamp.
    let key = client_key.clone();
    let first = in_netns(&pair.a, move || connect_once(key, server_public))
        .join()
        .unwrap();
    assert!(first.is_ok(), "the first connection failed: {first:?}");

    let attacker = flood(
        pair.a.clone(),
        attack_datagrams(&client_key, &server_public),
    );
    let mut took = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(500));
        let key = client_key.clone();
        let r = in_netns(&pair.a, move || connect_once(key, server_public))
            .join()
            .unwrap();
        took.push(r);
    }
    let sent = attacker.join().unwrap();
    stop_tx.send(()).ok();
    let stats = server.join().unwrap();
    let d = &stats.dropped;
    eprintln!("flood {sent} datagrams; connects under flood {took:?}; receiver drops {d:?}");

    assert!(sent >= FLOOD_RATE * 2, "the flood was too small: {sent}");
    for r in &took {
        let t = r
            .as_ref()
            .unwrap_or_else(|e| panic!("no connection under the flood: {e}"));
        assert!(
            *t < CONNECT_TARGET,
            "connecting took {t:?} under the flood (target {CONNECT_TARGET:?}): {took:?}"
        );
    }
    // Each kind was refused where it should be: random bytes at mac1; replays and
    // disallowed keys by the responder's memory once decrypted, and before that by cookies
    // and the limits of the attacker's own flows.
    assert!(d.get(DropReason::BadMac) * 4 >= sent, "{d:?}");
    assert!(d.get(DropReason::StaleInitiation) >= 1, "{d:?}");
    assert!(d.get(DropReason::NotAllowed) >= 1, "{d:?}");
    let counted: u64 = [
        DropReason::BadMac,
        DropReason::StaleInitiation,
        DropReason::NotAllowed,
        DropReason::NeedCookie,
        DropReason::RateLimited,
        DropReason::QueueFull,
    ]
    .iter()
    .map(|r| d.get(*r))
    .sum();
    assert!(
        counted * 100 >= sent * 95,
        "only {counted} of {sent} flood datagrams counted: {d:?}"
    );
}
