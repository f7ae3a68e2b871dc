//! `horde flow server` / `horde flow client`: a kernel TCP or MPTCP bulk transfer, the
//! baseline Horde is compared with. The client sends an 8-byte length and that many
//! pseudo-random bytes; the server answers with the byte count and a 64-bit checksum
//! of what it read ([`checksum`]), so the client can check that every byte arrived intact.

mod checksum;
mod compare;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use checksum::Checksum;
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use horde_emu::sys;
use serde::Serialize;
use socket2::SockAddr;

const CHUNK: usize = 64 * 1024;
const RTT_SAMPLE_EVERY: Duration = Duration::from_millis(10);

#[derive(Subcommand)]
pub enum Command {
    /// Accept transfers and check them; one JSON line per transfer on stdout.
    Server(ServerArgs),
    /// Send N bytes to a server; prints JSON with bytes, seconds, goodput, RTT.
    Client(ClientArgs),
    /// MPTCP over all emulated links against TCP over each link alone, in one
    /// `horde shell` run (root); prints a table.
    Compare(compare::CompareArgs),
}

#[derive(ClapArgs)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:5201")]
    listen: SocketAddr,
    /// Listen with plain TCP even when MPTCP is available (an MPTCP listener also
    /// accepts plain TCP clients).
    #[arg(long)]
    tcp_only: bool,
    /// Exit after this many transfers (default: serve forever).
    #[arg(long)]
    count: Option<u64>,
    /// Speak the flow-workload protocol (docs/flows.md) instead of bulk transfers.
    #[arg(long)]
    workload: bool,
}

#[derive(ClapArgs)]
pub struct ClientArgs {
    /// The server's address.
    #[arg(long, default_value = "127.0.0.1:5201")]
    connect: SocketAddr,
    /// Bytes to send.
    #[arg(long, required_unless_present = "workload")]
    bytes: Option<u64>,
    /// Run a flow scenario's workload (docs/flows.md) against a `--workload` server.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["bytes", "mptcp"])]
    workload: Option<std::path::PathBuf>,
    /// With --workload: write raw per-flow results (JSON) here instead of a table.
    #[arg(long, value_name = "FILE", requires = "workload")]
    results: Option<std::path::PathBuf>,
    /// Use MPTCP (IPPROTO_MPTCP); subflows follow the kernel's `ip mptcp` endpoints.
    #[arg(long)]
    mptcp: bool,
    /// Congestion control (TCP_CONGESTION); the kernel default when absent.
    #[arg(long, value_enum)]
    cc: Option<Cc>,
    /// Local address to bind before connecting (picks the emulated link in `horde shell`).
    #[arg(long)]
    bind: Option<std::net::IpAddr>,
    /// Seed of the pseudo-random payload (with --workload: overrides the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Give up when the connection makes no progress for this many seconds (connect,
    /// send or the server's reply); 0 waits as long as the kernel's TCP does.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    stall_timeout: u64,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Cc {
    Cubic,
    Bbr,
    Reno,
}

impl Cc {
    fn name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Bbr => "bbr",
            Cc::Reno => "reno",
        }
    }
}

pub fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Server(a) => server(a),
        Command::Client(a) => client(a),
        Command::Compare(a) => compare::run(a),
    }
}

/// Deterministic payload bytes (xorshift64*), so runs are repeatable.
struct Payload(u64);

