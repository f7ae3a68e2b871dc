//! A TUN device (`/dev/net/tun`, `IFF_TUN | IFF_NO_PI`) as a [`PacketPort`]: every read is
//! one IP packet the kernel routed out of the interface, every write one IP packet the
//! kernel receives on it. The device exists as long as the descriptor is open.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use crate::port::PacketPort;

/// `TUNSETIFF` = `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

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
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interface name `{name}` must have 1 to 15 bytes"),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")?;
        // SAFETY: ifreq is plain old data; all-zero is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq, which lives for the call.
        if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
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
