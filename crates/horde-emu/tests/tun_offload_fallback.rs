//! A TUN device whose kernel refuses offloads (`TUNSETOFFLOAD`) is opened again without
//! the `virtio_net_hdr`, and plain IP packets then pass both ways. The refusal is stood in
//! for by a call that fails as such a kernel does (this kernel takes the offloads).
//!
//! Needs root (a TUN device in a network namespace of its own, made on a thread with
//! `unshare` and gone with the thread, even when an assertion fails). Without root the
//! tests are skipped with a notice, unless `CI` is set, in which case they fail.

use std::io;
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

use horde_emu::{PacketPort, TunDevice};

fn may_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(!ci, "CI is set but {test} is not running as root");
    eprintln!("{test}: skipped, needs root for a TUN device in a namespace of its own");
    false
}

/// Run `f` on a thread of its own in a new network namespace, which goes with the thread.
fn in_new_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: moves only this thread, into a namespace nobody else uses.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "unshare: {}", io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// What a kernel without TUN offloads answers to `TUNSETOFFLOAD`.
fn refuse(_: &std::fs::File) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::EINVAL))
}

/// `ip ARGS` in the calling thread's namespace.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_refusal_reopens_the_device_without_the_vnet_header() {
    if !may_run("a_refusal_reopens_the_device_without_the_vnet_header") {
        return;
    }
    in_new_netns(|| {
        let (dev, refused) = TunDevice::create_preferring_offloads_by("hdfb0", true, refuse)
            .expect("the fallback opens the device");
        let refused = refused.expect("the refusal comes back for the log");
        assert_eq!(refused.raw_os_error(), Some(libc::EINVAL), "{refused}");
        assert!(!dev.offloads());
        assert!(
            !dev.kernel_vnet_header().unwrap(),
            "still has its vnet header"
        );
        drop(dev);

        // A kernel that takes them: offloads, with the header.
        let (dev, refused) =
            TunDevice::create_preferring_offloads("hdfb0", true).expect("offloads on");
        assert!(refused.is_none(), "{refused:?}");
        assert!(dev.offloads());
        assert!(dev.kernel_vnet_header().unwrap());
        drop(dev);

        // Not asked for: the kernel is not asked either.
        let (dev, refused) = TunDevice::create_preferring_offloads_by("hdfb0", false, |_| {
            panic!("offloads asked for although not wanted")
        })
        .unwrap();
        assert!(refused.is_none() && !dev.offloads());
        assert!(!dev.kernel_vnet_header().unwrap());
    });
}

/// An IPv4 header (20 bytes, checksummed) and a UDP header (checksum 0: none) before
/// `payload`.
fn ipv4_udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = 28 + payload.len();
    let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    let sum = p
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>();
    let folded = (sum & 0xffff) + (sum >> 16);
    let folded = (folded & 0xffff) + (folded >> 16);
    p[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

#[test]
fn after_a_refusal_plain_packets_pass_both_ways() {
    if !may_run("after_a_refusal_plain_packets_pass_both_ways") {
        return;
    }
    in_new_netns(|| {
        let (dev, refused) =
            TunDevice::create_preferring_offloads_by("hdfb1", true, refuse).unwrap();
        assert!(refused.is_some() && !dev.offloads());
        ip(&["addr", "add", "10.9.0.1/24", "dev", "hdfb1"]);
        ip(&["link", "set", "hdfb1", "up"]);
        let sock = UdpSocket::bind("10.9.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();

        // Out of the device: a datagram routed into it is read as a bare IPv4 packet,
        // nothing in front (other packets, such as IPv6 solicitations, are skipped).
        sock.send_to(b"out-probe", "10.9.0.2:9").unwrap();
        let mut buf = [0u8; 2048];
        let deadline = Instant::now() + Duration::from_secs(2);
        let packet = loop {
            assert!(Instant::now() < deadline, "the datagram never came out");
            match dev.recv(&mut buf) {
                Ok((n, _)) if buf[..n].ends_with(b"out-probe") => break buf[..n].to_vec(),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("read from the device: {e}"),
            }
        };
        assert_eq!(packet.len(), 20 + 8 + 9, "{packet:?}");
        assert_eq!(packet[0], 0x45, "not a bare IPv4 packet: {packet:?}");
        assert_eq!(packet[16..20], [10, 9, 0, 2]);

        // Into it: a bare IPv4 packet written to the device reaches the socket.
        let port = sock.local_addr().unwrap().port();
        let probe = ipv4_udp([10, 9, 0, 2], [10, 9, 0, 1], 4000, port, b"in-probe");
        dev.send(&probe, None).unwrap();
        let (n, from) = sock.recv_from(&mut buf).expect("the packet never arrived");
        assert_eq!(&buf[..n], b"in-probe");
        assert_eq!(from, "10.9.0.2:4000".parse().unwrap());
    });
}
