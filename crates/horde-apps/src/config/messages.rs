//! The message workload of a `horde send` file: `[[message_queues]]` (queues with a
//! weight) and `[[messages]]` (classes of messages, each with its priority, size, pace,
//! deadline and cancel-after), and their checks.

use horde_config::Checks;
use horde_proto::message::PRIORITY_LEVELS;
use serde::Deserialize;

/// The queue every application has; `[[messages]]` without a `queue` go there.
pub const DEFAULT_QUEUE: &str = "default";
/// The largest message a class may declare: the message layer's own limit (1 GiB).
pub const MAX_MESSAGE_BYTES: i64 = 1 << 30;
/// The smallest: the application header every message starts with
/// ([`crate::messages::header`]).
pub const MIN_MESSAGE_BYTES: i64 = crate::messages::header::HEADER_LEN as i64;
/// The most messages a second one class may declare.
pub const MAX_RATE: f64 = 100_000.0;
/// The highest queue weight.
pub const MAX_WEIGHT: i64 = 1_000;

/// A message queue besides the default one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageQueue {
    /// What `[[messages]]` entries name in `queue`.
    pub name: String,
    /// Its weight in the weighted fair split between queues (docs/messages.md).
    #[serde(default = "default_weight")]
    pub weight: i64,
}

fn default_weight() -> i64 {
    1
}

/// One class of messages: all of one priority, submitted at a steady pace.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageClass {
    /// Label in reports (default `messages N`).
    #[serde(default)]
    pub name: Option<String>,
    /// The queue, by name (default: the default queue).
    #[serde(default)]
    pub queue: Option<String>,
    /// 0 (most important) to 7.
    pub priority: i64,
    /// Bytes per message: fixed, or drawn uniformly from a range.
    pub size: MessageSize,
    /// Messages per second; or give `interval_ms`.
    #[serde(default)]
    pub rate: Option<f64>,
    /// Time between messages; or give `rate`.
    #[serde(default)]
    pub interval_ms: Option<f64>,
    /// Each message's deadline, from its submission; absent: none.
    #[serde(default)]
    pub deadline_ms: Option<f64>,
    /// Cancel a message that has not met its fate this long after its submission.
    #[serde(default)]
    pub cancel_after_ms: Option<f64>,
    /// What the sender does when a message's early callback fires.
    #[serde(default)]
    pub on_early: OnEarly,
}

/// A message size: `size = 2000` or `size = { min = 1000, max = 4000 }` (uniform).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(
    untagged,
    expecting = "a size in bytes (`size = 2000`) or a range (`size = { min = 1000, max = 4000 }`)"
)]
pub enum MessageSize {
    Fixed(i64),
    Uniform { min: i64, max: i64 },
}

impl MessageSize {
    /// The smallest and largest size it gives.
    pub fn bounds(self) -> (i64, i64) {
        match self {
            MessageSize::Fixed(n) => (n, n),
            MessageSize::Uniform { min, max } => (min, max),
        }
    }
}

/// The answer to an early callback ("the deadline can no longer be met").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnEarly {
    /// Send it anyway: it is delivered late, or ends `early` if its deadline passes
    /// before all of it was sent.
    #[default]
    Continue,
    /// Cancel it at once; the receiver frees what it holds of it.
    Cancel,
}

impl MessageClass {
    /// Time between two messages of the class, in seconds (checked to be positive).
    pub fn interval_s(&self) -> f64 {
        match (self.rate, self.interval_ms) {
            (Some(rate), _) => 1.0 / rate,
            (None, Some(ms)) => ms / 1e3,
            (None, None) => 1.0,
        }
    }
}

