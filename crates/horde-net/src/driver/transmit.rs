//! Transmit: the host's datagrams through the AEAD layer onto the sockets.

use super::sealer::{SealBatch, Sealer};
use super::*;

impl Driver {
    /// Tell the host how far each application that read has got, and for each
    /// connection the host is about to walk, or walked at the last flush (a datagram or
    /// a send may have moved its receive window), when to wake the driver: the others'
    /// windows have not moved since they were last told.
    fn tell_reading(&mut self, now: Duration) {
        // Both lists keep their buffers from flush to flush: a flush allocates nothing.
        let mut keys = std::mem::take(&mut self.tell_keys);
        keys.append(&mut self.to_tell);
        // Told again at the next flush, after their walk (listed in key order).
        self.to_tell.extend(self.host.touched_connections());
        keys.extend_from_slice(&self.to_tell);
        self.read_log.take(&mut keys);
        keys.sort_unstable();
        keys.dedup();
        for &key in &keys {
            let Some(app) = self.apps.get(&key) else {
                continue;
            };
            app.read.unlist();
            let reopen = self.host.bytes_read(now, key, app.read.read());
            app.read.wake_when_read(reopen);
        }
        keys.clear();
        self.tell_keys = keys;
    }

    /// Seal the host's pending datagrams into the per-socket queues, sending each queue
    /// as it fills and all of them at the end. The host settles each connection's fate
    /// as it walks them.
    pub(super) async fn flush(&mut self, now: Duration) {
        if let Some(sealer) = &self.sealer {
            sealer.busy();
        }
        // Before anything leaves from a new index, the kernel must let its answers in.
        self.refresh_index_filter();
        // Handshake datagrams go first.
        while let Some(h) = self.host.poll_handshake_transmit() {
            if let Some(q) = self.tx.get_mut(h.iface) {
                q.push(h.dst, Owner::Handshake, &h.datagram, 1);
            }
        }
        self.send_queues().await;
        self.tell_reading(now);
        // A flush starts on the plain path (sealed straight into the socket queues)
        // while the sealer holds nothing: a flush of a few datagrams (acks, a
        // lightly loaded connection) then costs exactly what it costs without a
        // worker. Past `INLINE_DATAGRAMS` the rest goes through the sealer.
        let mut straight = match &self.sealer {
            None => usize::MAX,
            Some(sealer) if sealer.running() && sealer.quiet() => sealer::INLINE_DATAGRAMS,
            Some(sealer) if sealer.running() => 0,
            Some(_) => usize::MAX,
        };
        // The datagrams without their ADU lists: this driver only seals and sends them.
        while let Some(t) = self.host.poll_datagram(now, &mut self.tx_buf) {
            let iface = t.iface;
            let (Some(Some(s)), Some(q)) = (self.sockets.get(iface), self.tx.get_mut(iface)) else {
                continue;
            };
            let owner = Owner::Channel {
                conn: t.conn,
                channel: t.channel,
            };
            if straight == 0 {
                let Some(sealer) = self.sealer.as_mut() else {
                    continue;
                };
                // Prepared here (counter, key phase), sealed here or on the worker.
                if !sealer.can_fill(iface) {
                    if sealer.wait_one().is_none() {
                        // Every batch is being filled for other sockets.
                        sealer.hand_off_all();
                    }
                    send_sealed(
                        &self.sockets,
                        sealer,
                        &mut self.sealed,
                        &mut self.stats,
                        &mut self.refusals,
                    )
                    .await;
                }
                let Some(b) = sealer.filling(iface) else {
                    continue;
                };
                let Some(crypto) = self.host.crypto_mut(t.conn) else {
                    continue;
                };
                if b.push(
                    crypto,
                    t.channel,
                    &self.tx_buf,
                    t.dst,
                    owner,
                    s.gso_segments(),
                )
                .is_err()
                {
                    self.stats.send_errors += 1;
                    continue;
                }
                sealer.hand_off(iface, false);
                sealer.collect();
                send_sealed(
                    &self.sockets,
                    sealer,
                    &mut self.sealed,
                    &mut self.stats,
                    &mut self.refusals,
                )
                .await;
                continue;
            }
            // Sealed straight into the socket's batch: no copy of the datagram.
            let Some(crypto) = self.host.crypto_mut(t.conn) else {
                continue;
            };
            let tx_buf = &self.tx_buf;
            let sealed = q.push_with(t.dst, owner, s.gso_segments(), |buf| {
                crypto
                    .seal_append(u8::from(t.channel), tx_buf, buf)
                    .map(drop)
            });
            if sealed.is_err() {
                self.stats.send_errors += 1;
                continue;
            }
            if q.is_full() {
                send_queue(s, q, &mut self.stats, &mut self.refusals).await;
            }
            if let Some(sealer) = self.sealer.as_mut() {
                sealer.sealed_on_driver += 1;
            }
            if straight != usize::MAX {
                straight -= 1;
                if straight == 0 {
                    // What was sealed straight leaves before anything the sealer
                    // seals after it.
                    for (i, q) in self.tx.iter_mut().enumerate() {
                        if let (Some(Some(s)), false) = (self.sockets.get(i), q.is_empty()) {
                            send_queue(s, q, &mut self.stats, &mut self.refusals).await;
                        }
                    }
                }
            }
        }
        if let Some(sealer) = self.sealer.as_mut() {
            // What the worker has not finished is sent when it has (its `done` wakes
            // the driver), not waited for here.
            sealer.hand_off_all();
            if self.sealing_wait {
                sealer.collect_all();
            } else {
                sealer.idle();
                sealer.collect();
            }
            send_sealed(
                &self.sockets,
                sealer,
                &mut self.sealed,
                &mut self.stats,
                &mut self.refusals,
            )
            .await;
            self.stats.sealed_off_thread = sealer.sealed_off_thread;
            self.stats.sealed_on_driver = sealer.sealed_on_driver;
        }
        self.send_queues().await;
    }

