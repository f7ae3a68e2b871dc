//! `--metrics ADDR` on a running `horde recv` and `horde send` pair: the OpenMetrics text
//! a Prometheus scrape gets (per channel, per peer, per stream, per host), the JSON the
//! live page reads, the page itself in a real headless browser whose charts fill while
//! the transfer runs, and clear errors for a bad address or a taken port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;

use common::{text, two_channel_pair};

/// Starts `horde ARGS` in `dir` and returns it with the metrics address it printed.
fn spawn_with_metrics(dir: &Path, args: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .args(["--metrics", "127.0.0.1:0"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("metrics: http://") {
                let addr = rest.split('/').next().unwrap().to_string();
                let _ = tx.send(addr);
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the process prints its metrics address");
    (child, addr.parse().unwrap())
}

/// A GET or another method over plain HTTP/1.0: the status code and the body.
fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "{method} {path} HTTP/1.0\r\nHost: test\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head.split(' ').nth(1).unwrap_or("0").parse().unwrap();
    (code, head.to_string(), body.to_string())
}

/// One sample line's value, by metric name and a label that must appear.
fn samples<'a>(text: &'a str, name: &str) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let bare = series.split('{').next()?;
            (bare == name).then(|| (series, value.parse::<f64>().unwrap()))
        })
        .collect()
}

