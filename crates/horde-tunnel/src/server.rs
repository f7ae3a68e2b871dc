//! The server: the wired end, serving many clients. Each client is
//! authenticated by its key (only the keys in the file may connect) and owns the tunnel
//! prefixes of its entry: packets from the TUN device go to the client whose prefix
//! holds the destination (longest match), and a client's packets are written to the
//! TUN device only if their source is one of its prefixes.

use std::sync::{Arc, Mutex};

use crate::{Prefix, PrefixTable};
use anyhow::Result;
use bytes::Bytes;
use horde_crypto::PublicKey;
use horde_net::{ConnectionHandle, Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event};
use tokio::task::AbortHandle;

use crate::config::{ingress_qdisc, ServerConfig};
use crate::counters::Counters;
use crate::device::Tun;
use crate::ingress::Ingress;
use crate::{forward, Outcome, Run, Up, STREAM};

/// One client's live session, if any: a generation number (so that a session that
/// ended does not remove its successor) and the handle to send on.
type Slot = Option<(u64, ConnectionHandle)>;

/// A client the server serves: only these keys may connect.
pub struct Client {
    /// Its name in reports.
    pub name: String,
    pub key: PublicKey,
    /// The tunnel prefixes routed to it; its packets must come from them.
    pub prefixes: Vec<Prefix>,
}

