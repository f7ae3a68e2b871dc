//! Opening a TUN interface: `/dev/net/tun` and its one ioctl.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// `TUNSETIFF` = `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `TUNSETOFFLOAD` = `_IOW('T', 208, unsigned int)`.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// `TUNGETIFF` = `_IOR('T', 210, unsigned int)`.
const TUNGETIFF: libc::c_ulong = 0x8004_54d2;
/// `TUNSETVNETHDRSZ` = `_IOW('T', 216, int)`.
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;
/// Every packet is preceded by a `virtio_net_hdr`.
const IFF_VNET_HDR: libc::c_int = 0x4000;
/// `sizeof(struct virtio_net_hdr)`: flags, gso_type, hdr_len, gso_size, csum_start,
/// csum_offset.
pub const VNET_HDR_LEN: usize = 10;
/// What the reader takes from the kernel: partial checksums, TCP super packets (IPv4,
/// IPv6, with ECN).
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

/// Create the TUN interface `name` (1 to 15 bytes) in the caller's network namespace,
/// passing bare IP packets (`IFF_TUN | IFF_NO_PI`); the returned descriptor is
/// non-blocking, and the interface lives as long as it is open. Needs `CAP_NET_ADMIN`.
pub fn open_tun(name: &str) -> io::Result<File> {
    open(name, 0)
}

/// As [`open_tun`], but with TUN offloads: every packet read or written is preceded by a
/// [`VNET_HDR_LEN`]-byte `virtio_net_hdr`, and the kernel may hand over TCP packets of up
/// to 64 KB to segment (TSO) and checksums to complete. Fails (and the interface is
/// gone again) if the kernel refuses any of it.
pub fn open_tun_with_offloads(name: &str) -> io::Result<File> {
    open_tun_with_offloads_by(name, set_offloads)
}

/// As [`open_tun_with_offloads`], with `set_offloads` in place of [`set_offloads`], the
/// call that asks the kernel for them: a kernel that refuses them can be stood in for.
pub fn open_tun_with_offloads_by(
    name: &str,
    set_offloads: impl FnOnce(&File) -> io::Result<()>,
) -> io::Result<File> {
    let file = open(name, IFF_VNET_HDR)?;
    let size = VNET_HDR_LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ reads one int, which lives for the call.
    if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETVNETHDRSZ as _, &size) } < 0 {
        return Err(io::Error::last_os_error());
    }
    set_offloads(&file)?;
    Ok(file)
}

/// Ask the kernel for the offloads the reader takes (`TUNSETOFFLOAD`) on a device opened
/// with a `virtio_net_hdr`.
pub fn set_offloads(file: &File) -> io::Result<()> {
    let offloads = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
    // SAFETY: TUNSETOFFLOAD takes its flags by value.
    if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETOFFLOAD as _, offloads) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the kernel puts a `virtio_net_hdr` before each packet of this device
/// (`IFF_VNET_HDR` in its `TUNGETIFF` flags).
pub fn has_vnet_header(file: &File) -> io::Result<bool> {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // SAFETY: TUNGETIFF writes one ifreq, which lives for the call.
    if unsafe { libc::ioctl(file.as_raw_fd(), TUNGETIFF as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: TUNGETIFF fills in the flags member.
    let flags = unsafe { req.ifr_ifru.ifru_flags } as libc::c_int;
    Ok(flags & IFF_VNET_HDR != 0)
}

fn open(name: &str, extra_flags: libc::c_int) -> io::Result<File> {
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
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI | extra_flags) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one ifreq, which lives for the call.
    if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}
