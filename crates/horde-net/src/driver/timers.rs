//! Timers: sessions' protocol timers and handshake retries and deadlines.

use super::*;

impl Driver {
    pub(super) fn timers(&mut self, now: Duration) {
        let mut failed = Vec::new();
        let mut resend = Vec::new();
        for (&key, c) in self.conns.iter_mut() {
            if let Some(p) = c.proto.as_mut() {
                if p.poll_timeout(now).is_some_and(|t| t <= now) {
                    p.handle_timeout(now);
                }
            }
            if let Some(h) = c.handshake.as_mut() {
                if now >= h.deadline {
                    failed.push(key);
                } else if now >= h.next_send {
                    h.next_send = now + h.retry;
                    if let Some(r) = &c.redial {
                        h.retry = (h.retry * 2).min(r.policy.max); // backoff
                    }
                    for ch in &h.config.channels {
                        resend.push((ch.interface, ch.remote, key));
                    }
                }
            }
        }
        for (iface, dst, key) in resend {
            if let Some(q) = self.tx.get_mut(iface) {
                if let Some(h) = self.conns.get(&key).and_then(|c| c.handshake.as_ref()) {
                    q.push(dst, Owner::Handshake, h.initiator.initiation(), 1);
                }
            }
        }
        for key in failed {
            if let Some(reason) = self
                .conns
                .get(&key)
                .and_then(|c| c.redial.as_ref())
                .and_then(|r| r.reason)
            {
                tracing::warn!("gave up reconnecting to the peer");
                self.cancel_redial(key, reason);
                continue;
            }
            if let Some(mut c) = self.conns.remove(&key) {
                self.forget(&c);
                if let Some(h) = c.handshake.take() {
                    let _ = h.reply.send(Err(NetError::HandshakeTimeout));
                }
            }
            self.by_index.retain(|_, k| *k != key);
        }
    }

    /// Queue a handshake datagram for the next flush.
    pub(super) fn send_raw(&mut self, iface: usize, dst: SocketAddr, bytes: &[u8]) {
        if let Some(q) = self.tx.get_mut(iface) {
            q.push(dst, Owner::Handshake, bytes, 1);
        }
    }
}
