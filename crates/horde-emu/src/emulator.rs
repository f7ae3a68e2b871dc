//! Starting and stopping the emulator: relay sockets, the receive and timer threads, and
//! the handle that controls them.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use horde_links::Link;
use socket2::{Domain, Protocol, Socket, Type};

use crate::channel_setup::ChannelSetup;
use crate::config::EmulatorConfig;
use crate::error::EmuError;
use crate::packet_log::{PacketLogging, PacketRecord};
use crate::port::PacketPort;
use crate::receiver::{Receiver, Waker};
use crate::schedule::{LinkState, ScheduleStep};
use crate::shared::{ChannelState, Clock, Core, Shared};
use crate::stats::Stats;
use crate::timer::{self, ChannelSockets, TimerOptions};

/// Socket buffer size asked for on every relay socket (the kernel may cap it).
const SOCKET_BUFFER: usize = 4 << 20;

/// One point-to-point channel between two packet ports (for example the two TUN
/// devices of an emulated IP link): what the client-facing port reads crosses `up` and
/// is written to the server-facing port; what that one reads crosses `down` back.
pub struct PortChannel {
    pub name: String,
    pub client_facing: Box<dyn PacketPort>,
    pub server_facing: Box<dyn PacketPort>,
    pub up: Box<dyn Link>,
    pub down: Box<dyn Link>,
    pub schedule: Vec<ScheduleStep>,
}

/// Entry point: [`Emulator::start`] for a configuration, [`Emulator::start_with`] for
/// links built by the caller.
pub struct Emulator;

impl Emulator {
    /// Build the configured links and start relaying.
    pub fn start(config: &EmulatorConfig) -> Result<EmulatorHandle, EmuError> {
        Self::start_with(config.build_channels()?, config.timer.options())
    }

    /// Start relaying for channels whose links the caller built.
    pub fn start_with(
        channels: Vec<ChannelSetup>,
        options: TimerOptions,
    ) -> Result<EmulatorHandle, EmuError> {
        check_names(channels.iter().map(|c| c.name.as_str()))?;
        let mut sockets = Vec::with_capacity(channels.len());
        let mut states = Vec::with_capacity(channels.len());
        let mut names = Vec::with_capacity(channels.len());
        let mut addrs = Vec::with_capacity(channels.len());
        for c in channels {
            let client_facing = bind(&c.name, c.listen)?;
            let server_side = server_side_bind_addr(c.forward_to);
            let server_facing = bind(&c.name, server_side)?;
            let local = local_addr(&c.name, &client_facing, c.listen)?;
            let server_local = local_addr(&c.name, &server_facing, server_side)?;
            states.push(ChannelState::new(
                c.name.clone(),
                local,
                Some(c.forward_to),
                LinkState::new(c.schedule),
                c.up,
                c.down,
            ));
            sockets.push(ChannelSockets {
                client_facing: Box::new(client_facing),
                server_facing: Box::new(server_facing),
            });
            names.push(c.name);
            addrs.push((local, server_local));
        }
        launch(states, sockets, names, addrs, options, PacketLogging::Off)
    }

    /// Start relaying between the given ports, keeping per-packet records as `logging`
    /// says ([`EmulatorHandle::take_packet_records`]). Channel stats of these channels
    /// show the unspecified address `0.0.0.0:0` as their client address.
    pub fn start_ports(
        channels: Vec<PortChannel>,
        options: TimerOptions,
        logging: PacketLogging,
    ) -> Result<EmulatorHandle, EmuError> {
        check_names(channels.iter().map(|c| c.name.as_str()))?;
        let none: SocketAddr = (std::net::Ipv4Addr::UNSPECIFIED, 0).into();
        let mut sockets = Vec::with_capacity(channels.len());
        let mut states = Vec::with_capacity(channels.len());
        let mut names = Vec::with_capacity(channels.len());
        for c in channels {
            states.push(ChannelState::new(
                c.name.clone(),
                none,
                None,
                LinkState::new(c.schedule),
                c.up,
                c.down,
            ));
            sockets.push(ChannelSockets {
                client_facing: c.client_facing,
                server_facing: c.server_facing,
            });
            names.push(c.name);
        }
        let addrs = vec![(none, none); names.len()];
        launch(states, sockets, names, addrs, options, logging)
    }
}

/// Start the receive and release threads over built channels.
fn launch(
    states: Vec<ChannelState>,
    sockets: Vec<ChannelSockets>,
    names: Vec<String>,
    addrs: Vec<(SocketAddr, SocketAddr)>,
    options: TimerOptions,
    logging: PacketLogging,
) -> Result<EmulatorHandle, EmuError> {
    let sockets = Arc::new(sockets);
    let shared = Arc::new(Shared::new(Core::new(states, logging), Clock::start()));
    let (receiver, waker) = Receiver::new(&sockets)?;

    let mut threads = Vec::with_capacity(2);
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(f)
            .map_err(|e| EmuError::os("spawn thread", e))
    };
    let (s, k) = (shared.clone(), sockets.clone());
    threads.push(spawn(
        "horde-emu-timer",
        Box::new(move || timer::run(s, k, options)),
    )?);
    let (s, k) = (shared.clone(), sockets.clone());
    let rt = options.realtime_priority;
    let recv = spawn("horde-emu-recv", Box::new(move || receiver.run(s, k, rt)));
    let mut handle = EmulatorHandle {
        shared,
        waker,
        names,
        addrs,
        threads,
    };
    handle.threads.push(recv?);
    Ok(handle)
}

