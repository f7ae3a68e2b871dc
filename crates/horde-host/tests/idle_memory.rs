//! What an idle connection costs a server: the heap its host holds per accepted
//! connection once each client has connected and sent one ADU, counted by a global
//! allocator that tracks live bytes. A fleet server holds ten thousand of them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use horde_crypto::{Keypair, RekeyPolicy};
use horde_host::{
    ChannelTarget, ConnOp, ConnectConfig, Host, HostEvent, HostSettings, ResponderSettings,
};
use horde_policy::Fields;
use horde_proto::{ChannelConfig, EndpointConfig, StreamConfig};
use rand::rngs::StdRng;
use rand::SeedableRng;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const SERVICE: u32 = 7;
const CLIENTS: usize = 40;
/// Heap a server may hold per idle connection (its session, secure session and the
/// host's bookkeeping), with three channels. (13.9 kB measured: a replay window holds
/// a word while a channel's counters are low, and loss-burst statistics are made at
/// the first loss.)
const BUDGET: isize = 14_500;

fn keypair(seed: u64) -> Keypair {
    Keypair::generate_with(&mut StdRng::seed_from_u64(seed))
}

fn host(key: &Keypair, seed: u64, allowed: &[Keypair]) -> Host {
    Host::new(HostSettings {
        keypair: key.clone(),
        rekey: RekeyPolicy::default(),
        endpoint: EndpointConfig {
            seed,
            ..EndpointConfig::default()
        },
        accepted_channel: Arc::new(|_| ChannelConfig::default()),
        interfaces: 3,
        seed,
        unix_micros_at_start: 1_000_000,
        responder: ResponderSettings {
            allowed: allowed.iter().map(|k| *k.public()).collect(),
            ..ResponderSettings::default()
        },
    })
}

fn addr(node: usize, iface: usize) -> SocketAddr {
    format!("10.{}.{}.{}:1000", iface + 1, node / 200, node % 200 + 1)
        .parse()
        .unwrap()
}

/// Node 0 is the server; every datagram reaches its destination at the next step.
struct Net {
    now: Duration,
    hosts: Vec<Host>,
    rng: StdRng,
    wire: Vec<(usize, usize, SocketAddr, Vec<u8>)>,
    accepted: usize,
}

impl Net {
    fn step(&mut self) {
        let now = self.now;
        for (to, iface, from, data) in std::mem::take(&mut self.wire) {
            let h = &mut self.hosts[to];
            h.handle_datagram(now, iface, from, &data);
            while let Some(job) = h.poll_handshake_job() {
                let outcome = job.run(&mut self.rng);
                h.handle_handshake_done(now, outcome);
            }
        }
        for node in 0..self.hosts.len() {
            let h = &mut self.hosts[node];
            if h.poll_timeout(now).is_some_and(|t| t <= now) {
                h.handle_timeout(now);
            }
            let mut out = Vec::new();
            while let Some(t) = h.poll_handshake_transmit() {
                out.push((t.iface, t.dst, t.datagram));
            }
            let mut buf = Vec::new();
            while let Some(t) = h.poll_transmit(now, &mut buf) {
                let mut sealed = Vec::new();
                let crypto = h.crypto_mut(t.conn).unwrap();
                crypto
                    .seal_append(u8::from(t.channel), &buf, &mut sealed)
                    .unwrap();
                out.push((t.iface, t.dst, sealed));
            }
            while let Some(e) = h.poll_event() {
                if node == 0 && matches!(e, HostEvent::Accepted { .. }) {
                    self.accepted += 1;
                }
            }
            for (iface, dst, d) in out {
                let to = if node == 0 {
                    (1..self.hosts.len()).find(|&n| (0..3).any(|i| addr(n, i) == dst))
                } else {
                    Some(0)
                };
                if let Some(to) = to {
                    let to_iface = if to == 0 {
                        (0..3).find(|&i| addr(0, i) == dst).unwrap()
                    } else {
                        (0..3).find(|&i| addr(to, i) == dst).unwrap()
                    };
                    self.wire.push((to, to_iface, addr(node, iface), d));
                }
            }
        }
        self.now += Duration::from_millis(1);
    }
}

/// The heap the server's host holds once `clients` clients have connected over three
/// channels each and sent one ADU, and everything has gone quiet: what dropping it frees.
fn server_heap(clients: usize) -> isize {
    let server_key = keypair(1);
    let keys: Vec<Keypair> = (0..clients).map(|i| keypair(100 + i as u64)).collect();
    let mut server = host(&server_key, 1, &keys);
    server.listen(SERVICE);
    let mut hosts = vec![server];
    hosts.extend(
        keys.iter()
            .enumerate()
            .map(|(i, k)| host(k, 10 + i as u64, &[])),
    );
    let mut net = Net {
        now: Duration::from_millis(1),
        hosts,
        rng: StdRng::seed_from_u64(5),
        wire: Vec::new(),
        accepted: 0,
    };
    for n in 1..=clients {
        let now = net.now;
        let target = ConnectConfig {
            peer: *server_key.public(),
            service: SERVICE,
            channels: (0..3)
                .map(|i| ChannelTarget {
                    interface: i,
                    remote: addr(0, i),
                    config: ChannelConfig::default(),
                })
                .collect(),
            handshake_timeout: Duration::from_secs(5),
        };
        let h = &mut net.hosts[n];
        let key = h.connect(now, target, None, |_| false).unwrap();
        for _ in 0..20 {
            net.step();
        }
        let h = &mut net.hosts[n];
        let now = net.now;
        let open = ConnOp::OpenStream(1, StreamConfig::default(), Box::new(|_| {}));
        h.handle_command(now, key, open);
        let adu = ConnOp::Send {
            stream: 1,
            payload: Bytes::from_static(&[7; 100]),
            fields: Fields::new(),
            reply: None,
        };
        h.handle_command(now, key, adu);
    }
    // Past every ack and retransmission, short of the first keepalive.
    for _ in 0..2000 {
        net.step();
    }
    assert_eq!(net.accepted, clients, "every client connected");
    assert!(net.wire.is_empty() || net.wire.len() < clients);
    let with = LIVE.load(Ordering::Relaxed);
    drop(net.hosts.remove(0));
    with - LIVE.load(Ordering::Relaxed)
}

#[test]
fn an_idle_accepted_connection_costs_the_server_little_heap() {
    let one = server_heap(1);
    let many = server_heap(CLIENTS + 1);
    let per_conn = (many - one) / CLIENTS as isize;
    eprintln!("server heap: {one} B with one connection, {per_conn} B per more");
    assert!(
        per_conn < BUDGET,
        "{per_conn} B per idle connection, budget {BUDGET} B"
    );
}
