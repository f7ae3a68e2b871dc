use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn until(it: impl Iterator<Item = AppPacket>, end: Duration) -> Vec<AppPacket> {
    it.take_while(|p| p.at < end).collect()
}

#[test]
fn the_game_sends_72_bytes_down_and_44_up_every_40_ms() {
    let pkts = until(game(1), Duration::from_secs(10));
    let down: Vec<_> = pkts
        .iter()
        .filter(|p| p.direction == Direction::Down)
        .collect();
    let up: Vec<_> = pkts
        .iter()
        .filter(|p| p.direction == Direction::Up)
        .collect();
    // 10 s / 40 ms = 250 packets each way.
    assert_eq!(down.len(), 250);
    assert_eq!(up.len(), 250);
    assert!(down.iter().all(|p| p.size == 72) && up.iter().all(|p| p.size == 44));
    for w in down.windows(2) {
        assert_eq!(w[1].at - w[0].at, Duration::from_millis(40));
        assert_eq!(w[1].seq, w[0].seq + 1);
    }
    // 72 B * 25 /s * 8 = 14.4 kbit/s downstream, the rate seed §6.9 quotes.
    let down_bits: u64 = down.iter().map(|p| u64::from(p.size) * 8).sum();
    assert_eq!(down_bits, 144_000);
    // Time order across directions.
    assert!(pkts.windows(2).all(|w| w[0].at <= w[1].at));
}

#[test]
fn voip_sends_200_bytes_each_way_every_20_ms() {
    let pkts = until(voip(2), Duration::from_secs(1));
    // 1 s / 20 ms = 50 each way; 200 B * 50 * 8 = 80 kbit/s each way (seed §2.1).
    for dir in [Direction::Down, Direction::Up] {
        let d: Vec<_> = pkts.iter().filter(|p| p.direction == dir).collect();
        assert_eq!(d.len(), 50);
        assert_eq!(d.iter().map(|p| u64::from(p.size) * 8).sum::<u64>(), 80_000);
        assert!(d.windows(2).all(|w| w[1].at - w[0].at == VOIP_PERIOD));
    }
}

#[test]
fn two_way_phases_are_seeded() {
    let a: Vec<_> = game(5).take(50).collect();
    assert_eq!(a, game(5).take(50).collect::<Vec<_>>());
    assert_ne!(a, game(6).take(50).collect::<Vec<_>>());
    assert!(a[0].at < GAME_PERIOD);
    assert!(TwoWay::new(0, 1, GAME_PERIOD, 0).is_err());
    assert!(TwoWay::new(1, 1, Duration::ZERO, 0).is_err());
}

/// The frames of a video stream, rebuilt from its packets: (frame, kind, bytes, data
/// packets, all packets), up to `frames` frames.
fn frames(src: VideoSource, frames: u64) -> Vec<(u64, FrameType, u64, u32, u32)> {
    let mut out: Vec<(u64, FrameType, u64, u32, u32)> = Vec::new();
    for p in src {
        let f = p.frame.unwrap();
        if f.frame >= frames {
            break;
        }
        if out.last().map(|l| l.0) != Some(f.frame) {
            out.push((f.frame, f.kind, 0, f.needed, f.count));
        }
        let last = out.last_mut().unwrap();
        if f.index < f.needed {
            last.2 += u64::from(p.size);
        }
    }
    out
}

#[test]
fn video_follows_the_gop_and_the_frame_rate() {
    let src = VideoSource::new(VideoParams::default(), 3).unwrap();
    let pkts: Vec<_> = src.take(2000).collect();
    // Frame k goes out at phase + k / 30 s, every packet of a frame at once.
    let first = pkts[0].at;
    for p in &pkts {
        let f = p.frame.unwrap();
        let want = first + Duration::from_nanos((f.frame as f64 * 1e9 / 30.0).round() as u64);
        assert_eq!(p.at, want);
        assert!(p.size <= 1500);
    }
    let fr = frames(VideoSource::new(VideoParams::default(), 3).unwrap(), 32);
    let kinds: String = fr
        .iter()
        .map(|f| match f.1 {
            FrameType::I => 'I',
            FrameType::P => 'P',
            FrameType::B => 'B',
        })
        .collect();
    assert_eq!(kinds, "IBBBPBBBPBBBPBBB".repeat(2));
    // Without FEC every packet is a data packet and the data packets carry the frame.
    for f in &fr {
        assert_eq!(f.3, f.4);
        assert_eq!(f.3 as u64, f.2.div_ceil(1500));
        assert!(f.2 <= 50_427);
    }
}

