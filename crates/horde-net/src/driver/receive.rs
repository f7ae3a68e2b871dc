//! Receiving: datagrams from the sockets, the secure layer's checks, handshake
//! messages, and new sessions accepted from a peer's hello.

use super::*;

impl Driver {
    /// Read every socket until it is empty or has given `RECV_BATCH` datagrams, many per
    /// `recvmmsg` and, with GRO, many per buffer.
    pub(super) fn receive_all(&mut self) {
        // Taken out so that the datagrams can be handled while they are borrowed.
        let mut bufs = std::mem::take(&mut self.recv_bufs);
        for i in 0..self.sockets.len() {
            let mut read = 0;
            while read < RECV_BATCH {
                let Some(s) = &self.sockets[i] else { break };
                let mut chunks = bufs.chunks_mut(MAX_DATAGRAM);
                let mut slices: [IoSliceMut<'_>; RECV_SLOTS] = std::array::from_fn(|_| {
                    IoSliceMut::new(chunks.next().expect("RECV_SLOTS chunks"))
                });
                let mut meta = [RecvMeta::default(); RECV_SLOTS];
                let n = match s.try_recv(&mut slices, &mut meta) {
                    Ok(n) => n,
                    // WouldBlock, or e.g. ICMP port unreachable surfaced on a later read.
                    Err(_) => break,
                };
                self.stats.recv_calls += 1;
                let now = self.now();
                for (slot, m) in meta[..n].iter().enumerate() {
                    let data = &bufs[slot * MAX_DATAGRAM..slot * MAX_DATAGRAM + m.len];
                    let stride = m.stride.max(1);
                    if m.len > stride {
                        self.stats.gro_reads += 1;
                    }
                    for d in data.chunks(stride) {
                        read += 1;
                        self.stats.datagrams_in += 1;
                        self.stats.bytes_in += d.len() as u64;
                        self.on_datagram(i, m.addr, d, now);
                    }
                }
            }
        }
        self.recv_bufs = bufs;
    }

    fn on_datagram(&mut self, iface: usize, src: SocketAddr, data: &[u8], now: Duration) {
        match classify(data) {
            Err(DropReason::LegacyHandshake) => {
                self.handshakes.on_legacy(src, &mut self.stats.dropped)
            }
            Err(reason) => self.stats.dropped.record(reason),
            Ok(Packet::Initiation { .. }) => self.on_initiation(iface, src, data, now),
            Ok(Packet::Response {
                receiver_index: receiver,
            }) => self.on_response(receiver, data, now),
            Ok(Packet::CookieReply {
                receiver_index: receiver,
            }) => self.on_cookie_reply(receiver, data, now),
            Ok(Packet::Transport {
                receiver_index: receiver,
                ..
            }) => {
                let Some(&key) = self.by_index.get(&receiver) else {
                    self.stats.dropped.record(DropReason::WrongIndex);
                    return;
                };
                let conn = self.conns.get_mut(&key).expect("indexed connection exists");
                let Some(crypto) = conn.crypto.as_mut() else {
                    return;
                };
                conn.refused.clear();
                crypto.tick(now);
                let plain = match self
                    .plaintext
                    .open_in_place(data, |d| crypto.open_in_place(d).map(|(_, at)| at))
                {
                    Ok(p) => p,
                    Err(reason) => {
                        self.stats.dropped.record(reason);
                        return;
                    }
                };
                match conn.proto.as_mut() {
                    Some(p) => p.handle_datagram(now, iface as u16, src, plain),
                    None => self.accept_session(key, iface, src, plain, now),
                }
            }
        }
    }

    /// Only the cheap checks here; the handshake worker answers later
    /// ([`Driver::on_handshake_done`]).
    fn on_initiation(&mut self, iface: usize, src: SocketAddr, data: &[u8], now: Duration) {
        let by_index = &self.by_index;
        let gate = self.handshakes.on_initiation(
            data,
            iface,
            src,
            now,
            |i| by_index.contains_key(&i),
            &mut self.stats.dropped,
        );
        if let Gate::Send(cookie_reply) = gate {
            self.send_raw(iface, src, &cookie_reply);
        }
    }

    /// A cookie reply: our initiation is wanted again with `mac2`; resend it now.
    fn on_cookie_reply(&mut self, receiver: u32, data: &[u8], now: Duration) {
        let Some(&key) = self.by_index.get(&receiver) else {
            self.stats.dropped.record(DropReason::WrongIndex);
            return;
        };
        let conn = self.conns.get_mut(&key).expect("indexed connection exists");
        let Some(hs) = conn.handshake.as_mut() else {
            self.stats.dropped.record(DropReason::UnexpectedType);
            return;
        };
        match hs.initiator.read_cookie_reply(data) {
            Ok(()) => hs.next_send = now,
            Err(reason) => self.stats.dropped.record(reason),
        }
    }

    /// The handshake worker's answer to an initiation.
    pub(super) fn on_handshake_done(&mut self, done: Done) {
        let Done {
            iface, src, result, ..
        } = done;
        let reply = match result {
            Ok(r) => r,
            Err(reason) => {
                self.stats.dropped.record(reason);
                return;
            }
        };
        if let Reply::NewSession { session, .. } = &reply {
            // Indices the worker picks on its own are checked here; a clash (one in
            // 2^32 per live session) loses this handshake, and the initiator retries.
            if self.by_index.contains_key(&session.local_index()) {
                tracing::debug!("handshake index clash: response not sent");
                return;
            }
        }
        self.send_raw(iface, src, reply.response());
        if let Reply::NewSession { mut session, .. } = reply {
            session.set_rekey_policy(self.rekey);
            // Key ages count from the host's clock: unticked, a session's first key
            // would be stamped as used at 0 and expire once the host is older than
            // the reject-after time.
            session.tick(self.now());
            let key = self.next_key;
            self.next_key += 1;
            let (tx, rx) = mpsc::unbounded_channel();
            self.by_index.insert(session.local_index(), key);
            self.conns.insert(
                key,
                Conn::new(Some(session), None, tx, Some(rx), self.reader_woke.clone()),
            );
        }
    }

    /// A new session from `peer` for `service` (connection `new`) replaces the sessions
    /// the peer opened to that service before (it restarted, or reconnected): their
    /// applications hear [`CloseReason::Replaced`], what they had in flight is
    /// abandoned, and their state is freed. Its sessions to other services stay.
    fn replace_sessions_of(&mut self, peer: &PublicKey, service: u32, new: u64) {
        let now = self.now();
        let old: Vec<u64> = self
            .conns
            .iter()
            .filter(|(&k, c)| {
                k != new
                    && c.proto.as_ref().is_some_and(|p| p.service() == service)
                    && c.crypto
                        .as_ref()
                        .is_some_and(|k| !k.is_initiator() && k.remote_static() == peer)
            })
            .map(|(&k, _)| k)
            .collect();
        for key in old {
            let Some(mut c) = self.conns.remove(&key) else {
                continue;
            };
            self.forget(&c);
            if let Some(p) = c.proto.as_mut() {
                p.replaced(now);
                c.forward_events();
            }
            c.fail_waiters();
            self.by_index.retain(|_, k| *k != key);
            self.stats.sessions_replaced += 1;
            tracing::info!(peer = %peer, "new handshake from the peer replaces its old session");
        }
    }

    fn on_response(&mut self, receiver: u32, data: &[u8], now: Duration) {
        let Some(&key) = self.by_index.get(&receiver) else {
            self.stats.dropped.record(DropReason::WrongIndex);
            return;
        };
        let pending = &mut self
            .conns
            .get_mut(&key)
            .expect("indexed connection exists")
            .handshake;
        let Some(mut hs) = pending.take() else {
            self.stats.dropped.record(DropReason::UnexpectedType);
            return;
        };
        let crypto = match hs.initiator.read_response(data) {
            Ok(s) => s,
            Err(reason) => {
                *pending = Some(hs);
                self.stats.dropped.record(reason);
                return;
            }
        };
        let mut crypto = crypto;
        crypto.set_rekey_policy(self.rekey);
        crypto.tick(now);
        // Channels over an interface that is down now wait for it to come back.
        let sockets = &self.sockets;
        let (live, parked): (Vec<ChannelTarget>, Vec<ChannelTarget>) = hs
            .config
            .channels
            .iter()
            .cloned()
            .partition(|c| matches!(sockets.get(c.interface), Some(Some(_))));
        let specs = live
            .iter()
            .map(|c| ChannelSpec {
                local: c.interface as u16,
                remote: c.remote,
                config: c.config.clone(),
            })
            .collect();
        self.refresh_aliases();
        let options = ConnectOptions {
            service: hs.config.service,
            channels: specs,
            ..ConnectOptions::default()
        };
        match self.endpoint.connect(now, options) {
            Ok((handle, mut p)) => {
                let conn = self.conns.get_mut(&key).expect("indexed connection exists");
                if let Some(old) = conn.handle.replace(handle) {
                    self.endpoint.forget(old);
                }
                conn.crypto = Some(Box::new(crypto));
                p.set_successor_expected(conn.reconnect.is_some());
                if let Some(mut r) = conn.redial.take() {
                    // A reconnection: the new session carries on the old one's streams,
                    // and the application keeps its handle and event channel.
                    if let Some(old) = r.old.as_mut() {
                        p.inherit(old, now);
                        while let Some(e) = old.poll_event() {
                            conn.deliver(e);
                        }
                    }
                    conn.proto = Some(Box::new(p));
                    conn.targets = ChannelId::all().zip(live).collect();
                    conn.parked = parked;
                    self.stats.reconnects += 1;
                    tracing::info!("reconnected to the peer");
                    return;
                }
                conn.proto = Some(Box::new(p));
                // `Session::connect` numbers the channels 0.. in order.
                conn.targets = ChannelId::all().zip(live).collect();
                conn.parked = parked;
                let (tx, rx) = mpsc::unbounded_channel();
                conn.events = tx;
                let events = conn.receiver(rx);
                let peer = conn.peer();
                let reply = std::mem::replace(&mut hs.reply, tokio::sync::oneshot::channel().0);
                let _ = reply.send(Ok(Connection::new(key, self.cmd_tx.clone(), events, peer)));
            }
            Err(e) => {
                let _ = hs.reply.send(Err(e.into()));
                self.remove_conn(key);
            }
        }
    }

    /// The first protocol datagram on a new secure session must be a hello for a service
    /// somebody listens on.
    fn accept_session(
        &mut self,
        key: u64,
        iface: usize,
        src: SocketAddr,
        plain: Bytes,
        now: Duration,
    ) {
        self.refresh_aliases();
        let new = match self.endpoint.accept_hello(now, iface as u16, src, &plain) {
            Ok(new) => new,
            Err(AcceptError::UnsupportedVersion { peer, ours }) => {
                tracing::warn!(
                    peer = %src,
                    "refused a peer speaking wire version {peer}: this host speaks version {ours} only"
                );
                self.stats.unroutable += 1;
                return;
            }
            Err(_) => {
                self.stats.unroutable += 1;
                return;
            }
        };
        // Taken from the endpoint's queue at once: the listener's channel is the backlog.
        self.endpoint.accept();
        let service = new.session.service();
        let Some(listener) = self.listeners.get(&service).cloned() else {
            self.endpoint.forget(new.handle);
            self.stats.unroutable += 1;
            return;
        };
        if let Some(peer) = self.conns.get(&key).and_then(Conn::peer) {
            self.replace_sessions_of(&peer, service, key);
        }
        let conn = self.conns.get_mut(&key).expect("connection exists");
        conn.proto = Some(new.session);
        conn.handle = Some(new.handle);
        if let Some(rx) = conn.events_rx.take() {
            let events = conn.receiver(rx);
            let c = Connection::new(key, self.cmd_tx.clone(), events, conn.peer());
            if listener.try_send(c).is_err() {
                // The application is not accepting: refuse rather than queue.
                self.stats.backlog_refused += 1;
                tracing::warn!(service, "accept backlog full: connection closed");
                if let Some(p) = conn.proto.as_mut() {
                    p.close(now);
                }
            }
        }
    }
}
