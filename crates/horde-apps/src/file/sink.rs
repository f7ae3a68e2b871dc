//! Where `recv --out` writes: a file, each piece at its offset as it comes, or standard
//! output, in order, holding the pieces that arrive early. Either way the sink knows the
//! prefix written without a hole, which is what the receiver confirms.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use bytes::Bytes;
use sha2::{Digest as _, Sha256};

use super::wire::Digest;

pub enum Sink {
    File(FileSink),
    Pipe(PipeSink),
}

impl Sink {
    /// Open `path` for writing (creating it, keeping what is there for a resume), or
    /// standard output for `-`. A missing directory or an unwritable path is an error
    /// now, before any sender comes.
    pub fn open(path: &Path) -> Result<Sink> {
        if path == Path::new("-") {
            return Ok(Sink::Pipe(PipeSink::default()));
        }
        let name = path.display();
        if path.is_dir() {
            anyhow::bail!("--out {name}: is a directory; name a file in it");
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            anyhow::ensure!(
                parent.is_dir(),
                "--out {name}: the directory {} does not exist",
                parent.display()
            );
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("--out {name}: cannot open it for writing"))?;
        Ok(Sink::File(FileSink {
            file,
            path: path.to_path_buf(),
            prefix: 0,
            above: BTreeMap::new(),
        }))
    }

    /// Bytes written from the start without a hole.
    pub fn prefix(&self) -> u64 {
        match self {
            Sink::File(f) => f.prefix,
            Sink::Pipe(p) => p.prefix,
        }
    }

    /// Whether what was written can be taken up again by a new process.
    pub fn resumable(&self) -> bool {
        matches!(self, Sink::File(_))
    }

    /// Write `bytes` at `offset`. A piece below the prefix is already there.
    pub fn put(&mut self, offset: u64, bytes: Bytes) -> std::io::Result<()> {
        let end = offset + bytes.len() as u64;
        if end <= self.prefix() {
            return Ok(());
        }
        match self {
            Sink::File(f) => f.put(offset, &bytes),
            Sink::Pipe(p) => p.put(offset, bytes),
        }
    }

    /// Start over at zero (a new transfer): a file is emptied.
    pub fn reset(&mut self) -> std::io::Result<()> {
        match self {
            Sink::File(f) => {
                f.file.set_len(0)?;
                f.prefix = 0;
                f.above.clear();
            }
            Sink::Pipe(p) => *p = PipeSink::default(),
        }
        Ok(())
    }

    /// Take up a file whose first `written` bytes a previous receiver wrote and flushed.
    pub fn resume_at(&mut self, written: u64) {
        if let Sink::File(f) = self {
            f.prefix = written;
            f.above.clear();
        }
    }

    /// The file's length on disk (0 for a pipe).
    pub fn len_on_disk(&self) -> u64 {
        match self {
            Sink::File(f) => f.file.metadata().map_or(0, |m| m.len()),
            Sink::Pipe(_) => 0,
        }
    }

    /// Something that flushes what is written so far to its device, to run off the
    /// event loop. A pipe's bytes are flushed at once, since writing them to the pipe is
    /// all there is.
    pub fn flusher(&mut self) -> std::io::Result<Option<File>> {
        match self {
            Sink::File(f) => f.file.try_clone().map(Some),
            Sink::Pipe(_) => {
                std::io::stdout().lock().flush()?;
                Ok(None)
            }
        }
    }

    /// The output cut to `total` bytes and flushed, and the SHA-256 of what it holds: a
    /// file is read back from disk; a pipe's bytes were hashed as they were written.
    pub fn finish(&mut self, total: u64) -> std::io::Result<(u64, Digest)> {
        match self {
            Sink::File(f) => {
                f.file.set_len(total)?;
                f.file.sync_all()?;
                let mut hash = Sha256::new();
                let mut read = 0u64;
                let mut buf = vec![0u8; 1 << 20];
                let mut file = File::open(&f.path)?;
                loop {
                    let n = file.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    hash.update(&buf[..n]);
                    read += n as u64;
                }
                Ok((read, hash.finalize().into()))
            }
            Sink::Pipe(p) => {
                std::io::stdout().lock().flush()?;
                Ok((p.prefix, p.hash.clone().finalize().into()))
            }
        }
    }

    /// The output's path (none for a pipe).
    pub fn path(&self) -> Option<&PathBuf> {
        match self {
            Sink::File(f) => Some(&f.path),
            Sink::Pipe(_) => None,
        }
    }
}

/// A file written at offsets; `above` holds the written ranges past the prefix
/// (start to end), so the prefix moves on as holes fill.
pub struct FileSink {
    file: File,
    path: PathBuf,
    prefix: u64,
    above: BTreeMap<u64, u64>,
}

impl FileSink {
    fn put(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all_at(bytes, offset)?;
        let end = offset + bytes.len() as u64;
        let e = self.above.entry(offset).or_insert(end);
        *e = (*e).max(end);
        while let Some((&start, &end)) = self.above.first_key_value() {
            if start > self.prefix {
                break;
            }
            self.above.pop_first();
            self.prefix = self.prefix.max(end);
        }
        Ok(())
    }
}

/// Standard output, written in order; pieces that come early wait in `above` (the
/// sender keeps at most its window ahead of what was confirmed, so this is bounded).
#[derive(Default)]
pub struct PipeSink {
    prefix: u64,
    above: BTreeMap<u64, Bytes>,
    hash: Sha256,
}

impl PipeSink {
    fn put(&mut self, offset: u64, bytes: Bytes) -> std::io::Result<()> {
        self.above.entry(offset).or_insert(bytes);
        let mut out = std::io::stdout().lock();
        while let Some((&start, _)) = self.above.first_key_value() {
            if start > self.prefix {
                break;
            }
            let (_, b) = self.above.pop_first().expect("a first entry");
            let skip = (self.prefix - start) as usize;
            if skip < b.len() {
                out.write_all(&b[skip..])?;
                self.hash.update(&b[skip..]);
                self.prefix = start + b.len() as u64;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_prefix_moves_on_as_its_holes_fill() {
        let dir = std::env::temp_dir().join(format!("horde-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.bin");
        let mut sink = Sink::open(&path).unwrap();
        sink.put(4, Bytes::from_static(b"efgh")).unwrap();
        assert_eq!(sink.prefix(), 0);
        sink.put(8, Bytes::from_static(b"ij")).unwrap();
        sink.put(0, Bytes::from_static(b"abcd")).unwrap();
        assert_eq!(sink.prefix(), 10);
        sink.put(4, Bytes::from_static(b"efgh")).unwrap(); // a duplicate
        let (n, digest) = sink.finish(10).unwrap();
        assert_eq!(n, 10);
        assert_eq!(digest, <[u8; 32]>::from(Sha256::digest(b"abcdefghij")));
        assert_eq!(std::fs::read(&path).unwrap(), b"abcdefghij");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_output_in_a_missing_directory_or_a_directory_is_refused() {
        let e = Sink::open(Path::new("/nonexistent-horde-dir/out.bin"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = Sink::open(&std::env::temp_dir()).err().unwrap();
        assert!(e.to_string().contains("is a directory"), "{e}");
    }
}
