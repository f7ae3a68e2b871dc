//! Running the emulator in the foreground: periodic stats until a duration passes or
//! Ctrl-C (SIGINT) arrives. This is what `horde emu CONFIG` calls.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::config::EmulatorConfig;
use crate::emulator::Emulator;
use crate::error::EmuError;
use crate::stats::Stats;
use crate::sys::SigintGuard;

/// Run `config`, printing a stats table to stdout every `report_every`, until `duration`
/// has passed (forever when `None`) or Ctrl-C. Returns the final stats.
pub fn run_until(
    config: &EmulatorConfig,
    duration: Option<Duration>,
    report_every: Duration,
) -> Result<Stats, EmuError> {
    run_until_with(config, duration, report_every, &mut std::io::stdout())
}

/// [`run_until`] writing its reports to `out`.
pub fn run_until_with(
    config: &EmulatorConfig,
    duration: Option<Duration>,
    report_every: Duration,
    out: &mut dyn Write,
) -> Result<Stats, EmuError> {
    let sigint = SigintGuard::install().map_err(|e| EmuError::os("sigaction", e))?;
    let emu = Emulator::start(config)?;
    for name in emu.channels() {
        let (client, server) = (
            emu.client_addr(name).expect("configured channel"),
            emu.server_side_addr(name).expect("configured channel"),
        );
        let _ = writeln!(
            out,
            "channel {name}: clients send to {client}, relayed from {server}"
        );
    }
    let started = Instant::now();
    let report_every = report_every.max(Duration::from_millis(10));
    let mut next_report = started + report_every;
    loop {
        let now = Instant::now();
        let end = duration.map(|d| started + d);
        if sigint.interrupted() || end.is_some_and(|e| now >= e) {
            break;
        }
        if now >= next_report {
            let _ = writeln!(out, "{}", emu.stats());
            next_report += report_every;
        }
        let wake = end.map_or(next_report, |e| e.min(next_report));
        std::thread::sleep(
            wake.saturating_duration_since(now)
                .min(Duration::from_millis(50)),
        );
    }
    let stats = emu.shutdown();
    let _ = writeln!(out, "{stats}");
    Ok(stats)
}
