//! The documented namespace example, `scripts/tunnel-netns.sh`, run as docs/tunnel.md
//! says (root): two namespaces, the tunnel between them, TCP both ways over IPv4 and
//! IPv6 with every byte checksummed, and nothing left behind. Without root only the
//! refusal is checked.

use std::process::Command;

mod common;

use common::{repo, text};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn namespaces() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    text(&out.stdout)
}

#[test]
fn the_documented_tunnel_example_moves_tcp_both_ways_and_cleans_up() {
    let dir = std::env::temp_dir().join(format!("horde-tunnel-script-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new("sh")
        .arg("scripts/tunnel-netns.sh")
        .current_dir(repo())
        .env("HORDE", env!("CARGO_BIN_EXE_horde"))
        .env("DIR", &dir)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    if !is_root() {
        assert!(!out.status.success(), "{stdout}\n{stderr}");
        return;
    }
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("tunnel example: OK"), "{stdout}");
    assert_eq!(
        stdout.matches("\"checksum_ok\":true").count(),
        2,
        "both transfers, IPv4 and IPv6, arrive intact: {stdout}\n{stderr}"
    );
    let left = namespaces();
    assert!(
        !left.contains("htun-bus") && !left.contains("htun-srv"),
        "{left}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
