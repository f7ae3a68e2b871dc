//! The `horde` binary end to end: exit codes, error messages, output formats.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{free_port, horde_in_repo as horde, keygen, repo, text};

#[test]
fn sim_json_is_byte_identical_for_the_same_seed() {
    let run = |seed: &str| {
        horde(&[
            "sim",
            "scenarios/fig7-5.toml",
            "--duration",
            "60",
            "--seed",
            seed,
            "--json",
        ])
    };
    let (a, b, c) = (run("3"), run("3"), run("4"));
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout, "same seed, same bytes");
    assert_ne!(a.stdout, c.stdout, "another seed, another run");
    let json: serde_json::Value =
        serde_json::from_slice(&a.stdout).expect("one JSON object on stdout");
    let streams = json["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4);
    for s in streams {
        for key in ["id", "sent", "delivered", "lost"] {
            assert!(s[key].is_u64(), "{key} in {s}");
        }
        for key in ["mean", "median", "p95"] {
            assert!(s["latency_ms"][key].is_f64(), "latency_ms.{key} in {s}");
        }
        for key in ["mean", "median", "p95", "p99"] {
            for delay in ["one_way_delay_ms", "in_order_delay_ms"] {
                assert!(s[delay][key].is_f64(), "{delay}.{key} in {s}");
            }
        }
        assert!(s["delivered_goodput_kbps"].as_f64().unwrap() > 0.0, "{s}");
        let series = s["delivered_goodput_series_kbps"].as_array().unwrap();
        assert_eq!(series.len(), 60, "1 s intervals by default");
        assert_eq!(s["channels"].as_object().unwrap().len(), 6);
    }
    for c in json["channels"].as_array().unwrap() {
        assert!(
            c["name"].is_string() && c["sent"].is_u64() && c["lost"].is_u64(),
            "{c}"
        );
    }
}

