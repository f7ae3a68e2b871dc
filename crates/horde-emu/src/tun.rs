//! A TUN device (`/dev/net/tun`, `IFF_TUN | IFF_NO_PI`) as a [`PacketPort`]: every read is
//! one IP packet the kernel routed out of the interface, every write one IP packet the
//! kernel receives on it. The device exists as long as the descriptor is open.

use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use crate::port::PacketPort;

/// An open TUN device. Closing it (drop) removes the interface.
#[derive(Debug)]
pub struct TunDevice {
    file: File,
    name: String,
    /// Opened with offloads: a `virtio_net_hdr` precedes every packet.
    offloads: bool,
}

impl TunDevice {
    /// Create the interface `name` (at most 15 bytes) in the caller's network namespace.
    /// Needs `CAP_NET_ADMIN`.
    pub fn create(name: &str) -> io::Result<TunDevice> {
        let file = crate::sys::open_tun(name)?;
        Ok(TunDevice {
            file,
            name: name.to_string(),
            offloads: false,
        })
    }

    /// As [`create`](Self::create), with TUN offloads
    /// ([`open_tun_with_offloads`](crate::sys::open_tun_with_offloads)): every read starts
    /// with a `virtio_net_hdr` and may be a TCP packet of up to 64 KB to segment, and
    /// [`send`](PacketPort::send) puts a header that asks for nothing in front of each
    /// packet. Fails if the kernel refuses offloads.
    pub fn create_with_offloads(name: &str) -> io::Result<TunDevice> {
        let file = crate::sys::open_tun_with_offloads(name)?;
        Ok(TunDevice {
            file,
            name: name.to_string(),
            offloads: true,
        })
    }

    /// With offloads if `want` asks for them and the kernel takes them, without them
    /// otherwise. When the kernel refuses them, the half-made device is closed (which
    /// removes it) and `name` is opened again without the `virtio_net_hdr`; the refusal
    /// comes back with the device, for the log.
    pub fn create_preferring_offloads(
        name: &str,
        want: bool,
    ) -> io::Result<(TunDevice, Option<io::Error>)> {
        Self::create_preferring_offloads_by(name, want, crate::sys::tun::set_offloads)
    }

    /// As [`create_preferring_offloads`](Self::create_preferring_offloads), with
    /// `set_offloads` in place of the call that asks the kernel for them
    /// ([`set_offloads`](crate::sys::tun::set_offloads)), so that a refusal can be driven.
    pub fn create_preferring_offloads_by(
        name: &str,
        want: bool,
        set_offloads: impl FnOnce(&File) -> io::Result<()>,
    ) -> io::Result<(TunDevice, Option<io::Error>)> {
        if !want {
            return Ok((Self::create(name)?, None));
        }
        match crate::sys::tun::open_tun_with_offloads_by(name, set_offloads) {
            Ok(file) => Ok((
                TunDevice {
                    file,
                    name: name.to_string(),
                    offloads: true,
                },
                None,
            )),
            Err(refused) => Ok((Self::create(name)?, Some(refused))),
        }
    }

    /// Whether the kernel puts a `virtio_net_hdr` before each packet, as it says.
    pub fn kernel_vnet_header(&self) -> io::Result<bool> {
        crate::sys::tun::has_vnet_header(&self.file)
    }

    /// Write `bytes` as they are: with offloads, a `virtio_net_hdr` and its packet (e.g.
    /// a TCP super packet for the kernel to take as segments).
    pub fn write_raw(&self, bytes: &[u8]) -> io::Result<()> {
        (&self.file).write(bytes).map(|_| ())
    }

    /// Whether the device was opened with offloads.
    pub fn offloads(&self) -> bool {
        self.offloads
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
        if self.offloads {
            // A whole packet with its checksums: gso_type NONE, no flags.
            let none = [0u8; crate::sys::VNET_HDR_LEN];
            let parts = [IoSlice::new(&none), IoSlice::new(packet)];
            return (&self.file).write_vectored(&parts).map(|_| ());
        }
        (&self.file).write(packet).map(|_| ())
    }
}
