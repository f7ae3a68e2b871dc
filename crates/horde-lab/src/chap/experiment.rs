//! One run of the CHAP dissertation's multiple-applications experiment (seed 001 §6.8):
//! game, VoIP, video, Web and FTP behind one access point, under one queue discipline,
//! in virtual time, and the quality metrics of each application over the measurement
//! window (§2.5, §6.5).

use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use horde_analyze::quality::{
    game_mos, playable, voip_mos, FrameKind, PageFetch, VideoFrame, G_MODEL_MAX,
};
use horde_links::wifi::{Channel, Phy, Shadowing, Transmitter};
use horde_qdisc::{
    Chap, ChapConfig, Fifo, FlowKey, FqCodel, FqCodelConfig, Limit, Qdisc, QdiscKind, Spq,
    SpqConfig, SpqRule,
};
use horde_workload::apps::{self, Fec, FrameType, VideoParams, VideoSource, WebPages, WebParams};
use serde::Serialize;

use super::air::{
    AccessPoint, Content, Download, Sent, UdpApp, UdpLog, UdpSource, Wiring, FTP_STATION, STATIONS,
    WEB_STATION,
};
use super::bulk_tcp::{Congestion, Sender};

/// When the applications run and when they are measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Schedule {
    /// Game, VoIP, video and Web start (the dissertation's "Application 1").
    pub apps_start_s: f64,
    /// The FTP download starts (its "Application 2").
    pub ftp_start_s: f64,
    /// The metrics count what was sent in `[window_start_s, window_end_s)`.
    pub window_start_s: f64,
    pub window_end_s: f64,
    /// The simulation stops; what is still on its way then counts as lost.
    pub end_s: f64,
}

impl Schedule {
    /// Seed §6.5: Application 1 from 30 s, Application 2 from 90 s, metrics over 90 to
    /// 270 s. Nothing after the window changes a metric, so the run stops 1 s after it.
    pub fn dissertation() -> Schedule {
        Schedule {
            apps_start_s: 30.0,
            ftp_start_s: 90.0,
            window_start_s: 90.0,
            window_end_s: 270.0,
            end_s: 271.0,
        }
    }

    /// A short run with the same shape, for tests: FTP joins 5 s after the applications
    /// and is measured from 5 s after it starts, for 60 s.
    pub fn short() -> Schedule {
        Schedule {
            apps_start_s: 0.0,
            ftp_start_s: 5.0,
            window_start_s: 10.0,
            window_end_s: 70.0,
            end_s: 71.0,
        }
    }

    /// The same schedule measured for `secs` from its window's start, stopping 1 s
    /// after: a controller whose loss cycles last a minute or more (NewReno on a long
    /// path) needs several of them in the window.
    pub fn with_window(self, secs: f64) -> Schedule {
        let window_end_s = self.window_start_s + secs;
        Schedule {
            window_end_s,
            end_s: window_end_s + 1.0,
            ..self
        }
    }

    fn validate(&self) -> Result<()> {
        let ok = [
            self.apps_start_s,
            self.ftp_start_s,
            self.window_start_s,
            self.window_end_s,
            self.end_s,
        ]
        .iter()
        .all(|t| t.is_finite() && *t >= 0.0);
        if !ok
            || self.window_end_s <= self.window_start_s
            || self.end_s < self.window_end_s
            || self.end_s > 1e6
        {
            return Err(anyhow!(
                "schedule: times must be finite and >= 0 with window start < window end <= end <= 1e6 s, got {self:?}"
            ));
        }
        Ok(())
    }

    fn window(&self) -> (Duration, Duration) {
        (secs(self.window_start_s), secs(self.window_end_s))
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Everything one run depends on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunConfig {
    pub scenario: Scenario,
    #[serde(serialize_with = "kind_name")]
    pub discipline: QdiscKind,
    #[serde(serialize_with = "fec_name")]
    pub fec: Fec,
    pub seed: u64,
    pub schedule: Schedule,
    /// The AP's queue limit in packets (seed: 35).
    pub queue_packets: usize,
    /// CHAP's increment I in ms (seed: 25).
    pub increment_ms: f64,
    /// Distance of the application stations from the AP (seed: 1 m).
    pub distance_m: f64,
    /// Distance of the downloading station from the AP (seed: 1 m).
    pub ftp_distance_m: f64,
}

/// Which applications run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// §6.8: game, VoIP, video, Web and one FTP download, each on its own station.
    MultiApp,
    /// §6.9: one application against 10 parallel TCP downloads to one station (P2P).
    P2p(TestApp),
    /// §6.6-6.7: one application against one FTP download.
    OneApp(TestApp),
    /// §6.13: two FTP downloads to two stations; the first from 30 s (the schedule's
    /// applications' start) over a path of `ftp1_latency_ms` one way from its server to
    /// the AP, the second from the FTP start over the default 2 ms.
    Fairness {
        ftp1_latency_ms: u32,
        tcp: Congestion,
    },
}

/// The application under test of a P2P run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TestApp {
    Game,
    Voip,
    Video,
    Web,
}

