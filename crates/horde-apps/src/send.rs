//! The `send` application: one connection to a receiver over the file's channels, its
//! streams fed by synthetic workloads for a while, then drained and closed.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use horde_crypto::{Keypair, PublicKey};
use horde_net::{Connection, Host, HostConfig, NetError, Reconnect, SchedulerFactory};
use horde_proto::{CloseReason, StreamConfig};

use crate::config::{base_dir, public_key, read_key, seconds, SendChannel, SendConfig};
use crate::file::send::{FileSent, Progress as FileProgress};
use crate::file::source::Source;
use crate::file::wire::DATA_HEADER;
use crate::live::Live;
use crate::messages::send::{run_messages, ClassPlan, MessageInterval, MessageOutcome};
use crate::recent::Recent;
use crate::report::{books, SendInterval, SendReport, StreamBooks};
use crate::sender::{self, ConnEnd, StreamPlan};
use crate::shared_conn::{EventSource, RunConn};

/// How long a connection attempt waits for the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A checked send file with its keys read, its objectives compiled and its scheduler
/// chosen: ready to bind and connect.
pub struct Sender {
    cfg: SendConfig,
    keypair: Keypair,
    peer: PublicKey,
    duration: Duration,
    plans: Vec<StreamPlan>,
    scheduler: SchedulerFactory,
    max_adu: u32,
    channel_names: Vec<String>,
    reconnect_give_up: Duration,
    /// The message workload: its classes and the queues besides the default one.
    message_plans: Vec<ClassPlan>,
    message_queues: Vec<(String, u32)>,
}