/// Bind the server-facing socket on loopback when the destination is local, else on
/// the wildcard address of the destination's family; the port is always ephemeral.
fn server_side_bind_addr(forward_to: SocketAddr) -> SocketAddr {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let ip = match (forward_to.ip().is_loopback(), forward_to.ip()) {
        (true, IpAddr::V4(_)) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        (true, IpAddr::V6(_)) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        (false, IpAddr::V4(_)) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        (false, IpAddr::V6(_)) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}

fn check_names<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), EmuError> {
    let mut seen = std::collections::HashSet::new();
    for (i, name) in names.enumerate() {
        if name.is_empty() {
            return Err(EmuError::Setup(format!("channel #{} has no name", i + 1)));
        }
        if !seen.insert(name) {
            return Err(EmuError::Setup(format!("two channels are named `{name}`")));
        }
    }
    Ok(())
}

fn bind(channel: &str, addr: SocketAddr) -> Result<UdpSocket, EmuError> {
    let err = |source| EmuError::Bind {
        channel: channel.to_string(),
        addr,
        source,
    };
    let socket =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(err)?;
    // Larger buffers absorb bursts; failure to enlarge them is harmless.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.bind(&addr.into()).map_err(err)?;
    socket.set_nonblocking(true).map_err(err)?;
    Ok(socket.into())
}

fn local_addr(channel: &str, s: &UdpSocket, requested: SocketAddr) -> Result<SocketAddr, EmuError> {
    s.local_addr().map_err(|source| EmuError::Bind {
        channel: channel.to_string(),
        addr: requested,
        source,
    })
}

/// Controls a running emulator. Dropping it stops the threads, like [`shutdown`](Self::shutdown).
pub struct EmulatorHandle {
    shared: Arc<Shared>,
    waker: Arc<Waker>,
    names: Vec<String>,
    /// (client-facing, server-facing) local addresses per channel.
    addrs: Vec<(SocketAddr, SocketAddr)>,
    threads: Vec<JoinHandle<()>>,
}

impl EmulatorHandle {
    fn index(&self, channel: &str) -> Result<usize, EmuError> {
        self.names
            .iter()
            .position(|n| n == channel)
            .ok_or_else(|| EmuError::UnknownChannel(channel.to_string()))
    }

    /// Channel names in configuration order.
    pub fn channels(&self) -> &[String] {
        &self.names
    }

    /// The address the client (Horde sender) sends to for this channel.
    pub fn client_addr(&self, channel: &str) -> Option<SocketAddr> {
        self.index(channel).ok().map(|i| self.addrs[i].0)
    }

    /// The address the server sees as the source of this channel's packets.
    pub fn server_side_addr(&self, channel: &str) -> Option<SocketAddr> {
        self.index(channel).ok().map(|i| self.addrs[i].1)
    }

    /// Take a channel down (drop everything both ways) or bring it back, now. A later
    /// scheduled step overrides this when its time comes.
    pub fn set_down(&self, channel: &str, down: bool) -> Result<(), EmuError> {
        let i = self.index(channel)?;
        let now = self.shared.clock.now();
        self.shared.lock().channels[i].state.set_down(now, down);
        Ok(())
    }

    /// Time since the emulator started (the time base of links and schedules).
    pub fn elapsed(&self) -> Duration {
        self.shared.clock.now()
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> Stats {
        let now = self.shared.clock.now();
        let channels = self.shared.lock().snapshot(now);
        Stats {
            elapsed: now,
            channels,
        }
    }

    /// Per-packet records kept since the last call; empty unless the emulator was
    /// started with packet logging. Call it regularly: records accumulate in memory.
    pub fn take_packet_records(&self) -> Vec<PacketRecord> {
        self.shared.lock().take_records()
    }

    /// Stop both threads, wait for them, and return the final stats.
    pub fn shutdown(mut self) -> Stats {
        self.stop();
        self.stats()
    }

    /// Whether both threads are still running (false after a thread panicked).
    pub fn is_running(&self) -> bool {
        !self.threads.is_empty() && self.threads.iter().all(|t| !t.is_finished())
    }

    fn stop(&mut self) {
        self.shared.request_shutdown();
        self.waker.wake();
        for t in self.threads.drain(..) {
            let name = t.thread().name().unwrap_or("?").to_string();
            if t.join().is_err() {
                tracing::error!("emulator thread {name} panicked");
            }
        }
    }
}

impl Drop for EmulatorHandle {
    fn drop(&mut self) {
        self.stop();
    }
}
