use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn one_attempt_at_11_mbit_s_for_1500_bytes() {
    // DIFS 50 + preamble 192 + (1500 + 34) * 8 / 11 = 1115.636 + SIFS 10 + preamble 192
    // + ACK 14 * 8 / 1 = 112  =>  1671.636 µs.
    let phy = Phy::dot11b(11.0);
    assert!(close(phy.attempt_us(1500), 1671.63636, 1e-3));
    assert_eq!(phy.attempt_time(1500), Duration::from_nanos(1_671_636));
}

#[test]
fn the_dissertation_emulation_constants() {
    // Seed Eq. 7.1: 50 + (0 + 34) * 8 / 54 + 10 + 14 * 8 / 1 = 50 + 5.037 + 10 + 112
    // = 177.0 µs; 1500 B: 50 + 1534 * 8 / 54 + 10 + 112 = 50 + 227.259 + 122 = 399.3 µs.
    let phy = Phy::chap_emulation();
    assert!(close(phy.attempt_us(0), 177.037, 1e-3));
    assert!(close(phy.attempt_us(1500), 399.259, 1e-3));
    // Seed §6.3's normaliser: ACK at 6 Mbit/s, no preamble:
    // 50 + 227.259 + 10 + 14 * 8 / 6 = 18.667  =>  305.9 µs.
    let ns2 = Phy {
        preamble_us: 0.0,
        ..Phy::dot11g(54.0)
    };
    assert!(close(ns2.attempt_us(1500), 305.926, 1e-3));
    // With the OFDM preamble before DATA and ACK: 305.926 + 2 * 20 = 345.926 µs.
    assert!(close(Phy::dot11g(54.0).attempt_us(1500), 345.926, 1e-3));
}

#[test]
fn windows_double_up_to_the_maximum() {
    let phy = Phy::chap_emulation();
    let w: Vec<u32> = (1..=8).map(|n| phy.window(n)).collect();
    assert_eq!(w, vec![32, 64, 128, 256, 512, 1024, 1024, 1024]);
}

#[test]
fn expected_airtime_is_the_closed_form_sum() {
    // FER 0.1: q = 0.9^2 = 0.81, an attempt fails with 0.19. d = 399.259 µs. Mean backoff
    // after failure n is (W_n - 1) / 2 slots of 20 µs: 310, 630, 1270, 2550 µs.
    // E = d + 0.19 (d + 310) + 0.19^2 (d + 630) + 0.19^3 (d + 1270) + 0.19^4 (d + 2550)
    //   = 399.259 + 134.759 + 37.156 + 11.449 + 3.844 = 586.468 µs.
    let phy = Phy::chap_emulation();
    let ch = Channel::with_fer(0.1).unwrap();
    assert!(close(phy.expected_airtime_us(1500, &ch), 586.468, 1e-3));
    // Delivery: 1 - 0.19^5 = 0.999752.
    assert!(close(phy.delivery_probability(&ch), 0.999_752, 1e-6));

    // The sampled mean agrees with it: 40,000 frames, standard error about 1.5 µs.
    let mut tx = Transmitter::new(phy, 7).unwrap();
    let n = 40_000;
    let total: f64 = (0..n)
        .map(|_| tx.send(1500, &ch).airtime.as_secs_f64() * 1e6)
        .sum();
    let mean = total / f64::from(n);
    assert!(close(mean, 586.468, 8.0), "sampled mean {mean} µs");
}

#[test]
fn the_bound_is_every_attempt_and_every_full_window() {
    // 5 * 399.259 + (31 + 63 + 127 + 255) * 20 = 1996.296 + 9520 = 11516.296 µs.
    let phy = Phy::chap_emulation();
    assert!(close(phy.max_airtime_us(1500), 11_516.296, 1e-3));
}

#[test]
fn a_clean_channel_sends_once_and_a_dead_one_gives_up() {
    let phy = Phy::chap_emulation();
    let mut tx = Transmitter::new(phy, 1).unwrap();
    let clean = Channel::with_fer(0.0).unwrap();
    let out = tx.send(1500, &clean);
    assert_eq!(out.attempts, 1);
    assert!(out.delivered);
    assert_eq!(out.airtime, phy.attempt_time(1500));

    let dead = Channel::with_fer(1.0).unwrap();
    let out = tx.send(1500, &dead);
    assert_eq!(out.attempts, 5);
    assert!(!out.delivered);
    assert!(out.airtime >= phy.attempt_time(1500) * 5);
    assert!(out.airtime <= phy.max_airtime(1500));
    assert_eq!(phy.delivery_probability(&dead), 0.0);
}

#[test]
fn distance_reproduces_the_dissertation_statistics() {
    // FER(d) = Phi(30 log10(d / 13) / 7); at 13 m the argument is 0, so FER = 0.5.
    let sh = Shadowing::dissertation();
    assert!(close(sh.fer(13.0).unwrap(), 0.5, 1e-12));
    // Seed §7.2.3 matched FER 0.25 to 9 m and 0.75 to 19 m:
    // 9 m: Phi(30 * -0.1597 / 7) = Phi(-0.684) = 0.247; 19 m: Phi(0.706) = 0.760.
    assert!(close(sh.fer(9.0).unwrap(), 0.25, 0.01));
    assert!(close(sh.fer(19.0).unwrap(), 0.75, 0.015));
    // Seed §6.4 at 10 m: 48.3%, 24.9%, 12.9% of frames on attempts 1, 2, 3 and 1.0%
    // lost after 7. FER(10) = Phi(-0.488) = 0.313, q = 0.687^2 = 0.472:
    // q = 0.472, (1 - q) q = 0.249, (1 - q)^2 q = 0.131, (1 - q)^7 = 0.011.
    let ch = Channel::at_distance(10.0, &sh).unwrap();
    let q = ch.attempt_success();
    assert!(close(q, 0.483, 0.015));
    assert!(close((1.0 - q) * q, 0.249, 0.005));
    assert!(close((1.0 - q).powi(2) * q, 0.129, 0.005));
    let phy = Phy::dot11g(54.0);
    assert!(close(1.0 - phy.delivery_probability(&ch), 0.010, 0.002));
    // 30 m: 97.3% lost after 7 attempts.
    let far = Channel::at_distance(30.0, &sh).unwrap();
    assert!(close(1.0 - phy.delivery_probability(&far), 0.973, 0.005));
    // 1 m: every frame on its first attempt.
    let near = Channel::at_distance(1.0, &sh).unwrap();
    assert!(near.attempt_success() > 0.999_99);
}

