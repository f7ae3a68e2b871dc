//! The ATP paper's TCP baselines (§5.2) on kernel TCP. NAI-TCP: one blocking
//! connection, a FIFO queue that ignores priorities, and a 1-byte acknowledgement from
//! the receiver per message, so that a send completes when the receiver has the message.
//! Whenever a send completes, the first queued message is sent if less than half of its
//! timer has passed, and discarded otherwise. A message counts as delivered when its
//! send completed within its timer. NAI-MTCP(k): the same per priority level, on one
//! connection per level and `k` for the most important one, all sending at once; a send
//! once started is not aborted.
//!
//! The sender runs inside a `horde shell` namespace ([`send`]); the receiver on the host
//! ([`receive`]).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::workloads::Arrival;

/// Bytes of the header in front of each message: its id and its length.
const HEADER: usize = 16;
/// How long a single read or write may block (the synthetic trace has 40 s without
/// bandwidth).
const IO_TIMEOUT: Duration = Duration::from_secs(120);

/// What happened to one class of messages.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClassOutcome {
    /// Messages of the class in the workload.
    pub total: u64,
    /// Sends that completed within the timer.
    pub delivered: u64,
    /// Sends that completed after it.
    pub late: u64,
    /// Discarded by the half-timer rule before they were sent.
    pub discarded: u64,
}

/// Messages waiting to be sent, oldest first, shared by the connections that serve them.
struct SharedQueue {
    arrivals: Vec<Arrival>,
    cursor: Mutex<usize>,
}

/// What a connection finds when it looks at its queue.
enum Next {
    Send(Arrival),
    WaitUntil(Duration),
    Done,
}

impl SharedQueue {
    fn next(&self, now: Duration) -> Next {
        let mut cursor = self.cursor.lock().expect("not poisoned");
        match self.arrivals.get(*cursor) {
            Some(a) if a.at <= now => {
                *cursor += 1;
                Next::Send(*a)
            }
            Some(a) => Next::WaitUntil(a.at),
            None => Next::Done,
        }
    }
}

/// One connection's loop: whenever its previous send completed, it takes the oldest
/// message of its queue, discards it if half its timer has passed, else sends it and
/// waits for the acknowledgement.
fn serve(
    stream: &mut TcpStream,
    queue: &SharedQueue,
    start: Instant,
    stop: Duration,
    out: &Mutex<Vec<ClassOutcome>>,
) -> Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let payload = vec![0u8; queue.arrivals.iter().map(|a| a.size).max().unwrap_or(0) as usize];
    let mut ack = [0u8; 1];
    loop {
        let now = start.elapsed();
        if now >= stop {
            return Ok(());
        }
        let a = match queue.next(now) {
            Next::Send(a) => a,
            Next::WaitUntil(at) => {
                std::thread::sleep(at.saturating_sub(now).min(stop - now));
                continue;
            }
            Next::Done => return Ok(()),
        };
        if now.saturating_sub(a.at) >= a.timer / 2 {
            out.lock().expect("not poisoned")[a.class].discarded += 1;
            continue;
        }
        let mut header = [0u8; HEADER];
        header[8..].copy_from_slice(&a.size.to_le_bytes());
        stream.write_all(&header).context("send a header")?;
        stream
            .write_all(&payload[..a.size as usize])
            .context("send a message")?;
        stream
            .read_exact(&mut ack)
            .context("wait for the acknowledgement")?;
        let mut out = out.lock().expect("not poisoned");
        if start.elapsed().saturating_sub(a.at) <= a.timer {
            out[a.class].delivered += 1;
        } else {
            out[a.class].late += 1;
        }
    }
}

/// How many connections serve which messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// NAI-TCP: one connection, one FIFO for every message.
    Single,
    /// NAI-MTCP(k): one connection and FIFO per priority level, `k` connections for the
    /// most important level.
    PerPriority { high: usize },
}

impl Layout {
    /// The queues of `arrivals` (by `priority` of each class) and how many connections
    /// serve each.
    fn queues(
        self,
        arrivals: &[Arrival],
        priority: impl Fn(usize) -> u8,
    ) -> Vec<(Vec<Arrival>, usize)> {
        match self {
            Layout::Single => vec![(arrivals.to_vec(), 1)],
            Layout::PerPriority { high } => {
                let levels = arrivals
                    .iter()
                    .map(|a| priority(a.class))
                    .max()
                    .map_or(0, |m| m + 1);
                (0..levels)
                    .map(|level| {
                        let of_level: Vec<Arrival> = arrivals
                            .iter()
                            .filter(|a| priority(a.class) == level)
                            .copied()
                            .collect();
                        (of_level, if level == 0 { high.max(1) } else { 1 })
                    })
                    .filter(|(a, _)| !a.is_empty())
                    .collect()
            }
        }
    }

    /// How many connections it opens for `arrivals`.
    pub fn connections(self, arrivals: &[Arrival], priority: impl Fn(usize) -> u8) -> usize {
        self.queues(arrivals, priority).iter().map(|(_, n)| n).sum()
    }
}

