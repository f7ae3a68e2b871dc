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
            s.not_delivered().to_string(),
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
            s.not_delivered().to_string(),
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

    /// The lost column counts what loss % counts: a loss a late ack took back is not
    /// lost, and an ADU abandoned at the close is.
    #[test]
    fn the_lost_column_agrees_with_loss_percent() {
        let mut l = Live::default();
        let nack = |seq: u64, reason| Event::Nack {
            stream: 1,
            adu: seq,
            stream_seq: seq,
            channel: Some(ChannelId::new(0)),
            reason,
        };
        for seq in 0..7u64 {
            l.on_sender_event(&Event::Ack {
                stream: 1,
                adu: seq,
                stream_seq: seq,
                channel: ChannelId::new(0),
                rtt: Duration::from_millis(10),
                latency: Duration::from_millis(10),
            });
        }
        l.on_sender_event(&nack(7, horde_proto::NackReason::Lost));
        l.on_sender_event(&Event::LateAck {
            stream: 1,
            adu: 7,
            stream_seq: 7,
            channel: ChannelId::new(0),
            rtt: Duration::from_millis(300),
            latency: Duration::from_millis(300),
        });
        l.on_sender_event(&nack(8, horde_proto::NackReason::Lost));
        l.on_sender_event(&nack(9, horde_proto::NackReason::Abandoned));
        let s = &l.streams[&1];
        assert_eq!(s.not_delivered(), 2);
        let t = table(&l, Duration::from_secs(1), &BTreeMap::new(), &["a".into()]);
        let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
        let (lost, pct) = (row[3], row[4]);
        assert_eq!(lost, "2", "{t}");
        assert_eq!(pct, format!("{:.1}", 100.0 * s.loss_rate()), "{t}");
    }
}
