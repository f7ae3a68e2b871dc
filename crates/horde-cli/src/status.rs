//! `horde status`: a `wg show`-style view of a running `horde send`, `horde recv` or
//! `horde tunnel client|server`.
//!
//! A process started with `--status FILE` rewrites FILE once a second with a JSON
//! snapshot of its peers and their channels (written to a temporary file and renamed, so
//! a reader never sees half of one). `horde status FILE` reads it and prints it; a file
//! is a simpler rendezvous than a control socket, works for any number of readers, and
//! leaves the last state behind when the process ends (marked stale).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use horde_config::input::Kind;
use horde_crypto::KeyStatus;
use horde_net::{ChannelStatus, ConnectionHandle};
use horde_proto::recovery::RecoveryStats;
use horde_proto::SessionStats;
use serde::{Deserialize, Serialize};

/// How often a running process rewrites its status file.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(1);

/// A snapshot older than this many intervals means the writer has stopped.
const STALE_AFTER_INTERVALS: u64 = 3;

#[derive(clap::Args)]
pub struct Args {
    /// Status file written by `horde send|recv|tunnel client|tunnel server --status FILE`.
    file: PathBuf,
    /// Print the snapshot as JSON instead of the text view.
    #[arg(long)]
    json: bool,
}

/// What a status file holds.
#[derive(Debug, Serialize, Deserialize)]
pub struct Snapshot {
    /// `send`, `recv`, `tunnel client` or `tunnel server`.
    pub role: String,
    pub pid: u32,
    /// This host's public key.
    pub public_key: String,
    /// When the snapshot was taken, ms since the Unix epoch.
    pub updated_unix_ms: u64,
    pub peers: Vec<PeerStatus>,
}

/// One peer (connection) of the process.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerStatus {
    /// The peer's public key.
    pub key: String,
    /// The peer's name in the configuration (a tunnel server's clients), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Seconds since the handshake that opened this connection completed.
    pub handshake_age_s: f64,
    /// Whether the session has ended (the peer closed, timed out or was replaced).
    pub closed: bool,
    pub session: Option<SessionCounters>,
    /// What loss recovery did on the connection; absent when no stream uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryCounters>,
    /// Where the session's keys stand in their rotation; absent between sessions.
    #[serde(default)]
    pub keys: Option<KeyRow>,
    pub channels: Vec<ChannelRow>,
}

/// The secure layer's key rotation, for one peer.
#[derive(Debug, Serialize, Deserialize)]
pub struct KeyRow {
    /// Rotations of our sending key since the handshake (0: the handshake's key).
    pub generation: u64,
    /// Rotations of the peer's sending key seen.
    pub peer_generation: u64,
    /// Seconds since our sending key first sealed a datagram (absent before it has).
    pub age_s: Option<f64>,
    /// Datagrams sealed under our sending key.
    pub messages: u64,
    /// Seconds until the key rotates on age (at the first datagram after that).
    pub rotate_in_s: Option<f64>,
    /// Datagrams until the key rotates on count.
    pub rotate_after_messages: u64,
}

impl From<KeyStatus> for KeyRow {
    fn from(k: KeyStatus) -> Self {
        Self {
            generation: k.send_generation,
            peer_generation: k.recv_generation,
            age_s: k.send_key_age.map(|d| d.as_secs_f64()),
            messages: k.send_key_messages,
            rotate_in_s: k.rotate_in.map(|d| d.as_secs_f64()),
            rotate_after_messages: k.rotate_after_messages,
        }
    }
}

/// The session counters the view shows.
#[derive(Debug, Serialize, Deserialize)]
pub struct SessionCounters {
    pub adus_sent: u64,
    pub adus_acked: u64,
    pub adus_lost: u64,
    pub adus_received: u64,
}

impl From<SessionStats> for SessionCounters {
    fn from(s: SessionStats) -> Self {
        Self {
            adus_sent: s.adus_sent,
            adus_acked: s.adus_acked,
            adus_lost: s.adus_lost,
            adus_received: s.adus_received,
        }
    }
}

