//! What `send --file` reads: a file or standard input, read on a thread of its own (a
//! pipe blocks), cut into pieces as it comes and hashed in order.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use bytes::Bytes;
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;

use super::wire::Digest;

/// Batches of pieces the reader may be ahead of the sender.
const BATCHES_AHEAD: usize = 8;
/// Pieces per read: a file is read in blocks this many pieces long.
const PIECES_PER_READ: usize = 200;

/// What the reader hands on.
pub enum Reading {
    /// The next pieces, in order.
    Pieces(Vec<Bytes>),
    /// The end: the length read and its SHA-256.
    End { total: u64, sha256: Digest },
    /// Reading failed.
    Failed(String),
}

/// The source named on the command line: `-` is standard input.
pub struct Source {
    reader: Box<dyn Read + Send>,
    name: String,
}

impl Source {
    /// Open `path` (or standard input for `-`) now, so that a missing or unreadable
    /// file is an error before any connection is made.
    pub fn open(path: &Path) -> Result<Self> {
        if path == Path::new("-") {
            return Ok(Self {
                reader: Box::new(std::io::stdin()),
                name: "standard input".into(),
            });
        }
        let name = path.display().to_string();
        let meta =
            std::fs::metadata(path).with_context(|| format!("--file {name}: cannot read it"))?;
        anyhow::ensure!(!meta.is_dir(), "--file {name}: is a directory, not a file");
        let file =
            std::fs::File::open(path).with_context(|| format!("--file {name}: cannot open it"))?;
        Ok(Self {
            reader: Box::new(file),
            name,
        })
    }

    /// What the source is, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Read on a thread of its own, in pieces of at most `piece` bytes; the receiver
    /// ends after [`Reading::End`] or [`Reading::Failed`].
    pub fn spawn(self, piece: usize) -> mpsc::Receiver<Reading> {
        let (tx, rx) = mpsc::channel(BATCHES_AHEAD);
        std::thread::Builder::new()
            .name("horde-file-read".into())
            .spawn(move || read_all(self, piece, &tx))
            .expect("spawn the file reader");
        rx
    }
}

fn read_all(mut src: Source, piece: usize, tx: &mpsc::Sender<Reading>) {
    let mut hash = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; piece * PIECES_PER_READ];
    loop {
        // A read returns what is there: a pipe's pieces go out as they come, not once
        // a block is full.
        let n = match src.reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.blocking_send(Reading::Failed(format!("reading {}: {e}", src.name)));
                return;
            }
        };
        hash.update(&buf[..n]);
        total += n as u64;
        let pieces = buf[..n].chunks(piece).map(Bytes::copy_from_slice).collect();
        if tx.blocking_send(Reading::Pieces(pieces)).is_err() {
            return; // the sender stopped
        }
    }
    let _ = tx.blocking_send(Reading::End {
        total,
        sha256: hash.finalize().into(),
    });
}
