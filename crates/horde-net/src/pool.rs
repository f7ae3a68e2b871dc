//! The channel pool manager's eyes (the thesis's `chPoolMan`, §3.3.2): which of the
//! host's interfaces are usable right now.
//!
//! Every interface pinned to a device ([`InterfaceConfig::device`]) is checked every poll
//! interval. It is usable when the device exists, is administratively up (`IFF_UP`), has
//! carrier (`IFF_LOWER_UP`) and is not dormant, and, if the socket is bound to a specific
//! address, still carries that address. The driver closes the socket of an interface that
//! stops being usable and removes the channels over it; when it is usable again the driver
//! binds it again and re-adds the channels.
//!
//! Carrier, not the operational state (`IFF_RUNNING`): the kernel updates the operational
//! state from a deferred work item that it rate-limits to once a second for most devices,
//! so it lags a link coming up by up to a second; carrier changes are visible at once.
//!
//! Polling rather than subscribing to rtnetlink notifications: two small rtnetlink dumps
//! (links, and addresses when needed) every few hundred milliseconds cost nothing
//! measurable, need no extra task or dependency, cannot miss or mis-order an event (a poll
//! always sees the current state), and a channel's own dead-man timer covers the short
//! window between polls. The netlink socket is opened when the host binds, so it looks at
//! the network namespace the host's sockets live in, whichever thread later runs the
//! driver (`/sys/class/net` would show the namespace sysfs was mounted in instead).

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::config::InterfaceConfig;

/// One of the host's interfaces, as the driver and the pool manager see it.
pub(crate) struct Iface {
    pub config: InterfaceConfig,
    /// The address the socket is bound to: the configured one with the port the kernel
    /// picked. Binding again reuses it so that peers keep reaching this end.
    pub bound: SocketAddr,
    /// The device's index when the socket was bound (a device deleted and created again
    /// gets a new index, and `SO_BINDTODEVICE` binds by index).
    pub ifindex: Option<u32>,
    pub state: IfaceState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfaceState {
    /// The socket is open.
    Open,
    /// The pool manager closed the socket; it will bind it again when the device is back.
    Down,
    /// The application removed the interface for good.
    Removed,
}

/// Why an interface was taken out of service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DownReason {
    /// No device of that name.
    Gone,
    /// The device is administratively down.
    AdminDown,
    /// The device is up but has no carrier, or is dormant.
    NoCarrier,
    /// The device no longer has the address the socket is bound to.
    NoAddress,
    /// The device was deleted and created again (new index): the socket must be rebound.
    Replaced,
}

impl DownReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DownReason::Gone => "device gone",
            DownReason::AdminDown => "device down",
            DownReason::NoCarrier => "no carrier",
            DownReason::NoAddress => "address removed",
            DownReason::Replaced => "device replaced",
        }
    }
}

/// What the driver should do after a poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    Down(usize, DownReason),
    Up(usize),
}

/// Polls the watched interfaces.
pub(crate) struct Monitor {
    interval: Option<Duration>,
    next_poll: Duration,
    probe: Option<LinkProbe>,
}

