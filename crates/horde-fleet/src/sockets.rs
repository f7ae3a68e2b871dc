//! The vehicles' UDP sockets and the one epoll set that watches them all: plain
//! non-blocking sockets through `libc`, since one thread serves tens of thousands of
//! them and an async runtime would add a task or a waker per socket for nothing.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use anyhow::{bail, Context, Result};

/// A non-blocking UDP socket.
pub struct Udp {
    fd: OwnedFd,
    pub local: SocketAddr,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn sockaddr_v4(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

impl Udp {
    /// A socket bound to `ip` on a port the kernel picks.
    pub fn bind(ip: Ipv4Addr) -> io::Result<Udp> {
        // SAFETY: plain socket calls on a descriptor this function owns.
        unsafe {
            let fd = cvt(libc::socket(
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            ))?;
            let fd = OwnedFd::from_raw_fd(fd);
            let sa = sockaddr_v4(SocketAddrV4::new(ip, 0));
            cvt(libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ))?;
            let mut out: libc::sockaddr_in = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            cvt(libc::getsockname(
                fd.as_raw_fd(),
                (&mut out as *mut libc::sockaddr_in).cast(),
                &mut len,
            ))?;
            let local = SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(out.sin_port)));
            Ok(Udp { fd, local })
        }
    }

    /// Send one datagram; a full socket buffer drops it, as a modem's queue would.
    pub fn send_to(&self, buf: &[u8], dst: SocketAddr) -> io::Result<()> {
        let SocketAddr::V4(dst) = dst else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the fleet's sockets are IPv4",
            ));
        };
        let sa = sockaddr_v4(dst);
        // SAFETY: the buffer and address outlive the call.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                0,
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// One datagram into `buf`: its length and source; `None` when there is none.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        // SAFETY: the buffer and address outlive the call.
        unsafe {
            let mut sa: libc::sockaddr_in = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let r = libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut sa as *mut libc::sockaddr_in).cast(),
                &mut len,
            );
            if r < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    _ => Err(e),
                };
            }
            let ip = Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr));
            let src = SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sa.sin_port)));
            Ok(Some((r as usize, src)))
        }
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An epoll set whose events carry a number chosen at registration.
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: creates a descriptor this struct owns.
        let fd = unsafe { cvt(libc::epoll_create1(libc::EPOLL_CLOEXEC))? };
        Ok(Epoll {
            // SAFETY: just created, owned by no one else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 1024],
        })
    }

    /// Watch `fd` for readability, level-triggered, reporting `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: both descriptors are open; the event is read during the call only.
        unsafe {
            cvt(libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd,
                &mut ev,
            ))?;
        }
        Ok(())
    }

    /// Wait up to `timeout_ms` for readable sockets; their tokens go to `out`.
    pub fn wait(&mut self, timeout_ms: i32, out: &mut Vec<u64>) -> io::Result<()> {
        // SAFETY: the event buffer is as long as told.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(e);
        }
        out.extend(self.events[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// Raise this process's open-file limit to at least `needed` descriptors (up to the
/// hard limit, or beyond it when running as root).
pub fn raise_fd_limit(needed: u64) -> Result<()> {
    // SAFETY: reads and writes a struct of this process's limits.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        cvt(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim)).context("reading RLIMIT_NOFILE")?;
        if lim.rlim_cur >= needed {
            return Ok(());
        }
        let want = libc::rlimit {
            rlim_cur: needed,
            rlim_max: lim.rlim_max.max(needed),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
            return Ok(());
        }
        if lim.rlim_max >= needed {
            let soft = libc::rlimit {
                rlim_cur: needed,
                rlim_max: lim.rlim_max,
            };
            cvt(libc::setrlimit(libc::RLIMIT_NOFILE, &soft)).context("raising RLIMIT_NOFILE")?;
            return Ok(());
        }
        bail!(
            "the fleet needs {needed} open files but this process may open at most {} \
             (raise `ulimit -n`, run fewer vehicles, or give each vehicle one socket)",
            lim.rlim_max
        )
    }
}

/// The address a vehicle's channel binds to: one loopback address per vehicle and
/// channel (127.0.0.0/8 is all local), so that every channel has an address of its own,
/// as a modem would, and the ports of one address never run out.
pub fn channel_ip(vehicle: u32, channel: u32) -> Ipv4Addr {
    let hi = vehicle / 250;
    let lo = vehicle % 250 + 1;
    Ipv4Addr::new(127, 10 + channel as u8, hi as u8, lo as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_addresses_are_distinct_and_local() {
        let mut seen = std::collections::HashSet::new();
        for v in 0..20_000 {
            for c in 0..3 {
                let ip = channel_ip(v, c);
                assert!(ip.is_loopback());
                assert!(seen.insert(ip), "{ip} twice");
            }
        }
    }

    #[test]
    fn a_datagram_goes_round_through_epoll() {
        let a = Udp::bind(channel_ip(0, 0)).unwrap();
        let b = Udp::bind(channel_ip(1, 0)).unwrap();
        let mut ep = Epoll::new().unwrap();
        ep.add(b.raw(), 7).unwrap();
        a.send_to(b"hello", b.local).unwrap();
        let mut ready = Vec::new();
        ep.wait(1000, &mut ready).unwrap();
        assert_eq!(ready, vec![7]);
        let mut buf = [0u8; 64];
        let (n, src) = b.recv_from(&mut buf).unwrap().unwrap();
        assert_eq!((&buf[..n], src), (&b"hello"[..], a.local));
        assert!(b.recv_from(&mut buf).unwrap().is_none());
    }
}
