//! The `recv` application: accept senders on the file's interfaces and measure what
//! each delivers, until the senders are done, an idle timeout, a run length or Ctrl-C.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use horde_crypto::{Keypair, PublicKey};
use horde_emu::sys::SigintGuard;
use horde_net::messages::is_message_stream;
use horde_net::{Connection, ConnectionHandle, Host, HostConfig, InterfaceConfig, Listener};
use horde_proto::{CloseReason, Event};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::config::{base_dir, public_key, read_key, seconds, RecvConfig};
use crate::messages::recv::{MessageRx, MessageStats};
use crate::report::{RecvInterval, RecvReport};
use crate::stamp;

/// Interval of the periodic report rows.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// Finished connections whose summaries a server keeps; older ones are let go (and
/// counted), so that a server's memory does not grow with every connection it served.
const KEPT_FINISHED: usize = 100;
/// How often the receiver looks for Ctrl-C.
const SIGINT_POLL: Duration = Duration::from_millis(50);

/// A checked receive file with its keys read: ready to bind and serve.
pub struct Receiver {
    cfg: RecvConfig,
    keypair: Keypair,
    allowed: Vec<PublicKey>,
    until: Option<Duration>,
    idle: Option<Duration>,
    hold: Duration,
}

impl Receiver {
    /// `cfg` was read from `path` (its relative paths start there). `duration` (s)
    /// bounds the run; `idle_timeout` (s, 0 for none) overrides the file's.
    pub fn new(
        cfg: RecvConfig,
        path: &Path,
        duration: Option<f64>,
        idle_timeout: Option<f64>,
    ) -> Result<Self> {
        let base = base_dir(path);
        let keypair = read_key(&cfg.key_file, &base)?;
        let allowed = cfg
            .allowed_keys
            .iter()
            .enumerate()
            .map(|(i, k)| public_key(k, &format!("allowed_keys[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let until = duration.map(seconds).transpose()?;
        let idle_s = idle_timeout.unwrap_or(cfg.idle_timeout_s);
        anyhow::ensure!(
            idle_s.is_finite() && idle_s >= 0.0,
            "idle timeout must be 0 (off) or a positive number of seconds, got {idle_s}"
        );
        let idle = (idle_s > 0.0).then(|| Duration::from_secs_f64(idle_s));
        let hold = Duration::from_secs_f64(cfg.in_order_hold_ms.max(0.0) / 1e3);
        Ok(Self {
            cfg,
            keypair,
            allowed,
            until,
            idle,
            hold,
        })
    }

    pub fn our_key(&self) -> PublicKey {
        *self.keypair.public()
    }

    pub fn service(&self) -> u32 {
        self.cfg.service
    }

    /// Bind a socket per interface; only the allowed keys may connect.
    pub async fn bind(&self) -> Result<Host> {
        let mut host_cfg = HostConfig::new(
            self.keypair.clone(),
            self.cfg
                .interfaces
                .iter()
                .map(|i| InterfaceConfig {
                    bind: i.bind,
                    device: i.device.clone(),
                })
                .collect(),
        );
        host_cfg.allowed_peers = self.allowed.clone();
        host_cfg.session = self.cfg.session.clone();
        host_cfg.handshakes.server_id =
            self.cfg.server_id.as_deref().map(str::parse).transpose()?;
        crate::send::bind(host_cfg).await
    }

    /// The limits of a run starting now.
    pub fn limits<'a>(&self, sigint: &'a SigintGuard, server: bool) -> Limits<'a> {
        Limits {
            deadline: self.until.map(|d| Instant::now() + d),
            // A server outlives its senders, quiet or gone: no idle end to wake for.
            idle: if server { None } else { self.idle },
            sigint,
            server,
        }
    }

    /// The limits of a file transfer (`recv --out`) starting now.
    pub fn file_limits(&self) -> crate::file::recv::FileLimits {
        crate::file::recv::FileLimits {
            deadline: self.until.map(|d| Instant::now() + d),
            idle: self.idle,
        }
    }

    /// The loop that serves the senders.
    pub fn serve(&self) -> Serve {
        Serve::new(self.hold)
    }
}

/// When the receiver stops waiting.
pub struct Limits<'a> {
    deadline: Option<Instant>,
    idle: Option<Duration>,
    sigint: &'a SigintGuard,
    /// Keep serving when the last sender closes.
    server: bool,
}

