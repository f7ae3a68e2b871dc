use std::path::PathBuf;

use super::*;

/// A small valid scenario; tests edit it to break one thing at a time.
const GOOD: &str = r#"name = "t"
seed = 7
duration_s = 10

[[channels]]
name = "c1"
mtu = 768
congestion = { kind = "cbr", kbps = 120 }
up = { rate = { model = "constant", kbps = 120 }, delay = { model = "gaussian", mean_ms = 300, sd_ms = 15 } }

[[channels]]
name = "c2"
mtu = 500
congestion = { kind = "aimd" }
cost_per_kb = 2.5
up = { }
down = { delay = { model = "constant", ms = 5 } }

[[streams]]
id = 0
max_kbps = 80
workload = { kind = "cbr", kbps = 80, adu_bytes = 768 }

[[streams]]
id = 1
elastic = true
ordered = true
workload = { kind = "bulk", adu_bytes = 768 }
objectives = ["x1.hose"]
"#;

fn err(text: &str) -> String {
    Scenario::from_str(text, "bad.toml")
        .unwrap_err()
        .to_string()
}

/// GOOD with `from` replaced by `to` (first occurrence), which must exist.
fn edit(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from}");
    GOOD.replacen(from, to, 1)
}

#[test]
fn a_good_file_gets_its_defaults() {
    let s = Scenario::from_str(GOOD, "good.toml").unwrap();
    assert_eq!((s.name.as_str(), s.seed, s.duration_s), ("t", 7, 10.0));
    assert_eq!(s.duration(), Duration::from_secs(10));
    assert_eq!(s.scheduler, SchedulerSpec::default());
    // Event-driven cycles by default, as in the runtime's `SessionConfig`.
    assert_eq!(s.scheduler.cycle_ms, 0.0);
    assert_eq!(
        s.scheduler.cycle_ms,
        horde_proto::SessionConfig::default().cycle_ms
    );
    assert_eq!(
        s.hosts,
        vec![HostSpec { name: "a".into() }, HostSpec { name: "b".into() }]
    );
    let c1 = &s.channels[0];
    assert_eq!(c1.between, ["a".to_string(), "b".to_string()]);
    assert_eq!(
        c1.congestion,
        Congestion::Cbr {
            kbps: 120.0,
            burst_ms: 150.0
        }
    );
    assert_eq!(c1.cost_per_kb, 0.0);
    assert_eq!(
        c1.down,
        horde_links::LinkSpec::default(),
        "down defaults to ideal"
    );
    assert_eq!(c1.direction_from("b"), Some(Direction::Down));
    assert_eq!(c1.link(Direction::Up), &c1.up);
    let c2 = &s.channels[1];
    assert_eq!(
        (c2.congestion.clone(), c2.cost_per_kb),
        (Congestion::with_defaults("aimd").unwrap(), 2.5)
    );
    assert_ne!(c2.down, horde_links::LinkSpec::default());
    let (s0, s1) = (&s.streams[0], &s.streams[1]);
    assert_eq!((s0.from.as_str(), s0.to.as_str()), ("a", "b"));
    assert_eq!(s0.rate, StreamRate::MaxKbps(80.0));
    assert!(!s0.ordered && s1.ordered);
    assert_eq!(s1.rate, StreamRate::Elastic);
    assert_eq!(s1.objectives, vec![PathBuf::from("x1.hose")]);
    assert_eq!(s.stream_channels(s0), vec![0, 1]);
    assert_eq!(s.max_adu(s0), 500);
    assert_eq!(
        (s.host("b"), s.channel("c2"), s.channel("zz")),
        (Some(1), Some(1), None)
    );
    assert_eq!(s.base_dir, PathBuf::from("."));
}

#[test]
fn a_zero_cycle_is_valid() {
    let text = edit(
        "[[channels]]\nname = \"c1\"",
        "[scheduler]\ncycle_ms = 0\n\n[[channels]]\nname = \"c1\"",
    );
    let s = Scenario::from_str(&text, "zero.toml").unwrap();
    assert_eq!(s.scheduler.cycle_ms, 0.0);
    let text = edit(
        "[[channels]]\nname = \"c1\"",
        "[scheduler]\ncycle_ms = 100\n\n[[channels]]\nname = \"c1\"",
    );
    let s = Scenario::from_str(&text, "hundred.toml").unwrap();
    assert_eq!(s.scheduler.cycle_ms, 100.0);
}

