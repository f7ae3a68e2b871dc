//! What the driver sends: the [`Transmit`] it is told of, the packets queued on the
//! channel set, and their encoding.

use std::net::SocketAddr;
use std::time::Duration;

use horde_policy::ChannelId;

use super::channels::ChannelSet;
use super::pending::{pending_channel, PendingTx};
use super::{AduHandle, Session};
use crate::wire::{self, Packet, MAX_PACKED_ADUS, PACKED_ENTRY_LEN};

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

/// What every packet of the session carries besides its own fields.
pub(super) struct Header<'a> {
    pub(super) conn: u64,
    pub(super) service: u32,
    /// This end's addresses, announced in hellos and their acks.
    pub(super) aliases: &'a [SocketAddr],
}

impl Session {
    pub(super) fn send_ts(&self, now: Duration) -> u32 {
        now.saturating_sub(self.epoch).as_micros() as u32
    }
}

impl ChannelSet {
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

    /// Write the queued packet `p` into `buf` and say where it goes.
    pub(super) fn encode_pending(
        &mut self,
        now: Duration,
        p: PendingTx,
        header: &Header<'_>,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        let cid = pending_channel(&p);
        let idx = self.index(cid)?;
        let conn = header.conn;
        let mut sent = TransmitAdus::NONE;
        let mut packet_seq = None;
        match p {
            PendingTx::Hello(_) => wire::encode(
                &Packet::Hello {
                    conn,
                    channel: cid,
                    service: header.service,
                    aliases: header.aliases.to_vec(),
                },
                buf,
            ),
            PendingTx::HelloAck(_) => wire::encode(
                &Packet::HelloAck {
                    conn,
                    channel: cid,
                    aliases: header.aliases.to_vec(),
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
                self[idx].recycle_ack(ack);
                self[idx].on_ack_sent(now, buf.len());
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
        let ch = &self[idx];
        Some(Transmit {
            local: ch.local,
            dst: ch.remote,
            channel: cid,
            seq: packet_seq,
            adus: sent,
        })
    }
}