/// The loss-recovery counters the metrics export: the connection's redundancy and what
/// it repaired, summed over its streams, both directions.
#[derive(Debug, Serialize, Deserialize)]
pub struct RecoveryCounters {
    /// Data ADUs sent (first copies) and their payload bytes.
    pub data_sent: u64,
    pub data_bytes: u64,
    /// Coded (redundant) ADUs sent and their frame bytes.
    pub coded_sent: u64,
    pub coded_bytes: u64,
    /// Data ADUs sent again after a loss report.
    pub retransmitted: u64,
    /// Data ADUs rebuilt from coded ones here.
    pub recovered: u64,
    /// Sequence numbers given up on here.
    pub lost: u64,
}

impl From<RecoveryStats> for RecoveryCounters {
    fn from(s: RecoveryStats) -> Self {
        Self {
            data_sent: s.data_sent,
            data_bytes: s.data_bytes,
            coded_sent: s.coded_sent,
            coded_bytes: s.coded_bytes,
            retransmitted: s.retransmitted,
            recovered: s.recovered,
            lost: s.lost,
        }
    }
}

/// One channel, flattened for the file.
#[derive(Debug, Serialize, Deserialize)]
pub struct ChannelRow {
    pub id: u8,
    pub interface: u16,
    pub endpoint: String,
    pub state: String,
    pub rtt_ms: Option<f64>,
    pub rate_kbps: f64,
    pub loss: f64,
    pub congestion: String,
    pub packets_sent: u64,
    pub bytes_sent: u64,
    /// Packets of ours the peer acknowledged (acks that came after the packet was
    /// declared lost included): what a sender's channel carried.
    #[serde(default)]
    pub packets_acked: u64,
    /// Data packets and pings from the peer: what a receiver's channel carried (a
    /// sender gets only acks, which are not counted).
    pub packets_received: u64,
    pub lost: u64,
    /// The queueing budget a stream's latency bound holds the channel to, ms, while it
    /// does; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_budget_ms: Option<f64>,
}

impl From<&ChannelStatus> for ChannelRow {
    fn from(c: &ChannelStatus) -> Self {
        Self {
            id: u8::from(c.id),
            interface: c.interface,
            endpoint: c.remote.to_string(),
            state: if c.alive { "up" } else { "down" }.into(),
            rtt_ms: c.srtt_ms,
            rate_kbps: c.rate_bytes_per_s * 8.0 / 1e3,
            loss: c.loss,
            congestion: c.congestion.into(),
            packets_sent: c.stats.packets_sent,
            bytes_sent: c.stats.bytes_sent,
            packets_acked: c.stats.acked + c.stats.late_acked,
            packets_received: c.stats.packets_received,
            lost: c.stats.lost,
            queue_budget_ms: c.queue_budget_ms,
        }
    }
}

/// A connection the status writer reports on.
struct Tracked {
    key: String,
    name: Option<String>,
    since: Instant,
    handle: ConnectionHandle,
}

/// The connections of a process, shared between whoever accepts or opens them and the
/// status writer.
#[derive(Clone, Default)]
pub struct Registry(Arc<Mutex<Vec<Tracked>>>);

impl Registry {
    /// Report on a connection whose handshake has just completed.
    pub fn track(&self, key: String, handle: ConnectionHandle) {
        let mut list = self.0.lock().expect("status registry lock");
        list.push(Tracked {
            key,
            name: None,
            since: Instant::now(),
            handle,
        });
    }

    /// Report on a named peer's connection whose handshake has just completed, in place
    /// of that peer's earlier one (a tunnel client that reconnected is one peer).
    pub fn track_named(&self, name: String, key: String, handle: ConnectionHandle) {
        let mut list = self.0.lock().expect("status registry lock");
        list.retain(|t| t.key != key);
        list.push(Tracked {
            key,
            name: Some(name),
            since: Instant::now(),
            handle,
        });
    }

