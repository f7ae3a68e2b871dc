//! `horde tunnel` end to end, in network namespaces this file creates (root; without
//! root only the refusal is checked):
//!
//! - a 5 MB TCP download through the tunnel over two links emulated by `horde shell`
//!   (5 % loss on one), while one link goes down and comes back and the client's
//!   address on the other changes; then an IPv6 transfer that only the changed address
//!   can carry;
//! - the same download while the tunnel's UDP sockets and both TUN devices are flooded
//!   with malformed and foreign packets, which are dropped and counted.
//!
//! They run one at a time (a lock): they move real traffic on a small machine.

use horde_analyze::quality::{e_model_mos, g_model_mos};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

const DOWNLOAD: u64 = 5_000_000;

fn horde_bin() -> &'static str {
    env!("CARGO_BIN_EXE_horde")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn run(args: &[&str]) -> Output {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// A network namespace, deleted (with whatever still runs in it) on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("hdt-{}-{tag}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run(&["ip", "netns", "add", &name]);
        run(&["ip", "-n", &name, "link", "set", "lo", "up"]);
        Netns(name)
    }

    fn ip(&self, args: &[&str]) {
        let mut full = vec!["ip", "-n", &self.0];
        full.extend_from_slice(args);
        run(&full);
    }

    /// `horde ARGS` inside the namespace.
    fn horde(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, horde_bin()]).args(args);
        c
    }
}

