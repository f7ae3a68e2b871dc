//! A session pair in virtual time that runs one scheduling cycle per step, with a
//! counting global allocator: shared by the cycle bench and the zero-allocation test.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use horde_policy::{Directed, Fields, Objective, RandomWalk, RandomizedRoundRobin, Scheduler};
use horde_proto::{CcConfig, ChannelConfig, ChannelSpec, Session, SessionConfig, StreamConfig};

struct Counting;

thread_local! {
    /// Allocations made by this thread: tests run in parallel threads, and each counts
    /// its own. A const-initialised `Cell` needs no allocation to reach.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    ALLOCS.with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is
// only a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

pub fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

pub const CHANNELS: usize = 4;
pub const STREAMS: u32 = 4;
pub const CYCLE: Duration = Duration::from_millis(10);
pub const ONE_WAY: Duration = Duration::from_millis(5);
pub const MTU: u32 = 1200;
/// Bytes of a full slot: the mtu plus the data header.
pub const SLOT_BYTES: f64 = 1235.0;

fn addr(host: u8, iface: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, host, iface as u8 + 1], 4000))
}

/// What one cycle cost.
#[derive(Debug, Default, Clone, Copy)]
pub struct Step {
    pub cycle: Duration,
    /// CPU time of this thread in the cycle: unlike `cycle`, not stretched when the
    /// machine is busy and the thread waits for a core.
    pub cycle_cpu: Duration,
    pub cycle_allocs: u64,
    /// Encoding the cycle's datagrams and processing the acks that come back.
    pub other_allocs: u64,
    pub packets: u64,
    /// Whether the poll ran a cycle (not before the handshake is done).
    pub ran: bool,
    /// Periodic pairs: allocations of the ticks within the period, where the session
    /// releases the packets the cycle planned for later slots (and handles acks).
    pub release_allocs: u64,
    /// Periodic pairs: data packets sent in those ticks without a cycle, that is, planned
    /// packets released.
    pub released: u64,
    /// Cycles the session ran in the step, ticks included.
    pub cycles: u64,
}

/// A periodic pair's period is run in this many ticks: the cycle at the first, the
/// packets it planned for later slots released in the others.
pub const TICKS: u32 = 10;

pub struct Pair {
    now: Duration,
    client: Session,
    server: Option<Session>,
    /// (arrival, to the server, local interface, datagram); one delay, so FIFO.
    wire: VecDeque<(Duration, bool, u16, Bytes)>,
    buf: Vec<u8>,
    payload: Bytes,
    fields: Fields,
    queued_per_stream: usize,
    server_config: SessionConfig,
    /// Drop every this many-th datagram the client sends (0: none).
    pub lose_every: u64,
    sent: u64,
    /// Whether the session runs periodic cycles (one per [`CYCLE`]) over window-based
    /// channels, rather than one event-driven cycle per step over CBR ones.
    periodic: bool,
}

/// The client session: [`CHANNELS`] channels of `channel`, the thesis's objectives X1-X4,
/// and [`STREAMS`] streams.
fn client(config: &SessionConfig, channel: &ChannelConfig, scheduler: MakeScheduler) -> Session {
    let specs = (0..CHANNELS as u16)
        .map(|i| ChannelSpec {
            local: i,
            remote: addr(2, i),
            config: channel.clone(),
        })
        .collect();
    let aliases = (0..CHANNELS as u16).map(|i| addr(1, i)).collect();
    let mut client =
        Session::connect(config.clone(), 7, 1, specs, aliases, Duration::ZERO).unwrap();
    client.set_scheduler(scheduler());
    for name in ["x1", "x2", "x3", "x4"] {
        let o = horde_hose::thesis(name).expect("thesis objective compiles");
        client.inject_objective(Arc::new(o) as Arc<dyn Objective>);
    }
    for s in 0..STREAMS {
        client.open_stream(s, StreamConfig::default()).unwrap();
    }
    client
}

impl Pair {
    /// `per_channel` real and as many phantom slots per channel and cycle: CBR tokens for
    /// `per_channel + 1/2` full slots a cycle, and a look-ahead of one cycle.
    pub fn new(per_channel: usize, scheduler: MakeScheduler) -> Self {
        Self::with_packing(per_channel, scheduler, true, MTU as usize)
    }

