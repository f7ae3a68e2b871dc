//! The session's side of loss recovery: the hooks `session.rs` calls, kept here so the
//! session file only carries one-line calls. The layer itself is `crate::recovery`.

use std::time::Duration;

use bytes::Bytes;
use horde_policy::ChannelId;
use horde_policy::Fields;

use super::{Session, State, IDLE_CYCLE_RETRY};
use crate::recovery::estimators::PathEstimate;
use crate::recovery::sender::Kind;
use crate::recovery::{RecoveryStats, Released};
use crate::stream::{Delivered, QueuedAdu};
use crate::wire;

impl Session {
    /// The largest ADU `stream` takes: the session's, less the recovery frame if the
    /// stream has recovery on.
    pub fn max_stream_adu(&self, stream: u32) -> u32 {
        let max = self.max_adu();
        if self.recovery.is_sending(stream) {
            max.saturating_sub(crate::recovery::header::MAX_OVERHEAD as u32)
        } else {
            max
        }
    }

    /// What the recovery layer of `stream` did, both directions; `None` if the stream
    /// never used recovery here.
    pub fn recovery_stats(&self, stream: u32) -> Option<RecoveryStats> {
        self.recovery.stats(stream)
    }

    /// What the recovery layers of all streams did, summed (the connection's recovery
    /// overhead); `None` if no stream used recovery here.
    pub fn recovery_totals(&self) -> Option<RecoveryStats> {
        self.recovery.totals()
    }

    /// The OEC sender's presence probability r for `stream` (instrumentation).
    pub fn recovery_r(&self, stream: u32) -> Option<f64> {
        self.recovery.r(stream)
    }

    /// What the receiver measured of each channel from recovery streams' packets
    /// (capacity, one-way delay plus clock offset, loss).
    pub fn path_estimates(&self) -> Vec<PathEstimate> {
        self.recovery.path_estimates()
    }

    /// What the peer reported of this end's channels (it reports back on a recovery
    /// stream both ends send on).
    pub fn reported_path_estimates(&self) -> Vec<PathEstimate> {
        self.recovery.reported_estimates()
    }

    /// A recovery ADU arrived in packet `seq` of `channel`, stamped `send_ts`.
    pub(super) fn recovery_arrival(
        &mut self,
        now: Duration,
        stream: u32,
        (channel, seq, send_ts): (ChannelId, u64, u32),
        adu: &Bytes,
    ) {
        let recv_ts = self.send_ts(now);
        let bytes = wire::DATA_HEADER_LEN + adu.len();
        self.recovery
            .on_path_packet(now, channel, recv_ts, seq, send_ts, bytes);
        let hold = super::ms(self.config.reorder_hold_ms);
        let mut out = Vec::new();
        self.recovery.on_receive(now, stream, hold, adu, &mut out);
        self.push_released(channel, out);
    }

    pub(super) fn recovery_timeouts(&mut self, now: Duration) {
        let mut out = Vec::new();
        self.recovery.on_timeout(now, &mut out);
        // Released from the cache, not off a channel: 0 stands for "the cache".
        self.push_released(ChannelId::new(0), out);
    }

    fn push_released(&mut self, channel: ChannelId, out: Vec<Released>) {
        self.receiver
            .delivered
            .extend(out.into_iter().map(|(stream, seq, payload)| Delivered {
                stream,
                stream_seq: seq,
                channel,
                payload,
            }));
    }

    /// Queue the ADUs the recovery layer asked for (coded, retransmitted), unless that
    /// would overflow their stream's queue.
    pub(super) fn queue_recovery(&mut self, now: Duration) {
        for (stream, o) in self.recovery.take_outgoing() {
            let Some(s) = self.sender.streams.get_mut(&stream) else {
                continue;
            };
            if s.queued_bytes + o.payload.len() > s.config.max_queue_bytes {
                continue;
            }
            let id = self.sender.next_adu_id;
            self.sender.next_adu_id += 1;
            // Nobody reads a recovery ADU's stream number (the receiver hands it to its
            // recovery layer, and its acks raise no event), so it takes none: the data
            // ADUs keep the numbers the application counts them by, in the order it
            // queued them, as on a stream without recovery, and the same as those
            // under which the receiver hands them over (its `Event::Received`).
            let seq = s.next_seq;
            // Fits (checked above), so nothing is dropped.
            let _ = s.push(QueuedAdu {
                id,
                seq,
                payload: o.payload,
                fields: Fields::default(),
                inserted: now,
                deferred_since: None,
            });
            self.recovery.bind(stream, id, o.kind);
            self.wake_cycle(now);
        }
    }

