//! The application's commands: connect, listen, interfaces, and per-connection
//! operations (streams, ADUs, objectives, channels, close, reconnecting).

use super::*;

impl Driver {
    pub(super) fn command(&mut self, cmd: Command) {
        let now = self.now();
        match cmd {
            Command::Connect(config, reconnect, reply) => {
                self.start_connect(config, reconnect, reply, now)
            }
            Command::Listen(service, tx) => {
                self.listeners.insert(service, tx);
                let server = ServerConfig {
                    channel_config: self.accepted_channel.clone(),
                    ..ServerConfig::uniform(ChannelConfig::default())
                };
                self.endpoint.listen(service, server);
            }
            Command::AddInterface(iface, reply) => {
                let r = self.add_interface(&iface);
                let _ = reply.send(r);
            }
            Command::RemoveInterface(i) => self.remove_interface(i, now),
            Command::Stats(reply) => {
                let mut stats = self.stats.clone();
                // The handshake worker's share: what it read and dropped on its sockets.
                let (drops, datagrams, bytes) = self.handshakes.worker_counts();
                stats.dropped.merge(&drops);
                stats.datagrams_in += datagrams;
                stats.bytes_in += bytes;
                stats.handshake_datagrams_in = datagrams;
                stats.interfaces_open = self.sockets.iter().map(Option::is_some).collect();
                stats.plaintext_chunks = self.plaintext.allocated();
                stats.plaintext_chunks_reused = self.plaintext.reused();
                let _ = reply.send(stats);
            }
            Command::Conn(key, op) => self.conn_op(key, op, now),
            Command::Shutdown => {}
        }
    }

    fn add_interface(&mut self, iface: &InterfaceConfig) -> Result<(usize, SocketAddr), NetError> {
        let s = socket::bind(iface, self.offload, self.split_handshakes)?;
        let addr = s.local_addr()?;
        self.handshakes
            .set_socket(self.sockets.len(), s.handshake_socket().cloned());
        self.sockets.push(Some(s));
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
        self.drop_channels_on(index, now, false);
    }

    fn start_connect(
        &mut self,
        config: ConnectConfig,
        reconnect: Option<Reconnect>,
        reply: Answer<Connection>,
        now: Duration,
    ) {
        // An interface that is only down for now is fine: its channels wait for it.
        if let Some(bad) = config.channels.iter().find(|c| {
            self.ifaces
                .get(c.interface)
                .is_none_or(|i| i.state == IfaceState::Removed)
        }) {
            let _ = reply.send(Err(NetError::NoInterface(bad.interface)));
            return;
        }
        let (by_index, handshakes) = (&self.by_index, &self.handshakes);
        let index = random_index(&mut self.rng, |i| {
            by_index.contains_key(&i) || handshakes.is_reserved(i)
        });
        let initiator = Initiator::new(
            &self.keypair,
            &config.peer,
            index,
            unix_micros(),
            &mut self.rng,
        );
        let key = self.next_key;
        self.next_key += 1;
        self.by_index.insert(index, key);
        let deadline = now + config.handshake_timeout;
        let (tx, _) = mpsc::unbounded_channel();
        let mut conn = Conn::new(None, None, tx, None, self.reader_woke.clone());
        conn.reconnect = reconnect;
        conn.connect = Some(config.clone());
        conn.handshake = Some(PendingHandshake {
            initiator,
            config,
            next_send: now,
            deadline,
            retry: INITIATION_RETRY,
            reply,
        });
        self.conns.insert(key, conn);
    }

    /// A persistent connection's session has ended for `reason`: keep it for its
    /// streams and start handshaking again, with backoff.
    pub(super) fn start_redial(&mut self, key: u64, reason: CloseReason, now: Duration) {
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        let (Some(policy), Some(config)) = (conn.reconnect, conn.connect.clone()) else {
            return;
        };
        let old = conn.proto.take();
        conn.crypto = None;
        conn.refused.clear();
        self.by_index.retain(|_, k| *k != key);
        let by_index = &self.by_index;
        let index = random_index(&mut self.rng, |i| by_index.contains_key(&i));
        let initiator = Initiator::new(
            &self.keypair,
            &config.peer,
            index,
            unix_micros(),
            &mut self.rng,
        );
        self.by_index.insert(index, key);
        tracing::info!(reason = reason.as_str(), "session ended; reconnecting");
        let conn = self.conns.get_mut(&key).expect("checked above");
        conn.handshake = Some(PendingHandshake {
            initiator,
            config,
            next_send: now,
            deadline: now + policy.give_up_after,
            retry: policy.initial,
            reply: tokio::sync::oneshot::channel().0,
        });
        conn.redial = Some(Redial {
            policy,
            old,
            reason: Some(reason),
            give_up_at: now + policy.give_up_after,
        });
    }

