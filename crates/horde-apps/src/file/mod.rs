//! Carrying a file or a pipe over every channel (`send --file`, `recv --out`): the
//! messages, the source and the sink, the receiver's resume file, and the two ends.
//!
//! An ack in Horde says an ADU reached the receiving host, not that the receiving
//! application wrote it; a receiver killed then loses what was acked and unwritten. So
//! the sender keeps every piece until the receiver confirms it written and flushed, and
//! a restarted receiver (the same `--out`) says from its resume file where to go on.

mod books;
pub mod recv;
pub mod resume;
pub mod send;
pub mod sink;
pub mod source;
pub mod wire;
