//! The sender's message scheduler: admission, slot choice, early expiry and the fate of
//! every message.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use super::admission::{self, Capacity, WalkItem};
use super::queue::{MessageQueue, ReadyKey};
use super::{
    AdmissionPolicy, ChannelEstimate, ControlItem, Fate, MessageConfig, MessageError, MessageEvent,
    MessageId, MessageSpec, Piece, QueueId, Refusal, PRIORITY_LEVELS,
};

/// Where a live message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for slots, or between pieces.
    Ready,
    /// Not sent until resumed; `early` when the scheduler suspended it for its deadline.
    Suspended { early: bool },
    /// Every piece was handed out; waiting for the driver's delivery confirmation.
    Sent,
}

#[derive(Debug)]
struct Message {
    spec: MessageSpec,
    submitted: Duration,
    seq: u64,
    sent_pieces: u64,
    total_pieces: u64,
    state: State,
    /// The early callback fired for the current deadline.
    early_fired: bool,
    /// The application continued it after the early callback.
    continued: bool,
}

impl Message {
    fn key(&self, id: MessageId) -> ReadyKey {
        ReadyKey::new(self.spec.deadline, self.seq, id)
    }

    fn remaining_pieces(&self) -> u64 {
        self.total_pieces - self.sent_pieces
    }

    fn remaining_bytes(&self, piece_size: u32) -> u64 {
        let sent = self.sent_pieces.saturating_mul(u64::from(piece_size));
        self.spec.size.saturating_sub(sent)
    }

    fn walk_item(&self, id: MessageId) -> WalkItem {
        WalkItem {
            id,
            pieces: self.remaining_pieces(),
            deadline: self.spec.deadline,
            continued: self.continued,
        }
    }
}

/// What the application can ask about a live message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageStatus {
    /// Its current priority.
    pub priority: u8,
    /// Its current deadline.
    pub deadline: Option<Duration>,
    /// Bytes not yet handed to a channel.
    pub remaining: u64,
    /// Suspended, by the application or by its early callback.
    pub suspended: bool,
    /// All of it was handed to channels; it waits for the delivery confirmation.
    pub fully_sent: bool,
}

/// The sender side of the message layer. See the [module](super) documentation.
#[derive(Debug)]
pub struct MessageScheduler {
    config: MessageConfig,
    channels: Vec<ChannelEstimate>,
    queues: BTreeMap<QueueId, MessageQueue>,
    messages: HashMap<MessageId, Message>,
    /// Live, unsent messages with a deadline, earliest first: expiry pops from the front.
    deadlines: BTreeSet<(Duration, MessageId)>,
    finished: HashMap<MessageId, Fate>,
    finished_order: VecDeque<MessageId>,
    events: VecDeque<MessageEvent>,
    controls: VecDeque<ControlItem>,
    streams_active: bool,
    last_check: Option<Duration>,
    next_id: u64,
    next_seq: u64,
}

impl MessageScheduler {
    /// A scheduler with queue 0 (weight 1) and no channel yet.
    pub fn new(config: MessageConfig) -> Result<Self, MessageError> {
        let invalid = |what, why: &str| {
            Err(MessageError::InvalidConfig {
                what,
                why: why.to_owned(),
            })
        };
        if config.piece_size == 0 {
            return invalid("piece_size", "must be at least 1 byte");
        }
        if config.check_interval.is_zero() {
            return invalid("check_interval", "must be positive");
        }
        if config.slot_scan == 0 {
            return invalid("slot_scan", "must be at least 1");
        }
        let mut queues = BTreeMap::new();
        queues.insert(QueueId(0), MessageQueue::new(1));
        Ok(Self {
            config,
            channels: Vec::new(),
            queues,
            messages: HashMap::new(),
            deadlines: BTreeSet::new(),
            finished: HashMap::new(),
            finished_order: VecDeque::new(),
            events: VecDeque::new(),
            controls: VecDeque::new(),
            streams_active: false,
            last_check: None,
            next_id: 1,
            next_seq: 0,
        })
    }

    /// The settings.
    pub fn config(&self) -> &MessageConfig {
        &self.config
    }

