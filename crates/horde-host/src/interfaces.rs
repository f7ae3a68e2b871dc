//! Interfaces that go away or come back: the channels over them are removed from every
//! connection, and the ones this end opened are added again when they return.

use std::time::Duration;

use horde_proto::ChannelId;

use crate::conn::ConnState;
use crate::{Host, InterfaceState};

impl Host {
    /// A new interface, open; returns its index.
    pub fn add_interface(&mut self) -> usize {
        self.interfaces.push(InterfaceState::Open);
        self.interfaces.len() - 1
    }

    /// Interface `i` is down for now: the channels over it are removed, and the ones
    /// this end opened wait for it to come back.
    pub fn interface_down(&mut self, now: Duration, i: usize) {
        self.set_interface(i, InterfaceState::Down);
        self.drop_channels_on(i, now, true);
    }

    /// Interface `i` is gone for good: nothing over it comes back.
    pub fn remove_interface(&mut self, now: Duration, i: usize) {
        if i >= self.interfaces.len() {
            return;
        }
        self.set_interface(i, InterfaceState::Removed);
        self.drop_channels_on(i, now, false);
    }

    /// Interface `i` is open again: the channels this end opened over it are added back.
    pub fn interface_up(&mut self, now: Duration, i: usize) {
        self.set_interface(i, InterfaceState::Open);
        for (&key, c) in self.conns.iter_mut() {
            if c.session().is_none() || !c.parked.iter().any(|t| t.interface == i) {
                continue;
            }
            self.touched.touch(key);
            let (back, rest): (Vec<_>, Vec<_>) = c.parked.drain(..).partition(|t| t.interface == i);
            c.parked = rest;
            let ConnState::Established { session: p, .. } = &mut c.state else {
                continue;
            };
            for t in back {
                match p.add_channel(now, t.spec()) {
                    Ok(id) => {
                        c.targets.insert(id, t);
                        self.counters.channels_restored += 1;
                    }
                    Err(e) => tracing::warn!(interface = i, error = %e, "cannot re-add channel"),
                }
            }
        }
    }

    fn set_interface(&mut self, i: usize, state: InterfaceState) {
        if let Some(s) = self.interfaces.get_mut(i) {
            *s = state;
        }
    }

    /// Remove every channel over interface `i` from every connection. With `park`, the
    /// channels this end opened are remembered to be added again when `i` comes back;
    /// without, they are forgotten.
    fn drop_channels_on(&mut self, i: usize, now: Duration, park: bool) {
        for (&key, c) in self.conns.iter_mut() {
            if !park {
                c.parked.retain(|t| t.interface != i);
            }
            let ConnState::Established { session: p, .. } = &mut c.state else {
                continue;
            };
            self.touched.touch(key);
            let gone: Vec<ChannelId> = p
                .channels()
                .iter()
                .filter(|ch| usize::from(ch.local()) == i)
                .map(|ch| ch.id())
                .collect();
            for id in gone {
                // The session announces `ChannelDown` itself, before the nacks of what
                // was in flight on the channel.
                let _ = p.remove_channel(now, id);
                self.counters.channels_removed += 1;
                match c.targets.remove(&id) {
                    Some(t) if park => c.parked.push(t),
                    _ => {}
                }
            }
        }
    }
}
