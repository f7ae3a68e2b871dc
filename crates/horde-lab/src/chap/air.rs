//! The wireless access point of the CHAP experiments as a flow-simulator [`Carrier`]:
//! wired servers, the AP's downstream queue (any [`Qdisc`]), one shared 802.11 channel,
//! and the wireless stations' upstream queues.
//!
//! The Web's TCP packets (smoltcp in the flow simulator) enter through
//! [`Carrier::send`]; the UDP applications (game, VoIP, video) and the FTP download
//! ([`bulk_tcp`](super::bulk_tcp)) are generated inside, so that all of them meet in the
//! same downstream queue. Every packet sent or received by a
//! UDP application is logged with its times, from which the quality metrics are computed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use horde_links::wifi::{Channel, Transmitter};
use horde_qdisc::{FlowKey, Packet, Qdisc};
use horde_sim::flows::{Carrier, CarrierStats, Side};
use horde_workload::apps::{AppPacket, Direction, VideoFrameInfo};

use super::bulk_tcp::{Ack, Receiver, Sender, ACK_BYTES, DATA_BYTES, MSS};

/// The UDP applications, each on its own wireless station.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpApp {
    Game,
    Voip,
    Video,
}

impl UdpApp {
    fn index(self) -> usize {
        self as usize
    }

    /// The server-to-station 5-tuple (downstream); upstream is its reverse.
    fn flow(self) -> FlowKey {
        let n = self.index() as u8 + 1;
        FlowKey::udp([10, 0, n, 1], 5000 + u16::from(n), [10, 1, 0, n], 6000)
    }
}

/// One UDP packet's fate: when the application sent it and when it arrived, if it did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sent {
    pub at: Duration,
    pub arrived: Option<Duration>,
    pub frame: Option<VideoFrameInfo>,
}

impl Sent {
    /// One-way delay in ms, `None` if lost.
    pub fn owd_ms(&self) -> Option<f64> {
        self.arrived.map(|a| (a - self.at).as_secs_f64() * 1e3)
    }
}

/// Every UDP packet of the run, per application and direction.
#[derive(Debug, Default, Clone)]
pub struct UdpLog {
    pub down: [Vec<Sent>; 3],
    pub up: [Vec<Sent>; 3],
}

impl UdpLog {
    pub fn down(&self, app: UdpApp) -> &[Sent] {
        &self.down[app.index()]
    }
    pub fn up(&self, app: UdpApp) -> &[Sent] {
        &self.up[app.index()]
    }
}

/// What a queued frame is.
#[derive(Debug)]
pub enum Content {
    Tcp(Vec<u8>),
    /// Entry `record` of the application's log in `direction`.
    Udp {
        app: UdpApp,
        record: usize,
    },
    /// A segment of download `dl`.
    FtpData {
        dl: usize,
        seg: u64,
    },
    /// An acknowledgement of download `dl`.
    FtpAck {
        dl: usize,
        ack: Ack,
    },
}

/// The fixed parts of the network.
#[derive(Debug, Clone, Copy)]
pub struct Wiring {
    /// One-way latency from a server to the access point (both wired hops).
    pub latency: Duration,
    /// Rate of the wired hops, bit/s.
    pub wired_bps: f64,
    /// Wired hops between a server and the access point, each serialising the packet.
    pub hops: u32,
    /// Most packets a station's upstream interface queue holds.
    pub station_queue: usize,
    /// IP and UDP header bytes added to a UDP application's payload; the 802.11 payload
    /// is the IP packet (TCP packets come whole from smoltcp).
    pub udp_ip_overhead: u32,
}

impl Default for Wiring {
    /// Two 100 Mbit/s hops of 1 ms (server to switch, switch to AP; seed §6.5), a
    /// 50-packet interface queue on stations (NS2's default), and 28 bytes of IP and UDP
    /// header on every UDP payload.
    fn default() -> Wiring {
        Wiring {
            latency: Duration::from_millis(2),
            wired_bps: 100e6,
            hops: 2,
            station_queue: 50,
            udp_ip_overhead: 28,
        }
    }
}