/// Run the server of `cfg` for `clients` until `run.until`.
pub async fn run(cfg: ServerConfig, clients: Vec<Client>, run: Run) -> Result<Outcome> {
    let Run {
        keypair,
        scheduler,
        until,
        observer,
    } = run;
    let mtu = cfg.tunnel_mtu();
    let mut host_cfg = HostConfig::new(
        keypair,
        cfg.interfaces
            .iter()
            .map(|i| InterfaceConfig {
                bind: i.bind,
                device: i.device.clone(),
            })
            .collect(),
    );
    host_cfg.allowed_peers = clients.iter().map(|c| c.key).collect();
    host_cfg.handshakes.server_id = cfg.server_id.as_deref().map(str::parse).transpose()?;
    host_cfg.session = cfg.session.clone();
    host_cfg.rekey = cfg.rekey.policy();
    host_cfg.scheduler = scheduler;
    // The server learns its clients' addresses only when they connect; IPv4's
    // headers are what the links it is deployed on carry.
    let overhead =
        crate::channels::datagram_overhead(&std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
    host_cfg.accepted_channel = ChannelConfig {
        mtu: cfg.mtu,
        congestion: cfg.congestion.clone(),
        datagram_overhead: overhead,
        pace_acks: true,
        acks: cfg.acks,
        ..ChannelConfig::default()
    };
    host_cfg.accepted_channel_by_id = cfg
        .channel_congestion
        .iter()
        .map(|cc| ChannelConfig {
            mtu: cfg.mtu,
            congestion: cc.clone(),
            datagram_overhead: overhead,
            pace_acks: true,
            acks: cfg.acks,
            ..ChannelConfig::default()
        })
        .collect();
    let host = Host::bind(host_cfg).await?;
    let tun = Arc::new(Tun::open(
        &cfg.tun.name,
        mtu,
        &cfg.tun.addresses(),
        &cfg.tun.routes(),
    )?);
    observer.up(&Up {
        role: "server",
        device: tun.name(),
        mtu,
        local_addrs: host.local_addrs(),
    });
    observer.started(&host);
    let counters = Arc::new(Counters::default());
    let mut table = PrefixTable::default();
    for (i, c) in clients.iter().enumerate() {
        for p in &c.prefixes {
            table.insert(*p, i);
        }
    }
    let slots: Arc<Mutex<Vec<Slot>>> = Arc::new(Mutex::new(vec![None; clients.len()]));
    // Per client: its ingress queue, and the pump that feeds its current session.
    let ingresses = match ingress_qdisc(cfg.qdisc.as_deref()).map_err(anyhow::Error::msg)? {
        Some(kind) => clients
            .iter()
            .map(|_| Ingress::new(kind, cfg.stream.max_queue_bytes as u64))
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let ingresses = Arc::new(ingresses);
    let pumps: Arc<Mutex<Vec<Option<AbortHandle>>>> =
        Arc::new(Mutex::new(vec![None; clients.len()]));
    let clients = Arc::new(clients);

    let (t, c, s, q) = (
        tun.clone(),
        counters.clone(),
        slots.clone(),
        ingresses.clone(),
    );
    let reader = tokio::spawn(async move {
        let fields = Fields::default();
        let mut buf = vec![0u8; 65_536];
        loop {
            let n = match t.recv(&mut buf).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "TUN read failed");
                    continue;
                }
            };
            let Some(header) = forward::outbound(&mut buf[..n], mtu, &c) else {
                continue;
            };
            let Some(&i) = table.lookup(header.dst) else {
                Counters::count(&c.tun_no_route);
                continue;
            };
            let Some((_, handle)) = s.lock().expect("slots lock")[i].clone() else {
                Counters::count(&c.tun_no_route);
                continue;
            };
            c.entered_tunnel(n);
            let payload = Bytes::copy_from_slice(&buf[..n]);
            match q.get(i) {
                Some(ingress) => ingress.push(&header, payload, &c),
                None => {
                    let _ = handle.send_adu_nowait(STREAM, payload, fields.clone());
                }
            }
        }
    });

    let mut listener = host.listen(cfg.service);
    let stream_cfg = cfg.stream.clone();
    let (t, c, s, cl, o, q, p) = (
        tun.clone(),
        counters.clone(),
        slots.clone(),
        clients.clone(),
        observer.clone(),
        ingresses.clone(),
        pumps.clone(),
    );
    let acceptor = tokio::spawn(async move {
        let mut generation = 0u64;
        while let Some(conn) = listener.accept().await {
            let Some(i) = conn
                .peer()
                .and_then(|k| cl.iter().position(|c| &c.key == k))
            else {
                let _ = conn.close();
                continue;
            };
            if let Err(e) = conn.open_stream(STREAM, stream_cfg.clone()).await {
                tracing::warn!(error = %e, "cannot open the tunnel stream");
                continue;
            }
            generation += 1;
            let me = generation;
            let (handle, mut events) = conn.split();
            o.track(Some(&cl[i].name), &cl[i].key, &handle);
            if let Some(ingress) = q.get(i) {
                let pump = tokio::spawn(ingress.clone().pump(handle.clone(), c.clone()));
                let old = p.lock().expect("pumps lock")[i].replace(pump.abort_handle());
                if let Some(old) = old {
                    old.abort();
                }
            }
            s.lock().expect("slots lock")[i] = Some((me, handle));
            o.notice(&format!("client {} connected", cl[i].name));
            let (t, c, s, cl, o) = (t.clone(), c.clone(), s.clone(), cl.clone(), o.clone());
            tokio::spawn(async move {
                while let Some(e) = events.recv().await {
                    match e {
                        Event::Received {
                            stream: STREAM,
                            payload,
                            ..
                        } => forward::inbound(&t, &payload, mtu, Some(&cl[i].prefixes), &c),
                        Event::Received { .. } => Counters::count(&c.peer_foreign_stream),
                        Event::Closed { reason } => {
                            o.notice(&format!("client {}: {}", cl[i].name, reason.as_str()));
                            break;
                        }
                        _ => {}
                    }
                }
                let mut slots = s.lock().expect("slots lock");
                if slots[i].as_ref().is_some_and(|(g, _)| *g == me) {
                    slots[i] = None;
                }
            });
        }
    });
    let end = until.wait(|| acceptor.is_finished()).await;
    reader.abort();
    acceptor.abort();
    for pump in pumps.lock().expect("pumps lock").iter().flatten() {
        pump.abort();
    }
    observer.ending();
    let host_stats = host.stats().await?;
    host.shutdown().await;
    let clients = slots
        .lock()
        .expect("slots lock")
        .iter()
        .zip(clients.iter())
        .map(|(s, c)| (c.name.clone(), s.is_some()))
        .collect();
    Ok(Outcome {
        end,
        mtu,
        counters: counters.snapshot(),
        host: host_stats,
        clients,
    })
}