#[test]
fn the_sampled_attempt_counts_follow_the_channel() {
    let sh = Shadowing::dissertation();
    let ch = Channel::at_distance(10.0, &sh).unwrap();
    let mut tx = Transmitter::new(Phy::dot11g(54.0), 3).unwrap();
    let n = 20_000;
    let first = (0..n).filter(|_| tx.send(200, &ch).attempts == 1).count();
    let frac = first as f64 / n as f64;
    assert!(close(frac, ch.attempt_success(), 0.015), "{frac}");
}

#[test]
fn the_same_seed_gives_the_same_frames() {
    let ch = Channel::with_fer(0.3).unwrap();
    let run = |seed| {
        let mut tx = Transmitter::new(Phy::dot11b(11.0), seed).unwrap();
        (0..200).map(|_| tx.send(1000, &ch)).collect::<Vec<_>>()
    };
    assert_eq!(run(9), run(9));
    assert_ne!(run(9), run(10));
}

#[test]
fn bad_parameters_are_named() {
    let err = Channel::with_fer(1.5).unwrap_err();
    assert_eq!(
        err.to_string(),
        "fer must be a probability in [0, 1], got 1.5"
    );
    assert!(Channel::with_fer(f64::NAN).is_err());
    let err = Channel::at_distance(-1.0, &Shadowing::dissertation()).unwrap_err();
    assert!(err.to_string().starts_with("distance must be"), "{err}");
    let bad = Shadowing {
        sigma_db: 0.0,
        ..Shadowing::dissertation()
    };
    assert!(bad.fer(5.0).unwrap_err().to_string().contains("sigma_db"));
    let phy = Phy {
        max_attempts: 0,
        ..Phy::dot11b(11.0)
    };
    assert!(Transmitter::new(phy, 0)
        .unwrap_err()
        .to_string()
        .contains("max_attempts"));
    let phy = Phy {
        data_mbps: 0.0,
        ..Phy::dot11b(11.0)
    };
    assert!(Transmitter::new(phy, 0)
        .unwrap_err()
        .to_string()
        .contains("data_mbps"));
    let phy = Phy {
        cw_max: 16,
        ..Phy::dot11b(11.0)
    };
    assert!(Transmitter::new(phy, 0).is_err());
}

proptest! {
    /// Every frame costs at least one attempt per attempt made and at most the bound of
    /// its attempt count; a lost frame used every attempt; more attempts never cost less
    /// than the attempts themselves.
    #[test]
    fn airtime_grows_with_attempts_and_respects_the_bound(
        seed in any::<u64>(),
        fer in 0.0f64..=1.0,
        payload in 0u32..2400,
        attempts in 1u32..9,
    ) {
        let phy = Phy { max_attempts: attempts, ..Phy::dot11g(54.0) };
        let ch = Channel::with_fer(fer).unwrap();
        let mut tx = Transmitter::new(phy, seed).unwrap();
        let d = phy.attempt_us(payload);
        for _ in 0..20 {
            let out = tx.send(payload, &ch);
            let us = out.airtime.as_nanos() as f64 / 1000.0;
            prop_assert!(out.attempts >= 1 && out.attempts <= attempts);
            prop_assert!(out.delivered || out.attempts == attempts);
            // At least n attempts; at most n attempts plus n - 1 full windows.
            let n = f64::from(out.attempts);
            let top: f64 = (1..out.attempts)
                .map(|i| f64::from(phy.window(i) - 1) * phy.slot_us)
                .sum();
            prop_assert!(us >= n * d - 1e-3);
            prop_assert!(us <= n * d + top + 1e-3);
            prop_assert!(us <= phy.max_airtime_us(payload) + 1e-3);
        }
        // The bound and the mean grow with the attempt limit.
        let more = Phy { max_attempts: attempts + 1, ..phy };
        prop_assert!(more.max_airtime_us(payload) > phy.max_airtime_us(payload));
        prop_assert!(more.expected_airtime_us(payload, &ch) >= phy.expected_airtime_us(payload, &ch));
        prop_assert!(phy.expected_airtime_us(payload, &ch) <= phy.max_airtime_us(payload) + 1e-9);
    }
}

#[test]
fn the_closed_forms_do_not_panic_on_an_unchecked_phy() {
    let phy = Phy {
        cw_min: 0,
        cw_max: 0,
        ..Phy::dot11b(11.0)
    };
    assert!(phy.validate().is_err());
    let ch = Channel::with_fer(0.5).unwrap();
    // A zero window means no backoff: 7 attempts of d and nothing between them.
    assert_eq!(phy.max_airtime_us(100), 7.0 * phy.attempt_us(100));
    assert!(phy.expected_airtime_us(100, &ch) <= phy.max_airtime_us(100));
}
