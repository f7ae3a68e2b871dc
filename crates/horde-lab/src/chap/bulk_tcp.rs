//! A TCP download at segment level, endless (a bulk download) or of a given number of
//! segments (a Web page): Cubic congestion control (RFC 9438), or
//! NewReno's (RFC 5681: halve on loss, one segment per RTT), with SACK loss recovery
//! (RFC 6675), as the Linux 2.6 sender of the dissertation's FTP runs behaves: a
//! retransmission timeout of the smoothed RTT plus at least 200 ms, lost retransmissions
//! found from later SACKed segments, slow start after a timeout; and a receiver that
//! acknowledges every second segment and at once when data arrives out of order.
//!
//! Every TCP connection of the CHAP experiments uses it instead of the flow simulator's
//! smoltcp, which retransmits one segment per three duplicate ACKs, ignores SACK and
//! waits at least 1 s for a timeout: behind a 35-packet drop-tail queue its bulk flow
//! falls to a few Mbit/s where the dissertation's Cubic holds 23 Mbit/s, and a Web page
//! that loses a packet waits a second (docs/chap-experiments.md).
//! Segments are numbered, not byte-addressed, and the handshake is not modelled.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Payload bytes of a full segment (1500-byte IP packets, 40 bytes of headers).
pub const MSS: u32 = 1460;
/// IP packet sizes of a data segment and of an ACK (with room for SACK blocks).
pub const DATA_BYTES: u32 = 1500;
pub const ACK_BYTES: u32 = 52;

const INITIAL_CWND: f64 = 10.0;
const DUP_THRESH: usize = 3;
const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;
const NEWRENO_BETA: f64 = 0.5;
const MIN_RTO: Duration = Duration::from_millis(200);
const MAX_RTO: Duration = Duration::from_secs(60);
const DELAYED_ACK: Duration = Duration::from_millis(40);

/// An acknowledgement: the next segment expected and every segment held above it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub cumulative: u64,
    pub sacked: Vec<u64>,
}

/// How the congestion window grows and shrinks; loss recovery is SACK's in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Congestion {
    #[default]
    Cubic,
    NewReno,
}

/// The sending side.
#[derive(Debug)]
pub struct Sender {
    congestion: Congestion,
    cwnd: f64,
    ssthresh: f64,
    una: u64,
    next_new: u64,
    /// Segments to send in all; `None` for an endless download.
    total: Option<u64>,
    sacked: BTreeSet<u64>,
    /// Segments deemed lost and not yet sent again.
    lost: BTreeSet<u64>,
    /// Segments sent again since they were last deemed lost, each with the first
    /// segment number not yet sent when it was resent.
    resent: BTreeMap<u64, u64>,
    /// Fast recovery: the window holds until this segment is acknowledged.
    recovery_until: Option<u64>,
    /// Loss recovery after a timeout: the window slow-starts, and no hole found before
    /// this segment is acknowledged lowers it again.
    loss_until: Option<u64>,
    /// Send time of segments sent once (Karn: retransmissions give no RTT sample).
    sent_at: std::collections::BTreeMap<u64, Duration>,
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    rto_at: Option<Duration>,
    w_max: f64,
    epoch: Option<Duration>,
    pub retransmissions: u64,
    pub timeouts: u64,
}

impl Default for Sender {
    fn default() -> Self {
        Sender::new(Congestion::Cubic)
    }
}

impl Sender {
    pub fn new(congestion: Congestion) -> Self {
        Sender {
            congestion,
            cwnd: INITIAL_CWND,
            ssthresh: f64::INFINITY,
            una: 0,
            next_new: 0,
            total: None,
            sacked: BTreeSet::new(),
            lost: BTreeSet::new(),
            resent: BTreeMap::new(),
            recovery_until: None,
            loss_until: None,
            sent_at: Default::default(),
            srtt: None,
            rttvar: Duration::ZERO,
            rto: Duration::from_secs(1),
            rto_at: None,
            w_max: 0.0,
            epoch: None,
            retransmissions: 0,
            timeouts: 0,
        }
    }

