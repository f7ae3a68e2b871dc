//! The flow protocol over kernel TCP, in real time: the same plan the simulator runs,
//! one thread per flow (plus a writer thread, so requests go out on time even while
//! answers are arriving), and a server that answers any number of connections.
//! `horde flow`, `horde flows emu` and the PluriBus live runner (`horde-lab`) use it.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use horde_sim::flows::protocol::{RequestHeader, HEADER_LEN};
use horde_sim::flows::{Congestion, PlannedFlow};
use serde::{Deserialize, Serialize};
use socket2::SockAddr;

const CHUNK: usize = 64 * 1024;

/// The kernel's name for the scenario's controller.
pub fn kernel_cc(c: Congestion) -> Result<&'static str> {
    match c {
        Congestion::Cubic => Ok("cubic"),
        Congestion::Reno => Ok("reno"),
        Congestion::None => {
            bail!("kernel TCP always runs a congestion controller; use cubic or reno")
        }
    }
}

/// What the client learned about one flow (times relative to the run's start).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientResult {
    pub id: u32,
    /// When each finished exchange finished, µs since the run's start.
    pub completions_us: Vec<u64>,
    /// Segments the client's kernel retransmitted (`tcpi_total_retrans`; for MPTCP,
    /// summed over the subflows).
    pub retransmits: u64,
    /// Data segments the client's kernel sent (`tcpi_data_segs_out`, the same way).
    #[serde(default)]
    pub data_segs_out: u64,
    /// Why the flow stopped early, if it did.
    pub error: Option<String>,
}

/// What a socket's kernel counted: retransmitted segments and data segments sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpCounters {
    pub retransmits: u64,
    pub data_segs_out: u64,
}

impl TcpCounters {
    fn of(info: &libc::tcp_info) -> Self {
        Self {
            retransmits: u64::from(info.tcpi_total_retrans),
            data_segs_out: u64::from(info.tcpi_data_segs_out),
        }
    }

    /// `tcpi_total_retrans` and `tcpi_data_segs_out` of a socket: of its `tcp_info` for
    /// TCP, summed over the subflows (`MPTCP_TCPINFO`) for MPTCP.
    pub fn read(fd: RawFd) -> Option<Self> {
        if let Ok(subflows) = horde_emu::sys::mptcp_subflow_infos(fd) {
            return Some(
                subflows
                    .iter()
                    .map(Self::of)
                    .fold(Self::default(), |a, b| Self {
                        retransmits: a.retransmits + b.retransmits,
                        data_segs_out: a.data_segs_out + b.data_segs_out,
                    }),
            );
        }
        horde_emu::sys::tcp_info(fd).ok().map(|i| Self::of(&i))
    }
}

/// How the client's connections reach the server.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// TCP_CONGESTION.
    pub cc: String,
    /// Open MPTCP connections (IPPROTO_MPTCP).
    pub mptcp: bool,
    /// Bind to this local address first (picks a link in `horde shell`).
    pub bind: Option<IpAddr>,
}