    /// A new queue with `weight` (at least 1).
    pub fn create_queue(&mut self, weight: u32) -> Result<QueueId, MessageError> {
        check_weight(weight)?;
        let next = self
            .queues
            .keys()
            .next_back()
            .map_or(Some(0), |q| q.0.checked_add(1));
        let id = QueueId(next.ok_or(MessageError::InvalidConfig {
            what: "queue",
            why: "no queue id left".to_owned(),
        })?);
        self.queues.insert(id, MessageQueue::new(weight));
        Ok(id)
    }

    /// Changes a queue's weight.
    pub fn set_queue_weight(&mut self, queue: QueueId, weight: u32) -> Result<(), MessageError> {
        check_weight(weight)?;
        self.queues
            .get_mut(&queue)
            .ok_or(MessageError::UnknownQueue(queue))?
            .weight = weight;
        Ok(())
    }

    /// The channels' current estimates, indexed as [`poll_piece`](Self::poll_piece)'s
    /// `channel`. Deadlines are re-checked against them at once.
    pub fn set_channels(
        &mut self,
        now: Duration,
        channels: &[ChannelEstimate],
    ) -> Result<(), MessageError> {
        if let Some(bad) = channels
            .iter()
            .find(|c| !c.rate.is_finite() || c.rate < 0.0)
        {
            return Err(MessageError::InvalidConfig {
                what: "channel rate",
                why: format!("{} is not a finite rate >= 0", bad.rate),
            });
        }
        self.channels = channels.to_vec();
        self.handle_timeout(now);
        Ok(())
    }

    /// Whether plain ADU streams are taken to have data, and their weight's share.
    pub fn streams_active(&self) -> bool {
        self.streams_active
    }

    /// Whether plain ADU streams have data: they then take their weight's share.
    pub fn set_streams_active(&mut self, now: Duration, active: bool) {
        if self.streams_active != active {
            self.streams_active = active;
            self.handle_timeout(now);
        }
    }

    /// Submits a message. It is refused ([`MessageError::Refused`]) if it cannot meet its
    /// own deadline or would make an admitted message miss one.
    pub fn submit(&mut self, now: Duration, spec: MessageSpec) -> Result<MessageId, MessageError> {
        check_priority(spec.priority)?;
        if !self.queues.contains_key(&spec.queue) {
            return Err(MessageError::UnknownQueue(spec.queue));
        }
        if spec.size > self.config.max_message_size {
            return Err(MessageError::TooLarge {
                size: spec.size,
                limit: self.config.max_message_size,
            });
        }
        check_deadline(now, spec.deadline)?;
        self.expire(now);

        let id = MessageId(self.next_id);
        let piece = u64::from(self.config.piece_size);
        let message = Message {
            spec,
            submitted: now,
            seq: self.next_seq,
            sent_pieces: 0,
            total_pieces: spec.size.div_ceil(piece).max(1),
            state: State::Ready,
            early_fired: false,
            continued: false,
        };
        self.admit(now, id, &message)?;
        self.next_id += 1;
        self.next_seq += 1;
        self.messages.insert(id, message);
        self.index(id);
        Ok(id)
    }

    /// The next piece to send on `channel`, whose slot is free now: from the queue with the
    /// smallest fair-share clock, the first message in service order whose piece can
    /// arrive before its deadline on this channel.
    pub fn poll_piece(
        &mut self,
        now: Duration,
        channel: usize,
    ) -> Result<Option<Piece>, MessageError> {
        let estimate = *self
            .channels
            .get(channel)
            .ok_or(MessageError::UnknownChannel {
                index: channel,
                count: self.channels.len(),
            })?;
        self.expire(now);
        let Some((queue_id, id)) = self.choose(now, &estimate) else {
            return Ok(None);
        };
        let piece_size = self.config.piece_size;
        let message = self.messages.get_mut(&id).expect("chosen from the index");
        let offset = message.sent_pieces * u64::from(piece_size);
        let len = (message.spec.size - offset).min(u64::from(piece_size)) as u32;
        message.sent_pieces += 1;
        let piece = Piece {
            message: id,
            queue: queue_id,
            priority: message.spec.priority,
            offset,
            len,
            total: message.spec.size,
        };
        // A piece does not move a message in its level's order; only the last one takes
        // it out.
        if message.sent_pieces == message.total_pieces {
            self.unindex(id);
            self.messages.get_mut(&id).expect("live").state = State::Sent;
        }
        let queue = self.queues.get_mut(&queue_id).expect("queue of a message");
        let weight = queue.effective_weight(Some(piece.priority));
        queue.vtime += f64::from(len.max(1)) / weight;
        Ok(Some(piece))
    }