    /// As [`Pair::new`], with packing on or off and ADUs of `adu_bytes`.
    pub fn with_packing(
        per_channel: usize,
        scheduler: MakeScheduler,
        pack_adus: bool,
        adu_bytes: usize,
    ) -> Self {
        let rate_bps = (per_channel as f64 + 0.5) * SLOT_BYTES / CYCLE.as_secs_f64();
        // The steps drive the cycles, one per step: the event-driven cycle. A periodic
        // one would also plan packets for slots later in its period, which nothing
        // between the steps releases.
        let config = SessionConfig {
            cycle_ms: 0.0,
            lookahead_ms: CYCLE.as_secs_f64() * 1e3,
            pack_adus,
            ..SessionConfig::default()
        };
        let channel = ChannelConfig {
            mtu: MTU,
            congestion: CcConfig::Cbr {
                kbps: rate_bps * 8.0 / 1e3,
                burst_ms: CYCLE.as_secs_f64() * 1e3,
            },
            ..ChannelConfig::default()
        };
        let client = client(&config, &channel, scheduler);
        Pair {
            now: Duration::ZERO,
            client,
            server: None,
            wire: VecDeque::new(),
            buf: Vec::with_capacity(2048),
            payload: Bytes::from(vec![0xab; adu_bytes]),
            fields: Fields::new(),
            // 2N ADUs are collected a cycle; keep twice that waiting.
            queued_per_stream: 4 * per_channel * CHANNELS / STREAMS as usize,
            server_config: config,
            lose_every: 0,
            sent: 0,
            periodic: false,
        }
    }

    /// A pair whose session runs a periodic cycle every [`CYCLE`] over AIMD channels:
    /// each cycle issues the slots of its period and plans packets for the later ones,
    /// which the ticks of [`Pair::step`] release as the acks open the windows. One
    /// datagram in `lose_every` is lost, which keeps the windows from growing without
    /// end on a wire of unbounded capacity.
    pub fn periodic(scheduler: MakeScheduler, lose_every: u64) -> Self {
        let mut pair = Self::with_packing(2, scheduler, true, MTU as usize);
        let config = SessionConfig {
            cycle_ms: CYCLE.as_secs_f64() * 1e3,
            lookahead_ms: CYCLE.as_secs_f64() * 1e3,
            pack_adus: true,
            ..SessionConfig::default()
        };
        let channel = ChannelConfig {
            mtu: MTU,
            congestion: CcConfig::Aimd {
                initial_window_packets: 4,
            },
            ..ChannelConfig::default()
        };
        let client = client(&config, &channel, scheduler);
        pair.client = client;
        pair.server_config = config;
        pair.lose_every = lose_every;
        // A period's slots at 1.25 times the windows' rate: keep a few periods waiting.
        pair.queued_per_stream = 64;
        pair.periodic = true;
        pair
    }

    fn deliver(&mut self) -> u64 {
        let mut counted = 0;
        while self.wire.front().is_some_and(|d| d.0 <= self.now) {
            let (_, to_server, local, datagram) = self.wire.pop_front().expect("front");
            if to_server {
                match self.server.as_mut() {
                    Some(s) => s.handle_datagram(self.now, local, addr(1, local), datagram),
                    None => {
                        self.server = Some(
                            Session::accept(
                                self.server_config.clone(),
                                self.now,
                                local,
                                addr(1, local),
                                datagram,
                                Vec::new(),
                                Arc::new(|_| ChannelConfig::default()),
                            )
                            .unwrap(),
                        )
                    }
                }
            } else {
                let a = allocs();
                self.client
                    .handle_datagram(self.now, local, addr(2, local), datagram);
                counted += allocs() - a;
            }
        }
        counted
    }

    /// Poll `client` (or the server) dry; the client's polls are counted.
    fn drain(&mut self, client: bool) -> (u64, u64) {
        let (mut counted, mut packets) = (0, 0);
        loop {
            let a = allocs();
            let t = if client {
                self.client.poll_transmit(self.now, &mut self.buf)
            } else {
                match self.server.as_mut() {
                    Some(s) => s.poll_transmit(self.now, &mut self.buf),
                    None => None,
                }
            };
            counted += allocs() - a;
            let Some(t) = t else { break };
            packets += u64::from(!t.adus.is_empty());
            self.put_on_wire(client, t.local, !t.adus.is_empty());
        }
        (if client { counted } else { 0 }, packets)
    }

    /// Send the datagram in `buf`, unless it is a client's data datagram the loss
    /// pattern drops.
    fn put_on_wire(&mut self, to_server: bool, local: u16, data: bool) {
        if to_server && data && self.lose_every > 0 {
            self.sent += 1;
            if self.sent.is_multiple_of(self.lose_every) {
                return;
            }
        }
        let datagram = Bytes::copy_from_slice(&self.buf);
        self.wire
            .push_back((self.now + ONE_WAY, to_server, local, datagram));
    }