fn setup(tag: &str) -> (PathBuf, [u16; 2]) {
    let dir = std::env::temp_dir().join(format!("horde-metrics-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_, _, ports) = two_channel_pair(
        &dir,
        12,
        "[[streams]]\nid = 1\nname = \"video\"\n\
         workload = { kind = \"cbr\", kbps = 400, adu_bytes = 500 }\n",
    );
    (dir, ports)
}

/// The sender's scrape once both channels have packets acked and the stream has a
/// goodput, or a failure after `limit`.
fn busy_scrape(addr: SocketAddr, limit: Duration) -> String {
    let end = Instant::now() + limit;
    loop {
        let (code, _, body) = request(addr, "GET", "/metrics");
        assert_eq!(code, 200, "{body}");
        let acked = samples(&body, "horde_channel_packets_acked_total");
        let goodput = samples(&body, "horde_stream_goodput_bits_per_second");
        if acked.len() == 2
            && acked.iter().all(|(_, v)| *v > 0.0)
            && goodput.iter().any(|(_, v)| *v > 0.0)
        {
            return body;
        }
        assert!(Instant::now() < end, "never busy:\n{body}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn metrics_and_the_live_page_follow_a_running_pair() {
    let (dir, [p0, p1]) = setup("pair");
    let (mut recv, recv_metrics) =
        spawn_with_metrics(&dir, &["recv", "recv.toml", "--duration", "20"]);
    let (mut send, send_metrics) = spawn_with_metrics(&dir, &["send", "send.toml"]);

    let body = busy_scrape(send_metrics, Duration::from_secs(10));
    // OpenMetrics: typed families, units, and the closing EOF line.
    assert!(body.ends_with("# EOF\n"), "{body}");
    for family in [
        "# TYPE horde_channel_up gauge",
        "# TYPE horde_channel_rtt_seconds gauge",
        "# UNIT horde_channel_rtt_seconds seconds",
        "# TYPE horde_channel_packets_lost counter",
        "# TYPE horde_session_adus counter",
        "# TYPE horde_stream_delay_seconds gauge",
        "# TYPE horde_host_reconnects counter",
    ] {
        assert!(body.contains(family), "no {family:?} in\n{body}");
    }
    let up = samples(&body, "horde_channel_up");
    assert_eq!(up.len(), 2, "{body}");
    assert!(up.iter().all(|(_, v)| *v == 1.0), "{body}");
    for port in [p0, p1] {
        assert!(
            up.iter()
                .any(|(s, _)| s.contains(&format!("endpoint=\"127.0.0.1:{port}\""))),
            "no channel to port {port}:\n{body}"
        );
    }
    let rtt = samples(&body, "horde_channel_rtt_seconds");
    assert!(rtt.iter().all(|(_, v)| *v > 0.0 && *v < 1.0), "{body}");
    assert!(
        samples(&body, "horde_stream_goodput_bits_per_second")
            .iter()
            .any(|(s, v)| s.contains("name=\"video\"") && *v > 100e3),
        "the 400 kbit/s stream shows its goodput:\n{body}"
    );
    let acked = samples(&body, "horde_session_adus_total");
    assert!(
        acked
            .iter()
            .any(|(s, v)| s.contains("state=\"acked\"") && *v > 0.0),
        "{body}"
    );
    assert!(samples(&body, "horde_host_datagrams_total")
        .iter()
        .all(|(_, v)| *v > 0.0));

    // The receiver counts what arrived, per stream and per channel.
    let (_, _, rbody) = request(recv_metrics, "GET", "/metrics");
    assert!(
        samples(&rbody, "horde_stream_adus_total")
            .iter()
            .any(|(s, v)| s.contains("state=\"received\"") && *v > 0.0),
        "{rbody}"
    );
    assert!(samples(&rbody, "horde_channel_packets_received_total")
        .iter()
        .all(|(_, v)| *v > 0.0));

    // The JSON the page reads, the page, and what is not served.
    let (code, head, json) = request(send_metrics, "GET", "/status.json");
    assert_eq!(code, 200);
    assert!(head.contains("application/json"), "{head}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["status"]["role"], "send");
    assert_eq!(
        v["status"]["peers"][0]["channels"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(v["streams"][0]["name"], "video");
    let (code, _, page) = request(send_metrics, "GET", "/");
    assert_eq!(code, 200);
    assert!(page.contains("/status.json"), "{page}");
    assert_eq!(request(send_metrics, "GET", "/nothing").0, 404);
    assert_eq!(request(send_metrics, "POST", "/metrics").0, 405);

    live_page_in_a_browser(send_metrics);

    for child in [&mut send, &mut recv] {
        let _ = child.kill();
        let _ = child.wait();
    }
    std::fs::remove_dir_all(dir).unwrap();
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// The live page in headless Chromium: after a few seconds of the running transfer, its
/// link and stream charts hold samples. A screenshot is left in the target directory.
fn live_page_in_a_browser(addr: SocketAddr) {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var("CI").is_err(),
            "CI must run the browser test: install chromium (.ci/run does)"
        );
        eprintln!("skipping the browser check: no chromium on this machine");
        return;
    };
    let url = format!("http://{addr}/");
    let profile =
        std::env::temp_dir().join(format!("horde-metrics-browser-{}", std::process::id()));
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--virtual-time-budget=6000",
    ];
    let profile_arg = format!("--user-data-dir={}", profile.display());
    let out = Command::new(browser)
        .args(base)
        .arg(&profile_arg)
        .args(["--dump-dom", &url])
        .output()
        .unwrap();
    let dom = text(&out.stdout);
    let updates: u32 = dom
        .split("data-updates=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the page never updated:\n{dom}\n{}", text(&out.stderr)));
    assert!(updates >= 2, "{updates} updates:\n{dom}");
    let filled = dom
        .split("data-samples=\"")
        .skip(1)
        .filter_map(|r| r.split('"').next()?.parse::<u32>().ok())
        .filter(|n| *n >= 2)
        .count();
    // Two links (rate, RTT, loss each) and the stream (goodput, delay).
    assert!(filled >= 6, "{filled} charts with data:\n{dom}");
    assert!(
        dom.contains("127.0.0.1:"),
        "the status table lists the channels:\n{dom}"
    );

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("metrics-page.png");
    let out = Command::new(browser)
        .args(base)
        .arg(&profile_arg)
        .args(["--window-size=1200,900"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot.metadata().is_ok_and(|m| m.len() > 1000),
        "no screenshot: {}",
        text(&out.stderr)
    );
    eprintln!("screenshot of the live page: {}", shot.display());
    let _ = std::fs::remove_dir_all(profile);
}

#[test]
fn a_bad_metrics_address_is_a_clear_error() {
    let (dir, _) = setup("bad");
    let out = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(["recv", "recv.toml", "--metrics", "localhost"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--metrics"),
        "{}",
        text(&out.stderr)
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(["recv", "recv.toml", "--duration", "1", "--metrics"])
        .arg(format!("127.0.0.1:{port}"))
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("--metrics 127.0.0.1:{port}: cannot listen there")),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
