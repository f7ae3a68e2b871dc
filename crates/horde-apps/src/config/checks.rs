//! Every value of the `horde send` and `horde recv` files checked once parsed, each
//! error at its `file:line:col`, and a warning for an objective that can match no
//! stream of the file.

use std::path::Path;
use std::sync::Arc;

use horde_config::checks::session;
use horde_config::{Checks, Validate};
use horde_crypto::ServerId;
use horde_policy::{AduView, Objective, ObjectiveSet, ScheduleInput, StreamStats, TxSlot};
use horde_proto::{ChannelId, MTU_RANGE};
use horde_workload::{burst_fits_the_queue, stream_seed, WorkloadSpec};

use super::{device, RecvConfig, SendConfig};

/// How long of each workload the objective probe looks at, in s: a video's first
/// group of pictures and then some.
const PROBE_SECS: f64 = 2.0;
/// At most this many ADUs per stream go into the probe.
const PROBE_ADUS: usize = 64;

impl Validate for SendConfig {
    fn validate(&self, c: &mut Checks) {
        if self.key_file.as_os_str().is_empty() {
            c.error(
                "key_file",
                "key_file must name a key file (see `horde keygen`)",
            );
        }
        if let Err(e) = self.peer_key.trim().parse::<horde_crypto::PublicKey>() {
            c.error("peer_key", format!("peer_key: {e}"));
        }
        c.positive("duration_s", "duration_s", self.duration_s);
        c.not_too_long("duration_s", "duration_s", self.duration_s, 1.0);
        session(c, &self.session);
        if let Some(s) = &self.scheduler {
            if let Err(e) = crate::hose::scheduler(s) {
                c.error("scheduler", format!("{e:#}"));
            }
        }
        super::SendChannel::check_all(c, &self.channels, MTU_RANGE);
        for (i, s) in self.streams.iter().enumerate() {
            let at = |k: &str| format!("streams[{i}].{k}");
            if self.streams[..i].iter().any(|o| o.id == s.id) {
                c.error(at("id"), format!("two [[streams]] have id {}", s.id));
            }
            if horde_net::messages::is_message_stream(s.id) {
                c.error(
                    at("id"),
                    format!("stream id {} is the message layer's: ids 4294967040 to 4294967042 are reserved", s.id),
                );
            }
            if let Some(k) = s.max_kbps {
                c.positive(at("max_kbps"), "max_kbps", k);
                c.not_too_fast(at("max_kbps"), "max_kbps", k);
            }
            if let Some(ms) = s.latency_bound_ms {
                if !horde_proto::LATENCY_BOUND_MS.contains(&ms) {
                    c.error(
                        at("latency_bound_ms"),
                        format!(
                            "latency_bound_ms must be 1 to 60000 ms, got {}",
                            horde_config::shown(ms)
                        ),
                    );
                }
            }
            let copies = s.latency_copies;
            if !(1..=2).contains(&copies) {
                c.error(
                    at("latency_copies"),
                    format!("latency_copies must be 1 or 2, got {copies}"),
                );
            } else if copies == 2
                && s.latency_bound_ms.is_none()
                && !s.latency_bound_from_objectives
            {
                c.error(
                    at("latency_copies"),
                    "latency_copies = 2 needs a latency bound (latency_bound_ms or latency_bound_from_objectives)"
                        .to_string(),
                );
            } else if copies == 2 {
                let copies_as = horde_proto::StreamConfig {
                    latency_copies: 2,
                    latency_bound_ms: Some(1.0),
                    recovery: s.recovery.clone(),
                    ..horde_proto::StreamConfig::default()
                };
                if let Some(why) = copies_as.latency_copies_error() {
                    c.error(at("recovery"), why);
                }
            }
            match s.workload.validate() {
                Err(e) => c.error(at("workload"), e.to_string()),
                Ok(()) => burst_fits_the_queue(c, &at("workload"), &s.workload),
            }
        }
        super::messages::check(c, &self.message_queues, &self.messages);
    }
}

