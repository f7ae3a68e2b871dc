//! Whole-task timings with figures printed, against the targets in docs/analyze.md:
//! the NMI lag sweep of a 1-hour, 1 s series with 64 lags and a 100-shuffle null (< 1 s),
//! and pcap parsing (>= 1 M packets/s).
//!
//!     cargo bench -p horde-analyze --bench analyze

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use horde_analyze::discretize::{discretize, Method};
use horde_analyze::info::nmi_sweep;
use horde_analyze::pcap::{encode_pcap, parse_pcap, Segment};
use horde_analyze::tcp;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    // A rate-like series: 3600 s, 0..160 kbit/s, and a lagged, noisy copy.
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let x: Vec<f64> = (0..3600).map(|_| rng.gen_range(0.0..160.0)).collect();
    let y: Vec<f64> = (0..3600)
        .map(|i| if i >= 5 { x[i - 5] } else { 0.0 } + rng.gen_range(0.0..40.0))
        .collect();
    let s = best_of(5, || {
        let xs = discretize(&x, Method::EqualWidth(10.0));
        let ys = discretize(&y, Method::EqualWidth(10.0));
        nmi_sweep(&xs, &ys, 63, 100, 7)
    });
    println!(
        "nmi sweep: 3600 samples, 64 lags, 100 shuffles: {:.3} s (target < 1 s)",
        s
    );

    // A bulk TCP flow: data segments and acks, 1 M records.
    let a = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 80);
    let b = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5000);
    let n = 1_000_000u32;
    let segs: Vec<Segment> = (0..n)
        .map(|i| {
            let data = i % 2 == 0;
            let k = i / 2;
            Segment {
                time: f64::from(i) * 1e-4,
                src: if data { a } else { b },
                dst: if data { b } else { a },
                seq: if data { k * 1400 } else { 0 },
                ack: if data { 0 } else { k * 1400 },
                ack_flag: true,
                control: false,
                len: if data { 1400 } else { 0 },
                sack: [None; 4],
            }
        })
        .collect();
    let bytes = encode_pcap(&segs);
    let s = best_of(3, || {
        parse_pcap("bench.pcap", &bytes).expect("valid capture")
    });
    println!(
        "pcap parse: {} packets ({} MB) in {:.3} s = {:.2} M packets/s (target >= 1)",
        n,
        bytes.len() / 1_000_000,
        s,
        f64::from(n) / s / 1e6
    );
    let parsed = parse_pcap("bench.pcap", &bytes).expect("valid capture");
    let s = best_of(3, || tcp::analyze(&parsed));
    println!(
        "tcp rtt analysis: {} packets in {:.3} s = {:.2} M packets/s",
        n,
        s,
        f64::from(n) / s / 1e6
    );
}
