//! The message layer: scheduling order, admission, early deadlines, cancellation at the
//! receiver, bandwidth notifications, and the one-fate rule, in virtual time.

mod admission;
mod early;
mod errors;
mod fates;
mod model;
mod notify;
mod order;
mod receiver;
mod startup;