impl ConnectOptions {
    pub fn tcp(cc: &str) -> Self {
        Self {
            cc: cc.to_string(),
            ..Self::default()
        }
    }
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Run `plan` against the server at `server`; flows still running at `end` (after the
/// epoch) stop there.
pub fn run_client(
    plan: &[PlannedFlow],
    server: SocketAddr,
    end: Duration,
    options: &ConnectOptions,
) -> Vec<ClientResult> {
    let epoch = Instant::now();
    let results = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for flow in plan {
        sleep_until(epoch + flow.start);
        let flow = flow.clone();
        let results = results.clone();
        let options = options.clone();
        threads.push(std::thread::spawn(move || {
            let r = run_flow(&flow, server, epoch, epoch + end, &options);
            results.lock().expect("no panics hold it").push(r);
        }));
    }
    for t in threads {
        let _ = t.join();
    }
    let mut out = std::mem::take(&mut *results.lock().expect("threads joined"));
    out.sort_by_key(|r| r.id);
    out
}

/// Connect, giving up at `end` (a SYN lost again and again must not outlive the run).
fn connect(server: SocketAddr, options: &ConnectOptions, end: Instant) -> Result<TcpStream> {
    let socket = horde_emu::sys::stream_socket(server, options.mptcp)?;
    horde_emu::sys::set_tcp_congestion(&socket, &options.cc)?;
    socket.set_nodelay(true)?;
    if let Some(ip) = options.bind {
        socket
            .bind(&SockAddr::from(SocketAddr::new(ip, 0)))
            .with_context(|| format!("bind {ip}"))?;
    }
    let left = end.saturating_duration_since(Instant::now());
    anyhow::ensure!(!left.is_zero(), "run ended before connecting");
    socket
        .connect_timeout(&SockAddr::from(server), left)
        .with_context(|| format!("connect to {server}"))?;
    Ok(socket.into())
}

fn run_flow(
    flow: &PlannedFlow,
    server: SocketAddr,
    epoch: Instant,
    end: Instant,
    options: &ConnectOptions,
) -> ClientResult {
    let mut result = ClientResult {
        id: flow.id,
        ..ClientResult::default()
    };
    let stream = match connect(server, options, end) {
        Ok(s) => s,
        Err(e) => {
            result.error = Some(format!("{e:#}"));
            return result;
        }
    };
    let writer = match stream.try_clone() {
        Ok(w) => w,
        Err(e) => {
            result.error = Some(e.to_string());
            return result;
        }
    };
    let requests = flow.clone();
    let sender = std::thread::spawn(move || send_requests(&requests, writer, epoch));
    let mut reader = stream;
    let mut buf = vec![0u8; CHUNK];
    let mut received = 0u64;
    let mut complete_at = flow.exchanges.iter().scan(0u64, |sum, e| {
        *sum += e.down;
        Some(*sum)
    });
    let mut next_target = complete_at.next();
    while next_target.is_some() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            result.error = Some("run ended".into());
            break;
        }
        let _ = reader.set_read_timeout(Some(left));
        match reader.read(&mut buf) {
            Ok(0) => {
                result.error = Some("server closed early".into());
                break;
            }
            Ok(n) => {
                received += n as u64;
                let now = epoch.elapsed().as_micros() as u64;
                while next_target.is_some_and(|t| received >= t) {
                    result.completions_us.push(now);
                    next_target = complete_at.next();
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                result.error = Some("run ended".into());
                break;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                result.error = Some(e.to_string());
                break;
            }
        }
    }
    let counters = TcpCounters::read(reader.as_raw_fd()).unwrap_or_default();
    result.retransmits = counters.retransmits;
    result.data_segs_out = counters.data_segs_out;
    let _ = reader.shutdown(Shutdown::Both);
    let _ = sender.join();
    result
}

/// Write each request when it falls due (or when the previous one is written).
fn send_requests(flow: &PlannedFlow, mut w: TcpStream, epoch: Instant) {
    let zeros = vec![0u8; CHUNK];
    for (k, e) in flow.exchanges.iter().enumerate() {
        sleep_until(epoch + flow.start + flow.interval * k as u32);
        let header = RequestHeader {
            flow: flow.id,
            exchange: k as u32,
            up: e.up,
            down: e.down,
        }
        .encode();
        if w.write_all(&header).is_err() {
            return;
        }
        let mut left = e.up - HEADER_LEN as u64;
        while left > 0 {
            let n = left.min(CHUNK as u64) as usize;
            if w.write_all(&zeros[..n]).is_err() {
                return;
            }
            left -= n as u64;
        }
    }
}

/// What the server's kernel counted, by flow id.
pub type ServerRetransmits = Arc<Mutex<BTreeMap<u32, TcpCounters>>>;

/// Accept connections forever (or `count` of them), each answered on its own thread;
/// each connection's retransmissions go into `retransmits` when it ends, and, with
/// `print`, as a JSON line on stdout.
pub fn serve(
    listener: TcpListener,
    cc: Option<String>,
    count: Option<u64>,
    retransmits: ServerRetransmits,
    print: bool,
) -> Result<()> {
    let mut served = 0u64;
    while count.is_none_or(|c| served < c) {
        let (stream, _) = listener.accept()?;
        served += 1;
        let retransmits = retransmits.clone();
        let cc = cc.clone();
        std::thread::spawn(move || {
            if let Some(cc) = &cc {
                let socket = socket2::SockRef::from(&stream);
                let _ = horde_emu::sys::set_tcp_congestion(&socket, cc);
            }
            let _ = stream.set_nodelay(true);
            if let Ok(Some(flow)) = answer(&stream) {
                let n = TcpCounters::read(stream.as_raw_fd()).unwrap_or_default();
                retransmits
                    .lock()
                    .expect("no panics hold it")
                    .insert(flow, n);
                if print {
                    println!(
                        "{{\"flow\":{flow},\"retransmits\":{},\"data_segs_out\":{}}}",
                        n.retransmits, n.data_segs_out
                    );
                }
            }
        });
    }
    Ok(())
}

/// Answer requests until the client closes; returns the flow id seen.
fn answer(mut stream: &TcpStream) -> Result<Option<u32>> {
    let mut flow = None;
    let zeros = vec![0u8; CHUNK];
    let mut buf = vec![0u8; CHUNK];
    loop {
        let mut header = [0u8; HEADER_LEN];
        match stream.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(flow),
            Err(e) => return Err(e.into()),
        }
        let h = RequestHeader::decode(&header)?;
        flow = Some(h.flow);
        let mut left = h.up - HEADER_LEN as u64;
        while left > 0 {
            let n = stream.read(&mut buf[..left.min(CHUNK as u64) as usize])?;
            if n == 0 {
                return Ok(flow);
            }
            left -= n as u64;
        }
        let mut left = h.down;
        while left > 0 {
            let n = left.min(CHUNK as u64) as usize;
            stream.write_all(&zeros[..n])?;
            left -= n as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_sim::flows::{plan, FlowSpec};

    #[test]
    fn loopback_workload_completes_every_exchange() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let retrans = ServerRetransmits::default();
        let r = retrans.clone();
        std::thread::spawn(move || serve(listener, None, None, r, false));
        let specs = vec![
            FlowSpec::Interactive {
                name: None,
                request_bytes: 44,
                response_bytes: 72,
                interval_ms: 10.0,
                count: 20,
                at_s: 0.0,
            },
            FlowSpec::RequestResponse {
                name: None,
                request_bytes: 300_000,
                response_bytes: 200_000,
                rate_per_s: 20.0,
                start_s: 0.0,
                stop_s: Some(0.3),
            },
        ];
        let flows = plan(&specs, 1.0, 5).unwrap();
        assert!(flows.len() > 2);
        let results = run_client(
            &flows,
            addr,
            Duration::from_secs(20),
            &ConnectOptions::tcp("cubic"),
        );
        assert_eq!(results.len(), flows.len());
        for (f, r) in flows.iter().zip(&results) {
            assert_eq!(r.id, f.id);
            assert_eq!(r.error, None);
            assert_eq!(r.completions_us.len(), f.exchanges.len());
            // Interactive answers cannot come before their requests are due.
            for (k, &t) in r.completions_us.iter().enumerate() {
                let due = f.start + f.interval * k as u32;
                assert!(t >= due.as_micros() as u64);
            }
        }
        // Every connection reports to the server's table once it is closed.
        let deadline = Instant::now() + Duration::from_secs(5);
        while retrans.lock().unwrap().len() < flows.len() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(retrans.lock().unwrap().len(), flows.len());
    }
}
