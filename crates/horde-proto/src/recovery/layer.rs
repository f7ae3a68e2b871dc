//! The session's recovery layer: one sender and/or receiver per recovery stream, and
//! the hooks the session calls (`docs/recovery.md`, "In the session").

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use horde_policy::ChannelId;
use rand::RngCore;
use thiserror::Error;

use super::config::{RecoveryConfig, RecoveryConfigError};
use super::decoder::Decoder;
use super::estimators::{PathEstimate, PathEstimators, REPORT_INTERVAL};
use super::header::{self, Frame, FrameError};
use super::reorder::{Placement, ReorderCache};
use super::sender::{Kind, Outgoing, Sender};
use super::stats::RecoveryStats;

#[derive(Debug)]
struct Receiver {
    decoder: Decoder,
    cache: ReorderCache,
}

#[derive(Debug, Default)]
struct StreamRecovery {
    sender: Option<Sender>,
    /// Session ADU id -> what it carries, while in flight.
    kinds: HashMap<u64, Kind>,
    receiver: Option<Receiver>,
    /// The reorder hold this end configured for the stream, if it opened it.
    hold: Option<Duration>,
    stats: RecoveryStats,
    /// What the stream's layers in earlier sessions of the same connection did
    /// (`stats` restarts with each session's layer; the stream's totals do not).
    earlier: RecoveryStats,
}

/// What [`RecoveryLayer::reframe`] made of an ADU carried over from an earlier session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reframed {
    /// An application data ADU (or a retransmitted copy of one), framed again in this
    /// layer's sequence space.
    Data(Bytes),
    /// The earlier layer's own coded, parity or report ADU: it names sequence numbers the
    /// peer's new receiver never saw, so it goes. No application ADU stands behind it.
    LayerOnly,
}

/// A carried ADU that could not be framed again; the session reports it to the
/// application rather than lose it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReframeError {
    #[error("carried ADU has no readable recovery frame: {0}")]
    Frame(#[from] FrameError),
    #[error("stream {0} has no recovery sender to frame a carried ADU")]
    NotSending(u32),
}

/// An ADU released to the application: `(stream, seq, payload)`.
pub type Released = (u32, u64, Bytes);

#[derive(Debug, Default)]
pub struct RecoveryLayer {
    streams: BTreeMap<u32, StreamRecovery>,
    /// Receiver-side estimators per channel, fed by recovery streams' packets.
    paths: BTreeMap<ChannelId, PathEstimators>,
    last_report: Option<Duration>,
    /// What the peer measured of this end's channels, from its reports.
    reported: BTreeMap<ChannelId, PathEstimate>,
    outgoing: Vec<(u32, Outgoing)>,
    released: Vec<(u64, Bytes)>,
}

impl RecoveryLayer {
    /// A stream opened for sending. Recovery off: nothing to do.
    pub fn open(
        &mut self,
        stream: u32,
        config: &RecoveryConfig,
    ) -> Result<(), RecoveryConfigError> {
        config.validate()?;
        if !config.is_on() {
            return Ok(());
        }
        let s = self.streams.entry(stream).or_default();
        s.sender = Some(Sender::new(config.mode));
        s.hold = Some(Duration::from_secs_f64(config.reorder_ms / 1e3));
        Ok(())
    }

    /// Whether `stream` queues coded ADUs into spare capacity (OEC, block code), which
    /// must defer to its data.
    pub fn codes_into_spare(&self, stream: u32) -> bool {
        self.streams
            .get(&stream)
            .and_then(|s| s.sender.as_ref())
            .is_some_and(Sender::codes_into_spare)
    }

    pub fn is_sending(&self, stream: u32) -> bool {
        self.streams
            .get(&stream)
            .is_some_and(|s| s.sender.is_some())
    }

    /// Frame an application ADU of a recovery stream (session ADU `id`); `None` when the
    /// stream has no recovery.
    pub fn frame(
        &mut self,
        now: Duration,
        stream: u32,
        id: u64,
        payload: Bytes,
    ) -> Result<Bytes, Bytes> {
        let Some(s) = self.streams.get_mut(&stream) else {
            return Err(payload);
        };
        let Some(tx) = s.sender.as_mut() else {
            return Err(payload);
        };
        let (seq, framed) = tx.frame_data(now, payload);
        s.kinds.insert(id, Kind::Data(seq));
        Ok(framed)
    }

