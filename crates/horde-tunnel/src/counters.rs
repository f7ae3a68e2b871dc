//! What the tunnel counts: packets each way, and every packet it refused, by reason.
//! Shared by the tasks that read the TUN device and the connections.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::PacketError;
use serde::Serialize;

#[derive(Default)]
pub struct Counters {
    /// Packets read from the TUN device and sent as ADUs.
    pub tun_in: AtomicU64,
    pub tun_in_bytes: AtomicU64,
    /// Packets received from a peer and written to the TUN device.
    pub tun_out: AtomicU64,
    pub tun_out_bytes: AtomicU64,
    /// SYNs whose MSS option was lowered.
    pub mss_clamped: AtomicU64,
    /// Reads from the TUN device (with offloads) that were TCP super packets, cut into
    /// segments.
    pub tun_super_packets: AtomicU64,
    /// Writes to the TUN device (with offloads) that carried several TCP segments of
    /// one flow, coalesced.
    pub tun_coalesced: AtomicU64,
    /// Read from the TUN device but not an IP packet the tunnel carries.
    pub tun_malformed: AtomicU64,
    /// Read from the TUN device for an address no client is routed to (server), or
    /// while no session is up to take it.
    pub tun_no_route: AtomicU64,
    /// Read from the TUN device for a multicast or link-local address (not carried).
    pub tun_link_scoped: AtomicU64,
    /// Larger than the tunnel MTU (the device's MTU was changed behind our back).
    pub tun_too_big: AtomicU64,
    /// ADUs from a peer that are not well-formed IP packets.
    pub peer_malformed: AtomicU64,
    /// ADUs from a client whose source address is not one of its tunnel addresses.
    pub peer_spoofed: AtomicU64,
    /// ADUs on another stream than the tunnel's.
    pub peer_foreign_stream: AtomicU64,
    /// Writes to the TUN device that failed.
    pub tun_write_errors: AtomicU64,
    /// Packets the ingress queue discipline dropped (full, or CoDel).
    pub ingress_dropped: AtomicU64,
}

/// A snapshot, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub tun_in: u64,
    pub tun_in_bytes: u64,
    pub tun_out: u64,
    pub tun_out_bytes: u64,
    pub mss_clamped: u64,
    pub tun_super_packets: u64,
    pub tun_coalesced: u64,
    pub tun_malformed: u64,
    pub tun_no_route: u64,
    pub tun_link_scoped: u64,
    pub tun_too_big: u64,
    pub peer_malformed: u64,
    pub peer_spoofed: u64,
    pub peer_foreign_stream: u64,
    pub tun_write_errors: u64,
    pub ingress_dropped: u64,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    pub fn count(c: &AtomicU64) {
        add(c, 1);
    }

    pub fn entered_tunnel(&self, bytes: usize) {
        add(&self.tun_in, 1);
        add(&self.tun_in_bytes, bytes as u64);
    }

    pub fn left_tunnel(&self, bytes: usize) {
        add(&self.tun_out, 1);
        add(&self.tun_out_bytes, bytes as u64);
    }

    /// A packet from the TUN device that failed to parse. Every reason counts as
    /// malformed; the log says which.
    pub fn tun_refused(&self, e: PacketError) {
        tracing::debug!(error = %e, "dropped a packet from the TUN device");
        add(&self.tun_malformed, 1);
    }

    pub fn ingress_dropped(&self, n: usize) {
        add(&self.ingress_dropped, n as u64);
    }

    pub fn peer_refused(&self, e: PacketError) {
        tracing::debug!(error = %e, "dropped a malformed packet from the peer");
        add(&self.peer_malformed, 1);
    }

    pub fn snapshot(&self) -> Snapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Snapshot {
            tun_in: g(&self.tun_in),
            tun_in_bytes: g(&self.tun_in_bytes),
            tun_out: g(&self.tun_out),
            tun_out_bytes: g(&self.tun_out_bytes),
            mss_clamped: g(&self.mss_clamped),
            tun_super_packets: g(&self.tun_super_packets),
            tun_coalesced: g(&self.tun_coalesced),
            tun_malformed: g(&self.tun_malformed),
            tun_no_route: g(&self.tun_no_route),
            tun_link_scoped: g(&self.tun_link_scoped),
            tun_too_big: g(&self.tun_too_big),
            peer_malformed: g(&self.peer_malformed),
            peer_spoofed: g(&self.peer_spoofed),
            peer_foreign_stream: g(&self.peer_foreign_stream),
            tun_write_errors: g(&self.tun_write_errors),
            ingress_dropped: g(&self.ingress_dropped),
        }
    }
}
