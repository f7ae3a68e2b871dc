//! Plain UDP anchors over loopback: no protocol, no encryption, 1200-byte datagrams,
//! one sender thread and one receiver thread.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use super::Figures;

/// Datagrams per GSO send: as many 1200-byte segments as fit in one 64 KB send.
const GSO_SEGMENTS: usize = 53;

fn set_udp_option(s: &UdpSocket, option: libc::c_int, value: libc::c_int) -> bool {
    // SAFETY: a plain int option on a socket we own.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            libc::SOL_UDP,
            option,
            &value as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Counts `size`-byte datagrams until the socket has been quiet for 200 ms; returns
/// (datagrams, bytes, first to last arrival). With `gro`, one read returns a train of
/// datagrams, all of `size` bytes here but the last.
fn count(rx: UdpSocket, gro: bool, size: usize) -> (u64, u64, Duration) {
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    if gro {
        assert!(
            set_udp_option(&rx, libc::UDP_GRO, 1),
            "this kernel has no UDP GRO"
        );
    }
    let mut buf = vec![0u8; 1 << 17];
    let (mut n, mut bytes, mut first, mut last) = (0u64, 0u64, None, Instant::now());
    while let Ok(len) = rx.recv(&mut buf) {
        first.get_or_insert_with(Instant::now);
        last = Instant::now();
        n += len.div_ceil(size) as u64;
        bytes += len as u64;
    }
    (n, bytes, first.map_or(Duration::ZERO, |f| last - f))
}

/// One `send_to` per datagram, one `recv` per datagram.
pub fn one_per_syscall(seconds: f64, size: usize) -> Figures {
    run(seconds, size, false)
}

/// GSO sends of `GSO_SEGMENTS` datagrams, GRO reads.
pub fn gso(seconds: f64, size: usize) -> Figures {
    run(seconds, size, true)
}

fn run(seconds: f64, size: usize, offload: bool) -> Figures {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = rx.local_addr().unwrap();
    let _ = socket2::SockRef::from(&rx).set_recv_buffer_size(8 << 20);
    let cpu0 = super::cpu_time();
    let receiver = std::thread::spawn(move || count(rx, offload, size));
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let segments = if offload {
        // The socket-wide segment size: every larger send is cut into `size` datagrams.
        assert!(
            set_udp_option(&tx, libc::UDP_SEGMENT, size as libc::c_int),
            "this kernel has no UDP GSO"
        );
        GSO_SEGMENTS
    } else {
        1
    };
    let payload = vec![0x5au8; size * segments];
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        for _ in 0..16 {
            // A full receive buffer drops datagrams; the receiver counts what arrived.
            let _ = tx.send_to(&payload, to);
        }
    }
    let (n, bytes, span) = receiver.join().unwrap();
    Figures::new(n, bytes, span, super::cpu_time() - cpu0)
}
