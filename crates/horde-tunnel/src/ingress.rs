//! The tunnel's ingress queue: where packets from the riders wait for the session when
//! a queue discipline other than FIFO is chosen (`qdisc` in the tunnel's file;
//! docs/tunnel.md, "Ingress queue").
//!
//! Without one, a packet read from the TUN device goes straight into the session's
//! stream queue, one FIFO for every rider. With one, it waits here, in the discipline's
//! order, and a pump moves packets into the session only while the stream is writable,
//! so the stream's queue stays at its low water marks (tens of ms at the tunnel's rate)
//! and the backlog, and the choice of who goes next, is the discipline's.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use horde_net::ConnectionHandle;
use horde_policy::Fields;
use horde_proto::StreamConfig;
use horde_qdisc::{
    Chap, ChapConfig, Fifo, FlowKey, FqCodel, FqCodelConfig, Limit, Packet, Qdisc, QdiscKind,
};
use tokio::sync::Notify;

use crate::counters::Counters;
use crate::{IpHeader, STREAM};

/// Packets moved into the session per writable check: enough that the pump asks rarely
/// at a fast tunnel's rate (each check is a turn of the host; with 8, CHAP cost a third
/// more CPU per byte than FIFO at 0.9 Gbit/s)...
const BURST: usize = 64;
/// ...and no more than this long at the tunnel's rate (at least one packet), so that the
/// stream's queue overshoots its high mark by little: on a link of a few Mbit/s eight
/// packets are 12 ms, past the stream's high mark.
const BURST_TIME: Duration = Duration::from_millis(3);
/// Behind a discipline the stream's queue is one FIFO for every rider, so it is kept
/// short: water marks of at most these many ms at the tunnel's rate...
const STREAM_HIGH_MS: f64 = 8.0;
const STREAM_LOW_MS: f64 = 4.0;
/// ...and a floor of at most this many full packets.
const STREAM_FLOOR_PACKETS: usize = 2;

/// The tunnel stream's configuration: `stream` as the file gives it, or, when packets
/// wait in an ingress discipline first (`qdisc`), with its queue kept short.
pub fn tunnel_stream(stream: &StreamConfig, qdisc: Option<QdiscKind>, mtu: u32) -> StreamConfig {
    match qdisc {
        Some(_) => stream_behind_a_qdisc(stream, mtu),
        None => stream.clone(),
    }
}

/// The tunnel stream's configuration when packets wait in a discipline first: `stream`
/// with its water marks and their floor capped, so that the backlog, and who goes
/// next, stays the discipline's. With the default marks (20 and 10 ms, a floor of
/// 8 KiB, which on a link of a few Mbit/s is itself near 20 ms) a rider's game waited
/// about 20 ms more behind a download than when idle.
fn stream_behind_a_qdisc(stream: &StreamConfig, mtu: u32) -> StreamConfig {
    StreamConfig {
        high_water_ms: stream.high_water_ms.min(STREAM_HIGH_MS),
        low_water_ms: stream.low_water_ms.min(STREAM_LOW_MS),
        water_floor_bytes: stream
            .water_floor_bytes
            .min(STREAM_FLOOR_PACKETS * mtu as usize),
        ..stream.clone()
    }
}
/// How often the pump refreshes the tunnel's rate, which CHAP's charges use.
const RATE_REFRESH: Duration = Duration::from_millis(100);
/// How long the pump waits before asking again while the connection has no session.
const BETWEEN_SESSIONS: Duration = Duration::from_millis(50);
/// The rate assumed before the channels have measured one (bytes/s).
const FALLBACK_RATE: f64 = 125_000.0;

type Queue = Box<dyn Qdisc<Bytes> + Send>;

/// One session's ingress queue, shared by the TUN reader and the pump.
pub struct Ingress {
    queue: Mutex<Queue>,
    ready: Notify,
    epoch: Instant,
    drops: Mutex<Vec<Packet<Bytes>>>,
}

/// Builds the discipline `kind` holding at most `limit_bytes`.
fn build(kind: QdiscKind, limit_bytes: u64) -> Result<Queue, horde_qdisc::QdiscError> {
    let limit = Limit::bytes(limit_bytes);
    Ok(match kind {
        QdiscKind::Fifo => Box::new(Fifo::new(limit)?),
        // Strict priority needs classes, which the tunnel's file does not describe.
        QdiscKind::Spq => return Err(horde_qdisc::QdiscError::UnknownKind("spq".into())),
        QdiscKind::Chap => Box::new(Chap::new(ChapConfig {
            limit,
            ..ChapConfig::default()
        })?),
        QdiscKind::FqCodel => Box::new(FqCodel::new(FqCodelConfig {
            limit,
            ..FqCodelConfig::default()
        })?),
    })
}

/// The 5-tuple of a packet the tunnel carries; ports are 0 when the packet has none
/// (ICMP, later fragments).
pub fn flow_key(header: &IpHeader, packet: &[u8]) -> FlowKey {
    let ports = header
        .transport_offset
        .filter(|_| matches!(header.protocol, 6 | 17))
        .and_then(|at| packet.get(at..at + 4))
        .map(|p| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            )
        });
    let (src_port, dst_port) = ports.unwrap_or((0, 0));
    FlowKey {
        src: header.src,
        dst: header.dst,
        src_port,
        dst_port,
        protocol: header.protocol,
    }
}

impl Ingress {
    /// An ingress queue of discipline `kind`, holding at most `limit_bytes`.
    pub fn new(kind: QdiscKind, limit_bytes: u64) -> Result<Arc<Ingress>, horde_qdisc::QdiscError> {
        Ok(Arc::new(Ingress {
            queue: Mutex::new(build(kind, limit_bytes)?),
            ready: Notify::new(),
            epoch: Instant::now(),
            drops: Mutex::new(Vec::new()),
        }))
    }

