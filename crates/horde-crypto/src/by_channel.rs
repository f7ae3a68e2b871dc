//! Per-channel state of one session, for the channels it has used: a short list
//! searched in order. A session uses a handful of the 256 channel numbers, and a server
//! holds thousands of sessions, so a table of all 256 per session (4 kB) is mostly zeros.

#[derive(Debug, Clone)]
pub(crate) struct ByChannel<T> {
    entries: Vec<(u8, T)>,
}

impl<T> Default for ByChannel<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<T: Default> ByChannel<T> {
    pub fn get(&self, channel: u8) -> Option<&T> {
        self.entries
            .iter()
            .find(|(c, _)| *c == channel)
            .map(|(_, v)| v)
    }

    /// The channel's entry, created at its default on first use.
    pub fn get_or_default(&mut self, channel: u8) -> &mut T {
        let i = match self.entries.iter().position(|(c, _)| *c == channel) {
            Some(i) => i,
            None => {
                self.entries.push((channel, T::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_channel_has_its_own_entry_made_on_first_use() {
        let mut m: ByChannel<u64> = ByChannel::default();
        assert_eq!(m.get(3), None);
        *m.get_or_default(3) += 5;
        *m.get_or_default(255) += 1;
        *m.get_or_default(3) += 2;
        assert_eq!((m.get(3), m.get(255), m.get(0)), (Some(&7), Some(&1), None));
        assert_eq!(m.entries.len(), 2);
    }
}
