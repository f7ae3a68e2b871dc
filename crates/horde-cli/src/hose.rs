//! `horde hose check`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Parse and type-check hose files. Prints FILE:line:col: message for every problem
    /// and exits 2 if there is any, 0 if all files are valid.
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Check { files } => {
            let mut bad = 0;
            for f in &files {
                let problems = horde_hose::check_file(f);
                if problems.is_empty() {
                    println!("{}: ok", f.display());
                } else {
                    bad += 1;
                    for p in problems {
                        eprintln!("{p}");
                    }
                }
            }
            Ok(if bad == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
    }
}
