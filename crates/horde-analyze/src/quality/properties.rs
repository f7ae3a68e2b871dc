//! Properties every metric keeps on any input: its range, and the direction it moves.

use proptest::prelude::*;

use super::*;

fn kind(k: u8) -> FrameKind {
    match k % 3 {
        0 => FrameKind::I,
        1 => FrameKind::P,
        _ => FrameKind::B,
    }
}

proptest! {
    /// G-model MOS stays in [0, 4.37] and never rises with ping or jitter.
    #[test]
    fn g_model_is_bounded_and_falls(ping in 0.0f64..2000.0, jitter in 0.0f64..500.0, more in 0.0f64..100.0) {
        let g = g_model_mos(ping, jitter).unwrap();
        prop_assert!((0.0..=G_MODEL_MAX).contains(&g));
        prop_assert!(g_model_mos(ping + more, jitter).unwrap() <= g);
        prop_assert!(g_model_mos(ping, jitter + more).unwrap() <= g);
    }

    /// E-model MOS stays in [1, 4.5] and never rises with delay or loss.
    #[test]
    fn e_model_is_bounded_and_falls(d in 0.0f64..2000.0, loss in 0.0f64..=1.0, more in 0.0f64..100.0, more_loss in 0.0f64..=1.0) {
        let m = e_model_mos(d, loss).unwrap();
        prop_assert!((1.0..=4.5).contains(&m));
        prop_assert!(e_model_mos(d + more, loss).unwrap() <= m + 1e-12);
        let l2 = (loss + more_loss).min(1.0);
        prop_assert!(e_model_mos(d, l2).unwrap() <= m + 1e-12);
    }

    /// Jain's index is in [1/n, 1] for any non-negative allocations.
    #[test]
    fn jain_is_between_one_over_n_and_one(x in proptest::collection::vec(0.0f64..1e9, 1..50)) {
        let j = jain_index(&x).unwrap();
        let n = x.len() as f64;
        prop_assert!(j >= 1.0 / n - 1e-9 && j <= 1.0 + 1e-9, "{}", j);
    }

    /// Losing one more packet never makes a frame playable, and the rate stays in
    /// [0, fps].
    #[test]
    fn losing_a_packet_never_helps(
        frames in proptest::collection::vec((any::<u8>(), 1u32..5, 0u32..6), 1..60),
        victim in any::<proptest::sample::Index>(),
    ) {
        let frames: Vec<VideoFrame> = frames
            .into_iter()
            .map(|(k, needed, arrived)| VideoFrame { kind: kind(k), needed, arrived })
            .collect();
        let before = playable(&frames);
        let mut worse = frames.clone();
        let v = victim.index(worse.len());
        worse[v].arrived = worse[v].arrived.saturating_sub(1);
        let after = playable(&worse);
        for (b, a) in before.iter().zip(&after) {
            prop_assert!(*b || !*a);
        }
        let r = playable_frame_rate(&frames, 30.0).unwrap();
        prop_assert!((0.0..=30.0).contains(&r));
    }
}
