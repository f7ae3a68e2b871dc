//! `horde keygen`: a static X25519 key pair.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use horde_crypto::Keypair;

#[derive(clap::Args)]
pub struct Args {
    /// Write the key pair to this new file, created with mode 0600 (its directory, if
    /// missing, with mode 0700), instead of stdout; the public key is printed on stdout
    /// either way. Keep keys out of repositories, e.g. in /etc/horde/ or
    /// $XDG_CONFIG_HOME/horde/.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let kp = Keypair::generate();
    let text = kp.to_file_string();
    match &args.out {
        Some(path) => {
            anyhow::ensure!(
                !path.exists(),
                "{} exists; refusing to overwrite a key",
                path.display()
            );
            if let Some(repo) = git_work_tree(path) {
                eprintln!(
                    "warning: {} is inside the git working tree {}: a private key there is \
                     easily committed or copied with the code; keep keys in /etc/horde/ or \
                     $XDG_CONFIG_HOME/horde/",
                    path.display(),
                    repo.display()
                );
            }
            create_parent(path)?;
            let mut f =
                open_private(path).with_context(|| format!("creating {}", path.display()))?;
            f.write_all(text.as_bytes())?;
            println!("{}", kp.public());
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The private key file, created with mode 0600 so that it is never readable by others,
/// not even between its creation and a later chmod.
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// The key's directory, if it does not exist yet, made private (0700) like the key.
fn create_parent(path: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.exists() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the directory {}", dir.display()))
}

/// The top of the git working tree `path` would be written in: the nearest directory
/// above it holding a `.git` (a directory, or a file in a linked worktree).
fn git_work_tree(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    absolute
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_tree_is_found_above_the_key_and_only_there() {
        let root = std::env::temp_dir().join(format!("horde-keygen-{}", std::process::id()));
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("configs")).unwrap();
        assert_eq!(
            git_work_tree(&repo.join("configs/a.key")),
            Some(repo.clone())
        );
        assert_eq!(git_work_tree(&repo.join("a.key")), Some(repo.clone()));
        // A directory that does not exist yet still counts as inside.
        assert_eq!(
            git_work_tree(&repo.join("new/dir/a.key")),
            Some(repo.clone())
        );
        std::fs::create_dir_all(root.join("etc")).unwrap();
        assert_eq!(git_work_tree(&root.join("etc/a.key")), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