impl Validate for RecvConfig {
    fn validate(&self, c: &mut Checks) {
        if self.key_file.as_os_str().is_empty() {
            c.error(
                "key_file",
                "key_file must name a key file (see `horde keygen`)",
            );
        }
        session(c, &self.session);
        if self.allowed_keys.is_empty() {
            c.error(
                "allowed_keys",
                "allowed_keys is empty: no sender could connect",
            );
        }
        for (i, k) in self.allowed_keys.iter().enumerate() {
            if let Err(e) = k.trim().parse::<horde_crypto::PublicKey>() {
                c.error(
                    format!("allowed_keys[{i}]"),
                    format!("allowed_keys[{i}]: {e}"),
                );
            }
        }
        c.non_negative(
            "idle_timeout_s",
            "idle_timeout_s (0 = never)",
            self.idle_timeout_s,
        );
        c.non_negative(
            "in_order_hold_ms",
            "in_order_hold_ms",
            self.in_order_hold_ms,
        );
        c.not_too_long("idle_timeout_s", "idle_timeout_s", self.idle_timeout_s, 1.0);
        if let Some(Err(e)) = self.server_id.as_deref().map(str::parse::<ServerId>) {
            c.error("server_id", format!("server_id: {e}"));
        }

        c.not_too_long(
            "in_order_hold_ms",
            "in_order_hold_ms",
            self.in_order_hold_ms,
            1e-3,
        );
        if self.interfaces.is_empty() {
            c.error("", "at least one [[interfaces]] entry is needed");
        }
        for (i, itf) in self.interfaces.iter().enumerate() {
            if let Some(dev) = &itf.device {
                device(c, &format!("interfaces[{i}].device"), dev);
            }
        }
    }
}

/// Whether `objective` has anything to judge when the streams' ADUs are queued: each
/// stream's workload is run for a moment and its ADUs (with their fields) offered to
/// the objective alongside one slot.
pub fn matches_any_stream(objective: &Arc<dyn Objective>, streams: &[(u32, WorkloadSpec)]) -> bool {
    let mut adus = Vec::new();
    for (id, w) in streams {
        let Ok(mut w) = w.build(stream_seed(0, *id), 1200) else {
            continue;
        };
        let mut specs = Vec::new();
        let mut t = std::time::Duration::ZERO;
        let end = std::time::Duration::from_secs_f64(PROBE_SECS);
        while specs.len() < PROBE_ADUS {
            match w.next_at() {
                Some(next) if next <= end => t = next.max(t),
                _ if w.is_bulk() => {}
                _ => break,
            }
            let before = specs.len();
            w.emit(t, &mut specs);
            if specs.len() == before {
                break;
            }
        }
        for (seq, spec) in specs.into_iter().take(PROBE_ADUS).enumerate() {
            adus.push(AduView {
                id: adus.len() as u64,
                stream_id: *id,
                stream_seq: seq as u64,
                length: spec.size,
                queue_delay_ms: 0,
                fields: spec.fields,
            });
        }
    }
    let slot = TxSlot {
        channel: ChannelId::new(0),
        sequence: 0,
        loss_probability: 0.0,
        expected_rtt_ms: 50.0,
        wait_ms: 0.0,
        max_size: 1200,
        cost_per_kb: 0.0,
        phantom: None,
        burst_correlation: [0.0; horde_policy::CORRELATION_SPAN],
    };
    let stats: Vec<StreamStats> = streams
        .iter()
        .map(|(id, _)| StreamStats {
            stream_id: *id,
            ..StreamStats::default()
        })
        .collect();
    let mut set = ObjectiveSet::new();
    set.inject(objective.clone());
    let slots = [slot];
    let input = ScheduleInput {
        slots: &slots,
        adus: &adus,
        history: &[],
        streams: &stats,
        objectives: &set,
    };
    let terms = objective.prepare(&input).terms();
    terms > 0
}

