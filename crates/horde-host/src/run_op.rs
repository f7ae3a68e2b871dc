//! The application's operations on one connection, applied to its session (or, while a
//! persistent connection reconnects, to the ended session that keeps its streams).

use std::collections::BTreeMap;
use std::time::Duration;

use horde_proto::{ChannelId, CloseReason, Session, SessionError};

use crate::config::ChannelTarget;
use crate::conn::ConnState;
use crate::ops::{Answer, ConnOp};
use crate::{ChannelStatus, Host, HostError, InterfaceState};

impl Host {
    /// Apply one operation to connection `key`. An operation on a connection that is
    /// gone, or not up yet, is dropped with its reply.
    pub fn handle_command(&mut self, now: Duration, key: u64, op: ConnOp) {
        let Some(conn) = self.conns.get_mut(&key) else {
            return;
        };
        // The keys live in the secure layer, not in the protocol session; their age
        // counts to now, not to the last time the connection was walked.
        let op = match op {
            ConnOp::Keys(reply) => {
                let crypto = match &mut conn.state {
                    ConnState::AwaitingHello { crypto } | ConnState::Established { crypto, .. } => {
                        crypto.tick(now);
                        Some(crypto.key_status())
                    }
                    _ => None,
                };
                reply(crypto);
                return;
            }
            op => op,
        };
        self.touched.touch(key);
        let redialing = matches!(conn.state, ConnState::Redialing { .. });
        if redialing && matches!(op, ConnOp::Close) {
            self.end_redial(key, CloseReason::LocalClose);
            return;
        }
        let session = match &mut conn.state {
            ConnState::Established { session, .. } => session,
            ConnState::Redialing { old, .. } => old,
            _ => return,
        };
        let mut parts = Parts {
            waiters: &mut conn.waiters,
            targets: &mut conn.targets,
            interfaces: &self.interfaces,
        };
        parts.apply(session, op, now);
        if redialing {
            // Its nacks (a queue overflowing while the peer is away) go out now.
            conn.drain_events(key, &mut self.events);
        }
    }
}

/// What an operation may touch besides the session.
struct Parts<'a> {
    waiters: &'a mut Vec<(u32, Answer<()>)>,
    targets: &'a mut BTreeMap<ChannelId, ChannelTarget>,
    interfaces: &'a [InterfaceState],
}

impl Parts<'_> {
    fn apply(&mut self, p: &mut Session, op: ConnOp, now: Duration) {
        match op {
            ConnOp::OpenStream(id, cfg, r) => r(p.open_stream(id, cfg).map_err(Into::into)),
            ConnOp::Send {
                stream,
                payload,
                fields,
                reply,
            } => {
                let res = p.send_adu(now, stream, payload, fields);
                match reply {
                    Some(r) => r(res.map_err(Into::into)),
                    None => match res {
                        // The application hears the end as an event; an ADU offered
                        // before it did is its own to account (never sent), and one
                        // line per ADU would flood the log.
                        Err(SessionError::Closed) => {
                            tracing::debug!(stream, "ADU offered after the session ended")
                        }
                        Err(e) => tracing::warn!(stream, error = %e, "ADU rejected"),
                        Ok(_) => {}
                    },
                }
            }
            ConnOp::SendBatch {
                stream,
                payloads,
                fields,
                reply,
            } => reply(
                payloads
                    .into_iter()
                    .map(|payload| {
                        p.send_adu(now, stream, payload, fields.clone())
                            .map_err(Into::into)
                    })
                    .collect(),
            ),
            ConnOp::SetField(adu, name, value) => {
                // Fire and forget: an ADU that has left the queue keeps its fields.
                let _ = p.set_adu_field(adu, &name, value);
            }
            ConnOp::Remove(adu, r) => r(p.remove_adu(adu).is_ok()),
            ConnOp::SetMaxRate(stream, kbps, r) => {
                r(p.set_max_rate(stream, kbps).map_err(Into::into))
            }
            ConnOp::Writable(stream, r) => match p.writable(stream) {
                _ if p.is_closed() && !p.successor_expected() => {
                    r(Err(SessionError::Closed.into()))
                }
                Ok(true) => r(Ok(())),
                Ok(false) => self.waiters.push((stream, r)),
                Err(e) => r(Err(e.into())),
            },
            ConnOp::Inject(o, r) => r(p.inject_objective(o)),
            ConnOp::RemoveObjective(id) => {
                let _ = p.remove_objective(id);
            }
            ConnOp::LatencyModes(r) => r(p.latency_modes()),
            ConnOp::Stats(r) => r(p.stats()),
            ConnOp::Recovery(r) => r(p.recovery_totals()),
            ConnOp::Channels(r) => r(p.channels().iter().map(ChannelStatus::of).collect()),
            // Answered before the session is reached.
            ConnOp::Keys(_) => {}
            ConnOp::AddChannel(target, r) => {
                let open = self.interfaces.get(target.interface) == Some(&InterfaceState::Open);
                let res = if open {
                    p.add_channel(now, target.spec()).map_err(Into::into)
                } else {
                    Err(HostError::NoInterface(target.interface))
                };
                if let Ok(id) = res {
                    self.targets.insert(id, target);
                }
                r(res)
            }
            ConnOp::RemoveChannel(id) => {
                let _ = p.remove_channel(now, id);
                self.targets.remove(&id);
            }
            ConnOp::Close => p.close(now),
        }
    }
}
