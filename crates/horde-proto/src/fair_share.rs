//! The fairness pass: after the scheduler has mapped a cycle's ADUs to slots, make sure
//! every stream still gets the real slots its bandwidth allocation entitles it to,
//! whatever the scheduler, its objectives or the look-ahead did.
//!
//! The session collects a cycle's ADUs in priority order, most owed stream first (see
//! `Session::collect_adus`). The first `n_real` of them, one per real slot, are the
//! *fair set*: exactly what the cycle would send with no look-ahead. A scheduler may
//! place them elsewhere for two reasons: an objective prefers a slot to come (a
//! phantom), or it fills slots at random, or ignores phantoms, with no objective in
//! play. The first is allowed while the stream is not behind its allocation by more
//! than a small budget (the caller says which ADUs may wait); the second never is, and
//! an ADU left on no slot at all never waits (no scheduler defers that way: it places
//! as many ADUs as there are slots, and there are never more ADUs than slots). An ADU of the
//! fair set that may not wait is moved onto a real slot: one the scheduler left empty,
//! else one held by an ADU outside the fair set (a stream beyond its share this cycle),
//! preferring the channel the scheduler chose for it, so objectives still choose *which*
//! slots a stream's ADUs take. The ADU it displaces takes its old slot.
//!
//! Finally real slots still empty are given to ADUs that may not wait, in priority
//! order, so look-ahead never leaves a real slot idle that no objective asked to keep
//! free.

use horde_policy::{AduView, TxSlot};

/// How the fairness pass picks among real slots that would do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotChoice {
    /// A moved ADU stays on the channel the scheduler chose for it if it can: set when
    /// objectives are active, so that choice means something.
    pub keep_channel: bool,
    /// Otherwise, and among equally good slots, the scan starts at this real slot
    /// (modulo their number), so no channel is favoured cycle after cycle.
    pub offset: usize,
}

/// Reusable buffers for [`FairShare::enforce`].
#[derive(Debug, Default)]
pub(crate) struct FairShare {
    /// Per real slot: the ADU in it.
    holder: Vec<Option<usize>>,
    /// Whether the channel a scheduler chose says anything (objectives are active).
    keep_channel: bool,
}

impl FairShare {
    /// Adjust `assignment` (ADU index -> slot index; real slots are `0..n_real`) so that
    /// every ADU among the first `n_real` of `adus` is on a real slot unless it is on a
    /// phantom and `may_wait` excuses it, and fill empty real slots with other ADUs
    /// that may not wait, choosing among real slots as `choice` says. Returns how many
    /// ADUs were moved.
    pub(crate) fn enforce(
        &mut self,
        slots: &[TxSlot],
        n_real: usize,
        adus: &[AduView],
        may_wait: &[bool],
        assignment: &mut [Option<usize>],
        choice: SlotChoice,
    ) -> usize {
        self.keep_channel = choice.keep_channel;
        let offset = choice.offset;
        self.holder.clear();
        self.holder.resize(n_real, None);
        for (a, s) in assignment.iter().enumerate() {
            if let Some(s) = s.filter(|&s| s < n_real) {
                self.holder[s] = Some(a);
            }
        }
        let fair = n_real.min(adus.len());
        let mut moved = 0;
        for a in 0..adus.len() {
            let owed = a < fair;
            let on_real = assignment[a].is_some_and(|s| s < n_real);
            if on_real || (may_wait[a] && assignment[a].is_some()) {
                continue;
            }
            if let Some(s) = self.real_slot_for(slots, adus, assignment[a], a, owed, offset) {
                let from = assignment[a];
                if let Some(d) = self.holder[s] {
                    assignment[d] = from.filter(|&p| slots[p].max_size >= adus[d].length);
                }
                assignment[a] = Some(s);
                self.holder[s] = Some(a);
                moved += 1;
            }
        }
        moved
    }

