//! Building packets: the queue of packets waiting to go out, the ADUs a cycle assigned
//! to a slot turned into a `Data` or `Packed` packet, and their encoding.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use horde_policy::{ChannelId, HistoryEntry, Outcome, TxSlot};

use super::{AduHandle, CycleScratch, Session};
use crate::channel::SentAdu;
use crate::packing::packet_size;
use crate::stream::InFlightPolicy;
use crate::wire::{
    self, Ack, Packet, FLAG_ORDERED, FLAG_RECOVERY, MAX_PACKED_ADUS, PACKED_ENTRY_LEN,
};

/// A datagram the driver must send: `payload` was written into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Local interface (socket) to send from.
    pub local: u16,
    /// The peer's address on the channel: where the datagram goes.
    pub dst: SocketAddr,
    /// The channel the datagram belongs to.
    pub channel: ChannelId,
    /// The channel sequence number the datagram carries (data, packed data and pings).
    pub seq: Option<u64>,
    /// The ADUs it carries, in packet order; empty for control packets.
    pub adus: TransmitAdus,
}

/// The ADUs of one [`Transmit`]: at most [`MAX_PACKED_ADUS`], held inline so that
/// polling a datagram allocates nothing. Dereferences to a slice.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TransmitAdus {
    len: u8,
    items: [AduHandle; MAX_PACKED_ADUS],
}

impl TransmitAdus {
    const NONE: Self = Self {
        len: 0,
        items: [AduHandle {
            stream: 0,
            id: 0,
            seq: 0,
        }; MAX_PACKED_ADUS],
    };

    pub(super) fn push(&mut self, h: AduHandle) {
        if let Some(slot) = self.items.get_mut(usize::from(self.len)) {
            *slot = h;
            self.len += 1;
        }
    }
}

impl Default for TransmitAdus {
    fn default() -> Self {
        Self::NONE
    }
}

