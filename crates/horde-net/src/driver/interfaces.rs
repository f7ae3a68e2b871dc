//! The channel pool manager: interfaces that go away or come back close or bind
//! their sockets, and remove or re-add the channels over them in every connection.

use super::*;

impl Driver {
    pub(super) fn watch_interfaces(&mut self, now: Duration) {
        for change in self.monitor.poll(now, &self.ifaces) {
            match change {
                Change::Down(i, reason) => self.interface_down(i, reason, now),
                Change::Up(i) => self.interface_up(i, now),
            }
        }
    }

    fn interface_down(&mut self, i: usize, reason: DownReason, now: Duration) {
        let iface = &mut self.ifaces[i];
        iface.state = IfaceState::Down;
        self.sockets[i] = None;
        self.handshakes.set_socket(i, None);
        self.stats.interfaces_down += 1;
        tracing::info!(
            interface = i,
            device = iface.config.device.as_deref().unwrap_or(""),
            reason = reason.as_str(),
            "interface down: socket closed, its channels removed"
        );
        self.drop_channels_on(i, now, true);
    }

    /// Remove every channel over interface `i` from every connection. With `park`, the
    /// channels this end opened are remembered to be added again when `i` comes back;
    /// without, they are forgotten.
    pub(super) fn drop_channels_on(&mut self, i: usize, now: Duration, park: bool) {
        for c in self.conns.values_mut() {
            if !park {
                c.parked.retain(|t| t.interface != i);
            }
            let Some(p) = c.proto.as_ref() else { continue };
            let gone: Vec<ChannelId> = p
                .channels()
                .iter()
                .filter(|ch| usize::from(ch.local()) == i)
                .map(|ch| ch.id())
                .collect();
            for id in gone {
                // The session announces `ChannelDown` itself, before the nacks of what
                // was in flight on the channel.
                let p = c.proto.as_mut().expect("checked above");
                let _ = p.remove_channel(now, id);
                self.stats.channels_removed += 1;
                match c.targets.remove(&id) {
                    Some(t) if park => c.parked.push(t),
                    _ => {}
                }
            }
        }
    }

    fn interface_up(&mut self, i: usize, now: Duration) {
        if !self.handshakes.retired_closed() {
            return; // the worker still holds an old handshake socket; the next poll tries again
        }
        let iface = &self.ifaces[i];
        // The same address and port as before, so peers' channels still reach us; the
        // configured address if that port has been taken meanwhile.
        let again = InterfaceConfig {
            bind: iface.bound,
            device: iface.config.device.clone(),
        };
        let split = self.split_handshakes;
        let bound = socket::bind(&again, self.offload, split).or_else(|e| {
            if iface.bound == iface.config.bind {
                Err(e)
            } else {
                socket::bind(&iface.config, self.offload, split)
            }
        });
        let s = match bound.and_then(|s| Ok((s.local_addr()?, s))) {
            Ok((addr, s)) => {
                if addr != iface.bound {
                    tracing::warn!(
                        interface = i,
                        was = %iface.bound,
                        now = %addr,
                        "interface bound again on another port; peers must follow"
                    );
                }
                (addr, s)
            }
            Err(e) => {
                tracing::debug!(interface = i, error = %e, "interface back but cannot bind yet");
                return; // the next poll tries again
            }
        };
        let device = iface.config.device.clone();
        let iface = &mut self.ifaces[i];
        iface.bound = s.0;
        iface.ifindex = device.as_deref().and_then(|d| self.monitor.index_of(d));
        iface.state = IfaceState::Open;
        self.handshakes
            .set_socket(i, s.1.handshake_socket().cloned());
        self.sockets[i] = Some(s.1);
        self.stats.interfaces_up += 1;
        tracing::info!(
            interface = i,
            device = device.as_deref().unwrap_or(""),
            "interface up: socket bound again, its channels re-added"
        );
        for c in self.conns.values_mut() {
            if c.proto.is_none() || !c.parked.iter().any(|t| t.interface == i) {
                continue;
            }
            let (back, rest): (Vec<_>, Vec<_>) = c.parked.drain(..).partition(|t| t.interface == i);
            c.parked = rest;
            let p = c.proto.as_mut().expect("checked above");
            for t in back {
                let spec = ChannelSpec {
                    local: t.interface as u16,
                    remote: t.remote,
                    config: t.config.clone(),
                };
                match p.add_channel(now, spec) {
                    Ok(id) => {
                        c.targets.insert(id, t);
                        self.stats.channels_restored += 1;
                    }
                    Err(e) => tracing::warn!(interface = i, error = %e, "cannot re-add channel"),
                }
            }
        }
    }
}
