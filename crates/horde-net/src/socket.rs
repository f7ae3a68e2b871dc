//! UDP sockets for channels, with what the kernel offers for batching them.
//!
//! Each interface can have two sockets on one port: the data socket, read by the driver,
//! and a handshake socket, read by the handshake worker. Both set `SO_REUSEPORT`, and a
//! classic BPF program attached to their group steers every datagram by its first byte:
//! initiations, of the current format (type 5) and of the old one (type 1), to the
//! handshake socket, everything else to the data socket. A flood of initiations then never
//! wakes the driver, and peers see one address as before. Responses (2) and cookie replies
//! (4) stay on the data socket: they are for this host's own pending handshakes, which the
//! driver holds, and anything else of those types costs it an index lookup.

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn_udp::{RecvMeta, UdpSocketState};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::Interest;

use crate::config::InterfaceConfig;

/// Socket buffers large enough to absorb bursts at gigabit rates between driver wake-ups.
const SOCKET_BUFFER: usize = 4 << 20;

/// One interface's socket: the tokio socket for readiness, and the offloads it has.
pub struct ChannelSocket {
    io: tokio::net::UdpSocket,
    /// Receive-side helper (`recvmmsg`, GRO segments, ancillary data).
    state: UdpSocketState,
    /// Datagrams one send may carry with GSO; 1 when off (not offered, turned off by
    /// configuration, or refused by the device at run time).
    gso_segments: AtomicUsize,
    /// The same port's handshake socket, when initiations are steered to one.
    handshake: Option<Arc<UdpSocket>>,
}

/// Bind a non-blocking UDP socket for an interface, pinned to its device if one is named.
/// With `offload`, GSO and GRO are used when the kernel has them. With `split_handshakes`,
/// also a handshake socket on the same port that receives every initiation; if the kernel
/// refuses that (no `SO_REUSEPORT` BPF), one socket receives everything.
pub fn bind(
    iface: &InterfaceConfig,
    offload: bool,
    split_handshakes: bool,
) -> io::Result<ChannelSocket> {
    // Bound without SO_REUSEPORT, so that a port in use fails here as it always did, and
    // port 0 gets a port no other socket has (the kernel's ephemeral search passes over
    // ports whose reuse-port sockets another socket of ours could join).
    let data = open(iface, false)?;
    data.bind(&iface.bind.into())?;
    let handshake = if split_handshakes {
        match add_handshake_socket(&data, iface) {
            Ok(h) => Some(Arc::new(h.into())),
            Err(e) => {
                // Nobody may join this port after all.
                let _ = data.set_reuse_port(false);
                tracing::debug!(
                    error = %e,
                    "no separate handshake socket: initiations arrive with the data"
                );
                None
            }
        }
    } else {
        None
    };
    wrap(data, offload, handshake)
}

/// Opens the port's group: `SO_REUSEPORT` on the bound data socket, the handshake socket
/// bound to the same address (the kernel makes the group then, the data socket at index 0
/// and this one at 1), and the steering program on the group. Until the program is
/// attached, a microsecond later, the kernel spreads datagrams over both by their
/// addresses; on a fresh port nothing arrives yet, and when an interface comes back a
/// datagram caught there is dropped as a wrong type and recovered like a loss.
fn add_handshake_socket(data: &Socket, iface: &InterfaceConfig) -> io::Result<Socket> {
    data.set_reuse_port(true)?;
    let port = data
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("not an IP socket"))?;
    let handshake = open(iface, true)?;
    handshake.bind(&port.into())?;
    attach_steering(data)?;
    Ok(handshake)
}

