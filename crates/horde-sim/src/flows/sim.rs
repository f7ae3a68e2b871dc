//! The flow simulator: two smoltcp hosts joined by a [`Carrier`], the plan's flows
//! started at their times, all in virtual time.
//!
//! Each step advances the clock to the earliest of: a flow's start, a packet leaving the
//! carrier, a smoltcp timer, or a request falling due. Both hosts are then polled, the
//! applications stepped, the hosts polled again to send what the applications wrote,
//! and every sent packet handed to the carrier. Nothing reads a wall clock and every
//! container iterates in a fixed order, so a seed fixes the run.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp::{self, CongestionControl, State};
use smoltcp::wire::IpAddress;

use super::app::{ClientApp, ServerApp};
use super::carrier::{AssignedRates, Carrier, CarrierStats, Side};
use super::host::{SimHost, CLIENT_ADDR, SERVER_ADDR};
use super::metrics::{FlowRecord, FlowReport};
use super::retrans::RetransmitWatcher;
use super::workload::{FlowSpec, PlannedFlow};

/// smoltcp's congestion controllers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Congestion {
    #[default]
    Cubic,
    Reno,
    /// No congestion control: only the receive window limits the sender.
    None,
}

impl Congestion {
    pub fn name(self) -> &'static str {
        match self {
            Congestion::Cubic => "cubic",
            Congestion::Reno => "reno",
            Congestion::None => "none",
        }
    }

    fn smoltcp(self) -> CongestionControl {
        match self {
            Congestion::Cubic => CongestionControl::Cubic,
            Congestion::Reno => CongestionControl::Reno,
            Congestion::None => CongestionControl::None,
        }
    }
}

/// TCP settings of both simulated hosts (`[tcp]` in a scenario).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSettings {
    #[serde(default)]
    pub congestion: Congestion,
    /// Send and receive buffer of every socket, in bytes (smoltcp does not autotune;
    /// the receive buffer is the largest window it advertises).
    #[serde(default = "default_buffer")]
    pub buffer_bytes: usize,
    /// Delayed-ACK timeout in ms (smoltcp's default is 10); 0 acks at once.
    #[serde(default = "default_ack_delay")]
    pub ack_delay_ms: u64,
}

fn default_buffer() -> usize {
    1 << 20
}
fn default_ack_delay() -> u64 {
    10
}

impl Default for TcpSettings {
    fn default() -> Self {
        TcpSettings {
            congestion: Congestion::default(),
            buffer_bytes: default_buffer(),
            ack_delay_ms: default_ack_delay(),
        }
    }
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum FlowSimError {
    #[error(
        "flow {flow}: port {port} is still used by flow {other} (more than 60000 flows at once)"
    )]
    PortInUse { flow: u32, port: u16, other: u32 },
    #[error("flow {flow}: smoltcp refused the connection: {message}")]
    Socket { flow: u32, message: String },
}

/// Ports 1024..61024 name flows; both ends use the same port.
fn port_for(flow: u32) -> u16 {
    1024 + (flow % 60_000) as u16
}

struct ActiveFlow {
    plan: usize,
    port: u16,
    client: SocketHandle,
    server: SocketHandle,
    client_app: ClientApp,
    server_app: ServerApp,
    client_gone: bool,
    server_gone: bool,
    retransmits: u64,
    recorded: bool,
}

/// A flow workload over one carrier.
pub struct FlowSim<C: Carrier> {
    now: Duration,
    carrier: C,
    client: SimHost,
    server: SimHost,
    tcp: TcpSettings,
    specs: Vec<FlowSpec>,
    plan: Vec<PlannedFlow>,
    next_flow: usize,
    active: BTreeMap<u32, ActiveFlow>,
    by_port: HashMap<u16, u32>,
    watcher: RetransmitWatcher,
    records: Vec<FlowRecord>,
    inbox: Vec<(Side, Vec<u8>)>,
    /// Simulation steps taken (for benchmarks).
    pub steps: u64,
}