    /// The receiver has the whole message: it is delivered.
    pub fn confirm_delivered(&mut self, now: Duration, id: MessageId) -> Result<(), MessageError> {
        if self.live(id)?.state != State::Sent {
            return Err(MessageError::NotFullySent(id));
        }
        self.finish(id, Fate::Delivered, now);
        Ok(())
    }

    /// The driver's current estimate of when the pieces of `id` already handed out will
    /// all have arrived (the queues they wait in may have grown since they were cut), or
    /// have arrived. If that is after the message's deadline, its early callback fires
    /// now, once per deadline, as for unsent pieces; a message with pieces left to send
    /// is suspended. Past the deadline too: a piece lost, or slower than forecast, is
    /// known only then, and a message that arrives late is never confirmed without its
    /// callback first. A message the application continued after its callback is not
    /// reported again.
    pub fn expect_arrival(
        &mut self,
        now: Duration,
        id: MessageId,
        arrival: Duration,
    ) -> Result<(), MessageError> {
        let message = self.live(id)?;
        let Some(deadline) = message.spec.deadline else {
            return Ok(());
        };
        if arrival <= deadline || message.early_fired || message.continued {
            return Ok(());
        }
        let remaining = message.remaining_bytes(self.config.piece_size);
        self.update(id, |m| {
            m.early_fired = true;
            if m.state == State::Ready {
                m.state = State::Suspended { early: true };
            }
        })?;
        self.events.push_back(MessageEvent::Early {
            id,
            at: now,
            deadline,
            remaining,
        });
        Ok(())
    }

