//! The packet logic of tunnel mode (whole IP traffic over a Horde connection): reading
//! and checking the IP headers of packets taken from a TUN device or received from a
//! peer, clamping the TCP MSS of SYNs to the tunnel MTU, and the server's table from
//! tunnel address prefixes to clients. No sockets and no devices here: the `horde
//! tunnel` command drives it.

pub mod ip;
pub mod mss;
pub mod prefix;

pub use ip::{parse, IpHeader, PacketError};
pub use mss::{clamp_mss, max_mss};
pub use prefix::{Prefix, PrefixError, PrefixTable};