impl<C: Carrier> FlowSim<C> {
    pub fn new(
        carrier: C,
        tcp: TcpSettings,
        specs: Vec<FlowSpec>,
        plan: Vec<PlannedFlow>,
        seed: u64,
    ) -> Self {
        FlowSim {
            now: Duration::ZERO,
            carrier,
            client: SimHost::new(CLIENT_ADDR, seed ^ 0x005e_edc1),
            server: SimHost::new(SERVER_ADDR, seed ^ 0x005e_ed5e),
            tcp,
            specs,
            plan,
            next_flow: 0,
            active: BTreeMap::new(),
            by_port: HashMap::new(),
            watcher: RetransmitWatcher::default(),
            records: Vec::new(),
            inbox: Vec::new(),
            steps: 0,
        }
    }

    pub fn now(&self) -> Duration {
        self.now
    }

    /// The carrier, for its own counters.
    pub fn carrier(&self) -> &C {
        &self.carrier
    }

    pub fn carrier_stats(&self) -> CarrierStats {
        self.carrier.stats()
    }

    /// Flows started and not yet finished.
    pub fn active_flows(&self) -> usize {
        self.active.values().filter(|f| !f.recorded).count()
    }

    fn socket(&self) -> tcp::Socket<'static> {
        let buf = || tcp::SocketBuffer::new(vec![0; self.tcp.buffer_bytes]);
        let mut s = tcp::Socket::new(buf(), buf());
        s.set_congestion_control(self.tcp.congestion.smoltcp());
        // Interactive messages must not wait for a full segment (TCP_NODELAY).
        s.set_nagle_enabled(false);
        s.set_ack_delay(
            (self.tcp.ack_delay_ms > 0)
                .then(|| smoltcp::time::Duration::from_millis(self.tcp.ack_delay_ms)),
        );
        s
    }

    fn start_flow(&mut self, index: usize) -> Result<(), FlowSimError> {
        let flow = &self.plan[index];
        let (id, port) = (flow.id, port_for(flow.id));
        if let Some(&other) = self.by_port.get(&port) {
            return Err(FlowSimError::PortInUse {
                flow: id,
                port,
                other,
            });
        }
        let refused = |e: &dyn std::fmt::Display| FlowSimError::Socket {
            flow: id,
            message: e.to_string(),
        };
        let mut listener = self.socket();
        listener.listen(port).map_err(|e| refused(&e))?;
        let server = self.server.add(listener);
        let mut opener = self.socket();
        opener
            .connect(
                self.client.iface.context(),
                (IpAddress::Ipv4(SERVER_ADDR), port),
                port,
            )
            .map_err(|e| refused(&e))?;
        let client = self.client.add(opener);
        self.by_port.insert(port, id);
        self.active.insert(
            id,
            ActiveFlow {
                plan: index,
                port,
                client,
                server,
                client_app: ClientApp::new(&self.plan[index]),
                server_app: ServerApp::default(),
                client_gone: false,
                server_gone: false,
                retransmits: 0,
                recorded: false,
            },
        );
        Ok(())
    }

    /// Step every application; returns the earliest request that falls due later.
    fn step_apps(&mut self) -> Option<Duration> {
        let mut due: Option<Duration> = None;
        for f in self.active.values_mut() {
            if !f.client_gone {
                let s = self.client.tcp(f.client);
                if let Some(t) = f.client_app.step(&self.plan[f.plan], self.now, s) {
                    due = Some(due.map_or(t, |d| d.min(t)));
                }
            }
            if !f.server_gone {
                let s = self.server.tcp(f.server);
                if f.server_app.step(s).is_err() {
                    s.abort();
                }
            }
        }
        due
    }

    /// Hand what both hosts sent to the carrier, counting retransmissions.
    fn transmit(&mut self) {
        for (side, host) in [
            (Side::Client, &mut self.client),
            (Side::Server, &mut self.server),
        ] {
            for p in host.device.tx.drain(..) {
                if let Some(seg) = self.watcher.observe(side, &p) {
                    if seg.retransmission {
                        if let Some(f) = self
                            .by_port
                            .get(&seg.client_port)
                            .and_then(|id| self.active.get_mut(id))
                        {
                            f.retransmits += 1;
                        }
                    }
                }
                self.carrier.send(self.now, side, p);
            }
        }
    }

    /// Record finished flows and drop sockets that have closed.
    fn retire(&mut self) {
        let mut gone = Vec::new();
        for (&id, f) in self.active.iter_mut() {
            if !f.recorded && f.client_app.done() {
                self.records.push(FlowRecord::new(
                    &self.plan[f.plan],
                    &self.specs,
                    &f.client_app.completions,
                    f.retransmits,
                ));
                f.recorded = true;
            }
            if !f.client_gone
                && f.recorded
                && matches!(
                    self.client.tcp(f.client).state(),
                    State::TimeWait | State::Closed
                )
            {
                self.client.remove(f.client);
                f.client_gone = true;
            }
            if !f.server_gone && self.server.tcp(f.server).state() == State::Closed && f.recorded {
                self.server.remove(f.server);
                f.server_gone = true;
            }
            if f.client_gone && f.server_gone {
                gone.push(id);
            }
        }
        for id in gone {
            let f = self.active.remove(&id).expect("listed above");
            self.by_port.remove(&f.port);
            self.watcher.forget(f.port, f.port);
        }
    }

    /// Run until every flow has finished and closed, or until `end`; flows unfinished
    /// at `end` are reported as such.
    pub fn run(mut self, end: Duration) -> Result<(Vec<FlowRecord>, Duration), FlowSimError> {
        self.run_in_place(end)
    }

    /// [`FlowSim::run`], keeping the simulator (and its carrier) for inspection after.
    pub fn run_in_place(
        &mut self,
        end: Duration,
    ) -> Result<(Vec<FlowRecord>, Duration), FlowSimError> {
        let mut due: Option<Duration> = None;
        loop {
            let mut next = [
                self.plan.get(self.next_flow).map(|f| f.start),
                self.carrier.next_delivery(),
                self.client.poll_at(self.now),
                self.server.poll_at(self.now),
                due,
            ]
            .into_iter()
            .flatten()
            .min();
            if self.steps > 0 {
                // smoltcp asks for "now" only when it has work it did not finish; a
                // microsecond later (its clock's resolution) keeps time moving.
                next = next.map(|t| t.max(self.now + Duration::from_micros(1)));
            }
            let Some(next) = next else { break };
            if next > end {
                break;
            }
            self.now = next;
            self.steps += 1;
            while self
                .plan
                .get(self.next_flow)
                .is_some_and(|f| f.start <= self.now)
            {
                self.start_flow(self.next_flow)?;
                self.next_flow += 1;
            }
            self.carrier.deliver(self.now, &mut self.inbox);
            for (to, p) in self.inbox.drain(..) {
                match to {
                    Side::Client => self.client.device.rx.push_back(p),
                    Side::Server => self.server.device.rx.push_back(p),
                }
            }
            self.client.poll(self.now);
            self.server.poll(self.now);
            due = self.step_apps();
            self.client.poll(self.now);
            self.server.poll(self.now);
            self.transmit();
            self.retire();
            if self.next_flow == self.plan.len() && self.active.is_empty() {
                break;
            }
        }
        // Flows cut short by `end`.
        for f in self.active.values().filter(|f| !f.recorded) {
            self.records.push(FlowRecord::new(
                &self.plan[f.plan],
                &self.specs,
                &f.client_app.completions,
                f.retransmits,
            ));
        }
        for f in &self.plan[self.next_flow..] {
            self.records.push(FlowRecord::new(f, &self.specs, &[], 0));
        }
        Ok((std::mem::take(&mut self.records), self.now))
    }

    /// Mean rates the carrier's scheduled links were assigned so far.
    pub fn assigned_kbps(&self) -> AssignedRates {
        self.carrier.assigned_kbps()
    }
}

/// Run a plan over a carrier and summarise it.
pub fn simulate<C: Carrier>(
    scenario: &str,
    carrier: C,
    tcp: TcpSettings,
    specs: &[FlowSpec],
    plan: Vec<PlannedFlow>,
    seed: u64,
    end: Duration,
) -> Result<FlowReport, FlowSimError> {
    let mut sim = FlowSim::new(carrier, tcp, specs.to_vec(), plan, seed);
    let (records, until) = sim.run_in_place(end)?;
    let mut report = FlowReport::new(
        scenario,
        "smoltcp",
        tcp.congestion.name(),
        seed,
        until.as_secs_f64(),
        specs,
        records,
    );
    report.link_assigned_kbps = sim.assigned_kbps();
    Ok(report)
}