/// A connection to `to`; with `mptcp`, an MPTCP one (its subflows go out on every link
/// the namespace has an MPTCP endpoint for).
fn connect(to: (&str, u16), mptcp: bool) -> Result<TcpStream> {
    let context = || format!("connect to {}:{}", to.0, to.1);
    if !mptcp {
        return TcpStream::connect(to).with_context(context);
    }
    let addr = to
        .to_socket_addrs()
        .with_context(context)?
        .next()
        .with_context(context)?;
    let socket = horde_emu::sys::stream_socket(addr, true)
        .context("create an MPTCP socket (is net.mptcp.enabled = 1?)")?;
    socket.connect(&addr.into()).with_context(context)?;
    Ok(socket.into())
}

/// Sends `arrivals` (each at its time from now) to `to` over the connections of `layout`,
/// until all are sent or discarded or `stop` has passed; returns the outcome per class.
pub fn send(
    to: (&str, u16),
    arrivals: &[Arrival],
    priority: impl Fn(usize) -> u8,
    layout: Layout,
    stop: Duration,
    mptcp: bool,
) -> Result<Vec<ClassOutcome>> {
    let classes = arrivals.iter().map(|a| a.class + 1).max().unwrap_or(0);
    let mut totals = vec![ClassOutcome::default(); classes];
    for a in arrivals {
        totals[a.class].total += 1;
    }
    let out = Mutex::new(totals);
    let mut connections = Vec::new();
    for (of_queue, n) in layout.queues(arrivals, priority) {
        let queue = Arc::new(SharedQueue {
            arrivals: of_queue,
            cursor: Mutex::new(0),
        });
        for _ in 0..n {
            let stream = connect(to, mptcp)?;
            connections.push((stream, queue.clone()));
        }
    }
    let start = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = connections
            .iter_mut()
            .map(|(stream, queue)| {
                let out = &out;
                scope.spawn(move || {
                    let result = serve(stream, queue, start, stop, out);
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    result
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a sender connection panicked"))??;
        }
        Ok::<(), anyhow::Error>(())
    })?;
    Ok(out.into_inner().expect("not poisoned"))
}

/// Where [`receive`] leaves handles on its connections, so that the caller can end them
/// once the sender is gone (the sender's close may never cross a link already torn
/// down), and the flag that tells it to stop accepting.
#[derive(Debug, Clone, Default)]
pub struct ReceiverHandle {
    streams: Arc<Mutex<Vec<TcpStream>>>,
    done: Arc<AtomicBool>,
}

impl ReceiverHandle {
    /// Ends the receiver: no more accepts, and every connection shut.
    pub fn finish(&self) {
        self.done.store(true, Ordering::SeqCst);
        for s in self.streams.lock().expect("not poisoned").drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Accepts up to `connections` connections on `listener` and acknowledges every whole
/// message on each with one byte, until each is closed by the sender or the caller
/// [finishes](ReceiverHandle::finish). Returns the messages received.
pub fn receive(listener: TcpListener, connections: usize, handle: &ReceiverHandle) -> Result<u64> {
    listener.set_nonblocking(true)?;
    let mut workers = Vec::new();
    while workers.len() < connections && !handle.done.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                stream.set_nodelay(true)?;
                stream.set_read_timeout(Some(IO_TIMEOUT))?;
                handle
                    .streams
                    .lock()
                    .expect("not poisoned")
                    .push(stream.try_clone()?);
                workers.push(std::thread::spawn(move || acknowledge(stream)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e).context("accept the sender"),
        }
    }
    Ok(workers.into_iter().map(|w| w.join().unwrap_or(0)).sum())
}

/// Acknowledges every whole message on `stream` until it ends; returns how many.
fn acknowledge(mut stream: TcpStream) -> u64 {
    let mut header = [0u8; HEADER];
    let mut buf = vec![0u8; 64 * 1024];
    let mut count = 0;
    loop {
        if stream.read_exact(&mut header).is_err() {
            // Closed by the sender or by the caller: the run is over.
            return count;
        }
        let mut left = u64::from_le_bytes(header[8..].try_into().expect("8 bytes"));
        while left > 0 {
            let n = (left as usize).min(buf.len());
            if stream.read_exact(&mut buf[..n]).is_err() {
                return count;
            }
            left -= n as u64;
        }
        if stream.write_all(&[1]).is_err() {
            return count;
        }
        count += 1;
    }
}

/// The sender's side as a command inside the shell: connects to `HORDE_SHELL_HOST:port`,
/// runs, and writes the outcome as JSON to `out`.
pub fn send_command(
    port: u16,
    arrivals: &[Arrival],
    priority: impl Fn(usize) -> u8,
    layout: Layout,
    stop: Duration,
    mptcp: bool,
    out: &Path,
) -> Result<()> {
    let Ok(host) = std::env::var("HORDE_SHELL_HOST") else {
        bail!("HORDE_SHELL_HOST is not set: run this inside `horde shell`");
    };
    let outcome = send(
        (host.as_str(), port),
        arrivals,
        priority,
        layout,
        stop,
        mptcp,
    )?;
    std::fs::write(out, serde_json::to_vec(&outcome)?)
        .with_context(|| format!("write {}", out.display()))?;
    Ok(())
}
