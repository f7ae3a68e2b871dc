//! The one thread that drives every vehicle: datagrams from the epoll set to their
//! vehicle's host, due deadlines from a heap, and after either, that vehicle alone is
//! served (timers, events, ADUs offered, datagrams sealed and sent). A vehicle with
//! nothing to do costs nothing.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use bytes::{BufMut, Bytes, BytesMut};
use horde_host::{ConnOp, HostEvent};
use horde_policy::Fields;
use horde_proto::{Event, StreamConfig};

use crate::sockets::Epoll;
use crate::vehicle::{Vehicle, CHANNELS, STREAM};

/// Datagrams read from one socket per wake before others get their turn.
const READ_BATCH: usize = 32;
/// ADUs one vehicle offers per service, so that one vehicle cannot hold the thread.
const OFFER_BATCH: usize = 16;
/// The size of the ADU every vehicle sends once connected.
const FIRST_ADU_BYTES: usize = 100;
/// A deadline that is already due after a service is tried again this much later, so
/// that a timer that does not move cannot spin the thread.
const MIN_REARM: Duration = Duration::from_millis(1);

/// What the vehicles' applications do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Nothing: keepalives only.
    Idle,
    /// Keep the stream's queue full (elastic bulk).
    Bulk,
    /// One ADU per interval each.
    Telemetry(Duration),
}

/// Datagram counters of the whole fleet.
#[derive(Debug, Default, Clone, Copy)]
pub struct Traffic {
    pub sent: u64,
    pub received: u64,
    pub send_errors: u64,
}

pub struct Fleet {
    pub vehicles: Vec<Vehicle>,
    pub mode: Mode,
    pub adu_bytes: usize,
    pub traffic: Traffic,
    start: Instant,
    epoll: Epoll,
    heap: BinaryHeap<Reverse<(Duration, u32)>>,
    dirty: Vec<u32>,
    ready: Vec<u64>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    sealed: Vec<u8>,
}

impl Fleet {
    pub fn new(start: Instant, adu_bytes: usize) -> Result<Self> {
        Ok(Fleet {
            vehicles: Vec::new(),
            mode: Mode::Idle,
            adu_bytes,
            traffic: Traffic::default(),
            start,
            epoll: Epoll::new()?,
            heap: BinaryHeap::new(),
            dirty: Vec::new(),
            ready: Vec::new(),
            buf: vec![0; 65_536],
            scratch: Vec::with_capacity(2048),
            sealed: Vec::with_capacity(2048),
        })
    }

    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Add a vehicle; it is served at once (its first initiation leaves).
    pub fn add(&mut self, v: Vehicle) -> Result<()> {
        let id = self.vehicles.len() as u32;
        for (c, s) in v.socks.iter().enumerate() {
            self.epoll
                .add(s.raw(), u64::from(id) * CHANNELS as u64 + c as u64)?;
        }
        self.vehicles.push(v);
        self.mark(id);
        Ok(())
    }

    /// Every vehicle keeps its queue full from a moment of its own, spread evenly over
    /// `ramp` from now, as a fleet's transfers start: all at the same instant, their
    /// first windows would arrive as one burst far beyond any socket buffer.
    pub fn start_bulk(&mut self, ramp: Duration) {
        let now = self.now();
        let n = self.vehicles.len();
        for (i, v) in self.vehicles.iter_mut().enumerate() {
            v.bulk_from = now + spread(i, n, ramp);
        }
        self.mode = Mode::Bulk;
        self.kick_all();
    }

    /// Serve every vehicle once (after the mode changed).
    pub fn kick_all(&mut self) {
        for id in 0..self.vehicles.len() as u32 {
            self.mark(id);
        }
    }

    fn mark(&mut self, id: u32) {
        let v = &mut self.vehicles[id as usize];
        if !v.dirty {
            v.dirty = true;
            self.dirty.push(id);
        }
    }

    /// Run for `span`, or until `done` says so (checked after each turn).
    pub fn run_for(&mut self, span: Duration, mut done: impl FnMut(&Fleet) -> bool) -> Result<()> {
        let until = self.now() + span;
        loop {
            let now = self.now();
            if now >= until || done(self) {
                return Ok(());
            }
            self.turn(until - now)?;
        }
    }

