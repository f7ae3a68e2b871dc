//! The `send` and `recv` files: their schemas, checked once parsed (see [`checks`]),
//! and the keys they name.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use horde_config::input::Kind;
use horde_crypto::{Keypair, PublicKey};
use horde_proto::{InFlightPolicy, SessionConfig};
use horde_workload::WorkloadSpec;
use serde::Deserialize;

mod checks;
pub mod messages;
pub use checks::{check_send, load_recv, load_send, matches_any_stream};
use horde_tunnel::channels::{device, ChannelEntry};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendConfig {
    /// Key file written by `horde keygen --out`.
    pub key_file: PathBuf,
    /// The receiver's public key.
    pub peer_key: String,
    #[serde(default = "default_service")]
    pub service: u32,
    #[serde(default)]
    pub seed: u64,
    #[serde(default = "default_duration")]
    pub duration_s: f64,
    #[serde(default)]
    pub session: SessionConfig,
    /// Scheduler name (see `horde sim --help`); default rrr.
    #[serde(default)]
    pub scheduler: Option<String>,
    /// Open a new session by itself, with backoff, when the receiver restarts, times
    /// out or becomes unreachable.
    #[serde(default = "default_reconnect")]
    pub reconnect: bool,
    /// With `reconnect`, how long to keep trying for a new session before giving up.
    #[serde(default = "default_reconnect_give_up")]
    pub reconnect_give_up_s: f64,
    pub channels: Vec<SendChannel>,
    /// Synthetic streams; none when the file only serves to send a file (`--file`).
    #[serde(default)]
    pub streams: Vec<SendStream>,
    /// Message queues besides the default one.
    #[serde(default)]
    pub message_queues: Vec<messages::MessageQueue>,
    /// A message workload, alone or beside the streams (docs/messages.md).
    #[serde(default)]
    pub messages: Vec<messages::MessageClass>,
}

/// A channel of `horde send`: 1200-byte ADUs unless its `mtu` says otherwise.
pub type SendChannel = ChannelEntry<1200>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendStream {
    pub id: u32,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub max_kbps: Option<f64>,
    #[serde(default)]
    pub ordered: bool,
    /// ADUs in flight when a session dies: `nack` (default) or `resend` on the next.
    #[serde(default)]
    pub on_reconnect: InFlightPolicy,
    /// The one-way delay the stream's ADUs should arrive within, ms
    /// (`StreamConfig::latency_bound_ms`).
    #[serde(default)]
    pub latency_bound_ms: Option<f64>,
    /// Without `latency_bound_ms`, take the bound the file's objectives imply for this
    /// stream (`horde_hose::latency_bound_ms`).
    #[serde(default)]
    pub latency_bound_from_objectives: bool,
    /// Each ADU on one channel or two (`StreamConfig::latency_copies`); 2 needs a bound.
    #[serde(default = "one_copy")]
    pub latency_copies: i64,
    /// Each ADU on the quickest channel's slot (`StreamConfig::quickest`).
    #[serde(default)]
    pub quickest: bool,
    /// Loss recovery (`StreamConfig::recovery`): `{ mode = "oec" }`, `"fec"` with a
    /// `percent`, `"retransmit"`, `"block"`; none by default.
    #[serde(default)]
    pub recovery: horde_proto::RecoveryConfig,
    pub workload: WorkloadSpec,
    #[serde(default)]
    pub objectives: Vec<PathBuf>,
}

fn one_copy() -> i64 {
    1
}

impl SendStream {
    /// The stream's latency bound: its own, or with `latency_bound_from_objectives` the
    /// tightest that `objectives` (every stream's: they belong to the session) imply.
    pub fn latency_bound(
        &self,
        objectives: &[horde_hose::CompiledObjective],
    ) -> std::result::Result<Option<f64>, String> {
        if self.latency_bound_ms.is_some() || !self.latency_bound_from_objectives {
            return Ok(self.latency_bound_ms);
        }
        match horde_hose::latency_bound_ms(objectives, self.id) {
            Some(ms) if horde_proto::LATENCY_BOUND_MS.contains(&ms) => Ok(Some(ms)),
            Some(ms) => Err(format!(
                "the objectives bound stream {}'s latency to {ms} ms, but latency_bound_ms must be 1 to 60000 ms",
                self.id
            )),
            None => Err(format!(
                "latency_bound_from_objectives is set, but no objective bounds stream {}'s latency \
                 (a goal `expected(x::latency) <= N` on all its ADUs, or `s::latency_ave <= N`)",
                self.id
            )),
        }
    }
}

