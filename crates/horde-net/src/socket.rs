//! UDP sockets for channels.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

use crate::config::InterfaceConfig;

/// Socket buffers large enough to absorb bursts at gigabit rates between driver wake-ups.
const SOCKET_BUFFER: usize = 4 << 20;

/// Bind a non-blocking UDP socket for an interface, pinned to its device if one is named.
pub fn bind(iface: &InterfaceConfig) -> io::Result<tokio::net::UdpSocket> {
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
    tokio::net::UdpSocket::from_std(s.into())
}