    pub(crate) async fn snapshot(&self, role: &str, public_key: &str) -> Snapshot {
        type Row = (String, Option<String>, Instant, ConnectionHandle);
        let tracked: Vec<Row> = {
            let list = self.0.lock().expect("status registry lock");
            list.iter()
                .map(|t| (t.key.clone(), t.name.clone(), t.since, t.handle.clone()))
                .collect()
        };
        let mut peers = Vec::with_capacity(tracked.len());
        for (key, name, since, handle) in tracked {
            // A connection whose host is gone answers neither; it is shown closed.
            let channels = handle.channels().await;
            let session = handle.stats().await.ok().map(SessionCounters::from);
            let recovery = handle
                .recovery_stats()
                .await
                .ok()
                .flatten()
                .map(RecoveryCounters::from);
            let keys = handle.key_status().await.ok().flatten().map(KeyRow::from);
            peers.push(PeerStatus {
                key,
                name,
                handshake_age_s: since.elapsed().as_secs_f64(),
                closed: channels.is_err(),
                session,
                recovery,
                keys,
                channels: channels
                    .unwrap_or_default()
                    .iter()
                    .map(ChannelRow::from)
                    .collect(),
            });
        }
        Snapshot {
            role: role.into(),
            pid: std::process::id(),
            public_key: public_key.into(),
            updated_unix_ms: unix_ms(),
            peers,
        }
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Rewrite `path` every [`STATUS_INTERVAL`] until the task is aborted.
pub fn spawn_writer(
    path: PathBuf,
    role: &'static str,
    public_key: String,
    registry: Registry,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let snap = registry.snapshot(role, &public_key).await;
            if let Err(e) = write_atomically(&path, &snap) {
                tracing::warn!(file = %path.display(), error = %e, "cannot write the status file");
            }
            tokio::time::sleep(STATUS_INTERVAL).await;
        }
    })
}

fn write_atomically(path: &Path, snap: &Snapshot) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, serde_json::to_vec_pretty(snap)?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

pub fn run(args: Args) -> Result<ExitCode> {
    let text = horde_config::input::read_to_string(&args.file, Kind::STATUS)
        .with_context(|| format!("cannot read the status file {}", args.file.display()))?;
    let snap: Snapshot = serde_json::from_str(&text).map_err(|e| {
        let (line, col) = position(&e);
        anyhow::anyhow!(
            "{}:{line}:{col}: not a horde status file: {}",
            args.file.display(),
            message(&e)
        )
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&snap)?);
    } else {
        print!("{}", render(&snap, unix_ms()));
    }
    Ok(ExitCode::SUCCESS)
}

/// Where a parse error is, as 1-based line and column like every file error. serde_json
/// gives the column of the last character it read, 0 when that was a newline or nothing;
/// a file that ends too early is wrong just past its last character.
fn position(e: &serde_json::Error) -> (usize, usize) {
    let col = match e.classify() {
        serde_json::error::Category::Eof => e.column() + 1,
        _ => e.column().max(1),
    };
    (e.line(), col)
}

/// A parse error's message without serde_json's own ` at line L column C`.
fn message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let at = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&at).unwrap_or(&text).to_string()
}

/// The text view, in the manner of `wg show`.
fn render(s: &Snapshot, now_ms: u64) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let age_ms = now_ms.saturating_sub(s.updated_unix_ms);
    let stale = age_ms > STALE_AFTER_INTERVALS * STATUS_INTERVAL.as_millis() as u64;
    let _ = writeln!(out, "horde {} (pid {})", s.role, s.pid);
    let _ = writeln!(out, "  public key: {}", s.public_key);
    if stale {
        let _ = writeln!(
            out,
            "  stale: last updated {:.0} s ago; the process may have ended",
            age_ms as f64 / 1e3
        );
    }
    for p in &s.peers {
        let _ = writeln!(out, "\npeer: {}", p.key);
        if let Some(name) = &p.name {
            let _ = writeln!(out, "  name: {name}");
        }
        let _ = writeln!(
            out,
            "  latest handshake: {} ago{}",
            ago(p.handshake_age_s),
            if p.closed { " (session ended)" } else { "" }
        );
        if let Some(c) = &p.session {
            let _ = writeln!(
                out,
                "  ADUs: {} sent, {} acked, {} lost, {} received",
                c.adus_sent, c.adus_acked, c.adus_lost, c.adus_received
            );
        }
        if let Some(k) = &p.keys {
            let _ = writeln!(out, "  {}", keys_line(k));
        }
        for c in &p.channels {
            let rtt = c
                .rtt_ms
                .map_or_else(|| "-".to_string(), |r| format!("{r:.1} ms"));
            let _ = writeln!(
                out,
                "  channel {}: endpoint {} via interface {}, {}, rtt {rtt}, rate {:.0} kbit/s ({}), \
                 sent {} packets ({}), {} acked, received {}, lost {} ({:.1}% loss)",
                c.id,
                c.endpoint,
                c.interface,
                c.state,
                c.rate_kbps,
                c.congestion,
                c.packets_sent,
                bytes(c.bytes_sent),
                c.packets_acked,
                c.packets_received,
                c.lost,
                c.loss * 100.0
            );
            if let Some(b) = c.queue_budget_ms {
                let _ = writeln!(out, "    queue bounded to {b:.0} ms for a latency bound");
            }
        }
    }
    out
}