/// Every objective of `streams`, compiled, in file order; `base` is where their paths
/// start.
pub fn compiled_objectives(
    streams: &[SendStream],
    base: &Path,
) -> Result<Vec<horde_hose::CompiledObjective>> {
    streams
        .iter()
        .flat_map(|s| &s.objectives)
        .map(|p| {
            horde_hose::load_compiled(&base.join(p))
                .with_context(|| format!("objective {}", p.display()))
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecvConfig {
    pub key_file: PathBuf,
    /// Public keys of senders allowed to connect.
    pub allowed_keys: Vec<String>,
    #[serde(default = "default_service")]
    pub service: u32,
    /// Seconds without data from a connected sender after which the receiver reports
    /// and exits; 0 disables.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_s: f64,
    /// How long the in-order delay measure waits for a missing ADU before giving it up.
    #[serde(default = "default_in_order_hold")]
    pub in_order_hold_ms: f64,
    /// This server's id behind a UDP load balancer, `ID/BYTES` (e.g. `7/1`): the
    /// sessions it accepts get indices that carry it (docs/load-balancing.md).
    #[serde(default)]
    pub server_id: Option<String>,
    /// Settings of every session the receiver accepts (keepalive, idle timeout...): a
    /// server of many quiet senders lengthens its keepalive so that idle sessions cost
    /// little.
    #[serde(default)]
    pub session: SessionConfig,
    pub interfaces: Vec<RecvInterface>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecvInterface {
    pub bind: SocketAddr,
    #[serde(default)]
    pub device: Option<String>,
}

fn default_service() -> u32 {
    1
}
fn default_duration() -> f64 {
    30.0
}
fn default_reconnect() -> bool {
    true
}
fn default_reconnect_give_up() -> f64 {
    60.0
}
fn default_idle_timeout() -> f64 {
    10.0
}
fn default_in_order_hold() -> f64 {
    100.0
}

/// The key pair in the key file `path` (relative to `base`). A file that others may
/// read or write gets a warning on stderr, as `wg` gives, since its private key is no
/// longer private.
pub fn read_key(path: &Path, base: &Path) -> Result<Keypair> {
    let path = base.join(path);
    let context = || format!("reading key file {}", path.display());
    let mut file = std::fs::File::open(&path).with_context(context)?;
    if let Some(warning) = exposed_key_warning(&path, &file.metadata().with_context(context)?) {
        eprintln!("{warning}");
    }
    let bytes = horde_config::input::read_file(&mut file, Kind::KEY).with_context(context)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{}: not a key file: it is not UTF-8 text", path.display()))?;
    text.parse::<Keypair>()
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The warning for a key file whose mode lets others than its owner at it, in `wg`'s
/// words ("world accessible" when anyone may, "group accessible" when its group may).
fn exposed_key_warning(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    let who = if mode & 0o007 != 0 {
        "world"
    } else if mode & 0o070 != 0 {
        "group"
    } else {
        return None;
    };
    Some(format!(
        "Warning: `{}' is {who} accessible (mode {mode:04o}); make it private with `chmod 600 {}`",
        path.display(),
        path.display()
    ))
}

/// A public key as a file writes it; errors start with `what`.
pub fn public_key(text: &str, what: &str) -> Result<PublicKey> {
    text.trim()
        .parse::<PublicKey>()
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// The directory a file's relative paths start from.
pub fn base_dir(config: &Path) -> PathBuf {
    config.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// A run length given in seconds: positive and at most a year.
pub fn seconds(s: f64) -> Result<Duration> {
    anyhow::ensure!(
        s.is_finite() && s > 0.0,
        "expected a positive number of seconds, got {}",
        horde_config::shown(s)
    );
    anyhow::ensure!(
        s <= horde_config::MAX_SECONDS,
        "expected at most {} seconds (a year), got {}",
        horde_config::MAX_SECONDS,
        horde_config::shown(s)
    );
    Ok(Duration::from_secs_f64(s))
}
