//! The two ends of a channel as packet ports: a UDP relay socket, or a TUN device that
//! carries whole IP packets. The receive and release threads only see this trait.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

/// A non-blocking source and sink of packets that epoll can watch.
pub trait PacketPort: Send + Sync {
    /// The descriptor the receive thread waits on (readable = packets to read).
    fn raw_fd(&self) -> RawFd;
    /// Read one packet into `buf`; `WouldBlock` when there is none. Returns its length
    /// and, for ports that have addresses, the sender's address.
    fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, Option<SocketAddr>)>;
    /// Write one packet, to `dest` for ports that have addresses (point-to-point ports
    /// ignore it).
    fn send(&self, packet: &[u8], dest: Option<SocketAddr>) -> io::Result<()>;
}

impl PacketPort for UdpSocket {
    fn raw_fd(&self) -> RawFd {
        self.as_raw_fd()
    }

    fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, Option<SocketAddr>)> {
        self.recv_from(buf).map(|(n, from)| (n, Some(from)))
    }

    fn send(&self, packet: &[u8], dest: Option<SocketAddr>) -> io::Result<()> {
        let dest = dest.ok_or_else(|| io::Error::other("UDP relay send without a destination"))?;
        self.send_to(packet, dest).map(|_| ())
    }
}