/// Checks `[[message_queues]]` and `[[messages]]`.
pub fn check(c: &mut Checks, queues: &[MessageQueue], classes: &[MessageClass]) {
    for (i, q) in queues.iter().enumerate() {
        let at = |k: &str| format!("message_queues[{i}].{k}");
        if q.name.is_empty() || q.name == DEFAULT_QUEUE {
            c.error(
                at("name"),
                format!("a message queue needs a name other than \"\" and \"{DEFAULT_QUEUE}\" (which always exists)"),
            );
        } else if queues[..i].iter().any(|o| o.name == q.name) {
            c.error(
                at("name"),
                format!("two [[message_queues]] are named {:?}", q.name),
            );
        }
        if !(1..=MAX_WEIGHT).contains(&q.weight) {
            c.error(
                at("weight"),
                format!("weight must be in 1..={MAX_WEIGHT}, got {}", q.weight),
            );
        }
    }
    for (i, m) in classes.iter().enumerate() {
        let at = |k: &str| format!("messages[{i}].{k}");
        if let Some(q) = &m.queue {
            if q != DEFAULT_QUEUE && !queues.iter().any(|d| &d.name == q) {
                c.error(
                    at("queue"),
                    format!("queue {q:?} is not declared in [[message_queues]]"),
                );
            }
        }
        let top = i64::from(PRIORITY_LEVELS) - 1;
        if !(0..=top).contains(&m.priority) {
            c.error(
                at("priority"),
                format!(
                    "priority must be in 0..={top} (0 the most important), got {}",
                    m.priority
                ),
            );
        }
        let size_at = match m.size {
            MessageSize::Fixed(_) => at("size"),
            MessageSize::Uniform { .. } => at("size.min"),
        };
        let (lo, hi) = m.size.bounds();
        for (n, path) in [(lo, size_at), (hi, at("size.max"))] {
            if !(MIN_MESSAGE_BYTES..=MAX_MESSAGE_BYTES).contains(&n) {
                c.error(
                    path,
                    format!(
                        "a message size must be in {MIN_MESSAGE_BYTES}..={MAX_MESSAGE_BYTES} bytes \
                         (the header every message starts with, up to 1 GiB), got {n}"
                    ),
                );
            }
        }
        if lo > hi {
            c.error(
                at("size"),
                format!("size.min ({lo}) is larger than size.max ({hi})"),
            );
        }
        match (m.rate, m.interval_ms) {
            (Some(_), Some(_)) => c.error(
                at("interval_ms"),
                "give rate (messages per second) or interval_ms, not both",
            ),
            (None, None) => c.error(
                format!("messages[{i}]"),
                "a [[messages]] entry needs rate (messages per second) or interval_ms",
            ),
            (Some(rate), None) => {
                c.positive(at("rate"), "rate", rate);
                if rate.is_finite() && rate > MAX_RATE {
                    c.error(
                        at("rate"),
                        format!("rate must be at most {MAX_RATE} messages per second, got {rate}"),
                    );
                }
            }
            (None, Some(ms)) => {
                c.positive(at("interval_ms"), "interval_ms", ms);
                c.not_too_long(at("interval_ms"), "interval_ms", ms, 1e-3);
                if ms.is_finite() && ms > 0.0 && ms < 1e3 / MAX_RATE {
                    c.error(
                        at("interval_ms"),
                        format!(
                            "interval_ms must be at least {} ({MAX_RATE} messages per second), got {ms}",
                            1e3 / MAX_RATE
                        ),
                    );
                }
            }
        }
        for (key, value) in [
            ("deadline_ms", m.deadline_ms),
            ("cancel_after_ms", m.cancel_after_ms),
        ] {
            if let Some(ms) = value {
                c.positive(at(key), key, ms);
                c.not_too_long(at(key), key, ms, 1e-3);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use horde_config::parse_checked;

    use super::*;
    use crate::config::SendConfig;

    const GOOD: &str = r#"key_file = "s.key"
peer_key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

[[channels]]
bind = "127.0.0.1:0"
remote = "127.0.0.1:7000"

[[message_queues]]
name = "bulk"
weight = 2

[[messages]]
priority = 0
size = 2000
rate = 4
deadline_ms = 300

[[messages]]
queue = "bulk"
priority = 6
size = { min = 100, max = 5000 }
interval_ms = 250
cancel_after_ms = 2000
on_early = "cancel"
"#;

    #[test]
    fn a_message_workload_parses_with_its_defaults() {
        let cfg = parse_checked::<SendConfig>(GOOD, "send.toml")
            .unwrap()
            .value;
        assert_eq!(cfg.messages.len(), 2);
        let (a, b) = (&cfg.messages[0], &cfg.messages[1]);
        assert_eq!(a.interval_s(), 0.25);
        assert_eq!(a.on_early, OnEarly::Continue);
        assert!(a.queue.is_none() && a.cancel_after_ms.is_none());
        assert_eq!(b.size.bounds(), (100, 5000));
        assert_eq!(b.interval_s(), 0.25);
        assert_eq!(b.on_early, OnEarly::Cancel);
        assert_eq!(cfg.message_queues[0].weight, 2);
    }

    #[test]
    fn the_shipped_message_file_loads() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/messages.toml");
        let shipped = std::fs::read_to_string(path).unwrap();
        // The file asks for the receiver's key; give it one.
        let peer = shipped
            .lines()
            .find(|l| l.starts_with("peer_key"))
            .expect("peer_key line");
        let key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        let text = shipped.replace(peer, &format!("peer_key = \"{key}\""));
        let cfg = parse_checked::<SendConfig>(&text, path).unwrap();
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        assert_eq!(cfg.value.messages.len(), 3);
        assert!(cfg.value.streams.is_empty());
    }

    #[test]
    fn bad_message_values_are_named_at_their_position() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("size = 2000", "size = -5", "send.toml:14:8: ", "a message size must be in 16..=1073741824 bytes (the header every message starts with, up to 1 GiB), got -5"),
            ("size = 2000", "size = 2000000000", "send.toml:14:8: ", "got 2000000000"),
            ("size = 2000", "size = \"big\"", "send.toml:14:8: ", "a size in bytes (`size = 2000`) or a range"),
            ("min = 100, max = 5000", "min = 6000, max = 5000", "send.toml:21:8: ", "size.min (6000) is larger than size.max (5000)"),
            ("priority = 0", "priority = 9", "send.toml:13:12: ", "priority must be in 0..=7 (0 the most important), got 9"),
            ("priority = 0", "priority = -1", "send.toml:13:12: ", "priority must be in 0..=7"),
            ("deadline_ms = 300", "deadline_ms = 0", "send.toml:16:15: ", "deadline_ms must be a positive number, got 0"),
            ("deadline_ms = 300", "deadline_ms = 1e30", "send.toml:16:15: ", "deadline_ms must be at most"),
            ("cancel_after_ms = 2000", "cancel_after_ms = -1", "send.toml:23:19: ", "cancel_after_ms must be a positive number"),
            ("rate = 4", "rate = 0", "send.toml:15:8: ", "rate must be a positive number, got 0"),
            ("rate = 4", "rate = 1e9", "send.toml:15:8: ", "rate must be at most 100000 messages per second"),
            ("rate = 4", "rate = 4\ninterval_ms = 10", "send.toml:16:15: ", "give rate (messages per second) or interval_ms, not both"),
            ("rate = 4\n", "", "send.toml:12:1: ", "needs rate (messages per second) or interval_ms"),
            ("interval_ms = 250", "interval_ms = 0.001", "send.toml:22:15: ", "interval_ms must be at least 0.01"),
            ("queue = \"bulk\"", "queue = \"nope\"", "send.toml:19:9: ", "queue \"nope\" is not declared in [[message_queues]]"),
            ("weight = 2", "weight = 0", "send.toml:10:10: ", "weight must be in 1..=1000, got 0"),
            ("name = \"bulk\"", "name = \"default\"", "send.toml:9:8: ", "a message queue needs a name other than"),
            ("on_early = \"cancel\"", "on_early = \"ignore\"", "send.toml:24:12: ", "unknown variant `ignore`"),
            ("deadline_ms = 300", "deadline = 300", "send.toml:16:1: ", "unknown field `deadline`"),
        ];
        let mut wrong = Vec::new();
        for (from, to, at, message) in cases {
            assert!(GOOD.contains(from), "{from}");
            let text = GOOD.replacen(from, to, 1);
            match parse_checked::<SendConfig>(&text, "send.toml") {
                Ok(_) => wrong.push(format!("{to}: accepted")),
                Err(e) => {
                    let e = e.to_string();
                    if !e.starts_with(at) || !e.contains(message) {
                        wrong.push(format!("{to}: {e}"));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        // Streams beside messages are welcome, but not on the message layer's ids.
        let stream = |id: u32| {
            format!(
                "{GOOD}\n[[streams]]\nid = {id}\nworkload = {{ kind = \"cbr\", kbps = 50, adu_bytes = 200 }}\n"
            )
        };
        assert!(parse_checked::<SendConfig>(&stream(1), "send.toml").is_ok());
        match parse_checked::<SendConfig>(&stream(0xFFFF_FF01), "send.toml") {
            Ok(_) => panic!("a stream on the message layer's id was accepted"),
            Err(e) => assert!(
                e.to_string()
                    .contains("stream id 4294967041 is the message layer's"),
                "{e}"
            ),
        }
    }
}
