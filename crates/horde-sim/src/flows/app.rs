//! The two ends of the flow protocol ([`super::protocol`]) on smoltcp sockets, stepped
//! by the simulator whenever anything may have changed.

use std::time::Duration;

use smoltcp::socket::tcp::{Socket, State};

use super::protocol::{HeaderError, RequestHeader, HEADER_LEN};
use super::workload::PlannedFlow;

/// Padding for requests and answers (content is irrelevant to the protocol).
static ZEROS: [u8; 16 * 1024] = [0; 16 * 1024];

/// The client end of one flow.
#[derive(Debug)]
pub struct ClientApp {
    /// Index of the exchange whose request is being written.
    next_request: usize,
    /// Bytes of that request already handed to TCP.
    written: u64,
    /// Answer bytes received so far, all exchanges together.
    received: u64,
    /// Answer bytes that complete each exchange, cumulative.
    complete_at: Vec<u64>,
    /// When each finished exchange finished.
    pub completions: Vec<Duration>,
    closed: bool,
}

impl ClientApp {
    pub fn new(flow: &PlannedFlow) -> Self {
        let mut total = 0;
        let complete_at = flow
            .exchanges
            .iter()
            .map(|e| {
                total += e.down;
                total
            })
            .collect();
        ClientApp {
            next_request: 0,
            written: 0,
            received: 0,
            complete_at,
            completions: Vec::new(),
            closed: false,
        }
    }

    pub fn done(&self) -> bool {
        self.completions.len() == self.complete_at.len()
    }

    /// When exchange `k` may be sent.
    fn due(flow: &PlannedFlow, k: usize) -> Duration {
        flow.start + flow.interval * k as u32
    }

    /// Read and write what the socket allows at `now`. Returns when the client next
    /// needs to be stepped although nothing happens on the network (a request due).
    pub fn step(&mut self, flow: &PlannedFlow, now: Duration, s: &mut Socket) -> Option<Duration> {
        while s.can_recv() {
            match s.recv(|b| (b.len(), b.len())) {
                Ok(n) if n > 0 => self.received += n as u64,
                _ => break,
            }
        }
        while self.completions.len() < self.complete_at.len()
            && self.received >= self.complete_at[self.completions.len()]
        {
            self.completions.push(now);
        }
        while self.next_request < flow.exchanges.len() && s.can_send() {
            if now < Self::due(flow, self.next_request) {
                break;
            }
            let e = flow.exchanges[self.next_request];
            let sent = if self.written < HEADER_LEN as u64 {
                let header = RequestHeader {
                    flow: flow.id,
                    exchange: self.next_request as u32,
                    up: e.up,
                    down: e.down,
                }
                .encode();
                s.send_slice(&header[self.written as usize..])
            } else {
                let left = (e.up - self.written).min(ZEROS.len() as u64) as usize;
                s.send_slice(&ZEROS[..left])
            };
            let n = sent.unwrap_or(0);
            if n == 0 {
                break;
            }
            self.written += n as u64;
            if self.written == e.up {
                self.next_request += 1;
                self.written = 0;
            }
        }
        if self.done() && !self.closed {
            s.close();
            self.closed = true;
        }
        (self.next_request < flow.exchanges.len())
            .then(|| Self::due(flow, self.next_request))
            .filter(|&t| t > now)
    }
}

/// The server end of one connection.
#[derive(Debug, Default)]
pub struct ServerApp {
    header: [u8; HEADER_LEN],
    header_got: usize,
    /// Request bytes after the header still to read.
    body_left: u64,
    /// Answer bytes still to write.
    answer_left: u64,
    /// The answer waiting for the request's body.
    pending_answer: u64,
    closed: bool,
}

impl ServerApp {
    /// Serve what the socket allows. A malformed request is an error: the caller aborts
    /// the connection.
    pub fn step(&mut self, s: &mut Socket) -> Result<(), HeaderError> {
        loop {
            if self.answer_left > 0 {
                if !s.can_send() {
                    return Ok(());
                }
                let n = (self.answer_left.min(ZEROS.len() as u64)) as usize;
                let sent = s.send_slice(&ZEROS[..n]).unwrap_or(0);
                if sent == 0 {
                    return Ok(());
                }
                self.answer_left -= sent as u64;
                continue;
            }
            if !s.can_recv() {
                break;
            }
            if self.header_got < HEADER_LEN {
                let n = s
                    .recv_slice(&mut self.header[self.header_got..])
                    .unwrap_or(0);
                if n == 0 {
                    break;
                }
                self.header_got += n;
                if self.header_got == HEADER_LEN {
                    let h = RequestHeader::decode(&self.header)?;
                    self.body_left = h.up - HEADER_LEN as u64;
                    self.pending_answer = h.down;
                }
            } else {
                let left = self.body_left;
                let n = s
                    .recv(|b| {
                        let n = b.len().min(left as usize);
                        (n, n)
                    })
                    .unwrap_or(0);
                if n == 0 {
                    break;
                }
                self.body_left -= n as u64;
            }
            if self.header_got == HEADER_LEN && self.body_left == 0 {
                self.answer_left = self.pending_answer;
                self.header_got = 0;
            }
        }
        // The client closes after its last answer: close our side once it has.
        if s.state() == State::CloseWait && self.answer_left == 0 && !self.closed {
            s.close();
            self.closed = true;
        }
        Ok(())
    }
}
