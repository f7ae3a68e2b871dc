//! A fleet load generator: N simulated vehicles with three channels each, all in one
//! process, against a real Horde server process (`horde recv --server`) over real UDP
//! sockets on this machine. See `docs/fleet.md`.
//!
//! Each vehicle is a sans-IO [`horde_host::Host`] with its own key and one persistent
//! connection; its three channels send from three sockets of their own, bound to
//! distinct loopback addresses as three modems would have distinct addresses. One
//! thread drives every vehicle: an epoll set over all the sockets says which vehicle
//! has datagrams, and a deadline heap says which vehicle's timer is due, so nothing runs
//! for a vehicle that has nothing to do.

mod driver;
mod keys;
mod procstat;
mod report;
mod run;
mod server;
mod sockets;
mod vehicle;

pub use keys::vehicle_keypair;
pub use report::{jain_index, FleetReport};
pub use run::{run, FleetConfig};
pub use server::ServerCommand;