    fn top_up(&mut self) {
        for s in 0..STREAMS {
            while self.client.queued(s) < self.queued_per_stream {
                self.client
                    .send_adu(self.now, s, self.payload.clone(), self.fields.clone())
                    .unwrap();
            }
        }
    }

    /// Advance one cycle period and run the cycle. A periodic pair first runs the
    /// period's other ticks, which release what the last cycle planned.
    pub fn step(&mut self) -> Step {
        let (mut release_allocs, mut released) = (0, 0);
        let cycles_before = self.client.stats().cycles;
        if self.periodic {
            let tick = CYCLE / TICKS;
            for _ in 1..TICKS {
                self.now += tick;
                release_allocs += self.deliver();
                let a = allocs();
                self.client.handle_timeout(self.now);
                release_allocs += allocs() - a;
                if let Some(s) = self.server.as_mut() {
                    s.handle_timeout(self.now);
                }
                self.drain(false);
                let cycles = self.client.stats().cycles;
                let (counted, packets) = self.drain(true);
                release_allocs += counted;
                // Data sent at a tick without a cycle came from the plan.
                if self.client.stats().cycles == cycles {
                    released += packets;
                }
            }
            self.now += CYCLE - tick * (TICKS - 1);
        } else {
            self.now += CYCLE;
        }
        let mut other = self.deliver();
        let a = allocs();
        self.client.handle_timeout(self.now);
        other += allocs() - a;
        if let Some(s) = self.server.as_mut() {
            s.handle_timeout(self.now);
        }
        self.drain(false);
        while self.client.poll_event().is_some() {}
        if let Some(s) = self.server.as_mut() {
            while s.poll_event().is_some() {}
        }
        self.top_up();
        let cycles = self.client.stats().cycles;
        let a = allocs();
        let cpu_start = thread_cpu_time();
        let start = Instant::now();
        let first = self.client.poll_transmit(self.now, &mut self.buf);
        let cycle = start.elapsed();
        let cycle_cpu = thread_cpu_time().saturating_sub(cpu_start);
        let cycle_allocs = allocs() - a;
        let ran = self.client.stats().cycles == cycles + 1;
        let mut packets = 0;
        if let Some(t) = first {
            packets += u64::from(!t.adus.is_empty());
            self.put_on_wire(true, t.local, !t.adus.is_empty());
        }
        let (encode_allocs, more) = self.drain(true);
        Step {
            cycle,
            cycle_cpu,
            cycle_allocs,
            other_allocs: other + encode_allocs,
            packets: packets + more,
            ran,
            release_allocs,
            released,
            cycles: self.client.stats().cycles - cycles_before,
        }
    }

    /// Connect and run until queues, windows, history and every buffer are warm.
    pub fn warm(&mut self) {
        self.drain(true);
        for _ in 0..400 {
            self.step();
        }
    }
}

/// CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux
    // supports, and the call only writes `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "the thread CPU clock is readable");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

pub fn rrr() -> Box<dyn Scheduler> {
    Box::new(RandomizedRoundRobin::default())
}

pub fn directed() -> Box<dyn Scheduler> {
    Box::new(Directed::default())
}

/// `directed` with every cycle's preparation rebuilt in full, as before contexts were
/// kept across cycles: the same schedules, the old cost.
pub fn directed_full() -> Box<dyn Scheduler> {
    Box::new(Directed::full_rebuild())
}

/// `Directed::fast`: 1500 units of search, the ADUs with the most open utility first.
pub fn directed_fast() -> Box<dyn Scheduler> {
    Box::new(Directed::fast())
}

/// `directed` with the search's budget following the open terms, 12 units per member.
pub fn directed_open() -> Box<dyn Scheduler> {
    let mut d = Directed::default();
    d.search_per_member = Some(12);
    Box::new(d)
}

/// `directed` with no search: the objectives' preparation, the unary matrix and the
/// assignment solver alone, the part of a cycle that no search budget changes.
pub fn directed_no_search() -> Box<dyn Scheduler> {
    let mut d = Directed::default();
    d.search_budget = 0;
    Box::new(d)
}

pub fn random_walk() -> Box<dyn Scheduler> {
    Box::new(RandomWalk::default())
}

pub type MakeScheduler = fn() -> Box<dyn Scheduler>;

/// Every scheduler the cycle bench and `session_cycle` time, by the name each takes
/// on the command line.
pub const SCHEDULERS: [(&str, MakeScheduler); 7] = [
    ("rrr", rrr),
    ("directed", directed),
    ("directed-full", directed_full),
    ("directed-fast", directed_fast),
    ("directed-open", directed_open),
    ("directed-no-search", directed_no_search),
    ("random-walk", random_walk),
];
