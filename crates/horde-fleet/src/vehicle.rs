//! One simulated vehicle: a sans-IO host with its own key, one persistent connection to
//! the server over three channels, each sending from a socket of its own; and what the
//! load test counts of it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use horde_crypto::{Keypair, PublicKey, RekeyPolicy};
use horde_host::{ChannelTarget, ConnectConfig, Host, HostSettings, Reconnect, ResponderSettings};
use horde_proto::{ChannelConfig, EndpointConfig, SessionConfig};

use crate::sockets::{channel_ip, Udp};

/// Channels (and sockets) per vehicle.
pub const CHANNELS: usize = 3;
/// The service the server listens on (`horde recv`'s default).
pub const SERVICE: u32 = 1;
/// The stream every vehicle sends on.
pub const STREAM: u32 = 1;

pub struct Vehicle {
    pub host: Host,
    /// The persistent connection's key in `host`.
    pub conn: u64,
    /// One socket per channel, or one for all three (`VehiclePlan::one_socket`).
    pub socks: Vec<Udp>,
    /// The deadline this vehicle has in the driver's heap, if any.
    pub deadline: Option<Duration>,
    /// When a telemetry ADU is due (telemetry mode).
    pub next_telemetry: Duration,
    /// When the vehicle starts keeping its queue full (bulk mode).
    pub bulk_from: Duration,
    /// The first time the connection came up.
    pub connected_at: Option<Duration>,
    /// Whether the stream has been opened.
    pub stream_open: bool,
    /// ADUs offered and acknowledged so far.
    pub offered: u64,
    pub acked: u64,
    /// When the first ADU was acknowledged.
    pub first_acked_at: Option<Duration>,
    /// The connection is gone for good (handshake timed out, gave up reconnecting).
    pub failed: Option<String>,
    /// Reconnections seen when the server was killed; `reconnected_at` is when the
    /// count first rose above it, and `acked_at_reconnect` the acks then.
    pub reconnects_base: u64,
    pub reconnected_at: Option<Duration>,
    /// Whether the end of the vehicle's session is being watched for (the server was
    /// killed), and when it ended.
    pub watch_loss: bool,
    pub lost_at: Option<Duration>,
    pub acked_at_reconnect: u64,
    /// Whether the vehicle is in the driver's list of vehicles to serve.
    pub dirty: bool,
}

/// What every vehicle is made of.
pub struct VehiclePlan {
    pub server_key: PublicKey,
    pub server_addr: SocketAddr,
    pub session: SessionConfig,
    pub seed: u64,
    pub unix_micros_at_start: u64,
    /// All three channels send from one socket (one source address per vehicle).
    pub one_socket: bool,
}

impl Vehicle {
    /// Vehicle `index` with key `keypair`: its sockets bound and its connection opened
    /// (the first initiation leaves at the vehicle's first timeout).
    pub fn new(index: u32, keypair: Keypair, plan: &VehiclePlan, now: Duration) -> Result<Self> {
        let sockets = if plan.one_socket { 1 } else { CHANNELS as u32 };
        let socks = (0..sockets)
            .map(|c| Udp::bind(channel_ip(index, c)))
            .collect::<std::io::Result<Vec<_>>>()
            .with_context(|| format!("binding vehicle {index}'s sockets"))?;
        let seed = plan.seed ^ (u64::from(index) << 20);
        let mut host = Host::new(HostSettings {
            keypair,
            rekey: RekeyPolicy::default(),
            endpoint: EndpointConfig {
                session: plan.session.clone(),
                seed,
                local_aliases: socks.iter().map(|s| s.local).collect(),
                ..EndpointConfig::default()
            },
            accepted_channel: Arc::new(|_| ChannelConfig::default()),
            interfaces: socks.len(),
            seed: seed.wrapping_add(1),
            unix_micros_at_start: plan.unix_micros_at_start,
            responder: ResponderSettings::default(),
        });
        let config = ConnectConfig {
            peer: plan.server_key,
            service: SERVICE,
            channels: (0..CHANNELS)
                .map(|i| ChannelTarget {
                    interface: i.min(socks.len() - 1),
                    remote: plan.server_addr,
                    config: ChannelConfig::default(),
                })
                .collect(),
            handshake_timeout: Duration::from_secs(3600),
        };
        let reconnect = Reconnect {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            give_up_after: Duration::from_secs(3600),
        };
        let conn = host
            .connect(now, config, Some(reconnect), |_| false)
            .with_context(|| format!("opening vehicle {index}'s connection"))?;
        Ok(Vehicle {
            host,
            conn,
            socks,
            deadline: None,
            next_telemetry: now,
            bulk_from: now,
            connected_at: None,
            stream_open: false,
            offered: 0,
            acked: 0,
            first_acked_at: None,
            failed: None,
            reconnects_base: 0,
            reconnected_at: None,
            watch_loss: false,
            lost_at: None,
            acked_at_reconnect: 0,
            dirty: false,
        })
    }

    /// Where the vehicle's connection stands, for a report on a vehicle that is stuck.
    pub fn describe(&self) -> String {
        let c = self.host.counters();
        let Some(s) = self.host.session(self.conn) else {
            return format!(
                "no session (connected at {:?}, failed: {:?}, reconnects {})",
                self.connected_at, self.failed, c.reconnects
            );
        };
        let st = s.stats();
        let alive = s.channels().iter().filter(|c| c.is_alive()).count();
        format!(
            "connected at {:?}, ADUs offered {} sent {} acked {} lost {}, channels alive {}/{}, \
             ended: {:?}, reconnects {}, datagrams dropped {:?}",
            self.connected_at,
            self.offered,
            st.adus_sent,
            st.adus_acked,
            st.adus_lost,
            alive,
            s.channels().len(),
            s.close_reason(),
            c.reconnects,
            c.dropped,
        )
    }

    /// Whether the stream may take another ADU now.
    pub fn writable(&self) -> bool {
        self.stream_open
            && self
                .host
                .session(self.conn)
                .is_some_and(|s| s.writable(STREAM).unwrap_or(false))
    }
}