#[test]
fn sim_out_writes_csv_and_plot() {
    let dir = std::env::temp_dir().join(format!("horde-cli-out-{}", std::process::id()));
    let out = horde(&[
        "sim",
        "--duration",
        "20",
        "--interval",
        "2.5",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for f in [
        "report.json",
        "streams.csv",
        "channels.csv",
        "latency_cdf.csv",
        "goodput.csv",
        "latency_cdf.svg",
    ] {
        let meta = std::fs::metadata(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(meta.len() > 0, "{f} is empty");
    }
    assert!(std::fs::read_to_string(dir.join("latency_cdf.svg"))
        .unwrap()
        .contains("<svg"));
    // Eight 2.5 s intervals per stream of the built-in scenario's.
    let goodput = std::fs::read_to_string(dir.join("goodput.csv")).unwrap();
    let streams = std::fs::read_to_string(dir.join("streams.csv"))
        .unwrap()
        .lines()
        .count()
        - 1;
    assert!(goodput.starts_with("stream,start_s,end_s,bytes,kbps\n"));
    assert_eq!(goodput.lines().count() - 1, 8 * streams, "{goodput}");
    assert!(goodput.contains(",17.5,20,"), "{goodput}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_scenarios_and_arguments_get_clear_errors() {
    let dir = std::env::temp_dir().join(format!("horde-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nseed = 1\nduration_s = 10\nbogus = 3\n").unwrap();
    let out = horde(&["sim", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("bad.toml:4:1"), "{err}");

    let out = horde(&["sim", "no-such-file.toml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no-such-file.toml"),
        "{}",
        text(&out.stderr)
    );

    let out = horde(&["sim", "--duration", "-5"]);
    assert_ne!(out.status.code(), Some(0));
    let out = horde(&["sim", "--duration", "1", "--interval", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--interval"),
        "{}",
        text(&out.stderr)
    );
    let out = horde(&["sim", "--scheduler", "nonsense", "--duration", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("unknown scheduler \"nonsense\""),
        "{}",
        text(&out.stderr)
    );
    // A time too long for the clock is refused at once: it used to panic.
    let out = horde(&["sim", "--duration", "1e30"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .contains("--duration must be at most 31536000 seconds (a year), got 1e30"),
        "{}",
        text(&out.stderr)
    );
    let out = horde(&["demo", "--duration", "1e30"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("expected at most 31536000 seconds (a year), got 1e30"),
        "{}",
        text(&out.stderr)
    );
    let out = horde(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2), "clap usage error");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn hose_check_reports_file_line_col_and_exit_codes() {
    let out = horde(&["hose", "check", "objectives/x1.hose", "objectives/x4.hose"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let dir = std::env::temp_dir().join(format!("horde-cli-hose-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.hose");
    std::fs::write(
        &bad,
        "objective {\n  context { adu:foo { stream_id == 1 } }\n  goal { prob(bar::lost?) < 5 }\n  utility { foo { 1 } }\n}\n",
    )
    .unwrap();
    let out = horde(&["hose", "check", "objectives/x1.hose", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    let want = format!("{}:3:15:", bad.display());
    assert!(
        err.lines().any(|l| l.starts_with(&want)),
        "expected {want} in {err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn keygen_writes_a_private_file_and_refuses_to_overwrite() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("horde-cli-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("k");
    let out = horde(&["keygen", "--out", key.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let public = text(&out.stdout).trim().to_string();
    assert!(std::fs::read_to_string(&key).unwrap().contains(&public));
    let again = horde(&["keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn demo_runs_briefly_over_real_sockets() {
    let out = horde(&["demo", "--duration", "8", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let seed = &json["seeds"][0];
    for run in ["with_objectives", "without_objectives"] {
        for stream in ["video", "audio", "ekg"] {
            assert!(
                seed[run]["streams"][stream]["acked"].as_u64().unwrap() > 0,
                "{run}/{stream}: {json}"
            );
        }
        assert!(
            seed[run]["classes"]["video I-frames"]["acked"]
                .as_u64()
                .unwrap()
                > 0,
            "{run}: {json}"
        );
    }
    let metrics: Vec<&str> = seed["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metric"].as_str().unwrap())
        .collect();
    assert!(metrics.contains(&"I-frame loss %") && metrics.contains(&"audio p95 ms"));
}

#[test]
fn demo_in_the_simulator_gives_each_verdict_over_seeds() {
    let out = horde(&["demo", "--sim", "--seeds", "3", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["seeds"].as_array().unwrap().len(), 3);
    let spread = json["spread"].as_array().unwrap();
    for objective in ["iframes", "voice", "guard"] {
        assert!(spread.iter().any(|s| s["objective"] == objective), "{json}");
    }
    for s in spread {
        assert_eq!(s["seeds"], 3, "{s}");
        assert_eq!(s["passed"], 3, "each objective wins on every seed: {s}");
    }
    // The table form names each objective and says what rows are.
    let out = horde(&["demo", "--sim", "--seeds", "2"]);
    let t = text(&out.stdout);
    assert!(
        t.contains("iframes") && t.contains("voice") && t.contains("guard"),
        "{t}"
    );
    assert!(
        t.contains("verdicts over seeds 1..=2") && t.contains("2/2"),
        "{t}"
    );
    // --no-compare runs only with objectives, and says so up front.
    let out = horde(&["demo", "--sim", "--no-compare", "--duration", "5"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("no run without them (--no-compare)"), "{t}");
    assert!(
        !t.contains(" s without") && !t.contains("seed 1, without"),
        "{t}"
    );
}

/// The live display redraws in place at 80 columns: one heading on screen at a time,
/// no line wider than the terminal.
#[test]
fn demo_live_display_redraws_in_place_in_an_80_column_terminal() {
    if Command::new("tmux").arg("-V").output().is_err() {
        // .ci/run installs tmux; elsewhere the check is skipped, and says so.
        assert!(std::env::var_os("CI").is_none(), "tmux is required in CI");
        eprintln!("tmux is not installed; the in-place redraw was not checked");
        return;
    }
    let session = format!("horde-demo-{}", std::process::id());
    let bin = env!("CARGO_BIN_EXE_horde");
    let cmd = format!("{bin} demo --no-compare --duration 4; sleep 30");
    let tmux = |args: &[&str]| Command::new("tmux").args(args).output().unwrap();
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "80",
        "-y",
        "30",
        &cmd,
    ]);
    assert!(started.status.success(), "{}", text(&started.stderr));
    let end = Instant::now() + Duration::from_secs(60);
    let screen = loop {
        std::thread::sleep(Duration::from_millis(500));
        let cap = tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", &session]);
        let screen = text(&cap.stdout);
        if screen.contains("summary") || Instant::now() > end {
            break screen;
        }
    };
    tmux(&["kill-session", "-t", &session]);
    assert!(
        screen.contains("summary"),
        "the demo did not finish:\n{screen}"
    );
    let headings = screen.matches("cumulative since the start:").count();
    assert_eq!(headings, 1, "stale frames left on screen:\n{screen}");
    let wide: Vec<&str> = screen.lines().filter(|l| l.chars().count() > 80).collect();
    assert!(wide.is_empty(), "lines wider than 80 columns: {wide:#?}");
}

#[test]
fn completions_and_man_pages_cover_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = horde(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let t = text(&out.stdout);
        for sub in ["demo", "send", "recv", "keygen", "completions"] {
            assert!(t.contains(sub), "{shell} completions lack {sub}");
        }
    }
    let bad = horde(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
    let out = horde(&["man"]);
    assert!(out.status.success());
    let page = text(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH horde"),
        "{page}"
    );
    assert!(page.contains("demo") && page.contains("send"), "{page}");
    let dir = std::env::temp_dir().join(format!("horde-man-{}", std::process::id()));
    let out = horde(&["man", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for page in [
        "horde.1",
        "horde-demo.1",
        "horde-send.1",
        "horde-trace-gen.1",
    ] {
        let len = std::fs::metadata(dir.join(page))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 100, "{page} missing or empty");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn tunnel_and_shell_each_have_their_own_description() {
    let tunnel = "Whole IP traffic through TUN devices over every channel";
    let shell = "Run a command in a network namespace whose interfaces are emulated links";
    let out = horde(&["tunnel", "--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    assert!(help.starts_with(tunnel), "{help}");
    assert!(!help.contains(shell), "{help}");
    let out = horde(&["shell", "--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    assert!(help.starts_with(shell), "{help}");
    assert!(!help.contains(tunnel), "{help}");
    // The overview lists each with its own line.
    let top = text(&horde(&["--help"]).stdout);
    let line = |name: &str| {
        top.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {top}"))
            .to_string()
    };
    assert!(line("tunnel").contains(tunnel), "{top}");
    assert!(line("shell").contains(shell), "{top}");
}

/// Keys and configs for a `horde send` / `horde recv` pair on loopback, in a fresh
/// directory; `streams` is the sender's `[[streams]]` TOML.
fn peer_configs(tag: &str, duration_s: u32, streams: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("horde-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = |name: &str| keygen(&dir, name);
    let (sender_pub, receiver_pub) = (key("s.key"), key("r.key"));
    // A free port for the receiver.
    let port = free_port();
    std::fs::write(
        dir.join("recv.toml"),
        format!("key_file = \"r.key\"\nallowed_keys = [\"{sender_pub}\"]\n[[interfaces]]\nbind = \"127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("send.toml"),
        format!(
            "key_file = \"s.key\"\npeer_key = \"{receiver_pub}\"\nduration_s = {duration_s}\n\
             [[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{port}\"\n\
             [[channels]]\nname = \"second\"\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{port}\"\n\
             {streams}"
        ),
    )
    .unwrap();
    dir
}

fn spawn_horde(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for a child, noting when it exited (polled every 5 ms).
fn wait_timed(mut child: std::process::Child) -> (Output, Instant) {
    let end = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "process did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
    let at = Instant::now();
    (child.wait_with_output().unwrap(), at)
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

#[test]
fn send_and_recv_run_as_separate_processes() {
    let dir = peer_configs(
        "peers",
        2,
        "[[streams]]\nid = 1\nworkload = { kind = \"cbr\", kbps = 400, adu_bytes = 500 }\n\
         [[streams]]\nid = 2\nname = \"bulk\"\nmax_kbps = 5000\nworkload = { kind = \"bulk\", adu_bytes = 1000 }\n",
    );
    // No --duration: only the sender's Close (or the 30 s idle timeout) ends it.
    let recv = spawn_horde(&[
        "recv",
        dir.join("recv.toml").to_str().unwrap(),
        "--idle-timeout",
        "30",
        "--json",
    ]);
    std::thread::sleep(Duration::from_millis(500));
    let send = spawn_horde(&["send", dir.join("send.toml").to_str().unwrap(), "--json"]);
    let (send, send_exit) = wait_timed(send);
    let (recv, recv_exit) = wait_timed(recv);
    assert!(send.status.success(), "sender: {}", text(&send.stderr));
    assert!(recv.status.success(), "receiver: {}", text(&recv.stderr));

    // The receiver ends on the sender's Close, within a second of the sender's exit.
    let rx = json_of(&recv);
    assert_eq!(rx["end"], "sender closed", "{rx}");
    let lag = recv_exit.saturating_duration_since(send_exit);
    assert!(lag < Duration::from_secs(1), "receiver ran on for {lag:?}");

    // 400 kbit/s of 500-byte ADUs for 2 s is 200 ADUs.
    let stream = |v: &serde_json::Value, id: u64| {
        v["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no stream {id} in {v}"))
            .clone()
    };
    let cbr = stream(&rx["summary"], 1);
    let received = cbr["received"].as_u64().unwrap();
    assert!((180..=201).contains(&received), "received {received}");
    for key in ["one_way_delay_ms", "in_order_delay_ms"] {
        let p50 = cbr[key]["p50"].as_f64().unwrap();
        assert!((0.0..200.0).contains(&p50), "{key} {cbr}");
    }
    // The full intervals carry the CBR stream at its rate, and the bulk one too. Both
    // processes share two cores with the rest of the suite, so one interval may lag
    // and the next catch up: each is held to half to one and a half times the rate,
    // and the total count above to within 10% of it.
    let intervals = rx["intervals"].as_array().unwrap();
    let full: Vec<_> = intervals
        .iter()
        .filter(|i| i["end_s"].as_f64().unwrap() - i["start_s"].as_f64().unwrap() > 0.9)
        .collect();
    assert!(!full.is_empty(), "{rx}");
    for i in &full {
        let kbps = stream(i, 1)["goodput_kbps"].as_f64().unwrap();
        assert!(
            (200.0..=600.0).contains(&kbps),
            "cbr at {kbps} kbit/s in {i}"
        );
        assert!(stream(i, 2)["goodput_kbps"].as_f64().unwrap() > 0.0, "{i}");
    }

    // The sender's goodput comes from its acks; its channels have distinct labels.
    let tx = json_of(&send);
    let acked = stream(&tx["summary"], 1);
    assert!(
        acked["goodput_kbps"].as_f64().unwrap() > 300.0,
        "sender goodput {acked}"
    );
    let bulk = stream(&tx["summary"], 2);
    assert!(bulk["acked"].as_u64().unwrap() > 0, "{bulk}");
    assert_eq!(bulk["dropped"], 0, "back-pressure, not queue drops: {bulk}");
    let names: Vec<&str> = tx["summary"]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ch0", "second"]);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A sender that vanishes without a Close (killed) leaves the receiver to its idle
/// timeout; the interval after the data stopped shows no goodput, since rates are per
/// interval, not averaged over the receiver's lifetime.
#[test]
fn recv_stops_on_its_idle_timeout_and_rates_are_per_interval() {
    let dir = peer_configs(
        "idle",
        30,
        "[[streams]]\nid = 1\nworkload = { kind = \"cbr\", kbps = 400, adu_bytes = 500 }\n",
    );
    let recv = spawn_horde(&[
        "recv",
        dir.join("recv.toml").to_str().unwrap(),
        "--idle-timeout",
        "2.5",
        "--json",
    ]);
    std::thread::sleep(Duration::from_millis(500));
    let mut send = spawn_horde(&["send", dir.join("send.toml").to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(2500));
    send.kill().unwrap();
    let killed = Instant::now();
    send.wait().unwrap();
    let (recv, recv_exit) = wait_timed(recv);
    assert!(recv.status.success(), "receiver: {}", text(&recv.stderr));
    let rx = json_of(&recv);
    assert_eq!(rx["end"], "idle timeout", "{rx}");
    let waited = recv_exit - killed;
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(5),
        "idle timeout after {waited:?}"
    );
    let rates: Vec<f64> = rx["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            i["streams"]
                .as_array()
                .unwrap()
                .first()
                .map_or(0.0, |s| s["goodput_kbps"].as_f64().unwrap())
        })
        .collect();
    assert!(rates.iter().any(|&r| r > 300.0), "{rates:?}");
    assert_eq!(
        *rates.last().unwrap(),
        0.0,
        "the last interval had no data: {rates:?}"
    );
    let summary = rx["summary"]["streams"][0]["goodput_kbps"]
        .as_f64()
        .unwrap();
    // Averaged over the idle wait too it would be near 200; a short span of data at
    // 400 kbit/s reads a little high when the first interval catches up.
    assert!(
        (300.0..=600.0).contains(&summary),
        "summary rate over the data, not the idle wait: {summary}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Ctrl-C stops the receiver mid-run, and it still prints its summary.
#[test]
fn recv_prints_its_summary_on_ctrl_c() {
    let dir = peer_configs(
        "sigint",
        30,
        "[[streams]]\nid = 1\nworkload = { kind = \"cbr\", kbps = 400, adu_bytes = 500 }\n",
    );
    let recv = spawn_horde(&["recv", dir.join("recv.toml").to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(500));
    let mut send = spawn_horde(&["send", dir.join("send.toml").to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(2000));
    let kill = Command::new("kill")
        .args(["-INT", &recv.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let interrupted = Instant::now();
    let (recv, recv_exit) = wait_timed(recv);
    send.kill().unwrap();
    send.wait().unwrap();
    assert!(recv.status.success(), "receiver: {}", text(&recv.stderr));
    assert!(recv_exit - interrupted < Duration::from_secs(1));
    let out = text(&recv.stdout);
    assert!(out.contains("ended: interrupted"), "{out}");
    let received: u64 = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("stream 1: received ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no summary in {out}"));
    assert!(received > 50, "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn emu_runs_a_config_and_reports_bad_ones() {
    let dir = std::env::temp_dir().join(format!("horde-cli-emu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("emu.toml");
    std::fs::write(
        &good,
        "[[channels]]\nname = \"a\"\nlisten = \"127.0.0.1:0\"\nforward_to = \"127.0.0.1:9\"\n\
         up = { rate = { model = \"constant\", kbps = 1000 }, delay = { model = \"constant\", ms = 20 } }\n",
    )
    .unwrap();
    let out = horde(&[
        "emu",
        good.to_str().unwrap(),
        "--duration",
        "0.6",
        "--report-every",
        "0.25",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("channel a: clients send to 127.0.0.1:"),
        "{stdout}"
    );
    assert!(
        stdout.matches("delivered").count() >= 2,
        "periodic tables: {stdout}"
    );
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[channels]]\nname = \"a\"\nlisten = \"nowhere\"\n").unwrap();
    let out = horde(&["emu", bad.to_str().unwrap(), "--duration", "0.5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bad.toml:3:"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn trace_gen_pipes_into_trace_stats() {
    let gen = horde(&[
        "trace",
        "gen",
        "--mean-mbps",
        "6",
        "--duration-s",
        "30",
        "--seed",
        "4",
    ]);
    assert!(gen.status.success(), "{}", text(&gen.stderr));
    let again = horde(&[
        "trace",
        "gen",
        "--mean-mbps",
        "6",
        "--duration-s",
        "30",
        "--seed",
        "4",
    ]);
    assert_eq!(gen.stdout, again.stdout, "same seed, same trace");

    let mut stats = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(["trace", "stats", "--json", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run horde trace stats");
    use std::io::Write;
    stats.stdin.take().unwrap().write_all(&gen.stdout).unwrap();
    let out = stats.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON array");
    let s = &json[0];
    assert_eq!(s["duration_s"].as_f64(), Some(30.0), "{s}");
    let mean = s["mean_mbps"].as_f64().unwrap();
    assert!((mean - 6.0).abs() < 0.6, "{s}");
    let cv = s["cv_100ms"].as_f64().unwrap();
    assert!((0.6..=1.2).contains(&cv), "{s}");
    let gaps = s["gap_fraction"].as_f64().unwrap();
    assert!((0.01..=0.20).contains(&gaps), "{s}");
    assert!(s["longest_gap_ms"].as_u64().unwrap() >= 100, "{s}");
}

/// docs/traces.md gives the commands that made traces/; they still make the same bytes.
#[test]
fn shipped_traces_come_from_the_documented_commands() {
    for (file, mean, seed) in [
        ("cell-a.up", "6", "1"),
        ("cell-b.up", "11", "2"),
        ("cell-c.up", "2", "3"),
    ] {
        let out = horde(&[
            "trace",
            "gen",
            "--mean-mbps",
            mean,
            "--duration-s",
            "60",
            "--seed",
            seed,
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let shipped = std::fs::read(repo().join("traces").join(file)).unwrap();
        assert!(
            out.stdout == shipped,
            "traces/{file} differs from its command"
        );
    }
}

#[test]
fn trace_commands_reject_bad_input_clearly() {
    let out = horde(&["trace", "gen", "--mean-mbps", "fast"]);
    assert_eq!(out.status.code(), Some(2), "clap usage error");
    assert!(
        text(&out.stderr).contains("expected a number, found \"fast\""),
        "{}",
        text(&out.stderr)
    );
    let out = horde(&["trace", "gen", "--mean-mbps", "-3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("must be a positive number, got -3"),
        "{}",
        text(&out.stderr)
    );
    let out = horde(&["trace", "gen", "--mean-mbps", "5000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("mean_mbps must be"),
        "{}",
        text(&out.stderr)
    );

    let dir = std::env::temp_dir().join(format!("horde-cli-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.up");
    std::fs::write(&bad, "1\n2\n2.5\n").unwrap();
    let out = horde(&[
        "trace",
        "stats",
        bad.to_str().unwrap(),
        "traces/cell-a.up",
        "no-such.up",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:3: expected a millisecond timestamp, found \"2.5\"",
            bad.display()
        )),
        "{err}"
    );
    assert!(err.contains("no-such.up: "), "{err}");
    assert!(
        text(&out.stdout).contains("traces/cell-a.up"),
        "the good file is still measured"
    );

    let params = dir.join("params.toml");
    std::fs::write(&params, "mean_mbps = 6\nfading_sigma = \"high\"\n").unwrap();
    let out = horde(&["trace", "gen", "--params", params.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{}:2:16:", params.display())),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The scenario's trace paths are relative to the scenario file, not the working directory.
#[test]
fn cellular3_runs_from_another_directory() {
    let out = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args([
            "sim",
            "../../scenarios/cellular3.toml",
            "--duration",
            "3",
            "--json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run horde");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for c in json["channels"].as_array().unwrap() {
        assert!(c["sent"].as_u64().unwrap() > 0, "{c}");
    }
}

/// `horde bench links` runs the shipped cellular scenario under two controllers in the
/// simulator and in real time, writes its table, CSV and plot, and its figures are sane:
/// goodput within the links' capacity and most of it used by a buffer-filling
/// controller, and declared loss close to what the links dropped.
#[test]
fn bench_links_compares_controllers_over_the_cellular_links() {
    let dir = std::env::temp_dir().join(format!("horde-cli-bench-{}", std::process::id()));
    let out = horde(&[
        "bench",
        "links",
        "scenarios/cellular3.toml",
        "--cc",
        "cubic,copa",
        "--duration",
        "4",
        "--realtime",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = json_of(&out);
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 4, "sim and real time for each controller");
    for r in rows {
        let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));
        assert!(f("capacity_mbps") > 5.0, "{r}");
        assert!(f("goodput_mbps") <= f("capacity_mbps") * 1.02, "{r}");
        assert!(
            f("delay_p95_ms") >= f("delay_p50_ms") && f("delay_p50_ms") >= 30.0,
            "{r}"
        );
        assert!(
            (f("declared_loss") - f("actual_loss")).abs() <= 0.1 * f("actual_loss") + 0.005,
            "declared vs actual loss: {r}"
        );
        if r["cc"] == "cubic" {
            assert!(f("utilization") > 0.6, "{r}");
        }
    }
    for f in ["results.json", "results.csv", "tput_delay.svg"] {
        let meta = std::fs::metadata(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(meta.len() > 0, "{f} is empty");
    }
    let bad = horde(&["bench", "links", "--cc", "vegas", "--duration", "1"]);
    assert!(!bad.status.success());
    assert!(text(&bad.stderr).contains("unknown congestion controller \"vegas\""));
    std::fs::remove_dir_all(dir).unwrap();
}

/// `ontime` over two generated cellular uplinks (fixed seeds, 150 kB buffers, 30 and
/// 40 ms one way), in the simulator beside `cubic` and `copa`: it keeps most of the
/// capacity at a p95 one-way delay within 120 ms of the slower link's base, where `cubic`
/// queues for several hundred ms, and it delivers more than `copa`.
#[test]
fn bench_links_ontime_is_on_time_and_keeps_the_links_busy() {
    let dir = std::env::temp_dir().join(format!("horde-cli-ontime-{}", std::process::id()));
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    for (name, mbps, seed) in [("a.up", "4", "11"), ("b.up", "8", "12")] {
        let out = horde(&[
            "trace",
            "gen",
            "--mean-mbps",
            mbps,
            "--duration-s",
            "30",
            "--seed",
            seed,
            "--out",
            traces.join(name).to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let link = |trace: &str, ms: u32| {
        format!(
            "mtu = 1400\nup = {{ rate = {{ model = \"trace\", path = \"traces/{trace}\" }}, \
             buffer_bytes = 150000, delay = {{ model = \"constant\", ms = {ms} }} }}\n\
             down = {{ delay = {{ model = \"constant\", ms = {ms} }} }}\n"
        )
    };
    let scenario = format!(
        "name = \"gen2\"\nseed = 5\nduration_s = 30\n[scheduler]\nkind = \"rrr\"\ncycle_ms = 0\n\
         [[hosts]]\nname = \"a\"\n[[hosts]]\nname = \"b\"\n\
         [[channels]]\nname = \"x\"\n{}[[channels]]\nname = \"y\"\n{}\
         [[streams]]\nid = 1\nelastic = true\nworkload = {{ kind = \"bulk\", adu_bytes = 1400 }}\n",
        link("a.up", 30),
        link("b.up", 40)
    );
    let path = dir.join("gen2.toml");
    std::fs::write(&path, scenario).unwrap();
    let out = horde(&[
        "bench",
        "links",
        path.to_str().unwrap(),
        "--cc",
        "ontime,cubic,copa",
        "--duration",
        "30",
        "--json",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = json_of(&out);
    let row = |cc: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["cc"] == cc)
            .unwrap_or_else(|| panic!("no {cc} row in {rows}"))
            .clone()
    };
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap();
    let (ontime, cubic, copa) = (row("ontime"), row("cubic"), row("copa"));
    assert!(f(&ontime, "utilization") >= 0.65, "{ontime}");
    assert!(f(&ontime, "delay_p95_ms") <= 40.0 + 120.0, "{ontime}");
    assert!(
        f(&ontime, "delay_p95_ms") * 2.0 < f(&cubic, "delay_p95_ms"),
        "{ontime} against {cubic}"
    );
    assert!(
        f(&ontime, "goodput_mbps") > 1.1 * f(&copa, "goodput_mbps"),
        "{ontime} against {copa}"
    );
}

/// Without a scenario, `horde bench links` runs its built-in one (the cellular scenario
/// with its traces) from any directory, and removes the traces it wrote for the links.
#[test]
fn bench_links_runs_its_default_scenario_from_any_directory() {
    let dir = std::env::temp_dir().join(format!("horde-cli-bench-default-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args([
            "bench",
            "links",
            "--cc",
            "cubic",
            "--duration",
            "1",
            "--json",
        ])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = json_of(&out);
    let [row] = rows.as_array().expect("an array of rows").as_slice() else {
        panic!("one row expected: {rows}");
    };
    assert_eq!(row["mode"], "sim", "{row}");
    assert!(row["capacity_mbps"].as_f64().unwrap() > 5.0, "{row}");
    assert!(row["goodput_mbps"].as_f64().unwrap() > 0.0, "{row}");
    let traces = std::env::temp_dir().join(format!("horde-bench-links-{pid}"));
    assert!(!traces.exists(), "{} left behind", traces.display());
}

#[test]
fn send_rejects_bad_values_at_their_line_and_column() {
    let dir = peer_configs(
        "badvalues",
        2,
        "[[streams]]\nid = 1\nmax_kbps = -100\nworkload = { kind = \"cbr\", kbps = 40, adu_bytes = 500 }\n",
    );
    let file = dir.join("send.toml");
    let out = horde(&["send", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let line = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("max_kbps"))
        .unwrap()
        + 1;
    let want = format!(
        "{}:{line}:12: max_kbps must be a positive number, got -100",
        file.display()
    );
    assert!(text(&out.stderr).contains(&want), "{}", text(&out.stderr));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A sender with the wrong receiver key gets no answer (the receiver drops what is not
/// for it); `horde send` says which keys to check, and warns first about an objective
/// that names no stream of its file.
#[test]
fn send_with_a_wrong_peer_key_says_what_to_check() {
    let objective = repo().join("objectives/y1.hose");
    let dir = peer_configs(
        "wrongkey",
        2,
        &format!(
            "[[streams]]\nid = 1\nworkload = {{ kind = \"cbr\", kbps = 40, adu_bytes = 500 }}\nobjectives = [\"{}\"]\n",
            objective.display()
        ),
    );
    let stranger = horde(&["keygen", "--out", dir.join("x.key").to_str().unwrap()]);
    let stranger = text(&stranger.stdout).trim().to_string();
    let file = dir.join("send.toml");
    let cfg = std::fs::read_to_string(&file).unwrap();
    let peer_line = cfg.lines().find(|l| l.starts_with("peer_key")).unwrap();
    std::fs::write(
        &file,
        cfg.replace(peer_line, &format!("peer_key = \"{stranger}\"")),
    )
    .unwrap();
    let mut recv = spawn_horde(&[
        "recv",
        dir.join("recv.toml").to_str().unwrap(),
        "--duration",
        "20",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let out = horde(&["send", file.to_str().unwrap()]);
    recv.kill().unwrap();
    recv.wait().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("y1.hose can match no stream"), "{err}");
    assert!(err.contains("did not answer the handshake"), "{err}");
    assert!(err.contains(&format!("peer_key ({stranger})")), "{err}");
    assert!(err.contains("allowed_keys"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `horde demo | head` (a reader that stops early) ends the command quietly, as it ends
/// `cat`; it used to panic ("failed printing to stdout: Broken pipe").
#[test]
fn a_reader_that_stops_early_ends_printing_commands_without_a_panic() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    for args in [
        &["demo", "--sim", "--duration", "2"][..],
        &["trace", "gen", "--duration-s", "60"][..],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_horde"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?} printed nothing");
        // The read end is closed here, with the command still printing.
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
    }
}

/// An error whose message already quotes its cause prints the cause once: `horde emu`
/// with a missing file said "No such file or directory (os error 2)" twice.
#[test]
fn an_error_names_its_cause_once() {
    let out = horde(&["emu", "no-such-emu-config.toml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("no-such-emu-config.toml"), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    // A socket that cannot be bound is named, not only the OS's reason.
    let dir = peer_configs(
        "bind-error",
        1,
        "[[streams]]\nid = 1\nworkload = { kind = \"cbr\", kbps = 100, adu_bytes = 500 }\n",
    );
    let file = dir.join("send.toml");
    let config = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        config.replacen("bind = \"127.0.0.1:0\"", "bind = \"192.0.2.1:0\"", 1),
    )
    .unwrap();
    let out = horde(&["send", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("cannot bind 192.0.2.1:0"), "{err}");
    assert_eq!(err.matches("os error 99").count(), 1, "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}
