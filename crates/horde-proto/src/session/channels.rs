//! The session's channels and the packets queued to go out on them.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use horde_policy::ChannelId;

use super::pending::{pending_channel, PendingAdu, PendingTx};
use crate::channel::{Channel, ChannelConfig, SentAdu};
use crate::packing::packet_size;
use crate::wire;

/// Settings of the channels a peer opens (accepting side), by channel id.
pub(super) type PeerChannelConfig = Arc<dyn Fn(ChannelId) -> ChannelConfig + Send + Sync>;

/// The channels in the order they were added, and the packets waiting to be written,
/// each naming its channel by id. Dereferences to the channels.
pub(super) struct ChannelSet {
    list: Vec<Channel>,
    tx: VecDeque<PendingTx>,
    /// Entries of queued `PendingTx::Packed` packets, in order; `tx_adus_base` is the
    /// absolute index of the first.
    pub(super) tx_adus: VecDeque<PendingAdu>,
    pub(super) tx_adus_base: u64,
    /// Configuration for channels the peer opens (accepting side), by channel id.
    pub(super) peer_config: PeerChannelConfig,
    /// Channels the peer opened that this end removed (accepting side): when the peer's
    /// traffic re-creates one, the application hears [`Event::ChannelUp`].
    ///
    /// [`Event::ChannelUp`]: crate::Event::ChannelUp
    pub(super) removed: Vec<ChannelId>,
}

impl std::ops::Deref for ChannelSet {
    type Target = [Channel];
    fn deref(&self) -> &[Channel] {
        &self.list
    }
}

impl std::ops::DerefMut for ChannelSet {
    fn deref_mut(&mut self) -> &mut [Channel] {
        &mut self.list
    }
}

impl std::fmt::Debug for ChannelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.list).finish()
    }
}

impl ChannelSet {
    pub(super) fn new() -> Self {
        Self {
            list: Vec::new(),
            tx: VecDeque::new(),
            tx_adus: VecDeque::new(),
            tx_adus_base: 0,
            peer_config: Arc::new(|_| ChannelConfig::default()),
            removed: Vec::new(),
        }
    }

    /// Where channel `id` stands in the set.
    pub(super) fn index(&self, id: ChannelId) -> Option<usize> {
        self.list.iter().position(|c| c.id == id)
    }

    /// Add a channel last; returns its index.
    pub(super) fn push(&mut self, ch: Channel) -> usize {
        // Channels come a few at a time and a channel is large: no room for a fourth
        // when three are opened (a server keeps thousands of sessions).
        self.list.reserve_exact(1);
        self.list.push(ch);
        self.list.len() - 1
    }

    /// Take the channel at `idx` out of the set with the packets queued for it.
    pub(super) fn remove(&mut self, idx: usize) -> Channel {
        let ch = self.list.remove(idx);
        self.drop_pending_on(ch.id);
        ch
    }

    /// Queue a packet.
    pub(super) fn queue(&mut self, p: PendingTx) {
        self.tx.push_back(p);
    }

    /// Queue one packet on every channel.
    pub(super) fn queue_on_all(&mut self, packet: impl Fn(ChannelId) -> PendingTx) {
        for c in &self.list {
            self.tx.push_back(packet(c.id));
        }
    }

    pub(super) fn has_pending(&self) -> bool {
        !self.tx.is_empty()
    }

    pub(super) fn pop_pending(&mut self) -> Option<PendingTx> {
        self.tx.pop_front()
    }

    /// Keep only the queued packets `keep` says.
    pub(super) fn retain_pending(&mut self, keep: impl FnMut(&PendingTx) -> bool) {
        self.tx.retain(keep);
    }

    /// Queue the acks the channels owe now.
    pub(super) fn queue_acks(&mut self, now: Duration, conn: u64) {
        for c in &mut self.list {
            if let Some(ack) = c.take_ack(now, conn) {
                self.tx.push_back(PendingTx::Ack(c.id, ack));
            }
        }
    }

    /// Send a ping on the channel at `idx` (a probe or keepalive), stamped `send_ts`.
    pub(super) fn ping(&mut self, idx: usize, now: Duration, send_ts: u32) {
        let c = &mut self.list[idx];
        let seq = c.on_send(now, wire::DATA_HEADER_LEN as u32, &[]);
        self.tx.push_back(PendingTx::Ping(c.id, seq, send_ts));
    }

    /// Hand the channel at `idx` a packet carrying `adus` (payloads in `entries`, in
    /// packet order): one ADU goes as a `Data` packet, several as a `Packed` one.
    pub(super) fn send_packet(
        &mut self,
        idx: usize,
        now: Duration,
        send_ts: u32,
        adus: &[SentAdu],
        entries: &mut Vec<PendingAdu>,
    ) {
        let size = packet_size(entries.iter().map(|a| a.payload.len())) as u32;
        let c = &mut self.list[idx];
        let seq = c.on_send(now, size, adus);
        let channel = c.id;
        if entries.len() == 1 {
            let a = entries.pop().expect("one ADU");
            self.tx.push_back(PendingTx::Data {
                channel,
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
        let count = entries.len() as u8;
        self.tx_adus.extend(entries.drain(..));
        self.tx.push_back(PendingTx::Packed {
            channel,
            seq,
            send_ts,
            first,
            count,
        });
    }

    /// Forget the packets queued for channel `id`, which is going away.
    fn drop_pending_on(&mut self, id: ChannelId) {
        self.tx.retain(|p| pending_channel(p) != id);
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

    /// Largest ADU any live channel can carry.
    pub(super) fn max_adu(&self) -> u32 {
        self.list.iter().map(|c| c.max_adu()).max().unwrap_or(0)
    }

    /// Packets (data, pings, probes) the channels have sent so far.
    pub(super) fn packets_sent(&self) -> u64 {
        self.list.iter().map(|c| c.stats.packets_sent).sum()
    }

    /// Channels that could send but have nothing to: their rate samples understate them.
    pub(super) fn mark_idle_app_limited(&mut self, now: Duration) {
        for c in &mut self.list {
            if c.next_send_at(now).is_some_and(|t| t <= now) {
                c.mark_app_limited();
            }
        }
    }

    /// The earliest of the channels' own timers.
    pub(super) fn next_timeout(&self) -> Option<Duration> {
        self.list.iter().filter_map(Channel::next_timeout).min()
    }

    /// When the first channel that has sent nothing for `interval` reaches it.
    pub(super) fn keepalive_deadline(&self, interval: Duration) -> Option<Duration> {
        self.list.iter().map(|c| c.last_sent() + interval).min()
    }
}