impl Scenario {
    fn runs(self, app: UdpApp) -> bool {
        match self {
            Scenario::MultiApp => true,
            Scenario::Fairness { .. } => false,
            Scenario::P2p(t) | Scenario::OneApp(t) => matches!(
                (t, app),
                (TestApp::Game, UdpApp::Game)
                    | (TestApp::Voip, UdpApp::Voip)
                    | (TestApp::Video, UdpApp::Video)
            ),
        }
    }

    fn runs_web(self) -> bool {
        matches!(
            self,
            Scenario::MultiApp | Scenario::P2p(TestApp::Web) | Scenario::OneApp(TestApp::Web)
        )
    }

    /// The downloads' 5-tuples, server to station.
    fn downloads(self) -> Vec<FlowKey> {
        match self {
            Scenario::MultiApp | Scenario::OneApp(_) => {
                vec![FlowKey::tcp([10, 0, 5, 1], 20, [10, 1, 0, 5], 40_000)]
            }
            Scenario::Fairness { .. } => vec![
                FlowKey::tcp([10, 0, 4, 1], 20, [10, 1, 0, 4], 40_000),
                FlowKey::tcp([10, 0, 5, 1], 20, [10, 1, 0, 5], 40_000),
            ],
            Scenario::P2p(_) => (0..P2P_FLOWS)
                .map(|i| {
                    FlowKey::tcp(
                        [10, 0, 10 + i, 1],
                        6881,
                        [10, 1, 0, 4],
                        40_000 + u16::from(i),
                    )
                })
                .collect(),
        }
    }
}

/// Parallel TCP flows of the P2P application (seed §6.1.6).
pub const P2P_FLOWS: u8 = 10;

fn kind_name<S: serde::Serializer>(k: &QdiscKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.name())
}

fn fec_name<S: serde::Serializer>(f: &Fec, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(fec_label(*f))
}

pub fn fec_label(f: Fec) -> &'static str {
    match f {
        Fec::None => "none",
        Fec::Small => "small",
        Fec::Large => "large",
    }
}

impl RunConfig {
    /// The dissertation's §6.8 settings under `discipline`.
    pub fn table_6_10(discipline: QdiscKind, fec: Fec, seed: u64, schedule: Schedule) -> Self {
        RunConfig::new(Scenario::MultiApp, discipline, fec, seed, schedule)
    }

    /// The dissertation's settings (q = 35, I = 25 ms, 1 m) for `scenario`.
    pub fn new(
        scenario: Scenario,
        discipline: QdiscKind,
        fec: Fec,
        seed: u64,
        schedule: Schedule,
    ) -> Self {
        RunConfig {
            scenario,
            discipline,
            fec,
            seed,
            schedule,
            queue_packets: 35,
            increment_ms: 25.0,
            distance_m: 1.0,
            ftp_distance_m: 1.0,
        }
    }
}

/// The VoIP receiver's jitter buffer: the seed counts its delay in the E-model's `d` but
/// does not give its size (docs/chap-experiments.md).
pub const JITTER_BUFFER_MS: f64 = 10.0;
/// The G-model is scored per window of this length and averaged (seed §6.2, Fig. 6.4).
pub const GAME_WINDOW: Duration = Duration::from_secs(5);

