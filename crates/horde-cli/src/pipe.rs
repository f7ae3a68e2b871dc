//! Commands that only print: a reader that stops early (`horde demo | head`) ends them
//! quietly, as it ends `cat`, instead of making the next `println!` panic.

/// Restore SIGPIPE's default action (the Rust runtime ignores it, so a write to a closed
/// pipe fails and `println!` panics on the failure). Only for commands that use no
/// stream sockets: on TCP the signal would kill the process where an error is wanted.
pub fn end_quietly_when_stdout_closes() {
    horde_emu::sys::default_sigpipe();
}
