//! Horde's two applications, `send` and `recv`: the files that describe them and their
//! checks, the connection setup, the sender's loop over synthetic workloads or a
//! message workload ([`messages`]) and the
//! receiver's loop over any number of senders, and the transfer of a file or a pipe
//! ([`file`]). Each returns its report as data; the
//! command line prints it.

mod by_id;
pub mod config;
pub mod file;
pub mod hose;
pub mod inorder;
pub mod latency;
pub mod live;
pub mod messages;
pub mod payloads;
pub mod recent;
pub mod recv;
pub mod report;
pub mod send;
pub mod sender;
pub mod shared_conn;
pub mod stamp;

pub use config::{base_dir, public_key, read_key, seconds};
