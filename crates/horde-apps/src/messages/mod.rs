//! Messages from the command line: the message workload `horde send` runs when its file
//! declares `[[messages]]` ([`send`]) on the endpoint it opens ([`conn`]), the header
//! each message starts with ([`header`]), and what `horde recv` counts of the messages it
//! receives ([`recv`]).

pub mod conn;
pub mod header;
pub mod recv;
pub mod send;
