use super::*;
use crate::TraceStats;

const MINUTE_MS: u64 = 60_000;

fn stats(params: &CellularParams, duration_ms: u64, seed: u64) -> TraceStats {
    TraceStats::of(&generate(params, duration_ms, seed).unwrap())
}

/// The targets of docs/traces.md, checked on every trace, not on an average: each
/// 60 s trace a user generates should look cellular.
#[test]
fn every_trace_meets_the_targets_across_seeds_and_means() {
    for mean in [2.0, 6.0, 12.0] {
        let params = CellularParams::with_mean_mbps(mean);
        let (mut cv_sum, mut gap_sum) = (0.0, 0.0);
        let seeds = 1..=20;
        let n = seeds.clone().count() as f64;
        for seed in seeds {
            let s = stats(&params, MINUTE_MS, seed);
            let what = format!("mean {mean} Mbit/s, seed {seed}: {s:?}");
            assert!(
                (s.mean_mbps / mean - 1.0).abs() < 0.05,
                "realised mean: {what}"
            );
            let cv = s.cv_100ms.unwrap();
            assert!((0.6..=1.2).contains(&cv), "CV at 100 ms: {what}");
            assert!(
                (0.01..=0.20).contains(&s.gap_fraction),
                "time in gaps: {what}"
            );
            assert!(
                (100..=1500).contains(&s.longest_gap_ms),
                "longest gap: {what}"
            );
            cv_sum += cv;
            gap_sum += s.gap_fraction;
        }
        // The process's own averages sit well inside the ranges, not at an edge.
        let (cv, gap) = (cv_sum / n, gap_sum / n);
        assert!((0.75..=0.95).contains(&cv), "mean {mean}: average CV {cv}");
        assert!(
            (0.04..=0.11).contains(&gap),
            "mean {mean}: average gap {gap}"
        );
    }
}

#[test]
fn same_seed_same_trace_other_seed_other_trace() {
    let params = CellularParams::default();
    let a = generate(&params, 20_000, 7).unwrap();
    assert_eq!(a, generate(&params, 20_000, 7).unwrap());
    assert_ne!(a, generate(&params, 20_000, 8).unwrap());
}

#[test]
fn the_period_is_the_duration_and_the_text_round_trips() {
    for (duration_ms, seed) in [(60_000, 1), (1_234, 2), (1, 3)] {
        let trace = generate(&CellularParams::default(), duration_ms, seed).unwrap();
        assert_eq!(trace.period_ms(), duration_ms);
        assert_ne!(
            trace.opportunities_ms()[0],
            0,
            "0 would double up at the wrap"
        );
        let mut text = Vec::new();
        trace.write_mahimahi(&mut text).unwrap();
        assert_eq!(Trace::parse_bytes("gen", &text).unwrap(), trace);
    }
}

/// One state, no fading, rare outages: only the Poisson draw varies, so the CV at 100 ms
/// bins of a 12 Mbit/s trace (100 opportunities a bin) is about 1/sqrt(100).
#[test]
fn without_states_fading_or_outages_only_poisson_noise_is_left() {
    let params = CellularParams {
        mean_mbps: 12.0,
        states: vec![RateState {
            level: 1.0,
            dwell_s: 1.0,
        }],
        fading_sigma: 0.0,
        outage_interval_s: 1e9,
        ..CellularParams::default()
    };
    let s = stats(&params, MINUTE_MS, 1);
    let cv = s.cv_100ms.unwrap();
    assert!((0.08..0.12).contains(&cv), "{s:?}");
    assert_eq!(s.gap_fraction, 0.0, "{s:?}");
    assert!(s.longest_gap_ms < 20, "{s:?}");
}

/// Outages of exactly 300 ms every ~2 s on an otherwise dense, steady trace: each is an
/// interval of 301 ms without opportunities (the 300 empty milliseconds and the step to
/// the next opportunity; a few more if a neighbouring millisecond happens to be empty),
/// and together they cover their share of the time.
#[test]
fn outages_are_empty_intervals_of_the_configured_length() {
    let params = CellularParams {
        mean_mbps: 60.0, // 5 opportunities a ms: an empty millisecond has p = e^-5
        states: vec![RateState {
            level: 1.0,
            dwell_s: 1.0,
        }],
        fading_sigma: 0.0,
        outage_interval_s: 2.0,
        outage_min_ms: 300,
        outage_max_ms: 300,
        ..CellularParams::default()
    };
    let s = stats(&params, MINUTE_MS, 5);
    assert!((301..=304).contains(&s.longest_gap_ms), "{s:?}");
    // ~60 / 2.3 outages of 0.3 s: about 13% of the time, give or take the Poisson count.
    assert!((0.07..0.20).contains(&s.gap_fraction), "{s:?}");
}

#[test]
fn the_state_chain_sets_the_variation() {
    // A single state with no fading varies far less than the default four states.
    let flat = CellularParams {
        states: vec![RateState {
            level: 1.0,
            dwell_s: 1.0,
        }],
        fading_sigma: 0.0,
        ..CellularParams::default()
    };
    let flat_cv = stats(&flat, MINUTE_MS, 3).cv_100ms.unwrap();
    let default_cv = stats(&CellularParams::default(), MINUTE_MS, 3)
        .cv_100ms
        .unwrap();
    assert!(flat_cv < 0.5 && default_cv > 0.6, "{flat_cv} {default_cv}");
}

#[test]
fn bad_parameters_are_named() {
    let err = |params: CellularParams, duration_ms: u64| {
        generate(&params, duration_ms, 1).unwrap_err().to_string()
    };
    let ok = CellularParams::default;
    assert_eq!(
        err(CellularParams::with_mean_mbps(-1.0), 1000),
        "mean_mbps must be a positive number of Mbit/s, at most 1000, got -1"
    );
    assert!(err(CellularParams::with_mean_mbps(f64::NAN), 1000).starts_with("mean_mbps"));
    assert_eq!(
        err(
            CellularParams {
                states: vec![],
                ..ok()
            },
            1000
        ),
        "states must be at least one state, got none"
    );
    assert_eq!(
        err(
            CellularParams {
                states: vec![RateState {
                    level: 1.0,
                    dwell_s: 0.0
                }],
                ..ok()
            },
            1000
        ),
        "states.dwell_s must be a positive number, got 0"
    );
    assert_eq!(
        err(
            CellularParams {
                outage_min_ms: 500,
                outage_max_ms: 200,
                ..ok()
            },
            1000
        ),
        "outage_min_ms must be at least 1 and at most outage_max_ms (200), got 500"
    );
    assert_eq!(
        err(ok(), 0),
        "duration must be between 1 ms and 86400000 ms, got 0 ms"
    );
}

#[test]
fn params_read_from_toml_with_defaults() {
    let params: CellularParams =
        toml::from_str("mean_mbps = 11\nstates = [{ level = 1, dwell_s = 2 }]\n").unwrap();
    assert_eq!(params.mean_mbps, 11.0);
    assert_eq!(params.states.len(), 1);
    assert_eq!(
        params.outage_min_ms,
        CellularParams::default().outage_min_ms
    );
    let unknown = toml::from_str::<CellularParams>("mean_mbs = 11\n").unwrap_err();
    assert!(
        unknown.to_string().contains("unknown field `mean_mbs`"),
        "{unknown}"
    );
    let round_trip: CellularParams =
        toml::from_str(&toml::to_string(&CellularParams::default()).unwrap()).unwrap();
    assert_eq!(round_trip, CellularParams::default());
}
