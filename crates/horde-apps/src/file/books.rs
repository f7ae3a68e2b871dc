//! The sender's books of a file transfer: where each piece not yet confirmed stands.
//! A piece leaves them only when the receiver confirms it written and flushed; an ack
//! (it reached the receiving host) is not enough, since a receiver killed then loses it.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Queued or on its way as this stream sequence number.
    InFlight(u64),
    /// The receiving host acked it; kept until the receiver confirms it written.
    Acked,
    /// To be sent (again).
    Waiting,
}

struct Piece {
    payload: Bytes,
    state: State,
}

#[derive(Default)]
pub struct Books {
    /// The piece (by offset) each sequence number in flight carries.
    in_flight: HashMap<u64, u64>,
    /// Pieces not yet confirmed, by offset.
    pieces: BTreeMap<u64, Piece>,
    /// Offsets to send again, oldest first (some may have been confirmed meanwhile).
    resend: VecDeque<u64>,
    /// Every byte below this is confirmed written.
    confirmed: u64,
    /// Bytes given offsets so far.
    read_end: u64,
}

impl Books {
    pub fn confirmed(&self) -> u64 {
        self.confirmed
    }

    pub fn read_end(&self) -> u64 {
        self.read_end
    }

    /// Bytes sent but not confirmed.
    pub fn unconfirmed(&self) -> u64 {
        self.read_end - self.confirmed
    }

    pub fn has_resend(&self) -> bool {
        !self.resend.is_empty()
    }

    /// A new piece of `len` bytes at the end: its offset.
    pub fn next_offset(&self) -> u64 {
        self.read_end
    }

    /// The piece at `offset` (`len` bytes, sent as `payload`) went out as `seq`.
    pub fn add(&mut self, offset: u64, len: usize, payload: Bytes, seq: u64) {
        self.read_end = self.read_end.max(offset + len as u64);
        self.pieces.insert(
            offset,
            Piece {
                payload,
                state: State::InFlight(seq),
            },
        );
        self.in_flight.insert(seq, offset);
    }

    /// The next piece to send again, with its payload.
    pub fn take_resend(&mut self) -> Option<(u64, Bytes)> {
        while let Some(offset) = self.resend.pop_front() {
            match self.pieces.get(&offset) {
                Some(p) if p.state == State::Waiting => return Some((offset, p.payload.clone())),
                _ => {} // confirmed, or on its way again
            }
        }
        None
    }

    /// The piece at `offset` went out again as `seq`.
    pub fn resent(&mut self, offset: u64, seq: u64) {
        if let Some(p) = self.pieces.get_mut(&offset) {
            p.state = State::InFlight(seq);
            self.in_flight.insert(seq, offset);
        }
    }

    pub fn acked(&mut self, seq: u64) {
        if let Some(p) = self.in_flight_piece(seq) {
            p.state = State::Acked;
        }
    }

    /// Lost, dropped or abandoned: send it again.
    pub fn nacked(&mut self, seq: u64) {
        if let Some(offset) = self.in_flight.get(&seq).copied() {
            if let Some(p) = self.in_flight_piece(seq) {
                p.state = State::Waiting;
                self.resend.push_back(offset);
            }
        }
    }

    /// The piece `seq` carries, if that is still its latest sending; `seq` is done.
    fn in_flight_piece(&mut self, seq: u64) -> Option<&mut Piece> {
        let offset = self.in_flight.remove(&seq)?;
        self.pieces
            .get_mut(&offset)
            .filter(|p| p.state == State::InFlight(seq))
    }

    /// Nothing in flight can be followed any more: send it all again.
    pub fn resend_in_flight(&mut self) {
        for (_, offset) in self.in_flight.drain() {
            if let Some(p) = self.pieces.get_mut(&offset) {
                p.state = State::Waiting;
                self.resend.push_back(offset);
            }
        }
    }

    /// The receiver has every byte below `upto` written and flushed: forget them.
    pub fn confirm(&mut self, upto: u64) {
        if upto > self.confirmed {
            self.confirmed = upto;
            self.pieces = self.pieces.split_off(&upto);
        }
    }

    /// The receiver (perhaps a new process) has everything below `from`: every piece
    /// past it that is not on its way, acked ones included, goes again. `Err` when it
    /// lacks bytes the sender no longer keeps.
    pub fn resume(&mut self, from: u64) -> Result<(), String> {
        if from < self.confirmed {
            return Err(format!(
                "the receiver restarted with {from} bytes, but had confirmed {} written and \
                 the sender no longer keeps them (the receiver writes to a pipe, or its \
                 resume file was removed)",
                self.confirmed
            ));
        }
        if from > self.read_end {
            return Err(format!(
                "the receiver says it has {from} bytes, more than the {} sent",
                self.read_end
            ));
        }
        self.confirm(from);
        for (&offset, p) in &mut self.pieces {
            if p.state == State::Acked {
                p.state = State::Waiting;
                self.resend.push_back(offset);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten pieces of 100 bytes, sent as sequence numbers 0..10.
    fn ten() -> Books {
        let mut b = Books::default();
        for i in 0..10u64 {
            b.add(b.next_offset(), 100, Bytes::from(vec![i as u8; 100]), i);
        }
        b
    }

    fn drain(b: &mut Books) -> Vec<u64> {
        std::iter::from_fn(|| b.take_resend().map(|(o, _)| o)).collect()
    }

    #[test]
    fn an_acked_piece_is_sent_again_to_a_receiver_that_restarted_without_it() {
        let mut b = ten();
        for seq in 0..8 {
            b.acked(seq);
        }
        b.confirm(300); // written and flushed: pieces 0..3
        b.nacked(9); // lost: goes again at once
        assert_eq!(drain(&mut b), vec![900]);
        b.resent(900, 10);
        // The receiver is killed; the new one had flushed 400 bytes before it died.
        b.resume(400).unwrap();
        // Acked but not confirmed: 4..8; piece 8 is still on its way and 9 is resent.
        assert_eq!(drain(&mut b), vec![400, 500, 600, 700]);
        assert_eq!(b.confirmed(), 400);
        // A late nack of the old sending of 9 changes nothing: 10 carries it now.
        b.nacked(9);
        assert!(drain(&mut b).is_empty());
        b.nacked(8);
        assert_eq!(drain(&mut b), vec![800]);
    }

    #[test]
    fn a_receiver_without_the_confirmed_bytes_cannot_resume() {
        let mut b = ten();
        b.confirm(500);
        let e = b.resume(0).unwrap_err();
        assert!(e.contains("no longer keeps them"), "{e}");
        let e = b.resume(5000).unwrap_err();
        assert!(e.contains("more than the 1000 sent"), "{e}");
        assert_eq!(b.unconfirmed(), 500);
    }

    #[test]
    fn confirmed_pieces_are_forgotten_and_never_sent_again() {
        let mut b = ten();
        b.nacked(2);
        b.confirm(1000);
        assert!(b.take_resend().is_none());
        b.resend_in_flight();
        assert!(b.take_resend().is_none());
        assert_eq!(b.unconfirmed(), 0);
    }
}