    fn conn_op(&mut self, key: u64, op: ConnOp, now: Duration) {
        let Some(conn) = self.conns.get_mut(&key) else {
            return; // dropping the reply sender tells the caller the host is gone
        };
        // The keys live in the secure layer, not in the protocol session.
        let op = match op {
            ConnOp::Keys(reply) => {
                let _ = reply.send(conn.crypto.as_ref().map(|c| c.key_status()));
                return;
            }
            op => op,
        };
        if conn.redial.is_some() && matches!(op, ConnOp::Close) {
            self.cancel_redial(key, CloseReason::LocalClose);
            return;
        }
        // While reconnecting, the ended session holds the streams for its successor.
        let redialing = conn.proto.is_none();
        let taken = if redialing {
            conn.redial.as_mut().and_then(|r| r.old.take())
        } else {
            conn.proto.take()
        };
        let Some(mut session) = taken else {
            return;
        };
        self.apply_op(key, &mut session, op, now);
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        if redialing {
            // Its nacks (a queue overflowing while the peer is away) go out now.
            while let Some(e) = session.poll_event() {
                conn.deliver(e);
            }
        }
        match conn.redial.as_mut() {
            Some(r) if redialing => r.old = Some(session),
            _ => conn.proto = Some(session),
        }
    }

    /// Give up reconnecting: what the ended session kept for a successor is nacked, the
    /// application hears the end, and the connection is forgotten.
    pub(super) fn cancel_redial(&mut self, key: u64, reason: CloseReason) {
        let Some(mut c) = self.conns.remove(&key) else {
            return;
        };
        self.forget(&c);
        self.by_index.retain(|_, k| *k != key);
        c.reconnect = None;
        if let Some(mut r) = c.redial.take() {
            if let Some(mut old) = r.old.take() {
                old.release();
                while let Some(e) = old.poll_event() {
                    c.deliver(e);
                }
            }
        }
        c.deliver(Event::Closed { reason });
        c.fail_waiters();
        self.stats.sessions_removed += 1;
    }

    fn apply_op(&mut self, key: u64, p: &mut Session, op: ConnOp, now: Duration) {
        let conn = self.conns.get_mut(&key).expect("caller checked");
        match op {
            ConnOp::OpenStream(id, cfg, r) => {
                let _ = r.send(p.open_stream(id, cfg).map_err(Into::into));
            }
            ConnOp::Send {
                stream,
                payload,
                fields,
                reply,
            } => {
                let res = p.send_adu(now, stream, payload, fields);
                match reply {
                    Some(r) => {
                        let _ = r.send(res.map_err(Into::into));
                    }
                    None => {
                        if let Err(e) = res {
                            tracing::warn!(stream, error = %e, "ADU rejected");
                        }
                    }
                }
            }
            ConnOp::SetField(adu, name, value) => {
                // Fire and forget: an ADU that has left the queue keeps its fields.
                let _ = p.set_adu_field(adu, &name, value);
            }
            ConnOp::Remove(adu, r) => {
                let _ = r.send(p.remove_adu(adu).is_ok());
            }
            ConnOp::SetMaxRate(stream, kbps, r) => {
                let _ = r.send(p.set_max_rate(stream, kbps).map_err(Into::into));
            }
            ConnOp::Writable(stream, r) => match p.writable(stream) {
                _ if p.is_closed() && !p.successor_expected() => {
                    let _ = r.send(Err(horde_proto::SessionError::Closed.into()));
                }
                Ok(true) => {
                    let _ = r.send(Ok(()));
                }
                Ok(false) => conn.writable_waiters.push((stream, r)),
                Err(e) => {
                    let _ = r.send(Err(e.into()));
                }
            },
            ConnOp::Inject(o, r) => {
                let _ = r.send(p.inject_objective(o));
            }
            ConnOp::RemoveObjective(id) => {
                let _ = p.remove_objective(id);
            }
            ConnOp::LatencyModes(r) => {
                let _ = r.send(p.latency_modes());
            }
            ConnOp::Stats(r) => {
                let _ = r.send(p.stats());
            }
            ConnOp::Channels(r) => {
                let _ = r.send(p.channels().iter().map(ChannelStatus::of).collect());
            }
            // Answered by `conn_op` before the session is taken.
            ConnOp::Keys(_) => {}
            ConnOp::AddChannel(target, r) => {
                let ok = self
                    .sockets
                    .get(target.interface)
                    .is_some_and(|s| s.is_some());
                let res = if ok {
                    p.add_channel(
                        now,
                        ChannelSpec {
                            local: target.interface as u16,
                            remote: target.remote,
                            config: target.config.clone(),
                        },
                    )
                    .map_err(Into::into)
                } else {
                    Err(NetError::NoInterface(target.interface))
                };
                if let Ok(id) = res {
                    conn.targets.insert(id, target);
                }
                let _ = r.send(res);
            }
            ConnOp::RemoveChannel(id) => {
                let _ = p.remove_channel(now, id);
                conn.targets.remove(&id);
            }
            ConnOp::Close => p.close(now),
        }
    }
}
