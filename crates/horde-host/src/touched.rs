//! The connections the host must look at again: those whose session something happened
//! to since the host last walked them for datagrams, and those whose events it has not
//! drained yet. Every entry point that reaches a session (a datagram, a command, a due
//! timer, an interface change) marks its connection, so that the transmit walk and the
//! event drain visit only these, in connection order, and an idle connection is not
//! visited at all.

use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub(crate) struct Touched {
    /// To walk for datagrams and settle (and to read its session's deadline again).
    pub transmit: BTreeSet<u64>,
    /// To drain of events.
    pub events: BTreeSet<u64>,
}

impl Touched {
    pub fn touch(&mut self, key: u64) {
        self.transmit.insert(key);
        self.events.insert(key);
    }

    /// A connection that is gone.
    pub fn forget(&mut self, key: u64) {
        self.transmit.remove(&key);
        self.events.remove(&key);
    }
}
