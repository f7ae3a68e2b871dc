//! The server: the wired end, serving many clients. Each client is
//! authenticated by its key (only the keys in the file may connect) and owns the tunnel
//! prefixes of its entry: packets from the TUN device go to the client whose prefix
//! holds the destination (longest match), and a client's packets are written to the
//! TUN device only if their source is one of its prefixes. A reload takes new clients
//! and drops removed ones without touching the others' sessions (`roster`).

use std::sync::{Arc, RwLock};

use crate::Prefix;
use anyhow::Result;
use bytes::Bytes;
use horde_crypto::PublicKey;
use horde_net::{Host, HostConfig, InterfaceConfig};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, Event};

use crate::config::{ingress_qdisc, ServerConfig};
use crate::counters::Counters;
use crate::device::Tun;
use crate::ingress::tunnel_stream;
use crate::roster::Roster;
use crate::{forward, Next, Outcome, Reload, Run, Up, STREAM};

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
        mut until,
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
        cfg.tun.offload,
    )?);
    if let Some(why) = tun.offloads_refused() {
        observer.notice(&format!(
            "TUN offloads refused by the kernel ({why}); running without"
        ));
    }
    observer.up(&Up {
        role: "server",
        device: tun.name(),
        mtu,
        offloads: tun.offloads(),
        local_addrs: host.local_addrs(),
    });
    observer.started(&host);
    let counters = Arc::new(Counters::default());
    let qdisc = ingress_qdisc(cfg.qdisc.as_deref()).map_err(anyhow::Error::msg)?;
    let roster = Arc::new(RwLock::new(Roster::new(
        clients,
        qdisc,
        cfg.stream.max_queue_bytes as u64,
    )?));

    let (t, c, r) = (tun.clone(), counters.clone(), roster.clone());
    let reader = tokio::spawn(async move {
        let fields = Fields::default();
        let offloads = t.offloads();
        let mut buf = vec![0u8; forward::READ_BUFFER];
        let mut scratch = Vec::new();
        loop {
            let n = match t.recv(&mut buf).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "TUN read failed");
                    continue;
                }
            };
            forward::from_tun(&mut buf[..n], offloads, &mut scratch, &c, |packet| {
                let Some(header) = forward::outbound(packet, mtu, &c) else {
                    return;
                };
                let Some((handle, ingress)) = r.read().expect("roster lock").route(header.dst)
                else {
                    Counters::count(&c.tun_no_route);
                    return;
                };
                c.entered_tunnel(packet.len());
                let payload = Bytes::copy_from_slice(packet);
                match ingress {
                    Some(ingress) => ingress.push(&header, payload, &c),
                    None => {
                        let _ = handle.send_adu_nowait(STREAM, payload, fields.clone());
                    }
                }
            });
        }
    });

    let mut listener = host.listen(cfg.service);
    let stream_cfg = tunnel_stream(&cfg.stream, qdisc, mtu);
    let (t, c, r, o) = (
        tun.clone(),
        counters.clone(),
        roster.clone(),
        observer.clone(),
    );
    let acceptor = tokio::spawn(async move {
        while let Some(conn) = listener.accept().await {
            let Some(i) = conn
                .peer()
                .and_then(|k| r.read().expect("roster lock").find(k))
            else {
                let _ = conn.close();
                continue;
            };
            if let Err(e) = conn.open_stream(STREAM, stream_cfg.clone()).await {
                tracing::warn!(error = %e, "cannot open the tunnel stream");
                continue;
            }
            let (handle, mut events) = conn.split();
            let (name, generation) = {
                let mut roster = r.write().expect("roster lock");
                let generation = roster.attach(i, handle.clone(), &c);
                (roster.clients[i].client.name.clone(), generation)
            };
            o.track(
                Some(&name),
                &r.read().expect("roster lock").clients[i].client.key,
                &handle,
            );
            o.notice(&format!("client {name} connected"));
            let (t, c, r, o) = (t.clone(), c.clone(), r.clone(), o.clone());
            tokio::spawn(async move {
                let mut out = forward::TunWriter::new(t);
                'events: while let Some(first) = events.recv().await {
                    // What is already there joins the batch, for segments to be coalesced.
                    let rest = std::iter::from_fn(|| events.try_recv().ok());
                    for e in std::iter::once(first)
                        .chain(rest)
                        .take(forward::WRITE_BATCH)
                    {
                        match e {
                            Event::Received {
                                stream: STREAM,
                                payload,
                                ..
                            } => {
                                let roster = r.read().expect("roster lock");
                                let prefixes = &roster.clients[i].client.prefixes;
                                forward::inbound(&mut out, payload, mtu, Some(prefixes), &c);
                            }
                            Event::Received { .. } => Counters::count(&c.peer_foreign_stream),
                            Event::Closed { reason } => {
                                o.notice(&format!("client {name}: {}", reason.as_str()));
                                break 'events;
                            }
                            _ => {}
                        }
                    }
                    out.flush(&c);
                }
                out.flush(&c);
                r.write().expect("roster lock").detach(i, generation);
            });
        }
    });
    let end = loop {
        match until.next(|| acceptor.is_finished(), &*observer).await {
            Next::End(why) => break why,
            Next::Reload(Reload::Clients(wanted)) => {
                let line = roster.write().expect("roster lock").reload(wanted, &host)?;
                observer.notice(&line);
            }
            Next::Reload(Reload::Channels(_)) => {
                observer.notice("reload refused: a server's file has no [[channels]]");
            }
        }
    };
    reader.abort();
    acceptor.abort();
    roster.write().expect("roster lock").stop_pumps();
    observer.ending();
    let host_stats = host.stats().await?;
    host.shutdown().await;
    let clients = roster.read().expect("roster lock").connected();
    Ok(Outcome {
        end,
        mtu,
        counters: counters.snapshot(),
        host: host_stats,
        clients,
    })
}