/// A channel as the sender set it up.
pub struct ChannelSetup {
    pub name: String,
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// What a send run reports: its latest interval rows, the summary over the run, each
/// stream's books with their reasons, how many ADUs are in none of acked, lost,
/// dropped or abandoned, and how the connection ended.
pub struct SendOutcome {
    pub intervals: Recent<SendInterval>,
    pub summary: SendInterval,
    pub books: Vec<StreamBooks>,
    pub unaccounted: u64,
    pub end: ConnEnd,
    /// The service the sender asked for.
    pub service: u32,
}

/// What a run with messages reports: the messages' books, and the streams' outcome
/// when the file declares streams beside them.
pub struct MessagesOutcome {
    pub messages: MessageOutcome,
    pub streams: Option<SendOutcome>,
}

impl MessagesOutcome {
    /// The messages' verdict, or the streams' when the messages did what was asked
    /// and the streams did not.
    pub fn verdict(&self, service: u32) -> Verdict {
        let messages = self.messages.verdict(service);
        match &self.streams {
            Some(s) if messages == Verdict::Delivered => s.verdict(),
            _ => messages,
        }
    }
}

/// One interval's rows of a run with messages.
pub enum Row<'a> {
    Streams(&'a SendInterval),
    Messages(&'a MessageInterval),
}

/// Whether a send run did what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// ADUs were acked, and none was abandoned because the peer left.
    Delivered,
    /// The receiver does not serve the service asked for.
    ServiceRefused(u32),
    /// Not one ADU was acked.
    NothingAcked,
    /// The peer left (closed, crashed, became unreachable; reconnecting gave up or the
    /// run ended while it was away) with ADUs abandoned.
    PeerLeft(CloseReason),
}

impl SendOutcome {
    pub fn verdict(&self) -> Verdict {
        let acked: u64 = self.books.iter().map(|b| b.acked).sum();
        let abandoned: u64 = self
            .books
            .iter()
            .map(|b| b.abandoned + b.dropped_after_end)
            .sum();
        match self.end.peer_left() {
            Some(CloseReason::ServiceRefused) => Verdict::ServiceRefused(self.service),
            _ if acked == 0 => Verdict::NothingAcked,
            Some(reason) if abandoned > 0 => Verdict::PeerLeft(reason),
            _ => Verdict::Delivered,
        }
    }
}

impl MessageOutcome {
    /// Whether the message run did what was asked: as [`SendOutcome::verdict`], with
    /// delivered messages in place of acked ADUs and messages without a fate in place of
    /// abandoned ADUs.
    pub fn verdict(&self, service: u32) -> Verdict {
        match self.end.peer_left() {
            Some(CloseReason::ServiceRefused) => Verdict::ServiceRefused(service),
            _ if self.delivered() == 0 => Verdict::NothingAcked,
            Some(reason) if self.abandoned() > 0 => Verdict::PeerLeft(reason),
            _ => Verdict::Delivered,
        }
    }
}

impl Sender {
    /// `cfg` was read from `path` (its relative paths start there); `duration`, in
    /// seconds, overrides the file's.
    pub fn new(cfg: SendConfig, path: &Path, duration: Option<f64>) -> Result<Self> {
        let base = base_dir(path);
        let keypair = read_key(&cfg.key_file, &base)?;
        let peer = public_key(&cfg.peer_key, "peer_key")?;
        let duration = seconds(duration.unwrap_or(cfg.duration_s))?;
        let reconnect_give_up = seconds(cfg.reconnect_give_up_s).context("reconnect_give_up_s")?;
        let compiled = crate::config::compiled_objectives(&cfg.streams, &base)?;
        let plans = cfg
            .streams
            .iter()
            .map(|s| {
                let latency_bound_ms = s.latency_bound(&compiled).map_err(anyhow::Error::msg)?;
                Ok(StreamPlan {
                    id: s.id,
                    name: s.name.clone().unwrap_or_else(|| format!("stream {}", s.id)),
                    config: StreamConfig {
                        max_kbps: s.max_kbps,
                        ordered: s.ordered,
                        on_reconnect: s.on_reconnect,
                        latency_bound_ms,
                        latency_copies: u8::try_from(s.latency_copies).unwrap_or(0),
                        quickest: s.quickest,
                        recovery: s.recovery.clone(),
                        ..StreamConfig::default()
                    },
                    workload: s.workload.clone(),
                    objectives: s
                        .objectives
                        .iter()
                        .map(|p| crate::hose::load(&base.join(p)))
                        .collect::<Result<_>>()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let scheduler = crate::hose::scheduler(cfg.scheduler.as_deref().unwrap_or("rrr"))?;
        let max_adu = cfg.channels.iter().map(|c| c.mtu).min().unwrap_or(1200);
        let channel_names = cfg
            .channels
            .iter()
            .enumerate()
            .map(|(i, c)| c.name.clone().unwrap_or_else(|| format!("ch{i}")))
            .collect();
        let message_plans = cfg
            .messages
            .iter()
            .enumerate()
            .map(|(i, c)| ClassPlan::new(i, c))
            .collect();
        let message_queues = cfg
            .message_queues
            .iter()
            .map(|q| (q.name.clone(), q.weight as u32))
            .collect();
        Ok(Self {
            cfg,
            keypair,
            peer,
            duration,
            plans,
            scheduler,
            max_adu,
            channel_names,
            reconnect_give_up,
            message_plans,
            message_queues,
        })
    }

    pub fn our_key(&self) -> PublicKey {
        *self.keypair.public()
    }

    pub fn peer(&self) -> PublicKey {
        self.peer
    }

    /// The service the sender asks for.
    pub fn service(&self) -> u32 {
        self.cfg.service
    }

    /// The receiver's key as the file wrote it.
    pub fn peer_key_text(&self) -> &str {
        &self.cfg.peer_key
    }

    /// Bind a socket per channel.
    pub async fn bind(&self) -> Result<Host> {
        let mut host_cfg = HostConfig::new(
            self.keypair.clone(),
            SendChannel::interfaces(&self.cfg.channels),
        );
        host_cfg.session = self.cfg.session.clone();
        host_cfg.scheduler = Some(self.scheduler.clone());
        bind(host_cfg).await
    }

    /// Connect to the receiver; with `reconnect`, the connection outlives its sessions.
    pub async fn connect(&self, host: &Host) -> Result<Connection, NetError> {
        let target = SendChannel::connect_config(
            &self.cfg.channels,
            self.peer,
            self.cfg.service,
            HANDSHAKE_TIMEOUT,
        );
        if self.cfg.reconnect {
            let policy = Reconnect {
                give_up_after: self.reconnect_give_up,
                ..Reconnect::default()
            };
            host.connect_persistent(target, policy).await
        } else {
            host.connect(target).await
        }
    }

    /// The channels as bound, given the host's local addresses.
    pub fn channels(&self, locals: &[SocketAddr]) -> Vec<ChannelSetup> {
        self.cfg
            .channels
            .iter()
            .zip(&self.channel_names)
            .zip(locals)
            .map(|((c, name), local)| ChannelSetup {
                name: name.clone(),
                local: *local,
                remote: c.remote,
            })
            .collect()
    }

    /// The synthetic streams the file declares.
    pub fn stream_count(&self) -> usize {
        self.plans.len()
    }

    /// The `[[messages]]` classes the file declares.
    pub fn message_class_count(&self) -> usize {
        self.message_plans.len()
    }

    /// Run the message workload, and the streams beside it if the file declares any,
    /// for the run length or until Ctrl-C; let the live messages meet their fates and
    /// the streams drain, and close (see [`crate::messages::send`]). `row` gets each
    /// interval's rows, about once a second.
    pub async fn run_messages(
        &self,
        conn: Connection,
        row: impl FnMut(Row<'_>),
    ) -> Result<MessagesOutcome> {
        let (message_conn, stream_conn) =
            crate::messages::conn::open(conn, self.max_adu, !self.plans.is_empty()).await?;
        // Both runs are polled by this one task, in turn: the rows go out one at a time.
        let row = RefCell::new(row);
        let messages = run_messages(
            message_conn,
            &self.message_plans,
            &self.message_queues,
            self.duration,
            self.cfg.seed,
            |m| (row.borrow_mut())(Row::Messages(m)),
        );
        let Some(stream_conn) = stream_conn else {
            return Ok(MessagesOutcome {
                messages: messages.await?,
                streams: None,
            });
        };
        let streams = self.run_streams(stream_conn, |s| (row.borrow_mut())(Row::Streams(s)));
        let (messages, streams) = tokio::join!(messages, streams);
        Ok(MessagesOutcome {
            messages: messages?,
            streams: Some(streams?),
        })
    }

    /// Send what `source` reads, instead of the streams, until the receiver has checked
    /// it (see [`crate::file`]); `tick` gets progress once a second.
    pub async fn send_file(
        &self,
        conn: Connection,
        source: Source,
        tick: impl FnMut(&FileProgress),
    ) -> Result<FileSent> {
        let piece = self.max_adu as usize - DATA_HEADER;
        crate::file::send::send_file(conn, source.spawn(piece), rand::random(), tick).await
    }

    /// Run the streams for the run length or until Ctrl-C, drain and close; `row` gets
    /// each interval's rows, about once a second.
    pub async fn run(
        &self,
        conn: Connection,
        row: impl FnMut(&SendInterval),
    ) -> Result<SendOutcome> {
        self.run_streams(RunConn::alone(conn), row).await
    }

    /// [`Sender::run`] on a connection it may share with a message run.
    async fn run_streams(
        &self,
        conn: RunConn<impl EventSource>,
        mut row: impl FnMut(&SendInterval),
    ) -> Result<SendOutcome> {
        anyhow::ensure!(
            !self.plans.is_empty(),
            "the send file declares no [[streams]]: declare one, or send a file with --file"
        );
        let live = Arc::new(Mutex::new(Live::default()));
        let report = Arc::new(Mutex::new(SendReport::new(
            sender::names(&self.plans),
            self.channel_names.clone(),
        )));
        let (l2, r2) = (live.clone(), report.clone());
        let end = sender::run_streams(
            conn,
            &self.plans,
            self.duration,
            self.cfg.seed,
            self.max_adu,
            live.clone(),
            move |t| {
                let mut l = l2.lock().expect("live lock");
                let mut r = r2.lock().expect("report lock");
                let since = r.intervals.last().map_or(0.0, |i| i.end_s);
                if t.as_secs_f64() - since < 0.01 {
                    return; // nothing left of this interval
                }
                row(r.interval(&mut l, t));
            },
        )
        .await?;
        let mut l = live.lock().expect("live lock");
        // What the application offered after the last session ended was never taken.
        l.settle_after_end();
        let r = report.lock().expect("report lock");
        let ran = r
            .intervals
            .last()
            .map_or(self.duration, |i| Duration::from_secs_f64(i.end_s));
        let summary = r.summary(&l, ran);
        // Every ADU is acked, lost, dropped or abandoned.
        let books = books(&l, &sender::names(&self.plans));
        let unaccounted = books.iter().map(StreamBooks::unaccounted).sum();
        Ok(SendOutcome {
            intervals: r.intervals.clone(),
            summary,
            books,
            unaccounted,
            end,
            service: self.cfg.service,
        })
    }
}

/// Bind the host's sockets; a failure names the addresses (the OS error alone does not).
pub async fn bind(cfg: HostConfig) -> Result<Host> {
    let addresses: Vec<String> = cfg
        .interfaces
        .iter()
        .map(|i| match &i.device {
            Some(d) => format!("{} on {d}", i.bind),
            None => i.bind.to_string(),
        })
        .collect();
    Host::bind(cfg)
        .await
        .with_context(|| format!("cannot bind {}", addresses.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(acked: u64, abandoned: u64, end: ConnEnd) -> SendOutcome {
        let sent = acked + abandoned;
        SendOutcome {
            intervals: Recent::default(),
            summary: SendInterval {
                start_s: 0.0,
                end_s: 1.0,
                streams: Vec::new(),
                channels: Vec::new(),
            },
            books: vec![StreamBooks {
                id: 1,
                name: "s".into(),
                sent,
                acked,
                lost: 0,
                late_acked: 0,
                dropped: 0,
                dropped_queue_full: 0,
                dropped_removed: 0,
                dropped_after_end: 0,
                abandoned,
                abandoned_queued: abandoned,
                abandoned_in_flight: 0,
            }],
            unaccounted: 0,
            end,
            service: 7,
        }
    }

    #[test]
    fn the_verdict_says_whether_the_run_did_what_was_asked() {
        let closed = ConnEnd::default();
        let left = ConnEnd {
            peer_ended: Some(CloseReason::PeerClosed),
            ..ConnEnd::default()
        };
        let away = ConnEnd {
            away_at_close: Some(CloseReason::Unreachable),
            ..ConnEnd::default()
        };
        let refused = ConnEnd {
            peer_ended: Some(CloseReason::ServiceRefused),
            ..ConnEnd::default()
        };
        assert_eq!(outcome(10, 0, closed).verdict(), Verdict::Delivered);
        // A local close may abandon a few: the peer was there.
        assert_eq!(outcome(10, 2, closed).verdict(), Verdict::Delivered);
        assert_eq!(outcome(0, 0, closed).verdict(), Verdict::NothingAcked);
        assert_eq!(
            outcome(10, 2, left).verdict(),
            Verdict::PeerLeft(CloseReason::PeerClosed)
        );
        assert_eq!(
            outcome(10, 2, away).verdict(),
            Verdict::PeerLeft(CloseReason::Unreachable)
        );
        // The peer left after everything was acked: nothing was lost by it.
        assert_eq!(outcome(10, 0, left).verdict(), Verdict::Delivered);
        assert_eq!(outcome(0, 3, refused).verdict(), Verdict::ServiceRefused(7));
    }
}