/// `keys: generation 3 (peer 2), 12.0 s old, 480 datagrams; next rotation in 108.0 s or
/// after N datagrams`.
fn keys_line(k: &KeyRow) -> String {
    let secs = |s: Option<f64>| s.map_or_else(|| "-".to_string(), |s| format!("{s:.1} s"));
    let next = match k.rotate_in_s {
        Some(s) => format!("in {s:.1} s or after {} datagrams", k.rotate_after_messages),
        None => format!(
            "timer starts at first use, or after {} datagrams",
            k.rotate_after_messages
        ),
    };
    format!(
        "keys: generation {} (peer {}), {} old, {} datagrams; next rotation {next}",
        k.generation,
        k.peer_generation,
        secs(k.age_s),
        k.messages
    )
}

fn ago(s: f64) -> String {
    let s = s.max(0.0) as u64;
    match s {
        0..=59 => format!("{s} seconds"),
        60..=3599 => format!("{} minutes, {} seconds", s / 60, s % 60),
        _ => format!("{} hours, {} minutes", s / 3600, (s % 3600) / 60),
    }
}

fn bytes(b: u64) -> String {
    match b {
        0..=1023 => format!("{b} B"),
        1024..=1_048_575 => format!("{:.1} KiB", b as f64 / 1024.0),
        _ => format!("{:.1} MiB", b as f64 / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_names_peers_and_channels_and_flags_stale_files() {
        let snap = Snapshot {
            role: "send".into(),
            pid: 7,
            public_key: "AAA".into(),
            updated_unix_ms: 10_000,
            peers: vec![PeerStatus {
                key: "BBB".into(),
                name: Some("bus-1".into()),
                handshake_age_s: 75.0,
                closed: false,
                session: None,
                recovery: None,
                keys: Some(KeyRow {
                    generation: 3,
                    peer_generation: 2,
                    age_s: Some(12.0),
                    messages: 480,
                    rotate_in_s: Some(108.04),
                    rotate_after_messages: 1000,
                }),
                channels: vec![ChannelRow {
                    id: 1,
                    interface: 0,
                    endpoint: "127.0.0.1:9".into(),
                    state: "up".into(),
                    rtt_ms: Some(12.34),
                    rate_kbps: 800.0,
                    loss: 0.02,
                    congestion: "cubic".into(),
                    packets_sent: 10,
                    bytes_sent: 2048,
                    packets_acked: 8,
                    packets_received: 3,
                    lost: 1,
                    queue_budget_ms: Some(65.0),
                }],
            }],
        };
        let fresh = render(&snap, 10_500);
        assert!(
            fresh.contains("\n    queue bounded to 65 ms for a latency bound\n"),
            "{fresh}"
        );
        assert!(fresh.contains("peer: BBB\n  name: bus-1\n"), "{fresh}");
        assert!(
            fresh.contains(
                "keys: generation 3 (peer 2), 12.0 s old, 480 datagrams; \
                 next rotation in 108.0 s or after 1000 datagrams"
            ),
            "{fresh}"
        );
        assert!(
            fresh.contains("latest handshake: 1 minutes, 15 seconds ago"),
            "{fresh}"
        );
        assert!(
            fresh.contains("channel 1: endpoint 127.0.0.1:9 via interface 0, up, rtt 12.3 ms"),
            "{fresh}"
        );
        assert!(
            fresh.contains("sent 10 packets (2.0 KiB), 8 acked, received 3, lost 1 (2.0% loss)"),
            "{fresh}"
        );
        assert!(!fresh.contains("stale"), "{fresh}");
        assert!(render(&snap, 20_000).contains("stale: last updated 10 s ago"));
    }
}
