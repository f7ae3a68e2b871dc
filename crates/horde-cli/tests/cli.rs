//! The `horde` binary end to end: exit codes, error messages, output formats.

use std::path::PathBuf;
use std::process::{Command, Output};

fn horde(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run horde")
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

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
fn demo_runs_briefly_and_objectives_help_the_voice_stream() {
    let out = horde(&["demo", "--duration", "8", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    for run in ["with_objectives", "without_objectives"] {
        for stream in ["video", "audio", "ekg", "video I-frames"] {
            assert!(
                json[run][stream]["acked"].as_u64().unwrap() > 0,
                "{run}/{stream}: {json}"
            );
        }
    }
}

#[test]
fn send_and_recv_run_as_separate_processes() {
    let dir = std::env::temp_dir().join(format!("horde-cli-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = |name: &str| {
        let out = horde(&["keygen", "--out", dir.join(name).to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).trim().to_string()
    };
    let (sender_pub, receiver_pub) = (key("s.key"), key("r.key"));
    // A free port for the receiver.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        dir.join("recv.toml"),
        format!("key_file = \"r.key\"\nallowed_keys = [\"{sender_pub}\"]\n[[interfaces]]\nbind = \"127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("send.toml"),
        format!(
            "key_file = \"s.key\"\npeer_key = \"{receiver_pub}\"\nduration_s = 2\n\
             [[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{port}\"\n\
             [[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:{port}\"\n\
             [[streams]]\nid = 1\nworkload = {{ kind = \"cbr\", kbps = 400, adu_bytes = 500 }}\n"
        ),
    )
    .unwrap();
    let recv = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args([
            "recv",
            dir.join("recv.toml").to_str().unwrap(),
            "--duration",
            "15",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let send = horde(&["send", dir.join("send.toml").to_str().unwrap()]);
    let recv = recv.wait_with_output().unwrap();
    assert!(send.status.success(), "sender: {}", text(&send.stderr));
    assert!(recv.status.success(), "receiver: {}", text(&recv.stderr));
    let out = text(&recv.stdout);
    // 400 kbit/s of 500-byte ADUs for 2 s is 200 ADUs.
    let received: u64 = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("stream 1: received ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no count in {out}"));
    assert!(
        (180..=201).contains(&received),
        "received {received}: {out}"
    );
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