    /// Expires messages whose deadline passed and re-checks the others against the
    /// channel estimates, suspending (with [`MessageEvent::Early`]) those that can no
    /// longer make it.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.expire(now);
        self.last_check = Some(now);
        if self.deadlines.is_empty() {
            return;
        }
        let total = self.total_weight(None);
        let mut late = Vec::new();
        for queue in self.queues.values().filter(|q| !q.is_empty()) {
            let capacity = Capacity {
                channels: &self.channels,
                now,
                piece_size: self.config.piece_size,
                share: queue.effective_weight(None) / total,
            };
            let items = queue
                .iter()
                .map(|(_, k)| self.messages[&k.id].walk_item(k.id));
            late.extend(
                admission::walk(items, &capacity)
                    .into_iter()
                    .filter(|v| !v.feasible),
            );
        }
        for verdict in late {
            self.unindex(verdict.id);
            let piece_size = self.config.piece_size;
            let message = self.messages.get_mut(&verdict.id).expect("walked");
            message.state = State::Suspended { early: true };
            message.early_fired = true;
            let remaining = message.remaining_bytes(piece_size);
            self.index(verdict.id);
            self.events.push_back(MessageEvent::Early {
                id: verdict.id,
                at: now,
                deadline: verdict.deadline,
                remaining,
            });
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due: the earliest deadline,
    /// or the next periodic check while any deadline is pending.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let (deadline, _) = *self.deadlines.first()?;
        let check = self.last_check.map_or(Duration::ZERO, |t| {
            t.saturating_add(self.config.check_interval)
        });
        Some(deadline.min(check))
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<MessageEvent> {
        self.events.pop_front()
    }

    /// The next control item to send to the receiver.
    pub fn poll_control(&mut self) -> Option<ControlItem> {
        self.controls.pop_front()
    }

    /// Bytes of the message not yet handed to a channel.
    pub fn remaining(&self, id: MessageId) -> Result<u64, MessageError> {
        Ok(self.live(id)?.remaining_bytes(self.config.piece_size))
    }

    /// Where the message stands.
    pub fn status(&self, id: MessageId) -> Result<MessageStatus, MessageError> {
        let m = self.live(id)?;
        Ok(MessageStatus {
            priority: m.spec.priority,
            deadline: m.spec.deadline,
            remaining: m.remaining_bytes(self.config.piece_size),
            suspended: matches!(m.state, State::Suspended { .. }),
            fully_sent: m.state == State::Sent,
        })
    }

    /// Whether some message waits with pieces not yet handed out.
    pub fn has_unsent(&self) -> bool {
        self.queues.values().any(|q| !q.is_empty())
    }

    /// Messages not yet finished.
    pub fn live_messages(&self) -> usize {
        self.messages.len()
    }

    /// Cancels the message: it ends [`Fate::Cancelled`] ([`Fate::Early`] if its early
    /// callback fired), and if any of it was sent, a [`ControlItem::Cancel`] tells the
    /// receiver to free it.
    pub fn cancel(&mut self, now: Duration, id: MessageId) -> Result<(), MessageError> {
        let message = self.live(id)?;
        let fate = if message.early_fired {
            Fate::Early
        } else {
            Fate::Cancelled
        };
        if message.sent_pieces > 0 {
            self.controls.push_back(ControlItem::Cancel(id));
        }
        self.finish(id, fate, now);
        Ok(())
    }

    /// Aborts the transfer: the same as [`cancel`](Self::cancel).
    pub fn abort(&mut self, now: Duration, id: MessageId) -> Result<(), MessageError> {
        self.cancel(now, id)
    }

    /// Stops sending the message until [`resume`](Self::resume); its deadline still runs.
    pub fn suspend(&mut self, id: MessageId) -> Result<(), MessageError> {
        self.update(id, |m| {
            if m.state == State::Ready {
                m.state = State::Suspended { early: false };
            }
        })
    }

    /// Sends the message again after a suspension. After an early callback this is the
    /// application's "continue": the message is not suspended again for this deadline.
    pub fn resume(&mut self, id: MessageId) -> Result<(), MessageError> {
        self.update(id, |m| {
            if let State::Suspended { early } = m.state {
                m.state = State::Ready;
                m.continued |= early;
            } else if m.state == State::Sent {
                m.continued |= m.early_fired;
            }
        })
    }

    /// Gives the message a new deadline (`None`: none) and, if its early callback
    /// suspended it, sends it again; it is judged afresh against the new deadline.
    pub fn defer(
        &mut self,
        now: Duration,
        id: MessageId,
        deadline: Option<Duration>,
    ) -> Result<(), MessageError> {
        check_deadline(now, deadline)?;
        self.update(id, |m| {
            m.spec.deadline = deadline;
            m.early_fired = false;
            m.continued = false;
            if m.state == (State::Suspended { early: true }) {
                m.state = State::Ready;
            }
        })
    }

    /// Starts the message over from its first byte.
    pub fn restart(&mut self, id: MessageId) -> Result<(), MessageError> {
        self.update(id, |m| {
            m.sent_pieces = 0;
            if m.state == State::Sent {
                m.state = State::Ready;
            }
        })
    }

    /// Moves the message to another priority level. After an early callback this is one
    /// of the application's answers: the message is sent again at its new level and judged
    /// afresh at the next check (its early callback stays counted for its fate).
    pub fn reprioritise(&mut self, id: MessageId, priority: u8) -> Result<(), MessageError> {
        check_priority(priority)?;
        self.update(id, |m| {
            m.spec.priority = priority;
            if m.state == (State::Suspended { early: true }) {
                m.state = State::Ready;
                m.continued = false;
            }
        })
    }

    /// A live message, or the error that says why it is not one.
    fn live(&self, id: MessageId) -> Result<&Message, MessageError> {
        if let Some(message) = self.messages.get(&id) {
            return Ok(message);
        }
        Err(match self.finished.get(&id) {
            Some(Fate::Delivered) => MessageError::AlreadyDelivered(id),
            Some(&fate) => MessageError::AlreadyFinished { id, fate },
            None => MessageError::UnknownMessage(id),
        })
    }

    /// Changes a live message with its index entries taken out and put back.
    fn update(
        &mut self,
        id: MessageId,
        change: impl FnOnce(&mut Message),
    ) -> Result<(), MessageError> {
        self.live(id)?;
        self.unindex(id);
        change(self.messages.get_mut(&id).expect("live"));
        self.index(id);
        Ok(())
    }

    fn unindex(&mut self, id: MessageId) {
        let message = &self.messages[&id];
        let key = message.key(id);
        if let Some(queue) = self.queues.get_mut(&message.spec.queue) {
            queue.remove(message.spec.priority, &key);
        }
        if let Some(deadline) = message.spec.deadline {
            self.deadlines.remove(&(deadline, id));
        }
    }

    fn index(&mut self, id: MessageId) {
        let message = &self.messages[&id];
        if message.state != State::Sent {
            if let Some(deadline) = message.spec.deadline {
                self.deadlines.insert((deadline, id));
            }
        }
        if message.state != State::Ready {
            return;
        }
        let (queue_id, level, key) = (message.spec.queue, message.spec.priority, message.key(id));
        // A queue that wakes up starts at the clock of the busy ones: idle time earns no
        // credit.
        let busy_clock = self
            .queues
            .iter()
            .filter(|(q, queue)| **q != queue_id && !queue.is_empty())
            .map(|(_, queue)| queue.vtime)
            .reduce(f64::min);
        let queue = self.queues.get_mut(&queue_id).expect("queue of a message");
        if queue.is_empty() {
            if let Some(clock) = busy_clock {
                queue.vtime = queue.vtime.max(clock);
            }
        }
        queue.insert(level, key);
    }

    fn finish(&mut self, id: MessageId, fate: Fate, now: Duration) {
        self.unindex(id);
        let message = self.messages.remove(&id).expect("live");
        self.finished.insert(id, fate);
        self.finished_order.push_back(id);
        while self.finished_order.len() > self.config.remembered_fates {
            if let Some(old) = self.finished_order.pop_front() {
                self.finished.remove(&old);
            }
        }
        self.events.push_back(MessageEvent::Finished {
            id,
            fate,
            at: now,
            submitted: message.submitted,
        });
    }

    /// Ends every unsent message whose deadline is not after `now`.
    fn expire(&mut self, now: Duration) {
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            let message = &self.messages[&id];
            let fate = if message.early_fired {
                Fate::Early
            } else {
                Fate::Expired
            };
            // The receiver holds what was sent of it until told to drop it.
            if message.sent_pieces > 0 {
                self.controls.push_back(ControlItem::Cancel(id));
            }
            self.finish(id, fate, now);
        }
    }