impl Monitor {
    /// `interval: None` turns the pool manager off.
    pub fn new(interval: Option<Duration>) -> Self {
        let interval = interval.filter(|d| !d.is_zero());
        let probe = match interval.map(|_| LinkProbe::open()).transpose() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch interfaces; the channel pool manager is off");
                None
            }
        };
        Self {
            interval,
            next_poll: Duration::ZERO,
            probe,
        }
    }

    fn watches(&self, ifaces: &[Iface]) -> bool {
        self.probe.is_some()
            && ifaces
                .iter()
                .any(|i| i.config.device.is_some() && i.state != IfaceState::Removed)
    }

    /// The device's current index, if it can be known.
    pub fn index_of(&mut self, device: &str) -> Option<u32> {
        self.probe.as_mut()?.link(device).map(|l| l.index)
    }

    /// When the next poll is due, if anything is watched.
    pub fn deadline(&self, ifaces: &[Iface]) -> Option<Duration> {
        self.watches(ifaces).then_some(self.next_poll)
    }

    /// Check every watched interface if a poll is due; returns what changed.
    pub fn poll(&mut self, now: Duration, ifaces: &[Iface]) -> Vec<Change> {
        let (Some(interval), true) = (self.interval, self.watches(ifaces)) else {
            return Vec::new();
        };
        if now < self.next_poll {
            return Vec::new();
        }
        self.next_poll = now + interval;
        let probe = self.probe.as_mut().expect("watches() checked the probe");
        // If the kernel cannot be asked, nothing is concluded from this poll.
        let links = match probe.links() {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "link dump failed");
                return Vec::new();
            }
        };
        let need_addrs = ifaces.iter().any(|i| {
            i.config.device.is_some()
                && i.state != IfaceState::Removed
                && !i.bound.ip().is_unspecified()
        });
        // If the address dump fails the address check is skipped, never failed.
        let addrs = if need_addrs {
            match probe.addresses() {
                Ok(a) => Some(a),
                Err(e) => {
                    tracing::debug!(error = %e, "address dump failed");
                    None
                }
            }
        } else {
            None
        };
        let mut changes = Vec::new();
        for (i, iface) in ifaces.iter().enumerate() {
            let Some(dev) = iface.config.device.as_deref() else {
                continue;
            };
            let link = links.iter().find(|(n, _)| n == dev).map(|(_, l)| *l);
            let health = health(link, iface.bound.ip(), addrs.as_deref());
            match (iface.state, health) {
                (IfaceState::Open, Err(reason)) => changes.push(Change::Down(i, reason)),
                (IfaceState::Open, Ok(index)) if iface.ifindex.is_some_and(|x| x != index) => {
                    changes.push(Change::Down(i, DownReason::Replaced));
                    changes.push(Change::Up(i));
                }
                (IfaceState::Down, Ok(_)) => changes.push(Change::Up(i)),
                _ => {}
            }
        }
        changes
    }
}

/// The device's index if it is usable for a socket bound to `ip`.
fn health(
    link: Option<Link>,
    ip: IpAddr,
    addrs: Option<&[(u32, IpAddr)]>,
) -> Result<u32, DownReason> {
    let link = link.ok_or(DownReason::Gone)?;
    if !link.up {
        return Err(DownReason::AdminDown);
    }
    if !link.carrier || link.dormant {
        return Err(DownReason::NoCarrier);
    }
    if let Some(addrs) = addrs {
        if !ip.is_unspecified() && !addrs.contains(&(link.index, ip)) {
            return Err(DownReason::NoAddress);
        }
    }
    Ok(link.index)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    pub index: u32,
    pub up: bool,
    pub carrier: bool,
    pub dormant: bool,
}

/// `struct ifaddrmsg`.
#[repr(C)]
#[derive(Clone, Copy)]
struct IfAddrMsg {
    family: u8,
    prefixlen: u8,
    flags: u8,
    scope: u8,
    index: u32,
}

/// A dump request: the header and an all-zero `ifinfomsg`/`ifaddrmsg` (16 bytes cover
/// either; the kernel reads the one its request type needs).
#[repr(C)]
struct DumpRequest {
    header: libc::nlmsghdr,
    family: [u8; 16],
}

const NLMSG_HDR: usize = size_of::<libc::nlmsghdr>();
/// `struct ifinfomsg`: family, pad, type, index, flags, change.
const IFINFO_LEN: usize = 16;
const IFLA_IFNAME: u16 = 3;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
/// Addresses that cannot be bound yet or any more (IPv6 duplicate address detection).
const IFA_F_UNUSABLE: u8 = (libc::IFA_F_TENTATIVE | libc::IFA_F_DADFAILED) as u8;

