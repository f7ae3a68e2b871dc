//! A TUN device (`/dev/net/tun`, `IFF_TUN | IFF_NO_PI`) as a [`PacketPort`]: every read is
//! one IP packet the kernel routed out of the interface, every write one IP packet the
//! kernel receives on it. The device exists as long as the descriptor is open.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use crate::port::PacketPort;

/// An open TUN device. Closing it (drop) removes the interface.
#[derive(Debug)]
pub struct TunDevice {
    file: File,
    name: String,
}

impl TunDevice {
    /// Create the interface `name` (at most 15 bytes) in the caller's network namespace.
    /// Needs `CAP_NET_ADMIN`.
    pub fn create(name: &str) -> io::Result<TunDevice> {
        let file = crate::sys::open_tun(name)?;
        Ok(TunDevice {
            file,
            name: name.to_string(),
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl PacketPort for TunDevice {
    fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, Option<SocketAddr>)> {
        (&self.file).read(buf).map(|n| (n, None))
    }

    fn send(&self, packet: &[u8], _dest: Option<SocketAddr>) -> io::Result<()> {
        (&self.file).write(packet).map(|_| ())
    }
}