/// Who transmits a frame on the shared channel: the AP, or one of the stations.
/// Stations: 0 game, 1 VoIP, 2 video, 3 Web, 4 the downloads (FTP or P2P); a download
/// may be placed on another station (the fairness runs put their first on station 3).
pub const STATIONS: usize = 5;
pub const WEB_STATION: usize = 3;
pub const FTP_STATION: usize = 4;

#[derive(Debug)]
enum Event {
    /// A downstream packet reaches the AP's queue.
    AtAp {
        flow: FlowKey,
        len: u32,
        content: Content,
    },
    /// An upstream TCP packet reaches the server.
    AtServer(Vec<u8>),
    /// An upstream UDP packet reaches its server.
    UdpAtServer { app: UdpApp, record: usize },
    /// An acknowledgement reaches download `dl`'s server.
    FtpAckAtServer { dl: usize, ack: Ack },
}

/// The frame on the air and when it ends.
#[derive(Debug)]
struct OnAir {
    until: Duration,
    from_ap: bool,
    flow: FlowKey,
    airtime: Duration,
    delivered: bool,
    len: u32,
    content: Content,
}

/// A bulk download (the FTP, or one P2P flow): a [`bulk_tcp`](super::bulk_tcp) sender
/// at its server and its receiver at the downloading station.
#[derive(Debug)]
pub struct Ftp {
    pub flow: FlowKey,
    pub start: Duration,
    started: bool,
    pub sender: Sender,
    pub receiver: Receiver,
    /// Payload bytes delivered in order within `window`.
    pub window: (Duration, Duration),
    pub bytes_in_window: u64,
    /// The station it downloads to.
    pub station: usize,
    /// One-way latency of its server's path beyond the wiring's, each way.
    pub extra_latency: Duration,
}

impl Ftp {
    /// A download of `flow` (server to station) from `start`, measured over `window`.
    pub fn new(flow: FlowKey, start: Duration, window: (Duration, Duration)) -> Ftp {
        Ftp {
            flow,
            start,
            started: false,
            sender: Sender::default(),
            receiver: Receiver::default(),
            window,
            bytes_in_window: 0,
            station: FTP_STATION,
            extra_latency: Duration::ZERO,
        }
    }