/// An rtnetlink socket for asking the kernel about links and addresses, in the namespace
/// it was opened in.
pub(crate) struct LinkProbe {
    netlink: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl LinkProbe {
    pub fn open() -> io::Result<Self> {
        // SAFETY: a plain socket(2) call; the descriptor is owned from here on.
        let netlink = unsafe {
            OwnedFd::from_raw_fd(cvt(libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            ))?)
        };
        // A dump is answered at once; never let a misbehaving kernel stall the driver.
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 200_000,
        };
        // SAFETY: `timeout` is a valid timeval of the size passed.
        cvt(unsafe {
            libc::setsockopt(
                netlink.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&timeout as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as libc::socklen_t,
            )
        })?;
        Ok(Self {
            netlink,
            seq: 0,
            buf: vec![0; 64 << 10],
        })
    }

    /// Every device in the namespace, by name.
    pub fn links(&mut self) -> io::Result<Vec<(String, Link)>> {
        let mut out = Vec::new();
        self.dump(libc::RTM_GETLINK, libc::RTM_NEWLINK, |body| {
            if let Some(l) = parse_link(body) {
                out.push(l);
            }
        })?;
        Ok(out)
    }

    /// One device; `None` if there is none of that name (or the kernel cannot be asked).
    pub fn link(&mut self, device: &str) -> Option<Link> {
        let links = self.links().ok()?;
        links.into_iter().find(|(n, _)| n == device).map(|(_, l)| l)
    }

    /// Every usable address in the namespace, as (device index, address).
    pub fn addresses(&mut self) -> io::Result<Vec<(u32, IpAddr)>> {
        let mut out = Vec::new();
        self.dump(libc::RTM_GETADDR, libc::RTM_NEWADDR, |body| {
            if let Some(a) = parse_addr(body) {
                out.push(a);
            }
        })?;
        Ok(out)
    }

    /// Send a dump request and hand the body of every `reply` message to `each`.
    fn dump(&mut self, request: u16, reply: u16, mut each: impl FnMut(&[u8])) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let req = DumpRequest {
            header: libc::nlmsghdr {
                nlmsg_len: size_of::<DumpRequest>() as u32,
                nlmsg_type: request,
                nlmsg_flags: (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16,
                nlmsg_seq: self.seq,
                nlmsg_pid: 0,
            },
            family: [0; 16], // AF_UNSPEC: every family
        };
        // SAFETY: all-zero is a valid sockaddr_nl (the kernel's address).
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `req` and `kernel` are valid for the sizes passed.
        let sent = unsafe {
            libc::sendto(
                self.netlink.as_raw_fd(),
                (&req as *const DumpRequest).cast(),
                size_of::<DumpRequest>(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            // SAFETY: `buf` is valid for writes of its length.
            let n = unsafe {
                libc::recv(
                    self.netlink.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    0,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if n == 0 || parse_dump(&self.buf[..n as usize], self.seq, reply, &mut each)? {
                return Ok(());
            }
        }
    }
}

fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Parse one datagram of a dump, handing the body of every `reply` message of request
/// `seq` to `each`; `true` once the dump is complete.
fn parse_dump(b: &[u8], seq: u32, reply: u16, each: &mut impl FnMut(&[u8])) -> io::Result<bool> {
    let mut off = 0;
    while off + NLMSG_HDR <= b.len() {
        let len = read_u32(b, off) as usize;
        let kind = read_u16(b, off + 4);
        let msg_seq = read_u32(b, off + 8);
        if len < NLMSG_HDR || off + len > b.len() {
            break;
        }
        let body = &b[off + NLMSG_HDR..off + len];
        off += align4(len);
        if msg_seq != seq {
            continue; // an answer to an earlier, abandoned request
        }
        match i32::from(kind) {
            libc::NLMSG_DONE => return Ok(true),
            libc::NLMSG_ERROR => {
                let code = if body.len() >= 4 {
                    read_u32(body, 0) as i32
                } else {
                    0
                };
                return if code == 0 {
                    Ok(true)
                } else {
                    Err(io::Error::from_raw_os_error(-code))
                };
            }
            _ if kind == reply => each(body),
            _ => {}
        }
    }
    Ok(false)
}

/// Route attributes `(type, payload)` from `b`.
fn attributes(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut off = 0;
    std::iter::from_fn(move || {
        if off + 4 > b.len() {
            return None;
        }
        let len = usize::from(read_u16(b, off));
        let kind = read_u16(b, off + 2);
        if len < 4 || off + len > b.len() {
            return None;
        }
        let data = &b[off + 4..off + len];
        off += align4(len);
        Some((kind, data))
    })
}

/// (name, link) of one `RTM_NEWLINK` message.
fn parse_link(body: &[u8]) -> Option<(String, Link)> {
    if body.len() < IFINFO_LEN {
        return None;
    }
    let index = read_u32(body, 4);
    let flags = read_u32(body, 8) as i32;
    let name = attributes(&body[IFINFO_LEN..])
        .find(|(k, _)| *k == IFLA_IFNAME)?
        .1;
    let name = name.split(|&c| c == 0).next()?;
    let link = Link {
        index,
        up: flags & libc::IFF_UP != 0,
        carrier: flags & libc::IFF_LOWER_UP != 0,
        dormant: flags & libc::IFF_DORMANT != 0,
    };
    Some((String::from_utf8_lossy(name).into_owned(), link))
}

/// (device index, local address) of one `RTM_NEWADDR` message, if usable.
fn parse_addr(body: &[u8]) -> Option<(u32, IpAddr)> {
    const MSG: usize = size_of::<IfAddrMsg>();
    if body.len() < MSG {
        return None;
    }
    let family = i32::from(body[0]);
    let flags = body[2];
    let index = read_u32(body, 4);
    if flags & IFA_F_UNUSABLE != 0 {
        return None;
    }
    let (mut local, mut address) = (None, None);
    for (kind, data) in attributes(&body[MSG..]) {
        let ip = match (family, data.len()) {
            (libc::AF_INET, 4) => Some(IpAddr::V4(Ipv4Addr::from(
                <[u8; 4]>::try_from(data).expect("4 bytes"),
            ))),
            (libc::AF_INET6, 16) => Some(IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(data).expect("16 bytes"),
            ))),
            _ => None,
        };
        match kind {
            IFA_LOCAL => local = ip,
            IFA_ADDRESS => address = ip,
            _ => {}
        }
    }
    // On point-to-point IPv4 links IFA_ADDRESS is the peer's; IFA_LOCAL is ours.
    local.or(address).map(|ip| (index, ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_up_and_has_its_address() {
        let mut probe = LinkProbe::open().unwrap();
        let lo = probe.link("lo").expect("every namespace has lo");
        assert!(lo.index > 0);
        let links = probe.links().unwrap();
        assert_eq!(links.iter().filter(|(n, _)| n == "lo").count(), 1);
        // lo may be down in a fresh namespace; when it is up it carries 127.0.0.1.
        if lo.up {
            let addrs = probe.addresses().unwrap();
            assert!(
                addrs.contains(&(lo.index, IpAddr::V4(Ipv4Addr::LOCALHOST))),
                "{addrs:?}"
            );
        }
        assert_eq!(probe.link("no-such-dev0"), None);
        assert_eq!(probe.link(""), None);
    }

    #[test]
    fn health_names_the_first_problem() {
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let link = |up, carrier| {
            Some(Link {
                index: 7,
                up,
                carrier,
                dormant: false,
            })
        };
        let here = [(7, ip)];
        let elsewhere = [(8, ip)];
        assert_eq!(health(None, ip, Some(&here)), Err(DownReason::Gone));
        assert_eq!(
            health(link(false, false), ip, Some(&here)),
            Err(DownReason::AdminDown)
        );
        assert_eq!(
            health(link(true, false), ip, Some(&here)),
            Err(DownReason::NoCarrier)
        );
        assert_eq!(
            health(link(true, true), ip, Some(&elsewhere)),
            Err(DownReason::NoAddress)
        );
        assert_eq!(health(link(true, true), ip, Some(&here)), Ok(7));
        let dormant = link(true, true).map(|l| Link { dormant: true, ..l });
        assert_eq!(health(dormant, ip, Some(&here)), Err(DownReason::NoCarrier));
        // Unknown addresses or an unspecified bind address skip the address check.
        assert_eq!(health(link(true, true), ip, None), Ok(7));
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        assert_eq!(health(link(true, true), any, Some(&[])), Ok(7));
    }

    fn parse_addr_dump(b: &[u8], seq: u32, out: &mut Vec<(u32, IpAddr)>) -> io::Result<bool> {
        parse_dump(b, seq, libc::RTM_NEWADDR, &mut |body: &[u8]| {
            out.extend(parse_addr(body))
        })
    }

    fn msg(seq: u32, kind: u16, body: &[u8]) -> Vec<u8> {
        let len = (NLMSG_HDR + body.len()) as u32;
        let mut m = Vec::new();
        m.extend_from_slice(&len.to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(body);
        while !m.len().is_multiple_of(4) {
            m.push(0);
        }
        m
    }

    fn with_attributes(mut b: Vec<u8>, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        for (kind, data) in attrs {
            b.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
            b.extend_from_slice(&kind.to_ne_bytes());
            b.extend_from_slice(data);
            while !b.len().is_multiple_of(4) {
                b.push(0);
            }
        }
        b
    }

    #[test]
    fn link_dump_parsing_reads_name_index_and_all_flags() {
        let mut info = vec![0u8, 0, 1, 0];
        info.extend_from_slice(&5u32.to_ne_bytes());
        let flags = libc::IFF_UP | libc::IFF_LOWER_UP;
        info.extend_from_slice(&(flags as u32).to_ne_bytes());
        info.extend_from_slice(&0u32.to_ne_bytes());
        let body = with_attributes(
            info,
            &[(4, &1500u32.to_ne_bytes()), (IFLA_IFNAME, b"wwan0\0")],
        );
        let mut dump = msg(9, libc::RTM_NEWLINK, &body);
        // An address message in a link dump is not a link.
        dump.extend(msg(9, libc::RTM_NEWADDR, &body));
        let mut out = Vec::new();
        assert!(!parse_dump(&dump, 9, libc::RTM_NEWLINK, &mut |b: &[u8]| out
            .extend(parse_link(b)))
        .unwrap());
        assert_eq!(
            out,
            vec![(
                "wwan0".to_string(),
                Link {
                    index: 5,
                    up: true,
                    carrier: true,
                    dormant: false
                }
            )]
        );
        assert_eq!(parse_link(&body[..IFINFO_LEN]), None, "no name, no link");
    }

    #[test]
    fn address_dump_parsing_keeps_local_addresses_and_skips_tentative_ones() {
        fn addr(family: i32, flags: u8, index: u32, attrs: &[(u16, &[u8])]) -> Vec<u8> {
            let mut b = vec![family as u8, 24, flags, 0];
            b.extend_from_slice(&index.to_ne_bytes());
            with_attributes(b, attrs)
        }
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let mut dump = Vec::new();
        // Point-to-point: the peer in IFA_ADDRESS, ours in IFA_LOCAL.
        dump.extend(msg(
            5,
            libc::RTM_NEWADDR,
            &addr(
                libc::AF_INET,
                0,
                3,
                &[(IFA_ADDRESS, &[192, 0, 2, 2]), (IFA_LOCAL, &[192, 0, 2, 1])],
            ),
        ));
        dump.extend(msg(
            5,
            libc::RTM_NEWADDR,
            &addr(libc::AF_INET6, 0, 4, &[(IFA_ADDRESS, &v6.octets())]),
        ));
        dump.extend(msg(
            5,
            libc::RTM_NEWADDR,
            &addr(
                libc::AF_INET6,
                libc::IFA_F_TENTATIVE as u8,
                4,
                &[(
                    IFA_ADDRESS,
                    &[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                )],
            ),
        ));
        // A stale answer to an older request is ignored.
        dump.extend(msg(
            4,
            libc::RTM_NEWADDR,
            &addr(libc::AF_INET, 0, 9, &[(IFA_LOCAL, &[10, 0, 0, 1])]),
        ));
        let mut out = Vec::new();
        assert!(!parse_addr_dump(&dump, 5, &mut out).unwrap());
        assert_eq!(
            out,
            vec![
                (3, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))),
                (4, IpAddr::V6(v6)),
            ]
        );
        assert!(parse_addr_dump(&msg(5, libc::NLMSG_DONE as u16, &[0; 4]), 5, &mut out).unwrap());
        let err = msg(5, libc::NLMSG_ERROR as u16, &(-libc::EPERM).to_ne_bytes());
        assert_eq!(
            parse_addr_dump(&err, 5, &mut out)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EPERM)
        );
        // Truncated input stops the parse without panicking.
        assert!(!parse_addr_dump(&dump[..dump.len() - 3], 5, &mut Vec::new()).unwrap());
    }
}