/// Why the receiver stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Closed,
    Idle,
    Duration,
    Interrupted,
}

impl End {
    pub fn as_str(self) -> &'static str {
        match self {
            End::Closed => "sender closed",
            End::Idle => "idle timeout",
            End::Duration => "duration reached",
            End::Interrupted => "interrupted",
        }
    }
}

/// What the serving loop reports as it goes.
pub enum Progress<'a> {
    /// A sender connected.
    Connected {
        id: usize,
        peer: &'a str,
        handle: &'a ConnectionHandle,
    },
    /// A sender's session ended.
    Closed { id: usize, reason: CloseReason },
    /// The rows of an interval, over all senders.
    Row(&'a RecvInterval),
}

/// One accepted connection, as `recv` reports it.
pub struct SenderRx {
    id: usize,
    peer: String,
    report: RecvReport,
    /// Why its session ended, once it has.
    end: Option<CloseReason>,
    /// The summary of a connection that is over. Its report (histograms of some 15 kB
    /// each) is dropped then, so that a server's memory does not grow with every
    /// connection it has served.
    finished: Option<serde_json::Value>,
    /// Its partial messages.
    messages: MessageRx,
}

impl SenderRx {
    /// The connection is over: keep its summary only.
    fn finish(&mut self) {
        let summary = self.summarize();
        self.finished = Some(summary);
        self.report = RecvReport::new(Duration::ZERO, 0);
        self.messages = MessageRx::default();
    }

    /// The sender's id, key, end, first arrival and summary.
    pub fn summarize(&mut self) -> serde_json::Value {
        if let Some(done) = &self.finished {
            return done.clone();
        }
        let summary = self.report.summary();
        serde_json::json!({
            "id": self.id,
            "peer": self.peer,
            "end": self.end.map_or("open", CloseReason::as_str),
            "first_arrival_unix_us": self.report.first_arrival_us(),
            "summary": summary,
        })
    }
}

/// What a connection's forwarding task tells the server loop: an event, or that the
/// connection is over (`None`).
type FromSender = (usize, Option<Event>);

/// The receiver in server mode: every accepted connection is read at once by a task of
/// its own (so that it never holds its sender back needlessly), and its events are
/// counted per sender and in total.
pub struct Serve {
    hold: Duration,
    /// All senders together.
    pub all: RecvReport,
    /// The messages of all senders together.
    pub messages: MessageStats,
    /// The connections, by id (their order of acceptance).
    senders: BTreeMap<usize, SenderRx>,
    /// Connections accepted so far: the next id.
    accepted: usize,
    /// Finished connections still kept, oldest first.
    finished: VecDeque<usize>,
    /// Finished connections let go beyond [`KEPT_FINISHED`].
    senders_omitted: u64,
    open: usize,
    last_end: Option<CloseReason>,
}

impl Serve {
    fn new(hold: Duration) -> Self {
        Self {
            hold,
            all: RecvReport::new(hold, stamp::unix_micros()),
            messages: MessageStats::default(),
            senders: BTreeMap::new(),
            accepted: 0,
            finished: VecDeque::new(),
            senders_omitted: 0,
            open: 0,
            last_end: None,
        }
    }

