//! A host of a virtual-time run: the `horde-host` that ships, with its secure layer,
//! its routing by crypto index and its session lifecycle, on a key drawn from the run's
//! seed. The scenario engine and the tunnel carrier drive their sessions through it, as
//! `horde-net` does in real time.
//!
//! Two things are kept out of the run's figures, so that a scenario measures the
//! protocol it describes (`docs/architecture.md`, "The virtual-time world"):
//! - the Noise handshake of each connection is exchanged between the two hosts directly
//!   at its start ([`VirtualHost::connect`]): it takes no virtual time and no link capacity,
//!   and the first datagram on the links is the session's hello;
//! - the links are charged each datagram's protocol bytes: the secure layer's
//!   [`TRANSPORT_OVERHEAD`] rides along, sealed and opened for real, uncounted.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::{Keypair, PublicKey, RekeyPolicy, TRANSPORT_OVERHEAD};
use horde_host::{
    ChannelTarget, ConnOp, ConnectConfig, Host, HostError, HostEvent, HostSettings, HostTransmit,
    ResponderSettings, SessionIdentity,
};
use horde_policy::{Fields, Objective};
use horde_proto::{AduHandle, EndpointConfig, ServerConfig, Session, StreamConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

/// Wall-clock time a simulated host starts at: initiations carry it as their timestamp.
const UNIX_MICROS_AT_START: u64 = 1_700_000_000_000_000;
/// The direct handshake is one initiation and one response; anything longer is a fault.
const HANDSHAKE_DATAGRAMS: usize = 4;

#[derive(Debug, Error)]
pub enum VirtualHostError {
    #[error("the handshake of service {service} did not complete: {reason}")]
    Handshake { service: u32, reason: String },
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("the connection is gone")]
    Gone,
}

/// One simulated host: see the module documentation.
pub struct VirtualHost {
    host: Host,
    public: PublicKey,
    /// Draws for the responder's handshake jobs, run inline.
    rng: ChaCha8Rng,
    /// The protocol datagram the host writes, then its sealed form.
    plain: Vec<u8>,
    sealed: Vec<u8>,
}

/// A datagram a [`VirtualHost`] sends: what the host says of it, its protocol size (what a
/// link is charged) and its sealed bytes (what the link carries).
pub struct VirtualTransmit<'a> {
    pub transmit: HostTransmit,
    pub plain_len: usize,
    pub sealed: &'a [u8],
}