#[test]
fn hosts_between_from_and_to_with_three_hosts() {
    let text = r#"name = "three"
seed = 1
duration_s = 5
[scheduler]
kind = "random-walk"
cycle_ms = 50
lookahead_ms = 280
k = 25
[[hosts]]
name = "bus"
[[hosts]]
name = "depot"
[[hosts]]
name = "hq"
[[channels]]
name = "x"
between = ["depot", "hq"]
mtu = 1000
congestion = { kind = "aimd" }
up = {}
[[streams]]
id = 4
from = "hq"
to = "depot"
max_kbps = 1.5
workload = { kind = "audio" }
"#;
    let s = Scenario::from_str(text, "three.toml").unwrap();
    assert_eq!(s.scheduler.kind, "random-walk");
    assert_eq!(
        (
            s.scheduler.cycle_ms,
            s.scheduler.lookahead_ms,
            s.scheduler.k
        ),
        (50.0, 280.0, Some(25))
    );
    assert_eq!(s.streams[0].from, "hq");
    assert_eq!(s.channels[0].direction_from("hq"), Some(Direction::Down));
    assert_eq!(s.channels[0].direction_from("bus"), None);
    // Without `between`, `from` or `to`, three hosts are ambiguous.
    assert_eq!(
        err(&text.replace("between = [\"depot\", \"hq\"]\n", "")),
        "bad.toml:16:8: channel \"x\" needs `between = [\"host\", \"host\"]`: the scenario has 3 hosts"
    );
    assert_eq!(
        err(&text.replace("from = \"hq\"\n", "")),
        "bad.toml:22:6: stream 4 needs `from`: the scenario has 3 hosts"
    );
    assert_eq!(
        err(&text.replace("to = \"depot\"\n", "")),
        "bad.toml:22:6: stream 4 needs `to`: the scenario has 3 hosts"
    );
    assert_eq!(
        err(&text.replace("to = \"depot\"", "to = \"bus\"")),
        "bad.toml:22:6: stream 4: no channel joins \"hq\" and \"bus\""
    );
    assert_eq!(
        err(&text.replace("to = \"depot\"", "to = \"hq\"")),
        "bad.toml:24:6: stream 4 goes from \"hq\" to itself"
    );
}

#[test]
fn syntax_and_type_errors_carry_line_and_column() {
    assert_eq!(
        err(&edit("seed = 7", "seed = 7\nsede = 8")),
        "bad.toml:3:1: unknown field `sede`, expected one of `name`, `seed`, `duration_s`, `scheduler`, `hosts`, `channels`, `streams`"
    );
    assert_eq!(
        err(&edit("seed = 7", "seed = -7")),
        "bad.toml:2:8: invalid value: integer `-7`, expected u64"
    );
    let cases = [
        (edit("mtu = 768", "mtu = \"big\""), "bad.toml:7:7: invalid type: string \"big\", expected u32"),
        (edit("mtu = 768", "mtu = 768\nmtus = 1"), "bad.toml:8:1: unknown field `mtus`, expected one of `name`, `between`, `mtu`, `congestion`, `cost_per_kb`, `loss_correlation`, `loss_prior`, `up`, `down`"),
        (edit("seed = 7", "seed = = 7"), "bad.toml:2:8: invalid string; expected `\"`, `'`"),
        // Inside a workload table.
        (edit("adu_bytes = 768 }", "adu_bytes = 768, burst = 2 }"), "bad.toml:22:12: unknown field `burst`, expected `kbps` or `adu_bytes`"),
        (edit("kind = \"cbr\", kbps = 80", "kind = \"vbr\", kbps = 80"), "bad.toml:22:21: unknown variant `vbr`, expected one of `cbr`, `video`, `audio`, `ekg`, `bulk`"),
        // Inside a link spec (horde_links::LinkSpec) and a congestion table.
        (edit("up = { }", "up = { bufer_bytes = 3 }"), "bad.toml:16:8: unknown field `bufer_bytes`, expected one of `rate`, `buffer_bytes`, `loss`, `delay`, `qdisc`"),
        (edit("up = { }", "up = { loss = { model = \"bernoulli\", p = \"x\" } }"), "bad.toml:16:15: invalid type: string \"x\", expected f64"),
        (edit("{ kind = \"aimd\" }", "{ kind = \"aimd\", kbps = 3 }"), "bad.toml:14:14: unknown field `kbps`, expected `initial_window_packets`"),
    ];
    for (text, want) in cases {
        assert_eq!(err(&text), want);
    }
}

