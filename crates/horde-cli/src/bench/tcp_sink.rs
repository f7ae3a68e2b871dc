//! The host end of the kernel contenders: an MPTCP listener (which takes plain TCP too)
//! that reads whatever its clients send and counts the bytes that arrive within one
//! window, which opens at the first accepted connection. Clients never finish on their
//! own; the window is what bounds the measurement.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use horde_emu::sys;

/// How often blocked accepts and reads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

struct Shared {
    window: Duration,
    opened: Mutex<Option<Instant>>,
    bytes: AtomicU64,
    connections: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    /// Count `n` bytes read now, if the window is still open.
    fn count(&self, n: usize) {
        let opened = *self.opened.lock().expect("sink lock");
        if opened.is_some_and(|at| at.elapsed() < self.window) {
            self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

pub struct TcpSink {
    shared: Arc<Shared>,
    port: u16,
    acceptor: Option<JoinHandle<()>>,
}

impl TcpSink {
    /// Listen on every host address (subflows arrive on every link's host side).
    pub fn start(window: Duration) -> Result<TcpSink> {
        let any: SocketAddr = "0.0.0.0:0".parse().expect("address literal");
        let socket = sys::stream_socket(any, true)
            .context("create an MPTCP listener (is net.mptcp.enabled = 1 on this host?)")?;
        socket.bind(&any.into()).context("bind the TCP sink")?;
        socket.listen(64)?;
        let listener: TcpListener = socket.into();
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            window,
            opened: Mutex::new(None),
            bytes: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let acceptor = std::thread::spawn(move || accept_loop(&listener, &s));
        Ok(TcpSink {
            shared,
            port,
            acceptor: Some(acceptor),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// When the first connection was accepted.
    pub fn opened(&self) -> Option<Instant> {
        *self.shared.opened.lock().expect("sink lock")
    }

    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Whether the window has opened and gone by.
    pub fn window_over(&self) -> bool {
        self.opened()
            .is_some_and(|at| at.elapsed() >= self.shared.window)
    }

    /// Bytes that arrived within the window.
    pub fn bytes(&self) -> u64 {
        self.shared.bytes.load(Ordering::Relaxed)
    }
}

impl Drop for TcpSink {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut readers = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                shared
                    .opened
                    .lock()
                    .expect("sink lock")
                    .get_or_insert_with(Instant::now);
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let s = shared.clone();
                readers.push(std::thread::spawn(move || read_all(stream, &s)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => {
                eprintln!("bench: the TCP sink stopped accepting: {e}");
                break;
            }
        }
    }
    for r in readers {
        let _ = r.join();
    }
}

/// Read until the peer goes away or the sink stops. The namespace of the peer can vanish
/// without a FIN or RST reaching this end, hence the read timeout.
fn read_all(mut stream: TcpStream, shared: &Shared) {
    if stream.set_nonblocking(false).is_err() || stream.set_read_timeout(Some(POLL)).is_err() {
        return;
    }
    let mut buf = vec![0u8; 256 * 1024];
    while !shared.stop.load(Ordering::Relaxed) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => shared.count(n),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn bytes_count_only_inside_the_window() {
        let sink = TcpSink::start(Duration::from_millis(300)).unwrap();
        assert!(sink.opened().is_none() && !sink.window_over());
        let mut c = TcpStream::connect(("127.0.0.1", sink.port())).unwrap();
        c.write_all(&[1u8; 1000]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while sink.bytes() < 1000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(sink.bytes(), 1000);
        assert_eq!(sink.connections(), 1);
        while !sink.window_over() {
            std::thread::sleep(Duration::from_millis(20));
        }
        c.write_all(&[1u8; 500]).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(sink.bytes(), 1000, "bytes after the window are not counted");
    }
}
