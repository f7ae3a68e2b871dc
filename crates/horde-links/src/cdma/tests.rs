//! Statistical checks of every behaviour the thesis reports (003 §6), in virtual time.

use std::time::Duration;

use super::probe::{run, ProbeConfig, ProbeRun, Source};
use super::*;
use crate::{Delivery, LinkSpec};

fn probe(params: CdmaParams, seconds: u64, sources: &[Source]) -> Vec<ProbeRun> {
    let cfg = ProbeConfig {
        params,
        seconds,
        ..ProbeConfig::default()
    };
    run(&cfg, sources)
}

fn one(params: CdmaParams, seconds: u64, source: Source) -> ProbeRun {
    probe(params, seconds, &[source]).remove(0)
}

fn light_load() -> CdmaParams {
    // The thesis's limiter test: 6 am on a weekend, 3 users in the sector, Ec/Io -3..-4 dB.
    CdmaParams {
        calls_mean: 3.0,
        ecio_mean_db: -3.5,
        ecio_sd_db: 0.3,
        ..CdmaParams::default()
    }
}

#[test]
fn sustained_demand_up_to_60_kbps_is_followed() {
    for kbps in [20.0, 40.0, 60.0] {
        let r = one(CdmaParams::default(), 600, Source::Cbr { kbps });
        let g = r.goodput_kbps();
        assert!(g > 0.97 * kbps, "cbr {kbps}: goodput {g}");
        assert_eq!((r.denials, r.caps), (0, 0), "cbr {kbps}");
        // Only what is still in the air at the end is missing.
        assert!(r.sent - r.delivered <= 8, "{} of {}", r.delivered, r.sent);
    }
}

#[test]
fn greedy_cbr_above_the_limit_gets_less_than_60() {
    let at60 = one(CdmaParams::default(), 600, Source::Cbr { kbps: 60.0 }).goodput_kbps();
    for kbps in [80.0, 120.0] {
        let r = one(CdmaParams::default(), 600, Source::Cbr { kbps });
        let g = r.goodput_kbps();
        assert!(g < 0.8 * at60, "cbr {kbps}: goodput {g} vs {at60} at 60");
        assert!(r.caps + r.denials > 0);
    }
}

#[test]
fn backlogged_153_kbps_source_is_cut_to_zero_after_about_40_s() {
    let src = Source::OnOff {
        kbps: 153.6,
        on_s: 90.0,
        off_s: 30.0,
    };
    let r = one(light_load(), 120, src);
    let s = &r.seconds;
    // Tracked at the top rate at first...
    let early: f64 = s[3..30].iter().map(|x| x.assigned_kbps).sum::<f64>() / 27.0;
    assert!(early > 140.0, "{early}");
    // ...then cut to zero while the buffer is still backlogged.
    let cut = s
        .iter()
        .position(|x| x.assigned_kbps < 1.0 && x.backlog_bytes > 0)
        .expect("never cut");
    assert!((35..=46).contains(&cut), "cut at {cut} s");
    assert!(r.denials >= 1);
}

#[test]
fn bursts_of_2_s_at_115_kbps_are_served_but_4_s_are_not() {
    let onoff = |on_s, off_s| {
        one(
            CdmaParams::default(),
            300,
            Source::OnOff {
                kbps: 115.2,
                on_s,
                off_s,
            },
        )
    };
    let short = onoff(2.0, 8.0);
    let long = onoff(4.0, 6.0);
    let frac = |r: &ProbeRun| r.delivered as f64 / r.sent as f64;
    assert_eq!(short.caps + short.denials, 0);
    assert!(frac(&short) > 0.99, "{}", frac(&short));
    assert!(long.caps > 10, "{}", long.caps);
    assert!(frac(&long) < 0.75, "{}", frac(&long));
    // Served means fast too: a 2 s burst is through the air within a few seconds.
    let p90 = |r: &ProbeRun| {
        let mut v = r.rtts_ms.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() * 9 / 10]
    };
    assert!(p90(&short) < 2_500.0, "{}", p90(&short));
    assert!(
        p90(&long) > 2.0 * p90(&short),
        "{} {}",
        p90(&long),
        p90(&short)
    );
}

#[test]
fn every_burst_raises_the_rate_and_grants_can_exceed_demand() {
    // On 1 s / off 5 s at 40 kbit/s: the rate rises in every burst, and a sub-second
    // grant of a rate above 40 kbit/s appears (quantised up).
    let r = one(
        CdmaParams::default(),
        120,
        Source::OnOff {
            kbps: 40.0,
            on_s: 1.0,
            off_s: 5.0,
        },
    );
    for burst in (0..120).step_by(6).skip(1).take(18) {
        let during = r.seconds[burst]
            .assigned_kbps
            .max(r.seconds[burst + 1].assigned_kbps);
        let quiet = r.seconds[burst + 4].assigned_kbps;
        assert!(
            during > quiet + 5.0,
            "burst at {burst}: {during} vs {quiet}"
        );
        assert!(quiet <= 9.6 + 1e-9, "{quiet}");
    }
    let mut sector = CdmaSector::new(CdmaParams::default(), 1, 30_000, Duration::ZERO, 1, false);
    let mut peak: f64 = 0.0;
    for i in 0..10u64 {
        sector.enqueue(0, Duration::from_millis(i * 100), i, 500);
        peak = peak.max(sector.assigned_kbps(0));
    }
    for ms in (1000..3000).step_by(50) {
        sector.advance(Duration::from_millis(ms));
        peak = peak.max(sector.assigned_kbps(0));
    }
    // 40 kbit/s offered, but a 76.8 or 153.6 kbit/s grant appeared.
    assert!(peak >= 76.8, "{peak}");
}