impl std::ops::Deref for TransmitAdus {
    type Target = [AduHandle];
    fn deref(&self) -> &[AduHandle] {
        &self.items[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for TransmitAdus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[derive(Debug)]
pub(super) enum PendingTx {
    Hello(usize),
    HelloAck(usize),
    Data {
        channel: usize,
        seq: u64,
        flags: u8,
        send_ts: u32,
        id: u64,
        stream: u32,
        stream_seq: u64,
        payload: Bytes,
    },
    /// Several ADUs in one packet: the next `count` entries of `Session::tx_adus`
    /// from absolute index `first`.
    Packed {
        channel: usize,
        seq: u64,
        send_ts: u32,
        first: u64,
        count: u8,
    },
    Ack(usize, Ack),
    Ping(usize, u64, u32),
    Close(usize),
    CloseAck(usize),
    Window(usize, u64),
}

/// One ADU waiting in a packed packet's entry list.
#[derive(Debug)]
pub(super) struct PendingAdu {
    pub(super) id: u64,
    pub(super) flags: u8,
    pub(super) stream: u32,
    pub(super) stream_seq: u64,
    pub(super) payload: Bytes,
}

pub(super) fn pending_channel(p: &PendingTx) -> usize {
    match p {
        PendingTx::Hello(i)
        | PendingTx::HelloAck(i)
        | PendingTx::Ack(i, _)
        | PendingTx::Ping(i, _, _)
        | PendingTx::Close(i)
        | PendingTx::CloseAck(i)
        | PendingTx::Window(i, _) => *i,
        PendingTx::Data { channel, .. } | PendingTx::Packed { channel, .. } => *channel,
    }
}

/// After removing channel index `removed`, later indices move down by one.
pub(super) fn shift_channel_index(p: &mut PendingTx, removed: usize) {
    let i = match p {
        PendingTx::Hello(i)
        | PendingTx::HelloAck(i)
        | PendingTx::Ack(i, _)
        | PendingTx::Ping(i, _, _)
        | PendingTx::Close(i)
        | PendingTx::CloseAck(i)
        | PendingTx::Window(i, _) => i,
        PendingTx::Data { channel, .. } | PendingTx::Packed { channel, .. } => channel,
    };
    if *i > removed {
        *i -= 1;
    }
}

impl Session {
    pub(super) fn send_ts(&self, now: Duration) -> u32 {
        now.saturating_sub(self.epoch).as_micros() as u32
    }

    /// Write a packed packet whose entries start at absolute index `first` of
    /// `tx_adus`. Entries before it belong to packets dropped with their channel.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn encode_packed(
        &mut self,
        conn: u64,
        cid: ChannelId,
        seq: u64,
        send_ts: u32,
        first: u64,
        count: u8,
        buf: &mut Vec<u8>,
        sent: &mut TransmitAdus,
    ) {
        while self.tx_adus_base < first && self.tx_adus.pop_front().is_some() {
            self.tx_adus_base += 1;
        }
        let n = usize::from(count).min(self.tx_adus.len());
        let body: usize = self
            .tx_adus
            .iter()
            .take(n)
            .map(|a| PACKED_ENTRY_LEN + a.payload.len())
            .sum();
        buf.reserve(wire::PACKED_HEADER_LEN + body);
        wire::encode_packed_header(conn, cid, seq, send_ts, n as u8, buf);
        for a in self.tx_adus.drain(..n) {
            // Lengths were checked against the slot (at most an mtu, far below 64 KiB).
            let _ = wire::encode_packed_entry(a.flags, a.stream, a.stream_seq, &a.payload, buf);
            sent.push(AduHandle {
                stream: a.stream,
                id: a.id,
                seq: a.stream_seq,
            });
        }
        self.tx_adus_base += n as u64;
    }

    /// Send one packet in `slot` carrying the collected ADUs `members` (indices into
    /// `cy.adus`): one ADU as a `Data` packet, several as a `Packed` one.
    pub(super) fn transmit_packet(
        &mut self,
        now: Duration,
        slot: &TxSlot,
        members: &[usize],
        cy: &mut CycleScratch,
    ) {
        let Some(idx) = self.channel_index(slot.channel) else {
            return;
        };
        cy.sent_adus.clear();
        cy.packet_adus.clear();
        let seq_peek = self.channels[idx].next_seq_peek();
        for &a in members {
            let view = &cy.adus[a];
            let Some(stream) = self.send.get_mut(&view.stream_id) else {
                continue;
            };
            let Some(q) = stream.take(view.id) else {
                continue;
            };
            let (ch, p) = (slot.channel, slot.loss_probability);
            self.recovery
                .on_transmit(view.stream_id, q.id, (ch, seq_peek), p, q.payload.len());
            stream.credit -= q.payload.len() as f64;
            if let Some(d) = self.debt.get_mut(&view.stream_id) {
                *d -= q.payload.len() as f64;
            }
            if stream.config.on_reconnect == InFlightPolicy::Resend {
                self.life.resend.insert(q.id, (view.stream_id, q.clone()));
            }
            let mut flags = if stream.config.ordered {
                FLAG_ORDERED
            } else {
                0
            };
            if stream.config.recovery.is_on() {
                flags |= FLAG_RECOVERY;
            }
            let history = if self.objectives.is_empty() {
                None
            } else {
                let h = self.history_base + self.history.len() as u64;
                let mut s = slot.clone();
                s.sequence = seq_peek;
                self.history.push_back(HistoryEntry {
                    adu: view.clone(),
                    slot: s,
                    outcome: Outcome::Pending,
                });
                while self.history.len() > self.config.history_len {
                    self.history.pop_front();
                    self.history_base += 1;
                }
                Some(h)
            };
            cy.sent_adus.push(SentAdu {
                adu: q.id,
                stream: view.stream_id,
                stream_seq: q.seq,
                inserted: q.inserted,
                history,
                payload: q.payload.len() as u32,
            });
            cy.packet_adus.push(PendingAdu {
                id: q.id,
                flags,
                stream: view.stream_id,
                stream_seq: q.seq,
                payload: q.payload,
            });
        }
        if cy.packet_adus.is_empty() {
            return;
        }
        let size = packet_size(cy.packet_adus.iter().map(|a| a.payload.len())) as u32;
        let payload: usize = cy.packet_adus.iter().map(|a| a.payload.len()).sum();
        self.life.flow.sent += payload as u64;
        let seq = self.channels[idx].on_send(now, size, &cy.sent_adus);
        self.stats.adus_sent += cy.packet_adus.len() as u64;
        let send_ts = self.send_ts(now);
        if cy.packet_adus.len() == 1 {
            let a = cy.packet_adus.pop().expect("one ADU");
            self.tx.push_back(PendingTx::Data {
                channel: idx,
                seq,
                flags: a.flags,
                send_ts,
                id: a.id,
                stream: a.stream,
                stream_seq: a.stream_seq,
                payload: a.payload,
            });
            return;
        }
        let first = self.tx_adus_base + self.tx_adus.len() as u64;
        let count = cy.packet_adus.len() as u8;
        self.tx_adus.extend(cy.packet_adus.drain(..));
        self.tx.push_back(PendingTx::Packed {
            channel: idx,
            seq,
            send_ts,
            first,
            count,
        });
    }

    /// Write the queued packet `p` into `buf` and say where it goes.
    pub(super) fn encode_pending(
        &mut self,
        now: Duration,
        p: PendingTx,
        buf: &mut Vec<u8>,
    ) -> Transmit {
        let idx = pending_channel(&p);
        let (conn, cid) = (self.conn, self.channels[idx].id);
        let mut sent = TransmitAdus::NONE;
        let mut packet_seq = None;
        match p {
            PendingTx::Hello(_) => wire::encode(
                &Packet::Hello {
                    conn,
                    channel: cid,
                    service: self.service,
                    aliases: self.local_aliases.clone(),
                },
                buf,
            ),
            PendingTx::HelloAck(_) => wire::encode(
                &Packet::HelloAck {
                    conn,
                    channel: cid,
                    aliases: self.local_aliases.clone(),
                },
                buf,
            ),
            PendingTx::Data {
                seq,
                flags,
                send_ts,
                id,
                stream,
                stream_seq,
                payload,
                ..
            } => {
                buf.reserve(wire::DATA_HEADER_LEN + payload.len());
                wire::encode_data_header(conn, cid, flags, seq, send_ts, stream, stream_seq, buf);
                buf.extend_from_slice(&payload);
                packet_seq = Some(seq);
                sent.push(AduHandle {
                    stream,
                    id,
                    seq: stream_seq,
                });
            }
            PendingTx::Packed {
                seq,
                send_ts,
                first,
                count,
                ..
            } => {
                packet_seq = Some(seq);
                self.encode_packed(conn, cid, seq, send_ts, first, count, buf, &mut sent);
            }
            PendingTx::Ack(_, ack) => {
                wire::encode_ack(&ack, buf);
                self.channels[idx].recycle_ack(ack);
                self.channels[idx].on_ack_sent(now, buf.len());
            }
            PendingTx::Ping(_, seq, send_ts) => {
                packet_seq = Some(seq);
                wire::encode(
                    &Packet::Ping {
                        conn,
                        channel: cid,
                        seq,
                        send_ts,
                    },
                    buf,
                )
            }
            PendingTx::Close(_) => wire::encode(&Packet::Close { conn }, buf),
            PendingTx::CloseAck(_) => wire::encode(&Packet::CloseAck { conn }, buf),
            PendingTx::Window(_, limit) => wire::encode(&Packet::Window { conn, limit }, buf),
        }
        let ch = &self.channels[idx];
        Transmit {
            local: ch.local,
            dst: ch.remote,
            channel: cid,
            seq: packet_seq,
            adus: sent,
        }
    }

    /// Forget the packets queued for the channel at index `idx`, which is going away;
    /// later channels' indices move down by one.
    pub(super) fn drop_pending_on(&mut self, idx: usize) {
        self.tx.retain(|p| pending_channel(p) != idx);
        for p in self.tx.iter_mut() {
            shift_channel_index(p, idx);
        }
        // Entries of packed packets that went with the channel are skipped when the next
        // packed packet is encoded; with none left, drop them now.
        if !self
            .tx
            .iter()
            .any(|p| matches!(p, PendingTx::Packed { .. }))
        {
            self.tx_adus_base += self.tx_adus.len() as u64;
            self.tx_adus.clear();
        }
    }
}
