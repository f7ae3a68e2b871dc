//! `horde analyze` end to end: the binary on files it has to read.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::Command;

use horde_analyze::pcap::{encode_pcap, encode_pcap_snapped, Segment};

fn horde(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .output()
        .expect("run horde");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("horde-analyze-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn nmi_json_finds_the_thesis_synthetic_lags() {
    // Z(n) = 5 X(n-3) + 2 X(n-7) + Y(n), with X and Y from a fixed LCG.
    let mut state: u64 = 12345;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let n = 4000;
    let x: Vec<f64> = (0..n).map(|_| next()).collect();
    let y: Vec<f64> = (0..n).map(|_| next()).collect();
    let mut csv = String::from("x,z\n");
    for i in 0..n {
        let past = |d: usize| if i >= d { x[i - d] } else { 0.5 };
        csv.push_str(&format!(
            "{},{}\n",
            x[i],
            5.0 * past(3) + 2.0 * past(7) + y[i]
        ));
    }
    let d = dir("nmi");
    let file = d.join("z.csv");
    std::fs::write(&file, csv).unwrap();
    let f = file.to_str().unwrap();
    let (ok, out, err) = horde(&[
        "analyze",
        "nmi",
        "--x",
        "x",
        "--y",
        "z",
        "--max-lag",
        "10",
        "--x-bins",
        "width:0.125",
        "--y-bins",
        "width:1",
        "--shuffles",
        "30",
        "--json",
        f,
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let lags = v["lags"].as_array().unwrap();
    assert_eq!(lags.len(), 11);
    let mut rows: Vec<(u64, f64, f64)> = lags
        .iter()
        .map(|r| {
            (
                r["lag"].as_u64().unwrap(),
                r["nmi"].as_f64().unwrap(),
                r["null"].as_f64().unwrap(),
            )
        })
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    assert_eq!((rows[0].0, rows[1].0), (3, 7), "{rows:?}");
    assert!(
        rows[1].1 > 3.0 * rows[1].2 && rows[1].1 > 3.0 * rows[2].1,
        "{rows:?}"
    );
    // The table form prints the null too.
    let (ok, out, _) = horde(&[
        "analyze",
        "nmi",
        "--x",
        "x",
        "--y",
        "z",
        "--max-lag",
        "4",
        "--x-bins",
        "width:0.125",
        "--y-bins",
        "width:1",
        f,
    ]);
    assert!(
        ok && out.contains("null95") && out.contains("peak: lag 3"),
        "{out}"
    );
    // The default bins adapt to the data: X lies in [0, 1), where 10-unit bins saw one
    // symbol and an NMI of 0 at every lag.
    let (ok, out, err) = horde(&[
        "analyze",
        "nmi",
        "--x",
        "x",
        "--y",
        "z",
        "--max-lag",
        "4",
        f,
    ]);
    assert!(ok && out.contains("peak: lag 3"), "{out}{err}");
    assert!(!err.contains("warning"), "{err}");
    let (ok, out, err) = horde(&[
        "analyze",
        "nmi",
        "--x",
        "x",
        "--y",
        "z",
        "--max-lag",
        "4",
        "--x-bins",
        "width:10",
        f,
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("warning: column x falls into a single bin with width:10"),
        "{err}"
    );
    assert!(out.contains("    3    0.00000"), "{out}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn malformed_inputs_name_file_and_line() {
    let d = dir("bad");
    let csv = d.join("bad.csv");
    std::fs::write(&csv, "a,b\n1,2\n3,x\n").unwrap();
    let (ok, _, err) = horde(&[
        "analyze",
        "nmi",
        "--x",
        "a",
        "--y",
        "b",
        "--max-lag",
        "0",
        csv.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("bad.csv:3:2: `x` in column `b` is not a finite number"),
        "{err}"
    );
    let pcap = d.join("cut.pcap");
    let seg = Segment {
        time: 1.0,
        src: (IpAddr::V4(Ipv4Addr::LOCALHOST), 1),
        dst: (IpAddr::V4(Ipv4Addr::LOCALHOST), 2),
        seq: 1,
        ack: 1,
        ack_flag: true,
        control: false,
        len: 100,
        sack: [None; 4],
    };
    let bytes = encode_pcap(&[seg, seg]);
    std::fs::write(&pcap, &bytes[..bytes.len() - 10]).unwrap();
    let (ok, _, err) = horde(&["analyze", "pcap", pcap.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("cut.pcap:packet 2: truncated"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn cdma_probe_series_feed_the_analysis() {
    let d = dir("cdma");
    let out = d.join("probe.csv");
    let (ok, stdout, err) = horde(&[
        "analyze",
        "cdma-udp",
        "--source",
        "onoff:40:1:5",
        "--seconds",
        "300",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(stdout.contains("goodput"), "{stdout}");
    let (ok, stdout, err) = horde(&[
        "analyze",
        "nmi",
        "--x",
        "send_kbps",
        "--y",
        "assigned_kbps",
        "--max-lag",
        "3",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // The scheduler follows the sending rate: NMI at lag 0 or 1 well above its null.
    let best = v["lags"].as_array().unwrap()[..2]
        .iter()
        .map(|r| r["nmi"].as_f64().unwrap() - 3.0 * r["null"].as_f64().unwrap())
        .fold(f64::MIN, f64::max);
    assert!(best > 0.0, "{stdout}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Each source is named as it was given (not as Rust debug text), and each user's series
/// goes where the output line says.
#[test]
fn cdma_probe_names_sources_and_says_where_each_series_went() {
    let d = dir("cdma-users");
    let out = d.join("probe.csv");
    let (ok, stdout, err) = horde(&[
        "analyze",
        "cdma-udp",
        "--source",
        "cbr:40",
        "--source",
        "onoff:40:1:5",
        "--seconds",
        "60",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        stdout.contains(" cbr:40 ") && stdout.contains(" onoff:40:1:5 "),
        "{stdout}"
    );
    assert!(
        !stdout.contains('{') && !stdout.contains("kbps:"),
        "{stdout}"
    );
    for (user, source) in [(0, "cbr:40"), (1, "onoff:40:1:5")] {
        let path = d.join(format!("probe-u{user}.csv"));
        assert!(path.exists(), "{}", path.display());
        assert!(
            err.contains(&format!(
                "user {user} ({source}): per-second series in {}",
                path.display()
            )),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A bulk sender's capture taken with `tcpdump -s 128`, split into one file per
/// direction as `horde shell --pcap` writes it: read with the true payload lengths; one
/// direction alone says it has no ACKs instead of calling every retransmission a timeout;
/// both directions together give RTTs and classed retransmissions.
#[test]
fn pcap_reads_snapped_captures_and_pairs_the_two_directions() {
    let d = dir("pcap-pair");
    let (sender, receiver) = (
        (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 40000),
        (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5201),
    );
    let segment = |time: f64, from_sender: bool, seq: u32, ack: u32, len: u32| Segment {
        time,
        src: if from_sender { sender } else { receiver },
        dst: if from_sender { receiver } else { sender },
        seq,
        ack,
        ack_flag: true,
        control: false,
        len,
        sack: [None; 4],
    };
    let mut up = Vec::new();
    let mut down = Vec::new();
    for i in 0..50u32 {
        let t = f64::from(i) * 0.01;
        up.push(segment(t, true, 1 + i * 1400, 1, 1400));
        down.push(segment(t + 0.04, false, 1, 1 + (i + 1) * 1400, 0));
    }
    // Segment 10 again, 150 ms after the last ACK: a timeout.
    up.push(segment(0.49 + 0.04 + 0.15, true, 1 + 10 * 1400, 1, 1400));
    let up_file = d.join("link0-up.pcap");
    let down_file = d.join("link0-down.pcap");
    std::fs::write(&up_file, encode_pcap_snapped(&up, 128)).unwrap();
    std::fs::write(&down_file, encode_pcap_snapped(&down, 128)).unwrap();
    let up_file = up_file.to_str().unwrap();
    let down_file = down_file.to_str().unwrap();

    let (ok, out, err) = horde(&["analyze", "pcap", up_file]);
    assert!(ok, "{err}");
    assert!(
        out.contains("bytes 71400  acks 0  retransmissions 1"),
        "{out}"
    );
    assert!(
        out.contains("timeouts (>100 ms after last ack) unknown"),
        "{out}"
    );
    assert!(out.contains("no ACKs from 10.0.0.2:5201"), "{out}");

    let (ok, out, err) = horde(&["analyze", "pcap", up_file, down_file]);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "bytes 71400  acks 50  retransmissions 1  timeouts (>100 ms after last ack) 1"
        ),
        "{out}"
    );
    assert!(out.contains("rtt_ms: n 50"), "{out}");
    std::fs::remove_dir_all(&d).unwrap();
}
