//! `horde tunnel client`: the vehicle's end. One persistent connection to the server
//! over every channel; packets from the TUN device go out as ADUs on the tunnel stream,
//! ADUs from the server go into the TUN device.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use horde_net::{Host, HostConfig, Reconnect};
use horde_policy::Fields;
use horde_proto::Event;

use super::config::{ClientChannel, ClientConfig};
use super::counters::Counters;
use super::device::Tun;
use super::{forward, Report, RunArgs, Until, STREAM};

/// A vehicle keeps trying to reach its server: a year is "forever" without the
/// overflow of an unbounded deadline.
const GIVE_UP_AFTER: Duration = Duration::from_secs(365 * 24 * 3600);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub fn run(args: &RunArgs) -> Result<Report> {
    let cfg: ClientConfig = super::config::load(&args.config)?;
    let base = crate::peer::base_dir(&args.config);
    let keypair = crate::peer::read_key(&cfg.key_file, &base)?;
    let our_key = *keypair.public();
    let peer = crate::peer::public_key(&cfg.peer_key, "peer_key")?;
    let scheduler = cfg
        .scheduler
        .as_deref()
        .map(crate::hose::scheduler)
        .transpose()?;
    let mtu = cfg.tunnel_mtu();
    let until = Until::new(args)?;
    crate::peer::runtime()?.block_on(async move {
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
            .map_err(|e| crate::hint::handshake(e, &our_key, &cfg.peer_key))?;
        conn.open_stream(STREAM, cfg.stream.clone()).await?;
        let (registry, status) = super::status_writer(args, "tunnel client", &host);
        // The persistent connection's handle outlives its sessions: one peer throughout.
        registry.track(peer.to_string(), (*conn).clone());
        let tun = Arc::new(Tun::open(
            &cfg.tun.name,
            mtu,
            &cfg.tun.addresses(),
            &cfg.tun.routes(),
        )?);
        super::announce("client", tun.name(), mtu, &host, args.json);
        let counters = Arc::new(Counters::default());
        let (handle, mut events) = conn.split();

        let (t, c) = (tun.clone(), counters.clone());
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
                if forward::outbound(&mut buf[..n], mtu, &c).is_none() {
                    continue;
                }
                c.entered_tunnel(n);
                let payload = Bytes::copy_from_slice(&buf[..n]);
                if handle
                    .send_adu_nowait(STREAM, payload, fields.clone())
                    .is_err()
                {
                    return;
                }
            }
        });
        let (t, c) = (tun.clone(), counters.clone());
        let writer = tokio::spawn(async move {
            while let Some(e) = events.recv().await {
                match e {
                    Event::Received {
                        stream: STREAM,
                        payload,
                        ..
                    } => forward::inbound(&t, &payload, mtu, None, &c),
                    Event::Received { .. } => Counters::count(&c.peer_foreign_stream),
                    Event::Reconnecting { reason, .. } => {
                        eprintln!("session ended ({}); reconnecting", reason.as_str())
                    }
                    Event::Connected => eprintln!("connected"),
                    Event::Closed { reason } => {
                        eprintln!("session closed: {}", reason.as_str());
                        return;
                    }
                    _ => {}
                }
            }
        });
        let end = until.wait(|| writer.is_finished()).await;
        reader.abort();
        writer.abort();
        if let Some(task) = status {
            task.abort();
        }
        let host_stats = host.stats().await?;
        host.shutdown().await;
        Ok(Report::new("client", end, &counters, &host_stats, mtu))
    })
}