#[test]
fn validation_errors_point_at_the_offending_value() {
    let cases = [
        (edit("duration_s = 10", "duration_s = 0"), "bad.toml:3:14: duration_s must be a positive number, got 0"),
        (edit("duration_s = 10", "duration_s = 1e9"), "bad.toml:3:14: duration_s must be at most 31536000 (a year), got 1000000000"),
        (edit("name = \"t\"", "name = \"my run\""), "bad.toml:1:8: scenario name \"my run\" must be non-empty and use only letters, digits, '_', '-' and '.'"),
        (edit("name = \"c2\"", "name = \"c1\""), "bad.toml:12:8: duplicate channel name \"c1\""),
        (edit("id = 1", "id = 0"), "bad.toml:25:6: duplicate stream id 0"),
        (edit("mtu = 500", "mtu = 0"), "bad.toml:13:7: mtu must be in 64..=65000, got 0"),
        (edit("mtu = 500", "mtu = 4000000000"), "bad.toml:13:7: mtu must be in 64..=65000, got 4000000000"),
        (edit("kbps = 120 }\nup", "kbps = -1 }\nup"), "bad.toml:8:14: cbr kbps must be a positive number, got -1"),
        (edit("kbps = 120 }\nup", "kbps = 1e300 }\nup"), "bad.toml:8:14: cbr kbps must be at most 100000000 kbit/s (100 Gbit/s), got 1e300"),
        (edit("{ kind = \"aimd\" }", "{ kind = \"cubic\", c = 1e30 }"), "bad.toml:14:14: cubic c must be in 0.001..=1000, got 1e30"),
        (edit("{ kind = \"aimd\" }", "{ kind = \"aimd\", initial_window_packets = 4000000000 }"), "bad.toml:14:14: initial_window_packets must be in 1..=100000, got 4000000000"),
        (edit("{ kind = \"aimd\" }", "{ kind = \"bbr1\", bw_window_rounds = 0 }"), "bad.toml:14:14: bw_window_rounds must be in 1..=10000, got 0"),
        (edit("{ kind = \"aimd\" }", "{ kind = \"bbr\", loss_threshold = 0.9 }"), "bad.toml:14:14: bbr loss_threshold must be in 0.0001..=0.5, got 0.9"),
        (edit("{ kind = \"aimd\" }", "{ kind = \"verb\", period_s = 0 }"), "bad.toml:14:14: verb period_s must be a positive number, got 0"),
        (edit("cost_per_kb = 2.5", "cost_per_kb = -2.5"), "bad.toml:15:15: cost_per_kb must be zero or positive, got -2.5"),
        (edit("cost_per_kb = 2.5", "loss_prior = { rate = 2, packets = 10 }"), "bad.toml:15:14: loss_prior.rate must be in [0, 1], got 2"),
        (edit("cost_per_kb = 2.5", "loss_prior = { rate = 0.1, packets = -1 }"), "bad.toml:15:14: loss_prior.packets must be zero or positive, got -1"),
        (edit("cost_per_kb = 2.5", "loss_prior = { rate = 0.1, weight = 3 }"), "bad.toml:15:28: unknown field `weight`, expected `rate` or `packets`"),
        (edit("mean_ms = 300", "mean_ms = -300"), "bad.toml:9:6: up: delay.mean_ms must be a non-negative number of ms, got -300"),
        (edit("ms = 5", "ms = -5"), "bad.toml:17:8: down: delay.ms must be a non-negative number of ms, got -5"),
        (edit("max_kbps = 80", "max_kbps = 0"), "bad.toml:21:12: max_kbps must be a positive number, got 0"),
        (edit("max_kbps = 80", "max_kbps = 1e30"), "bad.toml:21:12: max_kbps must be at most 100000000 kbit/s (100 Gbit/s), got 1e30"),
        (edit("max_kbps = 80", "max_kbps = 80\nelastic = true"), "bad.toml:21:12: stream 0: give `max_kbps` or `elastic = true`, not both"),
        (edit("max_kbps = 80\n", ""), "bad.toml:20:6: stream 0 needs `max_kbps = <kbit/s>` or `elastic = true`"),
        (edit("elastic = true", "elastic = false"), "bad.toml:25:6: stream 1 needs `max_kbps = <kbit/s>` or `elastic = true`"),
        (edit("kbps = 80, adu", "kbps = 0, adu"), "bad.toml:22:12: workload: cbr: `kbps` must be a positive number, got 0"),
        (edit("kind = \"bulk\", adu_bytes = 768", "kind = \"bulk\", adu_bytes = 300000"), "bad.toml:28:12: adu_bytes makes frames of 300000 bytes, more than a stream's send queue holds (262144 bytes): each would lose its first ADUs to make room for its last"),
        (edit("name = \"c1\"", "name = \"c1\"\nbetween = [\"a\", \"z\"]"), "bad.toml:7:17: `between` names unknown host \"z\" (hosts: a, b)"),
        (edit("name = \"c1\"", "name = \"c1\"\nbetween = [\"a\", \"a\"]"), "bad.toml:7:17: `between` must name two different hosts, got \"a\" twice"),
        (edit("name = \"c1\"", "name = \"c1\"\nbetween = [\"a\"]"), "bad.toml:7:11: `between` must name exactly two hosts, got 1"),
        (edit("id = 0", "id = 0\nfrom = \"ambulance\""), "bad.toml:21:8: `from` names unknown host \"ambulance\" (hosts: a, b)"),
        (edit("objectives = [\"x1.hose\"]", "objectives = [\"\"]"), "bad.toml:29:15: objective path is empty"),
        (edit("[[channels]]\nname = \"c1\"", "[scheduler]\ncycle_ms = -5\n\n[[channels]]\nname = \"c1\""), "bad.toml:6:12: scheduler.cycle_ms must be zero or positive, got -5"),
        (edit("[[channels]]\nname = \"c1\"", "[scheduler]\nlookahead_ms = -1\n[[channels]]\nname = \"c1\""), "bad.toml:6:16: scheduler.lookahead_ms must be zero or positive, got -1"),
        (edit("[[channels]]\nname = \"c1\"", "[scheduler]\ncycle_ms = 1e300\n[[channels]]\nname = \"c1\""), "bad.toml:6:12: scheduler.cycle_ms must be at most 31536000000 (a year), got 1e300"),
        (edit("[[channels]]\nname = \"c1\"", "[scheduler]\nphantom_wait_ms = -3\n[[channels]]\nname = \"c1\""), "bad.toml:6:19: scheduler.phantom_wait_ms must be zero or positive, got -3"),
        (edit("[[channels]]\nname = \"c1\"", "[scheduler]\nk = 0\n[[channels]]\nname = \"c1\""), "bad.toml:6:5: scheduler.k must be at least 1"),
        (edit("[[channels]]\nname = \"c1\"", "hosts = [{ name = \"solo\" }]\n[[channels]]\nname = \"c1\""), "bad.toml:5:9: [[hosts]] lists 1 host(s); a scenario needs at least two"),
        (edit("[[channels]]\nname = \"c1\"", "hosts = [{ name = \"a\" }, { name = \"a\" }]\n[[channels]]\nname = \"c1\""), "bad.toml:5:35: duplicate host name \"a\""),
    ];
    for (text, want) in cases {
        assert_eq!(err(&text), want);
    }
}

