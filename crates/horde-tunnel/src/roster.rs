//! The server's clients while it runs: each one's key, prefixes, live session and ingress
//! queue; the table from tunnel prefixes to clients; and what a reload changes in them.
//! A client is known by its key. A reload adds the keys that are new (they may connect
//! at once), takes off the keys that are gone (refused from then on, their sessions
//! closed), and updates the name and prefixes of the rest without touching their
//! sessions.

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::Result;
use horde_crypto::PublicKey;
use horde_net::{ConnectionHandle, Host};
use horde_qdisc::QdiscKind;
use tokio::task::AbortHandle;

use crate::counters::Counters;
use crate::ingress::Ingress;
use crate::server::Client;
use crate::PrefixTable;

/// One client in the roster.
pub(crate) struct Entry {
    pub(crate) client: Client,
    /// Its live session: the number it was attached with, and its handle.
    session: Option<(u64, ConnectionHandle)>,
    /// Its ingress queue, when the server runs a discipline there.
    ingress: Option<Arc<Ingress>>,
    /// The task that feeds its current session from the ingress queue.
    pump: Option<AbortHandle>,
    /// Taken off by a reload: its key is refused, its prefixes route nowhere. The entry
    /// stays so that indices held by running tasks stay valid.
    removed: bool,
}

/// Every client the server has served since it started, by index.
pub(crate) struct Roster {
    pub(crate) clients: Vec<Entry>,
    table: PrefixTable<usize>,
    qdisc: Option<QdiscKind>,
    queue_bytes: u64,
    /// Numbers sessions as they attach, so that a session that ended does not detach
    /// its successor.
    attached: u64,
}

impl Roster {
    /// The clients of the server's file.
    pub(crate) fn new(
        clients: Vec<Client>,
        qdisc: Option<QdiscKind>,
        queue_bytes: u64,
    ) -> Result<Self> {
        let mut roster = Self {
            clients: Vec::new(),
            table: PrefixTable::default(),
            qdisc,
            queue_bytes,
            attached: 0,
        };
        for c in clients {
            roster.push(c)?;
        }
        roster.rebuild_table();
        Ok(roster)
    }

    fn push(&mut self, client: Client) -> Result<()> {
        let ingress = self
            .qdisc
            .map(|kind| Ingress::new(kind, self.queue_bytes))
            .transpose()?;
        self.clients.push(Entry {
            client,
            session: None,
            ingress,
            pump: None,
            removed: false,
        });
        Ok(())
    }

    fn rebuild_table(&mut self) {
        self.table = PrefixTable::default();
        for (i, e) in self.clients.iter().enumerate().filter(|(_, e)| !e.removed) {
            for p in &e.client.prefixes {
                self.table.insert(*p, i);
            }
        }
    }

    /// The client with key `key`, if it is served.
    pub(crate) fn find(&self, key: &PublicKey) -> Option<usize> {
        self.clients
            .iter()
            .position(|e| !e.removed && e.client.key == *key)
    }

    /// Where a packet for `dst` goes: the session of the client whose prefix holds it
    /// (longest match), and that client's ingress queue if any.
    pub(crate) fn route(&self, dst: IpAddr) -> Option<(ConnectionHandle, Option<Arc<Ingress>>)> {
        let e = &self.clients[*self.table.lookup(dst)?];
        let (_, handle) = e.session.as_ref()?;
        Some((handle.clone(), e.ingress.clone()))
    }

    /// Client `i` has a new session; returns the number to [`detach`](Self::detach) it with.
    pub(crate) fn attach(
        &mut self,
        i: usize,
        handle: ConnectionHandle,
        counters: &Arc<Counters>,
    ) -> u64 {
        self.attached += 1;
        let e = &mut self.clients[i];
        if let Some(ingress) = &e.ingress {
            let pump = tokio::spawn(ingress.clone().pump(handle.clone(), counters.clone()));
            if let Some(old) = e.pump.replace(pump.abort_handle()) {
                old.abort();
            }
        }
        e.session = Some((self.attached, handle));
        self.attached
    }

    /// The session attached as `number` to client `i` has ended.
    pub(crate) fn detach(&mut self, i: usize, number: u64) {
        let e = &mut self.clients[i];
        if e.session.as_ref().is_some_and(|(n, _)| *n == number) {
            e.session = None;
        }
    }

    /// Make the served clients those of `wanted`; returns a line for the log.
    pub(crate) fn reload(&mut self, wanted: Vec<Client>, host: &Host) -> Result<String> {
        let mut removed = Vec::new();
        for e in self.clients.iter_mut().filter(|e| !e.removed) {
            if wanted.iter().any(|w| w.key == e.client.key) {
                continue;
            }
            e.removed = true;
            host.revoke_peer(e.client.key);
            if let Some((_, handle)) = e.session.take() {
                let _ = handle.close();
            }
            if let Some(pump) = e.pump.take() {
                pump.abort();
            }
            removed.push(e.client.name.clone());
        }
        let (mut added, mut changed) = (Vec::new(), Vec::new());
        for w in wanted {
            match self.find(&w.key) {
                Some(i) => {
                    let e = &mut self.clients[i].client;
                    if e.name != w.name || e.prefixes != w.prefixes {
                        changed.push(w.name.clone());
                        *e = w;
                    }
                }
                None => {
                    host.allow_peer(w.key);
                    added.push(w.name.clone());
                    self.push(w)?;
                }
            }
        }
        self.rebuild_table();
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        Ok(format!(
            "reloaded: clients added: {}; removed: {}; changed: {}",
            list(&added),
            list(&removed),
            list(&changed)
        ))
    }

    /// The run is ending: stop feeding sessions.
    pub(crate) fn stop_pumps(&mut self) {
        for pump in self.clients.iter_mut().filter_map(|e| e.pump.take()) {
            pump.abort();
        }
    }

    /// Each served client's name and whether it has a session.
    pub(crate) fn connected(&self) -> Vec<(String, bool)> {
        self.clients
            .iter()
            .filter(|e| !e.removed)
            .map(|e| (e.client.name.clone(), e.session.is_some()))
            .collect()
    }
}
