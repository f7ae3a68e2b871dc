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
            level: self.spec.priority,
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
        let id = QueueId(self.queues.keys().next_back().map_or(0, |q| q.0 + 1));
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
        self.unindex(id);
        let piece_size = self.config.piece_size;
        let message = self.messages.get_mut(&id).expect("chosen from the index");
        let offset = message.sent_pieces * u64::from(piece_size);
        let len = (message.spec.size - offset).min(u64::from(piece_size)) as u32;
        message.sent_pieces += 1;
        if message.sent_pieces == message.total_pieces {
            message.state = State::Sent;
        }
        let piece = Piece {
            message: id,
            queue: queue_id,
            priority: message.spec.priority,
            offset,
            len,
            total: message.spec.size,
        };
        self.index(id);
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
                admission::walk(items, &capacity, true)
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
        let check = self
            .last_check
            .map_or(Duration::ZERO, |t| t + self.config.check_interval);
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

    /// Moves the message to another priority level.
    pub fn reprioritise(&mut self, id: MessageId, priority: u8) -> Result<(), MessageError> {
        check_priority(priority)?;
        self.update(id, |m| m.spec.priority = priority)
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
            let fate = if self.messages[&id].early_fired {
                Fate::Early
            } else {
                Fate::Expired
            };
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
    /// message that can meet its deadline miss it (see `docs/messages.md`).
    fn admit(&self, now: Duration, id: MessageId, message: &Message) -> Result<(), MessageError> {
        if message.spec.deadline.is_none() && self.deadlines.is_empty() {
            return Ok(()); // No deadline to meet or to break.
        }
        let (home, level) = (message.spec.queue, message.spec.priority);
        let before_total = self.total_weight(None);
        let after_total = self.total_weight(Some((home, level)));
        let new_key = message.key(id);
        let new_item = message.walk_item(id);
        for (&queue_id, queue) in &self.queues {
            let adding = queue_id == home;
            if queue.is_empty() && !adding {
                continue;
            }
            let capacity = |share| Capacity {
                channels: &self.channels,
                now,
                piece_size: self.config.piece_size,
                share,
            };
            let items: Vec<WalkItem> = queue
                .iter()
                .map(|(_, k)| self.messages[&k.id].walk_item(k.id))
                .collect();
            let before = if queue.is_empty() {
                Vec::new()
            } else {
                admission::walk(
                    items.iter().copied(),
                    &capacity(queue.effective_weight(None) / before_total),
                    true,
                )
            };
            let mut after_items = items;
            if adding {
                let at = queue
                    .iter()
                    .position(|(l, k)| (l, k) > (level, &new_key))
                    .unwrap_or(after_items.len());
                after_items.insert(at, new_item);
            }
            let after_weight = queue.effective_weight(adding.then_some(level));
            let after = admission::walk(after_items, &capacity(after_weight / after_total), true);
            if let Some(own) = after.iter().find(|v| v.id == id && !v.feasible) {
                return Err(MessageError::Refused(Refusal::Unreachable {
                    deadline: own.deadline,
                    needed: own.needed,
                    capacity: own.capacity,
                }));
            }
            let was_feasible: BTreeSet<MessageId> =
                before.iter().filter(|v| v.feasible).map(|v| v.id).collect();
            let protected = |v: &&admission::Verdict| match self.config.admission {
                AdmissionPolicy::ProtectAll => true,
                AdmissionPolicy::ProtectSameLevel => v.level == level,
            };
            if let Some(hurt) = after
                .iter()
                .filter(protected)
                .find(|v| !v.feasible && was_feasible.contains(&v.id))
            {
                return Err(MessageError::Refused(Refusal::Endangers {
                    endangered: hurt.id,
                    deadline: hurt.deadline,
                    needed: hurt.needed,
                    capacity: hurt.capacity,
                }));
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
        let piece_size = self.config.piece_size;
        busy.into_iter().find_map(|(_, queue_id)| {
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
        })
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
