//! What a `horde shell --log DIR` run says about the data direction of its links: the
//! per-packet one-way delay through them, the packets they dropped and the bytes each
//! one carried. Every contender of `horde bench links --kernel` is measured by this one
//! function, so their delays and losses are comparable whatever protocol they speak.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};

const HEADER: &str = "arrival_ms,departure_ms,size,dropped,reason";

/// One packet offered to a link's `up` (namespace to host) direction.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Packet {
    arrival_ms: f64,
    /// `None` when the link dropped it.
    departure_ms: Option<f64>,
    size: u64,
}

/// The data direction of every link over one time window.
#[derive(Debug, Clone, PartialEq)]
pub struct UpSummary {
    pub delay_p50_ms: f64,
    pub delay_p95_ms: f64,
    /// Packets dropped by the links (queue or random loss) over packets offered to them.
    pub loss: f64,
    /// IP bytes each link delivered in the window, as Mbit/s over the window.
    pub link_mbps: Vec<f64>,
    pub packets: u64,
}

/// Read `link{i}-up.csv` for `links` links in `dir` and summarize the packets that
/// reached the links within `window` of the first one (the first handshake packet).
pub fn summarize(dir: &Path, links: usize, window: Duration) -> Result<UpSummary> {
    let per_link = (0..links)
        .map(|i| {
            let path = dir.join(format!("link{i}-up.csv"));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading the packet log {}", path.display()))?;
            parse(&text).with_context(|| format!("packet log {}", path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(summarize_packets(&per_link, window))
}

fn parse(text: &str) -> Result<Vec<Packet>> {
    let mut lines = text.lines();
    match lines.next() {
        Some(HEADER) => {}
        other => bail!("expected the header {HEADER:?}, got {other:?}"),
    }
    lines
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(n, l)| parse_line(l).with_context(|| format!("line {}: {l:?}", n + 2)))
        .collect()
}

fn parse_line(line: &str) -> Result<Packet> {
    let f: Vec<&str> = line.split(',').collect();
    if f.len() != 5 {
        bail!("expected 5 fields, got {}", f.len());
    }
    let departure_ms = match (f[1], f[3]) {
        ("", "1") => None,
        (d, "0") => Some(d.parse().context("departure_ms")?),
        _ => bail!("a packet is either delivered with a departure time or dropped without"),
    };
    Ok(Packet {
        arrival_ms: f[0].parse().context("arrival_ms")?,
        departure_ms,
        size: f[2].parse().context("size")?,
    })
}

fn summarize_packets(per_link: &[Vec<Packet>], window: Duration) -> UpSummary {
    let start = per_link
        .iter()
        .flatten()
        .map(|p| p.arrival_ms)
        .fold(f64::INFINITY, f64::min);
    let end = start + window.as_secs_f64() * 1e3;
    let mut delays = Vec::new();
    let (mut offered, mut dropped) = (0u64, 0u64);
    let mut link_mbps = Vec::with_capacity(per_link.len());
    for packets in per_link {
        let mut bytes = 0u64;
        for p in packets.iter().filter(|p| p.arrival_ms <= end) {
            offered += 1;
            match p.departure_ms {
                Some(d) => {
                    delays.push(d - p.arrival_ms);
                    bytes += p.size;
                }
                None => dropped += 1,
            }
        }
        link_mbps.push(bytes as f64 * 8.0 / window.as_secs_f64() / 1e6);
    }
    delays.sort_by(f64::total_cmp);
    UpSummary {
        delay_p50_ms: nearest_rank(&delays, 0.50),
        delay_p95_ms: nearest_rank(&delays, 0.95),
        loss: if offered == 0 {
            0.0
        } else {
            dropped as f64 / offered as f64
        },
        link_mbps,
        packets: offered,
    }
}

/// The `q`-quantile of sorted values by nearest rank; 0 without values.
fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(rows: &[&str]) -> String {
        std::iter::once(HEADER)
            .chain(rows.iter().copied())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn delays_losses_and_bytes_come_from_the_window_only() {
        let a = parse(&log(&[
            "100.000,130.000,1500,0,",
            "101.000,,1500,1,queue",
            "102.000,142.000,1500,0,",
            // After the 1 s window that starts at the first packet: left out.
            "1200.000,1230.000,1500,0,",
        ]))
        .unwrap();
        let b = parse(&log(&["150.000,160.000,1000,0,"])).unwrap();
        let s = summarize_packets(&[a, b], Duration::from_secs(1));
        assert_eq!(s.packets, 4);
        assert_eq!(s.loss, 0.25);
        // Delays 30, 40, 10 ms: median 30, p95 40.
        assert_eq!((s.delay_p50_ms, s.delay_p95_ms), (30.0, 40.0));
        assert_eq!(s.link_mbps, vec![3000.0 * 8.0 / 1e6, 1000.0 * 8.0 / 1e6]);
    }

    #[test]
    fn a_link_that_carried_nothing_reports_zero() {
        let a = parse(&log(&["0.5,10.5,100,0,"])).unwrap();
        let s = summarize_packets(&[a, Vec::new()], Duration::from_secs(2));
        assert_eq!(s.link_mbps[1], 0.0);
        assert_eq!(s.delay_p95_ms, 10.0);
    }

    #[test]
    fn a_malformed_log_is_an_error_naming_the_line() {
        let e = parse(&log(&["1.0,2.0,100,0,", "1.0,,x,1,queue"])).unwrap_err();
        assert!(format!("{e:#}").contains("line 3"), "{e:#}");
        let e = parse("time,size\n").unwrap_err();
        assert!(e.to_string().contains("expected the header"), "{e}");
        assert!(
            parse(&log(&["1.0,,100,0,"])).is_err(),
            "delivered without departure"
        );
    }
}
