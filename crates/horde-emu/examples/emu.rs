//! Run an emulator configuration in the foreground (what `horde emu` does):
//! `cargo run -p horde-emu --example emu -- CONFIG [SECONDS]`.

use std::path::PathBuf;
use std::time::Duration;

use horde_emu::{run_until, EmulatorConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: emu CONFIG [SECONDS]");
        std::process::exit(2);
    };
    let duration = args
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .map(Duration::from_secs_f64);
    let result = EmulatorConfig::from_file(&path)
        .and_then(|config| run_until(&config, duration, Duration::from_secs(1)));
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