    fn accepted(
        &mut self,
        mut conn: Connection,
        tx: &mpsc::UnboundedSender<FromSender>,
        progress: &mut impl FnMut(Progress<'_>),
    ) {
        let id = self.accepted;
        self.accepted += 1;
        let peer = conn.peer().map_or_else(|| "?".into(), ToString::to_string);
        progress(Progress::Connected {
            id,
            peer: &peer,
            handle: conn.handle(),
        });
        self.senders.insert(
            id,
            SenderRx {
                id,
                peer,
                report: RecvReport::new(self.hold, stamp::unix_micros()),
                end: None,
                finished: None,
                messages: MessageRx::default(),
            },
        );
        self.open += 1;
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(e) = conn.next_event().await {
                let last = matches!(e, Event::Closed { .. });
                let _ = tx.send((id, Some(e)));
                if last {
                    break;
                }
            }
            let _ = tx.send((id, None));
        });
    }

    /// Serve until every sender has closed or the idle timeout (neither for a server),
    /// the deadline or Ctrl-C. The idle timeout counts once a sender is connected.
    pub async fn run(
        &mut self,
        mut listener: Listener,
        limits: &Limits<'_>,
        mut progress: impl FnMut(Progress<'_>),
    ) -> End {
        let (tx, mut rx) = mpsc::unbounded_channel::<FromSender>();
        let mut next_row = Instant::now() + REPORT_EVERY;
        let mut idle_at: Option<Instant> = None;
        let mut listening = true;
        loop {
            let mut wake = Instant::now() + SIGINT_POLL;
            if self.any_sender() {
                wake = wake.min(next_row);
            }
            for t in [limits.deadline, idle_at].into_iter().flatten() {
                wake = wake.min(t);
            }
            tokio::select! {
                c = listener.accept(), if listening => match c {
                    Some(c) => {
                        self.accepted(c, &tx, &mut progress);
                        if self.accepted == 1 {
                            // Rows start with the first sender.
                            self.all = RecvReport::new(self.hold, stamp::unix_micros());
                            next_row = Instant::now() + REPORT_EVERY;
                        }
                        idle_at = limits.idle.map(|d| Instant::now() + d);
                    }
                    None => listening = false,
                },
                m = rx.recv() => match m {
                    Some((id, Some(Event::Received { stream, channel, payload, .. })))
                        if is_message_stream(stream) =>
                    {
                        let now = stamp::unix_micros();
                        self.all.on_message_adu(u8::from(channel), payload.len(), now);
                        if let Some(s) = self.senders.get_mut(&id) {
                            s.report.on_message_adu(u8::from(channel), payload.len(), now);
                            s.messages.on_adu(payload, now, &mut self.messages);
                        }
                        idle_at = limits.idle.map(|d| Instant::now() + d);
                    }
                    Some((id, Some(Event::Received { stream, channel, payload, .. }))) => {
                        let now = stamp::unix_micros();
                        self.all.on_received(stream, u8::from(channel), &payload, now);
                        if let Some(s) = self.senders.get_mut(&id) {
                            s.report.on_received(stream, u8::from(channel), &payload, now);
                        }
                        idle_at = limits.idle.map(|d| Instant::now() + d);
                    }
                    Some((id, Some(Event::Closed { reason }))) => {
                        if let Some(s) = self.senders.get_mut(&id) {
                            s.end = Some(reason);
                        }
                        self.last_end = Some(reason);
                        progress(Progress::Closed { id, reason });
                    }
                    Some((id, None)) => {
                        self.finish_sender(id);
                        self.open -= 1;
                        let closed = matches!(
                            self.last_end,
                            Some(CloseReason::PeerClosed | CloseReason::LocalClose)
                        );
                        if self.open == 0 && closed && !limits.server {
                            return End::Closed;
                        }
                    }
                    Some(_) | None => {}
                },
                _ = tokio::time::sleep_until(wake) => {}
            }
            let now = Instant::now();
            if limits.sigint.interrupted() {
                return End::Interrupted;
            }
            if limits.deadline.is_some_and(|d| now >= d) {
                return End::Duration;
            }
            if idle_at.is_some_and(|t| now >= t) {
                return End::Idle;
            }
            if self.any_sender() && now >= next_row {
                next_row += REPORT_EVERY;
                let messages = &mut self.messages;
                let row = self
                    .all
                    .interval(stamp::unix_micros(), |secs| messages.interval(secs));
                progress(Progress::Row(row));
            }
        }
    }

    /// The partial interval since the last row, unless it is too short to rate.
    pub fn last_row(&mut self) -> Option<&RecvInterval> {
        let now = stamp::unix_micros();
        let since = self.all.intervals.last().map_or(0.0, |i| i.end_s);
        let messages = &mut self.messages;
        (self.all.secs(now) - since >= 0.01)
            .then(|| self.all.interval(now, |secs| messages.interval(secs)))
    }

    /// Each sender's summary, in the order they connected.
    pub fn sender_summaries(&mut self) -> Vec<serde_json::Value> {
        self.senders.values_mut().map(SenderRx::summarize).collect()
    }

    /// Whether any sender has connected.
    pub fn any_sender(&self) -> bool {
        self.accepted > 0
    }

    /// Finished connections whose summaries were let go to bound memory.
    pub fn senders_omitted(&self) -> u64 {
        self.senders_omitted
    }

    /// Connection `id` is over: its summary is kept, and of the finished connections
    /// only the latest [`KEPT_FINISHED`].
    fn finish_sender(&mut self, id: usize) {
        if let Some(s) = self.senders.get_mut(&id) {
            if s.finished.is_none() {
                s.finish();
                self.finished.push_back(id);
            }
        }
        while self.finished.len() > KEPT_FINISHED {
            let Some(old) = self.finished.pop_front() else {
                break;
            };
            self.senders.remove(&old);
            self.senders_omitted += 1;
        }
    }
}

