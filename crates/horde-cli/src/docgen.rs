//! `horde completions SHELL` and `horde man`: shell completions and man pages generated
//! from the command-line definitions, so they never drift from the binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

#[derive(clap::Args)]
pub struct ManArgs {
    /// Write horde.1 and one page per subcommand (horde-demo.1, ...) into this
    /// directory instead of printing horde.1.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn completions(args: CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = crate::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "horde", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

pub fn man(args: ManArgs) -> Result<ExitCode> {
    let cmd = crate::Cli::command();
    match &args.out {
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd).render(&mut out)?;
            out.flush()?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            write_pages(&cmd, dir)?;
            println!("wrote man pages to {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A page for `cmd` and, recursively, one per subcommand (`horde-trace-gen.1`).
fn write_pages(cmd: &clap::Command, dir: &Path) -> Result<()> {
    clap_mangen::generate_to(cmd.clone(), dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))
}
