//! The receive thread: one epoll set over every relay socket plus an eventfd for
//! shutdown. Readable sockets are drained in batches; each batch enters the links under
//! one lock, and the timer thread is woken if the earliest deadline moved earlier.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::error::EmuError;
use crate::port::PacketPort;
use crate::realtime;
use crate::shared::Shared;
use crate::stats::Direction;
use crate::timer::ChannelSockets;

/// Largest UDP payload.
const MAX_DATAGRAM: usize = 65_536;
/// Packets read from one socket before handing them to the links.
const BATCH: usize = 32;
/// Batches read from one socket before serving the next ready socket.
const BATCHES_PER_ROUND: usize = 4;
const WAKER_TOKEN: u64 = u64::MAX;

/// An eventfd that makes the receive thread return.
pub(crate) struct Waker {
    fd: OwnedFd,
}

impl Waker {
    fn new() -> Result<Self, EmuError> {
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(EmuError::os("eventfd", io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Self {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        let _ = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

/// The epoll set, ready to run on its own thread.
pub(crate) struct Receiver {
    epoll: OwnedFd,
    waker: Arc<Waker>,
}

fn epoll_add(epoll: RawFd, fd: RawFd, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: both descriptors are open; ev is a valid epoll_event.
    if unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Receiver {
    /// Register every socket (token `2 * channel + side`, side 0 = client-facing).
    pub fn new(sockets: &[ChannelSockets]) -> Result<(Self, Arc<Waker>), EmuError> {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(EmuError::os("epoll_create1", io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let waker = Arc::new(Waker::new()?);
        let add = |fd, token| {
            epoll_add(epoll.as_raw_fd(), fd, token).map_err(|e| EmuError::os("epoll_ctl", e))
        };
        add(waker.fd.as_raw_fd(), WAKER_TOKEN)?;
        for (i, s) in sockets.iter().enumerate() {
            add(s.client_facing.raw_fd(), 2 * i as u64)?;
            add(s.server_facing.raw_fd(), 2 * i as u64 + 1)?;
        }
        Ok((
            Self {
                epoll,
                waker: waker.clone(),
            },
            waker,
        ))
    }

    /// Receive until shutdown; `realtime_priority` as in [`crate::TimerOptions`].
    pub fn run(
        self,
        shared: Arc<Shared>,
        sockets: Arc<Vec<ChannelSockets>>,
        realtime_priority: Option<i32>,
    ) {
        // Real-time too (just below the release thread), so that it is not preempted
        // while holding the lock the release thread needs.
        if let Some(p) = realtime_priority {
            realtime::go_realtime((p - 1).max(1));
        }
        let _keep_waker = self.waker;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 2 * sockets.len() + 1];
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut batch: Vec<(Vec<u8>, Option<SocketAddr>)> = Vec::with_capacity(BATCH);
        while !shared.is_shutdown() {
            // SAFETY: events has room for events.len() entries.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    -1,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("epoll_wait failed, receive thread stops: {e}");
                return;
            }
            for ev in &events[..n as usize] {
                let token = ev.u64;
                if token == WAKER_TOKEN {
                    continue;
                }
                let channel = (token / 2) as usize;
                let (socket, dir) = if token % 2 == 0 {
                    (&sockets[channel].client_facing, Direction::Up)
                } else {
                    (&sockets[channel].server_facing, Direction::Down)
                };
                // A bounded number of batches per socket and round, so that one flooded
                // socket cannot starve the others (epoll is level-triggered).
                for _ in 0..BATCHES_PER_ROUND {
                    let drained = read_batch(socket.as_ref(), &mut buf, &mut batch);
                    if !batch.is_empty() {
                        enqueue(&shared, channel, dir, &mut batch);
                    }
                    if drained {
                        break;
                    }
                }
            }
        }
    }
}

/// Read up to [`BATCH`] datagrams; returns true once the socket has nothing more.
fn read_batch(
    socket: &dyn PacketPort,
    buf: &mut [u8],
    batch: &mut Vec<(Vec<u8>, Option<SocketAddr>)>,
) -> bool {
    while batch.len() < BATCH {
        match socket.recv(buf) {
            Ok((n, from)) => batch.push((buf[..n].to_vec(), from)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                // e.g. an ICMP error reported on the socket; the datagram is gone.
                tracing::debug!("recv failed: {e}");
                return batch.is_empty();
            }
        }
    }
    false
}

fn enqueue(
    shared: &Shared,
    channel: usize,
    dir: Direction,
    batch: &mut Vec<(Vec<u8>, Option<SocketAddr>)>,
) {
    let mut core = shared.lock();
    let mut earliest = None;
    for (payload, from) in batch.drain(..) {
        if dir == Direction::Up && from.is_some() {
            core.channels[channel].client = from;
        }
        let now = shared.clock.now();
        if let Some(next) = core.offer(channel, dir, now, payload) {
            earliest = Some(earliest.map_or(next, |e: std::time::Duration| e.min(next)));
        }
    }
    if let Some(deadline) = earliest {
        shared.deadline_added(&core, deadline);
    }
}