#[test]
fn a_loss_prior_reaches_the_channel_config() {
    let text = edit(
        "cost_per_kb = 2.5",
        "loss_prior = { rate = 0.08, packets = 200 }",
    );
    let s = Scenario::from_str(&text, "prior.toml").unwrap();
    let prior = LossPrior {
        rate: 0.08,
        packets: 200.0,
    };
    assert_eq!(s.channels[1].loss_prior, Some(prior));
    assert_eq!(s.channels[0].loss_prior, None);
    let mut no_objectives = s.clone();
    for st in &mut no_objectives.streams {
        st.objectives.clear();
    }
    let topo = crate::build::topology(&no_objectives).unwrap();
    assert_eq!(topo.channels[1].config.loss_prior, Some(prior));
    assert_eq!(topo.channels[0].config.loss_prior, None);
}

#[test]
fn missing_sections_are_named() {
    let no_streams = &GOOD[..GOOD.find("[[streams]]").unwrap()];
    assert_eq!(
        err(no_streams),
        "bad.toml: no [[streams]]: a scenario needs at least one"
    );
    let no_channels = GOOD.replace("[[channels]]", "[[chanels]]");
    assert!(err(&no_channels).contains("unknown field `chanels`"));
    let start = GOOD.find("[[channels]]").unwrap();
    let end = GOOD.find("[[streams]]").unwrap();
    let text = format!("{}{}", &GOOD[..start], &GOOD[end..]);
    assert_eq!(
        err(&text),
        "bad.toml: no [[channels]]: a scenario needs at least one"
    );
    assert!(err(&edit("duration_s = 10\n", "")).contains("missing field `duration_s`"));
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("horde-sim-scenario-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("objectives")).unwrap();
    dir
}

#[test]
fn load_resolves_objectives_against_the_file_and_checks_them() {
    let dir = temp_dir("load");
    let text = edit("[\"x1.hose\"]", "[\"objectives/x1.hose\"]");
    let path = dir.join("run.toml");
    std::fs::write(&path, &text).unwrap();
    let e = Scenario::load(&path).unwrap_err();
    assert_eq!(e.at, Some((29, 15)));
    assert_eq!(e.file, path.display().to_string());
    assert!(e.message.contains("objectives/x1.hose not found"), "{e}");
    std::fs::write(dir.join("objectives/x1.hose"), "objective x1 {}\n").unwrap();
    let s = Scenario::load(&path).unwrap();
    assert_eq!(
        s.streams[1].objectives,
        vec![dir.join("objectives/x1.hose")]
    );
    assert_eq!(s.base_dir, dir);
    let missing = Scenario::load(dir.join("none.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        missing.starts_with(&format!(
            "{}: cannot read: ",
            dir.join("none.toml").display()
        )),
        "{missing}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