#[test]
fn drop_tail_buffer_bounds_the_backlog_and_is_the_only_loss() {
    let r = one(CdmaParams::default(), 300, Source::Cbr { kbps: 120.0 });
    assert!(r.seconds.iter().all(|s| s.backlog_bytes <= 30_000));
    assert!(r.seconds.iter().any(|s| s.backlog_bytes > 25_000));
    let drops: u64 = r
        .seconds
        .iter()
        .map(|s| s.loss)
        .filter(|&l| l > 0.0)
        .count() as u64;
    assert!(drops > 0);
    // Below the limit nothing is lost at all.
    let calm = one(CdmaParams::default(), 300, Source::Cbr { kbps: 30.0 });
    assert!(calm.seconds[..295].iter().all(|s| s.loss == 0.0));
}

#[test]
fn base_delay_is_added_and_delivery_is_in_order() {
    let spec: LinkSpec = toml::from_str(
        "rate = { model = \"cdma1x_rtt\" }\nbuffer_bytes = 30000\n\
         delay = { model = \"constant\", ms = 250 }",
    )
    .unwrap();
    let mut link = spec.build(7, std::path::Path::new(".")).unwrap();
    // One 120 B packet alone: FCH 9.6 kbit/s serialises it in 100 ms.
    link.enqueue(Duration::ZERO, 0, 120);
    let mut out = Vec::new();
    let mut now = Duration::ZERO;
    while out.is_empty() {
        now = link.next_delivery().unwrap().max(now);
        link.deliver(now, &mut out);
    }
    assert_eq!(out[0].at, Duration::from_millis(350));
    // Many packets under a varying rate come out in the order they went in.
    let mut ids = Vec::new();
    let mut t = Duration::ZERO;
    for i in 1..3000u64 {
        t += Duration::from_millis(37);
        link.enqueue(t, i, 200 + (i % 7) as u32 * 150);
        let mut out: Vec<Delivery> = Vec::new();
        link.deliver(t, &mut out);
        ids.extend(out.iter().map(|d| d.id));
    }
    let mut out = Vec::new();
    while let Some(n) = link.next_delivery() {
        t = t.max(n);
        link.deliver(t, &mut out);
    }
    ids.extend(out.iter().map(|d| d.id));
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let s = link.stats();
    assert_eq!(s.offered, s.delivered + s.queue_drops);
    assert_eq!(s.lost, 0);
}

#[test]
fn one_user_at_153_kbps_per_sector_and_sharing_is_unfair() {
    let p = CdmaParams::default();
    let mut sector = CdmaSector::new(p, 3, 30_000, Duration::ZERO, 3, false);
    let mut id = 0;
    for ms in (0..60_000).step_by(20) {
        let now = Duration::from_millis(ms);
        for u in 0..3 {
            // Every user stays backlogged.
            sector.enqueue(u, now, id, 500);
            id += 1;
        }
        let top = (0..3).filter(|&u| sector.assigned_kbps(u) >= 153.6).count();
        assert!(top <= 1, "{top} users at 153.6 at {ms} ms");
        let total: f64 = (0..3).map(|u| sector.assigned_kbps(u)).sum();
        assert!(total <= 153.6 + 3.0 * 9.6 + 1e-9, "{total}");
    }
    // Greedy users in one sector: the fairness gap (max - min) / min grows with their number.
    let gap = |n: usize| {
        // Off-peak, as the thesis's 1-4 laptop experiment: the laptops are the sector.
        let runs = probe(light_load(), 400, &vec![Source::Cbr { kbps: 153.6 }; n]);
        let g: Vec<f64> = runs.iter().map(|r| r.goodput_kbps()).collect();
        let (lo, hi) = g
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        (hi - lo) / lo
    };
    let (g2, g4) = (gap(2), gap(4));
    assert!(g4 > g2 && g4 > 0.5, "gap 2 users {g2}, 4 users {g4}");
}

