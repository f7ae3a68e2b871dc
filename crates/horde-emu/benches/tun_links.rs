//! The IP-link emulator (`horde shell`'s TUN path) under load. Each link is a TUN device
//! inside a network namespace and one on the host, joined by the emulator as in the
//! shell; a sender in the namespace sends UDP to a sink on the host through them.
//!
//! 1. Release-time error (actual write time minus scheduled delivery time, p50/p99/max)
//!    with paced 1228-byte IP packets at the links' rate: 1 link × 50 Mbit/s, then
//!    4 links × 20 Mbit/s (10 ms delay, 1 MB buffer). The goal is p99 under 1 ms.
//! 2. Forwarding ceiling: one link with ideal models, the sender offering packets as
//!    fast as it can; packets/s that come out, per packet size.
//!
//! Needs root (namespaces, TUN); without it, says so and exits successfully.
//! Addresses come from 198.18.0.0/15 (the benchmarking range) inside a namespace this
//! program creates and deletes.
//!
//! `cargo bench -p horde-emu --bench tun_links [-- SECONDS]`

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use horde_emu::{
    Emulator, IdealLink, PacketLogging, PacketPort, PortChannel, TimerOptions, TunDevice,
};
use horde_links::Link;

mod common;

use common::{rate_link, us};

/// UDP payload; 1228 bytes on the link with the IPv4 and UDP headers.
const PAYLOAD: usize = 1200;
const IP_UDP_HEADERS: usize = 28;

/// A namespace with `n` emulated links; deleted on drop (the TUN devices go with the
/// emulator's descriptors).
struct Lab {
    netns: String,
    tag: u32,
    block: u32,
}

impl Lab {
    fn new() -> Lab {
        let tag = std::process::id();
        let lab = Lab {
            netns: format!("horde-bench-{tag}"),
            tag,
            block: u32::from(Ipv4Addr::new(198, 18, 0, 0)) + (tag % 512) * 256,
        };
        sh(&["ip", "netns", "add", &lab.netns]);
        sh(&["ip", "-n", &lab.netns, "link", "set", "lo", "up"]);
        lab
    }

    fn host_addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::from(self.block + 4 * i as u32 + 1)
    }

    fn inner_addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::from(self.block + 4 * i as u32 + 2)
    }

    /// Link `i`: (namespace-side device, host-side device), addressed and up.
    fn link(&self, i: usize) -> (TunDevice, TunDevice) {
        let staging = format!("hb{}n{i}", self.tag);
        let inner = TunDevice::create(&staging).expect("create TUN (root?)");
        let name = format!("bench{i}");
        sh(&["ip", "link", "set", "dev", &staging, "netns", &self.netns]);
        let ns = ["ip", "-n", &self.netns];
        sh(&[&ns[..], &["link", "set", "dev", &staging, "name", &name]].concat());
        let inner_net = format!("{}/30", self.inner_addr(i));
        sh(&[&ns[..], &["addr", "add", &inner_net, "dev", &name]].concat());
        sh(&[&ns[..], &["link", "set", "dev", &name, "up"]].concat());
        let outer_name = format!("hb{}h{i}", self.tag);
        let outer = TunDevice::create(&outer_name).expect("create TUN");
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{outer_name}/disable_ipv6"),
            "1",
        );
        let outer_net = format!("{}/30", self.host_addr(i));
        sh(&["ip", "addr", "add", &outer_net, "dev", &outer_name]);
        sh(&["ip", "link", "set", "dev", &outer_name, "up"]);
        (inner, outer)
    }

    /// Move the calling thread into the namespace (network namespaces are per thread).
    fn enter(&self) {
        let file = std::fs::File::open(Path::new("/run/netns").join(&self.netns)).unwrap();
        // SAFETY: setns on a namespace descriptor; affects only this thread.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
    }

    /// Start the emulator over `n` links with `up` models from `make_up`.
    fn start(&self, n: usize, make_up: impl Fn() -> Box<dyn Link>) -> horde_emu::EmulatorHandle {
        let channels = (0..n)
            .map(|i| {
                let (inner, outer) = self.link(i);
                PortChannel {
                    name: format!("link{i}"),
                    client_facing: Box::new(inner) as Box<dyn PacketPort>,
                    server_facing: Box::new(outer),
                    up: make_up(),
                    down: Box::new(IdealLink::new()),
                    schedule: Vec::new(),
                }
            })
            .collect();
        Emulator::start_ports(channels, TimerOptions::default(), PacketLogging::Off).unwrap()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
    }
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the sink saw: datagrams, payload bytes, and the time from first to last.
struct Sunk {
    packets: u64,
    bytes: u64,
    span: Duration,
}