/// Read, parse and check a sender file: errors at their value, then each stream's
/// objective files compiled (an error names the objective file's own line:col); with
/// the warnings, among them one for an objective that can match no stream of the file.
pub fn load_send(path: &Path) -> anyhow::Result<(SendConfig, Vec<horde_config::ConfigError>)> {
    let file = path.display().to_string();
    let text = horde_config::input::read_to_string(path, horde_config::input::Kind::CONFIG)
        .map_err(|e| horde_config::ConfigError {
            file: file.clone(),
            at: None,
            message: e.to_string(),
        })?;
    Ok(check_send(&text, &file, &super::base_dir(path))?)
}

/// [`load_send`] on text: the configuration and its warnings. Objective paths are
/// relative to `base`.
pub fn check_send(
    text: &str,
    file: &str,
    base: &Path,
) -> Result<(SendConfig, Vec<horde_config::ConfigError>), horde_config::ConfigError> {
    let checked: horde_config::Checked<SendConfig> = horde_config::parse_checked(text, file)?;
    let cfg = checked.value;
    let mut warnings = checked.warnings;
    let streams: Vec<(u32, WorkloadSpec)> = cfg
        .streams
        .iter()
        .map(|s| (s.id, s.workload.clone()))
        .collect();
    for (i, s) in cfg.streams.iter().enumerate() {
        for (k, p) in s.objectives.iter().enumerate() {
            let located = |message: String| horde_config::ConfigError {
                file: file.to_string(),
                at: horde_config::locate(text, &format!("streams[{i}].objectives[{k}]")),
                message,
            };
            let objective = crate::hose::load(&base.join(p))
                .map_err(|e| located(format!("objective {}: {e:#}", p.display())))?;
            if !matches_any_stream(&objective, &streams) {
                let ids: Vec<String> = streams.iter().map(|(id, _)| id.to_string()).collect();
                warnings.push(located(format!(
                    "objective {} can match no stream of this file (stream ids {}): it will never apply",
                    p.display(),
                    ids.join(", ")
                )));
            }
        }
    }
    let compiled =
        super::compiled_objectives(&cfg.streams, base).map_err(|e| horde_config::ConfigError {
            file: file.to_string(),
            at: None,
            message: format!("{e:#}"),
        })?;
    for (i, s) in cfg.streams.iter().enumerate() {
        if let Err(message) = s.latency_bound(&compiled) {
            return Err(horde_config::ConfigError {
                file: file.to_string(),
                at: horde_config::locate(
                    text,
                    &format!("streams[{i}].latency_bound_from_objectives"),
                ),
                message,
            });
        }
    }
    Ok((cfg, warnings))
}