    /// An ADU framed by a previous session's layer (as `earlier`, its kind there, if that
    /// layer knew it), carried into this one. A data ADU's payload is framed again in
    /// this layer's sequence space (the peer's new session numbers from 0); a carried
    /// retransmission stays a layer-made copy, so the application, already told of the
    /// original's loss, hears nothing more of it.
    pub fn reframe(
        &mut self,
        now: Duration,
        stream: u32,
        id: u64,
        adu: &Bytes,
        earlier: Option<Kind>,
    ) -> Result<Reframed, ReframeError> {
        let Frame::Data { payload, .. } = header::decode(adu)? else {
            return Ok(Reframed::LayerOnly);
        };
        let framed = self
            .frame(now, stream, id, payload)
            .map_err(|_| ReframeError::NotSending(stream))?;
        if let Some(Kind::Retransmit(_)) = earlier {
            let s = self
                .streams
                .get_mut(&stream)
                .expect("framed on this stream");
            if let (Some(tx), Some(Kind::Data(seq))) = (s.sender.as_mut(), s.kinds.get(&id)) {
                let seq = *seq;
                tx.mark_retransmitted(seq);
                s.kinds.insert(id, Kind::Retransmit(seq));
            }
        }
        Ok(Reframed::Data(framed))
    }

    /// What session ADU `id` of `stream` is to this layer, while it is in flight.
    pub fn kind(&self, stream: u32, id: u64) -> Option<Kind> {
        self.streams.get(&stream)?.kinds.get(&id).copied()
    }

    /// Take over the counts of `old`, the layer of the session this one replaces, so a
    /// stream's statistics cover the whole connection.
    pub fn carry_stats(&mut self, old: &RecoveryLayer) {
        for (&id, s) in &old.streams {
            let earlier = &mut self.streams.entry(id).or_default().earlier;
            earlier.add(&s.earlier);
            earlier.add(&s.stats);
        }
    }

    /// ADU `id` of `stream` left in packet `packet` of `channel`, a path with loss
    /// estimate `p`, `len` payload bytes.
    ///
    /// `channel` is the channel it went on; the peer's report of that channel's loss,
    /// when there is one, replaces `p` (the paper's receiver-measured loss).
    pub fn on_transmit(
        &mut self,
        stream: u32,
        id: u64,
        (channel, packet): (ChannelId, u64),
        p: f64,
        len: usize,
    ) {
        let p = self.reported.get(&channel).map_or(p, |e| e.loss);
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        let (Some(tx), Some(&kind)) = (s.sender.as_mut(), s.kinds.get(&id)) else {
            return;
        };
        match kind {
            Kind::Data(seq) => {
                tx.note_packet(seq, (channel, packet));
                s.stats.data_sent += 1;
                s.stats.data_bytes += len.saturating_sub(header::DATA_HEADER_LEN) as u64;
            }
            Kind::Coded(_) | Kind::Parity => {
                s.stats.coded_sent += 1;
                s.stats.coded_bytes += len as u64;
                if let Some(c) = s.stats.coded_by_channel.get_mut(usize::from(channel)) {
                    *c += 1;
                }
            }
            Kind::Retransmit(_) => s.stats.retransmitted += 1,
            Kind::Report => s.stats.reports_sent += 1,
        }
        let mut out = Vec::new();
        tx.on_transmit(kind, p, &mut out);
        self.outgoing.extend(out.into_iter().map(|o| (stream, o)));
    }

    /// Feedback on ADU `id`. Returns whether the ADU was one this layer made (its acks
    /// and losses are not the application's business).
    pub fn on_resolved(&mut self, stream: u32, id: u64, acked: bool) -> bool {
        let Some(s) = self.streams.get_mut(&stream) else {
            return false;
        };
        let (Some(tx), Some(kind)) = (s.sender.as_mut(), s.kinds.remove(&id)) else {
            return false;
        };
        if let (Kind::Data(seq), false) = (kind, acked) {
            let w = tx.window();
            let coded = w.coverage(seq).unwrap_or(0);
            if coded == 0 {
                s.stats.lost_uncoded += 1;
            } else {
                s.stats.lost_coded += 1;
            }
            tracing::debug!(
                target: "horde_proto::recovery::loss",
                stream, seq, coded, window = w.len(), r = w.r(),
                "data ADU reported lost"
            );
        }
        let mut out = Vec::new();
        tx.on_resolved(kind, acked, &mut out);
        self.outgoing.extend(out.into_iter().map(|o| (stream, o)));
        !matches!(kind, Kind::Data(_))
    }