    /// The sum of the effective weights of busy queues and, when they have data, plain
    /// streams; `adding` counts a message about to join a queue.
    fn total_weight(&self, adding: Option<(QueueId, u8)>) -> f64 {
        let queues: f64 = self
            .queues
            .iter()
            .map(|(id, q)| q.effective_weight(adding.filter(|(aq, _)| aq == id).map(|(_, l)| l)))
            .sum();
        let streams = if self.streams_active {
            f64::from(self.config.stream_weight)
        } else {
            0.0
        };
        queues + streams
    }

    /// Refuses `message` if it cannot meet its own deadline or would make an admitted
    /// message that can meet its deadline miss it (see `docs/messages.md`). One pass per
    /// affected queue walks it with and without the new message side by side.
    fn admit(&self, now: Duration, id: MessageId, message: &Message) -> Result<(), MessageError> {
        if message.spec.deadline.is_none() && self.deadlines.is_empty() {
            return Ok(()); // No deadline to meet or to break.
        }
        let (home, level) = (message.spec.queue, message.spec.priority);
        let before_total = self.total_weight(None);
        let after_total = self.total_weight(Some((home, level)));
        let new_key = message.key(id);
        let new_item = message.walk_item(id);
        let protected = |l: u8| match self.config.admission {
            AdmissionPolicy::ProtectAll => true,
            AdmissionPolicy::ProtectSameLevel => l == level,
        };
        for (&queue_id, queue) in &self.queues {
            let adding = queue_id == home;
            // Another queue is affected only through its share.
            if !adding && (queue.is_empty() || before_total == after_total) {
                continue;
            }
            let capacity = |share| Capacity {
                channels: &self.channels,
                now,
                piece_size: self.config.piece_size,
                share,
            };
            let before_cap = capacity(if queue.is_empty() {
                0.0
            } else {
                queue.effective_weight(None) / before_total
            });
            let after_cap = capacity(queue.effective_weight(adding.then_some(level)) / after_total);
            let same_share = before_cap.share == after_cap.share;
            let (mut before_served, mut after_served) = (0u64, 0u64);
            let mut pending = adding.then_some(new_item);
            let existing = queue
                .iter()
                .map(|(l, k)| (l, Some(k), self.messages[&k.id].walk_item(k.id)));
            for (l, key, item) in existing.chain(std::iter::once((level, None, new_item))) {
                // The new message goes in before the first message that follows it.
                let in_order = key.is_none_or(|k| (l, k) > (level, &new_key));
                if let Some(new) = pending.filter(|_| in_order) {
                    pending = None;
                    let needed = after_served.saturating_add(new.pieces);
                    if let Some(deadline) = new.deadline {
                        let cap = after_cap.pieces_by(deadline);
                        if needed > cap {
                            return Err(MessageError::Refused(Refusal::Unreachable {
                                deadline,
                                needed,
                                capacity: cap,
                            }));
                        }
                    }
                    after_served = needed;
                }
                if key.is_none() {
                    break;
                }
                let before_needed = before_served.saturating_add(item.pieces);
                let after_needed = after_served.saturating_add(item.pieces);
                let Some(deadline) = item.deadline else {
                    (before_served, after_served) = (before_needed, after_needed);
                    continue;
                };
                let before_cap_pieces = before_cap.pieces_by(deadline);
                let after_cap_pieces = if same_share {
                    before_cap_pieces
                } else {
                    after_cap.pieces_by(deadline)
                };
                let was_feasible = before_needed <= before_cap_pieces;
                let is_feasible = after_needed <= after_cap_pieces;
                if was_feasible && !is_feasible && !item.continued && protected(l) {
                    return Err(MessageError::Refused(Refusal::Endangers {
                        endangered: item.id,
                        deadline,
                        needed: after_needed,
                        capacity: after_cap_pieces,
                    }));
                }
                // As in the early check, a message that cannot make it will be suspended
                // and stops counting.
                if was_feasible || item.continued {
                    before_served = before_needed;
                }
                if is_feasible || item.continued {
                    after_served = after_needed;
                }
            }
        }
        Ok(())
    }