#[test]
fn video_rate_matches_its_means() {
    // Per GoP: 32,000 + 3 * 16,000 + 12 * 6,500 = 158,000 B in 16/30 s
    // = 158,000 * 8 * 30 / 16 = 2.37 Mbit/s. Truncation at 50,427 B trims the I frames a
    // little; 600 GoPs (320 s) average within 3%.
    let fr = frames(VideoSource::new(VideoParams::default(), 4).unwrap(), 9600);
    let bits: u64 = fr.iter().map(|f| f.2 * 8).sum();
    let mbps = bits as f64 / (9600.0 / 30.0) / 1e6;
    assert!((mbps - 2.37).abs() < 0.07, "{mbps} Mbit/s");
    // I frames are the largest on average, B the smallest.
    let mean = |t: FrameType| {
        let v: Vec<u64> = fr.iter().filter(|f| f.1 == t).map(|f| f.2).collect();
        v.iter().sum::<u64>() as f64 / v.len() as f64
    };
    assert!(mean(FrameType::I) > mean(FrameType::P) && mean(FrameType::P) > mean(FrameType::B));
}

#[test]
fn fec_adds_repair_packets() {
    let small = VideoParams {
        fec: Fec::Small,
        ..VideoParams::default()
    };
    for f in frames(VideoSource::new(small, 5).unwrap(), 64) {
        let repair = f.4 - f.3;
        assert_eq!(repair, u32::from(f.1 == FrameType::I));
    }
    // Constant sizes make the arithmetic exact. I = 30,000 B: 20 data packets and
    // round(0.15 * 30,000 / 1500) = round(3.0) = 3 repair packets. P = 10,000 B: 7 data
    // packets, round(1.0) = 1 repair. B = 4,000 B: 3 data packets, round(0.4) = 0.
    let large = VideoParams {
        fec: Fec::Large,
        cv: 0.0,
        mean_bytes: [30_000.0, 10_000.0, 4_000.0],
        ..VideoParams::default()
    };
    let fr = frames(VideoSource::new(large, 6).unwrap(), 16);
    assert_eq!((fr[0].3, fr[0].4), (20, 23));
    assert_eq!((fr[4].3, fr[4].4), (7, 8));
    assert_eq!((fr[1].3, fr[1].4), (3, 3));
}

#[test]
fn bad_video_parameters_are_named() {
    let err = |p: VideoParams| VideoSource::new(p, 0).unwrap_err().0;
    assert!(err(VideoParams {
        fps: 0.0,
        ..VideoParams::default()
    })
    .contains("fps"));
    assert!(err(VideoParams {
        gop: "PBB".into(),
        ..VideoParams::default()
    })
    .contains("gop"));
    assert!(err(VideoParams {
        gop: "IXP".into(),
        ..VideoParams::default()
    })
    .contains("gop"));
    assert!(err(VideoParams {
        cv: -1.0,
        ..VideoParams::default()
    })
    .contains("cv"));
    assert!(err(VideoParams {
        mean_bytes: [0.0, 1.0, 1.0],
        ..VideoParams::default()
    })
    .contains("mean I"));
    assert!(err(VideoParams {
        packet_bytes: 0,
        ..VideoParams::default()
    })
    .contains("packet_bytes"));
}