    /// Queue a packet read from the TUN device; what the discipline drops is counted.
    pub fn push(&self, header: &IpHeader, packet: Bytes, counters: &Counters) {
        let flow = flow_key(header, &packet);
        let len = packet.len() as u32;
        let now = self.epoch.elapsed();
        let mut drops = self.drops.lock().expect("ingress drops lock");
        self.queue
            .lock()
            .expect("ingress queue lock")
            .enqueue(Packet::new(flow, len, now, packet), &mut drops);
        counters.ingress_dropped(drops.len());
        drops.clear();
        self.ready.notify_one();
    }

    /// Up to [`BURST`] packets, and [`BURST_TIME`] at `rate` bytes/s, in the
    /// discipline's order, each charged its time at that rate.
    fn take(&self, rate: f64, counters: &Counters, out: &mut Vec<Bytes>) {
        let now = self.epoch.elapsed();
        let mut drops = self.drops.lock().expect("ingress drops lock");
        let mut queue = self.queue.lock().expect("ingress queue lock");
        let mut time = Duration::ZERO;
        while out.len() < BURST && time < BURST_TIME {
            let Some(p) = queue.dequeue(now, &mut drops) else {
                break;
            };
            let spent = Duration::from_secs_f64(f64::from(p.len) / rate);
            queue.charge(&p.flow, spent);
            time += spent;
            out.push(p.payload);
        }
        counters.ingress_dropped(drops.len());
        drops.clear();
    }

    /// Move packets into `handle`'s tunnel stream while it is writable, until the task
    /// is aborted. Between sessions of a persistent connection the packets wait here.
    pub async fn pump(self: Arc<Self>, handle: ConnectionHandle, counters: Arc<Counters>) {
        let fields = Fields::default();
        let mut rate = FALLBACK_RATE;
        let mut rate_at = Instant::now() - RATE_REFRESH;
        let mut batch = Vec::with_capacity(BURST);
        loop {
            if handle.writable(STREAM).await.is_err() {
                tokio::time::sleep(BETWEEN_SESSIONS).await;
                continue;
            }
            if rate_at.elapsed() >= RATE_REFRESH {
                rate_at = Instant::now();
                if let Ok(channels) = handle.channels().await {
                    let total: f64 = channels
                        .iter()
                        .filter(|c| c.alive)
                        .map(|c| c.rate_bytes_per_s)
                        .sum();
                    if total > 0.0 {
                        rate = total;
                    }
                }
            }
            self.take(rate, &counters, &mut batch);
            if batch.is_empty() {
                self.ready.notified().await;
                continue;
            }
            for packet in batch.drain(..) {
                // A packet refused between sessions is lost, as a full queue's would be.
                let _ = handle.send_adu_nowait(STREAM, packet, fields.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn udp(src_port: u16, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let sum = crate::ip::checksum(&p[..20]);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p[20..22].copy_from_slice(&src_port.to_be_bytes());
        p[22..24].copy_from_slice(&53u16.to_be_bytes());
        p
    }

    #[test]
    fn behind_a_discipline_the_stream_queue_is_capped_never_raised() {
        let capped = stream_behind_a_qdisc(&StreamConfig::default(), 1380);
        assert_eq!(
            (
                capped.high_water_ms,
                capped.low_water_ms,
                capped.water_floor_bytes
            ),
            (STREAM_HIGH_MS, STREAM_LOW_MS, 2 * 1380)
        );
        // At 7.2 Mbit/s the high mark is 8 ms of it, not the default's 8 KiB floor doubled.
        assert_eq!(capped.water_marks(900_000.0), (3600, 7200));
        let small = StreamConfig {
            high_water_ms: 2.0,
            low_water_ms: 1.0,
            water_floor_bytes: 1000,
            ..StreamConfig::default()
        };
        let kept = stream_behind_a_qdisc(&small, 1380);
        assert_eq!(
            (
                kept.high_water_ms,
                kept.low_water_ms,
                kept.water_floor_bytes
            ),
            (2.0, 1.0, 1000)
        );
    }

    #[test]
    fn flows_are_told_apart_by_their_ports() {
        let a = udp(1000, 100);
        let h = parse(&a).unwrap();
        let k = flow_key(&h, &a);
        assert_eq!((k.src_port, k.dst_port, k.protocol), (1000, 53, 17));
    }

    /// A small flow's packet that arrives behind a bulk flow's backlog leaves first
    /// under CHAP, and last under FIFO.
    #[test]
    fn chap_lets_a_small_flow_pass_a_bulk_backlog_and_fifo_does_not() {
        for (kind, small_first) in [(QdiscKind::Chap, true), (QdiscKind::Fifo, false)] {
            let ingress = Ingress::new(kind, 1 << 20).unwrap();
            let counters = Counters::default();
            let bulk = udp(2000, 1400);
            let h = parse(&bulk).unwrap();
            // The bulk flow has been sending: it has spent its credit.
            for _ in 0..40 {
                ingress.push(&h, Bytes::from(bulk.clone()), &counters);
            }
            let mut out = Vec::new();
            ingress.take(125_000.0, &counters, &mut out);
            let small = udp(3000, 100);
            ingress.push(
                &parse(&small).unwrap(),
                Bytes::from(small.clone()),
                &counters,
            );
            out.clear();
            ingress.take(125_000.0, &counters, &mut out);
            assert_eq!(out[0].len() == 100, small_first, "{kind}");
        }
    }
}
