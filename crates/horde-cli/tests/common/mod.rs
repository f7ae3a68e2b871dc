//! What the end-to-end tests of the `horde` binary share: running it and reading its output.

// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `horde` with `args` in the test's working directory and waits for it.
pub fn horde(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .output()
        .expect("run horde")
}

/// Runs `horde` with `args` from the repository root, where `scenarios/` and `traces/` are.
pub fn horde_in_repo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run horde")
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A process's stdout or stderr as text, for assertions and failure messages.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