    fn timer(&self) -> Option<Duration> {
        [
            (!self.started).then_some(self.start),
            self.sender.timer(),
            self.receiver.timer(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// A UDP application's packets, offset to its start time and cut at its stop time.
pub struct UdpSource {
    pub app: UdpApp,
    pub start: Duration,
    pub stop: Duration,
    pub packets: Box<dyn Iterator<Item = AppPacket>>,
    next: Option<AppPacket>,
}

impl UdpSource {
    pub fn new(
        app: UdpApp,
        start: Duration,
        stop: Duration,
        mut packets: Box<dyn Iterator<Item = AppPacket>>,
    ) -> UdpSource {
        let next = packets.next();
        UdpSource {
            app,
            start,
            stop,
            packets,
            next,
        }
    }

    fn next_at(&self) -> Option<Duration> {
        self.next
            .map(|p| self.start + p.at)
            .filter(|&t| t < self.stop)
    }
}

/// The access point carrier. See the module documentation.
pub struct AccessPoint {
    wiring: Wiring,
    qdisc: Box<dyn Qdisc<Content>>,
    drops: Vec<Packet<Content>>,
    ap_tx: Transmitter,
    station_tx: Transmitter,
    /// The channel between the AP and each station.
    channels: [Channel; STATIONS],
    stations: [VecDeque<(FlowKey, u32, Content)>; STATIONS],
    /// Round-robin position over the contenders: 0 is the AP, 1.. the stations.
    turn: usize,
    on_air: Option<OnAir>,
    events: BinaryHeap<Reverse<(Duration, u64)>>,
    pending: std::collections::HashMap<u64, Event>,
    next_event: u64,
    /// The last wired arrival in each direction, which keeps the wire in order.
    wire_down_free: Duration,
    wire_up_free: Duration,
    sources: Vec<UdpSource>,
    pub log: UdpLog,
    pub downloads: Vec<Ftp>,
    segs: Vec<u64>,
    /// Airtime of the AP's frames and of the stations' frames.
    pub ap_airtime: Duration,
    pub station_airtime: Duration,
    pub ap_drops: u64,
    stats: CarrierStats,
}

impl AccessPoint {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        wiring: Wiring,
        qdisc: Box<dyn Qdisc<Content>>,
        ap_tx: Transmitter,
        station_tx: Transmitter,
        channels: [Channel; STATIONS],
        sources: Vec<UdpSource>,
        downloads: Vec<Ftp>,
    ) -> AccessPoint {
        AccessPoint {
            wiring,
            qdisc,
            drops: Vec::new(),
            ap_tx,
            station_tx,
            channels,
            stations: Default::default(),
            turn: 0,
            on_air: None,
            events: BinaryHeap::new(),
            pending: Default::default(),
            next_event: 0,
            wire_down_free: Duration::ZERO,
            wire_up_free: Duration::ZERO,
            sources,
            log: UdpLog::default(),
            downloads,
            segs: Vec::new(),
            ap_airtime: Duration::ZERO,
            station_airtime: Duration::ZERO,
            ap_drops: 0,
            stats: CarrierStats::default(),
        }
    }

    fn wire_time(&self, len: u32) -> Duration {
        let serial = f64::from(len) * 8.0 / self.wiring.wired_bps * f64::from(self.wiring.hops);
        self.wiring.latency + Duration::from_secs_f64(serial)
    }

    fn schedule(&mut self, at: Duration, event: Event) {
        let id = self.next_event;
        self.next_event += 1;
        self.events.push(Reverse((at, id)));
        self.pending.insert(id, event);
    }

    /// Over the wire towards the AP, in order behind the previous packet.
    fn wire_down(&mut self, now: Duration, len: u32) -> Duration {
        let t = (now + self.wire_time(len)).max(self.wire_down_free);
        self.wire_down_free = t;
        t
    }

    fn wire_up(&mut self, now: Duration, len: u32) -> Duration {
        let t = (now + self.wire_time(len)).max(self.wire_up_free);
        self.wire_up_free = t;
        t
    }

    fn enqueue_ap(&mut self, now: Duration, flow: FlowKey, len: u32, content: Content) {
        self.qdisc
            .enqueue(Packet::new(flow, len, now, content), &mut self.drops);
        self.ap_drops += self.drops.len() as u64;
        self.stats.down.queue_drops += self.drops.len() as u64;
        self.drops.clear();
    }

    fn enqueue_station(&mut self, station: usize, flow: FlowKey, len: u32, content: Content) {
        let q = &mut self.stations[station];
        if q.len() < self.wiring.station_queue {
            q.push_back((flow, len, content));
        } else {
            self.stats.up.queue_drops += 1;
        }
    }

    /// Start the next frame if the channel is free: the contenders with something to send
    /// take turns (DCF gives each an equal chance to win the channel).
    fn start_frame(&mut self, now: Duration) {
        if self.on_air.is_some() {
            return;
        }
        for k in 0..=STATIONS {
            let who = (self.turn + k) % (STATIONS + 1);
            let frame = if who == 0 {
                let p = self.qdisc.dequeue(now, &mut self.drops);
                self.ap_drops += self.drops.len() as u64;
                self.drops.clear();
                p.map(|p| (p.flow, p.len, p.payload))
            } else {
                self.stations[who - 1].pop_front()
            };
            let Some((flow, len, content)) = frame else {
                continue;
            };
            let from_ap = who == 0;
            let station = if from_ap {
                self.station_of(&content)
            } else {
                who - 1
            };
            let channel = self.channels[station];
            let tx = if from_ap {
                &mut self.ap_tx
            } else {
                &mut self.station_tx
            };
            let outcome = tx.send(len, &channel);
            self.turn = (who + 1) % (STATIONS + 1);
            self.on_air = Some(OnAir {
                until: now + outcome.airtime,
                from_ap,
                flow,
                airtime: outcome.airtime,
                delivered: outcome.delivered,
                len,
                content,
            });
            return;
        }
    }

    /// The station a downstream frame goes to.
    fn station_of(&self, content: &Content) -> usize {
        match content {
            Content::Tcp(_) => WEB_STATION,
            Content::Udp { app, .. } => app.index(),
            Content::FtpData { dl, .. } | Content::FtpAck { dl, .. } => self.downloads[*dl].station,
        }
    }

    /// The frame on the air ends: charge it, hand it on, start the next.
    fn end_frame(&mut self, out: &mut Vec<(Side, Vec<u8>)>) {
        let Some(f) = self.on_air.take() else { return };
        let now = f.until;
        if f.from_ap {
            self.ap_airtime += f.airtime;
            // CHAP is charged the frame's actual airtime, retries included, after the send.
            self.qdisc.charge(&f.flow, f.airtime);
            if f.delivered {
                self.stats.down.delivered += 1;
                match f.content {
                    Content::Tcp(p) => out.push((Side::Client, p)),
                    Content::Udp { app, record } => {
                        self.log.down[app.index()][record].arrived = Some(now);
                    }
                    Content::FtpData { dl, seg } => self.ftp_data_at_client(now, dl, seg),
                    Content::FtpAck { .. } => {}
                }
            } else {
                self.stats.down.lost += 1;
            }
        } else {
            self.station_airtime += f.airtime;
            if f.delivered {
                self.stats.up.delivered += 1;
                let at = self.wire_up(now, f.len);
                match f.content {
                    Content::Tcp(p) => self.schedule(at, Event::AtServer(p)),
                    Content::Udp { app, record } => {
                        self.schedule(at, Event::UdpAtServer { app, record })
                    }
                    Content::FtpAck { dl, ack } => {
                        let at = at + self.downloads[dl].extra_latency;
                        self.schedule(at, Event::FtpAckAtServer { dl, ack })
                    }
                    Content::FtpData { .. } => {}
                }
            } else {
                self.stats.up.lost += 1;
            }
        }
        self.start_frame(now);
    }

    fn ftp_data_at_client(&mut self, now: Duration, dl: usize, seg: u64) {
        let d = &mut self.downloads[dl];
        let before = d.receiver.next;
        let ack = d.receiver.on_data(now, seg);
        let (from, to) = d.window;
        if now >= from && now < to {
            d.bytes_in_window += (d.receiver.next - before) * u64::from(MSS);
        }
        if let Some(ack) = ack {
            self.send_ftp_ack(now, dl, ack);
        }
    }

    fn send_ftp_ack(&mut self, now: Duration, dl: usize, ack: Ack) {
        let k = self.downloads[dl].flow;
        let up = FlowKey {
            src: k.dst,
            dst: k.src,
            src_port: k.dst_port,
            dst_port: k.src_port,
            protocol: k.protocol,
        };
        let station = self.downloads[dl].station;
        self.enqueue_station(station, up, ACK_BYTES, Content::FtpAck { dl, ack });
        self.start_frame(now);
    }

    /// Put download `dl`'s new segments on the wire towards the AP.
    fn send_ftp_segments(&mut self, now: Duration, dl: usize) {
        let segs = std::mem::take(&mut self.segs);
        let extra = self.downloads[dl].extra_latency;
        for &seg in &segs {
            // The shared wire keeps its order; the server's own path adds its latency.
            let at = self.wire_down(now, DATA_BYTES) + extra;
            self.schedule(
                at,
                Event::AtAp {
                    flow: self.downloads[dl].flow,
                    len: DATA_BYTES,
                    content: Content::FtpData { dl, seg },
                },
            );
        }
        self.segs = segs;
        self.segs.clear();
    }

    /// Downloads' starts and timers due by `now`.
    fn ftp_timers(&mut self, now: Duration) {
        for dl in 0..self.downloads.len() {
            let d = &mut self.downloads[dl];
            if !d.started && d.start <= now {
                d.started = true;
                d.sender.transmit(now, &mut self.segs);
            } else if d.sender.timer().is_some_and(|t| t <= now) {
                d.sender.on_timeout(now, &mut self.segs);
            }
            if d.receiver.timer().is_some_and(|t| t <= now) {
                let ack = d.receiver.on_timeout();
                self.send_ftp_ack(now, dl, ack);
            }
            self.send_ftp_segments(now, dl);
        }
    }

    fn downloads_timer(&self) -> Option<Duration> {
        self.downloads.iter().filter_map(Ftp::timer).min()
    }

    /// The next UDP application packet: its source's index and time.
    fn next_udp(&self) -> Option<(usize, Duration)> {
        self.sources
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.next_at().map(|t| (i, t)))
            .min_by_key(|&(i, t)| (t, i))
    }

    fn send_udp(&mut self, source: usize, now: Duration) {
        let s = &mut self.sources[source];
        let p = s.next.take().expect("next_udp saw it");
        s.next = s.packets.next();
        let app = s.app;
        let len = p.size + self.wiring.udp_ip_overhead;
        let sent = Sent {
            at: now,
            arrived: None,
            frame: p.frame,
        };
        match p.direction {
            Direction::Down => {
                let log = &mut self.log.down[app.index()];
                log.push(sent);
                let record = log.len() - 1;
                let at = self.wire_down(now, len);
                self.schedule(
                    at,
                    Event::AtAp {
                        flow: app.flow(),
                        len,
                        content: Content::Udp { app, record },
                    },
                );
            }
            Direction::Up => {
                let log = &mut self.log.up[app.index()];
                log.push(sent);
                let record = log.len() - 1;
                let key = app.flow();
                let up_key = FlowKey {
                    src: key.dst,
                    dst: key.src,
                    src_port: key.dst_port,
                    dst_port: key.src_port,
                    protocol: key.protocol,
                };
                self.enqueue_station(app.index(), up_key, len, Content::Udp { app, record });
                self.start_frame(now);
            }
        }
    }

    fn next_time(&self) -> Option<Duration> {
        [
            self.events.peek().map(|Reverse((t, _))| *t),
            self.on_air.as_ref().map(|f| f.until),
            self.next_udp().map(|(_, t)| t),
            self.downloads_timer(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

impl Carrier for AccessPoint {
    fn send(&mut self, now: Duration, from: Side, packet: Vec<u8>) {
        let len = packet.len() as u32;
        let Some(flow) = FlowKey::from_ip(&packet) else {
            return;
        };
        match from {
            Side::Server => {
                let at = self.wire_down(now, len);
                self.schedule(
                    at,
                    Event::AtAp {
                        flow,
                        len,
                        content: Content::Tcp(packet),
                    },
                );
            }
            Side::Client => {
                self.enqueue_station(WEB_STATION, flow, len, Content::Tcp(packet));
                self.start_frame(now);
            }
        }
    }

    fn next_delivery(&self) -> Option<Duration> {
        self.next_time()
    }

    fn deliver(&mut self, now: Duration, out: &mut Vec<(Side, Vec<u8>)>) {
        // Events in time order; on a tie the frame ends first, then wired arrivals, then
        // applications send.
        while let Some(t) = self.next_time().filter(|&t| t <= now) {
            if self.on_air.as_ref().is_some_and(|f| f.until == t) {
                self.end_frame(out);
                continue;
            }
            if let Some(&Reverse((et, id))) = self.events.peek() {
                if et == t {
                    self.events.pop();
                    match self.pending.remove(&id).expect("scheduled") {
                        Event::AtAp { flow, len, content } => {
                            self.enqueue_ap(t, flow, len, content);
                            self.start_frame(t);
                        }
                        Event::AtServer(p) => out.push((Side::Server, p)),
                        Event::UdpAtServer { app, record } => {
                            self.log.up[app.index()][record].arrived = Some(t);
                        }
                        Event::FtpAckAtServer { dl, ack } => {
                            self.downloads[dl].sender.on_ack(t, &ack, &mut self.segs);
                            self.send_ftp_segments(t, dl);
                        }
                    }
                    continue;
                }
            }
            if self.downloads_timer() == Some(t) {
                self.ftp_timers(t);
                continue;
            }
            let (source, _) = self.next_udp().expect("the earliest event is a UDP send");
            self.send_udp(source, t);
        }
    }

    fn stats(&self) -> CarrierStats {
        self.stats
    }
}
