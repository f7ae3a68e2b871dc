//! The client: the vehicle's end. One persistent connection to the server over every
//! channel; packets from the TUN device go out as ADUs on the tunnel stream, ADUs from
//! the server go into the TUN device.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use horde_crypto::PublicKey;
use horde_net::{Host, HostConfig, Reconnect};
use horde_policy::Fields;
use horde_proto::Event;

use crate::config::{ingress_qdisc, ClientChannel, ClientConfig};
use crate::counters::Counters;
use crate::device::Tun;
use crate::ingress::{tunnel_stream, Ingress};
use crate::live_channels::LiveChannels;
use crate::{forward, Next, Outcome, Reload, Run, Up, STREAM};

/// A vehicle keeps trying to reach its server: a year is "forever" without the
/// overflow of an unbounded deadline.
const GIVE_UP_AFTER: Duration = Duration::from_secs(365 * 24 * 3600);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Run the client of `cfg` with the server `peer` until `run.until`.
pub async fn run(cfg: ClientConfig, peer: PublicKey, run: Run) -> Result<Outcome> {
    let Run {
        keypair,
        scheduler,
        mut until,
        observer,
    } = run;
    let mtu = cfg.tunnel_mtu();
    let mut host_cfg = HostConfig::new(keypair, ClientChannel::interfaces(&cfg.channels));
    host_cfg.session = cfg.session.clone();
    host_cfg.rekey = cfg.rekey.policy();
    host_cfg.scheduler = scheduler;
    let host = Host::bind(host_cfg).await?;
    let mut target =
        ClientChannel::connect_config(&cfg.channels, peer, cfg.service, HANDSHAKE_TIMEOUT);
    for c in &mut target.channels {
        c.config.acks = cfg.acks;
    }
    let reconnect = Reconnect {
        give_up_after: GIVE_UP_AFTER,
        ..Reconnect::default()
    };
    let conn = host
        .connect_persistent(target, reconnect)
        .await
        .map_err(|e| observer.connect_failed(e))?;
    let qdisc = ingress_qdisc(cfg.qdisc.as_deref()).map_err(anyhow::Error::msg)?;
    conn.open_stream(STREAM, tunnel_stream(&cfg.stream, qdisc, mtu))
        .await?;
    observer.started(&host);
    // The persistent connection's handle outlives its sessions: one peer throughout.
    observer.track(None, &peer, &conn);
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
        role: "client",
        device: tun.name(),
        mtu,
        offloads: tun.offloads(),
        local_addrs: host.local_addrs(),
    });
    let counters = Arc::new(Counters::default());
    let mut channels = LiveChannels::new(&cfg.channels, cfg.acks);
    let (handle, mut events) = conn.split();
    let reload_handle = handle.clone();
    let ingress = match qdisc {
        Some(kind) => Some(Ingress::new(kind, cfg.stream.max_queue_bytes as u64)?),
        None => None,
    };
    let pump = ingress
        .clone()
        .map(|i| tokio::spawn(i.pump(handle.clone(), counters.clone())));

    let (t, c) = (tun.clone(), counters.clone());
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
            let mut closed = false;
            forward::from_tun(&mut buf[..n], offloads, &mut scratch, &c, |packet| {
                let Some(header) = forward::outbound(packet, mtu, &c) else {
                    return;
                };
                c.entered_tunnel(packet.len());
                let payload = Bytes::copy_from_slice(packet);
                if let Some(ingress) = &ingress {
                    ingress.push(&header, payload, &c);
                    return;
                }
                closed |= handle
                    .send_adu_nowait(STREAM, payload, fields.clone())
                    .is_err();
            });
            if closed {
                return;
            }
        }
    });
    let (t, c, o) = (tun.clone(), counters.clone(), observer.clone());
    let writer = tokio::spawn(async move {
        let mut out = forward::TunWriter::new(t);
        while let Some(first) = events.recv().await {
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
                    } => forward::inbound(&mut out, payload, mtu, None, &c),
                    Event::Received { .. } => Counters::count(&c.peer_foreign_stream),
                    Event::Reconnecting { reason, .. } => o.notice(&format!(
                        "session ended ({}); reconnecting",
                        reason.as_str()
                    )),
                    Event::Connected => o.notice("connected"),
                    Event::Closed { reason } => {
                        out.flush(&c);
                        o.notice(&format!("session closed: {}", reason.as_str()));
                        return;
                    }
                    _ => {}
                }
            }
            out.flush(&c);
        }
    });
    let end = loop {
        match until.next(|| writer.is_finished(), &*observer).await {
            Next::End(why) => break why,
            Next::Reload(Reload::Channels(wanted)) => {
                let line = channels.apply(&host, &reload_handle, wanted).await;
                observer.notice(&line);
            }
            Next::Reload(Reload::Clients(_)) => {
                observer.notice("reload refused: a client's file has no [[clients]]");
            }
        }
    };
    reader.abort();
    writer.abort();
    if let Some(pump) = pump {
        pump.abort();
    }
    observer.ending();
    let host_stats = host.stats().await?;
    host.shutdown().await;
    Ok(Outcome {
        end,
        mtu,
        counters: counters.snapshot(),
        host: host_stats,
        clients: Vec::new(),
    })
}