/// A host-side sink counting datagrams and bytes until `done`.
fn sink(done: Arc<AtomicBool>) -> (u16, std::thread::JoinHandle<Sunk>) {
    let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let port = socket.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        let (mut packets, mut bytes) = (0u64, 0u64);
        let (mut first, mut last) = (None, Instant::now());
        let mut buf = [0u8; 2048];
        while !done.load(Ordering::Relaxed) {
            if let Ok(n) = socket.recv(&mut buf) {
                last = Instant::now();
                first.get_or_insert(last);
                packets += 1;
                bytes += n as u64;
            }
        }
        let span = first.map(|f| last - f).unwrap_or_default();
        Sunk {
            packets,
            bytes,
            span,
        }
    });
    (port, thread)
}

fn release_error(links: usize, mbps: f64, secs: f64) {
    let lab = Arc::new(Lab::new());
    let emu = lab.start(links, || rate_link(mbps));
    let done = Arc::new(AtomicBool::new(false));
    let (port, sink_thread) = sink(done.clone());
    let probe = common::spawn_stall_probe(done.clone(), || {});
    let wire = PAYLOAD + IP_UDP_HEADERS;
    let gap = Duration::from_secs_f64(wire as f64 * 8.0 / (mbps * 1e6) / links as f64);
    let total = (secs / gap.as_secs_f64()) as u64;
    let sender = {
        let lab = lab.clone();
        std::thread::spawn(move || {
            lab.enter();
            let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
            let dests: Vec<SocketAddr> = (0..links)
                .map(|i| (lab.host_addr(i), port).into())
                .collect();
            let payload = [0u8; PAYLOAD];
            let start = Instant::now();
            for i in 0..total {
                let due = start + gap * i as u32;
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                let _ = socket.send_to(&payload, dests[i as usize % links]);
            }
        })
    };
    sender.join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    done.store(true, Ordering::Relaxed);
    let Sunk {
        packets,
        bytes,
        span,
    } = sink_thread.join().unwrap();
    let span = span.as_secs_f64();
    let stalls = probe.join().unwrap();
    let stats = emu.shutdown();
    let err = stats.release_error();
    let p99 = us(err.quantile(0.99));
    println!(
        "tun {links} x {mbps:.0} Mbit/s: sent {total}, delivered {packets} ({:.2} Mbit/s of \
         IP packets, first to last delivery)",
        (bytes + packets * IP_UDP_HEADERS as u64) as f64 * 8.0 / span / 1e6,
    );
    println!(
        "  release error  p50 {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us  (goal p99 < 1000 us: {})",
        us(err.quantile(0.5)),
        p99,
        us(err.max()),
        if p99 < 1000.0 { "met" } else { "MISSED" }
    );
    println!(
        "  stall probe    p50 {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us  (1 ms timer beside the run)",
        us(stalls.quantile(0.5)),
        us(stalls.quantile(0.99)),
        us(stalls.max()),
    );
}

fn forwarding(size: usize, secs: f64) {
    let lab = Arc::new(Lab::new());
    let emu = lab.start(1, || Box::new(IdealLink::new()));
    let done = Arc::new(AtomicBool::new(false));
    let (port, sink_thread) = sink(done.clone());
    let sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let (lab, sent) = (lab.clone(), sent.clone());
        std::thread::spawn(move || {
            lab.enter();
            let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
            let dest = SocketAddr::from((lab.host_addr(0), port));
            let payload = vec![0u8; size];
            let start = Instant::now();
            while start.elapsed().as_secs_f64() < secs {
                for _ in 0..64 {
                    if socket.send_to(&payload, dest).is_ok() {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            start.elapsed().as_secs_f64()
        })
    };
    let offered_for = sender.join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    done.store(true, Ordering::Relaxed);
    let got = sink_thread.join().unwrap().packets;
    emu.shutdown();
    let sent = sent.load(Ordering::Relaxed);
    println!(
        "tun forwarding: {:>5} B IP packets: offered {:>8.0} pkt/s, forwarded {:>8.0} pkt/s \
         ({:.1}%, {:.1} Mbit/s)",
        size + IP_UDP_HEADERS,
        sent as f64 / offered_for,
        got as f64 / offered_for,
        100.0 * got as f64 / sent.max(1) as f64,
        got as f64 * (size + IP_UDP_HEADERS) as f64 * 8.0 / offered_for / 1e6
    );
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("tun_links: skipped: needs root (network namespaces and TUN devices)");
        return;
    }
    let secs = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .unwrap_or(3.0);
    println!(
        "tun_links: {secs} s per scenario, load {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    release_error(1, 50.0, secs);
    release_error(4, 20.0, secs);
    for size in [36, 484, PAYLOAD] {
        forwarding(size, secs);
    }
}
