//! The `horde send` and `horde recv` reports as text tables: a row per stream (or message
//! priority) and per channel every interval, then the summary.

use horde_apps::messages::send::MessageInterval;
use horde_apps::report::{RecvInterval, SendInterval};

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.1}"))
}

fn span(start_s: f64, end_s: f64) -> String {
    format!("{start_s:.1}-{end_s:.1}")
}

pub fn render_send(i: &SendInterval) -> String {
    let when = span(i.start_s, i.end_s);
    let mut rows = vec![[
        "interval s",
        "stream",
        "sent",
        "acked",
        "lost",
        "dropped",
        "abandoned",
        "goodput kbit/s",
        "latency p50 ms",
        "p95 ms",
    ]
    .map(String::from)
    .to_vec()];
    for s in &i.streams {
        rows.push(vec![
            when.clone(),
            s.name.clone(),
            s.sent.to_string(),
            s.acked.to_string(),
            s.lost.to_string(),
            s.dropped.to_string(),
            s.abandoned.to_string(),
            format!("{:.0}", s.goodput_kbps),
            ms(s.latency_ms.p50),
            ms(s.latency_ms.p95),
        ]);
    }
    let mut out = crate::table::render(&rows);
    let channels = i
        .channels
        .iter()
        .map(|c| (&c.name, c.acked, c.goodput_kbps));
    out.push_str(&channel_table(&when, "acked", channels));
    out
}

/// One interval of a message run: a row per priority.
pub fn render_send_messages(i: &MessageInterval) -> String {
    let when = span(i.start_s, i.end_s);
    let mut rows = vec![[
        "interval s",
        "priority",
        "offered",
        "refused",
        "delivered",
        "goodput kbit/s",
        "early callbacks",
        "undelivered",
    ]
    .map(String::from)
    .to_vec()];
    for p in &i.priorities {
        rows.push(vec![
            when.clone(),
            p.priority.to_string(),
            p.offered.to_string(),
            p.refused.to_string(),
            p.delivered.to_string(),
            format!("{:.0}", p.goodput_kbps),
            p.early_callbacks.to_string(),
            p.undelivered.to_string(),
        ]);
    }
    crate::table::render(&rows)
}

/// The per-channel rows of an interval: name, a packet count and goodput.
fn channel_table<'a>(
    when: &str,
    count: &str,
    channels: impl Iterator<Item = (&'a String, u64, f64)>,
) -> String {
    let mut rows = vec![["interval s", "channel", count, "goodput kbit/s"]
        .map(String::from)
        .to_vec()];
    for (name, n, goodput_kbps) in channels {
        rows.push(vec![
            when.to_string(),
            name.clone(),
            n.to_string(),
            format!("{goodput_kbps:.0}"),
        ]);
    }
    if rows.len() == 1 {
        return String::new(); // Nothing arrived on any channel yet.
    }
    crate::table::render(&rows)
}

pub fn render_recv(i: &RecvInterval) -> String {
    let when = span(i.start_s, i.end_s);
    let mut out = String::new();
    if !i.streams.is_empty() {
        let mut rows = vec![[
            "interval s",
            "stream",
            "received",
            "goodput kbit/s",
            "one-way p50 ms",
            "p95 ms",
            "in-order p50 ms",
            "p95 ms",
            "late",
            "skipped",
        ]
        .map(String::from)
        .to_vec()];
        for s in &i.streams {
            rows.push(vec![
                when.clone(),
                s.id.to_string(),
                s.received.to_string(),
                format!("{:.0}", s.goodput_kbps),
                ms(s.one_way_delay_ms.p50),
                ms(s.one_way_delay_ms.p95),
                ms(s.in_order_delay_ms.p50),
                ms(s.in_order_delay_ms.p95),
                s.late.to_string(),
                s.skipped.to_string(),
            ]);
        }
        out.push_str(&crate::table::render(&rows));
    }
    if !i.messages.is_empty() {
        let mut rows = vec![[
            "interval s",
            "priority",
            "messages",
            "goodput kbit/s",
            "delay p50 ms",
            "p95 ms",
            "late",
        ]
        .map(String::from)
        .to_vec()];
        for m in &i.messages {
            rows.push(vec![
                when.clone(),
                m.priority.to_string(),
                m.received.to_string(),
                format!("{:.0}", m.goodput_kbps),
                ms(m.delay_ms.p50),
                ms(m.delay_ms.p95),
                m.late.to_string(),
            ]);
        }
        out.push_str(&crate::table::render(&rows));
    }
    let channels = i
        .channels
        .iter()
        .map(|c| (&c.name, c.received, c.goodput_kbps));
    out.push_str(&channel_table(&when, "received", channels));
    out
}