#[test]
fn web_pages_follow_table_6_1() {
    let n = 20_000;
    let pages: Vec<WebPage> = WebPages::new(WebParams::default(), 7)
        .unwrap()
        .take(n)
        .collect();
    let mut html: Vec<u64> = pages.iter().map(|p| p.html_bytes).collect();
    html.sort_unstable();
    // Median of the log-normal: e^7.90272 = 2703 B (truncation at 2 MB moves it by
    // well under 1%).
    let med = html[n / 2] as f64;
    assert!((med / 2703.0 - 1.0).abs() < 0.06, "median HTML {med}");
    assert!(*html.last().unwrap() <= 2_000_000);
    // Embedded objects: the whole part of Gamma(0.141385, 40.3257), at most 300; the
    // Gamma's mean is 5.70, its whole part about 5.2 (Table 6.1 reports 5.07).
    let objs: Vec<u32> = pages.iter().map(|p| p.embedded_objects).collect();
    let mean = objs.iter().map(|&o| f64::from(o)).sum::<f64>() / n as f64;
    assert!((4.8..5.9).contains(&mean), "mean objects {mean}");
    assert!(objs.iter().all(|&o| o <= 300));
    // The shape k < 1 puts most pages at 0 objects.
    let none = objs.iter().filter(|&&o| o == 0).count() as f64 / n as f64;
    assert!(none > 0.5, "{none}");
    for p in &pages {
        assert!((8..=629).contains(&p.request_bytes));
        assert_eq!(p.embedded_request_bytes.is_some(), p.embedded_objects > 0);
        assert_eq!(p.embedded_bytes == 0, p.embedded_objects == 0);
        assert!(p.embedded_bytes <= u64::from(p.embedded_objects) * 6_000_000);
        assert!(p.reading <= Duration::from_secs(10_000));
    }
    // Reading time median e^-0.495204 = 0.609 s.
    let mut reading: Vec<f64> = pages.iter().map(|p| p.reading.as_secs_f64()).collect();
    reading.sort_by(f64::total_cmp);
    assert!(
        (reading[n / 2] / 0.6094 - 1.0).abs() < 0.08,
        "{}",
        reading[n / 2]
    );
    // Request sizes: uniform on 8..=629, mean 318.5.
    let req = pages
        .iter()
        .map(|p| f64::from(p.request_bytes))
        .sum::<f64>()
        / n as f64;
    assert!((req - 318.5).abs() < 5.0, "{req}");
    assert_eq!(pages[3].index, 3);
}

#[test]
fn web_pages_are_seeded_and_checked() {
    let a: Vec<_> = WebPages::new(WebParams::default(), 1)
        .unwrap()
        .take(100)
        .collect();
    let b: Vec<_> = WebPages::new(WebParams::default(), 1)
        .unwrap()
        .take(100)
        .collect();
    assert_eq!(a, b);
    let bad = |p: WebParams| WebPages::new(p, 0).unwrap_err().0;
    assert!(bad(WebParams {
        html_lognormal: (1.0, 0.0),
        ..WebParams::default()
    })
    .contains("html_lognormal"));
    assert!(bad(WebParams {
        objects_gamma: (0.0, 1.0),
        ..WebParams::default()
    })
    .contains("objects_gamma"));
    assert!(bad(WebParams {
        request_bytes: (10, 5),
        ..WebParams::default()
    })
    .contains("request_bytes"));
    assert!(bad(WebParams {
        reading_max_s: f64::NAN,
        ..WebParams::default()
    })
    .contains("reading_max_s"));
}

proptest! {
    /// Any valid stream comes out in time order, its packets within the packet size, and
    /// each frame's packets numbered 0..count with the data packets first.
    #[test]
    fn video_packets_are_ordered_and_numbered(
        seed in any::<u64>(),
        fec in prop_oneof![Just(Fec::None), Just(Fec::Small), Just(Fec::Large)],
        packet in 200u32..2000,
    ) {
        let p = VideoParams { fec, packet_bytes: packet, ..VideoParams::default() };
        let pkts: Vec<_> = VideoSource::new(p, seed).unwrap().take(500).collect();
        let mut expect_index = 0;
        for w in pkts.windows(2) {
            prop_assert!(w[0].at <= w[1].at);
            prop_assert_eq!(w[1].seq, w[0].seq + 1);
        }
        for p in &pkts {
            let f = p.frame.unwrap();
            prop_assert!(p.size >= 1 && p.size <= packet);
            prop_assert!(f.needed >= 1 && f.needed <= f.count);
            prop_assert_eq!(f.index, expect_index);
            expect_index = if f.index + 1 == f.count { 0 } else { f.index + 1 };
        }
    }
}
