//! The `allocation` invariant's arithmetic: what each stream should have been sent in
//! the stable window, given its allocation, what its feed offered, and what the session
//! sent in all.
//!
//! The session's allocator divides the rate its channels' controllers estimate they
//! carry. When they carry less (burst losses stalling a small window, a round trip above
//! the controller's model), every elastic stream falls short alike and no scheduling
//! could help: that is the controllers' estimate, not the allocation, being off. What the
//! session controls is the split, so a stream is held to the lowest of its mean
//! allocation, its offered rate, and its fair share of what the session did send (the
//! same min-max division, over the streams' offered rates). A sender that sends too
//! little overall leaves open slots unused, which the `sender_idle` check catches.

use horde_policy::{allocate, Demand};

/// One stream's figures over the stable window, in payload bytes/s.
#[derive(Debug, Clone, Copy)]
pub struct StreamWindow {
    pub id: u32,
    pub sent: f64,
    /// Mean announced allocation; `None` if the stream never heard one.
    pub allocation: Option<f64>,
    /// What its feed offered (infinite for a bulk feed).
    pub offered: f64,
    /// Its configured cap, as the session's allocator sees it.
    pub demand: Demand,
}

/// A stream sent less than `1 - tolerance` of what it should have.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shortfall {
    pub id: u32,
    pub sent: f64,
    pub allocation: f64,
    pub offered: f64,
    /// Its fair share of `carried`.
    pub fair: f64,
    /// What the session sent in all.
    pub carried: f64,
}

/// The streams sent less than `1 - tolerance` of the lowest of their allocation, offered
/// rate and fair share of what was sent in all.
pub fn shortfalls(streams: &[StreamWindow], tolerance: f64) -> Vec<Shortfall> {
    let carried: f64 = streams.iter().map(|s| s.sent).sum();
    let demands: Vec<Demand> = streams
        .iter()
        .map(|s| match s.demand {
            Demand::MaxRate(cap) => Demand::MaxRate(s.offered.min(cap)),
            Demand::Elastic if s.offered.is_finite() => Demand::MaxRate(s.offered),
            Demand::Elastic => Demand::Elastic,
        })
        .collect();
    let fair = allocate(carried, &demands);
    streams
        .iter()
        .zip(fair)
        .filter_map(|(s, fair)| {
            let allocation = s.allocation?;
            let expected = allocation.min(s.offered).min(fair);
            (s.sent < (1.0 - tolerance) * expected).then_some(Shortfall {
                id: s.id,
                sent: s.sent,
                allocation,
                offered: s.offered,
                fair,
                carried,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(id: u32, sent: f64, allocation: f64) -> StreamWindow {
        StreamWindow {
            id,
            sent,
            allocation: Some(allocation),
            offered: f64::INFINITY,
            demand: Demand::Elastic,
        }
    }

    #[test]
    fn channels_carrying_less_than_estimated_short_every_stream_alike_and_pass() {
        // Seed 12235's window: three bulk streams allocated 63.5 kB/s each by the
        // channels' estimates, which carried three quarters of that.
        let s = [
            bulk(1, 48_738.0, 63_544.0),
            bulk(2, 44_090.0, 63_544.0),
            bulk(3, 50_854.0, 63_544.0),
        ];
        assert!(shortfalls(&s, 0.3).is_empty());
    }

    #[test]
    fn a_stream_starved_beside_others_fails_whatever_the_channels_carried() {
        let s = [
            bulk(1, 20_000.0, 63_544.0),
            bulk(2, 60_000.0, 63_544.0),
            bulk(3, 60_000.0, 63_544.0),
        ];
        let f = shortfalls(&s, 0.3);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, 1);
        assert!((f[0].fair - 140_000.0 / 3.0).abs() < 1.0);
        // Beside a stream sent its whole allocation.
        let s = [bulk(1, 30_000.0, 63_544.0), bulk(2, 63_544.0, 63_544.0)];
        let f = shortfalls(&s, 0.3);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, 1);
    }

    #[test]
    fn a_stream_offering_less_than_its_share_is_held_to_its_offer() {
        let cbr = |sent| StreamWindow {
            id: 2,
            sent,
            allocation: Some(60_000.0),
            offered: 10_000.0,
            demand: Demand::Elastic,
        };
        // The bulk stream takes what the CBR one leaves: both are fine.
        assert!(shortfalls(&[bulk(1, 50_000.0, 60_000.0), cbr(9_800.0)], 0.3).is_empty());
        // Half its offer sent while the bulk stream ran: the CBR stream was starved.
        let f = shortfalls(&[bulk(1, 50_000.0, 60_000.0), cbr(5_000.0)], 0.3);
        assert_eq!(f.iter().map(|x| x.id).collect::<Vec<_>>(), vec![2]);
        // A stream that never heard an allocation is not checked.
        let mut quiet = cbr(0.0);
        quiet.allocation = None;
        assert!(shortfalls(&[bulk(1, 50_000.0, 60_000.0), quiet], 0.3).is_empty());
    }
}
