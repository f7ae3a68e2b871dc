//! The session the unit tests start from.

use std::net::SocketAddr;
use std::time::Duration;

use super::{Session, SessionConfig};
use crate::channel::ChannelConfig;
use crate::ChannelSpec;

/// A session with connection id `conn` to 127.0.0.1:9 over one default channel, its
/// handshake not yet answered.
pub(super) fn one_channel_session(conn: u64) -> Session {
    let remote: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let channels = vec![ChannelSpec {
        local: 0,
        remote,
        config: ChannelConfig::default(),
    }];
    Session::connect(
        SessionConfig::default(),
        conn,
        1,
        channels,
        vec![],
        Duration::ZERO,
    )
    .unwrap()
}