    /// The queue and message whose piece goes on a free slot of `channel`.
    fn choose(&self, now: Duration, channel: &ChannelEstimate) -> Option<(QueueId, MessageId)> {
        let mut busy: Vec<(f64, QueueId)> = self
            .queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(id, q)| (q.vtime, *id))
            .collect();
        busy.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        busy.into_iter()
            .find_map(|(_, queue_id)| self.choose_in(queue_id, now, channel))
    }

    /// The first message of `queue_id`, in service order, whose piece lands in time on
    /// `channel`.
    fn choose_in(
        &self,
        queue_id: QueueId,
        now: Duration,
        channel: &ChannelEstimate,
    ) -> Option<(QueueId, MessageId)> {
        let piece_size = self.config.piece_size;
        self.queues[&queue_id]
            .iter()
            .take(self.config.slot_scan)
            .find(|(_, key)| {
                let message = &self.messages[&key.id];
                let len = message
                    .remaining_bytes(piece_size)
                    .min(u64::from(piece_size)) as u32;
                match message.spec.deadline {
                    Some(deadline) if !message.continued => {
                        admission::arrives_in_time(channel, now, len, deadline)
                    }
                    _ => true,
                }
            })
            .map(|(_, key)| (queue_id, key.id))
    }
}

fn check_weight(weight: u32) -> Result<(), MessageError> {
    if weight == 0 {
        return Err(MessageError::InvalidConfig {
            what: "queue weight",
            why: "must be at least 1".to_owned(),
        });
    }
    Ok(())
}

fn check_priority(priority: u8) -> Result<(), MessageError> {
    if priority >= PRIORITY_LEVELS {
        return Err(MessageError::InvalidPriority {
            priority,
            levels: PRIORITY_LEVELS,
        });
    }
    Ok(())
}