    /// Whether the layer holds ADUs for the session to queue.
    pub fn has_outgoing(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// ADUs the layer wants queued; the session gives each an id and calls [`Self::bind`].
    pub fn take_outgoing(&mut self) -> Vec<(u32, Outgoing)> {
        std::mem::take(&mut self.outgoing)
    }

    pub fn bind(&mut self, stream: u32, id: u64, kind: Kind) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.kinds.insert(id, kind);
        }
    }

    /// A queued ADU left the session without being sent (dropped, removed).
    pub fn forget(&mut self, stream: u32, id: u64) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.kinds.remove(&id);
        }
    }

    pub fn wants_spare(&self) -> bool {
        self.streams
            .values()
            .any(|s| s.sender.as_ref().is_some_and(Sender::wants_spare))
    }

    /// `budget` bytes of spare capacity are free with nothing queued: offer them to the
    /// streams that code into spare capacity, each ADU costing its frame plus `per_adu`
    /// bytes. Returns whether anything was produced.
    pub fn spare(
        &mut self,
        now: Duration,
        budget: usize,
        per_adu: usize,
        rng: &mut dyn RngCore,
    ) -> bool {
        let before = self.outgoing.len();
        let mut left = budget;
        for (&id, s) in &mut self.streams {
            let Some(tx) = s.sender.as_mut() else {
                continue;
            };
            if left == 0 || !tx.wants_spare() {
                continue;
            }
            let mut out = Vec::new();
            tx.spare(now, left, per_adu, rng, &mut out);
            let (n, wait) = std::mem::take(&mut tx.first_covered);
            s.stats.first_covered += n;
            s.stats.first_cover_wait_us += wait.as_micros() as u64;
            let used: usize = out.iter().map(|o| o.payload.len() + per_adu).sum();
            left = left.saturating_sub(used);
            self.outgoing.extend(out.into_iter().map(|o| (id, o)));
        }
        self.outgoing.len() > before
    }

    /// A recovery ADU arrived on `stream`. Released ADUs go to `out` as
    /// `(stream, seq, payload)`.
    pub fn on_receive(
        &mut self,
        now: Duration,
        stream: u32,
        default_hold: Duration,
        adu: &Bytes,
        out: &mut Vec<Released>,
    ) {
        // Reports go back on this stream if this end sends on it with recovery, else on
        // another stream it sends on with recovery (a tunnel may use one stream per
        // direction); the peer reads a report on whichever stream it arrives.
        let report_stream = if self.is_sending(stream) {
            Some(stream)
        } else {
            self.streams
                .iter()
                .find(|(_, s)| s.sender.is_some())
                .map(|(&id, _)| id)
        };
        let s = self.streams.entry(stream).or_default();
        let hold = s.hold.unwrap_or(default_hold);
        let rx = s.receiver.get_or_insert_with(|| Receiver {
            decoder: Decoder::default(),
            cache: ReorderCache::new(hold),
        });
        let frame = match header::decode(adu) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(stream, error = %e, "malformed recovery frame dropped");
                s.stats.malformed += 1;
                return;
            }
        };
        match &frame {
            Frame::Data { .. } => s.stats.data_received += 1,
            Frame::Report(entries) => {
                s.stats.reports_received += 1;
                for e in entries {
                    self.reported.insert(e.channel, PathEstimate::from_entry(e));
                }
                return;
            }
            _ => s.stats.coded_received += 1,
        }
        // Report this end's measurements back, if it sends with recovery too (a tunnel
        // does, both ways).
        let due = self
            .last_report
            .is_none_or(|t| now.saturating_sub(t) >= REPORT_INTERVAL);
        if let Some(report_stream) = report_stream.filter(|_| due && !self.paths.is_empty()) {
            self.last_report = Some(now);
            let entries: Vec<_> = self
                .paths
                .iter()
                .map(|(&c, p)| p.snapshot(c).to_entry())
                .collect();
            self.outgoing.push((
                report_stream,
                Outgoing {
                    kind: Kind::Report,
                    payload: header::encode_report(&entries),
                },
            ));
        }
        let d = rx.decoder.on_frame(now, frame);
        if d.duplicate {
            s.stats.duplicates += 1;
        }
        for (seq, payload, recovered) in d.new {
            // How long the ADUs held behind a gap have waited, the oldest of them.
            let stalled = rx
                .cache
                .next_timeout()
                .map(|t| (now + hold).saturating_sub(t));
            let placed = rx.cache.push(now, seq, payload, &mut self.released);
            if recovered {
                s.stats.recovered += 1;
                match (placed, stalled) {
                    (Placement::Late, _) => s.stats.recovered_late += 1,
                    (Placement::InOrder, Some(w)) => {
                        s.stats.recovered_stall_us += w.as_micros() as u64;
                    }
                    _ => {}
                }
            }
        }
        Self::drain(stream, s, &mut self.released, out);
    }

    fn drain(
        stream: u32,
        s: &mut StreamRecovery,
        released: &mut Vec<(u64, Bytes)>,
        out: &mut Vec<Released>,
    ) {
        if let Some(rx) = &s.receiver {
            s.stats.delivered = rx.cache.counts.in_order;
            s.stats.delivered_late = rx.cache.counts.late;
            s.stats.lost = rx.cache.counts.lost;
            s.stats.coded_undecodable = rx.decoder.undecodable;
        }
        out.extend(released.drain(..).map(|(seq, p)| (stream, seq, p)));
    }

    pub fn on_timeout(&mut self, now: Duration, out: &mut Vec<Released>) {
        for (&id, s) in &mut self.streams {
            if let Some(rx) = s.receiver.as_mut() {
                rx.cache.on_timeout(now, &mut self.released);
                Self::drain(id, s, &mut self.released, out);
            }
        }
    }

    pub fn next_timeout(&self) -> Option<Duration> {
        self.streams
            .values()
            .filter_map(|s| s.receiver.as_ref()?.cache.next_timeout())
            .min()
    }

    pub fn on_path_packet(
        &mut self,
        now: Duration,
        channel: ChannelId,
        recv_us: u32,
        seq: u64,
        send_us: u32,
        bytes: usize,
    ) {
        self.paths
            .entry(channel)
            .or_default()
            .on_packet(now, recv_us, seq, send_us, bytes);
    }

    /// The peer's latest report of this end's channels.
    pub fn reported_estimates(&self) -> Vec<PathEstimate> {
        self.reported.values().copied().collect()
    }

    pub fn path_estimates(&self) -> Vec<PathEstimate> {
        self.paths.iter().map(|(&c, p)| p.snapshot(c)).collect()
    }

    pub fn stats(&self, stream: u32) -> Option<RecoveryStats> {
        self.streams.get(&stream).map(|s| {
            let mut total = s.earlier.clone();
            total.add(&s.stats);
            total
        })
    }

    /// What every stream's recovery layer did, summed; `None` if no stream used recovery.
    pub fn totals(&self) -> Option<RecoveryStats> {
        let mut streams = self.streams.keys();
        let first = self.stats(*streams.next()?)?;
        Some(streams.fold(first, |mut total, &s| {
            if let Some(stats) = self.stats(s) {
                total.add(&stats);
            }
            total
        }))
    }

    /// The OEC sender's current r for `stream` (instrumentation).
    pub fn r(&self, stream: u32) -> Option<f64> {
        Some(self.streams.get(&stream)?.sender.as_ref()?.window().r())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::config::RecoveryMode;

    #[test]
    fn a_tunnel_with_one_stream_per_direction_still_gets_reports() {
        let ms = Duration::from_millis;
        let config = RecoveryConfig::new(RecoveryMode::Oec);
        // Each end sends on its own stream: 1 one way, 2 the other.
        let (mut a, mut b) = (RecoveryLayer::default(), RecoveryLayer::default());
        a.open(1, &config).unwrap();
        b.open(2, &config).unwrap();
        let mut out = Vec::new();
        for seq in 0..5u64 {
            let now = ms(10 * seq);
            b.on_path_packet(now, ChannelId::new(0), 1000 * seq as u32, seq, 0, 100);
            let adu = header::encode_data(seq, b"ip packet");
            b.on_receive(now, 1, ms(50), &adu, &mut out);
        }
        assert_eq!(out.len(), 5, "the data is delivered");
        let reports: Vec<_> = b
            .take_outgoing()
            .into_iter()
            .filter(|(_, o)| o.kind == Kind::Report)
            .collect();
        assert_eq!(reports.len(), 1, "one report per REPORT_INTERVAL");
        assert_eq!(reports[0].0, 2, "on the stream b sends on");
        // a reads it on b's stream and keeps b's estimate of channel 0.
        a.on_receive(ms(60), 2, ms(50), &reports[0].1.payload, &mut out);
        let got = a.reported_estimates();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].channel, ChannelId::new(0));
        // An end that sends nothing with recovery reports nothing.
        let mut c = RecoveryLayer::default();
        c.on_path_packet(ms(0), ChannelId::new(0), 0, 0, 0, 100);
        c.on_receive(ms(0), 1, ms(50), &header::encode_data(0, b"x"), &mut out);
        assert!(c.take_outgoing().is_empty());
    }

    #[test]
    fn a_carried_retransmission_stays_the_layers_own_copy() {
        let t = Duration::from_millis(5);
        let config = RecoveryConfig::new(RecoveryMode::Retransmit);
        let mut old = RecoveryLayer::default();
        old.open(1, &config).unwrap();
        old.frame(t, 1, 7, Bytes::from_static(b"payload")).unwrap();
        old.on_transmit(1, 7, (ChannelId::new(0), 0), 0.1, 16);
        assert!(
            !old.on_resolved(1, 7, false),
            "the application hears of the loss"
        );
        let (stream, copy) = old.take_outgoing().pop().expect("a retransmission");
        old.bind(stream, 8, copy.kind);

        let mut new = RecoveryLayer::default();
        new.open(1, &config).unwrap();
        let got = new.reframe(t, 1, 8, &copy.payload, old.kind(1, 8)).unwrap();
        let Reframed::Data(framed) = got else {
            panic!("a retransmission carries data: {got:?}");
        };
        match header::decode(&framed).unwrap() {
            Frame::Data { seq, payload } => {
                assert_eq!((seq, &payload[..]), (0, &b"payload"[..]), "numbered anew");
            }
            f => panic!("{f:?}"),
        }
        new.on_transmit(1, 8, (ChannelId::new(0), 0), 0.1, framed.len());
        assert!(new.on_resolved(1, 8, false), "not the application's ADU");
        assert!(new.take_outgoing().is_empty(), "and no third copy");
        assert_eq!(new.stats(1).unwrap().retransmitted, 1);
    }

    #[test]
    fn a_carried_layer_adu_is_dropped_and_an_unreadable_one_is_an_error() {
        let t = Duration::from_millis(5);
        let mut new = RecoveryLayer::default();
        new.open(1, &RecoveryConfig::new(RecoveryMode::Oec))
            .unwrap();
        let report = header::encode_report(&[]);
        assert_eq!(new.reframe(t, 1, 1, &report, None), Ok(Reframed::LayerOnly));
        assert!(matches!(
            new.reframe(t, 1, 2, &Bytes::new(), None),
            Err(ReframeError::Frame(_))
        ));
        let data = header::encode_data(40, b"x");
        assert_eq!(
            new.reframe(t, 2, 3, &data, None),
            Err(ReframeError::NotSending(2)),
            "a stream without a recovery sender"
        );
    }

    #[test]
    fn stats_carry_over_to_the_layer_of_a_new_session() {
        let ms = Duration::from_millis;
        let config = RecoveryConfig::new(RecoveryMode::Oec);
        let mut old = RecoveryLayer::default();
        old.open(1, &config).unwrap();
        let mut out = Vec::new();
        for seq in 0..3u64 {
            old.on_receive(
                ms(seq),
                1,
                ms(50),
                &header::encode_data(seq, b"a"),
                &mut out,
            );
        }
        old.frame(ms(3), 1, 9, Bytes::from_static(b"b")).unwrap();
        old.on_transmit(1, 9, (ChannelId::new(0), 1), 0.1, 10);
        let before = old.stats(1).unwrap();
        assert_eq!((before.data_received, before.delivered), (3, 3));

        let mut new = RecoveryLayer::default();
        new.carry_stats(&old);
        new.open(1, &config).unwrap();
        assert_eq!(
            new.stats(1),
            Some(before.clone()),
            "nothing lost at the switch"
        );
        // The peer's new session numbers from 0 again.
        for seq in 0..2u64 {
            new.on_receive(
                ms(10 + seq),
                1,
                ms(50),
                &header::encode_data(seq, b"c"),
                &mut out,
            );
        }
        let after = new.stats(1).unwrap();
        assert_eq!(after.data_received, 5);
        assert_eq!(
            after.delivered, 5,
            "the new cache's count adds to the old one's"
        );
        assert_eq!(after.data_sent, 1);
        // A third session still counts from the first.
        let mut third = RecoveryLayer::default();
        third.carry_stats(&new);
        assert_eq!(third.stats(1), Some(after));
    }
}
