//! Checks of the protocol settings that several input files carry (`horde send` and
//! tunnel files, simulator and tunnel scenarios): session, channel and stream settings
//! and a channel's congestion controller. Each error goes to a [`Checks`] at its key
//! path (under `at` where one is taken).

use std::ops::RangeInclusive;

use horde_proto::cc::limits;
use horde_proto::{CcConfig, ChannelConfig, ChannelId, SessionConfig, StreamConfig, MTU_RANGE};

use crate::{shown, Checks};

/// Every parameter of `cc` in the range its controller takes (the controllers replace a
/// value outside it by their default, so it must be refused where it is written).
pub fn congestion(c: &mut Checks, at: &str, cc: &CcConfig) {
    let key = |k: &str| format!("{at}.{k}");
    let count = |c: &mut Checks, k: &str, value: u32, range: RangeInclusive<u32>| {
        c.count_in(key(k), k, value.into(), widened(&range));
    };
    let window = |c: &mut Checks, w: u32| {
        count(
            c,
            "initial_window_packets",
            w,
            limits::INITIAL_WINDOW_PACKETS,
        );
    };
    match cc {
        CcConfig::Aimd {
            initial_window_packets,
        } => window(c, *initial_window_packets),
        CcConfig::Cbr { kbps, burst_ms } => {
            c.positive(key("kbps"), "cbr kbps", *kbps);
            c.not_too_fast(key("kbps"), "cbr kbps", *kbps);
            c.non_negative(key("burst_ms"), "burst_ms", *burst_ms);
            c.not_too_long(key("burst_ms"), "burst_ms", *burst_ms, 1e-3);
        }
        CcConfig::Cubic {
            initial_window_packets,
            c: scale,
            beta,
            ..
        } => {
            window(c, *initial_window_packets);
            c.in_range(key("c"), "cubic c", *scale, limits::CUBIC_C);
            c.in_range(key("beta"), "cubic beta", *beta, limits::CUBIC_BETA);
        }
        CcConfig::Bbr {
            initial_window_packets,
            cwnd_gain,
            min_rtt_window_s,
            probe_rtt_ms,
            loss_threshold,
            beta,
        } => {
            window(c, *initial_window_packets);
            c.in_range(
                key("cwnd_gain"),
                "cwnd_gain",
                *cwnd_gain,
                limits::BBR_CWND_GAIN,
            );
            c.in_range(
                key("loss_threshold"),
                "bbr loss_threshold",
                *loss_threshold,
                limits::BBR_LOSS_THRESHOLD,
            );
            c.in_range(key("beta"), "bbr beta", *beta, limits::BBR_BETA);
            controller_time(
                c,
                key("min_rtt_window_s"),
                "min_rtt_window_s",
                *min_rtt_window_s,
                1.0,
            );
            controller_time(c, key("probe_rtt_ms"), "probe_rtt_ms", *probe_rtt_ms, 1e-3);
        }
        CcConfig::Bbr1 {
            initial_window_packets,
            cwnd_gain,
            bw_window_rounds,
            min_rtt_window_s,
            probe_rtt_ms,
        } => {
            window(c, *initial_window_packets);
            c.in_range(
                key("cwnd_gain"),
                "cwnd_gain",
                *cwnd_gain,
                limits::BBR_CWND_GAIN,
            );
            count(
                c,
                "bw_window_rounds",
                *bw_window_rounds,
                limits::BW_WINDOW_ROUNDS,
            );
            controller_time(
                c,
                key("min_rtt_window_s"),
                "min_rtt_window_s",
                *min_rtt_window_s,
                1.0,
            );
            controller_time(c, key("probe_rtt_ms"), "probe_rtt_ms", *probe_rtt_ms, 1e-3);
        }
        CcConfig::Copa {
            initial_window_packets,
            delta,
            min_rtt_window_s,
            ..
        } => {
            window(c, *initial_window_packets);
            c.in_range(key("delta"), "copa delta", *delta, limits::COPA_DELTA);
            controller_time(
                c,
                key("min_rtt_window_s"),
                "min_rtt_window_s",
                *min_rtt_window_s,
                1.0,
            );
        }
        CcConfig::Ontime {
            initial_window_packets,
            delay_target_ms,
            confidence,
            volatility,
        } => {
            window(c, *initial_window_packets);
            c.in_range(
                key("delay_target_ms"),
                "ontime delay_target_ms",
                *delay_target_ms,
                limits::ONTIME_DELAY_TARGET_MS,
            );
            c.in_range(
                key("confidence"),
                "ontime confidence",
                *confidence,
                limits::ONTIME_CONFIDENCE,
            );
            c.in_range(
                key("volatility"),
                "ontime volatility",
                *volatility,
                limits::ONTIME_VOLATILITY,
            );
        }
        CcConfig::Verb {
            period_s,
            rtt_rise,
            initial_kbps,
        } => {
            controller_time(c, key("period_s"), "verb period_s", *period_s, 1.0);
            c.in_range(
                key("rtt_rise"),
                "verb rtt_rise",
                *rtt_rise,
                limits::VERB_RTT_RISE,
            );
            c.in_range(
                key("initial_kbps"),
                "verb initial_kbps",
                *initial_kbps,
                limits::VERB_INITIAL_KBPS,
            );
        }
    }
}

