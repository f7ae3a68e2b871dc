//! Ctrl-C ends `run_until_with` cleanly. Alone in its binary: SIGINT is process-wide.

mod common;

use std::time::{Duration, Instant};

use common::*;
use horde_emu::{run_until_with, EmulatorConfig};

#[test]
fn sigint_stops_an_unbounded_run_and_restores_the_previous_action() {
    let server = udp();
    let text = format!(
        "[[channels]]\nname = \"c\"\nlisten = \"127.0.0.1:0\"\nforward_to = \"{}\"\nup = {{}}\n",
        server.local_addr().unwrap()
    );
    let config = EmulatorConfig::from_toml(&text, "c.toml", std::path::Path::new(".")).unwrap();
    let before = sigint_disposition();
    let killer = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: sends SIGINT to this process; run_until_with has installed its handler.
        unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
    });
    let started = Instant::now();
    let mut out = Vec::new();
    let stats = run_until_with(&config, None, Duration::from_secs(10), &mut out).unwrap();
    killer.join().unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(stats.channel("c").is_some());
    assert!(String::from_utf8(out).unwrap().contains("p99 us"));

    // The disposition from before the run is back in place (the default, or "ignore"
    // when a shell started this test in the background).
    assert_eq!(sigint_disposition(), before);
}

fn sigint_disposition() -> libc::sighandler_t {
    // SAFETY: queries the current SIGINT action without changing it.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGINT, std::ptr::null(), &mut old);
        old.sa_sigaction
    }
}
