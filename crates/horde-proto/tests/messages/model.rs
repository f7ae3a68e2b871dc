//! A small fake of the channels for driving the message layer in virtual time: each channel
//! sends one piece at a time at its rate, and the piece lands `delay` after it is sent.

use std::time::Duration;

use bytes::Bytes;
use horde_proto::message::{
    ChannelEstimate, ControlItem, MessageEvent, MessageId, MessageScheduler, MessageSource, Piece,
    Reassembly, ReceivedMessage, Startup,
};

pub struct FakeChannel {
    pub rate: f64,
    pub delay: Duration,
    /// While its start-up counts: the round trip its rate doubles over, and the rounds
    /// left.
    pub startup: Option<Startup>,
    free_at: Duration,
}

impl FakeChannel {
    pub fn new(rate: f64, delay: Duration) -> Self {
        Self {
            rate,
            delay,
            startup: None,
            free_at: Duration::ZERO,
        }
    }

    pub fn estimate(&self) -> ChannelEstimate {
        ChannelEstimate {
            rate: self.rate,
            delay: self.delay,
            startup: self.startup,
        }
    }
}

/// A message whose bytes are computed from their offset, so none are held.
pub struct Pattern;

impl MessageSource for Pattern {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = pattern_byte(offset + i as u64);
        }
        Ok(())
    }
}

pub fn pattern_byte(at: u64) -> u8 {
    (at % 251) as u8
}

/// A sender, its channels and a receiver, stepped in virtual time.
pub struct World {
    pub now: Duration,
    pub sender: MessageScheduler,
    pub channels: Vec<FakeChannel>,
    pub receiver: Reassembly,
    in_flight: Vec<(Duration, Flight)>,
    pub events: Vec<MessageEvent>,
    pub received: Vec<(Duration, ReceivedMessage)>,
}

enum Flight {
    Piece(Piece, Bytes),
    Control(ControlItem),
}

impl World {
    pub fn new(sender: MessageScheduler, channels: Vec<FakeChannel>) -> Self {
        let mut world = Self {
            now: Duration::ZERO,
            sender,
            channels,
            receiver: Reassembly::new(1 << 30, 1024),
            in_flight: Vec::new(),
            events: Vec::new(),
            received: Vec::new(),
        };
        world.publish_estimates();
        world
    }

    pub fn publish_estimates(&mut self) {
        let estimates: Vec<ChannelEstimate> =
            self.channels.iter().map(FakeChannel::estimate).collect();
        self.sender
            .set_channels(self.now, &estimates)
            .expect("valid estimates");
        self.drain_events();
    }

    /// Changes a channel's rate in the model and tells the sender.
    pub fn set_rate(&mut self, channel: usize, rate: f64) {
        self.channels[channel].rate = rate;
        self.publish_estimates();
    }

    pub fn drain_events(&mut self) {
        while let Some(event) = self.sender.poll_event() {
            self.events.push(event);
        }
    }

    /// Runs until `until`, 1 ms at a time.
    pub fn run_until(&mut self, until: Duration) {
        while self.now < until {
            self.step();
            self.now += Duration::from_millis(1);
        }
    }

    fn step(&mut self) {
        let now = self.now;
        if self.sender.poll_timeout().is_some_and(|t| t <= now) {
            self.sender.handle_timeout(now);
        }
        // Control items go on channel 0 ahead of pieces.
        while let Some(item) = self.sender.poll_control() {
            let landing = now + self.channels[0].delay;
            self.in_flight.push((landing, Flight::Control(item)));
        }
        for index in 0..self.channels.len() {
            while self.channels[index].rate > 0.0 && self.channels[index].free_at <= now {
                let Some(piece) = self.sender.poll_piece(now, index).expect("known channel") else {
                    break;
                };
                let channel = &mut self.channels[index];
                let start = channel.free_at.max(now);
                channel.free_at =
                    start + Duration::from_secs_f64(f64::from(piece.len) / channel.rate);
                let landing = channel.free_at + channel.delay;
                let bytes = Pattern.read_piece(&piece).expect("pattern reads");
                self.in_flight.push((landing, Flight::Piece(piece, bytes)));
            }
        }
        let (landed, flying): (Vec<_>, Vec<_>) =
            self.in_flight.drain(..).partition(|(at, _)| *at <= now);
        self.in_flight = flying;
        for (_, flight) in landed {
            match flight {
                Flight::Piece(piece, bytes) => {
                    if let Some(message) = self
                        .receiver
                        .on_piece(piece.header(), bytes)
                        .expect("well-formed piece")
                    {
                        // The receiver's acknowledgement is instant in this model.
                        self.sender
                            .confirm_delivered(now, message.id)
                            .expect("a sent message");
                        self.received.push((now, message));
                    }
                }
                Flight::Control(item) => {
                    self.receiver.on_control(item);
                }
            }
        }
        self.drain_events();
    }

    pub fn fate_of(&self, id: MessageId) -> Vec<MessageEvent> {
        self.events
            .iter()
            .filter(|e| match e {
                MessageEvent::Early { id: e, .. } | MessageEvent::Finished { id: e, .. } => {
                    *e == id
                }
            })
            .copied()
            .collect()
    }
}