    /// The real slot ADU `a` should take: an empty one, or (for an ADU of the fair set)
    /// one held by an ADU outside it; on the channel of `current` if there is one and it
    /// counts, then the first from `offset` on.
    fn real_slot_for(
        &self,
        slots: &[TxSlot],
        adus: &[AduView],
        current: Option<usize>,
        a: usize,
        owed: bool,
        offset: usize,
    ) -> Option<usize> {
        let n_real = self.holder.len();
        let fair = n_real.min(adus.len());
        let channel = current
            .filter(|_| self.keep_channel)
            .map(|s| slots[s].channel);
        let mut best: Option<(u8, usize)> = None;
        for k in 0..n_real {
            let s = (k + offset) % n_real;
            let holder = &self.holder[s];
            if slots[s].max_size < adus[a].length {
                continue;
            }
            // The scheduler's channel first; a displaced ADU may take an empty slot later.
            let rank = match *holder {
                None => 0,
                Some(h) if owed && h >= fair => 1,
                Some(_) => continue,
            };
            let rank = rank + 2 * u8::from(Some(slots[s].channel) != channel);
            if best.is_none_or(|(r, _)| rank < r) {
                best = Some((rank, s));
            }
        }
        best.map(|(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_policy::Fields;

    const CHOICE: SlotChoice = SlotChoice {
        keep_channel: true,
        offset: 0,
    };

    fn slot(channel: u8, phantom: bool) -> TxSlot {
        TxSlot {
            channel: horde_policy::ChannelId::new(channel),
            sequence: 0,
            loss_probability: 0.0,
            expected_rtt_ms: 100.0,
            wait_ms: if phantom { 50.0 } else { 0.0 },
            max_size: 100,
            cost_per_kb: 0.0,
            phantom: phantom.then_some(0.9),
            burst_correlation: [0.0; 8],
        }
    }

    fn adu(id: u64, stream: u32) -> AduView {
        AduView {
            id,
            stream_id: stream,
            stream_seq: id,
            length: 100,
            queue_delay_ms: 0,
            fields: Fields::default(),
        }
    }

    /// Two real slots (channels 0 and 1), two phantoms (channels 1 and 0); four ADUs in
    /// priority order, so ADUs 0 and 1 are the fair set.
    fn cycle() -> (Vec<TxSlot>, Vec<AduView>) {
        let slots = vec![slot(0, false), slot(1, false), slot(1, true), slot(0, true)];
        let adus = vec![adu(0, 7), adu(1, 8), adu(2, 9), adu(3, 9)];
        (slots, adus)
    }

    #[test]
    fn an_owed_adu_parked_on_a_phantom_takes_a_real_slot_of_the_same_channel() {
        let (slots, adus) = cycle();
        // The scheduler parked ADU 0 on channel 1's phantom and gave both real slots to
        // stream 9, which is beyond its share.
        let mut asg = vec![Some(2), None, Some(0), Some(1)];
        let moved = FairShare::default().enforce(&slots, 2, &adus, &[false; 4], &mut asg, CHOICE);
        assert_eq!(moved, 2);
        assert_eq!(asg[0], Some(1), "channel 1, as the scheduler chose");
        assert_eq!(asg[1], Some(0));
        assert_eq!(asg[3], Some(2), "the displaced ADU takes the phantom");
        assert_eq!(asg[2], None);
    }

    #[test]
    fn an_adu_allowed_to_wait_stays_where_the_scheduler_put_it() {
        let (slots, adus) = cycle();
        let mut asg = vec![Some(2), Some(0), Some(1), None];
        let before = asg.clone();
        let may_wait = [true, false, false, false];
        let moved = FairShare::default().enforce(&slots, 2, &adus, &may_wait, &mut asg, CHOICE);
        assert_eq!(moved, 0);
        assert_eq!(asg, before);
    }

    #[test]
    fn an_adu_left_on_no_slot_is_not_excused() {
        let (slots, adus) = cycle();
        // A scheduler that ignores phantoms left ADU 0 out and gave its real slot to
        // ADU 3, beyond the fair set; waiting is allowed only on a phantom.
        let mut asg = vec![None, Some(1), Some(2), Some(0)];
        let moved = FairShare::default().enforce(&slots, 2, &adus, &[true; 4], &mut asg, CHOICE);
        assert_eq!(moved, 1);
        assert_eq!((asg[0], asg[3]), (Some(0), None));
    }

    #[test]
    fn empty_real_slots_go_to_adus_that_may_not_wait() {
        let (slots, adus) = cycle();
        let mut asg = vec![Some(0), Some(2), Some(3), None];
        let moved = FairShare::default().enforce(&slots, 2, &adus, &[false; 4], &mut asg, CHOICE);
        assert_eq!(moved, 1);
        assert_eq!(asg[1], Some(1));
        assert_eq!(asg[0], Some(0));
    }

    #[test]
    fn adus_beyond_the_fair_set_never_displace_others() {
        let (slots, adus) = cycle();
        // ADU 1 (fair set) may wait and sits on a phantom; ADUs 2 and 3 are outside the
        // fair set: 2 holds a real slot, 3 takes the one left empty, nobody is displaced.
        let mut asg = vec![Some(0), Some(2), None, Some(1)];
        let may_wait = [false, true, false, false];
        let moved = FairShare::default().enforce(&slots, 2, &adus, &may_wait, &mut asg, CHOICE);
        assert_eq!(moved, 0);
        let mut asg = vec![Some(0), Some(2), None, None];
        let moved = FairShare::default().enforce(&slots, 2, &adus, &may_wait, &mut asg, CHOICE);
        assert_eq!(moved, 1);
        assert_eq!(asg[2], Some(1));
        assert_eq!(asg[3], None);
    }
}