/// One run's metrics.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub config: RunConfig,
    pub game_mos: Option<f64>,
    pub voip_mos: Option<f64>,
    pub video_fps: Option<f64>,
    /// Each Web page requested in the window, in order.
    #[serde(skip)]
    pub pages: Vec<PageFetch>,
    /// Mean response time of the pages of this run that completed.
    pub web_ms: Option<f64>,
    pub web_pages: usize,
    /// Of those, the pages whose every object arrived.
    pub web_completed: usize,
    /// Goodput of the FTP, or of all P2P flows together, over the window.
    pub ftp_mbps: f64,
    /// Goodput of each download over the window.
    pub download_mbps: Vec<f64>,
    /// Mean one-way delay of the game's downstream packets in the window.
    pub game_down_ms: Option<f64>,
    pub voip_loss: Option<f64>,
    /// Packets the AP's queue dropped over the run.
    pub ap_drops: u64,
    /// Fraction of the run's time the channel carried the AP's and the stations' frames.
    pub ap_airtime_share: f64,
    pub station_airtime_share: f64,
}

fn build_qdisc(c: &RunConfig, downloads: &[FlowKey]) -> Result<Box<dyn Qdisc<Content>>> {
    let limit = Limit::packets(c.queue_packets);
    Ok(match c.discipline {
        QdiscKind::Fifo => Box::new(Fifo::new(limit)?),
        QdiscKind::Chap => Box::new(Chap::new(ChapConfig {
            increment: Duration::from_secs_f64(c.increment_ms / 1e3),
            limit,
            ..ChapConfig::default()
        })?),
        // Two classes (seed §6.8): the delay-sensitive applications, then FTP.
        QdiscKind::Spq => Box::new(Spq::new(SpqConfig {
            bands: 2,
            rules: downloads
                .iter()
                .map(|d| SpqRule {
                    band: 1,
                    protocol: Some(d.protocol),
                    src: Some(d.src),
                    src_ports: Some(d.src_port..=d.src_port),
                    ..SpqRule::default()
                })
                .collect(),
            default_band: 0,
            limit,
        })?),
        QdiscKind::FqCodel => Box::new(FqCodel::new(FqCodelConfig {
            limit,
            ..FqCodelConfig::default()
        })?),
    })
}

/// Sub-seeds of a run's seed, one per random process.
fn sub_seed(seed: u64, k: u64) -> u64 {
    seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(k.wrapping_mul(0xbf58_476d_1ce4_e5b9))
}

/// The Web's pages, each a download over a connection of its own, in click order. Pages
/// are requested open loop: each a reading time after the previous request. A page is its
/// HTML object and, when it has embedded objects, one more response for their sum, whose
/// request is pipelined behind the first (seed §6.1.4).
fn web_pages(c: &RunConfig) -> Result<Vec<Download>> {
    let s = &c.schedule;
    let pages = WebPages::new(WebParams::default(), sub_seed(c.seed, 4)).map_err(|e| anyhow!(e))?;
    let mut downloads = Vec::new();
    let mut t = secs(s.apps_start_s);
    for (i, page) in pages.enumerate() {
        if t >= secs(s.window_end_s) {
            break;
        }
        let port = 1024 + (i % 60_000) as u16;
        let flow = FlowKey::tcp([10, 0, 3, 1], 80, [10, 1, 0, 3], port);
        let request = page.request_bytes + page.embedded_request_bytes.unwrap_or(0);
        let bytes = page.html_bytes + page.embedded_bytes;
        downloads.push(Download::page(flow, t, request, bytes));
        t += page.reading;
    }
    Ok(downloads)
}

/// The UDP applications: game, VoIP and video from the applications' start.
fn udp_sources(c: &RunConfig) -> Result<Vec<UdpSource>> {
    let start = secs(c.schedule.apps_start_s);
    let stop = secs(c.schedule.end_s);
    let video = VideoSource::new(
        VideoParams {
            fec: c.fec,
            ..VideoParams::default()
        },
        sub_seed(c.seed, 3),
    )
    .map_err(|e| anyhow!(e))?;
    Ok(vec![
        UdpSource::new(
            UdpApp::Game,
            start,
            stop,
            Box::new(apps::game(sub_seed(c.seed, 1))),
        ),
        UdpSource::new(
            UdpApp::Voip,
            start,
            stop,
            Box::new(apps::voip(sub_seed(c.seed, 2))),
        ),
        UdpSource::new(UdpApp::Video, start, stop, Box::new(video)),
    ]
    .into_iter()
    .filter(|s| c.scenario.runs(s.app))
    .collect())
}

