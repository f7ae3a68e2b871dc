//! The application's commands: connect, listen, interfaces, counters, and operations on
//! one connection (passed to the host).

use super::*;

impl Driver {
    pub(super) fn command(&mut self, cmd: Command) {
        let now = self.now();
        match cmd {
            Command::Connect(config, reconnect, reply) => {
                match self.host.connect(now, config, reconnect, |_| false) {
                    Ok(key) => {
                        self.dialing.insert(key, reply);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e.into()));
                    }
                }
            }
            Command::Listen(service, tx) => {
                self.listeners.insert(service, tx);
                self.host.listen(service);
            }
            Command::AddInterface(iface, reply) => {
                let r = self.add_interface(&iface);
                let _ = reply.send(r);
            }
            Command::RemoveInterface(i) => self.remove_interface(i, now),
            Command::AllowPeer(peer, allowed) => self.host.allow_peer(peer, allowed),
            Command::Stats(reply) => {
                let _ = reply.send(self.stats());
            }
            Command::Conn(key, op) => self.host.handle_command(now, key, op),
            Command::Shutdown => {}
        }
    }

    fn stats(&self) -> HostStats {
        let mut stats = self.stats.clone();
        let host = self.host.counters();
        stats.dropped.merge(&host.dropped);
        stats.unroutable = host.unroutable;
        stats.services_refused = host.services_refused;
        stats.channels_removed = host.channels_removed;
        stats.channels_restored = host.channels_restored;
        stats.sessions_replaced = host.sessions_replaced;
        stats.backlog_refused = host.backlog_refused;
        stats.reconnects = host.reconnects;
        stats.sessions_removed = host.sessions_removed;
        // The handshake worker's share: what it read and dropped on its sockets.
        let (drops, datagrams, bytes) = self.handshakes.worker_counts();
        stats.dropped.merge(&drops);
        stats.datagrams_in += datagrams;
        stats.bytes_in += bytes;
        stats.handshake_datagrams_in = datagrams;
        stats.kernel_dropped = self.kernel_dropped();
        stats.interfaces_open = self.sockets.iter().map(Option::is_some).collect();
        (stats.plaintext_chunks, stats.plaintext_chunks_reused) = self.host.plaintext_chunks();
        stats
    }

    fn add_interface(&mut self, iface: &InterfaceConfig) -> Result<(usize, SocketAddr), NetError> {
        let s = socket::bind(iface, self.offload, self.split_handshakes)?;
        let addr = s.local_addr()?;
        self.handshakes
            .set_socket(self.sockets.len(), s.handshake_socket().cloned());
        self.sockets.push(Some(s));
        self.filtered_indices = None;
        self.tx.push(TxQueue::default());
        self.ifaces.push(Iface {
            config: iface.clone(),
            bound: addr,
            ifindex: iface
                .device
                .as_deref()
                .and_then(|d| self.monitor.index_of(d)),
            state: IfaceState::Open,
        });
        self.host.add_interface();
        self.refresh_aliases();
        Ok((self.sockets.len() - 1, addr))
    }

    /// The application removes an interface for good: nothing over it comes back.
    fn remove_interface(&mut self, index: usize, now: Duration) {
        let Some(iface) = self.ifaces.get_mut(index) else {
            return;
        };
        iface.state = IfaceState::Removed;
        self.sockets[index] = None;
        self.handshakes.set_socket(index, None);
        self.refresh_aliases();
        self.host.remove_interface(now, index);
    }
}
