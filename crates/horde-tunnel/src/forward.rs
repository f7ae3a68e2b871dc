//! The two halves of forwarding, the same at both ends: a packet read from the TUN
//! device is checked and clamped before it becomes an ADU; an ADU from the peer is
//! checked (and, at the server, its source matched against the client's addresses)
//! before it is written to the TUN device. With offloads, a read from the TUN device is
//! first cut into IP packets ([`from_tun`]).

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::{clamp_mss, max_mss, offload, parse, IpHeader, Prefix};

use crate::counters::Counters;
use crate::device::Tun;
use crate::gro::{Coalescer, Orderer};

/// Bytes to read from the TUN device at once: the largest IP packet (a TCP super packet
/// with offloads) and its `virtio_net_hdr`.
pub const READ_BUFFER: usize = 65_536 + offload::VNET_HDR_LEN;

/// The IP packets of one read from the TUN device, each handed to `each`: the read
/// itself without offloads; with them, the packets [`offload::split`] makes of it
/// (whole, checksummed, at most one segment each). A read it cannot split is counted as
/// malformed. `scratch` holds segments and is reused from read to read.
pub fn from_tun(
    read: &mut [u8],
    offloads: bool,
    scratch: &mut Vec<u8>,
    counters: &Counters,
    mut each: impl FnMut(&mut [u8]),
) {
    if !offloads {
        each(read);
        return;
    }
    match offload::split(read, scratch, &mut each) {
        Ok(1) => {}
        Ok(_) => Counters::count(&counters.tun_super_packets),
        Err(e) => {
            tracing::debug!(error = %e, "dropped a read from the TUN device");
            Counters::count(&counters.tun_malformed);
        }
    }
}

/// Check a packet read from the TUN device and clamp its MSS; `None` if it is not
/// to be sent (counted).
pub fn outbound(packet: &mut [u8], mtu: u32, counters: &Counters) -> Option<IpHeader> {
    let header = match parse(packet) {
        Ok(h) => h,
        Err(e) => {
            counters.tun_refused(e);
            return None;
        }
    };
    if is_link_scoped(header.dst) {
        Counters::count(&counters.tun_link_scoped);
        return None;
    }
    if packet.len() > mtu as usize {
        Counters::count(&counters.tun_too_big);
        return None;
    }
    if clamp_mss(packet, &header, max_mss(mtu, header.is_v6())) {
        Counters::count(&counters.mss_clamped);
    }
    Some(header)
}

/// How many events a writer takes at once before writing to the TUN device: the batch
/// in which segments are put in order and coalesced. It holds what the driver hands over
/// from one pass over its sockets (64 datagrams from each): a flow's segments arrive
/// striped over the channels, so a batch cut at 64 held runs of about two.
pub const WRITE_BATCH: usize = 512;

/// Writes to the TUN device a batch at a time: with offloads, the batch's segments are
/// put in order per TCP flow ([`Orderer`]) and consecutive ones coalesced into one write
/// ([`Coalescer`]); call [`flush`](Self::flush) at the end of each batch.
pub struct TunWriter {
    tun: Arc<Tun>,
    gro: Option<(Coalescer, Orderer)>,
    /// With offloads, the packets of the batch so far.
    batch: Vec<Bytes>,
}

impl TunWriter {
    pub fn new(tun: Arc<Tun>) -> TunWriter {
        let gro = tun
            .offloads()
            .then(|| (Coalescer::default(), Orderer::default()));
        TunWriter {
            tun,
            gro,
            batch: Vec::new(),
        }
    }

    fn write(&mut self, packet: Bytes, counters: &Counters) {
        counters.left_tunnel(packet.len());
        match &self.gro {
            Some(_) => self.batch.push(packet),
            None => written(self.tun.send(&packet), counters),
        }
    }

    /// Write the batch.
    pub fn flush(&mut self, counters: &Counters) {
        let tun = &self.tun;
        if let Some((gro, orderer)) = &mut self.gro {
            orderer.order(&mut self.batch);
            let mut write = |w: &[u8]| written(tun.send_raw(w), counters);
            for packet in self.batch.drain(..) {
                gro.push(&packet, &mut write);
            }
            gro.flush(&mut write);
            let n = gro.take_coalesced();
            if n > 0 {
                counters.tun_coalesced.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

fn written(r: std::io::Result<()>, counters: &Counters) {
    if let Err(e) = r {
        tracing::debug!(error = %e, "TUN write failed");
        counters.tun_write_errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// Write an ADU from the peer to the TUN device if it is a well-formed IP packet (from
/// one of `sources`, when given), clamping the MSS of a SYN to this end's MTU too, so
/// that segments fit both ends' MTUs.
pub fn inbound(
    out: &mut TunWriter,
    payload: Bytes,
    mtu: u32,
    sources: Option<&[Prefix]>,
    counters: &Counters,
) {
    let header = match parse(&payload) {
        Ok(h) => h,
        Err(e) => {
            counters.peer_refused(e);
            return;
        }
    };
    if let Some(sources) = sources {
        if !sources.iter().any(|p| p.contains(header.src)) {
            Counters::count(&counters.peer_spoofed);
            return;
        }
    }
    let limit = max_mss(mtu, header.is_v6());
    let mut packet = payload;
    if is_syn(&packet, &header) {
        let mut copy = packet.to_vec();
        if clamp_mss(&mut copy, &header, limit) {
            Counters::count(&counters.mss_clamped);
        }
        packet = copy.into();
    }
    out.write(packet, counters);
}

/// Multicast and link-local destinations belong to the link they were sent on (router
/// solicitations, MLD reports, mDNS): the tunnel is a routed point-to-point link with
/// nobody on it to answer them, so they are not carried.
fn is_link_scoped(dst: IpAddr) -> bool {
    match dst {
        IpAddr::V4(a) => a.is_multicast() || a.is_link_local() || a.is_broadcast(),
        IpAddr::V6(a) => a.is_multicast() || a.is_unicast_link_local(),
    }
}

/// A TCP segment with SYN set (only these carry an MSS option).
fn is_syn(packet: &[u8], header: &IpHeader) -> bool {
    header.protocol == crate::ip::PROTO_TCP
        && header
            .transport_offset
            .and_then(|o| packet.get(o + 13))
            .is_some_and(|flags| flags & 0x02 != 0)
}