impl Netns {
    fn pids(&self) -> Vec<libc::pid_t> {
        Command::new("ip")
            .args(["netns", "pids", &self.0])
            .output()
            .map(|o| {
                text(&o.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Netns {
    /// SIGTERM first, so that a `horde shell` still running (after a failed assertion)
    /// deletes its own namespace; SIGKILL for what is left after two seconds.
    fn drop(&mut self) {
        for signal in [libc::SIGTERM, libc::SIGKILL] {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                // SAFETY: signals a process in the namespace this test created.
                unsafe { libc::kill(pid, signal) };
            }
            let until = Instant::now() + Duration::from_secs(2);
            while !self.pids().is_empty() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A fresh directory for keys and configuration files, removed on drop (also when an
/// assertion fails).
struct Workdir(PathBuf);

impl std::ops::Deref for Workdir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Workdir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn workdir(tag: &str) -> Workdir {
    let dir = std::env::temp_dir().join(format!("horde-tunnel-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Workdir(dir)
}

/// Write a key pair to `dir/name`; returns the public key.
fn keygen(dir: &Path, name: &str) -> String {
    let out = run(&[
        horde_bin(),
        "keygen",
        "--out",
        dir.join(name).to_str().unwrap(),
    ]);
    text(&out.stdout).trim().to_string()
}

fn server_toml(client_pub: &str) -> String {
    format!(
        r#"key_file = "server.key"
mtu = 1380
[tun]
name = "hdt0"
addresses = ["10.77.0.1/24", "fd77::1/64"]
[[interfaces]]
bind = "0.0.0.0:7700"
[[clients]]
name = "bus-1"
key = "{client_pub}"
addresses = ["10.77.0.2/32", "fd77::2/128"]
"#
    )
}

/// Start `horde tunnel server` in `ns`; returns once its device is up.
fn start_server(ns: &Netns, dir: &Path) -> Child {
    // The server's log is kept beside the run's files, for when a run fails.
    let log = std::fs::File::create(dir.join("server.err")).ok();
    let (child, line) = start_json(ns, "server", &dir.join("server.toml"), log);
    assert!(line.contains("mtu 1380"), "{line}");
    child
}

/// Start `horde tunnel ROLE FILE --json` in `ns`; returns once its device is up, with
/// the line that said so (its progress goes to stderr, into `log` if given).
fn start_json(ns: &Netns, role: &str, file: &Path, log: Option<std::fs::File>) -> (Child, String) {
    let mut child = ns
        .horde(&["tunnel", role, file.to_str().unwrap(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = first_line_with(child.stderr.take().unwrap(), "device hdt0 up", log);
    (child, line)
}

/// Read `from` on a thread until a line contains `want` (panics after 20 s); the rest
/// of the stream is drained in the background, into `log` if given.
fn first_line_with(
    from: impl Read + Send + 'static,
    want: &str,
    mut log: Option<std::fs::File>,
) -> String {
    let (tx, rx) = mpsc::channel();
    let want = want.to_string();
    std::thread::spawn(move || {
        let mut found = false;
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if let Some(f) = log.as_mut() {
                let _ = writeln!(f, "{line}");
            }
            if !found && line.contains(&want) {
                found = true;
                let _ = tx.send(line);
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the expected line did not come")
}

/// Ctrl-C to a child.
fn interrupt(child: &Child) {
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
}

/// Stop a tunnel with Ctrl-C and parse its JSON report.
fn stop(child: Child) -> serde_json::Value {
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "tunnel failed: {}", text(&out.stderr));
    report(&text(&out.stdout))
}

fn report(stdout: &str) -> serde_json::Value {
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON report in {stdout:?}"));
    serde_json::from_str(line).unwrap()
}

/// A `horde flow` TCP server in `ns` on `listen`, ending after `count` transfers.
fn flow_server(ns: &Netns, listen: &str, count: u32) -> Child {
    ns.horde(&[
        "flow",
        "server",
        "--tcp-only",
        "--listen",
        listen,
        "--count",
        &count.to_string(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap()
}

/// A `horde flow` transfer of `bytes` from namespace `ns` to `to`; returns the client's
/// JSON after checking that every byte arrived intact.
fn transfer(ns: &Netns, to: &str, bytes: u64) -> serde_json::Value {
    let out = ns
        .horde(&[
            "flow",
            "client",
            "--connect",
            to,
            "--bytes",
            &bytes.to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "transfer to {to}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let json = report(&text(&out.stdout));
    assert_eq!(json["bytes"], bytes, "{json}");
    assert_eq!(json["checksum_ok"], true, "{json}");
    json
}

fn count(json: &serde_json::Value, path: &[&str]) -> u64 {
    let mut v = json;
    for p in path {
        v = &v[*p];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("no {path:?} in {json}"))
}

/// A work directory with the server's and the client's keys and the server's file
/// (with `extra` appended); returns the two public keys.
fn server_and_client_keys(tag: &str, extra: &str) -> (Workdir, String, String) {
    let dir = workdir(tag);
    let srv_pub = keygen(&dir, "server.key");
    let bus_pub = keygen(&dir, "client.key");
    std::fs::write(
        dir.join("server.toml"),
        format!("{}{extra}", server_toml(&bus_pub)),
    )
    .unwrap();
    (dir, srv_pub, bus_pub)
}

/// A client's file for the two veth links of [`veth_pair_of_links`], with its tunnel
/// `addresses` (a TOML array) and `extra` appended.
fn veth_client_toml(srv_pub: &str, addresses: &str, extra: &str) -> String {
    format!(
        r#"key_file = "client.key"
peer_key = "{srv_pub}"
[tun]
name = "hdt0"
addresses = {addresses}
[[channels]]
bind = "192.168.71.2:0"
remote = "192.168.71.1:7700"
[[channels]]
bind = "192.168.72.2:0"
remote = "192.168.72.1:7700"
{extra}"#
    )
}

fn root_or_refusal_checked() -> bool {
    if is_root() {
        return true;
    }
    let dir = workdir("noroot");
    let pubkey = keygen(&dir, "client.key");
    std::fs::write(dir.join("server.toml"), server_toml(&pubkey)).unwrap();
    let out = Command::new(horde_bin())
        .args([
            "tunnel",
            "server",
            dir.join("server.toml").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("needs root"),
        "{}",
        text(&out.stderr)
    );
    eprintln!("not root: checked the refusal only");
    false
}

/// The shell's script: write the client's file, start the client and two flow servers
/// (IPv4 and IPv6 on the tunnel addresses), say `ready`, and once both transfers are in
/// and the test has written `$DIR/done` (both senders have their answers), stop the
/// client (its JSON report goes to `$DIR/client.json`).
const SHELL_SCRIPT: &str = r#"set -e
o1=$(echo "$HORDE_SHELL_LINK1" | awk -F. '{print $1"."$2"."$3"."($4-1)}')
cat > "$DIR/client.toml" <<EOF
key_file = "client.key"
peer_key = "$SRV_PUB"
[tun]
name = "hdt0"
addresses = ["10.77.0.2/24", "fd77::2/64"]
[[channels]]
bind = "0.0.0.0:0"
device = "link0"
remote = "$HORDE_SHELL_HOST:7700"
[[channels]]
bind = "0.0.0.0:0"
device = "link1"
remote = "$o1:7700"
EOF
# At 5.5 s link 1's address moves out of its /30 (see `change_address` below).
k=${HORDE_SHELL_NETNS#horde-shell-}
( sleep 5.5
  ip addr add 10.99.0.6/32 dev link1
  ip addr del "$HORDE_SHELL_LINK1/30" dev link1
  ip route add "$o1/32" dev link1 src 10.99.0.6
  ip -n "$SRV_NETNS" route add 10.99.0.6/32 dev "hs${k}h1"
  echo moved > "$DIR/moved" ) &
"$HORDE" tunnel client "$DIR/client.toml" --json > "$DIR/client.json" 2> "$DIR/client.err" &
cpid=$!
# The device exists a moment before its addresses: wait for both, or the flow servers
# cannot bind them.
i=0
until ip -o addr show dev hdt0 2>/dev/null | grep -q 'fd77::2/' &&
      ip -o addr show dev hdt0 | grep -q '10.77.0.2/'; do
  i=$((i+1)); [ $i -lt 200 ] || { cat "$DIR/client.err"; exit 1; }; sleep 0.05
done
"$HORDE" flow server --tcp-only --listen 10.77.0.2:5201 --count 1 > "$DIR/flow4.json" 2>/dev/null &
f4=$!
"$HORDE" flow server --tcp-only --listen '[fd77::2]:5202' --count 1 > "$DIR/flow6.json" 2>/dev/null &
f6=$!
sleep 0.3
echo ready
wait $f4
wait $f6
# The flow servers are done, but their answers (count and checksum) may still be on
# their way back through the tunnel, or need a TCP retransmission: stop the client only
# once the test has both answers.
i=0
until [ -e "$DIR/done" ]; do
  i=$((i+1)); [ $i -lt 2400 ] || { echo "no done from the test" >&2; exit 1; }; sleep 0.05
done
kill -INT $cpid
wait $cpid
"#;

// The address change (in the script, which runs in the shell's mount namespace, where
// its namespace can be named): link 1's namespace-side address moves to 10.99.0.6,
// outside the link's /30, so the client's datagrams on that link come from a new
// address, as after a carrier's re-assignment or a NAT rebinding. The server side gets
// a route back to it.

#[test]
fn a_download_survives_loss_an_outage_and_an_address_change() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let (dir, srv_pub, _) = server_and_client_keys("links", "");
    let srv = Netns::new("srv");
    let server = start_server(&srv, &dir);
    // SYNs from this side carry MSS 1460, which the server must clamp to 1340.
    srv.ip(&[
        "route",
        "replace",
        "10.77.0.0/24",
        "dev",
        "hdt0",
        "advmss",
        "1460",
    ]);

    // Link 0 goes down at 4 s for 1.5 s and comes back, then down again from 9 s on;
    // link 1 loses 5 % of packets and changes address at 5.5 s.
    let started = Instant::now();
    let mut shell = srv
        .horde(&[
            "shell",
            "--link",
            "rate=6mbit,delay=10ms,down_at=4s:1500ms,down_at=9s:120s",
            "--link",
            "rate=6mbit,delay=10ms,loss=0.05",
            "--",
            "sh",
            "-c",
            SHELL_SCRIPT,
        ])
        .env("HORDE", horde_bin())
        .env("DIR", &dir)
        .env("SRV_PUB", &srv_pub)
        .env("SRV_NETNS", &srv.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(shell.stdout.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    assert_eq!(ready, "ready", "client did not come up: {ready}");
    let download = transfer(&srv, "10.77.0.2:5201", DOWNLOAD);
    eprintln!(
        "5 MB through the tunnel in {:.1} s ({:.2} Mbit/s)",
        download["seconds"].as_f64().unwrap(),
        download["goodput_mbps"].as_f64().unwrap()
    );
    // From 9 s link 0 is down for good: this transfer has only link 1's new address.
    let at = started + Duration::from_millis(9500);
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
    assert!(
        dir.join("moved").exists(),
        "the address change did not happen"
    );
    transfer(&srv, "[fd77::2]:5202", 300_000);
    std::fs::write(dir.join("done"), "").unwrap();

    let out = shell.wait_with_output().unwrap();
    assert!(out.status.success(), "shell: {}", text(&out.stderr));
    let client = report(&std::fs::read_to_string(dir.join("client.json")).unwrap());
    let server = stop(server);
    eprintln!("client: {client}\nserver: {server}");
    // The session itself survived: no reconnection, no replacement.
    assert_eq!(count(&client, &["reconnects"]), 0, "{client}");
    assert_eq!(count(&server, &["sessions_replaced"]), 0, "{server}");
    assert!(
        count(&server, &["counters", "mss_clamped"]) >= 1,
        "{server}"
    );
    // Every packet the server wrote came from the client, and the other way round.
    assert!(
        count(&client, &["counters", "tun_out_bytes"]) >= DOWNLOAD,
        "{client}"
    );
    assert_eq!(count(&server, &["counters", "peer_spoofed"]), 0);
    assert_eq!(count(&server, &["counters", "peer_malformed"]), 0);
    assert_eq!(count(&client, &["counters", "peer_malformed"]), 0);
}

/// Two namespaces joined by two veth pairs (192.168.71.0/24 and 192.168.72.0/24).
fn veth_pair_of_links(bus: &Netns, srv: &Netns) {
    for i in 1..=2 {
        veth(bus, &format!("hdtb{i}"), srv, i);
    }
}

/// A veth pair from `bus` (device `dev`, 192.168.7`i`.2/24) to `srv` (device `hdts`i,
/// 192.168.7`i`.1/24).
fn veth(bus: &Netns, dev: &str, srv: &Netns, i: u32) {
    let s = format!("hdts{i}");
    run(&[
        "ip", "link", "add", dev, "netns", &bus.0, "type", "veth", "peer", "name", &s, "netns",
        &srv.0,
    ]);
    bus.ip(&["addr", "add", &format!("192.168.7{i}.2/24"), "dev", dev]);
    srv.ip(&["addr", "add", &format!("192.168.7{i}.1/24"), "dev", &s]);
    bus.ip(&["link", "set", dev, "up"]);
    srv.ip(&["link", "set", &s, "up"]);
}

/// Run `f` on a thread of its own inside namespace `ns`.
fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: moves only this thread, into a namespace this test created.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
}

/// A small deterministic generator for garbage.
struct Garbage(u64);

impl Garbage {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Send `n` malformed and foreign datagrams to `to`: random bytes, fake transport
/// packets for unknown sessions, initiations of the right size with garbage inside.
fn udp_flood(to: std::net::SocketAddr, n: usize, seed: u64) -> usize {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    let mut g = Garbage(seed);
    let mut sent = 0;
    for i in 0..n {
        let packet = match i % 3 {
            0 => {
                let len = (g.next() % 1400) as usize + 1;
                g.bytes(len)
            }
            1 => {
                let len = 32 + (g.next() % 1000) as usize;
                let mut p = g.bytes(len);
                p[..4].copy_from_slice(&[4, 0, 0, 0]);
                p
            }
            _ => {
                let mut p = g.bytes(148);
                p[..4].copy_from_slice(&[1, 0, 0, 0]);
                p
            }
        };
        if s.send_to(&packet, to).is_ok() {
            sent += 1;
        }
        if i % 64 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    sent
}

/// An IPv4 UDP packet from `src` to `dst` with a correct header checksum.
fn ipv4_udp(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0x45, 0, 0, 36, 0, 0, 0x40, 0, 64, 17, 0, 0];
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    let mut sum: u32 = p
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    p[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    p.extend_from_slice(&[0x30, 0x39, 0, 9, 0, 16, 0, 0]);
    p.extend_from_slice(b"foreign!");
    p
}

/// Write `packets` into the TUN device `dev` from the kernel's side (a packet socket),
/// so that the tunnel reads them as if the kernel had routed them there.
fn tun_inject(dev: &str, packets: &[Vec<u8>], rounds: usize) -> usize {
    const ETH_P_IP: u16 = 0x0800;
    // SAFETY: plain socket and if_nametoindex calls; the fd is closed below.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM,
            i32::from(ETH_P_IP.to_be()),
        )
    };
    assert!(
        fd >= 0,
        "packet socket: {}",
        std::io::Error::last_os_error()
    );
    let name = std::ffi::CString::new(dev).unwrap();
    // SAFETY: a valid C string.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    assert!(index > 0, "no device {dev}");
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = ETH_P_IP.to_be();
    addr.sll_ifindex = index as i32;
    let mut sent = 0;
    for r in 0..rounds {
        for p in packets {
            // SAFETY: buffer and address live for the call.
            let n = unsafe {
                libc::sendto(
                    fd,
                    p.as_ptr().cast(),
                    p.len(),
                    0,
                    (&addr as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            if n >= 0 {
                sent += 1;
            }
        }
        if r % 16 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    sent
}

/// Malformed packets for a TUN device: a bad version, a truncated header, a bad
/// checksum, a length that disagrees with the packet.
fn malformed_ip() -> Vec<Vec<u8>> {
    let good = ipv4_udp([10, 77, 0, 2], [10, 77, 0, 1]);
    let mut bad_sum = good.clone();
    bad_sum[10] ^= 0xff;
    let mut bad_len = good.clone();
    bad_len.push(0);
    vec![
        vec![0x50; 40],
        good[..12].to_vec(),
        bad_sum,
        bad_len,
        vec![0x46; 20],
    ]
}

#[test]
fn malformed_and_foreign_packets_are_dropped_counted_and_harmless() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let (dir, srv_pub, _) = server_and_client_keys("flood", "");
    std::fs::write(
        dir.join("client.toml"),
        veth_client_toml(&srv_pub, r#"["10.77.0.2/24"]"#, ""),
    )
    .unwrap();
    let (bus, srv) = (Netns::new("bus"), Netns::new("srv"));
    veth_pair_of_links(&bus, &srv);
    let server = start_server(&srv, &dir);
    let (client, up) = start_json(&bus, "client", &dir.join("client.toml"), None);
    // "... channels on 192.168.71.2:PORT, 192.168.72.2:PORT"
    let client_socks: Vec<std::net::SocketAddr> = up
        .rsplit("channels on ")
        .next()
        .unwrap()
        .split(", ")
        .map(|a| a.parse().unwrap())
        .collect();
    let (first_sock, second_sock) = (client_socks[0], client_socks[1]);
    let mut flow = bus
        .horde(&[
            "flow",
            "server",
            "--tcp-only",
            "--listen",
            "10.77.0.2:5201",
            "--count",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));

    const N: usize = 3000;
    let floods = vec![
        in_netns(&bus.0, || {
            udp_flood("192.168.71.1:7700".parse().unwrap(), N, 1)
        }),
        in_netns(&bus.0, || {
            udp_flood("192.168.72.1:7700".parse().unwrap(), N, 2)
        }),
        in_netns(&srv.0, move || udp_flood(first_sock, N, 3)),
        in_netns(&srv.0, move || udp_flood(second_sock, N, 4)),
        // The server's TUN side: malformed packets, and packets for a tunnel address
        // no client owns (routed there by the kernel).
        in_netns(&srv.0, || tun_inject("hdt0", &malformed_ip(), 400)),
        in_netns(&srv.0, || {
            let s = UdpSocket::bind("10.77.0.1:0").unwrap();
            (0..500)
                .filter(|_| s.send_to(b"nobody", "10.77.0.99:9").is_ok())
                .count()
        }),
        // The client's TUN side: malformed packets, and packets from an address that
        // is not the client's, which the server must refuse.
        in_netns(&bus.0, || tun_inject("hdt0", &malformed_ip(), 400)),
        in_netns(&bus.0, || {
            tun_inject("hdt0", &[ipv4_udp([10, 77, 0, 50], [10, 77, 0, 1])], 500)
        }),
    ];
    let download = transfer(&srv, "10.77.0.2:5201", DOWNLOAD);
    let sent: Vec<usize> = floods.into_iter().map(|f| f.join().unwrap()).collect();
    eprintln!("sent {sent:?}; download {download}");
    assert!(sent.iter().all(|&n| n > 0), "{sent:?}");
    flow.wait().unwrap();

    let client = stop(client);
    let server = stop(server);
    eprintln!("client: {client}\nserver: {server}");
    for (who, r) in [("client", &client), ("server", &server)] {
        // The data sockets' kernel filter drops what can belong to no session before
        // Horde reads it; the rest the secure layer refuses.
        assert!(
            count(r, &["dropped_by_secure_layer"]) + count(r, &["kernel_dropped"]) >= N as u64,
            "{who}: not every garbage datagram counted: {r}"
        );
        assert!(count(r, &["counters", "tun_malformed"]) > 0, "{who}: {r}");
        assert_eq!(count(r, &["reconnects"]), 0, "{who}: {r}");
    }
    assert!(
        count(&server, &["counters", "tun_no_route"]) > 0,
        "{server}"
    );
    assert!(
        count(&server, &["counters", "peer_spoofed"]) > 0,
        "{server}"
    );
    assert_eq!(count(&server, &["sessions_replaced"]), 0, "{server}");
}

#[test]
fn a_server_routes_two_clients_by_their_prefixes() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let dir = workdir("two");
    let srv_pub = keygen(&dir, "server.key");
    let one = keygen(&dir, "one.key");
    let two = keygen(&dir, "two.key");
    std::fs::write(
        dir.join("server.toml"),
        format!(
            r#"key_file = "server.key"
[tun]
name = "hdt0"
addresses = ["10.77.0.1/24", "fd77::1/64"]
[[interfaces]]
bind = "0.0.0.0:7700"
[[clients]]
name = "bus-1"
key = "{one}"
addresses = ["10.77.0.2/32", "fd77::2/128"]
[[clients]]
name = "bus-2"
key = "{two}"
addresses = ["10.77.0.3/32", "fd77::3/128"]
"#
        ),
    )
    .unwrap();
    let srv = Netns::new("srv2");
    let mut clients = Vec::new();
    // (veth subnet, name, key file, last byte of the tunnel address)
    for (i, name, key, last) in [(1, "one", "one.key", 2), (3, "two", "two.key", 3)] {
        let ns = Netns::new(name);
        veth(&ns, &format!("hdtc{i}"), &srv, i);
        let file = dir.join(format!("{name}.toml"));
        std::fs::write(
            &file,
            format!(
                r#"key_file = "{key}"
peer_key = "{srv_pub}"
[tun]
name = "hdt0"
addresses = ["10.77.0.{last}/24", "fd77::{last}/64"]
[[channels]]
bind = "192.168.7{i}.2:0"
remote = "192.168.7{i}.1:7700"
"#
            ),
        )
        .unwrap();
        clients.push((ns, file));
    }
    let server = start_server(&srv, &dir);
    let mut running = Vec::new();
    for (ns, file) in &clients {
        running.push(start_json(ns, "client", file, None).0);
    }
    // Each client's own address, over IPv4 and IPv6, reaches that client.
    let mut servers = Vec::new();
    for ((ns, _), last) in clients.iter().zip([2, 3]) {
        for listen in [
            format!("10.77.0.{last}:5201"),
            format!("[fd77::{last}]:5201"),
        ] {
            servers.push(flow_server(ns, &listen, 1));
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    for to in [
        "10.77.0.2:5201",
        "10.77.0.3:5201",
        "[fd77::2]:5201",
        "[fd77::3]:5201",
    ] {
        transfer(&srv, to, 1_000_000);
    }
    for mut s in servers {
        assert!(s.wait().unwrap().success());
    }
    let reports: Vec<serde_json::Value> = running.into_iter().map(stop).collect();
    let server = stop(server);
    for r in &reports {
        assert!(count(r, &["counters", "tun_out_bytes"]) >= 2_000_000, "{r}");
    }
    assert_eq!(count(&server, &["counters", "peer_spoofed"]), 0, "{server}");
    assert_eq!(count(&server, &["counters", "tun_no_route"]), 0, "{server}");
}

/// `horde status FILE --json` for a tunnel's status file once `ready` accepts it (panics
/// after 15 s, showing the last snapshot).
fn status_when(file: &Path, ready: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut last = String::new();
    while Instant::now() < deadline {
        let out = Command::new(horde_bin())
            .args(["status", file.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        if out.status.success() {
            last = text(&out.stdout);
            let v: serde_json::Value = serde_json::from_str(&last).unwrap();
            if ready(&v) {
                return v;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} never got there: {last}", file.display());
}

fn generation(peer: &serde_json::Value, which: &str) -> u64 {
    peer["keys"][which]
        .as_u64()
        .unwrap_or_else(|| panic!("no keys.{which} in {peer}"))
}

/// Start `horde tunnel ROLE DIR/ROLE.toml --status STATUS` in `ns`, its log in
/// `DIR/ROLE.err`; returns once its device is up.
fn start_with_status(ns: &Netns, dir: &Path, role: &str, status: &Path) -> Child {
    let mut child = ns
        .horde(&[
            "tunnel",
            role,
            dir.join(format!("{role}.toml")).to_str().unwrap(),
            "--status",
            status.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join(format!("{role}.err"))).unwrap())
        .spawn()
        .unwrap();
    first_line_with(child.stdout.take().unwrap(), "device hdt0 up", None);
    child
}

#[test]
fn tunnel_status_shows_clients_channels_and_key_rotations() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    // Keys rotate every 0.3 s and keepalives go out every 0.1 s, so an idle tunnel
    // rotates several times within a second or two.
    let fast = "[session]\nkeepalive_ms = 100\n[rekey]\nafter_s = 0.3\n";
    let (dir, srv_pub, bus_pub) = server_and_client_keys("status", fast);
    std::fs::write(
        dir.join("client.toml"),
        veth_client_toml(&srv_pub, r#"["10.77.0.2/24", "fd77::2/64"]"#, fast),
    )
    .unwrap();
    let (bus, srv) = (Netns::new("sbus"), Netns::new("ssrv"));
    veth_pair_of_links(&bus, &srv);
    let (srv_status, bus_status) = (dir.join("server.status"), dir.join("client.status"));
    let mut server = start_with_status(&srv, &dir, "server", &srv_status);
    let mut client = start_with_status(&bus, &dir, "client", &bus_status);

    // The server's view: its client by name and key, with both channels it accepted.
    let keyed = |v: &serde_json::Value| {
        v["peers"][0]["keys"]["generation"].is_u64()
            && v["peers"][0]["channels"].as_array().map(Vec::len) == Some(2)
    };
    let first = status_when(&srv_status, keyed);
    assert_eq!(first["role"], "tunnel server", "{first}");
    assert_eq!(first["public_key"], srv_pub.as_str(), "{first}");
    let peer = &first["peers"][0];
    assert_eq!(peer["name"], "bus-1", "{first}");
    assert_eq!(peer["key"], bus_pub.as_str(), "{first}");
    assert_eq!(peer["closed"], false, "{first}");
    // Both ends' key generations climb while the tunnel idles (keepalives only).
    let (ours, theirs) = (
        generation(peer, "generation"),
        generation(peer, "peer_generation"),
    );
    let later = status_when(&srv_status, |v| {
        let p = &v["peers"][0];
        p["keys"]["generation"].as_u64() >= Some(ours + 2)
            && p["keys"]["peer_generation"].as_u64() >= Some(theirs + 2)
    });
    let age = later["peers"][0]["keys"]["age_s"].as_f64().unwrap();
    assert!(
        age < 1.0,
        "keys older than their 0.3 s lifetime allows: {later}"
    );

    // The client's view: the server as its one peer, channel endpoints, rotating keys.
    let c = status_when(&bus_status, |v| {
        v["peers"][0]["keys"]["generation"].as_u64() >= Some(2)
    });
    assert_eq!(c["role"], "tunnel client", "{c}");
    assert_eq!(c["peers"][0]["key"], srv_pub.as_str(), "{c}");
    let endpoints: Vec<&str> = c["peers"][0]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ch| ch["endpoint"].as_str().unwrap())
        .collect();
    assert_eq!(endpoints, ["192.168.71.1:7700", "192.168.72.1:7700"], "{c}");

    // The text view.
    let out = run(&[horde_bin(), "status", srv_status.to_str().unwrap()]);
    let view = text(&out.stdout);
    assert!(view.starts_with("horde tunnel server (pid "), "{view}");
    assert!(
        view.contains(&format!("peer: {bus_pub}\n  name: bus-1\n")),
        "{view}"
    );
    assert!(view.contains("  keys: generation "), "{view}");
    assert!(view.contains("next rotation in "), "{view}");

    for child in [&mut client, &mut server] {
        interrupt(child);
        assert!(child.wait().unwrap().success());
    }
}

/// The shell's script for the ingress test: the client over two emulated links, a
/// flow server on its tunnel address, `ready`, and a clean stop once `$DIR/done` exists.
const INGRESS_SCRIPT: &str = r#"set -e
o1=$(echo "$HORDE_SHELL_LINK1" | awk -F. '{print $1"."$2"."$3"."($4-1)}')
cat > "$DIR/client.toml" <<EOF
key_file = "client.key"
peer_key = "$SRV_PUB"
[tun]
name = "hdt0"
addresses = ["10.77.0.2/24"]
[[channels]]
bind = "0.0.0.0:0"
device = "link0"
remote = "$HORDE_SHELL_HOST:7700"
[[channels]]
bind = "0.0.0.0:0"
device = "link1"
remote = "$o1:7700"
EOF
"$HORDE" tunnel client "$DIR/client.toml" --json > "$DIR/client.json" 2> "$DIR/client.err" &
cpid=$!
# The device exists a moment before its address: wait for the address.
i=0
until ip -o addr show dev hdt0 2>/dev/null | grep -q '10.77.0.2/'; do
  i=$((i+1)); [ $i -lt 200 ] || { cat "$DIR/client.err"; exit 1; }; sleep 0.05
done
"$HORDE" flow server --tcp-only --listen 10.77.0.2:5201 > /dev/null 2> "$DIR/flow.err" &
"$HORDE" flow server --tcp-only --workload --listen 10.77.0.2:5202 > /dev/null 2> "$DIR/workload.err" &
i=0
until ss -ltn | grep -q '10.77.0.2:5201 ' && ss -ltn | grep -q '10.77.0.2:5202 '; do
  i=$((i+1)); [ $i -lt 200 ] || { cat "$DIR/flow.err" "$DIR/workload.err"; exit 1; }; sleep 0.05
done
echo ready
i=0
until [ -e "$DIR/done" ]; do
  i=$((i+1)); [ $i -lt 1200 ] || exit 1; sleep 0.05
done
kill -INT $cpid
wait $cpid
"#;

/// Median ping RTT (ms) from `ns` to `to`.
fn ping_median_ms(ns: &Netns, to: &str, count: u32) -> f64 {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, "ping", "-n", "-i", "0.2", "-W", "2"])
        .args(["-c", &count.to_string(), to])
        .output()
        .expect("ping (iputils-ping) is installed");
    let mut rtts: Vec<f64> = text(&out.stdout)
        .lines()
        .filter_map(|l| l.split("time=").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert!(!rtts.is_empty(), "no ping answered: {}", text(&out.stdout));
    rtts.sort_by(f64::total_cmp);
    rtts[rtts.len() / 2]
}

/// Runs `measure` in the server's namespace while a tunnel whose server's ingress queue
/// is `qdisc` connects it to a vehicle behind two 4 Mbit/s, 15 ms links, with a bulk
/// flow server (port 5201) and a workload flow server (5202, docs/flows.md) on the
/// vehicle's tunnel address 10.77.0.2; returns what it returned and the tunnel server's
/// report.
fn through_ingress<T>(
    qdisc: &str,
    tag: &str,
    measure: impl FnOnce(&Netns, &Path) -> T,
) -> (T, serde_json::Value) {
    let (dir, srv_pub, _) = server_and_client_keys(&format!("{tag}-{qdisc}"), "");
    // Top-level keys go before the file's tables. Each channel is paced below its link's
    // rate with a short bucket, so the links' buffers stay short and the backlog is the
    // ingress queue's (the default 150 ms bucket bursts into them after any pause).
    let file = dir.join("server.toml");
    let body = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        format!("qdisc = \"{qdisc}\"\ncongestion = {{ kind = \"cbr\", kbps = 3600, burst_ms = 5 }}\n{body}"),
    )
    .unwrap();
    let srv = Netns::new(&format!("q{qdisc}"));
    let server = start_server(&srv, &dir);
    let mut shell = srv
        .horde(&[
            "shell",
            "--link",
            "rate=4mbit,delay=15ms,buffer=60kb",
            "--link",
            "rate=4mbit,delay=15ms,buffer=60kb",
            "--",
            "sh",
            "-c",
            INGRESS_SCRIPT,
        ])
        .env("HORDE", horde_bin())
        .env("DIR", &dir)
        .env("SRV_PUB", &srv_pub)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(shell.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let measured = measure(&srv, &dir);
    std::fs::write(dir.join("done"), "").unwrap();
    let out = shell.wait_with_output().unwrap();
    assert!(out.status.success(), "shell: {}", text(&out.stderr));
    (measured, stop(server))
}

/// A bulk transfer of `bytes` from the server's namespace to the vehicle through the
/// tunnel, with Cubic; its report once done.
fn start_download(srv: &Netns, bytes: u64) -> Child {
    srv.horde(&[
        "flow",
        "client",
        "--connect",
        "10.77.0.2:5201",
        "--bytes",
        &bytes.to_string(),
        "--cc",
        "cubic",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

fn download_report(download: Child) -> serde_json::Value {
    let out = download.wait_with_output().unwrap();
    assert!(out.status.success(), "download: {}", text(&out.stderr));
    report(&text(&out.stdout))
}

/// Idle and loaded ping RTT (ms) through a tunnel whose server's ingress queue is
/// `qdisc`, with a Cubic bulk download from the server to the vehicle as the load.
fn ping_under_download(qdisc: &str) -> (f64, f64) {
    let ((idle, loaded, flow), server) = through_ingress(qdisc, "ingress", |srv, _| {
        let idle = ping_median_ms(srv, "10.77.0.2", 10);
        let download = start_download(srv, 5_000_000);
        // Let Cubic fill whatever queue it finds, then measure under the load.
        std::thread::sleep(Duration::from_secs(3));
        let loaded = ping_median_ms(srv, "10.77.0.2", 15);
        (idle, loaded, download_report(download))
    });
    eprintln!(
        "{qdisc}: ping idle {idle:.1} ms, under a download {loaded:.1} ms; download {:.2} Mbit/s; ingress drops {}",
        flow["goodput_mbps"].as_f64().unwrap_or(0.0),
        count(&server, &["counters", "ingress_dropped"])
    );
    (idle, loaded)
}

/// CHAP (and fq_codel) at the tunnel's ingress keep a ping next to a bulk download near
/// its idle RTT; FIFO queues it behind the download.
#[test]
fn chap_or_fq_codel_at_the_ingress_keep_a_ping_near_idle_under_a_download() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let (fifo_idle, fifo_loaded) = ping_under_download("fifo");
    let fifo_excess = fifo_loaded - fifo_idle;
    for qdisc in ["chap", "fq_codel"] {
        let (idle, loaded) = ping_under_download(qdisc);
        let excess = loaded - idle;
        // The goal: within 20 ms of idle (8 ms measured; 18 ms with the stream's
        // default water marks behind the discipline).
        assert!(
            excess < 20.0,
            "{qdisc}: {loaded:.1} ms under load against {idle:.1} ms idle"
        );
        assert!(
            fifo_excess > 50.0 && fifo_excess > 2.0 * excess,
            "FIFO should queue the ping behind the download: {fifo_loaded:.1} ms against \
             {fifo_idle:.1} ms idle, {qdisc} {loaded:.1} against {idle:.1}"
        );
    }
}

/// A bus's riders through the tunnel (CHAP §6.8, carried to the tunnel's ingress): a
/// game (44 B up, 72 B back every 40 ms) and a call (200 B each way every 20 ms) next to
/// a 4 MB Cubic download and ten 300 kB P2P transfers, all from the server's side to
/// the vehicle. The interactive flows start once the downloads have filled whatever
/// queue they find. Flow ids follow start times, ties in entry order (docs/flows.md).
const RIDERS_LOADED: &str = r#"duration_s = 7
drain_s = 30
[link]
up = { rate = { model = "constant", kbps = 7200 }, delay = { model = "constant", ms = 15 } }
[[flow]]
kind = "bulk"
name = "ftp"
bytes = 4000000
direction = "up"
[[flow]]
kind = "bulk"
name = "p2p"
bytes = 300000
count = 10
direction = "up"
[[flow]]
kind = "interactive"
name = "game"
request_bytes = 44
response_bytes = 72
interval_ms = 40
count = 100
at_s = 3
[[flow]]
kind = "interactive"
name = "voip"
request_bytes = 200
response_bytes = 200
interval_ms = 20
count = 200
at_s = 3
"#;

/// The same game and call alone, for their idle latency.
const RIDERS_IDLE: &str = r#"duration_s = 2
drain_s = 10
[link]
up = { rate = { model = "constant", kbps = 7200 }, delay = { model = "constant", ms = 15 } }
[[flow]]
kind = "interactive"
name = "game"
request_bytes = 44
response_bytes = 72
interval_ms = 40
count = 50
[[flow]]
kind = "interactive"
name = "voip"
request_bytes = 200
response_bytes = 200
interval_ms = 20
count = 100
"#;

/// Runs workload `body` from the server's namespace against the vehicle's workload
/// server; returns the client's raw results (docs/flows.md).
fn run_workload(srv: &Netns, dir: &Path, name: &str, body: &str) -> serde_json::Value {
    let file = dir.join(format!("{name}.toml"));
    let results = dir.join(format!("{name}.json"));
    std::fs::write(&file, body).unwrap();
    let out = srv
        .horde(&["flow", "client", "--workload"])
        .arg(&file)
        .args(["--connect", "10.77.0.2:5202", "--results"])
        .arg(&results)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", text(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap()
}

/// A rider's exchange latencies in ms (last answer byte against when the exchange was
/// due), leaving out the first five, which wait for the connection to open.
struct Latencies(Vec<f64>);

impl Latencies {
    /// Flow `id`'s, which started at `start_s` with an exchange every `interval_ms`;
    /// every one of its `count` exchanges must have finished.
    fn of(run: &serde_json::Value, id: u64, start_s: f64, interval_ms: f64, count: usize) -> Self {
        let flow = run["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .unwrap_or_else(|| panic!("flow {id} missing: {run}"));
        assert!(flow["error"].is_null(), "flow {id}: {}", flow["error"]);
        let done = flow["completions_us"].as_array().unwrap();
        assert_eq!(done.len(), count, "flow {id}: exchanges finished");
        let mut late: Vec<f64> = done
            .iter()
            .enumerate()
            .skip(5)
            .map(|(k, t)| t.as_f64().unwrap() / 1e3 - (start_s * 1e3 + k as f64 * interval_ms))
            .collect();
        late.sort_by(f64::total_cmp);
        Self(late)
    }

    fn median(&self) -> f64 {
        self.0[self.0.len() / 2]
    }

    fn p95(&self) -> f64 {
        self.0[self.0.len() * 95 / 100]
    }

    fn mean(&self) -> f64 {
        self.0.iter().sum::<f64>() / self.0.len() as f64
    }

    /// The G-model MOS, taking the exchange as the ping and its spread over the
    /// fastest one as the jitter: only the direction toward the vehicle is loaded.
    fn game_mos(&self) -> f64 {
        g_model_mos(self.mean(), self.mean() - self.0[0]).unwrap()
    }

    /// The E-model MOS, taking half the exchange as the one-way delay, with the
    /// CHAP experiments' 10 ms jitter buffer; nothing is lost over TCP.
    fn call_mos(&self) -> f64 {
        e_model_mos(self.mean() / 2.0 + 10.0, 0.0).unwrap()
    }

    fn describe(&self) -> String {
        format!("{:.1} / {:.1} ms", self.median(), self.p95())
    }
}

/// What the riders saw through one ingress discipline, idle and under the downloads,
/// and the downloads' mean goodput.
struct Riders {
    game: [Latencies; 2],
    call: [Latencies; 2],
    download_mbps: f64,
}

fn riders_through(qdisc: &str) -> Riders {
    let ((idle, loaded), server) = through_ingress(qdisc, "riders", |srv, dir| {
        let idle = run_workload(srv, dir, "idle", RIDERS_IDLE);
        (idle, run_workload(srv, dir, "loaded", RIDERS_LOADED))
    });
    let elapsed = loaded["elapsed_s"].as_f64().unwrap();
    let bytes = 4_000_000.0 + 10.0 * 300_000.0;
    let riders = Riders {
        game: [
            Latencies::of(&idle, 0, 0.0, 40.0, 50),
            Latencies::of(&loaded, 11, 3.0, 40.0, 100),
        ],
        call: [
            Latencies::of(&idle, 1, 0.0, 20.0, 100),
            Latencies::of(&loaded, 12, 3.0, 20.0, 200),
        ],
        download_mbps: bytes * 8.0 / elapsed / 1e6,
    };
    let [gi, gl] = &riders.game;
    let [ci, cl] = &riders.call;
    eprintln!(
        "{qdisc}: median / p95, idle -> loaded: game {} -> {} (MOS {:.2} -> {:.2}), \
         call {} -> {} (MOS {:.2} -> {:.2}); downloads {:.2} Mbit/s over {elapsed:.1} s; ingress drops {}",
        gi.describe(),
        gl.describe(),
        gi.game_mos(),
        gl.game_mos(),
        ci.describe(),
        cl.describe(),
        ci.call_mos(),
        cl.call_mos(),
        riders.download_mbps,
        count(&server, &["counters", "ingress_dropped"])
    );
    riders
}

/// The riders' game and call keep their latency next to a download and ten P2P
/// transfers under CHAP and fq_codel at the tunnel's ingress; under FIFO their tail
/// waits behind the downloads. The downloads are not slowed much for it.
///
/// The tail is compared by what the downloads add to it over idle: how much FIFO adds
/// depends on how fast the downloads went on a loaded machine, so a fixed margin in
/// milliseconds would judge the machine, not the discipline.
#[test]
fn chap_or_fq_codel_keep_a_game_and_a_call_on_time_next_to_downloads() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let fifo = riders_through("fifo");
    for qdisc in ["chap", "fq_codel"] {
        let r = riders_through(qdisc);
        for (what, [idle, loaded], [fifo_idle, fifo]) in
            [("game", &r.game, &fifo.game), ("call", &r.call, &fifo.call)]
        {
            // The goal: the median within 20 ms of idle (6-9 ms measured).
            assert!(
                loaded.median() - idle.median() < 20.0,
                "{qdisc}: {what} {} loaded against {} idle",
                loaded.describe(),
                idle.describe()
            );
            let added = loaded.p95() - idle.p95();
            let fifo_added = fifo.p95() - fifo_idle.p95();
            assert!(
                fifo_added > 40.0 && added < 0.5 * fifo_added,
                "{qdisc}: {what} {} idle -> {} loaded, FIFO {} -> {}",
                idle.describe(),
                loaded.describe(),
                fifo_idle.describe(),
                fifo.describe()
            );
        }
        assert!(
            r.game[1].game_mos() > fifo.game[1].game_mos(),
            "{qdisc}: game MOS {:.2} against FIFO's {:.2}",
            r.game[1].game_mos(),
            fifo.game[1].game_mos()
        );
        assert!(
            r.download_mbps > 0.85 * fifo.download_mbps,
            "{qdisc}: downloads {:.2} Mbit/s against FIFO's {:.2}",
            r.download_mbps,
            fifo.download_mbps
        );
    }
}

/// The vehicle's file for `horde up`: two channels bound to the two links by device,
/// both to the server's address on the first link, the far network routed in.
fn up_client_toml(srv_pub: &str) -> String {
    format!(
        r#"key_file = "client.key"
peer_key = "{srv_pub}"
[tun]
name = "hdt0"
addresses = ["10.77.0.2/24", "fd77::2/64"]
routes = ["10.200.0.0/24", "fd20::/64"]
[[channels]]
bind = "0.0.0.0:0"
device = "hdtb1"
remote = "192.168.71.1:7700"
[[channels]]
bind = "0.0.0.0:0"
device = "hdtb2"
remote = "192.168.71.1:7700"
"#
    )
}

/// Starts `horde up FILE` in `ns`, returning once the tunnel device is up.
fn start_up(ns: &Netns, dir: &Path, file: &str, extra: &[&str]) -> Child {
    let mut args = vec!["up", file, "--state-dir"];
    let state = dir.join("state");
    args.push(state.to_str().unwrap());
    args.extend_from_slice(extra);
    let mut child = ns
        .horde(&args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = std::fs::File::create(dir.join(format!("{file}.err"))).ok();
    first_line_with(child.stderr.take().unwrap(), "device hdt0 up", log);
    child
}

/// After `horde up` ends on the vehicle: no modem's rule, route or table is left
/// (tables 7700 and 7701), nor the state record.
fn assert_client_routing_undone(bus: &Netns, dir: &Path) {
    let rules = shown(bus, &["ip", "rule"]);
    assert!(!rules.contains("lookup 770"), "{rules}");
    for table in ["7700", "7701"] {
        let routes = shown(bus, &["ip", "route", "show", "table", table]);
        assert!(
            routes.trim().is_empty() || routes.contains("does not exist"),
            "table {table}: {routes}"
        );
    }
    assert!(!dir.join("state/hdt0-client.json").exists());
}

/// Bytes `device` in `ns` has sent, from the kernel's counters.
fn sent_bytes(ns: &Netns, device: &str) -> u64 {
    let json = shown(ns, &["ip", "-s", "-j", "link", "show", "dev", device]);
    let links: serde_json::Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("ip -s -j link show dev {device}: {e}: {json}"));
    links[0]["stats64"]["tx"]["bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no tx bytes for {device}: {json}"))
}

fn shown(ns: &Netns, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .args(args)
        .output()
        .unwrap();
    text(&out.stdout) + &text(&out.stderr)
}

/// `horde up` on both ends: per-link policy routing on the vehicle (each channel leaves
/// through its own link), NAT on the server to a network behind it, IPv4 and IPv6; a link that goes
/// down and comes back gets its route again; on exit, and after a crash with `horde
/// down`, nothing is left behind.
#[test]
fn up_routes_each_link_nats_the_server_and_down_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let (dir, srv_pub, _) = server_and_client_keys("up", "");
    let file = dir.join("server.toml");
    let body = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{body}[up]\nmasquerade_out = \"hdto\"\n")).unwrap();
    std::fs::write(dir.join("client.toml"), up_client_toml(&srv_pub)).unwrap();
    let (bus, srv, far) = (Netns::new("ubus"), Netns::new("usrv"), Netns::new("ufar"));
    veth_pair_of_links(&bus, &srv);
    // Two modems: the second's default route has a higher metric, as a second uplink's.
    bus.ip(&[
        "route",
        "add",
        "default",
        "via",
        "192.168.71.1",
        "dev",
        "hdtb1",
    ]);
    bus.ip(&[
        "route",
        "add",
        "default",
        "via",
        "192.168.72.1",
        "dev",
        "hdtb2",
        "metric",
        "200",
    ]);
    // A network behind the server, with no route back to the tunnel's prefix.
    run(&[
        "ip", "link", "add", "hdto", "netns", &srv.0, "type", "veth", "peer", "name", "hdtn",
        "netns", &far.0,
    ]);
    srv.ip(&["addr", "add", "10.200.0.1/24", "dev", "hdto"]);
    far.ip(&["addr", "add", "10.200.0.2/24", "dev", "hdtn"]);
    srv.ip(&["addr", "add", "fd20::1/64", "dev", "hdto", "nodad"]);
    far.ip(&["addr", "add", "fd20::2/64", "dev", "hdtn", "nodad"]);
    srv.ip(&["link", "set", "hdto", "up"]);
    far.ip(&["link", "set", "hdtn", "up"]);

    let server = start_up(&srv, &dir, "server.toml", &["--json"]);
    let status = dir.join("client.status");
    let client = start_up(
        &bus,
        &dir,
        "client.toml",
        &["--json", "--status", status.to_str().unwrap()],
    );
    assert!(shown(&bus, &["ip", "rule"]).contains("oif hdtb2 lookup 7701"));
    assert!(shown(&srv, &["nft", "list", "ruleset"]).contains("masquerade"));

    let mut flow = flow_server(&far, "10.200.0.2:5201", 3);
    std::thread::sleep(Duration::from_millis(300));
    // 20 MB from the vehicle to the far network, through the tunnel and the server's NAT.
    let first = transfer(&bus, "10.200.0.2:5201", 20_000_000);
    eprintln!(
        "20 MB through `horde up`: {:.0} Mbit/s",
        first["goodput_mbps"].as_f64().unwrap()
    );
    // Both channels carried it: each left through its own link.
    let s = status_when(&status, |s| {
        s["peers"][0]["channels"].as_array().is_some_and(|c| {
            c.len() == 2 && c.iter().all(|c| c["packets_acked"].as_u64() > Some(100))
        })
    });
    eprintln!("client status: {s}");

    // Link 2 goes down in the middle of a transfer: its table loses its route, and the
    // transfer finishes over link 1, every byte checked.
    std::thread::scope(|scope| {
        let before = sent_bytes(&bus, "hdtb2");
        let moving = scope.spawn(|| transfer(&bus, "10.200.0.2:5201", 30_000_000));
        let start = Instant::now();
        while sent_bytes(&bus, "hdtb2") < before + 2_000_000 {
            assert!(
                !moving.is_finished() && start.elapsed() < Duration::from_secs(20),
                "link 2 never carried 2 MB of the transfer"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        bus.ip(&["link", "set", "hdtb2", "down"]);
        assert!(
            !moving.is_finished(),
            "the transfer ended before link 2 went down"
        );
        let after = moving.join().expect("the transfer");
        eprintln!(
            "30 MB with link 2 down midway: {:.0} Mbit/s",
            after["goodput_mbps"].as_f64().unwrap()
        );
    });
    assert!(shown(&bus, &["ip", "route", "show", "table", "7701"])
        .trim()
        .is_empty());
    bus.ip(&["link", "set", "hdtb2", "up"]);
    let back = Instant::now();
    while !shown(&bus, &["ip", "route", "show", "table", "7701"]).contains("via 192.168.72.1") {
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "link 2's route never came back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    transfer(&bus, "10.200.0.2:5201", 2_000_000);
    let _ = flow.kill();
    let _ = flow.wait();
    // IPv6 too: the far network has no route back to the tunnel's fd77::/64 either.
    let mut flow6 = flow_server(&far, "[fd20::2]:5201", 1);
    std::thread::sleep(Duration::from_millis(300));
    transfer(&bus, "[fd20::2]:5201", 2_000_000);
    let _ = flow6.kill();
    let _ = flow6.wait();

    // A clean exit undoes everything.
    let client = stop(client);
    assert!(
        count(&client, &["counters", "tun_in_bytes"]) >= 20_000_000,
        "{client}"
    );
    assert_client_routing_undone(&bus, &dir);
    // A crash leaves the server's NAT behind; `horde down` removes it.
    unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGKILL) };
    let _ = server.wait_with_output();
    assert!(shown(&srv, &["nft", "list", "ruleset"]).contains("horde_hdt0"));
    let state = dir.join("state");
    let out = srv
        .horde(&[
            "down",
            "server.toml",
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .current_dir(&*dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ruleset = shown(&srv, &["nft", "list", "ruleset"]);
    assert!(!ruleset.contains("horde"), "{ruleset}");
    for key in ["net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"] {
        assert_eq!(shown(&srv, &["sysctl", "-n", key]).trim(), "0", "{key}");
    }
    let again = srv
        .horde(&[
            "down",
            "server.toml",
            "--state-dir",
            state.to_str().unwrap(),
        ])
        .current_dir(&*dir)
        .output()
        .unwrap();
    assert!(
        text(&again.stdout).contains("nothing to undo"),
        "{}",
        text(&again.stdout)
    );
}

/// Wait until the log file `log` has a line containing `want` (panics after 15 s,
/// showing the log).
fn log_line(log: &Path, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let all = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = all.lines().find(|l| l.contains(want)) {
            return line.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no line with {want:?} in {}:\n{all}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn hangup(child: &Child) {
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGHUP) };
}

/// Whether `ping` from `ns` gets an answer from `to` (a few tries, one second each).
fn pings(ns: &Netns, to: &str) -> bool {
    Command::new("ip")
        .args(["netns", "exec", &ns.0, "ping", "-c", "1", "-W", "1", to])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        || Command::new("ip")
            .args(["netns", "exec", &ns.0, "ping", "-c", "3", "-W", "1", to])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// A 2 MB transfer from `bus` to a flow server on the tunnel server's address in
/// `srv`; then, in the client's status file, the channel `which` picks must have sent
/// more than 100 kB (the file is rewritten every second).
fn carries(bus: &Netns, srv: &Netns, status: &Path, which: impl Fn(&serde_json::Value) -> bool) {
    let mut sink = flow_server(srv, "10.77.0.1:5201", 1);
    std::thread::sleep(Duration::from_millis(300));
    transfer(bus, "10.77.0.1:5201", 2_000_000);
    assert!(sink.wait().unwrap().success());
    status_when(status, |v| {
        v["peers"][0]["channels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|ch| which(ch) && ch["bytes_sent"].as_u64() > Some(100_000))
    });
}

#[test]
fn a_reload_takes_a_new_client_and_a_new_channel_and_running_sessions_go_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let dir = workdir("reload");
    let srv_pub = keygen(&dir, "server.key");
    let one = keygen(&dir, "client.key");
    let two = keygen(&dir, "two.key");
    let bus_2 =
        format!("[[clients]]\nname = \"bus-2\"\nkey = \"{two}\"\naddresses = [\"10.77.0.3/32\"]\n");
    std::fs::write(dir.join("server.toml"), server_toml(&one)).unwrap();
    // bus-1 starts with its first link only; its second is in the file it reloads.
    let one_toml = veth_client_toml(&srv_pub, r#"["10.77.0.2/24"]"#, "");
    let (first_link, _) = one_toml.split_at(one_toml.rfind("[[channels]]").unwrap());
    std::fs::write(dir.join("client.toml"), first_link).unwrap();
    std::fs::write(
        dir.join("two.toml"),
        format!(
            "key_file = \"two.key\"\npeer_key = \"{srv_pub}\"\n[tun]\nname = \"hdt0\"\naddresses = [\"10.77.0.3/24\"]\n[[channels]]\nbind = \"192.168.73.2:0\"\nremote = \"192.168.73.1:7700\"\n"
        ),
    )
    .unwrap();
    let (bus, other, srv) = (Netns::new("rbus"), Netns::new("rtwo"), Netns::new("rsrv"));
    veth_pair_of_links(&bus, &srv);
    veth(&other, "hdtc3", &srv, 3);
    let (srv_status, bus_status) = (dir.join("server.status"), dir.join("client.status"));
    let mut server = start_with_status(&srv, &dir, "server", &srv_status);
    let mut client = start_with_status(&bus, &dir, "client", &bus_status);
    status_when(&srv_status, |v| {
        v["peers"][0]["channels"].as_array().map(Vec::len) == Some(1)
    });
    assert!(pings(&bus, "10.77.0.1"), "bus-1 cannot reach the server");

    // bus-2 is not in the server's file yet: its handshakes are refused.
    let two_log = dir.join("two.err");
    let mut second = other
        .horde(&["tunnel", "client", dir.join("two.toml").to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&two_log).unwrap())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let before = status_when(&srv_status, |_| true);
    assert_eq!(before["peers"].as_array().unwrap().len(), 1, "{before}");

    // A file that does not parse changes nothing.
    let server_log = dir.join("server.err");
    std::fs::write(dir.join("server.toml"), "[[clients]\n").unwrap();
    hangup(&server);
    log_line(&server_log, "reload refused, nothing changed");
    assert!(pings(&bus, "10.77.0.1"), "a refused reload broke bus-1");

    // The server takes bus-2 on a reload; bus-2's next handshake gets through.
    std::fs::write(
        dir.join("server.toml"),
        format!("{}{bus_2}", server_toml(&one)),
    )
    .unwrap();
    hangup(&server);
    let line = log_line(&server_log, "reloaded: clients");
    assert!(
        line.contains("added: bus-2; removed: none; changed: none"),
        "{line}"
    );
    log_line(&server_log, "client bus-2 connected");
    assert!(pings(&other, "10.77.0.1"), "bus-2 cannot reach the server");

    // bus-1 takes its second link on a reload; the server sees both channels and data
    // goes over the new one.
    std::fs::write(dir.join("client.toml"), &one_toml).unwrap();
    hangup(&client);
    let bus_log = dir.join("client.err");
    let line = log_line(&bus_log, "reloaded: channels");
    assert!(line.contains("added: ch1; removed: none"), "{line}");
    status_when(&srv_status, |v| {
        v["peers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "bus-1" && p["channels"].as_array().map(Vec::len) == Some(2))
    });
    // A 2 MB transfer sends more than 100 kB over the new link.
    carries(&bus, &srv, &bus_status, |ch| {
        ch["endpoint"] == "192.168.72.1:7700"
    });

    // Taken off the file, bus-2 is cut off; bus-1 goes on.
    std::fs::write(dir.join("server.toml"), server_toml(&one)).unwrap();
    hangup(&server);
    let line = log_line(&server_log, "removed: bus-2");
    assert!(line.contains("added: none"), "{line}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !pings(&other, "10.77.0.1"),
        "bus-2 still reaches the server"
    );
    assert!(pings(&bus, "10.77.0.1"), "bus-1 lost its tunnel");

    // bus-1's one session carried it through all of this.
    let bus_text = std::fs::read_to_string(&bus_log).unwrap();
    assert!(!bus_text.contains("reconnecting"), "{bus_text}");
    let srv_text = std::fs::read_to_string(&server_log).unwrap();
    assert_eq!(
        srv_text.matches("client bus-1 connected").count(),
        1,
        "{srv_text}"
    );
    for child in [&mut second, &mut client, &mut server] {
        interrupt(child);
        let _ = child.wait();
    }
}

#[test]
fn a_modem_that_appears_after_up_gets_its_route_and_its_channel() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let (dir, srv_pub, _) = server_and_client_keys("late", "");
    // Both channels send to the server's first address; the second modem, hdtb2, does
    // not exist yet, and once it does it reaches that address only through its gateway.
    std::fs::write(dir.join("client.toml"), up_client_toml(&srv_pub)).unwrap();
    let (bus, srv) = (Netns::new("lbus"), Netns::new("lsrv"));
    veth(&bus, "hdtb1", &srv, 1);
    bus.ip(&[
        "route",
        "add",
        "default",
        "via",
        "192.168.71.1",
        "dev",
        "hdtb1",
    ]);
    let srv_status = dir.join("server.status");
    let mut server = start_with_status(&srv, &dir, "server", &srv_status);
    let status = dir.join("client.status");
    let client = start_up(
        &bus,
        &dir,
        "client.toml",
        &["--json", "--status", status.to_str().unwrap()],
    );
    let log = dir.join("client.toml.err");
    log_line(&log, "hdtb2 (table 7701) once it appears");
    log_line(
        &log,
        "no network interface named \"hdtb2\" on this host yet",
    );
    // (`ip rule` shows a rule for a device not there yet as "oif hdtb2 [detached]".)
    let rules = shown(&bus, &["ip", "rule"]);
    assert!(
        rules
            .lines()
            .any(|l| l.contains("oif hdtb2") && l.contains("lookup 7701")),
        "{rules}"
    );
    status_when(&srv_status, |v| {
        v["peers"][0]["channels"].as_array().map(Vec::len) == Some(1)
    });
    assert!(pings(&bus, "10.77.0.1"), "no tunnel over the first modem");

    // The second modem enumerates with its address: its table gets a route at once.
    // Then it gets its gateway, as a modem's DHCP answers a moment later: the route then
    // goes through it. Its channel comes up and carries data.
    veth(&bus, "hdtb2", &srv, 2);
    log_line(&log, "hdtb2 is back; its route is restored");
    bus.ip(&[
        "route",
        "add",
        "default",
        "via",
        "192.168.72.1",
        "dev",
        "hdtb2",
        "metric",
        "200",
    ]);
    log_line(&log, "hdtb2's route now goes via 192.168.72.1");
    assert!(shown(&bus, &["ip", "route", "show", "table", "7701"]).contains("via 192.168.72.1"));
    status_when(&srv_status, |v| {
        v["peers"][0]["channels"].as_array().map(Vec::len) == Some(2)
    });
    carries(&bus, &srv, &status, |ch| ch["interface"] == 1);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("reconnecting"), "{text}");
    stop(client);
    assert!(!shown(&bus, &["ip", "rule"]).contains("lookup 7701"));
    interrupt(&server);
    assert!(server.wait().unwrap().success());
}

/// Under `horde up`, a reload that adds a channel on a modem `up` does not route yet
/// gives that modem the next table, its route and its rule, recorded in the state file;
/// the channel joins and carries data; when `up` ends, nothing is left.
#[test]
fn a_reload_under_up_routes_a_new_modem_and_its_channel_joins() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let (dir, srv_pub, _) = server_and_client_keys("upreload", "");
    // The vehicle starts with its first modem's channel only.
    let both = up_client_toml(&srv_pub);
    let (first, _) = both.split_at(both.rfind("[[channels]]").unwrap());
    std::fs::write(dir.join("client.toml"), first).unwrap();
    let (bus, srv) = (Netns::new("rubus"), Netns::new("rusrv"));
    veth_pair_of_links(&bus, &srv);
    for (gw, dev, metric) in [
        ("192.168.71.1", "hdtb1", "100"),
        ("192.168.72.1", "hdtb2", "200"),
    ] {
        bus.ip(&[
            "route", "add", "default", "via", gw, "dev", dev, "metric", metric,
        ]);
    }
    let srv_status = dir.join("server.status");
    let mut server = start_with_status(&srv, &dir, "server", &srv_status);
    let status = dir.join("client.status");
    let client = start_up(
        &bus,
        &dir,
        "client.toml",
        &["--json", "--status", status.to_str().unwrap()],
    );
    let rules = shown(&bus, &["ip", "rule"]);
    assert!(rules.contains("oif hdtb1 lookup 7700"), "{rules}");
    assert!(!rules.contains("hdtb2"), "{rules}");
    status_when(&srv_status, |v| {
        v["peers"][0]["channels"].as_array().map(Vec::len) == Some(1)
    });

    // The second modem's channel is added to the file, and `up` reloads it.
    std::fs::write(dir.join("client.toml"), &both).unwrap();
    hangup(&client);
    let log = dir.join("client.toml.err");
    log_line(&log, "up: channel 1: out through hdtb2 (table 7701)");
    let line = log_line(&log, "reloaded: channels");
    assert!(line.contains("added: ch1; removed: none"), "{line}");
    let rules = shown(&bus, &["ip", "rule"]);
    assert!(
        rules.contains("7701:\tfrom all oif hdtb2 lookup 7701"),
        "{rules}"
    );
    let table = shown(&bus, &["ip", "route", "show", "table", "7701"]);
    assert!(
        table.contains("default via 192.168.72.1 dev hdtb2"),
        "{table}"
    );
    // Recorded for `horde down`, should `up` be killed.
    let state = std::fs::read_to_string(dir.join("state/hdt0-client.json")).unwrap();
    assert!(state.contains("\"7701\""), "{state}");

    // The new channel joins the session and carries data.
    status_when(&srv_status, |v| {
        v["peers"][0]["channels"].as_array().map(Vec::len) == Some(2)
    });
    carries(&bus, &srv, &status, |ch| ch["interface"] == 1);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("reconnecting"), "{text}");

    // `up` ends: neither modem's rule, route or table is left, nor the record.
    stop(client);
    assert_client_routing_undone(&bus, &dir);
    interrupt(&server);
    assert!(server.wait().unwrap().success());
}

/// Bytes each way through the tunnel in the offload tests.
const OFFLOAD_BYTES: u64 = 50_000_000;

/// Tunnel 50 MB each way over two veth links, with TUN offloads at the client and the
/// server as given; `horde flow` checks every byte. Each end says whether its device
/// runs with offloads, and nothing was dropped as malformed on the way.
fn offload_transfers(client_offload: bool, server_offload: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !root_or_refusal_checked() {
        return;
    }
    let tag = format!("offload-{client_offload}-{server_offload}");
    let dir = workdir(&tag);
    let srv_pub = keygen(&dir, "server.key");
    let bus_pub = keygen(&dir, "client.key");
    let with_offload = |toml: String, on: bool| {
        toml.replacen(
            "name = \"hdt0\"\n",
            &format!("name = \"hdt0\"\noffload = {on}\n"),
            1,
        )
    };
    std::fs::write(
        dir.join("server.toml"),
        with_offload(server_toml(&bus_pub), server_offload),
    )
    .unwrap();
    let client_file = dir.join("client.toml");
    let client_toml = veth_client_toml(&srv_pub, r#"["10.77.0.2/24"]"#, "");
    std::fs::write(&client_file, with_offload(client_toml, client_offload)).unwrap();
    let bus = Netns::new("obus");
    let srv = Netns::new("osrv");
    veth_pair_of_links(&bus, &srv);
    let log = std::fs::File::create(dir.join("server.err")).ok();
    let (server, server_up) = start_json(&srv, "server", &dir.join("server.toml"), log);
    let (client, client_up) = start_json(&bus, "client", &client_file, None);
    let says = |on: bool| format!("offloads {}", if on { "on" } else { "off" });
    assert!(server_up.contains(&says(server_offload)), "{server_up}");
    assert!(client_up.contains(&says(client_offload)), "{client_up}");

    let mut up = flow_server(&srv, "10.77.0.1:5201", 1);
    let mut down = flow_server(&bus, "10.77.0.2:5202", 1);
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    transfer(&bus, "10.77.0.1:5201", OFFLOAD_BYTES);
    transfer(&srv, "10.77.0.2:5202", OFFLOAD_BYTES);
    eprintln!(
        "{tag}: 2 x 50 MB through the tunnel in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(up.wait().unwrap().success());
    assert!(down.wait().unwrap().success());
    let client = stop(client);
    let server = stop(server);
    // The kernel's TCP handed over super packets where offloads were on, and only there;
    // segments from the peer were coalesced into super packets there, and only there.
    for (end, r, on) in [
        ("client", &client, client_offload),
        ("server", &server, server_offload),
    ] {
        let supers = count(r, &["counters", "tun_super_packets"]);
        assert_eq!(
            supers > 0,
            on,
            "{end}: {supers} super packets, offload {on}"
        );
        let coalesced = count(r, &["counters", "tun_coalesced"]);
        assert_eq!(
            coalesced > 0,
            on,
            "{end}: {coalesced} coalesced writes, offload {on}"
        );
    }
    for (end, r) in [("client", &client), ("server", &server)] {
        assert!(
            count(r, &["counters", "tun_out_bytes"]) >= OFFLOAD_BYTES,
            "{end}: {r}"
        );
        assert!(
            count(r, &["counters", "tun_in_bytes"]) >= OFFLOAD_BYTES,
            "{end}: {r}"
        );
        for refused in ["tun_malformed", "tun_too_big", "peer_malformed"] {
            assert_eq!(count(r, &["counters", refused]), 0, "{end} {refused}: {r}");
        }
    }
}

#[test]
fn fifty_megabytes_each_way_with_offloads_at_both_ends() {
    offload_transfers(true, true);
}

#[test]
fn fifty_megabytes_each_way_without_offloads() {
    offload_transfers(false, false);
}

#[test]
fn fifty_megabytes_each_way_with_offloads_at_the_client_only() {
    offload_transfers(true, false);
}
