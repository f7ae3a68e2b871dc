//! A client's channels while it runs, and what a reload changes in them. A channel is
//! known by its name (`ch{position}` when it has none): a new name is added over an
//! interface of its own, a name that is gone is removed with its interface, and an entry
//! whose fields changed is replaced. The session goes on throughout.

use horde_net::{ConnectionHandle, Host};
use horde_proto::AckFrequency;

use crate::config::ClientChannel;

/// One channel as it runs: its name, its entry, and the host interface it sends from.
struct Live {
    label: String,
    entry: ClientChannel,
    interface: usize,
}

/// The channels of a running client.
pub(crate) struct LiveChannels {
    live: Vec<Live>,
    acks: AckFrequency,
}

impl LiveChannels {
    /// The channels the client started with: entry `i` on interface `i`.
    pub(crate) fn new(channels: &[ClientChannel], acks: AckFrequency) -> Self {
        let live = channels
            .iter()
            .enumerate()
            .map(|(i, entry)| Live {
                label: entry.label(i),
                entry: entry.clone(),
                interface: i,
            })
            .collect();
        Self { live, acks }
    }

    /// Make the running channels those of `wanted`; returns a line for the log.
    pub(crate) async fn apply(
        &mut self,
        host: &Host,
        conn: &ConnectionHandle,
        wanted: Vec<ClientChannel>,
    ) -> String {
        let wanted: Vec<(String, ClientChannel)> = wanted
            .into_iter()
            .enumerate()
            .map(|(i, c)| (c.label(i), c))
            .collect();
        let mut removed = Vec::new();
        self.live.retain(|l| {
            let keep = wanted.iter().any(|(n, c)| *n == l.label && *c == l.entry);
            if !keep {
                host.remove_interface(l.interface);
                removed.push(l.label.clone());
            }
            keep
        });
        let mut added = Vec::new();
        let mut failed = Vec::new();
        for (label, entry) in wanted {
            if self.live.iter().any(|l| l.label == label) {
                continue;
            }
            match self.add(host, conn, &entry).await {
                Ok(interface) => {
                    added.push(label.clone());
                    self.live.push(Live {
                        label,
                        entry,
                        interface,
                    });
                }
                Err(e) => failed.push(format!("{label} ({e})")),
            }
        }
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let mut line = format!(
            "reloaded: channels added: {}; removed: {}",
            list(&added),
            list(&removed)
        );
        if !failed.is_empty() {
            line.push_str(&format!("; not added: {}", failed.join(", ")));
        }
        line
    }

    /// Bring up `entry`'s interface and a channel over it; the interface again goes if
    /// the channel cannot be added.
    async fn add(
        &self,
        host: &Host,
        conn: &ConnectionHandle,
        entry: &ClientChannel,
    ) -> Result<usize, horde_net::NetError> {
        let (interface, _) = host.add_interface(entry.interface()).await?;
        let mut target = entry.target(interface);
        target.config.acks = self.acks;
        if let Err(e) = conn.add_channel(target).await {
            host.remove_interface(interface);
            return Err(e);
        }
        Ok(interface)
    }
}
