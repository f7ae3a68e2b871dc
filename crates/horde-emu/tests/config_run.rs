//! Configuration files, trace paths relative to them, and the foreground `run_until_with`.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use horde_emu::{run_until_with, Emulator, EmulatorConfig};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("horde-emu-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    udp().local_addr().unwrap().port()
}

#[test]
fn config_file_with_trace_relative_to_it_relays() {
    let dir = TempDir::new("trace");
    std::fs::create_dir_all(dir.0.join("traces")).unwrap();
    // One 1500-byte opportunity per millisecond: 12 Mbit/s.
    std::fs::write(dir.0.join("traces/flat.up"), "1\n").unwrap();
    let server = udp();
    let text = format!(
        r#"
seed = 3
[[channels]]
name = "t"
listen = "127.0.0.1:0"
forward_to = "{}"
up = {{ rate = {{ model = "trace", path = "traces/flat.up" }}, delay = {{ model = "constant", ms = 5 }} }}
"#,
        server.local_addr().unwrap()
    );
    let path = dir.0.join("emu.toml");
    std::fs::write(&path, text).unwrap();
    let config = EmulatorConfig::from_file(&path).unwrap();
    let emu = Emulator::start(&config).unwrap();
    let client = udp();
    client
        .send_to(b"via trace", emu.client_addr("t").unwrap())
        .unwrap();
    assert_eq!(recv(&server).expect("relayed").0, b"via trace");
    client
        .send_to(b"back?", emu.client_addr("t").unwrap())
        .unwrap();
    let (_, from) = recv(&server).unwrap();
    server.send_to(b"reply", from).unwrap();
    assert_eq!(recv(&client).expect("ideal down link").0, b"reply");

    // A missing trace is reported when the links are built, naming the channel.
    std::fs::remove_file(dir.0.join("traces/flat.up")).unwrap();
    let err = Emulator::start(&config)
        .err()
        .expect("missing trace")
        .to_string();
    assert!(err.contains("`t` up") && err.contains("flat.up"), "{err}");
}

#[test]
fn run_until_reports_and_stops_after_the_duration() {
    let server = udp();
    let port = free_port();
    let text = format!(
        r#"
[[channels]]
name = "r"
listen = "127.0.0.1:{port}"
forward_to = "{}"
up = {{}}
"#,
        server.local_addr().unwrap()
    );
    let config = EmulatorConfig::from_toml(&text, "run.toml", std::path::Path::new(".")).unwrap();
    let sender = std::thread::spawn(move || {
        let client = udp();
        for _ in 0..20 {
            let _ = client.send_to(b"x", ("127.0.0.1", port));
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let mut out = Vec::new();
    let started = std::time::Instant::now();
    let stats = run_until_with(
        &config,
        Some(Duration::from_millis(400)),
        Duration::from_millis(100),
        &mut out,
    )
    .unwrap();
    let took = started.elapsed();
    sender.join().unwrap();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(900),
        "{took:?}"
    );
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(&format!("clients send to 127.0.0.1:{port}")),
        "{text}"
    );
    assert!(
        text.matches("p99 us").count() >= 4,
        "periodic tables:\n{text}"
    );
    let up = &stats.channel("r").unwrap().up;
    assert!(up.offered >= 10, "{up:?}");
    assert_eq!(up.offered, up.delivered);
    assert_eq!(
        drain(&server, Duration::from_millis(50)).len() as u64,
        up.delivered
    );
}
