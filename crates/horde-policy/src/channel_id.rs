//! [`ChannelId`]: the one name of a channel, from the wire through the session and the
//! scheduler to the application's events.

use std::fmt;

use thiserror::Error;

/// Identifies one channel (one path over one local interface) within a session. Both
/// ends use the same id for a channel: the client picks it, and every packet on the
/// channel carries it in a one-byte header field, so a session has at most
/// [`ChannelId::COUNT`] channels at once.
///
/// The raw byte is reached only where the id meets the wire (`u8::from(id)` when
/// encoding, [`ChannelId::new`] when decoding); everything else passes the id around
/// whole, and widens it losslessly (`usize::from(id)`) where it indexes a table. A
/// count or position becomes an id only through the checked `ChannelId::try_from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize)]
#[serde(transparent)]
pub struct ChannelId(u8);

impl ChannelId {
    /// How many distinct channel ids there are.
    pub const COUNT: usize = 256;

    /// The id whose channel byte is `raw`.
    pub const fn new(raw: u8) -> Self {
        Self(raw)
    }

    /// Every id in ascending order: where a new channel looks for the lowest free one.
    pub fn all() -> impl Iterator<Item = ChannelId> {
        (0..=u8::MAX).map(Self)
    }
}

/// A number that does not fit the channel field (at most [`ChannelId::COUNT`] channels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("channel {0} is out of range (ids are 0..=255)")]
pub struct ChannelIdOutOfRange(pub usize);

impl TryFrom<usize> for ChannelId {
    type Error = ChannelIdOutOfRange;

    /// The `n`-th channel of a list (a scenario's or a configuration's), checked.
    fn try_from(n: usize) -> Result<Self, Self::Error> {
        u8::try_from(n)
            .map(Self)
            .map_err(|_| ChannelIdOutOfRange(n))
    }
}

impl From<u8> for ChannelId {
    fn from(raw: u8) -> Self {
        Self(raw)
    }
}

impl From<ChannelId> for u8 {
    fn from(id: ChannelId) -> u8 {
        id.0
    }
}

impl From<ChannelId> for u16 {
    fn from(id: ChannelId) -> u16 {
        u16::from(id.0)
    }
}

impl From<ChannelId> for usize {
    fn from(id: ChannelId) -> usize {
        usize::from(id.0)
    }
}

impl From<ChannelId> for u32 {
    fn from(id: ChannelId) -> u32 {
        u32::from(id.0)
    }
}

impl From<ChannelId> for u64 {
    fn from(id: ChannelId) -> u64 {
        u64::from(id.0)
    }
}

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_are_checked_and_lossless() {
        assert_eq!(ChannelId::try_from(255usize).map(usize::from), Ok(255));
        assert_eq!(ChannelId::try_from(256usize), Err(ChannelIdOutOfRange(256)));
        assert_eq!(u8::from(ChannelId::new(7)), 7);
        assert_eq!(ChannelId::all().count(), ChannelId::COUNT);
        assert_eq!(ChannelId::new(3).to_string(), "3");
    }
}
