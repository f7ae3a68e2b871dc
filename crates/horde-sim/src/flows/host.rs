//! A simulated host: a smoltcp interface and its sockets on a device whose "wire" is a
//! pair of queues the simulator fills and empties in virtual time.

use std::collections::VecDeque;
use std::time::Duration;

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, Ipv4Address};

/// The client's address. Only a label inside the simulation (TEST-NET-1, RFC 5737).
pub const CLIENT_ADDR: Ipv4Address = Ipv4Address::new(192, 0, 2, 1);
/// The server's address (likewise a label).
pub const SERVER_ADDR: Ipv4Address = Ipv4Address::new(192, 0, 2, 2);
/// IP MTU of the simulated interfaces, as on the emulated links' TUN devices.
pub const MTU: usize = 1500;

/// smoltcp's clock from the simulator's.
pub fn instant(t: Duration) -> Instant {
    Instant::from_micros(t.as_micros() as i64)
}

/// The simulator's clock from smoltcp's (never before zero).
pub fn duration(t: Instant) -> Duration {
    Duration::from_micros(t.total_micros().max(0) as u64)
}

/// Packets waiting to enter smoltcp, and those it sent.
#[derive(Default)]
pub struct QueueDevice {
    pub rx: VecDeque<Vec<u8>>,
    pub tx: Vec<Vec<u8>>,
}

pub struct RxToken(Vec<u8>);
pub struct TxToken<'a>(&'a mut Vec<Vec<u8>>);

impl phy::RxToken for RxToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0; len];
        let r = f(&mut buf);
        self.0.push(buf);
        r
    }
}

impl phy::Device for QueueDevice {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _: Instant) -> Option<(RxToken, TxToken<'_>)> {
        let p = self.rx.pop_front()?;
        Some((RxToken(p), TxToken(&mut self.tx)))
    }

    fn transmit(&mut self, _: Instant) -> Option<TxToken<'_>> {
        Some(TxToken(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = MTU;
        // Nothing on a simulated path corrupts bytes; skipping checksums saves time.
        caps.checksum = ChecksumCapabilities::ignored();
        caps
    }
}

/// One host: interface, device and sockets.
pub struct SimHost {
    pub iface: Interface,
    pub device: QueueDevice,
    pub sockets: SocketSet<'static>,
}

impl SimHost {
    /// A host with address `addr`; `seed` feeds smoltcp's own choices (initial sequence
    /// numbers), so a run is repeatable.
    pub fn new(addr: Ipv4Address, seed: u64) -> Self {
        let mut device = QueueDevice::default();
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = seed;
        let mut iface = Interface::new(config, &mut device, Instant::ZERO);
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(addr), 24))
                .expect("one address fits");
        });
        SimHost {
            iface,
            device,
            sockets: SocketSet::new(Vec::new()),
        }
    }

    /// Let smoltcp process what arrived and send what it can.
    pub fn poll(&mut self, now: Duration) {
        self.iface
            .poll(instant(now), &mut self.device, &mut self.sockets);
    }

    /// When smoltcp next wants to be polled, if it has a timer running.
    pub fn poll_at(&mut self, now: Duration) -> Option<Duration> {
        self.iface
            .poll_at(instant(now), &self.sockets)
            .map(duration)
    }

    pub fn add(&mut self, socket: tcp::Socket<'static>) -> SocketHandle {
        self.sockets.add(socket)
    }

    pub fn tcp(&mut self, h: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(h)
    }

    pub fn remove(&mut self, h: SocketHandle) {
        self.sockets.remove(h);
    }
}
