//! The demo's live table: per-stream latency, loss and goodput and per-channel share.

use std::collections::BTreeMap;
use std::time::Duration;

use horde_apps::live::Live;

/// A table of per-stream latency, loss and goodput and per-channel share, all
/// cumulative since the start; narrow enough for an 80-column terminal.
pub fn table(
    live: &Live,
    elapsed: Duration,
    names: &BTreeMap<u32, String>,
    channels: &[String],
) -> String {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let total: u64 = live.channels.values().sum();
    let mut rows = vec![vec![
        "stream".to_string(),
        "sent".into(),
        "acked".into(),
        "lost".into(),
        "loss %".into(),
        "mean ms".into(),
        "p95 ms".into(),
        "kbit/s".into(),
    ]];
    for (id, s) in &live.streams {
        let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.0}"));
        rows.push(vec![
            names.get(id).cloned().unwrap_or_else(|| id.to_string()),
            s.queued.to_string(),
            s.acked.to_string(),
            (s.lost + s.dropped).to_string(),
            format!("{:.1}", 100.0 * s.loss_rate()),
            f(s.mean()),
            f(s.percentile(95)),
            format!("{:.0}", s.acked_bytes as f64 * 8.0 / secs / 1e3),
        ]);
    }
    for (name, s) in &live.classes {
        let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.0}"));
        rows.push(vec![
            format!("  {name}"),
            s.queued.to_string(),
            s.acked.to_string(),
            (s.lost + s.dropped).to_string(),
            format!("{:.1}", 100.0 * s.loss_rate()),
            f(s.mean()),
            f(s.percentile(95)),
            "".into(),
        ]);
    }
    let mut out = crate::table::render(&rows);
    let share: Vec<String> = live
        .channels
        .iter()
        .map(|(c, n)| {
            let name = channels
                .get(*c as usize)
                .cloned()
                .unwrap_or_else(|| format!("ch{c}"));
            format!("{name} {:.0}%", 100.0 * *n as f64 / total.max(1) as f64)
        })
        .collect();
    out.push_str(&format!("channel share: {}\n", share.join("  ")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_proto::{ChannelId, Event};

    #[test]
    fn the_table_shows_channel_shares_within_80_columns() {
        let mut l = Live::default();
        for (i, ms) in [10u64, 20, 30, 40].iter().enumerate() {
            l.on_sender_event(&Event::Ack {
                stream: 1,
                adu: i as u64,
                stream_seq: i as u64,
                channel: ChannelId::new([0, 1][i % 2]),
                rtt: Duration::from_millis(*ms),
                latency: Duration::from_millis(*ms),
            });
        }
        l.on_sender_event(&Event::Nack {
            stream: 1,
            adu: 9,
            stream_seq: 9,
            channel: Some(ChannelId::new(1)),
            reason: horde_proto::NackReason::Lost,
        });
        let t = table(
            &l,
            Duration::from_secs(1),
            &BTreeMap::from([(1, "video".to_string())]),
            &["a".into(), "b".into()],
        );
        assert!(t.contains("a 40%") && t.contains("b 60%"), "{t}");
        assert!(t.lines().all(|l| l.chars().count() < 80), "{t}");
    }
}