/// `value`, a time in `unit_s` seconds each, must be positive and no longer than the
/// controllers take ([`limits::SECONDS`]).
fn controller_time(c: &mut Checks, path: String, what: &str, value: f64, unit_s: f64) {
    let max = limits::SECONDS.end() / unit_s;
    c.positive(path.clone(), what, value);
    if value > max {
        c.error(
            path,
            format!("{what} must be at most {max}, got {}", shown(value)),
        );
    }
}

/// Every time of a session's settings finite, not negative (some above zero) and at
/// most a year; counts at least 1.
pub fn session(c: &mut Checks, s: &SessionConfig) {
    c.non_negative("session.cycle_ms", "cycle_ms (0 = every slot)", s.cycle_ms);
    c.non_negative("session.lookahead_ms", "lookahead_ms", s.lookahead_ms);
    c.non_negative(
        "session.reorder_hold_ms",
        "reorder_hold_ms",
        s.reorder_hold_ms,
    );
    c.positive(
        "session.hello_interval_ms",
        "hello_interval_ms",
        s.hello_interval_ms,
    );
    c.non_negative(
        "session.phantom_wait_ms",
        "phantom_wait_ms",
        s.phantom_wait_ms,
    );
    c.non_negative(
        "session.idle_timeout_ms",
        "idle_timeout_ms (0 = never)",
        s.idle_timeout_ms,
    );
    c.non_negative(
        "session.keepalive_ms",
        "keepalive_ms (0 = never)",
        s.keepalive_ms,
    );
    c.non_negative(
        "session.close_timeout_ms",
        "close_timeout_ms",
        s.close_timeout_ms,
    );
    c.positive("session.close_retry_ms", "close_retry_ms", s.close_retry_ms);
    // Every time is added to the clock somewhere: bounded, a slip cannot overflow it.
    for (key, value) in [
        ("cycle_ms", s.cycle_ms),
        ("lookahead_ms", s.lookahead_ms),
        ("phantom_wait_ms", s.phantom_wait_ms),
        ("reorder_hold_ms", s.reorder_hold_ms),
        ("hello_interval_ms", s.hello_interval_ms),
        ("idle_timeout_ms", s.idle_timeout_ms),
        ("keepalive_ms", s.keepalive_ms),
        ("close_timeout_ms", s.close_timeout_ms),
        ("close_retry_ms", s.close_retry_ms),
    ] {
        c.not_too_long(format!("session.{key}"), key, value, 1e-3);
    }
    if s.history_len == 0 {
        c.error("session.history_len", "history_len must be at least 1");
    }
    if s.early_cycle_slots == Some(0) {
        c.error(
            "session.early_cycle_slots",
            "early_cycle_slots must be at least 1",
        );
    }
}

/// A channel's settings: `mtu` in [`MTU_RANGE`], its controller, cost and first RTT.
pub fn channel(c: &mut Checks, at: &str, ch: &ChannelConfig) {
    let key = |k: &str| format!("{at}.{k}");
    c.count_in(key("mtu"), "mtu", ch.mtu.into(), widened(&MTU_RANGE));
    congestion(c, &key("congestion"), &ch.congestion);
    c.non_negative(key("cost_per_kb"), "cost_per_kb", ch.cost_per_kb);
    c.positive(key("initial_rtt_ms"), "initial_rtt_ms", ch.initial_rtt_ms);
    c.not_too_long(
        key("initial_rtt_ms"),
        "initial_rtt_ms",
        ch.initial_rtt_ms,
        1e-3,
    );
}

/// A list of `count` channels at `at` (`channels`, `channel_congestion`), which a
/// session must be able to open: channel ids are one byte, so at most
/// [`ChannelId::COUNT`]. The error points at the first entry past the limit.
pub fn channel_count(c: &mut Checks, at: &str, what: &str, count: usize) {
    if count > ChannelId::COUNT {
        c.error(
            format!("{at}[{}]", ChannelId::COUNT),
            format!(
                "{count} {what}: a session has at most {} channels (channel ids are one byte)",
                ChannelId::COUNT
            ),
        );
    }
}

/// A stream's settings: a send queue that holds something, a rate cap within reason.
pub fn stream(c: &mut Checks, at: &str, s: &StreamConfig) {
    let key = |k: &str| format!("{at}.{k}");
    if s.max_queue_bytes == 0 {
        c.error(
            key("max_queue_bytes"),
            format!("{} must be above 0", key("max_queue_bytes")),
        );
    }
    if let Some(k) = s.max_kbps {
        c.positive(key("max_kbps"), &key("max_kbps"), k);
        c.not_too_fast(key("max_kbps"), &key("max_kbps"), k);
    }
}

/// A range of `u32`s as the `u64`s [`Checks::count_in`] takes.
pub fn widened(range: &RangeInclusive<u32>) -> RangeInclusive<u64> {
    u64::from(*range.start())..=u64::from(*range.end())
}
