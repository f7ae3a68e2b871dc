//! Files read from a path the user gives, with a bound on their size.
//!
//! A path may name anything: a file far larger than its kind ever is, or a device such
//! as `/dev/zero` that never ends. Every input is therefore read through
//! [`Read::take`] with a limit per kind of file, generous for real files but finite, and
//! a larger one is an error that names the kind and the limit (the caller names the
//! file, as it does for every other read error).

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// A kind of input file and the most bytes Horde reads of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// What the file is, in messages: "key file", "configuration file", ...
    pub name: &'static str,
    /// The largest size accepted, in bytes.
    pub max_bytes: u64,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

impl Kind {
    /// A key file from `horde keygen`: about 150 bytes.
    pub const KEY: Kind = Kind::new("key file", 4 * KIB);
    /// A TOML file of `send`, `recv`, `tunnel`, the emulator or the experiments: a few
    /// kB even with hundreds of entries.
    pub const CONFIG: Kind = Kind::new("configuration file", MIB);
    /// A hose objective file: a few lines.
    pub const OBJECTIVE: Kind = Kind::new("objective file", MIB);
    /// A simulator scenario: a few kB.
    pub const SCENARIO: Kind = Kind::new("scenario file", MIB);
    /// A link trace in Mahimahi format: one line per delivery opportunity. The largest
    /// shipped is 0.3 MB; an hour at 100 Mbit/s of 1500-byte opportunities is about
    /// 200 MB, so this leaves room for long recordings of fast links.
    pub const LINK_TRACE: Kind = Kind::new("link trace", 256 * MIB);
    /// A status file that `send`, `recv` or `tunnel` keep current: a few kB per peer.
    pub const STATUS: Kind = Kind::new("status file", 16 * MIB);
    /// A measurement log or table given to `horde analyze`.
    pub const MEASUREMENTS: Kind = Kind::new("measurement file", 256 * MIB);
    /// A packet capture given to `horde analyze pcap`, read whole.
    pub const CAPTURE: Kind = Kind::new("packet capture", GIB);
    /// Data piped to a command on its standard input (e.g. a trace to convert).
    pub const STDIN: Kind = Kind::new("standard input", 256 * MIB);

    /// A kind named `name` read up to `max_bytes`.
    pub const fn new(name: &'static str, max_bytes: u64) -> Kind {
        Kind { name, max_bytes }
    }

    /// The error for an input larger than this kind allows.
    fn too_large(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "{} too large: more than the limit of {}",
                self.name,
                size(self.max_bytes)
            ),
        )
    }
}

/// `bytes` in the largest binary unit that divides it, as limits are written.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= GIB && b % GIB == 0 => format!("{} GiB", b / GIB),
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= KIB && b % KIB == 0 => format!("{} KiB", b / KIB),
        b => format!("{b} bytes"),
    }
}

/// The whole of the file at `path`, if it holds at most `kind.max_bytes` bytes.
pub fn read(path: &Path, kind: Kind) -> io::Result<Vec<u8>> {
    read_file(&mut File::open(path)?, kind)
}

/// The file at `path` as UTF-8 text, if it holds at most `kind.max_bytes` bytes.
pub fn read_to_string(path: &Path, kind: Kind) -> io::Result<String> {
    text(read(path, kind)?)
}

/// The rest of an open file, if at most `kind.max_bytes` bytes. A regular file whose
/// size is already past the limit is refused without reading it.
pub fn read_file(file: &mut File, kind: Kind) -> io::Result<Vec<u8>> {
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > kind.max_bytes {
        return Err(kind.too_large());
    }
    read_from(file, kind)
}

/// Everything `reader` gives until its end, if at most `kind.max_bytes` bytes: one
/// byte past the limit is read, to tell a file of exactly the limit from a larger one.
pub fn read_from(reader: impl Read, kind: Kind) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(kind.max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > kind.max_bytes {
        return Err(kind.too_large());
    }
    Ok(bytes)
}

/// `bytes` as text, with the error `std::fs::read_to_string` gives.
fn text(bytes: Vec<u8>) -> io::Result<String> {
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const TINY: Kind = Kind::new("test file", 10);

    fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("horde-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
        path
    }

    #[test]
    fn a_file_up_to_the_limit_is_read_whole() {
        let path = temp_file("exact", b"0123456789");
        assert_eq!(read(&path, TINY).unwrap(), b"0123456789");
        assert_eq!(read_to_string(&path, TINY).unwrap(), "0123456789");
        let path = temp_file("empty", b"");
        assert_eq!(read(&path, TINY).unwrap(), b"");
    }

    #[test]
    fn a_file_one_byte_past_the_limit_is_refused_with_its_kind_and_limit() {
        let path = temp_file("over", b"0123456789a");
        let e = read(&path, TINY).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            e.to_string(),
            "test file too large: more than the limit of 10 bytes"
        );
        assert_eq!(read_to_string(&path, Kind::KEY).unwrap(), "0123456789a");
        let e = read_to_string(&path, Kind::new("key file", 4)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "key file too large: more than the limit of 4 bytes"
        );
    }

    #[test]
    fn a_stream_that_never_ends_is_cut_one_byte_past_the_limit() {
        // `io::repeat` never ends, like /dev/zero: only the limit stops the read.
        let e = read_from(io::repeat(0), Kind::KEY).unwrap_err();
        assert_eq!(
            e.to_string(),
            "key file too large: more than the limit of 4 KiB"
        );
        let e = read(Path::new("/dev/zero"), Kind::CONFIG).unwrap_err();
        assert_eq!(
            e.to_string(),
            "configuration file too large: more than the limit of 1 MiB"
        );
        // A stream that ends within the limit is read whole.
        assert_eq!(read_from(&b"abc"[..], TINY).unwrap(), b"abc");
    }

    #[test]
    fn text_must_be_utf8_and_missing_files_keep_their_error() {
        let path = temp_file("latin1", b"caf\xe9");
        let e = read_to_string(&path, TINY).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let e = read(Path::new("/nonexistent/horde.toml"), TINY).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn limits_are_written_in_the_largest_unit_that_divides_them() {
        assert_eq!(size(4096), "4 KiB");
        assert_eq!(size(1 << 20), "1 MiB");
        assert_eq!(size(3 << 30), "3 GiB");
        assert_eq!(size(1500), "1500 bytes");
        assert_eq!(size(1025 * 1024), "1025 KiB");
    }
}
