//! Messages from the command line: the message workload `horde send` runs when its file
//! declares `[[messages]]` ([`send`]), the header each message starts with ([`header`]),
//! and what `horde recv` counts of the messages it receives ([`recv`]).

pub mod header;
pub mod recv;
pub mod send;