impl VirtualHost {
    /// A host with `interfaces` interfaces whose sessions start from `endpoint`; `seed`
    /// gives its static key and its own draws.
    pub fn new(seed: u64, endpoint: EndpointConfig, interfaces: usize) -> Self {
        let keypair = Keypair::generate_with(&mut ChaCha8Rng::seed_from_u64(seed));
        let public = *keypair.public();
        let host = Host::new(HostSettings {
            keypair,
            // Keys rotate in band, without a datagram of their own: the default is kept.
            rekey: RekeyPolicy::default(),
            endpoint,
            accepted_channel: Arc::new(|_| horde_proto::ChannelConfig::default()),
            interfaces,
            seed: seed ^ 0x5EED,
            unix_micros_at_start: UNIX_MICROS_AT_START,
            responder: ResponderSettings::default(),
        });
        Self {
            host,
            public,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0xD1FF),
            plain: Vec::with_capacity(2048),
            sealed: Vec::with_capacity(2048 + TRANSPORT_OVERHEAD),
        }
    }

    /// This host's static public key.
    pub fn public(&self) -> PublicKey {
        self.public
    }

    /// Serve `service` to the host with key `client`, its sessions set up as `server` says.
    pub fn listen(&mut self, service: u32, server: ServerConfig, client: PublicKey) {
        self.host.allow_peer(client, true);
        self.host.listen_with(service, server);
    }

    /// Open a connection from `client` to `server`'s `service` over `channels`, its first
    /// session being `identity`, with the handshake exchanged directly between the two
    /// hosts at `now`. The session's hello is then `client`'s first datagram to send.
    pub fn connect(
        client: &mut VirtualHost,
        server: &mut VirtualHost,
        now: Duration,
        service: u32,
        channels: Vec<ChannelTarget>,
        identity: SessionIdentity,
    ) -> Result<u64, VirtualHostError> {
        let config = ConnectConfig {
            peer: server.public,
            service,
            channels,
            handshake_timeout: Duration::from_secs(60),
        };
        let key = client.host.connect(now, config, None, |_| false)?;
        client.host.pin_session(key, identity);
        client.host.handle_timeout(now);
        let mut exchanged = 0;
        while exchanged < HANDSHAKE_DATAGRAMS {
            let Some(t) = client.host.poll_handshake_transmit() else {
                break;
            };
            exchanged += 1;
            server
                .host
                .handle_datagram(now, t.iface, handshake_source(t.iface), &t.datagram);
            while let Some(job) = server.host.poll_handshake_job() {
                let outcome = job.run(&mut server.rng);
                server.host.handle_handshake_done(now, outcome);
            }
            while let Some(r) = server.host.poll_handshake_transmit() {
                exchanged += 1;
                client
                    .host
                    .handle_datagram(now, r.iface, r.dst, &r.datagram);
            }
        }
        match client.host.poll_host_event() {
            Some(HostEvent::Connected { key: k, .. }) if k == key => Ok(key),
            other => Err(VirtualHostError::Handshake {
                service,
                reason: match other {
                    Some(e) => format!("{e:?}"),
                    None => format!(
                        "no response after {exchanged} datagrams (drops: {:?})",
                        server.host.counters().dropped
                    ),
                },
            }),
        }
    }

    /// A datagram received on interface `iface` from `from`.
    pub fn receive(&mut self, now: Duration, iface: usize, from: SocketAddr, datagram: &[u8]) {
        self.host.handle_datagram(now, iface, from, datagram);
    }

    /// The next datagram to send, sealed; `None` once the host has nothing more now.
    pub fn poll_sealed(&mut self, now: Duration) -> Option<VirtualTransmit<'_>> {
        let t = self
            .host
            .poll_sealed(now, &mut self.plain, &mut self.sealed)?;
        Some(VirtualTransmit {
            transmit: t,
            plain_len: self.plain.len(),
            sealed: &self.sealed,
        })
    }

    /// The host's own events (a connection accepted, removed), not its sessions'.
    pub fn poll_host_event(&mut self) -> Option<HostEvent> {
        self.host.poll_host_event()
    }

    /// Every event, the sessions' included, in order.
    pub fn poll_event(&mut self) -> Option<HostEvent> {
        self.host.poll_event()
    }

    pub fn poll_timeout(&self, now: Duration) -> Option<Duration> {
        self.host.poll_timeout(now)
    }

    /// Have the host visit every connection at its next walk, touched or not.
    pub fn touch_all(&mut self) {
        self.host.touch_all();
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        self.host.handle_timeout(now);
    }

    /// Connection `key`'s session, for reading.
    pub fn session(&self, key: u64) -> Option<&Session> {
        self.host.session(key)
    }

    /// Open stream `id` for sending on connection `key`.
    pub fn open_stream(
        &mut self,
        now: Duration,
        key: u64,
        id: u32,
        config: StreamConfig,
    ) -> Result<(), VirtualHostError> {
        let (cell, reply) = answer_cell();
        self.host
            .handle_command(now, key, ConnOp::OpenStream(id, config, reply));
        take(&cell)
    }

    /// Give connection `key`'s scheduler an objective.
    pub fn inject(&mut self, now: Duration, key: u64, objective: Arc<dyn Objective>) {
        self.host
            .handle_command(now, key, ConnOp::Inject(objective, Box::new(|_| {})));
    }

    /// Queue an ADU on stream `stream` of connection `key`.
    pub fn send_adu(
        &mut self,
        now: Duration,
        key: u64,
        stream: u32,
        payload: Bytes,
        fields: Fields,
    ) -> Result<AduHandle, VirtualHostError> {
        let (cell, reply) = answer_cell();
        let op = ConnOp::Send {
            stream,
            payload,
            fields,
            reply: Some(reply),
        };
        self.host.handle_command(now, key, op);
        take(&cell)
    }
}

/// Where a client's handshake datagrams on `iface` appear to come from.
fn handshake_source(iface: usize) -> SocketAddr {
    SocketAddr::from(([127, 99, (iface >> 8) as u8, iface as u8], 5000))
}

type Cell<T> = Arc<Mutex<Option<Result<T, HostError>>>>;

fn answer_cell<T: Send + 'static>() -> (Cell<T>, horde_host::Answer<T>) {
    let cell: Cell<T> = Arc::new(Mutex::new(None));
    let c = cell.clone();
    (
        cell,
        Box::new(move |r| *c.lock().expect("not poisoned") = Some(r)),
    )
}

/// The answer a command gave at once; a connection that is gone gives none.
fn take<T>(cell: &Cell<T>) -> Result<T, VirtualHostError> {
    let answer = cell.lock().expect("not poisoned").take();
    Ok(answer.ok_or(VirtualHostError::Gone)??)
}