fn open(iface: &InterfaceConfig, reuse_port: bool) -> io::Result<Socket> {
    let domain = match iface.bind {
        SocketAddr::V4(_) => Domain::IPV4,
        SocketAddr::V6(_) => Domain::IPV6,
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if let Some(dev) = &iface.device {
        s.bind_device(Some(dev.as_bytes()))?;
    }
    // Best effort: the kernel caps these at its configured maximum.
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    s.set_nonblocking(true)?;
    if reuse_port {
        s.set_reuse_port(true)?;
    }
    Ok(s)
}

/// The group's steering program: the UDP payload's first byte is `TYPE_INITIATION` (5) or
/// `TYPE_LEGACY_INITIATION` (1, refused there as an old format) -> socket 1, anything else
/// (and an empty payload) -> socket 0.
fn attach_steering(s: &Socket) -> io::Result<()> {
    const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let mut program = [
        op(LD_B_ABS, 0, 0, 0),
        // Jumps are relative to the next instruction.
        op(JEQ_K, 1, 0, u32::from(horde_crypto::TYPE_INITIATION)),
        op(JEQ_K, 0, 1, u32::from(horde_crypto::TYPE_LEGACY_INITIATION)),
        op(RET_K, 0, 0, 1),
        op(RET_K, 0, 0, 0),
    ];
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: the kernel copies the program during the call; `prog` points at it.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            &prog as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn wrap(s: Socket, offload: bool, handshake: Option<Arc<UdpSocket>>) -> io::Result<ChannelSocket> {
    let state = UdpSocketState::new((&s).into())?;
    let mut gso = if offload { state.max_gso_segments() } else { 1 };
    if !offload {
        // The helper turns GRO on where it can; this socket reads single datagrams.
        set_gro(&s, false);
    }
    if gso > 1 && !gso_works(&s) {
        gso = 1;
    }
    Ok(ChannelSocket {
        io: tokio::net::UdpSocket::from_std(s.into())?,
        state,
        gso_segments: AtomicUsize::new(gso.max(1)),
        handshake,
    })
}

pub(crate) fn set_gro(s: &Socket, on: bool) {
    let v: libc::c_int = on.into();
    // SAFETY: a plain int option on a socket we own.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_GRO,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Whether the socket accepts a segment size: kernels without UDP GSO refuse the option.
fn gso_works(s: &Socket) -> bool {
    let v: libc::c_int = 0;
    // SAFETY: a plain int option on a socket we own.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

impl ChannelSocket {
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Replaces the kernel filter that drops datagrams to receiver indices not in
    /// `indices` (see `index_filter`).
    pub fn set_index_filter(&self, indices: &[u32]) -> io::Result<()> {
        crate::index_filter::attach(self.io.as_raw_fd(), indices)
    }

    /// Datagrams the kernel dropped at this socket (its filter, or a full buffer).
    pub fn kernel_drops(&self) -> u64 {
        crate::index_filter::kernel_drops(self.io.as_raw_fd())
    }

    /// The handshake socket on the same port, if initiations are steered to one.
    pub fn handshake_socket(&self) -> Option<&Arc<UdpSocket>> {
        self.handshake.as_ref()
    }

    pub fn poll_recv_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io.poll_recv_ready(cx)
    }

    /// Datagrams one send may carry (1: no segmentation offload).
    pub fn gso_segments(&self) -> usize {
        self.gso_segments.load(Ordering::Relaxed)
    }

    /// The device refused a segmented send: one datagram per message from now on.
    pub fn disable_gso(&self) {
        self.gso_segments.store(1, Ordering::Relaxed);
    }

    /// Read what is queued, up to one datagram (or one GRO train) per buffer, in one
    /// `recvmmsg`. `WouldBlock` when nothing is there.
    pub fn try_recv(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        self.io.try_io(Interest::READABLE, || {
            self.state.recv((&self.io).into(), bufs, meta)
        })
    }

    /// Run a non-blocking send with the reactor's readiness kept right.
    pub fn try_send_with<R>(
        &self,
        f: impl FnOnce(&tokio::net::UdpSocket) -> io::Result<R>,
    ) -> io::Result<R> {
        self.io.try_io(Interest::WRITABLE, || f(&self.io))
    }

    pub async fn writable(&self) -> io::Result<()> {
        self.io.writable().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Everything `read` returns within `wait`, until it has `want` datagrams.
    fn collect(
        want: usize,
        wait: Duration,
        mut read: impl FnMut(&mut [u8]) -> Option<usize>,
    ) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        let end = Instant::now() + wait;
        while got.len() < want && Instant::now() < end {
            match read(&mut buf) {
                Some(n) => got.push(buf[..n].to_vec()),
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        got
    }

    /// What the data socket reads within `wait`, until it has `want` datagrams.
    async fn read_data(s: &ChannelSocket, want: usize, wait: Duration) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        let end = tokio::time::Instant::now() + wait;
        while got.len() < want {
            let ready = std::future::poll_fn(|cx| s.poll_recv_ready(cx));
            if tokio::time::timeout_at(end, ready).await.is_err() {
                break;
            }
            let mut slices = [IoSliceMut::new(&mut buf)];
            let mut meta = [RecvMeta::default()];
            if s.try_recv(&mut slices, &mut meta).is_ok() {
                got.push(buf[..meta[0].len].to_vec());
            }
        }
        got
    }

    #[tokio::test]
    async fn initiations_reach_the_handshake_socket_and_the_rest_the_data_socket() {
        let iface = InterfaceConfig::new("127.0.0.1:0".parse().unwrap());
        let s = bind(&iface, false, true).unwrap();
        let hs = s.handshake_socket().expect("this kernel steers").clone();
        let port = s.local_addr().unwrap();
        assert_eq!(hs.local_addr().unwrap(), port, "one port for both");

        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let initiation = [horde_crypto::TYPE_INITIATION; horde_crypto::INITIATION_LEN];
        let short_initiation = [horde_crypto::TYPE_INITIATION; 10];
        let legacy = [horde_crypto::TYPE_LEGACY_INITIATION; horde_crypto::INITIATION_LEN];
        let cookie_reply = [horde_crypto::TYPE_COOKIE_REPLY; horde_crypto::COOKIE_REPLY_LEN];
        let transport = [horde_crypto::TYPE_TRANSPORT; 60];
        let transport_phase_1 = [horde_crypto::TYPE_TRANSPORT | 0x80; 60];
        let response = [horde_crypto::TYPE_RESPONSE; 92];
        for d in [
            &initiation[..],
            &transport[..],
            &short_initiation[..],
            &transport_phase_1[..],
            &legacy[..],
            &[][..],
            &response[..],
            &cookie_reply[..],
        ] {
            peer.send_to(d, port).unwrap();
        }

        let wait = Duration::from_secs(2);
        let to_worker = collect(3, wait, |b| hs.recv_from(b).ok().map(|(n, _)| n));
        let to_driver = read_data(&s, 5, wait).await;
        assert_eq!(
            to_worker,
            vec![
                initiation.to_vec(),
                short_initiation.to_vec(),
                legacy.to_vec()
            ]
        );
        let kinds: Vec<Option<u8>> = to_driver.iter().map(|d| d.first().copied()).collect();
        assert_eq!(
            kinds,
            vec![
                Some(horde_crypto::TYPE_TRANSPORT),
                Some(horde_crypto::TYPE_TRANSPORT | 0x80),
                None,
                Some(horde_crypto::TYPE_RESPONSE),
                Some(horde_crypto::TYPE_COOKIE_REPLY)
            ]
        );
    }

    #[tokio::test]
    async fn a_port_in_use_is_refused_and_port_0_never_joins_another_group() {
        let iface = InterfaceConfig::new("127.0.0.1:0".parse().unwrap());
        let first = bind(&iface, false, true).unwrap();
        assert!(first.handshake_socket().is_some());
        let taken = InterfaceConfig::new(first.local_addr().unwrap());
        let err = bind(&taken, false, true).err().expect("the port is in use");
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        // Many hosts on port 0 each get a port of their own.
        let more: Vec<ChannelSocket> = (0..200)
            .map(|_| bind(&iface, false, true).unwrap())
            .collect();
        let mut ports: Vec<u16> = more
            .iter()
            .chain(std::iter::once(&first))
            .map(|s| s.local_addr().unwrap().port())
            .collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 201);
    }

    #[tokio::test]
    async fn without_a_handshake_socket_the_data_socket_gets_everything() {
        let iface = InterfaceConfig::new("127.0.0.1:0".parse().unwrap());
        let s = bind(&iface, false, false).unwrap();
        assert!(s.handshake_socket().is_none());
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let initiation = [horde_crypto::TYPE_INITIATION; horde_crypto::INITIATION_LEN];
        peer.send_to(&initiation, s.local_addr().unwrap()).unwrap();
        let got = read_data(&s, 1, Duration::from_secs(2)).await;
        assert_eq!(got, vec![initiation.to_vec()]);
    }
}
