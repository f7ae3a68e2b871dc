//! Strict priority: packets are sorted into bands by configured rules; a band is served
//! only when every higher band is empty; FIFO within a band.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use crate::{FlowKey, Limit, Packet, Qdisc, QdiscError};

/// Puts the flows it matches in `band`. Every field that is set must match; a rule with no
/// field set matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpqRule {
    /// The band, 0 being served first.
    pub band: usize,
    /// IP protocol number.
    pub protocol: Option<u8>,
    /// Source address.
    pub src: Option<IpAddr>,
    /// Destination address.
    pub dst: Option<IpAddr>,
    /// Source ports.
    pub src_ports: Option<RangeInclusive<u16>>,
    /// Destination ports.
    pub dst_ports: Option<RangeInclusive<u16>>,
}

impl SpqRule {
    fn matches(&self, flow: &FlowKey) -> bool {
        self.protocol.is_none_or(|p| p == flow.protocol)
            && self.src.is_none_or(|a| a == flow.src)
            && self.dst.is_none_or(|a| a == flow.dst)
            && self
                .src_ports
                .as_ref()
                .is_none_or(|r| r.contains(&flow.src_port))
            && self
                .dst_ports
                .as_ref()
                .is_none_or(|r| r.contains(&flow.dst_port))
    }
}

/// Strict priority configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpqConfig {
    /// Number of bands (at least 1).
    pub bands: usize,
    /// Rules, tried in order; the first match decides the band.
    pub rules: Vec<SpqRule>,
    /// The band of flows no rule matches.
    pub default_band: usize,
    /// Capacity shared by all bands.
    pub limit: Limit,
}

/// Strict priority queueing over [`SpqConfig::bands`] FIFO bands.
///
/// When an arrival does not fit, packets are pushed out from the tail of the lowest band
/// that is below the arrival's band and not empty; if emptying every lower band would
/// still leave no room, nothing is pushed out and the arrival is dropped. So a full buffer of low-priority packets never shuts out a high-priority one.
#[derive(Debug)]
pub struct Spq<T> {
    config: SpqConfig,
    bands: Vec<VecDeque<Packet<T>>>,
    /// Bytes queued in each band.
    band_bytes: Vec<u64>,
    len: usize,
    bytes: u64,
}

impl<T> Spq<T> {
    /// A strict priority queue per `config`.
    pub fn new(config: SpqConfig) -> Result<Spq<T>, QdiscError> {
        config.limit.validate("spq limit", 1)?;
        if config.bands == 0 {
            return Err(QdiscError::invalid("spq bands", "at least 1", 0));
        }
        let top = config.bands - 1;
        if config.default_band > top {
            return Err(QdiscError::invalid(
                "spq default_band",
                format!("a band in 0..={top}"),
                config.default_band,
            ));
        }
        if let Some(rule) = config.rules.iter().find(|r| r.band > top) {
            return Err(QdiscError::invalid(
                "spq rule band",
                format!("a band in 0..={top}"),
                rule.band,
            ));
        }
        let bands = (0..config.bands).map(|_| VecDeque::new()).collect();
        Ok(Spq {
            band_bytes: vec![0; config.bands],
            config,
            bands,
            len: 0,
            bytes: 0,
        })
    }

    /// The band `flow` is served in.
    pub fn band_of(&self, flow: &FlowKey) -> usize {
        self.config
            .rules
            .iter()
            .find(|r| r.matches(flow))
            .map_or(self.config.default_band, |r| r.band)
    }

    /// Drops the tail of the lowest non-empty band below `band`; false if there is none.
    fn push_out_below(&mut self, band: usize, drops: &mut Vec<Packet<T>>) -> bool {
        let Some(victim) = (band + 1..self.bands.len())
            .rev()
            .find(|&b| !self.bands[b].is_empty())
        else {
            return false;
        };
        let packet = self.bands[victim].pop_back().expect("band is not empty");
        self.band_bytes[victim] -= u64::from(packet.len);
        self.len -= 1;
        self.bytes -= u64::from(packet.len);
        drops.push(packet);
        true
    }
}

impl<T> Qdisc<T> for Spq<T> {
    fn enqueue(&mut self, packet: Packet<T>, drops: &mut Vec<Packet<T>>) {
        let band = self.band_of(&packet.flow);
        // Push nothing out if even emptying every lower band would not make room.
        let below = band + 1..self.bands.len();
        let lower_len: usize = below.clone().map(|b| self.bands[b].len()).sum();
        let lower_bytes: u64 = below.map(|b| self.band_bytes[b]).sum();
        if !self.config.limit.holds(
            self.len + 1 - lower_len,
            self.bytes + u64::from(packet.len) - lower_bytes,
        ) {
            drops.push(packet);
            return;
        }
        while !self
            .config
            .limit
            .holds(self.len + 1, self.bytes + u64::from(packet.len))
        {
            if !self.push_out_below(band, drops) {
                drops.push(packet);
                return;
            }
        }
        self.len += 1;
        self.bytes += u64::from(packet.len);
        self.band_bytes[band] += u64::from(packet.len);
        self.bands[band].push_back(packet);
    }

    fn dequeue(&mut self, _now: Duration, _drops: &mut Vec<Packet<T>>) -> Option<Packet<T>> {
        let band = self.bands.iter().position(|b| !b.is_empty())?;
        let packet = self.bands[band].pop_front().expect("band is not empty");
        self.band_bytes[band] -= u64::from(packet.len);
        self.len -= 1;
        self.bytes -= u64::from(packet.len);
        Some(packet)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }
}
