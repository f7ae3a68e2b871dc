//! Network namespaces for tests that need real interfaces and addresses: two namespaces
//! joined by one veth pair, deleted (with the pair) when the guard drops, even on panic.
//!
//! Needs root (`CAP_NET_ADMIN`, `CAP_SYS_ADMIN` for `setns`). Without root a test using it
//! is skipped with a notice, unless `CI` is set, in which case it fails.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Whether the test may run: root, or else a notice (and a failure under `CI`).
pub fn may_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(!ci, "CI is set but {test} is not running as root");
    eprintln!("{test}: skipped, needs root to create network namespaces (set CI=true to make this an error)");
    false
}

/// Run `ip` with `args`; panics with its error output if it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run ip: {e}"));
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Namespaces `a` and `b` joined by a veth pair `va` (in `a`, `a_addr`) and `vb` (in `b`,
/// `b_addr`); both deleted on drop.
pub struct Pair {
    pub a: String,
    pub b: String,
}

impl Pair {
    pub fn new(label: &str, a_addr: &str, b_addr: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let tag = format!("horde-{label}-{}-{nanos}", std::process::id());
        let p = Pair {
            a: format!("{tag}-a"),
            b: format!("{tag}-b"),
        };
        // From here on the guard exists, so a failure below still cleans up.
        ip(&["netns", "add", &p.a]);
        ip(&["netns", "add", &p.b]);
        let (a, b) = (p.a.as_str(), p.b.as_str());
        for ns in [a, b] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "-n", a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", b,
        ]);
        ip(&["-n", a, "addr", "add", a_addr, "dev", "va"]);
        ip(&["-n", b, "addr", "add", b_addr, "dev", "vb"]);
        ip(&["-n", a, "link", "set", "va", "up"]);
        ip(&["-n", b, "link", "set", "vb", "up"]);
        wait_until_up(&[(a, "va"), (b, "vb")]);
        p
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        delete_namespaces(&[&self.a, &self.b]);
    }
}

/// Waits (up to 5 s) until each `(namespace, device)` reports operational state UP:
/// carrier comes with both ends up, but the state follows a little later, and hosts
/// should begin with usable devices.
pub fn wait_until_up(devices: &[(&str, &str)]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    for (ns, dev) in devices {
        loop {
            let out = Command::new("ip")
                .args(["-n", ns, "-o", "link", "show", "dev", dev])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&out.stdout).contains("state UP") {
                break;
            }
            assert!(Instant::now() < deadline, "{dev} in {ns} never came up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Deletes the namespaces (which destroys their veths); says so if one cannot be.
pub fn delete_namespaces(names: &[&str]) {
    for ns in names {
        let ok = Command::new("ip")
            .args(["netns", "del", ns])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("netns: could not delete namespace {ns}");
        }
    }
}

/// Moves the calling thread into network namespace `ns`: sockets it opens from then on,
/// and threads it starts, live there.
pub fn enter(ns: &str) {
    let path = format!("/var/run/netns/{ns}");
    let file = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    // SAFETY: a valid namespace descriptor; only this thread changes namespace.
    let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
}

/// Runs `f` on a new thread inside namespace `ns`, with a current-thread tokio runtime
/// created there.
pub fn in_netns<T, F>(
    ns: &str,
    f: impl FnOnce() -> F + Send + 'static,
) -> std::thread::JoinHandle<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = T>,
{
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(f())
    })
}
