//! Anchors measured in the same run as Horde: plain UDP and QUIC (quinn).

mod cpu;
pub mod quic;
pub mod udp;

pub use cpu::cpu_time;

use std::time::Duration;

/// What one run delivered: packets, payload bytes, the span from first to last arrival
/// and the process CPU time the run took.
#[derive(Clone, Copy)]
pub struct Figures {
    pub packets: u64,
    pub bytes: u64,
    pub span: Duration,
    pub cpu: Duration,
}

impl Figures {
    pub fn new(packets: u64, bytes: u64, span: Duration, cpu: Duration) -> Self {
        Figures {
            packets,
            bytes,
            span,
            cpu,
        }
    }

    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.span.as_secs_f64().max(1e-9) / 1e9
    }

    pub fn pps(&self) -> f64 {
        self.packets as f64 / self.span.as_secs_f64().max(1e-9)
    }

    pub fn cpu_us_per_packet(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.packets.max(1) as f64
    }
}
