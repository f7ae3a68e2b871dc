//! `horde keygen`: a static X25519 key pair.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use horde_crypto::Keypair;

#[derive(clap::Args)]
pub struct Args {
    /// Write the key pair to this file (mode 0600) instead of stdout; the public key is
    /// printed on stdout either way.
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
            let mut f =
                open_private(path).with_context(|| format!("creating {}", path.display()))?;
            f.write_all(text.as_bytes())?;
            println!("{}", kp.public());
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn open_private(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}