/// Run one configuration.
pub fn run(c: &RunConfig) -> Result<RunResult> {
    c.schedule.validate()?;
    for d in [c.distance_m, c.ftp_distance_m] {
        if !(d.is_finite() && d >= 0.0) {
            return Err(anyhow!("distance must be >= 0 m, got {d}"));
        }
    }
    if let Scenario::Fairness {
        ftp1_latency_ms, ..
    } = c.scenario
    {
        if Duration::from_millis(u64::from(ftp1_latency_ms)) < Wiring::default().latency {
            return Err(anyhow!(
                "FTP 1 latency must be at least the wiring's {:?}, got {ftp1_latency_ms} ms",
                Wiring::default().latency
            ));
        }
    }
    let phy = Phy::dot11g(54.0);
    let near = Channel::at_distance(c.distance_m, &Shadowing::dissertation())?;
    let mut channels = [near; STATIONS];
    channels[FTP_STATION] = Channel::at_distance(c.ftp_distance_m, &Shadowing::dissertation())?;
    let window = c.schedule.window();
    let keys = c.scenario.downloads();
    let mut downloads: Vec<Download> = keys
        .iter()
        .map(|&k| Download::bulk(k, secs(c.schedule.ftp_start_s), window))
        .collect();
    if let Scenario::Fairness {
        ftp1_latency_ms,
        tcp,
    } = c.scenario
    {
        // FTP 1 on the otherwise idle Web station, as Application 1 of the schedule.
        channels[WEB_STATION] = channels[FTP_STATION];
        let first = &mut downloads[0];
        first.station = WEB_STATION;
        first.start = secs(c.schedule.apps_start_s);
        first.extra_latency =
            Duration::from_millis(u64::from(ftp1_latency_ms)) - Wiring::default().latency;
        for d in &mut downloads {
            d.sender = Sender::new(tcp);
        }
    }
    if c.scenario.runs_web() {
        downloads.extend(web_pages(c)?);
    }
    let mut ap = AccessPoint::new(
        Wiring::default(),
        build_qdisc(c, &keys).with_context(|| format!("{} queue", c.discipline))?,
        Transmitter::new(phy, sub_seed(c.seed, 5))?,
        Transmitter::new(phy, sub_seed(c.seed, 6))?,
        channels,
        udp_sources(c)?,
        downloads,
    );
    let end = secs(c.schedule.end_s);
    ap.run_until(end);

    let pages: Vec<PageFetch> = ap
        .downloads
        .iter()
        .filter(|d| d.start >= window.0 && d.start < window.1)
        .filter_map(|d| {
            let page = d.page?;
            Some(PageFetch {
                requested: d.start,
                completed: page.completed,
            })
        })
        .collect();
    let web_ms = horde_analyze::quality::mean_response_time_ms(&pages).ok();
    let runs = |app| c.scenario.runs(app);
    let log = &ap.log;
    let in_window = |s: &&Sent| s.at >= window.0 && s.at < window.1;
    let voip: Vec<Option<f64>> = log
        .down(UdpApp::Voip)
        .iter()
        .filter(in_window)
        .map(Sent::owd_ms)
        .collect();
    let voip_lost = voip.iter().filter(|d| d.is_none()).count();
    let game_down: Vec<f64> = log
        .down(UdpApp::Game)
        .iter()
        .filter(in_window)
        .filter_map(Sent::owd_ms)
        .collect();
    let span = (window.1 - window.0).as_secs_f64();
    let end_s = secs(c.schedule.end_s).as_secs_f64();
    let bulk = || ap.downloads.iter().filter(|d| d.page.is_none());
    let ftp_bytes: u64 = bulk().map(|d| d.bytes_in_window).sum();
    Ok(RunResult {
        config: *c,
        game_mos: runs(UdpApp::Game)
            .then(|| windowed_game_mos(log, window))
            .transpose()?,
        voip_mos: runs(UdpApp::Voip)
            .then(|| voip_mos(&voip, JITTER_BUFFER_MS))
            .transpose()?,
        video_fps: runs(UdpApp::Video)
            .then(|| video_fps(log.down(UdpApp::Video), window))
            .transpose()?,
        web_ms,
        web_pages: pages.len(),
        web_completed: pages.iter().filter(|p| p.completed.is_some()).count(),
        pages,
        ftp_mbps: ftp_bytes as f64 * 8.0 / span / 1e6,
        download_mbps: bulk()
            .map(|d| d.bytes_in_window as f64 * 8.0 / span / 1e6)
            .collect(),
        game_down_ms: runs(UdpApp::Game)
            .then(|| game_down.iter().sum::<f64>() / game_down.len().max(1) as f64),
        voip_loss: runs(UdpApp::Voip).then(|| voip_lost as f64 / voip.len().max(1) as f64),
        ap_drops: ap.ap_drops,
        ap_airtime_share: ap.ap_airtime.as_secs_f64() / end_s,
        station_airtime_share: ap.station_airtime.as_secs_f64() / end_s,
    })
}

