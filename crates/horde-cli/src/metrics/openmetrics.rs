//! The OpenMetrics text a scrape gets: per channel, per peer, per stream and per host,
//! built from one status snapshot. A registry is filled afresh for each scrape, so a
//! peer or channel that is gone is simply absent.

use horde_net::HostStats;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::streams::StreamFigures;
use crate::status::Snapshot;

type Labels = Vec<(&'static str, String)>;
type Gauges = Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>;
type Counters = Family<Labels, Counter>;

/// Registers metric families by name and fills them.
struct Sink(Registry);

impl Sink {
    fn gauge(&mut self, name: &str, help: &str, unit: Option<Unit>) -> Gauges {
        let family = Gauges::default();
        match unit {
            Some(u) => self.0.register_with_unit(name, help, u, family.clone()),
            None => self.0.register(name, help, family.clone()),
        }
        family
    }

    fn counter(&mut self, name: &str, help: &str) -> Counters {
        let family = Counters::default();
        self.0.register(name, help, family.clone());
        family
    }
}

fn set(f: &Gauges, labels: &Labels, v: f64) {
    f.get_or_create(labels).set(v);
}

fn count(f: &Counters, labels: &Labels, v: u64) {
    f.get_or_create(labels).inc_by(v);
}

/// The OpenMetrics text of one snapshot, its streams and its host's counters.
pub fn render(
    snap: &Snapshot,
    streams: &[(u32, StreamFigures)],
    host: Option<&HostStats>,
) -> String {
    let mut sink = Sink(Registry::with_prefix("horde"));
    channels(&mut sink, snap);
    peers(&mut sink, snap);
    stream_figures(&mut sink, streams);
    if let Some(h) = host {
        host_counters(&mut sink, h);
    }
    let mut out = String::new();
    encode(&mut out, &sink.0).expect("writing to a String cannot fail");
    out
}

fn channels(sink: &mut Sink, snap: &Snapshot) {
    let up = sink.gauge(
        "channel_up",
        "1 while the channel is alive, 0 while it is down",
        None,
    );
    let rate = sink.gauge(
        "channel_rate_bits_per_second",
        "the channel's congestion-controlled sending rate",
        None,
    );
    let rtt = sink.gauge(
        "channel_rtt",
        "smoothed round-trip time",
        Some(Unit::Seconds),
    );
    let loss = sink.gauge("channel_loss_ratio", "recent packet loss, 0 to 1", None);
    let sent = sink.counter("channel_packets_sent", "packets sent on the channel");
    let bytes = sink.counter("channel_bytes_sent", "bytes sent on the channel");
    let acked = sink.counter("channel_packets_acked", "packets of ours the peer acked");
    let received = sink.counter(
        "channel_packets_received",
        "data packets and pings from the peer",
    );
    let lost = sink.counter("channel_packets_lost", "packets declared lost");
    for p in &snap.peers {
        for c in &p.channels {
            let l: Labels = vec![
                ("peer", p.name.clone().unwrap_or_else(|| p.key.clone())),
                ("channel", c.id.to_string()),
                ("endpoint", c.endpoint.clone()),
                ("congestion", c.congestion.clone()),
            ];
            set(&up, &l, f64::from(u8::from(c.state == "up")));
            set(&rate, &l, c.rate_kbps * 1e3);
            if let Some(ms) = c.rtt_ms {
                set(&rtt, &l, ms / 1e3);
            }
            set(&loss, &l, c.loss);
            count(&sent, &l, c.packets_sent);
            count(&bytes, &l, c.bytes_sent);
            count(&acked, &l, c.packets_acked);
            count(&received, &l, c.packets_received);
            count(&lost, &l, c.lost);
        }
    }
}

fn peers(sink: &mut Sink, snap: &Snapshot) {
    let age = sink.gauge(
        "peer_handshake_age",
        "time since the handshake that opened the connection",
        Some(Unit::Seconds),
    );
    let closed = sink.gauge("peer_closed", "1 once the connection has ended", None);
    let generation = sink.gauge(
        "peer_key_generation",
        "rotations of our sending key since the handshake",
        None,
    );
    let adus = sink.counter(
        "session_adus",
        "ADUs of the session, by what became of them",
    );
    let recovery = sink.counter(
        "recovery_adus",
        "ADUs of the connection's loss recovery, by kind: data and coded (redundant) ones \
         sent, data sent again, rebuilt from coded ones, and given up on",
    );
    let recovery_bytes = sink.counter(
        "recovery_bytes",
        "bytes loss recovery sent, by kind: data payload or coded frames",
    );
    let overhead = sink.gauge(
        "recovery_overhead_ratio",
        "coded bytes sent per data byte sent: the redundancy's share of the capacity",
        None,
    );
    for p in &snap.peers {
        let l: Labels = vec![("peer", p.name.clone().unwrap_or_else(|| p.key.clone()))];
        if let Some(r) = &p.recovery {
            for (kind, n) in [
                ("data_sent", r.data_sent),
                ("coded_sent", r.coded_sent),
                ("retransmitted", r.retransmitted),
                ("recovered", r.recovered),
                ("lost", r.lost),
            ] {
                let mut l = l.clone();
                l.push(("kind", kind.into()));
                count(&recovery, &l, n);
            }
            for (kind, n) in [("data", r.data_bytes), ("coded", r.coded_bytes)] {
                let mut l = l.clone();
                l.push(("kind", kind.into()));
                count(&recovery_bytes, &l, n);
            }
            if r.data_bytes > 0 {
                set(&overhead, &l, r.coded_bytes as f64 / r.data_bytes as f64);
            }
        }
        set(&age, &l, p.handshake_age_s);
        set(&closed, &l, f64::from(u8::from(p.closed)));
        if let Some(k) = &p.keys {
            set(&generation, &l, k.generation as f64);
        }
        if let Some(s) = &p.session {
            for (what, n) in [
                ("sent", s.adus_sent),
                ("acked", s.adus_acked),
                ("lost", s.adus_lost),
                ("received", s.adus_received),
            ] {
                let mut l = l.clone();
                l.push(("state", what.into()));
                count(&adus, &l, n);
            }
        }
    }
}

fn stream_figures(sink: &mut Sink, streams: &[(u32, StreamFigures)]) {
    let goodput = sink.gauge(
        "stream_goodput_bits_per_second",
        "payload delivered over the last report interval",
        None,
    );
    let delay = sink.gauge(
        "stream_delay",
        "the last interval's delay quantile: insertion to ack at a sender, one-way at a receiver",
        Some(Unit::Seconds),
    );
    let adus = sink.counter("stream_adus", "ADUs of the stream, by what became of them");
    for (id, f) in streams {
        let l: Labels = vec![("stream", id.to_string()), ("name", f.name.clone())];
        set(&goodput, &l, f.goodput_bps);
        for (q, v) in [("0.5", f.delay_p50_s), ("0.95", f.delay_p95_s)] {
            if let Some(v) = v {
                let mut l = l.clone();
                l.push(("quantile", q.into()));
                set(&delay, &l, v);
            }
        }
        for (what, n) in [
            ("sent", f.sent),
            ("acked", f.acked),
            ("lost", f.lost),
            ("dropped", f.dropped),
            ("received", f.received),
        ] {
            let mut l = l.clone();
            l.push(("state", what.into()));
            count(&adus, &l, n);
        }
    }
}

fn host_counters(sink: &mut Sink, h: &HostStats) {
    let datagrams = sink.counter("host_datagrams", "UDP datagrams, by direction");
    for (dir, n) in [("in", h.datagrams_in), ("out", h.datagrams_out)] {
        count(&datagrams, &vec![("direction", dir.into())], n);
    }
    let bytes = sink.counter("host_bytes", "UDP payload bytes, by direction");
    for (dir, n) in [("in", h.bytes_in), ("out", h.bytes_out)] {
        count(&bytes, &vec![("direction", dir.into())], n);
    }
    let plain = |sink: &mut Sink, name: &str, help: &str, n: u64| {
        count(&sink.counter(name, help), &Labels::new(), n);
    };
    plain(
        sink,
        "host_handshake_datagrams",
        "datagrams read from the handshake sockets",
        h.handshake_datagrams_in,
    );
    plain(
        sink,
        "host_reconnects",
        "sessions opened again after one ended",
        h.reconnects,
    );
    plain(
        sink,
        "host_sessions_replaced",
        "sessions replaced by the same peer's new handshake",
        h.sessions_replaced,
    );
    plain(
        sink,
        "host_dropped",
        "datagrams the secure layer refused (garbage, unknown index, bad MAC, replay...)",
        h.dropped.total(),
    );
    plain(
        sink,
        "host_kernel_dropped",
        "datagrams the kernel filter dropped before they reached a socket",
        h.kernel_dropped,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{PeerStatus, RecoveryCounters};

    #[test]
    fn recovery_overhead_is_exported_per_peer_and_only_where_a_stream_uses_it() {
        let peer = |name: &str, recovery| PeerStatus {
            key: "K".into(),
            name: Some(name.into()),
            handshake_age_s: 1.0,
            closed: false,
            session: None,
            recovery,
            keys: None,
            channels: vec![],
        };
        let snap = Snapshot {
            role: "tunnel server".into(),
            pid: 1,
            public_key: "P".into(),
            updated_unix_ms: 0,
            peers: vec![
                peer(
                    "bus-1",
                    Some(RecoveryCounters {
                        data_sent: 400,
                        data_bytes: 400_000,
                        coded_sent: 100,
                        coded_bytes: 104_000,
                        retransmitted: 3,
                        recovered: 7,
                        lost: 1,
                    }),
                ),
                peer("bus-2", None),
            ],
        };
        let text = render(&snap, &[], None);
        for line in [
            "horde_recovery_adus_total{peer=\"bus-1\",kind=\"coded_sent\"} 100",
            "horde_recovery_adus_total{peer=\"bus-1\",kind=\"recovered\"} 7",
            "horde_recovery_bytes_total{peer=\"bus-1\",kind=\"coded\"} 104000",
            "horde_recovery_overhead_ratio{peer=\"bus-1\"} 0.26",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
        assert!(!text.contains("peer=\"bus-2\",kind"), "{text}");
    }
}
