//! UDP sockets for channels, with what the kernel offers for batching them.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
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
}

/// Bind a non-blocking UDP socket for an interface, pinned to its device if one is named.
/// With `offload`, GSO and GRO are used when the kernel has them.
pub fn bind(iface: &InterfaceConfig, offload: bool) -> io::Result<ChannelSocket> {
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
    s.bind(&iface.bind.into())?;
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
    })
}

fn set_gro(s: &Socket, on: bool) {
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