/// The G-model MOS per [`GAME_WINDOW`] of the measurement window, averaged.
fn windowed_game_mos(log: &UdpLog, window: (Duration, Duration)) -> Result<f64> {
    let owds = |sent: &[Sent], from: Duration, to: Duration| -> Vec<Option<f64>> {
        sent.iter()
            .filter(|s| s.at >= from && s.at < to)
            .map(Sent::owd_ms)
            .collect()
    };
    let mut scores = Vec::new();
    let mut from = window.0;
    while from < window.1 {
        let to = (from + GAME_WINDOW).min(window.1);
        let down = owds(log.down(UdpApp::Game), from, to);
        let up = owds(log.up(UdpApp::Game), from, to);
        if !down.is_empty() && !up.is_empty() {
            scores.push(game_mos(&down, &up)?);
        }
        from = to;
    }
    if scores.is_empty() {
        return Err(anyhow!("game MOS: no game packets in the window"));
    }
    let mos = scores.iter().sum::<f64>() / scores.len() as f64;
    debug_assert!(mos <= G_MODEL_MAX);
    Ok(mos)
}

/// Playable frames sent in the window, per second. Playability is decided over the
/// whole stream, so a B frame at the window's edge keeps its next anchor.
fn video_fps(sent: &[Sent], window: (Duration, Duration)) -> Result<f64> {
    let mut frames: Vec<(Duration, VideoFrame)> = Vec::new();
    for s in sent {
        let info = s
            .frame
            .ok_or_else(|| anyhow!("a video packet without its frame"))?;
        let n = info.frame as usize;
        while frames.len() <= n {
            frames.push((
                s.at,
                VideoFrame {
                    kind: FrameKind::I,
                    needed: 1,
                    arrived: 0,
                },
            ));
        }
        let f = &mut frames[n];
        f.0 = s.at;
        f.1.kind = match info.kind {
            FrameType::I => FrameKind::I,
            FrameType::P => FrameKind::P,
            FrameType::B => FrameKind::B,
        };
        f.1.needed = info.needed;
        f.1.arrived += u32::from(s.arrived.is_some());
    }
    let ok = playable(&frames.iter().map(|f| f.1).collect::<Vec<_>>());
    let played = frames
        .iter()
        .zip(ok)
        .filter(|((at, _), ok)| *ok && *at >= window.0 && *at < window.1)
        .count();
    Ok(played as f64 / (window.1 - window.0).as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brief() -> Schedule {
        Schedule {
            apps_start_s: 0.0,
            ftp_start_s: 1.0,
            window_start_s: 2.0,
            window_end_s: 8.0,
            end_s: 9.0,
        }
    }

    #[test]
    fn a_seed_fixes_the_run_and_another_seed_changes_it() {
        let config = |seed| RunConfig::table_6_10(QdiscKind::Chap, Fec::Small, seed, brief());
        let json = |seed| serde_json::to_string(&run(&config(seed)).unwrap()).unwrap();
        let a = json(7);
        assert_eq!(a, json(7));
        assert_ne!(a, json(8));
    }

    #[test]
    fn bad_schedules_and_distances_are_refused_with_what_was_wrong() {
        let mut c = RunConfig::table_6_10(QdiscKind::Fifo, Fec::None, 1, brief());
        c.schedule.window_end_s = 1.0;
        let err = run(&c).unwrap_err().to_string();
        assert!(err.contains("window start < window end"), "{err}");
        let mut c = RunConfig::table_6_10(QdiscKind::Fifo, Fec::None, 1, brief());
        c.distance_m = -1.0;
        let err = run(&c).unwrap_err().to_string();
        assert!(err.contains("distance must be >= 0 m"), "{err}");
        let mut c = RunConfig::table_6_10(QdiscKind::Chap, Fec::None, 1, brief());
        c.queue_packets = 1;
        let err = format!("{:#}", run(&c).unwrap_err());
        assert!(err.contains("chap limit"), "{err}");
    }
}