/// Read, parse and check a receiver file; with its warnings.
pub fn load_recv(path: &Path) -> anyhow::Result<(RecvConfig, Vec<horde_config::ConfigError>)> {
    let checked: horde_config::Checked<RecvConfig> = horde_config::load_checked(path)?;
    Ok((checked.value, checked.warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_config::parse_checked;

    const KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

    fn send_toml() -> String {
        format!(
            r#"key_file = "sender.key"
peer_key = "{KEY}"
duration_s = 30
scheduler = "directed"

[session]
cycle_ms = 0
lookahead_ms = 0

[[channels]]
name = "modem-a"
bind = "127.0.0.1:0"
remote = "127.0.0.1:7000"
mtu = 1200
congestion = {{ kind = "cubic" }}

[[channels]]
name = "modem-b"
bind = "127.0.0.1:0"
remote = "127.0.0.1:7000"
congestion = {{ kind = "cbr", kbps = 500 }}

[[streams]]
id = 1
max_kbps = 100
workload = {{ kind = "cbr", kbps = 50, adu_bytes = 200 }}

[[streams]]
id = 2
workload = {{ kind = "audio" }}
"#
        )
    }

    fn recv_toml() -> String {
        format!(
            r#"key_file = "receiver.key"
allowed_keys = ["{KEY}"]
idle_timeout_s = 10
in_order_hold_ms = 100

[[interfaces]]
bind = "127.0.0.1:7000"
"#
        )
    }

    #[test]
    fn the_good_files_pass() {
        let s = parse_checked::<SendConfig>(&send_toml(), "send.toml").unwrap();
        assert!(s.warnings.is_empty());
        parse_checked::<RecvConfig>(&recv_toml(), "recv.toml").unwrap();
        // A server of many quiet senders sets its sessions' timers.
        let timers = recv_toml().replace(
            "[[interfaces]]",
            "[session]\nkeepalive_ms = 25000\nidle_timeout_ms = 75000\n\n[[interfaces]]",
        );
        let r = parse_checked::<RecvConfig>(&timers, "recv.toml").unwrap();
        assert_eq!(r.value.session.keepalive_ms, 25_000.0);
        assert_eq!(r.value.session.idle_timeout_ms, 75_000.0);
    }

    /// One row per bad value: (edit of the good file, expected `file:line:col: ` and
    /// part of the message).
    #[test]
    fn every_bad_value_is_named_at_its_position() {
        let mut wrong = Vec::new();
        let send: &[(&str, &str, &str, &str)] = &[
            ("max_kbps = 100", "max_kbps = -100", "send.toml:25:12: ", "max_kbps must be a positive number, got -100"),
            ("max_kbps = 100", "max_kbps = 0", "send.toml:25:12: ", "max_kbps must be a positive"),
            ("kbps = 50, adu", "kbps = -5, adu", "send.toml:26:12: ", "kbps"),
            ("kbps = 500 }", "kbps = -500 }", "send.toml:21:37: ", "cbr kbps must be a positive number"),
            ("duration_s = 30", "duration_s = -1", "send.toml:3:14: ", "duration_s must be a positive"),
            ("duration_s = 30", "duration_s = nan", "send.toml:3:14: ", "duration_s must be a positive"),
            ("cycle_ms = 0", "cycle_ms = -10", "send.toml:7:12: ", "cycle_ms"),
            ("lookahead_ms = 0", "lookahead_ms = -1", "send.toml:8:16: ", "lookahead_ms"),
            ("scheduler = \"directed\"", "scheduler = \"fastest\"", "send.toml:4:13: ", "fastest"),
            ("peer_key = \"", "peer_key = \"x", "send.toml:2:12: ", "peer_key"),
            ("mtu = 1200", "mtu = 10", "send.toml:14:7: ", "mtu must be in 64..=65000, got 10"),
            ("name = \"modem-b\"", "name = \"modem-a\"", "send.toml:18:8: ", "two [[channels]] are named \"modem-a\""),
            ("name = \"modem-b\"", "name = \"\"", "send.toml:18:8: ", "channel name must not be empty"),
            ("remote = \"127.0.0.1:7000\"\nmtu", "remote = \"127.0.0.1:0\"\nmtu", "send.toml:13:10: ", "not an address one can send to"),
            ("bind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:7000\"\ncongestion", "bind = \"127.0.0.1:0\"\ndevice = \"no/such\"\nremote = \"127.0.0.1:7000\"\ncongestion", "send.toml:20:10: ", "\"no/such\" is not a network interface name"),
            ("kind = \"cubic\" }", "kind = \"cubic\", beta = 1.5 }", "send.toml:15:39: ", "cubic beta"),
            ("kind = \"cubic\" }", "kind = \"cubic\", initial_window_packets = 0 }", "send.toml:15:57: ", "initial_window_packets"),
            ("id = 2", "id = 1", "send.toml:29:6: ", "two [[streams]] have id 1"),
            ("kind = \"audio\" }", "kind = \"audio\", frame_ms = 0 }", "send.toml:30:12: ", "frame_ms"),
            ("kind = \"cbr\", kbps = 50, adu_bytes = 200", "kind = \"cbr\", kbps = 50, adu_bytes = 0", "send.toml:26:12: ", "adu_bytes"),
            ("max_kbps = 100", "max_kbps = \"fast\"", "send.toml:25:12: ", "invalid type"),
            ("mtu = 1200", "mtu = 1200\nspeed = 3", "send.toml:15:1: ", "unknown field `speed`"),
            // Times too long for the clock, and the lifecycle's times, were accepted and
            // panicked (or silently did something else) once the run started.
            ("duration_s = 30", "duration_s = 1e30", "send.toml:3:14: ", "duration_s must be at most 31536000 (a year)"),
            ("lookahead_ms = 0", "lookahead_ms = 1e20", "send.toml:8:16: ", "lookahead_ms must be at most"),
            ("lookahead_ms = 0", "lookahead_ms = 0\nidle_timeout_ms = 1e30", "send.toml:9:19: ", "idle_timeout_ms must be at most"),
            ("lookahead_ms = 0", "lookahead_ms = 0\nidle_timeout_ms = -5", "send.toml:9:19: ", "idle_timeout_ms (0 = never) must be zero or more"),
            ("lookahead_ms = 0", "lookahead_ms = 0\nkeepalive_ms = -1", "send.toml:9:16: ", "keepalive_ms (0 = never) must be zero or more"),
            ("lookahead_ms = 0", "lookahead_ms = 0\nclose_timeout_ms = 1e30", "send.toml:9:20: ", "close_timeout_ms must be at most"),
            ("lookahead_ms = 0", "lookahead_ms = 0\nclose_retry_ms = 0", "send.toml:9:18: ", "close_retry_ms must be a positive"),
            ("lookahead_ms = 0", "lookahead_ms = 0\nphantom_wait_ms = -1", "send.toml:9:19: ", "phantom_wait_ms must be zero or more"),
            // A frame (or batch, or top-up) larger than the stream's send queue lost its
            // first ADUs to make room for its last; rates and the controllers' parameters
            // had no ceiling, and a controller silently used its default for a value
            // outside what it takes.
            ("adu_bytes = 200", "adu_bytes = 100000000", "send.toml:26:51: ", "adu_bytes makes frames of 100000000 bytes, more than a stream's send queue holds (262144 bytes)"),
            ("kind = \"audio\" }", "kind = \"audio\", frame_bytes = 300000 }", "send.toml:30:44: ", "frame_bytes makes frames of 300000 bytes"),
            ("kind = \"audio\" }", "kind = \"video\", fps = 25, gop = \"IPPP\", kbps = 100000 }", "send.toml:30:61: ", "kbps makes I-frames of 1000000 bytes"),
            ("kind = \"audio\" }", "kind = \"video\", fps = 25, gop = \"IP\", frame_bytes = { I = 300000, P = 1000 } }", "send.toml:30:66: ", "frame_bytes makes I-frames of 300000 bytes"),
            ("kind = \"audio\" }", "kind = \"ekg\", sample_hz = 1000000, bytes_per_sample = 4, batch_ms = 1000 }", "send.toml:30:82: ", "batch_ms makes batches of 4000000 bytes"),
            ("kind = \"audio\" }", "kind = \"bulk\", adu_bytes = 1000, batch = 1000 }", "send.toml:30:55: ", "batch makes top-ups (`batch` frames of `adu_bytes`) of 1000000 bytes"),
            ("kind = \"audio\" }", "kind = \"bulk\", adu_bytes = 300000 }", "send.toml:30:41: ", "adu_bytes makes frames of 300000 bytes"),
            ("max_kbps = 100", "max_kbps = 1e30", "send.toml:25:12: ", "max_kbps must be at most 100000000 kbit/s"),
            ("kbps = 500 }", "kbps = 1e30 }", "send.toml:21:37: ", "cbr kbps must be at most 100000000 kbit/s"),
            ("kbps = 500 }", "kbps = 500, burst_ms = 1e30 }", "send.toml:21:53: ", "burst_ms must be at most"),
            ("kind = \"cubic\" }", "kind = \"cubic\", beta = 0.05 }", "send.toml:15:39: ", "cubic beta must be in 0.1..=0.95, got 0.05"),
            ("kind = \"cubic\" }", "kind = \"cubic\", c = 1e6 }", "send.toml:15:36: ", "cubic c must be in 0.001..=1000"),
            ("kind = \"cubic\" }", "kind = \"bbr\", cwnd_gain = 20 }", "send.toml:15:42: ", "cwnd_gain must be in 1..=10"),
            ("kind = \"cubic\" }", "kind = \"bbr\", min_rtt_window_s = 1e7 }", "send.toml:15:49: ", "min_rtt_window_s must be at most 1000000"),
            ("kind = \"cubic\" }", "kind = \"bbr\", probe_rtt_ms = 1e10 }", "send.toml:15:45: ", "probe_rtt_ms must be at most 1000000000"),
            ("kind = \"cubic\" }", "kind = \"copa\", delta = 1000 }", "send.toml:15:39: ", "copa delta must be in 0.001..=100"),
            ("kind = \"cubic\" }", "kind = \"ontime\", confidence = 1.5 }", "send.toml:15:46: ", "ontime confidence must be in 0.5..=0.999, got 1.5"),
            ("kind = \"cubic\" }", "kind = \"ontime\", volatility = 0 }", "send.toml:15:46: ", "ontime volatility must be in 0.01..=100"),
            ("kind = \"cubic\" }", "kind = \"ontime\", delay_target_ms = 0.1 }", "send.toml:15:51: ", "ontime delay_target_ms must be in 1..=60000"),
            ("kind = \"cubic\" }", "kind = \"verb\", period_s = 1e7 }", "send.toml:15:42: ", "verb period_s must be at most 1000000"),
            ("kind = \"cubic\" }", "kind = \"verb\", rtt_rise = 20 }", "send.toml:15:42: ", "verb rtt_rise must be in 1.01..=10"),
            ("kind = \"cubic\" }", "kind = \"verb\", initial_kbps = 1e7 }", "send.toml:15:46: ", "verb initial_kbps must be in 1..=1000000"),
        ];
        for (from, to, at, message) in send {
            let text = send_toml();
            assert!(text.contains(from), "row {to:?}: {from:?} not in the file");
            let text = text.replacen(from, to, 1);
            match parse_checked::<SendConfig>(&text, "send.toml") {
                Ok(_) => wrong.push(format!("{to:?} was accepted")),
                Err(e) if !(e.to_string().starts_with(at) && e.message.contains(message)) => {
                    wrong.push(format!("{to:?}: got {e}"))
                }
                Err(_) => {}
            }
        }
        let recv: &[(&str, &str, &str, &str)] = &[
            (
                "idle_timeout_s = 10",
                "idle_timeout_s = -3",
                "recv.toml:3:18: ",
                "idle_timeout_s",
            ),
            (
                "in_order_hold_ms = 100",
                "in_order_hold_ms = -1",
                "recv.toml:4:20: ",
                "in_order_hold_ms",
            ),
            (
                "idle_timeout_s = 10",
                "idle_timeout_s = 1e30",
                "recv.toml:3:18: ",
                "idle_timeout_s must be at most",
            ),
            (
                "in_order_hold_ms = 100",
                "in_order_hold_ms = 1e30",
                "recv.toml:4:20: ",
                "in_order_hold_ms must be at most",
            ),
            (
                "allowed_keys = [\"",
                "allowed_keys = [\"y",
                "recv.toml:2:17: ",
                "allowed_keys[0]",
            ),
            (
                "allowed_keys = [\"{KEY}\"]",
                "allowed_keys = []",
                "recv.toml:2:16: ",
                "allowed_keys is empty",
            ),
            (
                "bind = \"127.0.0.1:7000\"",
                "bind = \"127.0.0.1:7000\"\ndevice = \"no such\"",
                "recv.toml:8:10: ",
                "\"no such\" is not a network interface name",
            ),
            (
                "key_file = \"receiver.key\"",
                "key_file = \"\"",
                "recv.toml:1:12: ",
                "key_file must name",
            ),
            (
                "in_order_hold_ms = 100",
                "in_order_hold_ms = 100\nserver_id = \"300/1\"",
                "recv.toml:5:13: ",
                "server id 300 does not fit in 1 byte",
            ),
            (
                "in_order_hold_ms = 100",
                "in_order_hold_ms = 100\nserver_id = \"7\"",
                "recv.toml:5:13: ",
                "ID/BYTES",
            ),
            (
                "[[interfaces]]",
                "[session]\nkeepalive_ms = -5\n\n[[interfaces]]",
                "recv.toml:7:16: ",
                "keepalive_ms",
            ),
        ];
        for (from, to, at, message) in recv {
            let from = from.replace("{KEY}", KEY);
            let text = recv_toml();
            assert!(text.contains(&from), "row {to:?}: {from:?} not in the file");
            let text = text.replacen(&from, to, 1);
            match parse_checked::<RecvConfig>(&text, "recv.toml") {
                Ok(_) => wrong.push(format!("{to:?} was accepted")),
                Err(e) if !(e.to_string().starts_with(at) && e.message.contains(message)) => {
                    wrong.push(format!("{to:?}: got {e}"))
                }
                Err(_) => {}
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn the_shipped_sender_file_loads_without_warnings_and_y1_would_warn() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let base = root.join("configs");
        let shipped = std::fs::read_to_string(base.join("send.toml")).unwrap();
        let peer = shipped
            .lines()
            .find(|l| l.starts_with("peer_key"))
            .expect("peer_key line");
        let text = shipped.replace(peer, &format!("peer_key = \"{KEY}\""));
        let (cfg, warnings) = check_send(&text, "send.toml", &base).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(cfg.streams.iter().all(|s| !s.objectives.is_empty()));

        // A modem that is not there yet is a warning: its channel waits for it.
        let later = text.replacen(
            "name = \"modem-b\"",
            "name = \"modem-b\"\ndevice = \"nosuchdev0\"",
            1,
        );
        let (_, warnings) = check_send(&later, "send.toml", &base).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let w = warnings[0].to_string();
        assert!(
            w.contains("no network interface named \"nosuchdev0\" on this host yet"),
            "{w}"
        );

        let text = text.replacen("scenarios/demo/iframes.hose", "objectives/y1.hose", 1);
        let (_, warnings) = check_send(&text, "send.toml", &base).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let line = text.lines().position(|l| l.contains("y1.hose")).unwrap() + 1;
        let w = warnings[0].to_string();
        assert!(w.starts_with(&format!("send.toml:{line}:")), "{w}");
        assert!(w.contains("y1.hose can match no stream"), "{w}");

        let text = text.replacen("y1.hose", "missing.hose", 1);
        let e = match check_send(&text, "send.toml", &base) {
            Ok(_) => panic!("a missing objective file was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.starts_with(&format!("send.toml:{line}:")) && e.contains("missing.hose"),
            "{e}"
        );
    }

    #[test]
    fn an_objective_for_a_missing_stream_matches_nothing() {
        let streams = vec![
            (
                1,
                WorkloadSpec::Video {
                    fps: 25.0,
                    gop: "IPPP".into(),
                    kbps: Some(500.0),
                    ratios: None,
                    frame_bytes: None,
                    jitter: 0.0,
                },
            ),
            (
                2,
                WorkloadSpec::Audio {
                    frame_ms: 20.0,
                    frame_bytes: 160,
                },
            ),
        ];
        let compile = |src: &str| horde_hose::compile_named("t.hose", src).unwrap();
        let iframes = compile(
            r#"objective { context { adu:f { (stream_id == 1) && (frame_type == "I") } } goal { prob(f::lost?) < 5 } utility { f { 1 } } }"#,
        );
        assert!(matches_any_stream(&iframes, &streams));
        let y1 = compile(include_str!("../../../../objectives/y1.hose"));
        assert!(!matches_any_stream(&y1, &streams), "y1 wants stream 17");
        let bframes = compile(
            r#"objective { context { adu:f { (stream_id == 1) && (frame_type == "B") } } goal { prob(f::lost?) < 5 } utility { f { 1 } } }"#,
        );
        assert!(
            !matches_any_stream(&bframes, &streams),
            "no B-frames in IPPP"
        );
    }
}