#[cfg(test)]
mod sender_rx_tests {
    use super::*;

    fn adu(sent_us: u64, seq: u64) -> Vec<u8> {
        let mut p = sent_us.to_be_bytes().to_vec();
        p.extend_from_slice(&seq.to_be_bytes());
        p.resize(500, 0);
        p
    }

    #[test]
    fn a_server_keeps_the_latest_finished_connections_only() {
        let mut serve = Serve::new(Duration::from_millis(100));
        for id in 0..KEPT_FINISHED + 5 {
            serve.accepted += 1;
            let s = SenderRx {
                id,
                peer: "k".into(),
                report: RecvReport::new(Duration::from_millis(100), 1_000_000),
                end: Some(CloseReason::PeerClosed),
                finished: None,
                messages: MessageRx::default(),
            };
            serve.senders.insert(id, s);
            serve.finish_sender(id);
        }
        assert_eq!(serve.senders.len(), KEPT_FINISHED);
        assert_eq!(serve.senders_omitted(), 5);
        assert_eq!(serve.senders.keys().next(), Some(&5));
        assert_eq!(serve.sender_summaries().len(), KEPT_FINISHED);
    }

    #[test]
    fn a_finished_connection_keeps_its_summary_and_drops_its_report() {
        let mut s = SenderRx {
            id: 3,
            peer: "k".into(),
            report: RecvReport::new(Duration::from_millis(100), 1_000_000),
            end: Some(CloseReason::PeerClosed),
            finished: None,
            messages: MessageRx::default(),
        };
        for i in 0..50u64 {
            let at = 1_000_000 + i * 10_000;
            s.report.on_received(1, 0, &adu(at - 2_000, i), at);
        }
        s.finish();
        assert!(s.report.first_arrival_us().is_none(), "report not dropped");
        let v = s.summarize();
        assert_eq!(v["id"], 3);
        assert_eq!(v["end"], "peer closed");
        assert_eq!(v["first_arrival_unix_us"], 1_000_000);
        assert_eq!(v["summary"]["streams"][0]["received"], 50, "{v}");
    }
}
