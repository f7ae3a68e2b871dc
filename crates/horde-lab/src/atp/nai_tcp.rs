//! NAI-TCP, the ATP paper's simplest baseline (§5.2), on kernel TCP: one blocking
//! connection, a FIFO queue that ignores priorities, and a 1-byte acknowledgement from
//! the receiver per message, so that a send completes when the receiver has the message.
//! Whenever a send completes, the first queued message is sent if less than half of its
//! timer has passed, and discarded otherwise. A message counts as delivered when its
//! send completed within its timer.
//!
//! The sender runs inside a `horde shell` namespace ([`send`]); the receiver on the host
//! ([`receive`]).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
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

/// Sends `arrivals` over `stream`, each at its time (from now), until all are sent or
/// discarded or `stop` has passed; returns the outcome per class.
pub fn send(
    stream: &mut TcpStream,
    arrivals: &[Arrival],
    stop: Duration,
) -> Result<Vec<ClassOutcome>> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let classes = arrivals.iter().map(|a| a.class + 1).max().unwrap_or(0);
    let mut out = vec![ClassOutcome::default(); classes];
    for a in arrivals {
        out[a.class].total += 1;
    }
    let payload = vec![0u8; arrivals.iter().map(|a| a.size).max().unwrap_or(0) as usize];
    let start = Instant::now();
    let mut queue: VecDeque<&Arrival> = VecDeque::new();
    let mut next = 0;
    let mut ack = [0u8; 1];
    loop {
        let now = start.elapsed();
        if now >= stop {
            break;
        }
        while next < arrivals.len() && arrivals[next].at <= now {
            queue.push_back(&arrivals[next]);
            next += 1;
        }
        let Some(a) = queue.pop_front() else {
            let Some(upcoming) = arrivals.get(next) else {
                break;
            };
            std::thread::sleep(upcoming.at.saturating_sub(now));
            continue;
        };
        if now.saturating_sub(a.at) >= a.timer / 2 {
            out[a.class].discarded += 1;
            continue;
        }
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(&(next as u64).to_le_bytes());
        header[8..].copy_from_slice(&a.size.to_le_bytes());
        stream.write_all(&header).context("send a header")?;
        stream
            .write_all(&payload[..a.size as usize])
            .context("send a message")?;
        stream
            .read_exact(&mut ack)
            .context("wait for the acknowledgement")?;
        if start.elapsed().saturating_sub(a.at) <= a.timer {
            out[a.class].delivered += 1;
        } else {
            out[a.class].late += 1;
        }
    }
    Ok(out)
}

/// Where [`receive`] leaves a handle on its connection, so that the caller can end it
/// once the sender is gone (the sender's close may never cross a link already torn down).
pub type ReceiverHandle = Arc<Mutex<Option<TcpStream>>>;

/// Accepts one connection on `listener` and acknowledges every whole message with one
/// byte, until the sender closes it or the caller shuts `handle`'s stream. Returns the
/// messages received.
pub fn receive(listener: &TcpListener, handle: &ReceiverHandle) -> Result<u64> {
    let (mut stream, _) = listener.accept().context("accept the sender")?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    *handle.lock().expect("not poisoned") = Some(stream.try_clone()?);
    let mut header = [0u8; HEADER];
    let mut buf = vec![0u8; 64 * 1024];
    let mut count = 0;
    loop {
        if stream.read_exact(&mut header).is_err() {
            // Closed by the sender or by the caller: the run is over.
            return Ok(count);
        }
        let mut left = u64::from_le_bytes(header[8..].try_into().expect("8 bytes"));
        while left > 0 {
            let n = (left as usize).min(buf.len());
            if stream.read_exact(&mut buf[..n]).is_err() {
                return Ok(count);
            }
            left -= n as u64;
        }
        if stream.write_all(&[1]).is_err() {
            return Ok(count);
        }
        count += 1;
    }
}

/// The sender's side as a command inside the shell: connects to `HORDE_SHELL_HOST:port`,
/// runs, and writes the outcome as JSON to `out`.
pub fn send_command(port: u16, arrivals: &[Arrival], stop: Duration, out: &Path) -> Result<()> {
    let Ok(host) = std::env::var("HORDE_SHELL_HOST") else {
        bail!("HORDE_SHELL_HOST is not set: run this inside `horde shell`");
    };
    let mut stream = TcpStream::connect((host.as_str(), port))
        .with_context(|| format!("connect to {host}:{port}"))?;
    let outcome = send(&mut stream, arrivals, stop)?;
    let _ = stream.shutdown(std::net::Shutdown::Both);
    std::fs::write(out, serde_json::to_vec(&outcome)?)
        .with_context(|| format!("write {}", out.display()))?;
    Ok(())
}
