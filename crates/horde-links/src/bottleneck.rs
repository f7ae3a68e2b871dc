//! The bottleneck stage: a FIFO served at some rate, behind a drop-tail byte buffer.
//!
//! Every accepted packet's departure time is fixed when it arrives, because in a FIFO it
//! depends only on the packets ahead of it and on the service schedule.
//!
//! The buffer holds packets whose transmission has not begun; a packet being serialized
//! (or partly sent in a trace opportunity) has left it, as in `mm-link`. An arriving packet
//! is accepted iff `bytes waiting + its size <= buffer_bytes`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::rate_steps::RateSteps;
use crate::trace::{Trace, OPPORTUNITY_BYTES};

/// How fast the bottleneck drains.
#[derive(Debug, Clone)]
pub(crate) enum Rate {
    /// Packets leave the moment they arrive.
    Unlimited,
    /// Serialization at a fixed rate: a packet of `size` bytes takes `size * 8 / rate`.
    Constant { ns_per_byte: f64 },
    /// Mahimahi delivery opportunities.
    Trace(Trace),
    /// Piecewise-constant rates changing at scripted times.
    Steps(RateSteps),
}

impl Rate {
    /// Constant rate in kbit/s (1 kbit = 1000 bits); `kbps` must be positive.
    pub(crate) fn constant_kbps(kbps: f64) -> Rate {
        Rate::Constant {
            ns_per_byte: 8e6 / kbps,
        }
    }
}

/// Where the previous accepted packet finished in a trace: opportunity index and bytes of it used.
#[derive(Debug, Clone, Copy)]
struct TraceCursor {
    opportunity: u64,
    used: u32,
}

#[derive(Debug)]
pub(crate) struct Bottleneck {
    rate: Rate,
    buffer_bytes: Option<u64>,
    /// Constant rate: when the last accepted packet finishes serializing.
    busy_until: Duration,
    /// Trace rate: where the last accepted packet finished.
    cursor: Option<TraceCursor>,
    /// (start of transmission, size) of accepted packets that may still be waiting.
    waiting: VecDeque<(Duration, u32)>,
    waiting_bytes: u64,
}

impl Bottleneck {
    pub(crate) fn new(rate: Rate, buffer_bytes: Option<u64>) -> Bottleneck {
        Bottleneck {
            rate,
            buffer_bytes,
            busy_until: Duration::ZERO,
            cursor: None,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
        }
    }

    /// Offer a packet at `now` (non-decreasing). Returns when it has completely left the
    /// bottleneck, or `None` if the buffer had no room.
    pub(crate) fn offer(&mut self, now: Duration, size: u32) -> Option<Duration> {
        if let Some(limit) = self.buffer_bytes {
            while let Some(&(start, bytes)) = self.waiting.front() {
                if start > now {
                    break;
                }
                self.waiting.pop_front();
                self.waiting_bytes -= u64::from(bytes);
            }
            if self.waiting_bytes.saturating_add(u64::from(size)) > limit {
                return None;
            }
        }
        let (start, departure) = match &self.rate {
            Rate::Unlimited => (now, now),
            Rate::Constant { ns_per_byte } => {
                let start = now.max(self.busy_until);
                // `as` saturates, so an absurdly slow link just never finishes.
                let serialization =
                    Duration::from_nanos((f64::from(size) * ns_per_byte).round() as u64);
                self.busy_until = start.saturating_add(serialization);
                (start, self.busy_until)
            }
            Rate::Steps(steps) => {
                let start = now.max(self.busy_until);
                self.busy_until = steps.finish(start, size);
                (start, self.busy_until)
            }
            Rate::Trace(trace) => {
                let (start, finish) = trace_schedule(trace, self.cursor, now, size);
                self.cursor = Some(finish);
                (
                    trace.opportunity_time(start.opportunity),
                    trace.opportunity_time(finish.opportunity),
                )
            }
        };
        if self.buffer_bytes.is_some() {
            self.waiting.push_back((start, size));
            self.waiting_bytes += u64::from(size);
        }
        Some(departure)
    }
}