    /// A data ADU was just queued last on `stream`: put it ahead of the coded ADUs that
    /// OEC (or the block code) queued there for a spare opportunity and that have not
    /// left yet. Data takes the opportunity first (PluriBus §4.1: coded packets defer to
    /// data); the coded ones go in what is left.
    pub(super) fn data_before_spare_coded(&mut self, stream: u32) {
        if !self.recovery.codes_into_spare(stream) {
            return;
        }
        let Some(s) = self.sender.streams.get_mut(&stream) else {
            return;
        };
        let q = &mut s.queue;
        let Some(last) = q.back() else {
            return;
        };
        if !matches!(self.recovery.kind(stream, last.id), Some(Kind::Data(_))) {
            return;
        }
        let mut pos = q.len() - 1;
        while pos > 0
            && matches!(
                self.recovery.kind(stream, q[pos - 1].id),
                Some(Kind::Coded(_) | Kind::Parity)
            )
        {
            pos -= 1;
        }
        if pos + 1 < q.len() {
            let adu = q.pop_back().expect("non-empty");
            q.insert(pos, adu);
        }
    }

    /// Every queue is empty and channels have real slots: let OEC and the block code
    /// fill them (PluriBus §4.1: coded packets only where the path's queue is empty).
    pub(super) fn offer_spare_slots(&mut self, now: Duration) -> bool {
        if self.life.state != State::Connected
            || !self.receiver.flow.may_send()
            || !self.recovery.wants_spare()
        {
            return false;
        }
        let budget: usize = self.channels.iter().map(|c| c.spare_bytes(now)).sum();
        // Each coded ADU costs a packet header and, on a real link, the datagram's own
        // overhead (the largest of the channels', as the scheduler picks the channel).
        let per_packet = wire::DATA_HEADER_LEN
            + self
                .channels
                .iter()
                .map(|c| c.config.datagram_overhead as usize)
                .max()
                .unwrap_or(0);
        if budget == 0
            || !self
                .recovery
                .spare(now, budget, per_packet, &mut self.sender.rng)
        {
            // Nothing to code after all (W expired, nothing worth coding, no spare bytes):
            // `poll_timeout` would
            // otherwise name this instant again and again.
            if self.config.cycle_ms <= 0.0 {
                self.sender.next_cycle = self.sender.next_cycle.max(now + IDLE_CYCLE_RETRY);
            }
            return false;
        }
        self.queue_recovery(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use horde_policy::Fields;

    use super::super::test_session::one_channel_session;
    use super::*;
    use crate::recovery::{RecoveryConfig, RecoveryMode};
    use crate::StreamConfig;

    const STREAM: u32 = 1;

    fn session_with(mode: RecoveryMode) -> Session {
        let mut s = one_channel_session(1);
        let config = StreamConfig {
            recovery: RecoveryConfig::new(mode),
            ..StreamConfig::default()
        };
        s.open_stream(STREAM, config).unwrap();
        s
    }

    /// Queue a layer-made coded ADU on the stream, as `queue_recovery` does.
    fn queue_coded(s: &mut Session, id: u64) {
        let q = s.sender.streams.get_mut(&STREAM).unwrap();
        q.queue.push_back(QueuedAdu {
            id,
            seq: 100 + id,
            payload: Bytes::from_static(b"coded"),
            fields: Fields::new(),
            inserted: Duration::ZERO,
            deferred_since: None,
        });
        s.recovery.bind(STREAM, id, Kind::Coded(2));
    }

    fn kinds(s: &Session) -> Vec<char> {
        s.sender.streams[&STREAM]
            .queue
            .iter()
            .map(|a| match s.recovery.kind(STREAM, a.id) {
                Some(Kind::Data(_)) => 'd',
                Some(Kind::Coded(_)) => 'c',
                _ => '?',
            })
            .collect()
    }

    #[test]
    fn data_queued_after_spare_coded_adus_goes_ahead_of_them() {
        let now = Duration::from_millis(5);
        let mut s = session_with(RecoveryMode::Oec);
        s.send_adu(now, STREAM, Bytes::from_static(b"a"), Fields::new())
            .unwrap();
        queue_coded(&mut s, 1000);
        queue_coded(&mut s, 1001);
        for p in [b"b", b"c"] {
            s.send_adu(now, STREAM, Bytes::from_static(p), Fields::new())
                .unwrap();
        }
        assert_eq!(kinds(&s), vec!['d', 'd', 'd', 'c', 'c']);
        // Data keeps its own order among itself, and the coded ADUs theirs.
        let ids: Vec<u64> = s.sender.streams[&STREAM]
            .queue
            .iter()
            .map(|a| a.id)
            .collect();
        assert!(ids[..3].windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        assert_eq!(&ids[3..], &[1000, 1001]);
    }

    #[test]
    fn capacity_oblivious_fec_keeps_its_copies_where_they_were_queued() {
        let now = Duration::from_millis(5);
        let mut s = session_with(RecoveryMode::Fec { percent: 100.0 });
        s.send_adu(now, STREAM, Bytes::from_static(b"a"), Fields::new())
            .unwrap();
        queue_coded(&mut s, 1000);
        s.send_adu(now, STREAM, Bytes::from_static(b"b"), Fields::new())
            .unwrap();
        assert_eq!(kinds(&s), vec!['d', 'c', 'd']);
    }
}
