//! The wireless access point of the CHAP experiments, in virtual time: wired servers,
//! the AP's downstream queue (any [`Qdisc`]), one shared 802.11 channel, and the
//! wireless stations' upstream queues.
//!
//! Every application is generated inside, so that all of them meet in the same downstream
//! queue: the UDP applications (game, VoIP, video), and the TCP downloads on
//! [`bulk_tcp`](super::bulk_tcp), bulk (FTP, P2P) or one per Web page. Every packet sent
//! or received by a UDP application is logged with its times, from which the quality
//! metrics are computed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use horde_links::wifi::{Channel, Transmitter};
use horde_qdisc::{FlowKey, Packet, Qdisc};
use horde_workload::apps::{AppPacket, Direction, VideoFrameInfo};

use super::bulk_tcp::{Ack, Congestion, Receiver, Sender, ACK_BYTES, DATA_BYTES, MSS};

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
    /// Entry `record` of the application's log in `direction`.
    Udp { app: UdpApp, record: usize },
    /// A segment of download `dl`.
    Segment { dl: usize, seg: u64 },
    /// An acknowledgement of download `dl`.
    TcpAck { dl: usize, ack: Ack },
    /// The request of Web page `dl` (its HTML's and, pipelined behind it, its embedded
    /// objects').
    Request { dl: usize },
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
    /// is the IP packet.
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
    /// An upstream UDP packet reaches its server.
    UdpAtServer { app: UdpApp, record: usize },
    /// An acknowledgement reaches download `dl`'s server.
    AckAtServer { dl: usize, ack: Ack },
    /// Web page `dl`'s request reaches its server, which starts sending the page.
    RequestAtServer { dl: usize },
    /// Web page `dl`'s request was lost: the station sends it again.
    RequestAgain { dl: usize },
}

/// How long a station waits before it sends a lost request again: TCP's initial
/// retransmission timeout (RFC 6298), as no round trip has been measured yet.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// Bytes of TCP and IP headers on a segment.
const HEADERS: u32 = DATA_BYTES - MSS;

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

/// A TCP download from a server to a station: a [`bulk_tcp`](super::bulk_tcp) sender at
/// the server and its receiver at the station. A bulk download (the FTP, or one P2P
/// flow) starts sending at `start`; a Web page is clicked at `start`, and its server
/// sends it when the request arrives.
#[derive(Debug)]
pub struct Download {
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
    /// The page, for a Web page; `None` for a bulk download.
    pub page: Option<Page>,
}

/// The 5-tuple of the other direction.
fn reversed(k: FlowKey) -> FlowKey {
    FlowKey {
        src: k.dst,
        dst: k.src,
        src_port: k.dst_port,
        dst_port: k.src_port,
        protocol: k.protocol,
    }
}

/// What a Web page's download asks for and when it ended.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    /// Payload bytes of the requests, sent in one segment.
    pub request_bytes: u32,
    /// Payload bytes of the responses.
    pub bytes: u64,
    /// When its last byte reached the station.
    pub completed: Option<Duration>,
}

impl Download {
    /// A bulk download of `flow` (server to station) from `start`, measured over `window`.
    pub fn bulk(flow: FlowKey, start: Duration, window: (Duration, Duration)) -> Download {
        Download {
            flow,
            start,
            started: false,
            sender: Sender::default(),
            receiver: Receiver::default(),
            window,
            bytes_in_window: 0,
            station: FTP_STATION,
            extra_latency: Duration::ZERO,
            page: None,
        }
    }

    /// A Web page of `bytes` over a connection of its own (`flow`, server to the Web
    /// station), clicked at `click`: a Cubic sender that starts afresh, as a new
    /// connection does, and sends the page's segments once the request arrives.
    pub fn page(flow: FlowKey, click: Duration, request_bytes: u32, bytes: u64) -> Download {
        let segments = bytes.div_ceil(u64::from(MSS)).max(1);
        Download {
            sender: Sender::finite(Congestion::Cubic, segments),
            station: WEB_STATION,
            page: Some(Page {
                request_bytes,
                bytes,
                completed: None,
            }),
            ..Download::bulk(flow, click, (Duration::ZERO, Duration::ZERO))
        }
    }

    /// IP bytes of segment `seg`: full, but for a page's last, which carries the rest.
    fn segment_bytes(&self, seg: u64) -> u32 {
        match self.page {
            Some(p) => {
                let payload = p
                    .bytes
                    .saturating_sub(seg * u64::from(MSS))
                    .min(u64::from(MSS));
                HEADERS + payload.max(1) as u32
            }
            None => DATA_BYTES,
        }
    }