fn check_deadline(now: Duration, deadline: Option<Duration>) -> Result<(), MessageError> {
    match deadline {
        Some(deadline) if deadline <= now => Err(MessageError::DeadlineInPast { deadline, now }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Admission by the plain definition: walk each queue with and without the new
    /// message and compare.
    fn reference(s: &MessageScheduler, now: Duration, spec: MessageSpec) -> Result<(), Refusal> {
        let id = MessageId(s.next_id);
        let new = Message {
            spec,
            submitted: now,
            seq: s.next_seq,
            sent_pieces: 0,
            total_pieces: spec.size.div_ceil(u64::from(s.config.piece_size)).max(1),
            state: State::Ready,
            early_fired: false,
            continued: false,
        };
        let before_total = s.total_weight(None);
        let after_total = s.total_weight(Some((spec.queue, spec.priority)));
        for (&q, queue) in &s.queues {
            let adding = q == spec.queue;
            if queue.is_empty() && !adding {
                continue;
            }
            let cap = |share| Capacity {
                channels: &s.channels,
                now,
                piece_size: s.config.piece_size,
                share,
            };
            let mut order: Vec<(u8, ReadyKey, WalkItem)> = queue
                .iter()
                .map(|(l, k)| (l, *k, s.messages[&k.id].walk_item(k.id)))
                .collect();
            let before_share = if queue.is_empty() {
                0.0
            } else {
                queue.effective_weight(None) / before_total
            };
            let before = admission::walk(order.iter().map(|o| o.2), &cap(before_share));
            if adding {
                order.push((spec.priority, new.key(id), new.walk_item(id)));
                order.sort_by_key(|o| (o.0, o.1));
            }
            let after_share = queue.effective_weight(adding.then_some(spec.priority)) / after_total;
            let after = admission::walk(order.iter().map(|o| o.2), &cap(after_share));
            for v in &after {
                if v.id == id && !v.feasible {
                    return Err(Refusal::Unreachable {
                        deadline: v.deadline,
                        needed: 0,
                        capacity: 0,
                    });
                }
                let was = before.iter().any(|b| b.id == v.id && b.feasible);
                if was && !v.feasible {
                    return Err(Refusal::Endangers {
                        endangered: v.id,
                        deadline: v.deadline,
                        needed: 0,
                        capacity: 0,
                    });
                }
            }
        }
        Ok(())
    }

    /// The refusal without its counts, which the reference does not compute.
    fn kind(r: &Refusal) -> (bool, Option<MessageId>) {
        match r {
            Refusal::Unreachable { .. } => (true, None),
            Refusal::Endangers { endangered, .. } => (false, Some(*endangered)),
        }
    }

    proptest! {
        #[test]
        fn one_pass_admission_agrees_with_walking_twice(
            subs in proptest::collection::vec(
                (0u8..8, 1u64..40_000, proptest::option::of(50u64..2_000), 0u32..3, 0u64..100),
                1..60,
            ),
            streams in any::<bool>(),
        ) {
            let mut s = MessageScheduler::new(MessageConfig {
                piece_size: 1000,
                ..MessageConfig::default()
            }).unwrap();
            let mut now = Duration::ZERO;
            s.set_channels(now, &[
                ChannelEstimate { rate: 100_000.0, delay: Duration::from_millis(30), startup: None },
                ChannelEstimate { rate: 40_000.0, delay: Duration::from_millis(120), startup: None },
            ]).unwrap();
            s.set_streams_active(now, streams);
            let q1 = s.create_queue(2).unwrap();
            let q2 = s.create_queue(1).unwrap();
            for (priority, size, deadline, queue, advance) in subs {
                now += Duration::from_millis(advance);
                s.handle_timeout(now);
                // Some pieces go out, so that partly sent messages are walked too.
                for _ in 0..advance % 7 {
                    s.poll_piece(now, 1).unwrap();
                }
                let queue = [QueueId(0), q1, q2][queue as usize];
                let mut spec = MessageSpec::new(priority, size).on_queue(queue);
                spec.deadline = deadline.map(|d| now + Duration::from_millis(d));
                let expected = reference(&s, now, spec);
                let got = s.submit(now, spec);
                match (expected, got) {
                    (Ok(()), Ok(_)) => {}
                    (Err(e), Err(MessageError::Refused(g))) => {
                        prop_assert_eq!(kind(&e), kind(&g));
                    }
                    (e, g) => prop_assert!(false, "reference {:?}, admission {:?}", e, g),
                }
            }
        }
    }
}
