//! Horde's application API in one crate: bond several links (cellular modems, Wi-Fi,
//! Ethernet) into one authenticated, encrypted connection, stripe your data over all of
//! them, and tell the scheduler what each stream cares about in the `hose` objective
//! language.
//!
//! This crate only re-exports the runtime ([`Host`], [`Connection`]), the protocol's
//! types ([`StreamConfig`], [`Event`]), keys ([`Keypair`]) and the objective compiler
//! ([`compile_objective`]), so that one dependency is enough:
//!
//! ```toml
//! [dependencies]
//! horde = { git = "https://example.org/horde.git" }   # or { path = "crates/horde" }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! The model: a [`Host`] owns one UDP socket per local interface. A sender connects to a
//! receiver's public key over one *channel* per path (a local interface and a remote
//! address), opens *streams*, and hands the connection *ADUs* (application data units:
//! messages of up to about one MTU). Each ADU is sent on whichever channel the scheduler
//! picks, and comes back as an [`Event::Ack`] or as an [`Event::Nack`] with its reason:
//! Horde does not retransmit on its own, because for most real-time data a late copy is
//! worth nothing. An application that wants every byte resends what was nacked, as the
//! first example does.
//!
//! # Send a file over every link
//!
//! Two channels on loopback stand in for two modems. The file is cut into ADUs that each
//! carry their offset; whatever is nacked as lost is sent again; the receiver puts every
//! piece at its offset, and the copy is checked against the original.
//!
//! An [`Event::Ack`] says the ADU reached the receiving host, not that the receiving
//! application wrote it: this example forgets a piece once acked, which is right while
//! the receiver lives. `horde send --file` and `horde recv --out` (`docs/cli.md`, "Carry
//! a file or a pipe") keep each piece until the receiver confirms it written and
//! flushed, so that a receiver killed and restarted resumes without a hole.
//!
//! ```
//! use std::collections::HashMap;
//! use std::time::Duration;
//!
//! use horde::{
//!     Bytes, ChannelConfig, ChannelTarget, ConnectConfig, Event, Fields, Host, HostConfig,
//!     InterfaceConfig, Keypair, NackReason, StreamConfig,
//! };
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
//! const PIECE: usize = 1000;
//!
//! let lo = "127.0.0.1:0".parse()?;
//! let (sender_key, receiver_key) = (Keypair::generate(), Keypair::generate());
//! let mut config = HostConfig::new(receiver_key.clone(), vec![InterfaceConfig::new(lo)]);
//! config.allowed_peers = vec![*sender_key.public()];
//! let receiver = Host::bind(config).await?;
//! let mut listener = receiver.listen(7);
//!
//! // Two local interfaces, one channel each, to the receiver's one address.
//! let interfaces = vec![InterfaceConfig::new(lo), InterfaceConfig::new(lo)];
//! let sender = Host::bind(HostConfig::new(sender_key, interfaces)).await?;
//! let conn = sender
//!     .connect(ConnectConfig {
//!         peer: *receiver_key.public(),
//!         service: 7,
//!         channels: (0..2)
//!             .map(|interface| ChannelTarget {
//!                 interface,
//!                 remote: receiver.local_addrs()[0],
//!                 config: ChannelConfig::default(),
//!             })
//!             .collect(),
//!         handshake_timeout: Duration::from_secs(5),
//!     })
//!     .await?;
//! let incoming = listener.accept().await.ok_or("no connection")?;
//! conn.open_stream(1, StreamConfig::default()).await?;
//! let (conn, mut events) = conn.split();
//!
//! // Receiver: every piece at its offset, until the whole file is there.
//! let size = file.len();
//! let receiving = tokio::spawn(async move {
//!     let (_conn, mut events) = incoming.split();
//!     let mut copy = vec![0u8; size];
//!     let mut have = 0;
//!     let mut seen = std::collections::HashSet::new();
//!     while have < size {
//!         match events.recv().await {
//!             Some(Event::Received { payload, .. }) => {
//!                 let offset = u64::from_be_bytes(payload[..8].try_into().unwrap()) as usize;
//!                 let piece = &payload[8..];
//!                 if seen.insert(offset) {
//!                     copy[offset..offset + piece.len()].copy_from_slice(piece);
//!                     have += piece.len();
//!                 }
//!             }
//!             Some(_) => {}
//!             None => break,
//!         }
//!     }
//!     copy
//! });
//!
//! // Sender: each ADU is [offset][bytes]; remember it until it is acked.
//! let mut unacked: HashMap<u64, Bytes> = HashMap::new();
//! let piece_at = |offset: usize| {
//!     let end = (offset + PIECE).min(file.len());
//!     let mut adu = (offset as u64).to_be_bytes().to_vec();
//!     adu.extend_from_slice(&file[offset..end]);
//!     Bytes::from(adu)
//! };
//! for offset in (0..file.len()).step_by(PIECE) {
//!     let adu = piece_at(offset);
//!     let handle = conn.send_adu(1, adu.clone(), Fields::new()).await?;
//!     unacked.insert(handle.id, adu);
//! }
//! while !unacked.is_empty() {
//!     match events.recv().await.ok_or("connection ended")? {
//!         Event::Ack { adu, .. } => {
//!             unacked.remove(&adu);
//!         }
//!         Event::Nack { adu, reason, .. } => {
//!             // Lost on the way, or dropped from a full queue: send it again.
//!             if let Some(bytes) = unacked.remove(&adu) {
//!                 if matches!(reason, NackReason::Lost | NackReason::QueueOverflow) {
//!                     let handle = conn.send_adu(1, bytes.clone(), Fields::new()).await?;
//!                     unacked.insert(handle.id, bytes);
//!                 }
//!             }
//!         }
//!         _ => {}
//!     }
//! }
//!
//! let copy = tokio::time::timeout(Duration::from_secs(20), receiving).await??;
//! assert!(copy == file, "the copy differs from the file");
//! sender.shutdown().await;
//! receiver.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Say what a stream cares about
//!
//! An objective, in the `hose` language, asks the scheduler for something about some
//! ADUs: here, alarms (ADUs of stream 1 whose field `kind` is `"alarm"`) on the slots
//! expected to arrive soonest. ADUs carry the fields that objectives test.
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use horde::{compile_objective, Bytes, Connection, Fields};
//!
//! async fn send_alarm(conn: &Connection) -> Result<(), Box<dyn std::error::Error>> {
//!     let objective = compile_objective(
//!         r#"objective {
//!              context { adu:a { (stream_id == 1) && (kind == "alarm") } }
//!              goal { expected(a::latency) < 100 }
//!              utility { a { 100 - expected(a::latency) } }
//!            }"#,
//!     )
//!     .map_err(|e| format!("{e:?}"))?;
//!     conn.inject_objective(Arc::new(objective)).await?;
//!
//!     let mut fields = Fields::new();
//!     fields.set("kind", "alarm".into());
//!     conn.send_adu(1, Bytes::from_static(b"pressure low"), fields).await?;
//!     Ok(())
//! }
//! ```
//!
//! The language is described in `docs/hose.md`; `horde hose check FILE` checks a file of
//! objectives from the command line. More: `docs/architecture.md` (how the pieces fit),
//! `docs/cli.md` (the `horde` command).

pub use bytes::Bytes;
pub use horde_crypto::{Keypair, PublicKey};
pub use horde_hose::compile as compile_objective;
pub use horde_net::{
    ChannelStatus, ChannelTarget, ConnectConfig, Connection, ConnectionHandle, EventReceiver, Host,
    HostConfig, HostStats, InterfaceConfig, Listener, NetError, Reconnect,
};
pub use horde_policy::{Fields, Value};
pub use horde_proto::{
    AduHandle, ChannelConfig, ChannelId, CloseReason, Event, NackReason, RecoveryConfig,
    StreamConfig,
};