    /// Its 5-tuple from the station to the server.
    fn up_flow(&self) -> FlowKey {
        reversed(self.flow)
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
    pub downloads: Vec<Download>,
    segs: Vec<u64>,
    /// Airtime of the AP's frames and of the stations' frames.
    pub ap_airtime: Duration,
    pub station_airtime: Duration,
    pub ap_drops: u64,
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
        downloads: Vec<Download>,
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
        self.drops.clear();
    }

    /// Queue a frame at a station; `false` if its queue is full and the frame is dropped.
    fn enqueue_station(
        &mut self,
        station: usize,
        flow: FlowKey,
        len: u32,
        content: Content,
    ) -> bool {
        let q = &mut self.stations[station];
        let room = q.len() < self.wiring.station_queue;
        if room {
            q.push_back((flow, len, content));
        }
        room
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
            Content::Udp { app, .. } => app.index(),
            Content::Segment { dl, .. } | Content::TcpAck { dl, .. } | Content::Request { dl } => {
                self.downloads[*dl].station
            }
        }
    }

    /// The frame on the air ends: charge it, hand it on, start the next.
    fn end_frame(&mut self) {
        let Some(f) = self.on_air.take() else { return };
        let now = f.until;
        if f.from_ap {
            self.ap_airtime += f.airtime;
            // CHAP is charged the frame's actual airtime, retries included, after the send.
            self.qdisc.charge(&f.flow, f.airtime);
            if f.delivered {
                match f.content {
                    Content::Udp { app, record } => {
                        self.log.down[app.index()][record].arrived = Some(now);
                    }
                    Content::Segment { dl, seg } => self.segment_at_station(now, dl, seg),
                    Content::TcpAck { .. } | Content::Request { .. } => {}
                }
            }
        } else {
            self.station_airtime += f.airtime;
            if f.delivered {
                let at = self.wire_up(now, f.len);
                match f.content {
                    Content::Udp { app, record } => {
                        self.schedule(at, Event::UdpAtServer { app, record })
                    }
                    Content::TcpAck { dl, ack } => {
                        let at = at + self.downloads[dl].extra_latency;
                        self.schedule(at, Event::AckAtServer { dl, ack })
                    }
                    Content::Request { dl } => {
                        let at = at + self.downloads[dl].extra_latency;
                        self.schedule(at, Event::RequestAtServer { dl })
                    }
                    Content::Segment { .. } => {}
                }
            } else if let Content::Request { dl } = f.content {
                self.schedule(now + REQUEST_TIMEOUT, Event::RequestAgain { dl });
            }
        }
        self.start_frame(now);
    }

    fn segment_at_station(&mut self, now: Duration, dl: usize, seg: u64) {
        let d = &mut self.downloads[dl];
        let before = d.receiver.next;
        let ack = d.receiver.on_data(now, seg);
        let (from, to) = d.window;
        if now >= from && now < to {
            d.bytes_in_window += (d.receiver.next - before) * u64::from(MSS);
        }
        if let Some(page) = &mut d.page {
            if page.completed.is_none() && d.receiver.next * u64::from(MSS) >= page.bytes {
                page.completed = Some(now);
            }
        }
        if let Some(ack) = ack {
            self.send_ack(now, dl, ack);
        }
    }

    fn send_ack(&mut self, now: Duration, dl: usize, ack: Ack) {
        let d = &self.downloads[dl];
        let (station, up) = (d.station, d.up_flow());
        self.enqueue_station(station, up, ACK_BYTES, Content::TcpAck { dl, ack });
        self.start_frame(now);
    }

    /// The station sends page `dl`'s request; one lost, on the air or to a full queue,
    /// is sent again after the timeout.
    fn send_request(&mut self, now: Duration, dl: usize) {
        let d = &self.downloads[dl];
        let (station, up) = (d.station, d.up_flow());
        let len = HEADERS + d.page.map_or(0, |p| p.request_bytes);
        if self.enqueue_station(station, up, len, Content::Request { dl }) {
            self.start_frame(now);
        } else {
            self.schedule(now + REQUEST_TIMEOUT, Event::RequestAgain { dl });
        }
    }

    /// Put download `dl`'s new segments on the wire towards the AP.
    fn send_segments(&mut self, now: Duration, dl: usize) {
        let segs = std::mem::take(&mut self.segs);
        let extra = self.downloads[dl].extra_latency;
        for &seg in &segs {
            let len = self.downloads[dl].segment_bytes(seg);
            // The shared wire keeps its order; the server's own path adds its latency.
            let at = self.wire_down(now, len) + extra;
            self.schedule(
                at,
                Event::AtAp {
                    flow: self.downloads[dl].flow,
                    len,
                    content: Content::Segment { dl, seg },
                },
            );
        }
        self.segs = segs;
        self.segs.clear();
    }

    /// Downloads' starts and timers due by `now`.
    fn download_timers(&mut self, now: Duration) {
        for dl in 0..self.downloads.len() {
            let d = &mut self.downloads[dl];
            if !d.started && d.start <= now {
                d.started = true;
                if d.page.is_some() {
                    self.send_request(now, dl);
                    continue;
                }
                d.sender.transmit(now, &mut self.segs);
            } else if d.sender.timer().is_some_and(|t| t <= now) {
                d.sender.on_timeout(now, &mut self.segs);
            }
            if d.receiver.timer().is_some_and(|t| t <= now) {
                let ack = d.receiver.on_timeout();
                self.send_ack(now, dl, ack);
            }
            self.send_segments(now, dl);
        }
    }

    fn downloads_timer(&self) -> Option<Duration> {
        self.downloads.iter().filter_map(Download::timer).min()
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
                let up_key = reversed(app.flow());
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

impl AccessPoint {
    /// Run everything due up to `end`. Events in time order; on a tie the frame ends
    /// first, then wired arrivals, then applications send.
    pub fn run_until(&mut self, end: Duration) {
        while let Some(t) = self.next_time().filter(|&t| t <= end) {
            if self.on_air.as_ref().is_some_and(|f| f.until == t) {
                self.end_frame();
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
                        Event::UdpAtServer { app, record } => {
                            self.log.up[app.index()][record].arrived = Some(t);
                        }
                        Event::AckAtServer { dl, ack } => {
                            self.downloads[dl].sender.on_ack(t, &ack, &mut self.segs);
                            self.send_segments(t, dl);
                        }
                        Event::RequestAtServer { dl } => {
                            self.downloads[dl].sender.transmit(t, &mut self.segs);
                            self.send_segments(t, dl);
                        }
                        Event::RequestAgain { dl } => self.send_request(t, dl),
                    }
                    continue;
                }
            }
            if self.downloads_timer() == Some(t) {
                self.download_timers(t);
                continue;
            }
            let (source, _) = self.next_udp().expect("the earliest event is a UDP send");
            self.send_udp(source, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use horde_links::wifi::{Phy, Shadowing};
    use horde_qdisc::{Fifo, Limit};

    use super::*;

    fn ap_with(downloads: Vec<Download>, distance_m: f64) -> AccessPoint {
        let phy = Phy::dot11g(54.0);
        let channel = Channel::at_distance(distance_m, &Shadowing::dissertation()).unwrap();
        AccessPoint::new(
            Wiring::default(),
            Box::new(Fifo::new(Limit::packets(35)).unwrap()),
            Transmitter::new(phy, 1).unwrap(),
            Transmitter::new(phy, 2).unwrap(),
            [channel; STATIONS],
            Vec::new(),
            downloads,
        )
    }

    fn page(i: u16, click_ms: u64, bytes: u64) -> Download {
        let flow = FlowKey::tcp([10, 0, 3, 1], 80, [10, 1, 0, 3], 1024 + i);
        Download::page(flow, Duration::from_millis(click_ms), 700, bytes)
    }

    #[test]
    fn pages_on_an_idle_access_point_take_their_round_trips_and_no_more() {
        // 74,172 bytes is the model's mean page (51 segments): slow start from 10
        // segments needs 3 round trips of about 5 ms after the request's.
        let mut ap = ap_with(vec![page(0, 100, 74_172), page(1, 200, 300)], 1.0);
        ap.run_until(Duration::from_secs(2));
        let took = |d: &Download| d.page.unwrap().completed.expect("completed") - d.start;
        let (big, small) = (took(&ap.downloads[0]), took(&ap.downloads[1]));
        assert!(
            small > Duration::from_millis(4) && small < Duration::from_millis(10),
            "{small:?}"
        );
        assert!(
            big > small * 3 && big < Duration::from_millis(60),
            "{big:?}"
        );
        assert_eq!(ap.downloads[0].sender.retransmissions, 0);
    }

    #[test]
    fn a_request_lost_on_the_air_is_sent_again_after_the_timeout() {
        // At 10 m a frame now and then fails even after its retries. Every page
        // completes, one only after its request was sent again: a second late with no
        // segment resent.
        let pages = (0..20)
            .map(|i| page(i, 100 + 3_000 * u64::from(i), 2_000))
            .collect();
        let mut ap = ap_with(pages, 10.0);
        ap.run_until(Duration::from_secs(120));
        let resent_requests = ap
            .downloads
            .iter()
            .filter(|d| {
                let took = d.page.unwrap().completed.expect("every page completes") - d.start;
                took >= REQUEST_TIMEOUT && d.sender.retransmissions == 0
            })
            .count();
        assert!(resent_requests > 0, "no request was lost and sent again");
    }
}