impl Payload {
    fn fill(&mut self, buf: &mut [u8]) {
        // Whole words, then the tail: a copy of a fixed 8 bytes compiles to one store,
        // where one of a variable length is a call.
        let mut words = buf.chunks_exact_mut(8);
        for chunk in &mut words {
            chunk.copy_from_slice(&self.next().to_le_bytes());
        }
        let tail = words.into_remainder();
        if !tail.is_empty() {
            let v = self.next().to_le_bytes();
            tail.copy_from_slice(&v[..tail.len()]);
        }
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[derive(Serialize)]
struct ServerReport {
    peer: String,
    protocol: &'static str,
    bytes: u64,
    seconds: f64,
    goodput_mbps: f64,
    checksum: String,
}

fn server(args: ServerArgs) -> Result<ExitCode> {
    if args.workload {
        return crate::flows::server(args.listen, args.count);
    }
    let (socket, listening) = match (args.tcp_only, sys::stream_socket(args.listen, true)) {
        (false, Ok(s)) => (s, "mptcp, and tcp by fallback"),
        _ => (sys::stream_socket(args.listen, false)?, "tcp"),
    };
    socket.set_reuse_address(true)?;
    socket
        .bind(&args.listen.into())
        .with_context(|| format!("bind {}", args.listen))?;
    socket.listen(64)?;
    let listener: TcpListener = socket.into();
    eprintln!(
        "flow server listening on {} ({listening})",
        listener.local_addr()?
    );
    let mut served = 0;
    while args.count.is_none_or(|c| served < c) {
        let (stream, peer) = listener.accept()?;
        served += 1;
        // An MPTCP listener accepts plain TCP clients too: label what each one speaks.
        let protocol = protocol_of(&stream);
        match receive(stream) {
            Ok((bytes, seconds, sum)) => {
                let report = ServerReport {
                    peer: peer.to_string(),
                    protocol,
                    bytes,
                    seconds,
                    goodput_mbps: mbps(bytes, seconds),
                    checksum: format!("{:016x}", sum.value()),
                };
                println!("{}", serde_json::to_string(&report)?);
            }
            Err(e) => eprintln!("transfer from {peer} failed: {e:#}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What a connected stream speaks: "mptcp", or "tcp" for plain TCP and for an MPTCP
/// socket whose peer did not offer MPTCP.
fn protocol_of(stream: &TcpStream) -> &'static str {
    match sys::is_mptcp(stream.as_raw_fd()) {
        Ok(true) => "mptcp",
        _ => "tcp",
    }
}

/// Read one transfer and answer with its byte count and checksum.
fn receive(mut stream: TcpStream) -> Result<(u64, f64, Checksum)> {
    let start = Instant::now();
    let mut header = [0u8; 8];
    stream.read_exact(&mut header).context("read length")?;
    let expected = u64::from_be_bytes(header);
    let mut sum = Checksum::new();
    let mut got = 0u64;
    let mut buf = vec![0u8; CHUNK];
    while got < expected {
        let want = (expected - got).min(CHUNK as u64) as usize;
        let n = stream.read(&mut buf[..want])?;
        if n == 0 {
            bail!("connection closed after {got} of {expected} bytes");
        }
        sum.update(&buf[..n]);
        got += n as u64;
    }
    let seconds = start.elapsed().as_secs_f64();
    let mut reply = [0u8; 16];
    reply[..8].copy_from_slice(&got.to_be_bytes());
    reply[8..].copy_from_slice(&sum.value().to_be_bytes());
    stream.write_all(&reply)?;
    Ok((got, seconds, sum))
}

#[derive(Serialize)]
struct ClientReport {
    protocol: &'static str,
    cc: String,
    local: String,
    server: String,
    bytes: u64,
    seconds: f64,
    goodput_mbps: f64,
    checksum: String,
    checksum_ok: bool,
    /// The sender's smoothed RTT (`tcpi_rtt`), sampled every 10 ms; for MPTCP, every
    /// subflow's.
    rtt_ms: RttSummary,
    subflows: usize,
}

#[derive(Serialize)]
struct RttSummary {
    samples: usize,
    p50: f64,
    p95: f64,
    max: f64,
}

impl RttSummary {
    fn of(mut samples_us: Vec<u32>) -> Self {
        samples_us.sort_unstable();
        let q = |p: f64| {
            if samples_us.is_empty() {
                return 0.0;
            }
            let i = ((samples_us.len() - 1) as f64 * p).round() as usize;
            f64::from(samples_us[i]) / 1000.0
        };
        RttSummary {
            samples: samples_us.len(),
            p50: q(0.5),
            p95: q(0.95),
            max: q(1.0),
        }
    }
}

fn client(args: ClientArgs) -> Result<ExitCode> {
    if let Some(file) = &args.workload {
        return crate::flows::client(file, args.seed, args.connect, args.results.as_deref());
    }
    let bytes = args
        .bytes
        .expect("clap requires --bytes without --workload");
    let seed = args.seed.unwrap_or(1);
    let protocol = if args.mptcp { "mptcp" } else { "tcp" };
    let socket = sys::stream_socket(args.connect, args.mptcp).with_context(|| {
        format!("create a {protocol} socket (is MPTCP enabled: sysctl net.mptcp.enabled?)")
    })?;
    if let Some(cc) = args.cc {
        sys::set_tcp_congestion(&socket, cc.name())?;
    }
    if let Some(ip) = args.bind {
        socket
            .bind(&SockAddr::from(SocketAddr::new(ip, 0)))
            .with_context(|| format!("bind {ip}"))?;
    }
    let stall = (args.stall_timeout > 0).then(|| Duration::from_secs(args.stall_timeout));
    let start = Instant::now();
    match stall {
        Some(t) => socket.connect_timeout(&args.connect.into(), t),
        None => socket.connect(&args.connect.into()),
    }
    .with_context(|| format!("connect to {}", args.connect))?;
    socket.set_write_timeout(stall)?;
    socket.set_read_timeout(stall)?;
    let cc = sys::tcp_congestion(&socket).unwrap_or_else(|_| "?".into());
    let local = socket
        .local_addr()?
        .as_socket()
        .map_or("?".into(), |a| a.to_string());
    let mut stream: TcpStream = socket.into();
    let protocol = protocol_of(&stream);
    if args.mptcp && protocol != "mptcp" {
        eprintln!("MPTCP fell back to plain TCP: the server did not offer MPTCP");
    }

    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let fd = stream.as_raw_fd();
        let sampling = sampling.clone();
        let mptcp = protocol == "mptcp";
        std::thread::spawn(move || sample_rtts(fd, mptcp, &sampling))
    };
    let sent = send(&mut stream, bytes, seed);
    sampling.store(false, Ordering::Release);
    let (rtts, subflows) = sampler.join().unwrap_or_default();
    let (sum, reply) = sent?;
    let seconds = start.elapsed().as_secs_f64();
    let (got, server_sum) = reply;
    let report = ClientReport {
        protocol,
        cc,
        local,
        server: args.connect.to_string(),
        bytes: got,
        seconds,
        goodput_mbps: mbps(got, seconds),
        checksum: format!("{:016x}", sum.value()),
        checksum_ok: got == bytes && server_sum == sum.value(),
        rtt_ms: RttSummary::of(rtts),
        subflows,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(if report.checksum_ok {
        ExitCode::SUCCESS
    } else {
        eprintln!("checksum mismatch: the server got different bytes");
        ExitCode::from(2)
    })
}

/// Send the length and the payload, then wait for the server's count and checksum.
/// With the socket's timeouts set, a stall ends in an error that says how far it got.
fn send(stream: &mut TcpStream, bytes: u64, seed: u64) -> Result<(Checksum, (u64, u64))> {
    stream.write_all(&bytes.to_be_bytes()).context("send")?;
    let mut payload = Payload(seed.max(1));
    let mut sum = Checksum::new();
    let mut buf = vec![0u8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        payload.fill(&mut buf[..n]);
        sum.update(&buf[..n]);
        stream
            .write_all(&buf[..n])
            .map_err(|e| transfer_error(e, "send", bytes - left, bytes))?;
        left -= n as u64;
    }
    let mut reply = [0u8; 16];
    stream
        .read_exact(&mut reply)
        .map_err(|e| transfer_error(e, "waiting for the server's reply", bytes, bytes))?;
    let got = u64::from_be_bytes(reply[..8].try_into().expect("8 bytes"));
    let server_sum = u64::from_be_bytes(reply[8..].try_into().expect("8 bytes"));
    Ok((sum, (got, server_sum)))
}

/// An I/O error of the transfer, saying how far it got. The socket's timeouts surface
/// as `WouldBlock` or `TimedOut`: the connection stalled.
fn transfer_error(e: std::io::Error, what: &str, sent: u64, bytes: u64) -> anyhow::Error {
    let why = match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            "no progress within --stall-timeout".to_string()
        }
        _ => e.to_string(),
    };
    anyhow::anyhow!("{what}, after {sent} of {bytes} bytes handed to TCP: {why}")
}

fn mbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds / 1e6
    } else {
        0.0
    }
}

/// Sample the smoothed RTT of every (sub)flow until `sampling` is cleared. Returns the
/// samples in µs and the largest number of subflows seen.
fn sample_rtts(fd: RawFd, mptcp: bool, sampling: &AtomicBool) -> (Vec<u32>, usize) {
    let mut samples = Vec::new();
    let mut subflows = 0;
    while sampling.load(Ordering::Acquire) {
        let rtts = if mptcp {
            subflow_rtts(fd)
        } else {
            tcp_rtt(fd).map(|r| vec![r])
        };
        if let Some(rtts) = rtts {
            subflows = subflows.max(rtts.len());
            samples.extend(rtts.into_iter().filter(|&r| r > 0));
        }
        std::thread::sleep(RTT_SAMPLE_EVERY);
    }
    (samples, subflows)
}

fn tcp_rtt(fd: RawFd) -> Option<u32> {
    sys::tcp_info(fd).ok().map(|i| i.tcpi_rtt)
}

fn subflow_rtts(fd: RawFd) -> Option<Vec<u32>> {
    sys::mptcp_subflow_infos(fd)
        .ok()
        .map(|infos| infos.iter().map(|i| i.tcpi_rtt).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_transfer_checks_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || receive(listener.accept().unwrap().0).unwrap());
        let mut stream = TcpStream::connect(addr).unwrap();
        let (sum, (got, server_sum)) = send(&mut stream, 300_001, 7).unwrap();
        let (bytes, _, received) = server.join().unwrap();
        assert_eq!((got, bytes), (300_001, 300_001));
        assert_eq!(server_sum, sum.value());
        assert_eq!(received.value(), sum.value());
    }
}