    /// One wait on the sockets (at most `max_wait`, less if a deadline comes first),
    /// then every vehicle that got datagrams or whose deadline passed is served.
    fn turn(&mut self, max_wait: Duration) -> Result<()> {
        let now = self.now();
        let mut wait = max_wait.min(Duration::from_millis(100));
        if !self.dirty.is_empty() {
            wait = Duration::ZERO;
        } else if let Some(Reverse((t, _))) = self.heap.peek() {
            wait = wait.min(t.saturating_sub(now));
        }
        let ms = wait.as_micros().div_ceil(1000) as i32;
        self.ready.clear();
        self.epoll.wait(ms, &mut self.ready)?;
        let now = self.now();
        // A readable socket only marks its vehicle: the vehicle reads its sockets
        // itself when served (`serve`).
        for i in 0..self.ready.len() {
            self.mark((self.ready[i] / CHANNELS as u64) as u32);
        }
        while let Some(&Reverse((t, id))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            // Entries of deadlines since moved are stale: only the current one counts.
            if self.vehicles[id as usize].deadline == Some(t) {
                self.vehicles[id as usize].deadline = None;
                self.mark(id);
            }
        }
        let dirty = std::mem::take(&mut self.dirty);
        for &id in &dirty {
            self.vehicles[id as usize].dirty = false;
            // A turn over thousands of vehicles takes a while: each is served at its
            // own time.
            let now = self.now();
            self.serve(id, now);
        }
        let mut dirty = dirty;
        dirty.clear();
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
        Ok(())
    }

    /// Everything one vehicle has to do now.
    fn serve(&mut self, id: u32, now: Duration) {
        let mode = self.mode;
        let adu_bytes = self.adu_bytes;
        let v = &mut self.vehicles[id as usize];
        // Everything that reached the vehicle's sockets is read before its timers run:
        // a vehicle served for a deadline while its acks wait unread would take a
        // loaded generator's delay for a dead path, and drop a live session.
        receive(v, &mut self.traffic, &mut self.buf, now);
        v.host.handle_timeout(now);
        drain_events(v, now);
        offer(v, mode, adu_bytes, now);
        while let Some(t) = v.host.poll_handshake_transmit() {
            send(v, &mut self.traffic, t.iface, t.dst, &t.datagram);
        }
        while let Some(t) = v.host.poll_sealed(now, &mut self.scratch, &mut self.sealed) {
            send(v, &mut self.traffic, t.iface, t.dst, &self.sealed);
        }
        drain_events(v, now);
        // The session ended: the connection has none up while it handshakes again. (Its
        // `Reconnecting` event can reach the application only once the new session is
        // up, so it does not tell when.)
        if v.watch_loss && v.lost_at.is_none() && v.host.sessions().next().is_none() {
            v.lost_at = Some(now);
        }
        if v.reconnected_at.is_none() && v.host.counters().reconnects > v.reconnects_base {
            v.reconnected_at = Some(now);
            v.acked_at_reconnect = v.acked;
        }
        let mut next = v.host.poll_timeout(now);
        let own = match mode {
            Mode::Telemetry(_) => Some(v.next_telemetry),
            Mode::Bulk if v.bulk_from > now => Some(v.bulk_from),
            _ => None,
        };
        if let Some(own) = own {
            next = Some(next.map_or(own, |t| t.min(own)));
        }
        let next = next.map(|t| t.max(now + MIN_REARM));
        if next != v.deadline {
            v.deadline = next;
            if let Some(t) = next {
                self.heap.push(Reverse((t, id)));
            }
        }
    }
}

/// The offset of vehicle `i` of `n` in a ramp of `ramp`: evenly spread, the first at 0.
fn spread(i: usize, n: usize, ramp: Duration) -> Duration {
    ramp.mul_f64(i as f64 / n.max(1) as f64)
}