    /// A transfer of `segments` segments, done once they are all acknowledged.
    pub fn finite(congestion: Congestion, segments: u64) -> Self {
        Sender {
            total: Some(segments),
            ..Sender::new(congestion)
        }
    }

    /// Segments in the network: sent, not acknowledged, not SACKed, not deemed lost.
    fn pipe(&self) -> f64 {
        let outstanding = self.next_new - self.una;
        (outstanding - self.sacked.len() as u64 - self.lost.len() as u64) as f64
    }

    /// Send what the window allows: lost segments first, then new ones.
    pub fn transmit(&mut self, now: Duration, out: &mut Vec<u64>) {
        while self.pipe() < self.cwnd.floor().max(1.0) {
            let seg = if let Some(s) = self.lost.pop_first() {
                self.resent.insert(s, self.next_new);
                self.sent_at.remove(&s);
                self.retransmissions += 1;
                s
            } else if self.total.is_some_and(|t| self.next_new >= t) {
                break;
            } else {
                let s = self.next_new;
                self.next_new += 1;
                self.sent_at.insert(s, now);
                s
            };
            out.push(seg);
            if self.rto_at.is_none() {
                self.rto_at = Some(now + self.rto);
            }
        }
    }

    fn sample_rtt(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let diff = srtt.abs_diff(rtt);
                self.rttvar = self.rttvar * 3 / 4 + diff / 4;
                self.srtt = Some(srtt * 7 / 8 + rtt / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(rtt);
        // Linux's floor: the minimum bounds the variance term, not the whole timeout, so a
        // long path waits at least its RTT plus 200 ms (RFC 6298's floor on the whole
        // timeout fires within fast recovery, before the first resend can come back).
        self.rto = (srtt + (4 * self.rttvar).max(MIN_RTO)).min(MAX_RTO);
    }

    fn on_congestion(&mut self, now: Duration) {
        self.w_max = self.cwnd;
        let beta = match self.congestion {
            Congestion::Cubic => CUBIC_BETA,
            Congestion::NewReno => NEWRENO_BETA,
        };
        self.cwnd = (self.cwnd * beta).max(2.0);
        self.ssthresh = self.cwnd;
        self.epoch = None;
        self.recovery_until = Some(self.next_new);
        let _ = now;
    }

    /// The window's growth for `acked` newly acknowledged segments: slow start, then
    /// Cubic's curve or NewReno's one segment per window.
    fn grow(&mut self, now: Duration, acked: u64) {
        for _ in 0..acked {
            if self.cwnd < self.ssthresh {
                self.cwnd += 1.0;
                continue;
            }
            if self.congestion == Congestion::NewReno {
                self.cwnd += 1.0 / self.cwnd;
                continue;
            }
            let epoch = *self.epoch.get_or_insert(now);
            let k = (self.w_max.max(self.cwnd) * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
            let t = (now - epoch).as_secs_f64() + self.srtt.unwrap_or_default().as_secs_f64();
            let target = CUBIC_C * (t - k).powi(3) + self.w_max.max(self.cwnd);
            self.cwnd += if target > self.cwnd {
                ((target - self.cwnd) / self.cwnd).min(1.0)
            } else {
                0.01 / self.cwnd
            };
        }
    }

    /// An ACK arrived; returns the segments to send.
    pub fn on_ack(&mut self, now: Duration, ack: &Ack, out: &mut Vec<u64>) {
        let cum = ack.cumulative.min(self.next_new);
        let acked = cum.saturating_sub(self.una);
        if acked > 0 {
            if let Some(t) = self.sent_at.get(&(cum - 1)).copied() {
                self.sample_rtt(now - t);
            }
            self.sent_at = self.sent_at.split_off(&cum);
            self.una = cum;
            self.sacked = self.sacked.split_off(&cum);
            self.lost = self.lost.split_off(&cum);
            self.resent = self.resent.split_off(&cum);
            self.rto_at = (self.una < self.next_new).then_some(now + self.rto);
        }
        for &s in &ack.sacked {
            if s >= self.una && s < self.next_new && self.sacked.insert(s) {
                self.lost.remove(&s);
                self.resent.remove(&s);
                self.sent_at.remove(&s);
            }
        }
        if self.recovery_until.is_some_and(|r| self.una >= r) {
            self.recovery_until = None;
        }
        if self.loss_until.is_some_and(|r| self.una >= r) {
            self.loss_until = None;
        }
        self.mark_lost_retransmissions();
        // RFC 6675: a hole with DupThresh SACKed segments above it is lost.
        let mut newly_lost = false;
        if self.sacked.len() >= DUP_THRESH {
            let threshold = *self
                .sacked
                .iter()
                .rev()
                .nth(DUP_THRESH - 1)
                .expect("len checked");
            for s in self.una..threshold {
                if !self.sacked.contains(&s) && !self.resent.contains_key(&s) && self.lost.insert(s)
                {
                    newly_lost = true;
                }
            }
        }
        if newly_lost && self.recovery_until.is_none() && self.loss_until.is_none() {
            self.on_congestion(now);
        } else if self.recovery_until.is_none() {
            self.grow(now, acked);
        }
        self.transmit(now, out);
    }

    pub fn timer(&self) -> Option<Duration> {
        self.rto_at
    }

    /// A resent segment whose resend went out before a segment now SACKed was lost
    /// again: on a path that keeps order it would have arrived first. This is Linux's
    /// lost-retransmission detection (tcp_mark_lost_retrans); without it every lost
    /// retransmission waits for the timeout.
    fn mark_lost_retransmissions(&mut self) {
        let Some(&highest) = self.sacked.last() else {
            return;
        };
        let again: Vec<u64> = self
            .resent
            .iter()
            .filter(|&(_, &sent_before)| highest >= sent_before)
            .map(|(&s, _)| s)
            .collect();
        for s in again {
            self.resent.remove(&s);
            self.lost.insert(s);
        }
    }

    /// The retransmission timer fired: everything outstanding is lost, the window
    /// restarts from one segment.
    pub fn on_timeout(&mut self, now: Duration, out: &mut Vec<u64>) {
        self.timeouts += 1;
        // As Linux's tcp_enter_loss: the threshold is lowered when the timeout opens a loss
        // episode, not again when fast recovery has lowered it already or for a backed-off
        // repeat. The window then slow-starts (RFC 5681), it does not hold at one segment
        // until everything outstanding is acknowledged.
        if self.recovery_until.is_none() && self.loss_until.is_none() {
            self.on_congestion(now);
        }
        self.epoch = None;
        self.recovery_until = None;
        self.loss_until = Some(self.next_new);
        self.cwnd = 1.0;
        self.resent.clear();
        self.lost = (self.una..self.next_new)
            .filter(|s| !self.sacked.contains(s))
            .collect();
        self.rto = (self.rto * 2).min(MAX_RTO);
        self.rto_at = None;
        self.transmit(now, out);
        if self.rto_at.is_none() && self.una < self.next_new {
            self.rto_at = Some(now + self.rto);
        }
    }
}

/// The receiving side.
#[derive(Debug, Default)]
pub struct Receiver {
    pub next: u64,
    held: BTreeSet<u64>,
    unacked: u32,
    ack_at: Option<Duration>,
}

impl Receiver {
    /// Segment `seg` arrived; returns an ACK to send now, if one is due.
    pub fn on_data(&mut self, now: Duration, seg: u64) -> Option<Ack> {
        let in_order = seg == self.next && self.held.is_empty();
        if seg == self.next {
            self.next += 1;
            while self.held.remove(&self.next) {
                self.next += 1;
            }
        } else if seg > self.next {
            self.held.insert(seg);
        }
        if in_order {
            self.unacked += 1;
            if self.unacked < 2 {
                self.ack_at.get_or_insert(now + DELAYED_ACK);
                return None;
            }
        }
        Some(self.ack())
    }

    fn ack(&mut self) -> Ack {
        self.unacked = 0;
        self.ack_at = None;
        Ack {
            cumulative: self.next,
            sacked: self.held.iter().copied().collect(),
        }
    }

    pub fn timer(&self) -> Option<Duration> {
        self.ack_at
    }

    /// The delayed-ACK timer fired.
    pub fn on_timeout(&mut self) -> Ack {
        self.ack()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_finite_transfer_sends_its_segments_and_no_more_and_then_stops_its_timer() {
        let mut s = Sender::finite(Congestion::Cubic, 13);
        let mut r = Receiver::default();
        let mut out = Vec::new();
        s.transmit(ms(0), &mut out);
        assert_eq!(out, (0..10).collect::<Vec<_>>());
        let mut sent = out.clone();
        for round in 1..10 {
            let mut acks: Vec<Ack> = out
                .drain(..)
                .filter_map(|seg| r.on_data(ms(round), seg))
                .collect();
            if r.timer().is_some() {
                acks.push(r.on_timeout());
            }
            for a in &acks {
                s.on_ack(ms(round), a, &mut out);
            }
            sent.extend(&out);
        }
        assert_eq!(r.next, 13);
        assert_eq!(
            sent,
            (0..13).collect::<Vec<_>>(),
            "each segment once, none past the end"
        );
        assert_eq!(s.timer(), None, "nothing outstanding, no timeout");
    }

    #[test]
    fn a_lost_segment_is_resent_after_three_sacked_segments_and_the_window_shrinks() {
        let mut s = Sender::default();
        let mut out = Vec::new();
        s.transmit(ms(0), &mut out);
        assert_eq!(out, (0..10).collect::<Vec<_>>());
        let mut r = Receiver::default();
        // Segment 2 is lost; the others arrive.
        let mut acks = Vec::new();
        for seg in (0..10).filter(|&x| x != 2) {
            acks.extend(r.on_data(ms(5), seg));
        }
        assert_eq!(r.next, 2);
        out.clear();
        for a in &acks {
            s.on_ack(ms(10), a, &mut out);
        }
        assert!(out.contains(&2), "{out:?}");
        assert_eq!(s.retransmissions, 1);
        assert!(s.cwnd < 10.0 + 2.0, "{}", s.cwnd);
        let ack = r
            .on_data(ms(15), 2)
            .expect("a filled hole is acknowledged at once");
        assert_eq!(ack.cumulative, 10);
        assert!(ack.sacked.is_empty());
    }

    #[test]
    fn a_timeout_resends_from_the_first_unacknowledged_segment_with_one_segment_window() {
        let mut s = Sender::default();
        let mut out = Vec::new();
        s.transmit(ms(0), &mut out);
        let at = s.timer().expect("armed");
        out.clear();
        s.on_timeout(at, &mut out);
        assert_eq!(out, vec![0]);
        assert_eq!(s.timeouts, 1);
        assert!(s.timer().unwrap() > at);
    }

    #[test]
    fn every_second_in_order_segment_is_acknowledged() {
        let mut r = Receiver::default();
        assert_eq!(r.on_data(ms(0), 0), None);
        assert_eq!(r.timer(), Some(ms(40)));
        assert_eq!(r.on_data(ms(1), 1).unwrap().cumulative, 2);
        assert_eq!(r.timer(), None);
        // Out of order: at once, with the segment held.
        let a = r.on_data(ms(2), 3).unwrap();
        assert_eq!((a.cumulative, a.sacked), (2, vec![3]));
    }

    #[test]
    fn a_long_path_times_out_no_sooner_than_its_rtt_plus_the_minimum() {
        let mut s = Sender::default();
        for _ in 0..50 {
            s.sample_rtt(ms(300));
        }
        // A steady 300 ms path: the variance is near zero, the floor keeps 200 ms of room.
        assert!(s.rto >= ms(499), "{:?}", s.rto);
        let mut short = Sender::default();
        for _ in 0..50 {
            short.sample_rtt(ms(4));
        }
        assert!(
            short.rto >= ms(200) && short.rto < ms(210),
            "{:?}",
            short.rto
        );
    }

    #[test]
    fn after_a_timeout_each_acknowledged_segment_grows_the_window() {
        let mut s = Sender::default();
        let mut out = Vec::new();
        s.transmit(ms(0), &mut out);
        out.clear();
        s.on_timeout(ms(1000), &mut out);
        assert_eq!(out, vec![0]);
        // Segment 0 is acknowledged; slow start sends two more, not one.
        out.clear();
        let ack = Ack {
            cumulative: 1,
            sacked: vec![],
        };
        s.on_ack(ms(1300), &ack, &mut out);
        assert_eq!(out, vec![1, 2]);
    }

    /// A sender whose first window (segments 0-9) arrived but for segment 2, after the
    /// receiver's ACKs reached it at 10 ms: it is in fast recovery. Also the receiver,
    /// and what the sender sent in answer to those ACKs.
    fn lost_segment_2() -> (Sender, Receiver, Vec<u64>) {
        let mut s = Sender::default();
        let mut out = Vec::new();
        s.transmit(ms(0), &mut out);
        let mut r = Receiver::default();
        let acks: Vec<Ack> = (0..10)
            .filter(|&x| x != 2)
            .filter_map(|seg| r.on_data(ms(5), seg))
            .collect();
        out.clear();
        for a in &acks {
            s.on_ack(ms(10), a, &mut out);
        }
        (s, r, out)
    }

    #[test]
    fn a_timeout_in_fast_recovery_keeps_the_threshold_recovery_set() {
        let (mut s, _, mut out) = lost_segment_2();
        let threshold = s.ssthresh;
        assert!(
            s.recovery_until.is_some() && threshold < 10.0,
            "{threshold}"
        );
        s.on_timeout(ms(1000), &mut out);
        assert_eq!(s.ssthresh, threshold);
    }

    #[test]
    fn a_lost_retransmission_is_resent_when_later_segments_are_sacked() {
        let (mut s, mut r, mut out) = lost_segment_2();
        // Segment 2 is resent, and new segments after it; the resend is lost, every new
        // segment arrives.
        let resend = out.iter().position(|&x| x == 2).expect("resent");
        assert!(out[resend + 1..].iter().any(|&x| x >= 10), "{out:?}");
        let later: Vec<u64> = out.iter().copied().filter(|&x| x >= 10).collect();
        assert!(!later.is_empty(), "{out:?}");
        let acks: Vec<Ack> = later
            .iter()
            .filter_map(|&seg| r.on_data(ms(15), seg))
            .collect();
        out.clear();
        for a in &acks {
            s.on_ack(ms(20), a, &mut out);
        }
        assert!(out.contains(&2), "resent again without a timeout: {out:?}");
        assert_eq!((s.retransmissions, s.timeouts), (2, 0));
    }

    /// The window after a loss at 20 segments, then `acks` ACKs of one segment each.
    fn after_loss(congestion: Congestion, acks: u64) -> f64 {
        let mut s = Sender::new(congestion);
        s.cwnd = 20.0;
        s.ssthresh = 20.0;
        s.srtt = Some(ms(100));
        s.on_congestion(ms(0));
        s.recovery_until = None;
        for k in 1..=acks {
            s.grow(ms(k), 1);
        }
        s.cwnd
    }

    #[test]
    fn newreno_halves_on_loss_and_grows_one_segment_per_window() {
        assert_eq!(after_loss(Congestion::NewReno, 0), 10.0);
        assert!((after_loss(Congestion::Cubic, 0) - 14.0).abs() < 1e-9);
        // A window's worth of ACKs (10) adds about one segment under NewReno.
        let grown = after_loss(Congestion::NewReno, 10);
        assert!((grown - 11.0).abs() < 0.05, "{grown}");
    }
}