/// `mm-link`'s rules: each opportunity sends up to 1500 bytes from the head of the FIFO; a
/// packet may span opportunities, several may share one, and an opportunity nobody is
/// queued for is wasted. A packet arriving at `now` can use opportunities after `now` only,
/// and shares the opportunity in which the previous packet finished only if that
/// opportunity is still to come and has bytes left.
///
/// Returns (where the packet's first byte goes, where its last byte goes).
fn trace_schedule(
    trace: &Trace,
    previous: Option<TraceCursor>,
    now: Duration,
    size: u32,
) -> (TraceCursor, TraceCursor) {
    let start = match previous {
        Some(prev) if trace.opportunity_time(prev.opportunity) > now => {
            if prev.used < OPPORTUNITY_BYTES {
                prev
            } else {
                TraceCursor {
                    opportunity: prev.opportunity.saturating_add(1),
                    used: 0,
                }
            }
        }
        _ => TraceCursor {
            opportunity: trace.first_opportunity_after(now),
            used: 0,
        },
    };
    let room = OPPORTUNITY_BYTES - start.used;
    let finish = if size <= room {
        TraceCursor {
            opportunity: start.opportunity,
            used: start.used + size,
        }
    } else {
        let rest = size - room;
        let more = rest.div_ceil(OPPORTUNITY_BYTES);
        TraceCursor {
            opportunity: start.opportunity.saturating_add(u64::from(more)),
            used: rest - (more - 1) * OPPORTUNITY_BYTES,
        }
    };
    (start, finish)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn trace_link(text: &str, buffer: Option<u64>) -> Bottleneck {
        Bottleneck::new(Rate::Trace(Trace::parse("t", text).unwrap()), buffer)
    }

    fn ms_of(d: Option<Duration>) -> Option<f64> {
        d.map(|d| d.as_secs_f64() * 1e3)
    }

    #[test]
    fn unlimited_passes_straight_through() {
        let mut b = Bottleneck::new(Rate::Unlimited, None);
        assert_eq!(b.offer(ms(5), 1_000_000), Some(ms(5)));
        assert_eq!(b.offer(ms(5), 1), Some(ms(5)));
    }

    #[test]
    fn constant_rate_serializes_fifo() {
        // 120 kbit/s: 768 B take 51.2 ms.
        let mut b = Bottleneck::new(Rate::constant_kbps(120.0), None);
        let got: Vec<_> = (0..3).map(|_| b.offer(ms(0), 768)).collect();
        let want: Vec<_> = (1..=3)
            .map(|i| Some(Duration::from_micros(51_200 * i)))
            .collect();
        assert_eq!(got, want);
        // Idle link: starts at arrival.
        assert_eq!(
            b.offer(ms(1000), 768),
            Some(Duration::from_micros(1_051_200))
        );
    }

    #[test]
    fn constant_rate_long_run_throughput_with_drops() {
        // Offer 2x the 100 kbit/s capacity for 60 s behind a 10 kB buffer.
        let mut b = Bottleneck::new(Rate::constant_kbps(100.0), Some(10_000));
        let (mut accepted, mut dropped, mut last) = (0u64, 0u64, Duration::ZERO);
        for i in 0..15_000u64 {
            // 1000 B every 40 ms = 200 kbit/s.
            match b.offer(ms(i * 40), 1000) {
                Some(dep) => {
                    accepted += 1;
                    last = dep;
                }
                None => dropped += 1,
            }
        }
        let rate_kbps = accepted as f64 * 8.0 / last.as_secs_f64();
        assert!((rate_kbps - 100.0).abs() < 1.0, "{rate_kbps}");
        let drop_fraction = dropped as f64 / 15_000.0;
        assert!((drop_fraction - 0.5).abs() < 0.01, "{drop_fraction}");
    }

    #[test]
    fn buffer_counts_only_packets_not_yet_started() {
        // 8 kbit/s: 1000 B take 1 s. Buffer 2000 B.
        let mut b = Bottleneck::new(Rate::constant_kbps(8.0), Some(2000));
        assert_eq!(b.offer(ms(0), 1000), Some(ms(1000))); // in service, not waiting
        assert_eq!(b.offer(ms(0), 1000), Some(ms(2000))); // waiting 1000
        assert_eq!(b.offer(ms(0), 1000), Some(ms(3000))); // waiting 2000
        assert_eq!(b.offer(ms(0), 1), None);
        assert_eq!(b.offer(ms(999), 1), None);
        // At 1 s the second packet starts, freeing 1000 B.
        assert_eq!(b.offer(ms(1000), 1000), Some(ms(4000)));
        assert_eq!(b.offer(ms(1000), 1), None);
        // A packet larger than the whole buffer never fits.
        let mut b = Bottleneck::new(Rate::Unlimited, Some(1500));
        assert_eq!(b.offer(ms(0), 1501), None);
        assert_eq!(b.offer(ms(0), 1500), Some(ms(0)));
        assert_eq!(b.offer(ms(0), 1500), Some(ms(0)));
    }

    #[test]
    fn trace_rate_matches_the_trace() {
        // 3 opportunities every 4 ms = 9 Mbit/s.
        let mut b = trace_link("1\n1\n4\n", None);
        let mut last = Duration::ZERO;
        for _ in 0..3000 {
            last = b.offer(ms(0), 1500).unwrap();
        }
        // 3000 packets = 1000 periods.
        assert_eq!(last, ms(4000));
        let mut b = trace_link("1\n1\n4\n", None);
        let (mut sent, mut last) = (0u64, Duration::ZERO);
        for i in 0..10_000u64 {
            // Saturate: 1000 B every 0.5 ms = 16 Mbit/s offered.
            last = b.offer(Duration::from_micros(i * 500), 1000).unwrap();
            sent += 1000;
        }
        let bps = sent as f64 * 8.0 / last.as_secs_f64();
        let expected = Trace::parse("t", "1\n1\n4\n").unwrap().capacity_bps();
        assert!((bps / expected - 1.0).abs() < 0.01, "{bps} vs {expected}");
    }

    #[test]
    fn trace_repeats_at_the_end() {
        let mut b = trace_link("5\n10\n", None);
        let got: Vec<_> = (0..5).map(|_| ms_of(b.offer(ms(0), 1500))).collect();
        assert_eq!(got, [5.0, 10.0, 15.0, 20.0, 25.0].map(Some));
        // With a leading 0 the wrap point has two opportunities; the one at 0 is spent.
        let mut b = trace_link("0\n10\n", None);
        let got: Vec<_> = (0..5).map(|_| ms_of(b.offer(ms(0), 1500))).collect();
        assert_eq!(got, [10.0, 10.0, 20.0, 20.0, 30.0].map(Some));
    }

    #[test]
    fn trace_packets_span_and_share_opportunities() {
        let mut b = trace_link("1\n2\n3\n4\n5\n6\n7\n8\n", None);
        // 1000 + 1000: the second is split 500 in opportunity 1, 500 in 2.
        assert_eq!(ms_of(b.offer(ms(0), 1000)), Some(1.0));
        assert_eq!(ms_of(b.offer(ms(0), 1000)), Some(2.0));
        // 1000 more fills opportunity 2 exactly.
        assert_eq!(ms_of(b.offer(ms(0), 1000)), Some(2.0));
        // 4000 B: 1500 at 3, 1500 at 4, 1000 at 5.
        assert_eq!(ms_of(b.offer(ms(0), 4000)), Some(5.0));
        // Three small packets share what is left of 5 and spill into 6.
        assert_eq!(ms_of(b.offer(ms(0), 200)), Some(5.0));
        assert_eq!(ms_of(b.offer(ms(0), 300)), Some(5.0));
        assert_eq!(ms_of(b.offer(ms(0), 100)), Some(6.0));
    }

    #[test]
    fn trace_arrivals_after_an_opportunity_cannot_share_it() {
        let mut b = trace_link("1\n2\n3\n4\n", None);
        assert_eq!(ms_of(b.offer(ms(0), 100)), Some(1.0));
        // Opportunity 1 is in the past at 1 ms (spent at exactly 1), so its 1400 spare bytes are lost.
        assert_eq!(ms_of(b.offer(ms(1), 100)), Some(2.0));
        // Arriving before 2 ms: shares opportunity 2.
        assert_eq!(ms_of(b.offer(Duration::from_micros(1500), 100)), Some(2.0));
    }

    #[test]
    fn trace_wastes_idle_opportunities() {
        let text: String = (1..=100).map(|t| format!("{t}\n")).collect();
        let mut b = trace_link(&text, None);
        let now = Duration::from_micros(50_500);
        let got: Vec<_> = (0..3).map(|_| ms_of(b.offer(now, 1500))).collect();
        assert_eq!(got, [51.0, 52.0, 53.0].map(Some));
    }

    #[test]
    fn trace_buffer_drops_follow_mm_link() {
        // One opportunity every 10 ms; the buffer holds 3000 B not yet started.
        let mut b = trace_link("10\n", Some(3000));
        assert_eq!(ms_of(b.offer(ms(0), 1500)), Some(10.0));
        assert_eq!(ms_of(b.offer(ms(0), 1500)), Some(20.0));
        assert_eq!(b.offer(ms(0), 1), None);
        // At 10 ms the first packet has gone; the second still waits for 20.
        assert_eq!(ms_of(b.offer(ms(10), 1500)), Some(30.0));
        assert_eq!(b.offer(ms(10), 1), None);
        assert_eq!(b.offer(ms(19), 1), None);
        // At 20 ms the second has gone too: room for 1500 B again, but no more.
        assert_eq!(ms_of(b.offer(ms(20), 1500)), Some(40.0));
        assert_eq!(b.offer(ms(20), 1), None);
        // A packet partly sent has left the buffer: 2000 B start at 10 and end at 20, so
        // at 10 the buffer is empty again and the next packet shares opportunity 20.
        let mut b = trace_link("10\n", Some(2000));
        assert_eq!(ms_of(b.offer(ms(0), 2000)), Some(20.0));
        assert_eq!(b.offer(ms(0), 1), None);
        assert_eq!(ms_of(b.offer(ms(10), 2000)), Some(30.0));
        assert_eq!(b.offer(ms(10), 1), None);
    }
}
