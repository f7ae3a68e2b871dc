//! The interface monitor: interfaces that go away or come back close or bind their
//! sockets, and the host removes or re-adds the channels over them.

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
        if let Some(s) = self.sockets[i].take() {
            self.kernel_dropped_closed += s.kernel_drops();
        }
        self.handshakes.set_socket(i, None);
        self.stats.interfaces_down += 1;
        tracing::info!(
            interface = i,
            device = iface.config.device.as_deref().unwrap_or(""),
            reason = reason.as_str(),
            "interface down: socket closed, its channels removed"
        );
        self.refresh_aliases();
        self.host.interface_down(now, i);
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
        self.filtered_indices = None;
        self.stats.interfaces_up += 1;
        tracing::info!(
            interface = i,
            device = device.as_deref().unwrap_or(""),
            "interface up: socket bound again, its channels re-added"
        );
        self.refresh_aliases();
        self.host.interface_up(now, i);
    }
}
