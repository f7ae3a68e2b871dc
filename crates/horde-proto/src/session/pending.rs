//! Packets queued on a channel, not yet encoded: what the session's parts queue and
//! the transmit path writes.

use bytes::Bytes;
use horde_policy::ChannelId;

use crate::wire::Ack;

/// A packet waiting to be written, on the channel it names.
#[derive(Debug)]
pub(super) enum PendingTx {
    Hello(ChannelId),
    HelloAck(ChannelId),
    Data {
        channel: ChannelId,
        seq: u64,
        flags: u8,
        send_ts: u32,
        id: u64,
        stream: u32,
        stream_seq: u64,
        payload: Bytes,
    },
    /// Several ADUs in one packet: the next `count` entries of `ChannelSet::tx_adus`
    /// from absolute index `first`.
    Packed {
        channel: ChannelId,
        seq: u64,
        send_ts: u32,
        first: u64,
        count: u8,
    },
    Ack(ChannelId, Ack),
    Ping(ChannelId, u64, u32),
    Close(ChannelId),
    CloseAck(ChannelId),
    Window(ChannelId, u64),
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

/// The channel a pending packet goes out on.
pub(super) fn pending_channel(p: &PendingTx) -> ChannelId {
    match p {
        PendingTx::Hello(c)
        | PendingTx::HelloAck(c)
        | PendingTx::Ack(c, _)
        | PendingTx::Ping(c, _, _)
        | PendingTx::Close(c)
        | PendingTx::CloseAck(c)
        | PendingTx::Window(c, _) => *c,
        PendingTx::Data { channel, .. } | PendingTx::Packed { channel, .. } => *channel,
    }
}
