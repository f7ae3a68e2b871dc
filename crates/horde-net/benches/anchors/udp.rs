//! Plain UDP anchors over loopback: no protocol, no encryption, 1200-byte datagrams,
//! one sender thread and one receiver thread.

use std::io::IoSliceMut;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use quinn_udp::{RecvMeta, Transmit, UdpSocketState};

use super::Figures;

/// Datagrams per GSO send: as many 1200-byte segments as fit in one 64 KB send.
const GSO_SEGMENTS: usize = 53;

/// Counts datagrams until the socket has been quiet for 200 ms; returns
/// (datagrams, bytes, first to last arrival).
fn count(rx: UdpSocket, gro: bool) -> (u64, u64, Duration) {
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // Only the GRO receiver gets the helper (it turns GRO on). One buffer per call:
    // a blocking recvmmsg would wait for all of them.
    let state = gro.then(|| UdpSocketState::new((&rx).into()).unwrap());
    let mut buf = vec![0u8; 65_536];
    let (mut n, mut bytes, mut first, mut last) = (0u64, 0u64, None, Instant::now());
    loop {
        let mut slices = [IoSliceMut::new(&mut buf)];
        let mut meta = [RecvMeta::default()];
        let got = if let Some(state) = &state {
            state.recv((&rx).into(), &mut slices, &mut meta)
        } else {
            rx.recv(&mut slices[0]).map(|len| {
                meta[0].len = len;
                meta[0].stride = len;
                1
            })
        };
        let Ok(k) = got else { break };
        first.get_or_insert_with(Instant::now);
        last = Instant::now();
        for m in &meta[..k] {
            n += m.len.div_ceil(m.stride.max(1)) as u64;
            bytes += m.len as u64;
        }
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
    let receiver = std::thread::spawn(move || count(rx, offload));
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let state = UdpSocketState::new((&tx).into()).unwrap();
    let segments = if offload {
        GSO_SEGMENTS.min(state.max_gso_segments())
    } else {
        1
    };
    let payload = vec![0x5au8; size * segments];
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        for _ in 0..16 {
            // A full receive buffer drops datagrams; the receiver counts what arrived.
            if offload {
                let _ = state.send(
                    (&tx).into(),
                    &Transmit {
                        destination: to,
                        ecn: None,
                        contents: &payload,
                        segment_size: Some(size),
                        src_ip: None,
                    },
                );
            } else {
                let _ = tx.send_to(&payload, to);
            }
        }
    }
    let (n, bytes, span) = receiver.join().unwrap();
    Figures::new(n, bytes, span, super::cpu_time() - cpu0)
}