/// Up to `READ_BATCH` datagrams from each of the vehicle's sockets into its host (more
/// wait for the next turn: the socket stays readable).
fn receive(v: &mut Vehicle, traffic: &mut Traffic, buf: &mut [u8], now: Duration) {
    for iface in 0..v.socks.len() {
        for _ in 0..READ_BATCH {
            match v.socks[iface].recv_from(buf) {
                Ok(Some((n, src))) => {
                    traffic.received += 1;
                    // Vehicles listen on nothing: an initiation is not theirs to answer.
                    v.host.handle_datagram(now, iface, src, &buf[..n]);
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
}

fn send(v: &Vehicle, traffic: &mut Traffic, iface: usize, dst: std::net::SocketAddr, b: &[u8]) {
    match v.socks.get(iface).map(|s| s.send_to(b, dst)) {
        Some(Ok(())) => traffic.sent += 1,
        _ => traffic.send_errors += 1,
    }
}

fn drain_events(v: &mut Vehicle, now: Duration) {
    while let Some(e) = v.host.poll_event() {
        match e {
            HostEvent::Connected { key, .. } if key == v.conn => {
                v.connected_at.get_or_insert(now);
                if !v.stream_open {
                    v.host.handle_command(
                        now,
                        key,
                        ConnOp::OpenStream(STREAM, StreamConfig::default(), Box::new(|_| {})),
                    );
                    v.stream_open = true;
                    // One ADU at once, so that every vehicle is known to move data
                    // before anything is measured.
                    offer_one(v, now);
                }
            }
            HostEvent::ConnectFailed { error, .. } => v.failed = Some(error.to_string()),
            HostEvent::Removed { key } if key == v.conn => {
                v.failed.get_or_insert_with(|| "connection removed".into());
            }
            // The first ADU given up (its session died with it in flight): it is sent
            // again, or the vehicle would never show that it moves data.
            HostEvent::Conn {
                event: Event::Nack { .. },
                ..
            } if v.first_acked_at.is_none() => offer_one(v, now),
            HostEvent::Conn {
                event: Event::Ack { .. },
                ..
            } => {
                v.acked += 1;
                v.first_acked_at.get_or_insert(now);
            }
            _ => {}
        }
    }
}

/// The vehicle's application: ADUs stamped as `horde send` stamps them (send time,
/// sequence), so that the server's own report reads them as it reads any sender's.
fn offer(v: &mut Vehicle, mode: Mode, adu_bytes: usize, now: Duration) {
    let count = match mode {
        Mode::Idle => 0,
        Mode::Bulk if now < v.bulk_from => 0,
        Mode::Bulk => OFFER_BATCH,
        Mode::Telemetry(every) => {
            if now < v.next_telemetry {
                0
            } else {
                v.next_telemetry = now + every;
                1
            }
        }
    };
    for _ in 0..count {
        if !v.writable() {
            break;
        }
        send_adu(v, adu_bytes, now);
    }
}

/// The first ADU, sent as soon as the stream is open.
fn offer_one(v: &mut Vehicle, now: Duration) {
    send_adu(v, FIRST_ADU_BYTES, now);
}

fn send_adu(v: &mut Vehicle, size: usize, now: Duration) {
    let payload = stamp(size, v.offered);
    v.offered += 1;
    v.host.handle_command(
        now,
        v.conn,
        ConnOp::Send {
            stream: STREAM,
            payload,
            fields: Fields::new(),
            reply: None,
        },
    );
}

fn stamp(size: usize, seq: u64) -> Bytes {
    let unix_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let mut b = BytesMut::with_capacity(size.max(16));
    b.put_u64(unix_us);
    b.put_u64(seq);
    b.resize(size.max(16), 0);
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{server_keypair, vehicle_keypair};
    use crate::sockets::{channel_ip, Udp};
    use crate::vehicle::VehiclePlan;
    use horde_proto::SessionConfig;

    #[test]
    fn the_bulk_start_is_spread_evenly_over_the_ramp() {
        let ramp = Duration::from_secs(1);
        let offsets: Vec<_> = (0..4).map(|i| spread(i, 4, ramp)).collect();
        assert_eq!(
            offsets,
            [0, 250, 500, 750].map(Duration::from_millis).to_vec()
        );
        assert_eq!(spread(0, 0, ramp), Duration::ZERO);
    }

    /// A vehicle served for its deadline alone (its socket's readiness not yet seen by
    /// the turn) reads what waits on its sockets before its timers run: a loaded
    /// generator must not starve a vehicle of its acks and let its timers judge the
    /// path dead.
    #[test]
    fn a_vehicle_served_for_a_deadline_reads_its_sockets_first() {
        // The "server": a socket that receives the vehicle's initiations and sends it
        // a datagram back.
        let server = Udp::bind(channel_ip(59_990, 0)).unwrap();
        let plan = VehiclePlan {
            server_key: *server_keypair(7).public(),
            server_addr: server.local,
            session: SessionConfig::default(),
            seed: 7,
            unix_micros_at_start: 0,
            one_socket: false,
        };
        let start = Instant::now();
        let mut fleet = Fleet::new(start, 100).unwrap();
        let v = Vehicle::new(59_991, vehicle_keypair(7, 59_991), &plan, fleet.now()).unwrap();
        let dst: Vec<_> = v.socks.iter().map(|s| s.local).collect();
        fleet.add(v).unwrap();
        for d in &dst {
            server.send_to(&[0xff; 40], *d).unwrap();
        }
        // Give loopback delivery a moment, then serve the vehicle directly, as a due
        // deadline would, without any epoll wait.
        std::thread::sleep(Duration::from_millis(50));
        let now = fleet.now();
        fleet.serve(0, now);
        assert_eq!(
            fleet.traffic.received, 3,
            "every socket's datagram was read"
        );
        let mut buf = [0u8; 128];
        for s in &fleet.vehicles[0].socks {
            assert!(
                s.recv_from(&mut buf).unwrap().is_none(),
                "nothing left unread"
            );
        }
        // The datagrams reached the host (dropped there as malformed, and counted).
        assert!(
            fleet.vehicles[0].host.counters().dropped.total() >= 3,
            "{:?}",
            fleet.vehicles[0].host.counters().dropped
        );
    }
}
