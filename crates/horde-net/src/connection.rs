//! One connection as the application holds it: a command handle and its events.

use std::sync::Arc;

use bytes::Bytes;
use horde_crypto::PublicKey;
use horde_host::{Answer, ChannelStatus, ChannelTarget, ConnOp};
use horde_policy::{Fields, Objective, ObjectiveId, Value};
use horde_proto::recovery::RecoveryStats;
use horde_proto::{AduHandle, ChannelId, Event, LatencyMode, SessionStats, StreamConfig};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot};

use crate::command::Command;
use crate::error::NetError;
use crate::event_queue::{Empty, EventQueue};
use crate::messages::HostBandwidth;
use crate::read_progress::ReadProgress;

/// A connection's events as the application reads them. Reading a
/// [`Event::Received`] frees its payload's room in the connection's receive buffer
/// ([`HostConfig::recv_buffer_bytes`]): a peer is held back while its ADUs lie unread.
///
/// [`HostConfig::recv_buffer_bytes`]: crate::HostConfig::recv_buffer_bytes
pub struct EventReceiver {
    queue: EventQueue,
    read: Arc<ReadProgress>,
}

impl EventReceiver {
    pub(crate) fn new(queue: EventQueue, read: Arc<ReadProgress>) -> Self {
        Self { queue, read }
    }

    fn count(&self, e: &Event) {
        if let Event::Received { payload, .. } = e {
            self.read.add(payload.len() as u64);
        }
    }

    /// The next event; `None` once the connection and its host are gone.
    pub async fn recv(&mut self) -> Option<Event> {
        let e = std::future::poll_fn(|cx| self.queue.poll_recv(cx)).await;
        if let Some(e) = &e {
            self.count(e);
        }
        e
    }

    /// How many events wait unread. Reading them may let more in: a shut receive
    /// window reopens as the application reads.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An event if one is waiting.
    pub fn try_recv(&mut self) -> Result<Event, TryRecvError> {
        match self.queue.try_recv() {
            Ok(e) => {
                self.count(&e);
                Ok(e)
            }
            Err(Empty::Now) => Err(TryRecvError::Empty),
            Err(Empty::ForGood) => Err(TryRecvError::Disconnected),
        }
    }
}

/// One session with a peer: a command handle plus the stream of events.
pub struct Connection {
    handle: ConnectionHandle,
    events: EventReceiver,
    peer: Option<PublicKey>,
}

impl Connection {
    pub(crate) fn new(
        key: u64,
        cmd: mpsc::UnboundedSender<Command>,
        events: EventReceiver,
        peer: Option<PublicKey>,
        bandwidth: HostBandwidth,
    ) -> Self {
        Self {
            handle: ConnectionHandle {
                key,
                cmd,
                bandwidth,
            },
            events,
            peer,
        }
    }

    /// The peer's static public key.
    pub fn peer(&self) -> Option<&PublicKey> {
        self.peer.as_ref()
    }

    /// The next event; `None` once the connection and its host are gone.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// An event if one is waiting.
    pub fn try_event(&mut self) -> Option<Event> {
        self.events.try_recv().ok()
    }

    /// Deliver every event to `callback` on a task of its own; returns the command handle.
    pub fn on_event(self, mut callback: impl FnMut(Event) + Send + 'static) -> ConnectionHandle {
        let Connection {
            handle, mut events, ..
        } = self;
        tokio::spawn(async move {
            while let Some(e) = events.recv().await {
                callback(e);
            }
        });
        handle
    }

    /// A handle for commands that can be cloned and shared between tasks.
    pub fn handle(&self) -> &ConnectionHandle {
        &self.handle
    }

    /// Split into the command handle and the event receiver.
    pub fn split(self) -> (ConnectionHandle, EventReceiver) {
        (self.handle, self.events)
    }
}

impl std::ops::Deref for Connection {
    type Target = ConnectionHandle;
    fn deref(&self) -> &ConnectionHandle {
        &self.handle
    }
}

