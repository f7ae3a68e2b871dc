//! The receiver's resume file beside `--out PATH`: which transfer it writes and how many
//! bytes from the start are written and flushed. A receiver restarted with the same
//! `--out` reads it and tells the sender where to go on.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The resume file's first line, naming its format.
const HEADER: &str = "horde file transfer resume state v1";

/// Where a transfer stands on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeState {
    pub transfer: u64,
    /// Every byte below this is written and flushed.
    pub written: u64,
}

/// The resume file of the output `out`.
pub fn path_for(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".horde-resume");
    PathBuf::from(name)
}

/// The state in `path`: `Ok(None)` if there is no such file; an error names a file that
/// is not one of ours.
pub fn load(path: &Path) -> Result<Option<ResumeState>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    parse(&text).map(Some).with_context(|| {
        format!(
            "{}: not a resume file; remove it to start over",
            path.display()
        )
    })
}

fn parse(text: &str) -> Result<ResumeState> {
    let mut lines = text.lines();
    anyhow::ensure!(
        lines.next() == Some(HEADER),
        "its first line is not `{HEADER}`"
    );
    let mut field = |name: &str| -> Result<u64> {
        let line = lines.next().unwrap_or_default();
        let value = line
            .strip_prefix(name)
            .and_then(|v| v.strip_prefix(' '))
            .with_context(|| format!("expected `{name} N`, got `{line}`"))?;
        value
            .parse()
            .with_context(|| format!("`{name}`: not a number: `{value}`"))
    };
    Ok(ResumeState {
        transfer: field("transfer")?,
        written: field("written")?,
    })
}

/// Write `state` to `path` durably: a new file flushed, then renamed over the old one,
/// so that a crash leaves the old state or the new, never half of one.
pub fn store(path: &Path, state: ResumeState) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    write!(
        f,
        "{HEADER}\ntransfer {}\nwritten {}\n",
        state.transfer, state.written
    )?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Remove the resume file of a finished transfer.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_state_loads_back_and_a_foreign_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("horde-resume-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = path_for(&dir.join("out.bin"));
        assert!(path.ends_with("out.bin.horde-resume"));
        assert_eq!(load(&path).unwrap(), None);
        let s = ResumeState {
            transfer: u64::MAX,
            written: 123_456,
        };
        store(&path, s).unwrap();
        assert_eq!(load(&path).unwrap(), Some(s));
        std::fs::write(&path, "hello\n").unwrap();
        let e = format!("{:#}", load(&path).unwrap_err());
        assert!(e.contains("not a resume file"), "{e}");
        std::fs::write(&path, format!("{HEADER}\ntransfer 1\nwritten x\n")).unwrap();
        let e = format!("{:#}", load(&path).unwrap_err());
        assert!(e.contains("not a number"), "{e}");
        remove(&path);
        assert_eq!(load(&path).unwrap(), None);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