#[test]
fn ecio_and_load_series_do_not_move_the_rate_but_long_run_quality_does() {
    let src = Source::OnOff {
        kbps: 60.0,
        on_s: 3.0,
        off_s: 4.0,
    };
    let calm = one(CdmaParams::default(), 300, src);
    let wild = one(
        CdmaParams {
            ecio_sd_db: 6.0,
            ..CdmaParams::default()
        },
        300,
        src,
    );
    let rates = |r: &ProbeRun| {
        r.seconds
            .iter()
            .map(|s| s.assigned_kbps)
            .collect::<Vec<_>>()
    };
    assert_eq!(rates(&calm), rates(&wild));
    let sd = |r: &ProbeRun| {
        let v: Vec<f64> = r.seconds.iter().map(|s| s.ecio_db).collect();
        let m = v.iter().sum::<f64>() / v.len() as f64;
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
    };
    assert!(sd(&wild) > 2.0 * sd(&calm), "{} {}", sd(&wild), sd(&calm));
    let loads: Vec<u32> = calm.seconds.iter().map(|s| s.calls).collect();
    assert!(
        loads.iter().max() > loads.iter().min(),
        "load series is flat"
    );
    // A location whose long-run Ec/Io is poor gets much less.
    let greedy = Source::Cbr { kbps: 60.0 };
    let good = one(light_load(), 300, greedy).goodput_kbps();
    let poor = one(
        CdmaParams {
            ecio_mean_db: -12.0,
            ..light_load()
        },
        300,
        greedy,
    )
    .goodput_kbps();
    assert!(poor < 0.8 * good, "poor {poor} good {good}");
}

#[test]
fn spec_names_every_parameter_and_rejects_nonsense() {
    let spec: LinkSpec = toml::from_str(
        "rate = { model = \"cdma1x_rtt\", fch_kbps = 9.6, sch_kbps = [19.2, 38.4], \
         sch_holders = [4, 1], sustained_kbps = 50 }\nbuffer_bytes = 25000",
    )
    .unwrap();
    spec.validate().unwrap();
    let text = toml::to_string(&spec).unwrap();
    assert_eq!(toml::from_str::<LinkSpec>(&text).unwrap(), spec);
    let bad = |t: &str| {
        toml::from_str::<LinkSpec>(t)
            .map_err(|e| e.to_string())
            .and_then(|s| s.validate().map_err(|e| e.to_string()))
            .unwrap_err()
    };
    assert!(
        bad("rate = { model = \"cdma1x_rtt\", sch_kbps = [38.4, 19.2] }").contains("rate.sch_kbps")
    );
    assert!(
        bad("rate = { model = \"cdma1x_rtt\", sch_holders = [1] }").contains("rate.sch_holders")
    );
    assert!(bad("rate = { model = \"cdma1x_rtt\", grant = 3 }").contains("grant"));
    assert!(
        bad("rate = { model = \"cdma1x_rtt\" }\nloss = { model = \"bernoulli\", p = 0.1 }")
            .contains("loss")
    );
    assert!(bad(
        "rate = { model = \"cdma1x_rtt\" }\ndelay = { model = \"gaussian\", mean_ms = 1, sd_ms = 1 }"
    )
    .contains("delay"));
}

#[test]
fn mean_assigned_rate_is_the_mean_of_the_per_second_series() {
    let mut sector = CdmaSector::new(
        CdmaParams::default(),
        1,
        30_000,
        Duration::from_millis(250),
        7,
        true,
    );
    // Offer 800 kbit/s for 300 s: the buffer stays full, the limiter bites.
    let mut out = Vec::new();
    for i in 0..30_000u64 {
        let now = Duration::from_millis(10 * i);
        sector.enqueue(0, now, i, 1000);
        sector.deliver(0, now, &mut out);
    }
    sector.advance(Duration::from_secs(300));
    let series = sector.series(0);
    assert_eq!(series.len(), 300);
    let from_series = series.iter().map(|s| s.assigned_kbps).sum::<f64>() / 300.0;
    let mean = sector.mean_assigned_kbps(0).expect("the sector has run");
    assert!((mean - from_series).abs() < 0.01, "{mean} vs {from_series}");
    assert!(mean > 20.0 && mean < 100.0, "{mean}");
}

#[test]
fn an_idle_cdma_link_is_assigned_the_fundamental_channel_and_fixed_links_report_none() {
    use crate::{DelaySpec, RateSpec};
    let spec = LinkSpec {
        rate: Some(RateSpec::Cdma1xRtt(Box::default())),
        buffer_bytes: Some(30_000),
        delay: Some(DelaySpec::Constant { ms: 250.0 }),
        ..LinkSpec::default()
    };
    let mut link = spec.build(1, std::path::Path::new(".")).unwrap();
    assert_eq!(link.mean_assigned_kbps(), None, "no time has passed");
    let mut out = Vec::new();
    link.enqueue(Duration::ZERO, 0, 1000);
    link.deliver(Duration::from_secs(100), &mut out);
    assert_eq!(out.len(), 1);
    // One short SCH burst for the single packet, the FCH the rest of the time.
    let mean = link.mean_assigned_kbps().unwrap();
    assert!((9.6..9.8).contains(&mean), "{mean}");

    let fixed = LinkSpec {
        rate: Some(RateSpec::Constant { kbps: 100.0 }),
        ..LinkSpec::default()
    };
    let mut fixed = fixed.build(1, std::path::Path::new(".")).unwrap();
    fixed.enqueue(Duration::ZERO, 0, 1000);
    fixed.deliver(Duration::from_secs(1), &mut out);
    assert_eq!(fixed.mean_assigned_kbps(), None);
}