    /// Send what every socket has queued; a closed socket's queue is dropped.
    async fn send_queues(&mut self) {
        for (i, q) in self.tx.iter_mut().enumerate() {
            match self.sockets.get(i) {
                Some(Some(s)) if !q.is_empty() => {
                    send_queue(s, q, &mut self.stats, &mut self.refusals).await
                }
                _ => q.clear(),
            }
        }
        for (conn, channel) in self.refusals.drain(..) {
            self.host.handle_refused(conn, channel);
        }
    }
}

/// Send the sealed batches whose turn it is ([`Sealer::sendable`]), in order, and give
/// them back for reuse. A closed socket's batch is dropped. `sealed` is scratch space.
async fn send_sealed(
    sockets: &[Option<ChannelSocket>],
    sealer: &mut Sealer,
    sealed: &mut Vec<SealBatch>,
    stats: &mut HostStats,
    refusals: &mut Vec<(u64, ChannelId)>,
) {
    sealer.sendable(sealed);
    for mut b in sealed.drain(..) {
        if let Some(Some(s)) = sockets.get(b.iface) {
            send_queue(s, &mut b.queue, stats, refusals).await;
        }
        sealer.recycle(b);
    }
}

/// Send a socket's queue and empty it, waiting whenever the socket is not writable (a
/// fresh socket is not known to be writable until the reactor has seen it once). A
/// message the kernel refuses is counted and skipped; one refused by an ICMP port
/// unreachable is noted in `refusals` for its channel.
async fn send_queue(
    s: &ChannelSocket,
    q: &mut TxQueue,
    stats: &mut HostStats,
    refusals: &mut Vec<(u64, ChannelId)>,
) {
    let mut done = 0;
    while done < q.messages().len() {
        let rest = &q.messages()[done..];
        match s.try_send_with(|io| batch::send_messages(io, q, rest)) {
            Ok(n) => {
                stats.send_calls += 1;
                for m in &rest[..n] {
                    stats.datagrams_out += m.datagrams() as u64;
                    stats.bytes_out += m.len() as u64;
                    if m.datagrams() > 1 {
                        stats.gso_messages += 1;
                    }
                }
                done += n.max(1);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if s.writable().await.is_err() {
                    stats.send_errors += 1;
                    break;
                }
            }
            Err(e) => {
                let m = rest[0];
                let offload_refused = matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL));
                if m.datagrams() > 1 && offload_refused {
                    // The device cannot segment (EIO) or not this message (EINVAL):
                    // send its datagrams one by one.
                    if e.raw_os_error() == Some(libc::EIO) {
                        tracing::info!("UDP GSO refused by the device; sending datagrams singly");
                        s.disable_gso();
                    }
                    match s.try_send_with(|io| batch::send_singly(io, q, &m)) {
                        Ok(()) => {
                            stats.datagrams_out += m.datagrams() as u64;
                            stats.bytes_out += m.len() as u64;
                        }
                        Err(_) => stats.send_errors += 1,
                    }
                } else {
                    // A dead route or a refused port: the channel manager sees the loss
                    // and its dead-man timer takes the channel out of service; repeated
                    // refusals end the session (see `REFUSED_SENDS`).
                    stats.send_errors += 1;
                    if let (io::ErrorKind::ConnectionRefused, Owner::Channel { conn, channel }) =
                        (e.kind(), m.owner)
                    {
                        refusals.push((conn, channel));
                    }
                }
                done += 1;
            }
        }
    }
    q.clear();
}
