//! `horde-lab chap multi-app` and `chap p2p` with `--short --json`: the directions of the
//! CHAP dissertation's Tables 6.10 and 6.11 hold on a fixed seed, end to end through the
//! command.

mod common;

use std::process::Command;

use serde_json::Value;

/// FIFO, CHAP, SPQ, fq_codel means of the row named `app`.
fn row(table: &Value, app: &str) -> [f64; 4] {
    let rows = table["rows"].as_array().expect("rows");
    let r = rows
        .iter()
        .find(|r| r["app"] == app)
        .unwrap_or_else(|| panic!("no row {app}"));
    let m: Vec<f64> = r["mean"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    [m[0], m[1], m[2], m[3]]
}

#[test]
fn table_6_10_directions_hold_on_a_short_run() {
    let json = common::lab_json(&["chap", "multi-app", "--short", "--seed", "1", "--json"]);
    let table = &json["table"];
    assert_eq!(json["runs"].as_array().unwrap().len(), 12);

    let [fifo, chap, spq, _] = row(table, "Game");
    assert!((chap - spq).abs() < 0.1, "game: CHAP {chap} ~ SPQ {spq}");
    assert!(
        chap - fifo > 0.2,
        "game: FIFO {fifo} clearly below CHAP {chap}"
    );

    let [fifo, chap, spq, _] = row(table, "VoIP");
    assert!((chap - spq).abs() < 0.05, "VoIP: CHAP {chap} ~ SPQ {spq}");
    assert!(chap >= fifo, "VoIP: CHAP {chap} >= FIFO {fifo}");

    for video in ["Video, no FEC", "Video, small FEC", "Video, large FEC"] {
        let [fifo, chap, spq, _] = row(table, video);
        assert!((chap - spq).abs() < 1.5, "{video}: CHAP {chap} ~ SPQ {spq}");
        assert!(
            chap - fifo > 4.0,
            "{video}: FIFO {fifo} clearly below CHAP {chap}"
        );
    }

    // SPQ's delay-sensitive band serves the Web behind the video; CHAP's credit sends a
    // new page's first burst ahead of it. So on one short run CHAP may beat SPQ: only
    // both against FIFO are checked here (the ten-seed table is in docs/results.md).
    let [fifo, chap, spq, _] = row(table, "Web");
    assert!(
        chap < 0.75 * fifo && spq < fifo,
        "web response time: CHAP {chap} and SPQ {spq} below FIFO {fifo}"
    );

    let ftp = row(table, "FTP");
    let (lo, hi) = (
        ftp[..3].iter().copied().fold(f64::INFINITY, f64::min),
        ftp[..3].iter().copied().fold(0.0, f64::max),
    );
    assert!(lo > 15.0, "FTP fills the channel: {ftp:?}");
    assert!(
        (hi - lo) / hi < 0.05,
        "FTP within 5% across FIFO, CHAP, SPQ: {ftp:?}"
    );
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_horde-lab"))
        .args(["chap", "multi-app", "--seeds", "0"])
        .output()
        .expect("run horde-lab");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--seeds must be between 1 and 1000"), "{err}");
}

#[test]
fn table_6_11_directions_hold_on_a_short_run() {
    let json = common::lab_json(&["chap", "p2p", "--short", "--seed", "1", "--json"]);
    let table = &json["table"];
    assert_eq!(json["runs"].as_array().unwrap().len(), 16);

    for (app, close, gap) in [
        ("Game", 0.1, 0.2),
        ("VoIP", 0.05, 0.05),
        ("Video, no FEC", 1.5, 10.0),
    ] {
        let [fifo, chap, spq, _] = row(table, app);
        assert!((chap - spq).abs() < close, "{app}: CHAP {chap} ~ SPQ {spq}");
        assert!(
            chap - fifo > gap,
            "{app}: FIFO {fifo} clearly below CHAP {chap}"
        );
    }
    let [fifo, chap, spq, _] = row(table, "Web");
    assert!(
        spq < chap && chap < fifo,
        "web response time: SPQ {spq} < CHAP {chap} < FIFO {fifo}"
    );
    let p2p = row(table, "P2P");
    let (lo, hi) = (
        p2p[..3].iter().copied().fold(f64::INFINITY, f64::min),
        p2p[..3].iter().copied().fold(0.0, f64::max),
    );
    assert!(
        lo > 15.0 && (hi - lo) / hi < 0.05,
        "P2P the same under all: {p2p:?}"
    );
}