/// Commands for one connection; cheap to clone and share between tasks.
#[derive(Clone)]
pub struct ConnectionHandle {
    key: u64,
    cmd: mpsc::UnboundedSender<Command>,
    /// Its host's bandwidth estimate.
    bandwidth: HostBandwidth,
}

impl ConnectionHandle {
    /// The bandwidth estimate of the host this connection belongs to.
    pub(crate) fn host_bandwidth(&self) -> &HostBandwidth {
        &self.bandwidth
    }

    fn op(&self, op: ConnOp) -> Result<(), NetError> {
        self.cmd
            .send(Command::Conn(self.key, op))
            .map_err(|_| NetError::HostGone)
    }

    async fn ask<T: Send + 'static>(
        &self,
        make: impl FnOnce(Answer<T>) -> ConnOp,
    ) -> Result<T, NetError> {
        let (tx, rx) = oneshot::channel();
        self.op(make(answer(tx)))?;
        rx.await.map_err(|_| NetError::HostGone)?
    }

    async fn query<T: Send + 'static>(
        &self,
        make: impl FnOnce(horde_host::Reply<T>) -> ConnOp,
    ) -> Result<T, NetError> {
        let (tx, rx) = oneshot::channel();
        self.op(make(Box::new(move |v| {
            let _ = tx.send(v);
        })))?;
        rx.await.map_err(|_| NetError::HostGone)
    }

    /// Open stream `id` for sending, with its rate limit, queue limits, ordering and loss
    /// recovery.
    pub async fn open_stream(&self, id: u32, config: StreamConfig) -> Result<(), NetError> {
        self.ask(|r| ConnOp::OpenStream(id, config, r)).await
    }

    /// Cap a stream at `max_kbps`, or make it elastic with `None`.
    pub async fn set_max_rate(&self, stream: u32, max_kbps: Option<f64>) -> Result<(), NetError> {
        self.ask(|r| ConnOp::SetMaxRate(stream, max_kbps, r)).await
    }

    /// Queue an ADU and get its handle (for changing fields or withdrawing it).
    pub async fn send_adu(
        &self,
        stream: u32,
        payload: Bytes,
        fields: Fields,
    ) -> Result<AduHandle, NetError> {
        self.ask(|r| ConnOp::Send {
            stream,
            payload,
            fields,
            reply: Some(r),
        })
        .await
    }

    /// Queue several ADUs of one stream, in order, and get a future of their handles
    /// (or why each was refused): one command and one answer for the lot, where a call
    /// per ADU pays a command, an answer and a wake-up each.
    pub fn send_adus(
        &self,
        stream: u32,
        payloads: Vec<Bytes>,
        fields: Fields,
    ) -> Result<
        impl std::future::Future<Output = Result<Vec<Result<AduHandle, NetError>>, NetError>>,
        NetError,
    > {
        let (tx, rx) = oneshot::channel();
        self.op(ConnOp::SendBatch {
            stream,
            payloads,
            fields,
            reply: Box::new(
                move |handles: Vec<Result<AduHandle, horde_host::HostError>>| {
                    let _ = tx.send(
                        handles
                            .into_iter()
                            .map(|r| r.map_err(NetError::from))
                            .collect(),
                    );
                },
            ),
        })?;
        Ok(async move { rx.await.map_err(|_| NetError::HostGone) })
    }

    /// Queue an ADU without waiting for its handle (the fast path). Errors such as an
    /// oversized ADU are logged by the host.
    pub fn send_adu_nowait(
        &self,
        stream: u32,
        payload: Bytes,
        fields: Fields,
    ) -> Result<(), NetError> {
        self.op(ConnOp::Send {
            stream,
            payload,
            fields,
            reply: None,
        })
    }

    /// Wait until `stream` may take more ADUs: at once if its queue is under the
    /// high-water mark, otherwise until it has drained to the low-water mark
    /// ([`Event::Writable`]; marks in [`StreamConfig`]). A bulk sender keeps every
    /// channel busy, without a fixed window, by alternating this with `send_adu_nowait`
    /// until the queue reaches the high mark. Fails if the stream is unknown or the
    /// session closes meanwhile.
    pub async fn writable(&self, stream: u32) -> Result<(), NetError> {
        self.ask(|r| ConnOp::Writable(stream, r)).await
    }

    /// Change a header field of a queued ADU, for objectives to see; ignored if it has left
    /// the queue.
    pub fn set_adu_field(&self, adu: AduHandle, name: &str, value: Value) -> Result<(), NetError> {
        self.op(ConnOp::SetField(adu, name.to_string(), value))
    }

    /// Withdraw a queued ADU; `false` if it was already sent.
    pub async fn remove_adu(&self, adu: AduHandle) -> Result<bool, NetError> {
        self.query(|r| ConnOp::Remove(adu, r)).await
    }

    /// Give the scheduler an objective (a compiled hose program); the id withdraws it.
    pub async fn inject_objective(
        &self,
        objective: Arc<dyn Objective>,
    ) -> Result<ObjectiveId, NetError> {
        self.query(|r| ConnOp::Inject(objective, r)).await
    }

    /// Withdraw an objective given earlier.
    pub fn remove_objective(&self, id: ObjectiveId) -> Result<(), NetError> {
        self.op(ConnOp::RemoveObjective(id))
    }

    /// (mean, variance) of the RTT seen on each live channel.
    pub async fn latency_modes(&self) -> Result<Vec<LatencyMode>, NetError> {
        self.query(ConnOp::LatencyModes).await
    }

    /// The session's counters.
    pub async fn stats(&self) -> Result<SessionStats, NetError> {
        self.query(ConnOp::Stats).await
    }

    /// What the session's loss recovery did over all its streams (coded ADUs sent, ADUs
    /// rebuilt, bytes of redundancy); `None` if no stream uses recovery.
    pub async fn recovery_stats(&self) -> Result<Option<RecoveryStats>, NetError> {
        self.query(ConnOp::Recovery).await
    }

    /// Each channel of the connection's session as it stands now (empty while a
    /// persistent connection is between sessions): for status displays.
    pub async fn channels(&self) -> Result<Vec<ChannelStatus>, NetError> {
        self.query(ConnOp::Channels).await
    }

    /// Where the session's keys stand in their rotation (`None` while a persistent
    /// connection is between sessions): for status displays.
    pub async fn key_status(&self) -> Result<Option<horde_crypto::KeyStatus>, NetError> {
        self.query(ConnOp::Keys).await
    }

    /// Add a channel over one of the host's interfaces. Fails with
    /// [`NetError::NoInterface`] if the interface was removed or is down just now; once
    /// added, the channel is removed and re-added with its interface by the pool manager.
    pub async fn add_channel(&self, target: ChannelTarget) -> Result<ChannelId, NetError> {
        self.ask(|r| ConnOp::AddChannel(target, r)).await
    }

    /// Remove a channel; what it had in flight is nacked.
    pub fn remove_channel(&self, id: ChannelId) -> Result<(), NetError> {
        self.op(ConnOp::RemoveChannel(id))
    }

    /// Close the connection: queued ADUs are nacked, and `Close` is repeated until the peer
    /// acknowledges it.
    pub fn close(&self) -> Result<(), NetError> {
        self.op(ConnOp::Close)
    }
}

/// The host's answer, sent on to the caller waiting on `tx`. Dropped unanswered (the
/// connection is gone), it drops `tx`, and the caller hears the host is gone.
fn answer<T: Send + 'static>(tx: oneshot::Sender<Result<T, NetError>>) -> Answer<T> {
    Box::new(move |r| {
        let _ = tx.send(r.map_err(NetError::from));
    })
}
